"""The CUDA tensor-core form of vyre.programs.matmul_i8: CUDA C around PTX
`mma.sync.aligned.m16n8k32.row.col.s32.{s8,u8}.{s8,u8}.s32`, the same integers as the
library's Program (docs/IR.md's dot4: exact byte products, a 32-bit sum that wraps).

Why the result is exact: every product of two 8-bit values and every partial sum is an
integer, and the accumulation is modulo 2^32 in any order, so the order in which the tensor
cores add is irrelevant. PTX ISA, "Warp-level matrix multiply-accumulate instructions:
mma": for the integer types, saturation happens only with the optional `.satfinite`
qualifier (results clamped to the s32 limits); this kernel never asks for it, so the s32
accumulation wraps like the IR's add. (The wrap-edge test in tests/test_matmul_i8.py checks
it on a GPU.)

Layout (operands packed by `matmul_i8.pack_i8`: row-major words of four consecutive bytes
along K, each row padded with zero words to a multiple of 4 words): A is M x K4 words, B is
given transposed, N x K4 words (the `.col` operand: B's column n is a row of words), C is
M x N i32, row-major. A block of 256 threads computes a 128 x 128 tile of C; its 8 warps
are 2 x 4, each a 64 x 32 tile of 4 x 4 m16n8 fragments. K advances 16 words (64 bytes) a
step through 3 shared-memory stages filled by `cp.async` (16 bytes each, zero-filled past
the matrix edges), so global loads overlap the tensor-core work.

The fragments (PTX ISA, m16n8k32 with .s8/.u8: groupID g = lane / 4, t = lane % 4, in
32-bit words of four k-bytes): A regs (row g, word t), (g + 8, t), (g, t + 4), (g + 8,
t + 4); B regs (word t, column g), (t + 4, g); C/D (g, 2t), (g, 2t + 1), (g + 8, 2t),
(g + 8, 2t + 1). A dot product does not depend on the order of k, so each lane reads its
words as one 16-byte vector (words 4t .. 4t + 3 of a 64-byte row: conflict-free in shared
memory) and feeds words 4t + 2s and 4t + 2s + 1 in place of k-words t and t + 4 of the
s-th k32 step, for A and B alike: the two steps together cover the 16 words once.

This module must never saturate, and never change the layout without the Program and
`pack_i8` changing with it.
"""

from __future__ import annotations

from functools import cache

from vyre.backends.cuda.native import NativeKernel

#: rows and columns of C per block, words of K per stage, stages, threads per block
BLOCK_M = 128
BLOCK_N = 128
STAGE_WORDS = 16
STAGES = 3
THREADS = 256
#: K4 (words per packed row) must be a multiple of this (16-byte cp.async chunks)
WORD_ALIGN = 4

