"""The CUDA kernel's prelude: docs/IR.md's exact semantics as small device functions.

Each helper is emitted only when the kernel (or another emitted helper) names it, so NVRTC
never compiles unused code. Text only; this module must never walk a Program.
"""

from __future__ import annotations

import re

# The prelude: exact IR semantics (docs/IR.md) as small device functions, each emitted only
# when the kernel (or another emitted helper) names it, so NVRTC never compiles unused code
# (most of a small kernel's cold compile time was the whole prelude).
_PRELUDE: tuple[tuple[tuple[str, ...], str], ...] = (
    (('vy_f16', 'vy_h2f', 'vy_f2h', 'vy_d2h'), r"""
typedef unsigned short vy_f16;  // f16 kept as its bit pattern; converted with PTX cvt
__device__ __forceinline__ float vy_h2f(vy_f16 h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ vy_f16 vy_f2h(float f) {
  vy_f16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ vy_f16 vy_d2h(double d) {
  vy_f16 h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
"""),
    (('vy_pack', 'vy_vok'), r"""
// vectorised access of K consecutive elements (one 8/16-byte load or store): used only
// when all K are in bounds and the address is aligned to the whole vector
template <class T, int K> struct alignas(sizeof(T) * K) vy_pack { T v[K]; };
template <class T, int K> __device__ __forceinline__ bool vy_vok(const T* p, unsigned i,
                                                                 unsigned n) {
  return n >= (unsigned)K && i <= n - (unsigned)K &&
         ((unsigned long long)(p + i) & (unsigned long long)(sizeof(T) * K - 1)) == 0ull; }
"""),
    (('vy_imin', 'vy_imax'), r"""
template <class T> __device__ __forceinline__ T vy_imin(T a, T b) { return b < a ? b : a; }
template <class T> __device__ __forceinline__ T vy_imax(T a, T b) { return a < b ? b : a; }
"""),
    (('vy_sg_reduce', 'vy_sg_iscan', 'vy_sg_xscan'), r"""
// subgroups are warps (lane = local_index mod 32, every warp full: vyre.subgroups), combined
// with shuffles in docs/IR.md's fixed orders (so floats give the reference's bits); the
// combine is one of the vy_op_* functors (the IR's add / min / max / and / or / xor)
template <class T, class F> __device__ __forceinline__ T vy_sg_reduce(T v, F op) {
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
  return v; }
template <class T, class F> __device__ __forceinline__ T vy_sg_iscan(T v, unsigned lane, F op) {
#pragma unroll
  for (unsigned d = 1; d < 32u; d <<= 1) {
    T o = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v = op(o, v); }
  return v; }
template <class T, class F> __device__ __forceinline__ T vy_sg_xscan(T v, unsigned lane, F op,
                                                                  T ident) {
  T o = __shfl_up_sync(0xffffffffu, vy_sg_iscan(v, lane, op), 1);
  return lane == 0u ? ident : o; }
struct vy_op_add {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  __device__ __forceinline__ unsigned operator()(unsigned a, unsigned b) const { return a + b; }
  __device__ __forceinline__ int operator()(int a, int b) const {
    return (int)((unsigned)a + (unsigned)b); } };
struct vy_op_min {
  __device__ __forceinline__ float operator()(float a, float b) const { return fminf(a, b); }
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    return b < a ? b : a; } };
struct vy_op_max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    return a < b ? b : a; } };
struct vy_op_and { template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
  return a & b; } };
struct vy_op_or { template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
  return a | b; } };
struct vy_op_xor { template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
  return a ^ b; } };
"""),
)
PRELUDE_SLOT = "// @vyre-prelude@"  # replaced by the helpers the finished kernel uses
_WORD = re.compile(r"\bvy_[A-Za-z0-9_]+")


def prelude(code: str) -> str:
    """The prelude helpers `code` uses (directly or through another helper), in a fixed order."""
    used = set(_WORD.findall(code))
    chosen = [False] * len(_PRELUDE)
    changed = True
    while changed:  # helpers name other helpers (vy_hrem uses vy_f2h): close over them
        changed = False
        for i, (names, text) in enumerate(_PRELUDE):
            if not chosen[i] and used.intersection(names):
                chosen[i] = changed = True
                used.update(_WORD.findall(text))
    parts = [text.strip("\n") for (_, text), on in zip(_PRELUDE, chosen) if on]
    return "\n".join(["// ---- vyre prelude: the exact-semantics helpers this kernel uses ----",
                      *parts, "// ---- end of prelude ----", ""])