_SOURCE = r"""
// vyre.programs.matmul_i8 on tensor cores: C[M, N] (i32) = A[M, K] @ B[K, N], {ty} bytes,
// A packed M x K4 words, B packed transposed N x K4 words (K4 % 4 == 0); wraps mod 2^32.
#define BM {bm}
#define BN {bn}
#define BKW {bkw}
#define STAGES {stages}
#define THREADS {threads}

__device__ __forceinline__ unsigned vy_smem(const void* p) {{
  return (unsigned)__cvta_generic_to_shared(p);
}}

// 16 bytes global -> shared, zero-filled past `bytes` (0: nothing is read)
__device__ __forceinline__ void vy_cp16(unsigned* dst, const unsigned* src, unsigned bytes) {{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(vy_smem(dst)), "l"(src), "r"(bytes) : "memory");
}}

// rows r0 .. r0 + 127 (of `rows`), words kw0 .. kw0 + 15 of a packed matrix into `dst`
// (128 rows of 16 words): each thread copies two 16-byte chunks
__device__ __forceinline__ void vy_stage(unsigned* dst, const unsigned* __restrict__ src,
                                         unsigned rows, unsigned r0, unsigned K4,
                                         unsigned kw0, unsigned tid) {{
#pragma unroll
  for (unsigned i = 0; i < (BM * BKW / 4) / THREADS; ++i) {{
    const unsigned c = tid + i * THREADS;
    const unsigned r = c >> 2, ch = c & 3u;
    const unsigned row = r0 + r, kw = kw0 + ch * 4u;
    const unsigned* p = src;  // a valid address even where nothing is read
    unsigned bytes = 0u;
    if (row < rows && kw < K4) {{
      p = src + (size_t)row * K4 + kw;
      bytes = min(16u, (K4 - kw) * 4u);
    }}
    vy_cp16(dst + r * BKW + ch * 4u, p, bytes);
  }}
}}

__device__ __forceinline__ void vy_mma(int* c, unsigned a0, unsigned a1, unsigned a2,
                                       unsigned a3, unsigned b0, unsigned b1) {{
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.{ty}.{ty}.s32 "
      "{{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}}

extern "C" __global__ void __launch_bounds__(THREADS) {name}(
    const unsigned* __restrict__ A, const unsigned* __restrict__ B, int* __restrict__ C,
    const unsigned M, const unsigned N, const unsigned K4) {{
  __shared__ __align__(128) unsigned sA[STAGES][BM * BKW];
  __shared__ __align__(128) unsigned sB[STAGES][BN * BKW];
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
  const unsigned g = lane >> 2, t = lane & 3u;
  const unsigned row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const unsigned wm = (warp >> 2) * 64u, wn = (warp & 3u) * 32u;
  const unsigned ktiles = (K4 + BKW - 1) / BKW;
  int acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

#pragma unroll
  for (unsigned s = 0; s < STAGES - 1; ++s) {{
    if (s < ktiles) {{
      vy_stage(sA[s], A, M, row0, K4, s * BKW, tid);
      vy_stage(sB[s], B, N, col0, K4, s * BKW, tid);
    }}
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }}
  for (unsigned kt = 0; kt < ktiles; ++kt) {{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2) : "memory");
    __syncthreads();  // stage kt landed for all; every warp is done with stage kt - 1
    const unsigned nk = kt + STAGES - 1;
    if (nk < ktiles) {{
      vy_stage(sA[nk % STAGES], A, M, row0, K4, nk * BKW, tid);
      vy_stage(sB[nk % STAGES], B, N, col0, K4, nk * BKW, tid);
    }}
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    const unsigned* a = sA[kt % STAGES];
    const unsigned* b = sB[kt % STAGES];
    uint4 af[4][2], bf[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {{
      af[i][0] = *(const uint4*)(a + (wm + i * 16 + g) * BKW + 4u * t);
      af[i][1] = *(const uint4*)(a + (wm + i * 16 + g + 8) * BKW + 4u * t);
    }}
#pragma unroll
    for (int j = 0; j < 4; ++j) bf[j] = *(const uint4*)(b + (wn + j * 8 + g) * BKW + 4u * t);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {{
        // k32 step 0: words 4t, 4t+1 stand for k-words t, t+4; step 1: 4t+2, 4t+3
        vy_mma(acc[i][j], af[i][0].x, af[i][1].x, af[i][0].y, af[i][1].y, bf[j].x, bf[j].y);
        vy_mma(acc[i][j], af[i][0].z, af[i][1].z, af[i][0].w, af[i][1].w, bf[j].z, bf[j].w);
      }}
  }}
  const bool pairs = (N & 1u) == 0u;  // (r, c), (r, c + 1) is one aligned 8-byte store
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {{
        const unsigned r = row0 + wm + i * 16 + g + 8u * h;
        const unsigned c = col0 + wn + j * 8 + 2u * t;
        if (r >= M) continue;
        int* out = C + (size_t)r * N + c;
        const int v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (pairs && c + 1 < N) {{
          *(int2*)out = make_int2(v0, v1);
        }} else {{
          if (c < N) out[0] = v0;
          if (c + 1 < N) out[1] = v1;
        }}
      }}
}}
"""


@cache
def mma_kernel(signed: bool) -> NativeKernel:
    """The tensor-core kernel for signed (s8) or unsigned (u8) bytes."""
    ty = "s8" if signed else "u8"
    name = f"vyre_matmul_{ty}_mma"
    src = _SOURCE.format(ty=ty, name=name, bm=BLOCK_M, bn=BLOCK_N, bkw=STAGE_WORDS,
                         stages=STAGES, threads=THREADS)
    return NativeKernel(name, src, (THREADS, 1, 1))


def mma_grid(m: int, n: int) -> tuple[int, int, int]:
    """Blocks of the launch: one per 128 x 128 tile of C."""
    return (-(-n // BLOCK_N), -(-m // BLOCK_M), 1)


__all__ = ["BLOCK_M", "BLOCK_N", "WORD_ALIGN", "mma_grid", "mma_kernel"]
