"""Program IR -> CUDA C source (one `extern "C"` kernel per Program).

`generate` validates the Program and lowers it with vyre.lower (integer division and
remainder, shifts, integer abs, float -> int casts, float rem, f16 arithmetic and the
bounds checks of loads / stores / atomics arrive as the core: C operators on in-domain
operands, f16 in f32, raw memory accesses behind the IR's own index tests, against the
element counts passed as kernel arguments). This printer spells the core and keeps what
is C's own business: integer arithmetic in unsigned types (wrapping, no C undefined
behaviour), float min/max as fminf/fmaxf (IEEE minNum/maxNum), round as
rintf (half to even), For loops whose increment never overflows; a run of statements
loading consecutive elements (x_l = buf[base + c + l]) is one vector load where aligned
and in bounds, else the same guarded scalar loads. f16 values are kept as
their 16-bit pattern and converted with PTX `cvt` (no cuda_fp16.h needed: the NVRTC wheel
ships no headers). Helpers of the prelude are emitted only when the kernel uses them.

Kernel arguments, in this order: one pointer per buffer (declaration order), one u32
element count per buffer, then the params (declaration order). `KernelSignature` describes
that layout for the launcher.

This module must never talk to NVRTC or the driver, and never emits fast-math constructs.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.errors import InvalidProgram, UnsupportedFeature
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.analysis import uses_subgroups
from vyre.ir.types import ScalarType
from vyre.ir.validate import validate
from vyre.lower import Traits, guarded_load, guarded_store, lower
from vyre.lower import names as lower_names
from vyre.lower.maths import lowered_calls
from vyre.subgroups import check_fits
from vyre.subgroups import identity as sg_identity

from .options import DEFAULT_OPTIONS, CudaOptions

KERNEL_NAME = "vyre_main"
# C's own integer division, shifts, abs, float -> int casts and memory accesses differ
# from the IR's (or are undefined) outside their domain: vyre.lower rewrites all of them
# into the core, where only in-domain `Native` operations and in-range raw accesses reach
# this printer. C's `?:` evaluates only the operand it chooses: guarded loads stay
# expressions (which the lockstep vectoriser merges into vector loads). Float division and
# sqrt are correctly rounded (nvrtc.py: --prec-div, --prec-sqrt), fma rounds once.
TRAITS = Traits(guarded_expr=True, in_place=True, float_div=True, float_sqrt=True,
                fused_fma=True, fused_fma_f16_f64=True)
# the lockstep body evaluates values, conditions and hoisted loads of every invocation
# ahead of the conditions around them: each access keeps its own index test there
LOCKSTEP_TRAITS = Traits(guarded_expr=True, float_div=True, float_sqrt=True, fused_fma=True,
                         fused_fma_f16_f64=True)
# element types a vectorised access may have (bool storage is excluded)
ST = ScalarType

CTYPE: dict[ScalarType, str] = {
    ST.BOOL: "bool",
    ST.I32: "int",
    ST.U32: "unsigned",
    ST.F32: "float",
    ST.F16: "vy_f16",
    ST.F64: "double",
    ST.I64: "long long",
    ST.U64: "unsigned long long",
    # the 8/16-bit storage types: C's own, so a store writes its byte(s) only (no race
    # with the neighbours another thread writes); conversions between C integer types
    # wrap modulo 2^n (two's complement for the signed ones, as NVRTC defines it)
    ST.U8: "unsigned char",
    ST.I8: "signed char",
    ST.U16: "unsigned short",
    ST.I16: "short",
}
VEC_TYPES = frozenset({ST.I32, ST.U32, ST.F32, ST.F16, ST.F64, ST.I64, ST.U64})
_INT32 = frozenset({ST.I32, ST.U32})
UTYPE: dict[ScalarType, str] = {
    ST.I32: "unsigned",
    ST.U32: "unsigned",
    ST.I64: "unsigned long long",
    ST.U64: "unsigned long long",
}

# Kernel-argument sizes (bytes) of each param type; bool params never exist.
ARG_SIZE: dict[ScalarType, int] = {
    ST.I32: 4, ST.U32: 4, ST.F32: 4, ST.F16: 2, ST.F64: 8, ST.I64: 8, ST.U64: 8,
}
STRUCT_CODE: dict[ScalarType, str] = {
    ST.I32: "<i", ST.U32: "<I", ST.F32: "<f", ST.F16: "<e", ST.F64: "<d", ST.I64: "<q",
    ST.U64: "<Q",
}

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
SUBGROUP_SIZE = 32  # a warp
_PRELUDE_SLOT = "// @vyre-prelude@"  # replaced by the helpers the finished kernel uses
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

# C spellings from the op registry (vyre.ir.ops); clamp and the f16 forms are spelled below
_F32_FN = {op.name: op.c_f32 for op in ops.CALL_OPS if op.c_f32}
_F64_FN = {op.name: op.c_f64 for op in ops.CALL_OPS if op.c_f64}
_CMP = ops.binary_symbols("comparison")
_ARITH = ops.binary_symbols("arith")
_BITS = ops.binary_symbols("bitwise")

def mangle(prefix: str, name: str) -> str:
    """A C identifier for a user name: `prefix` + vyre.lower's injective mangling."""
    return f"{prefix}_{lower_names.mangle(name)}"


@dataclass(frozen=True)
class KernelSignature:
    """The kernel's argument list: buffer pointers, u32 counts, then params."""

    buffers: tuple[ScalarType, ...]
    params: tuple[ScalarType, ...]
    grid_x: bool = False  # a trailing u32: the dispatch's workgroup count along x (merged)
    # indirect grids: trailing (grid pointer, status pointer, u32 per-dimension limit)
    indirect: bool = False

    def layout(self) -> tuple[list[int], int]:
        """(offset of each argument in a packed, naturally aligned block, block size)."""
        offsets: list[int] = []
        pos = 0
        sizes = [8] * len(self.buffers) + [4] * len(self.buffers)
        sizes += [ARG_SIZE[t] for t in self.params]
        sizes += [4] if self.grid_x else []
        sizes += [8, 8, 4] if self.indirect else []
        for s in sizes:
            pos = (pos + s - 1) // s * s
            offsets.append(pos)
            pos += s
        return offsets, max(pos, 8)


@dataclass(frozen=True)
class Generated:
    source: str
    signature: KernelSignature
    block: tuple[int, int, int]
    merge: int = 1  # workgroups per CUDA block along x: launch ceil(grid.x / merge) blocks


def _float_literal(value: float, ty: ScalarType) -> str:
    if ty is ST.F16:
        bits = int(np.array(value, dtype=np.float16).view(np.uint16))
        return f"((vy_f16)0x{bits:04x}u)"
    if ty is ST.F32:
        if math.isfinite(value):
            r = repr(float(value))
            if float(np.float32(float(r))) == value:
                return f"{r}f" if ("e" in r or "." in r) else f"{r}.0f"
        bits = 0x7FC00000 if math.isnan(value) else struct.unpack("<I", struct.pack("<f", value))[0]
        return f"__uint_as_float(0x{bits:08x}u)"
    if math.isfinite(value):
        r = repr(float(value))
        return r if ("e" in r or "." in r) else f"{r}.0"
    bits = (
        0x7FF8000000000000 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
    )
    return f"__longlong_as_double(0x{bits:016x}ll)"


def _int_literal(value: int, ty: ScalarType) -> str:
    if ty.is_narrow:
        return f"(({CTYPE[ty]}){value})"
    if ty is ST.I32:
        return "(-2147483647 - 1)" if value == -(2**31) else (f"({value})" if value < 0 else str(value))
    if ty is ST.U32:
        return f"{value}u"
    if ty is ST.I64:
        if value == -(2**63):
            return "(-9223372036854775807ll - 1)"
        return f"({value}ll)" if value < 0 else f"{value}ll"
    return f"{value}ull"


def literal(value: bool | int | float, ty: ScalarType) -> str:
    if ty is ST.BOOL:
        return "true" if value else "false"
    if ty.is_int:
        return _int_literal(int(value), ty)
    text = _float_literal(float(value), ty)
    # Parenthesised so a negative literal never fuses with a preceding '-' into '--'.
    return f"({text})" if text.startswith("-") else text


class _Gen:
    def __init__(self, program: N.Program, restrict: bool, coarsen: int = 1,
                 merge: int = 1, options: CudaOptions = DEFAULT_OPTIONS,
                 indirect: bool = False) -> None:
        self.p = program
        self.options = options
        self.restrict = restrict
        self.coarsen = coarsen
        self.indirect = indirect
        self.merge = merge
        self.tx = "vy_tx" if merge > 1 else "threadIdx.x"  # thread index within a workgroup
        self.sfx = ""  # per-invocation name suffix in lockstep mode ("_0", "_1", ...)
        self.tmp = 0
        self.lines: list[str] = []
        self.buf_ty = {b.name: b.ty for b in program.buffers}
        self.arr = {a.name: a for a in program.workgroup_arrays}
        self.vars: dict[str, str] = {}
        # lockstep vectorisation (see lockstep_kernel): lanes per vector (0: off), the
        # stride in the x invocation id of top-level variables, hoisted vector loads
        self.vec = 0
        self.cur_j: int | None = None
        self.var_stride: dict[str, int] = {}
        self.hoisted: dict[N.ExprNode, list[str]] = {}  # guarded loads -> lane values
        # the core's constant tables (N.Table), one array each: (type, values) -> name
        self.tables: dict[tuple[ScalarType, tuple[float, ...] | tuple[int, ...]], str] = {}
        # the core's functions (N.Function): name -> [C text (None while printing), calls]
        self.functions: dict[str, list[Any]] = {}

    # ------------------------------------------------------------ expressions
    def name_of(self, var: str) -> str:
        return mangle("v", var) + self.sfx

    def mem(self, name: str) -> tuple[str, str]:
        """(pointer expression, count expression) of a buffer or workgroup array."""
        if name in self.arr:
            return mangle("s", name), f"{self.arr[name].count}u"
        if name in self.buf_ty:
            return mangle("b", name), mangle("n", name)
        raise InvalidProgram(f"unknown buffer or workgroup array {name!r}")

    def f(self, code: str, ty: ScalarType) -> str:
        """`code` (of float type `ty`) as an expression of the type computations use."""
        return f"vy_h2f({code})" if ty is ST.F16 else code

    def expr(self, e: N.ExprNode) -> str:
        if isinstance(e, N.Const):
            return literal(e.value, e.ty)
        if isinstance(e, N.Var):
            return self.name_of(e.name)
        if isinstance(e, N.Param):
            return mangle("p", e.name)
        if isinstance(e, N.Builtin):
            if e.name == "local_index":
                return "vy_lidx" + self.sfx
            if e.name == "subgroup_size":
                return f"{SUBGROUP_SIZE}u"
            if e.name == "subgroup_lane":
                return f"(vy_lidx{self.sfx} & {SUBGROUP_SIZE - 1}u)"
            short = {"global_id": "gid", "local_id": "lid", "workgroup_id": "wid",
                     "num_workgroups": "nwg"}[e.name]
            per_j = e.axis == 0 and short in ("gid", "lid")
            return f"vy_{short}{e.axis}" + (self.sfx if per_j else "")
        if isinstance(e, N.Load):
            return self.raw(e, self.expr(e.index))
        if isinstance(e, N.Length):
            return self.mem(e.buffer)[1]
        if isinstance(e, N.Unary):
            return self.unary(e)
        if isinstance(e, N.Binary):
            return self.binary(e)
        if isinstance(e, N.Call):
            return self.call(e)
        if isinstance(e, N.Select):  # (a Guarded too: C's ?: evaluates only its choice)
            if isinstance(e, N.Guarded) and self.hoisted and self.cur_j is not None:
                names = self.hoisted.get(e)
                if names is not None:
                    return names[self.cur_j]
            return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
        if isinstance(e, N.Cast):
            return self.cast(self.expr(e.a), e.a.ty, e.ty)
        if isinstance(e, N.Bitcast):
            return self.bitcast(self.expr(e.a), e.a.ty, e.ty)
        if isinstance(e, N.Native):
            return self.native(e)
        if isinstance(e, N.Table):
            return f"{self.table(e)}[{self.expr(e.index)}]"
        if isinstance(e, N.Invoke):
            return f"{self.function(e.fn)}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, N.Subgroup):
            return self.subgroup(e)
        raise InvalidProgram(f"unknown expression {type(e).__name__}")

    def table(self, e: N.Table) -> str:
        """The name of `e`'s array (declared once per distinct table by `table_decls`)."""
        return self.tables.setdefault((e.ty, e.values), f"vy_tab{len(self.tables)}")

    def function(self, fn: N.Function) -> str:
        """The C name of `fn`, printed once (`function_decls`); counts its calls."""
        name = mangle("vy_fn", fn.name)
        got = self.functions.get(fn.name)
        if got is not None:
            got[1] += 1
            return name
        self.functions[fn.name] = [None, 1]
        outer, self.lines = self.lines, []
        self.block(fn.body, 1)
        self.emit(1, f"return {self.expr(fn.result)};")
        body, self.lines = self.lines, outer
        params = ", ".join(f"{CTYPE[t]} {self.name_of(p)}" for p, t in fn.params)
        self.functions[fn.name][0] = "\n".join(
            [f"{CTYPE[fn.ty]} {name}({params}) {{", *body, "}"])
        return name

    def function_decls(self) -> str:
        """The core's functions (vyre.lower.maths' definitions), each once: called once,
        NVRTC inlines it as it would the code in place; called more often, it stays one
        function (`__noinline__`), so the kernel's size and compile time do not grow
        with the calls (a call costs a few instructions, docs/perf-notes.md)."""
        return "".join(
            f"__device__ {'__noinline__' if calls > 1 else '__forceinline__'} {text}\n"
            for text, calls in self.functions.values())

    def table_decls(self) -> str:
        """The core's constant tables (vyre.lower.maths), in global memory: read through
        the L1 cache, where lanes that read different entries cost one cache line each
        (a `__constant__` array would serialise them)."""
        return "".join(
            f"__device__ const {CTYPE[ty]} {name}[{len(values)}] = "
            f"{{{', '.join(literal(v, ty) for v in values)}}};\n"
            for (ty, values), name in self.tables.items())

    def subgroup(self, e: N.Subgroup) -> str:
        v = self.expr(e.value)
        if e.op in ("shuffle", "broadcast"):
            assert e.lane is not None
            return f"__shfl_sync(0xffffffffu, {v}, ({self.expr(e.lane)}) & {SUBGROUP_SIZE - 1}u)"
        op = f"vy_op_{e.combine}()"
        lane = f"(vy_lidx{self.sfx} & {SUBGROUP_SIZE - 1}u)"
        if e.op == "reduce":
            return f"vy_sg_reduce({v}, {op})"
        if e.op == "inclusive_scan":
            return f"vy_sg_iscan({v}, {lane}, {op})"
        assert e.combine is not None
        ident = literal(sg_identity(e.combine, e.ty), e.ty)
        return f"vy_sg_xscan({v}, {lane}, {op}, ({CTYPE[e.ty]}){ident})"

    def native(self, e: N.Native) -> str:
        """The core's in-domain operations (vyre.lower guarantees the domain)."""
        args = [self.expr(x) for x in e.args]
        t = e.ty
        if e.op == "f2i":  # an in-range float: C's truncating conversion is exact
            return f"(({CTYPE[t]}){args[0]})"
        a, b = args
        if e.op == "shl" and t.is_signed:  # in the unsigned type: no signed-overflow UB
            return f"(({CTYPE[t]})(({UTYPE[t]}){a} << {b}))"
        sym = {"div": "/", "rem": "%", "shl": "<<", "shr": ">>"}[e.op]
        return f"({a} {sym} {b})"

    def raw(self, node: N.Load | N.Store | N.Atomic, index: str) -> str:
        """`p[index]` for a raw access of the core (vyre.lower made sure it is in range)."""
        if not isinstance(node, (N.RawLoad, N.RawStore, N.RawAtomic)):
            raise self.unlowered(f"a bounds-checked {node.kind} of {node.buffer!r}")
        return f"{self.mem(node.buffer)[0]}[{index}]"

    @staticmethod
    def unlowered(what: str) -> InvalidProgram:
        return InvalidProgram(f"{what} reached the CUDA printer without vyre.lower (generate "
                              "lowers every Program first)")

    def unary(self, e: N.Unary) -> str:
        a, t = self.expr(e.a), e.ty
        if e.op == "not":
            return f"(!{a})"
        if e.op == "bit_not":
            return f"(({CTYPE[t]})~{a})"
        # neg
        if t is ST.F16:
            return f"((vy_f16)({a} ^ 0x8000u))"
        if t.is_float:
            return f"(-({a}))"
        return f"(({CTYPE[t]})(({UTYPE[t]})0 - ({UTYPE[t]}){a}))"

    def binary(self, e: N.Binary) -> str:
        op, t = e.op, e.a.ty
        a, b = self.expr(e.a), self.expr(e.b)
        if op in _CMP and t is not ST.F16:
            return f"({a} {_CMP[op]} {b})"
        if op == "logical_and":
            return f"({a} && {b})"
        if op == "logical_or":
            return f"({a} || {b})"
        if op in ("shl", "shr"):
            raise self.unlowered(f"{op} on {t}")
        if op in _BITS:
            return f"(({CTYPE[t]})({a} {_BITS[op]} {b}))"
        if t.is_int:
            if op in _ARITH:
                if not t.is_signed:  # unsigned C arithmetic already wraps
                    return f"({a} {_ARITH[op]} {b})"
                u = UTYPE[t]
                return f"(({CTYPE[t]})(({u}){a} {_ARITH[op]} ({u}){b}))"
            if op in ("div", "rem"):
                raise self.unlowered(f"{op} on {t}")
            if op == "min":
                return f"vy_imin({a}, {b})"
            if op == "max":
                return f"vy_imax({a}, {b})"
        if t is ST.F16:  # vyre.lower does f16 arithmetic in f32
            raise self.unlowered(f"{op} on f16")
        if t.is_float:
            sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}.get(op)
            if sym:
                return f"({a} {sym} {b})"
            if op in ("min", "max"):
                suffix = "f" if t is ST.F32 else ""
                return f"f{op}{suffix}({a}, {b})"
            if op == "rem":
                raise self.unlowered(f"rem on {t}")
        raise InvalidProgram(f"binary {op} on {t} has no CUDA lowering")

    def call(self, e: N.Call) -> str:
        t, fn = e.ty, e.fn
        args = [self.expr(x) for x in e.args]
        rec = ops.CALLS[fn]
        if rec.signature is not None:  # dot4_i8 / dot4_u8: PTX dp4a, d = c + sum (32-bit)
            c = rec.c_f32
            return f"__dp4a({c}({args[0]}), {c}({args[1]}), {args[2]})"
        if fn == "clamp":
            x, lo, hi = args
            if t.is_int:
                return f"vy_imin(vy_imax({x}, {lo}), {hi})"
            if t is ST.F16:
                raise self.unlowered("clamp on f16")
            s = "f" if t is ST.F32 else ""
            return f"fmin{s}(fmax{s}({x}, {lo}), {hi})"
        if t.is_int:
            if fn == "abs":
                raise self.unlowered(f"abs on {t}")
            raise InvalidProgram(f"{fn} needs a float argument, got {t}")
        if t is ST.F16:
            if fn == "abs":
                return f"((vy_f16)({args[0]} & 0x7fffu))"
            if fn == "fma":  # exact f16 product in f64, one f64 rounding, then to f16
                a, b, c = (f"(double){self.f(v, t)}" for v in args)
                return f"vy_d2h(fma({a}, {b}, {c}))"
            fargs = ", ".join(self.f(v, t) for v in args)
            return f"vy_f2h({_F32_FN[fn]}({fargs}))"
        table = _F32_FN if t is ST.F32 else _F64_FN
        return f"{table[fn]}({', '.join(args)})"

    def cast(self, a: str, src: ScalarType, dst: ScalarType) -> str:
        if src == dst:
            return a
        if dst is ST.BOOL:
            if src is ST.F16:
                return f"({self.f(a, src)} != 0.0f)"
            return f"({a} != 0)"
        if src is ST.BOOL:
            if dst is ST.F16:
                return f"({a} ? (vy_f16)0x3c00u : (vy_f16)0u)"
            return f"(({CTYPE[dst]})({a} ? 1 : 0))"
        if src.is_int and dst.is_int:
            return f"(({CTYPE[dst]}){a})"
        if src.is_int and dst.is_float:
            if dst is ST.F16:  # through f64: exact up to 2**53, beyond that inf in f16 anyway
                return f"vy_d2h((double){a})"
            return f"(({CTYPE[dst]}){a})"
        if src.is_float and dst.is_int:
            raise self.unlowered(f"cast {src} -> {dst}")
        # float -> float
        if dst is ST.F16:
            return f"vy_d2h({a})" if src is ST.F64 else f"vy_f2h({a})"
        if src is ST.F16:
            x = self.f(a, src)
            return x if dst is ST.F32 else f"((double){x})"
        return f"(({CTYPE[dst]}){a})"

    def bitcast(self, a: str, src: ScalarType, dst: ScalarType) -> str:
        if src == dst:
            return a
        if src.bits != dst.bits or ST.BOOL in (src, dst):
            raise InvalidProgram(f"bitcast {src} -> {dst} needs two types of one width")
        if src.is_int and dst.is_int:
            return f"(({CTYPE[dst]}){a})"
        table = {
            (ST.F32, ST.I32): "__float_as_int", (ST.F32, ST.U32): "__float_as_uint",
            (ST.I32, ST.F32): "__int_as_float", (ST.U32, ST.F32): "__uint_as_float",
            (ST.F64, ST.I64): "__double_as_longlong",
            (ST.I64, ST.F64): "__longlong_as_double",
        }
        if (src, dst) == (ST.F64, ST.U64):
            return f"((unsigned long long)__double_as_longlong({a}))"
        if (src, dst) == (ST.U64, ST.F64):
            return f"__longlong_as_double((long long){a})"
        if (src, dst) in table:
            return f"{table[(src, dst)]}({a})"
        raise InvalidProgram(f"bitcast {src} -> {dst} has no CUDA lowering")

    # ------------------------------------------------------------ statements
    def emit(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def block(self, body: tuple[N.StmtNode, ...], depth: int) -> None:
        i = 0
        while i < len(body):
            run = _load_run(body, i, self.buf_ty) if self.options.vector_runs else 0
            if run:
                self.load_run(body[i:i + run], depth)
                i += run
            else:
                self.stmt(body[i], depth)
                i += 1

    def load_run(self, run: tuple[N.StmtNode, ...], d: int) -> None:
        """Statements x_l = buf[base + c + l] (l = 0 .. len-1; see _load_run) as one vector
        load when all are in bounds and the address is aligned to the vector, else each
        statement as it is (its own guarded load). With base + c <= n - len nothing wraps,
        so lane l reads exactly the element its own statement names."""
        load = _loaded(run[0].value)  # type: ignore[union-attr]
        assert load is not None
        ptr, n = self.mem(load.buffer)
        c, v = CTYPE[load.ty], len(run)
        names = [self.name_of(st.name) for st in run]  # type: ignore[union-attr]
        for st, name in zip(run, names):
            if isinstance(st, N.Let):
                self.emit(d, f"{c} {name};")
        ix, pack = self.fresh("vy_ix"), f"vy_pack<{c}, {v}>"
        self.emit(d, f"{{ const unsigned {ix} = {self.expr(load.index)};")
        self.emit(d + 1, f"if (vy_vok<{c}, {v}>({ptr}, {ix}, {n})) {{")
        self.emit(d + 2, f"const {pack} vy_pk = *reinterpret_cast<const {pack}*>({ptr} + {ix});")
        self.emit(d + 2, " ".join(f"{x} = vy_pk.v[{ln}];" for ln, x in enumerate(names)))
        self.emit(d + 1, "} else {")
        for st, x in zip(run, names):
            self.emit(d + 2, f"{x} = {self.expr(st.value)};")  # type: ignore[union-attr]
        self.emit(d + 1, "} }")

    def stmt(self, s: N.StmtNode, d: int) -> None:
        if isinstance(s, N.Let):
            self.emit(d, f"{CTYPE[s.value.ty]} {self.name_of(s.name)} = {self.expr(s.value)};")
        elif isinstance(s, N.Assign):
            self.emit(d, f"{self.name_of(s.name)} = {self.expr(s.value)};")
        elif isinstance(s, N.Store):
            self.emit(d, f"{self.raw(s, self.expr(s.index))} = {self.expr(s.value)};")
        elif isinstance(s, N.If):
            self.emit(d, f"if ({self.expr(s.cond)}) {{")
            self.block(s.then, d + 1)
            if s.orelse:
                self.emit(d, "} else {")
                self.block(s.orelse, d + 1)
            self.emit(d, "}")
        elif isinstance(s, N.For):
            self.for_(s, d)
        elif isinstance(s, N.While):
            self.emit(d, f"while ({self.expr(s.cond)}) {{")
            self.block(s.body, d + 1)
            self.emit(d, "}")
        elif isinstance(s, N.Break):
            self.emit(d, "break;")
        elif isinstance(s, N.Continue):
            self.emit(d, "continue;")
        elif isinstance(s, N.Return):
            self.emit(d, "goto vy_next;" if self.coarsen > 1 or self.indirect else "return;")
        elif isinstance(s, N.Barrier):
            self.emit(d, "__syncthreads();")
        elif isinstance(s, N.Atomic):
            self.atomic(s, d)
        else:
            raise InvalidProgram(f"unknown statement {type(s).__name__}")

    def for_(self, s: N.For, d: int) -> None:
        if s.step != 1:
            raise self.unlowered(f"a for loop with step {s.step}")
        t = CTYPE[s.ty]
        v = self.name_of(s.var)
        end = f"{v}_end"
        self.emit(d, "{")
        self.emit(d + 1, f"const {t} {end} = {self.expr(s.end)};")
        # step 1: v < end <= MAX before each increment, so it never overflows
        self.emit(d + 1, f"for ({t} {v} = {self.expr(s.start)}; {v} < {end}; ++{v}) {{")
        self.block(s.body, d + 2)
        self.emit(d + 1, "}")
        self.emit(d, "}")

    def atomic(self, s: N.Atomic, d: int, assign_to: str | None = None) -> None:
        ty = self.buf_ty.get(s.buffer) or (self.arr[s.buffer].ty if s.buffer in self.arr else None)
        if ty is None:
            raise InvalidProgram(f"atomic on unknown buffer {s.buffer!r}")
        c = CTYPE[ty]
        val = self.expr(s.value)
        addr = f"&{self.raw(s, self.expr(s.index))}"
        op = s.op
        fn = {"add": "atomicAdd", "min": "atomicMin", "max": "atomicMax", "and": "atomicAnd",
              "or": "atomicOr", "xor": "atomicXor", "exchange": "atomicExch",
              "compare_exchange": "atomicCAS"}[op]
        cmp = self.expr(s.comparand) if s.comparand is not None else None
        if op == "compare_exchange" and cmp is None:
            raise InvalidProgram("compare_exchange needs a comparand")
        if ty in (ST.I32, ST.U32):
            call = f"{fn}({addr}, {cmp}, {val})" if cmp is not None else f"{fn}({addr}, {val})"
        elif ty in (ST.I64, ST.U64):
            ull = "unsigned long long"
            if op in ("min", "max"):  # the signed / unsigned 64-bit overloads
                call = f"{fn}(({c}*){addr}, ({c}){val})"
            elif cmp is not None:
                call = f"({c}){fn}(({ull}*){addr}, ({ull}){cmp}, ({ull}){val})"
            else:
                call = f"({c}){fn}(({ull}*){addr}, ({ull}){val})"
        elif (ty in (ST.F32, ST.F64) and op == "add") or (ty is ST.F32 and op == "exchange"):
            call = f"{fn}({addr}, {val})"
        else:
            raise UnsupportedFeature(
                f"atomic {op} on {ty}", "cuda",
                "CUDA lowers float atomics for add (f32, f64) and exchange (f32) only",
            )
        target = f"{c} {self.name_of(s.result)} = " if s.result is not None else ""
        if assign_to is not None:
            target = f"{assign_to} = "
        self.emit(d, f"{target}{call};")

    # ------------------------------------------------------------ kernel
    def kernel(self) -> str:
        p = self.p
        wx, wy, wz = p.workgroup_size
        k = self.coarsen
        bx = wx // k  # CUDA threads along x; each runs `k` IR invocations
        restrict = " __restrict__" if self.restrict else ""
        args: list[str] = []
        for b in p.buffers:
            const = "const " if b.access == "read" else ""
            args.append(f"{const}{CTYPE[b.ty]}*{restrict} {mangle('b', b.name)}")
        args += [f"const unsigned {mangle('n', b.name)}" for b in p.buffers]
        args += [f"const {CTYPE[q.ty]} {mangle('p', q.name)}" for q in p.params]
        m = self.merge
        if m > 1:
            args.append("const unsigned vy_gridx")
        if self.indirect:
            args += ["const unsigned* __restrict__ vy_grid", "volatile unsigned* vy_status",
                     "const unsigned vy_limit"]
        head = [
            f"// vyre program {p.name!r}, workgroup size ({wx}, {wy}, {wz})",
            "// generated by vyre.backends.cuda.render; arguments: buffer pointers,",
            "// u32 element counts, params (declaration order)",
        ]
        if k > 1:
            head.append(f"// coarsened: each CUDA thread runs {k} invocations of its workgroup "
                        f"(local_id.x = threadIdx.x + j * {bx}); no barriers in this program")
        head += [
            _PRELUDE_SLOT,
            f'extern "C" __global__ void __launch_bounds__({bx * m * wy * wz}) {KERNEL_NAME}(',
            "    " + (",\n    ".join(args) if args else "void") + ") {",
        ]
        for a in p.workgroup_arrays:
            # 16-byte aligned so NVCC can merge runs of aligned scalar loads into 128-bit ones
            head.append(f"  __shared__ __align__(16) {CTYPE[a.ty]} {mangle('s', a.name)}"
                        f"[{a.count}];")
        dims = ((wx, "x"), (wy, "y"), (wz, "z"))
        if self.indirect:
            return self.indirect_kernel(head)
        per_j: list[str] = []
        for i, (w, ax) in enumerate(dims):
            lid = f"  const unsigned vy_lid{i} = threadIdx.{ax};"
            gid = f"  const unsigned vy_gid{i} = vy_wid{i} * {w}u + vy_lid{i};"
            if i == 0 and m > 1:  # block b runs workgroups b*m .. b*m+m-1 (those < grid.x)
                head += [
                    f"  // merged: {m} workgroups of {bx} threads per CUDA block",
                    f"  const unsigned vy_wid0 = blockIdx.x * {m}u + threadIdx.x / {bx}u;",
                    "  const unsigned vy_nwg0 = vy_gridx;",
                    f"  const unsigned vy_tx = threadIdx.x % {bx}u;",
                    "  if (vy_wid0 >= vy_nwg0) return;  // past the grid: no barriers here",
                ]
            else:
                head.append(f"  const unsigned vy_wid{i} = blockIdx.{ax};")
                head.append(f"  const unsigned vy_nwg{i} = gridDim.{ax};")
            if i == 0 and k > 1:
                per_j += [f"  const unsigned vy_lid0 = threadIdx.x + vy_j * {bx}u;", gid]
            else:
                head += [lid, gid]
        lidx = f"  const unsigned vy_lidx = vy_lid0 + vy_lid1 * {wx}u + vy_lid2 * {wx * wy}u;"
        if k == 1:
            head.append(lidx)
            self.block(p.body, 1)
            return "\n".join([*head, *self.lines, "}", ""])
        per_j.append(lidx)
        if self.options.lockstep and lockstep_allowed(p):
            return self.lockstep_kernel(head, k)
        self.block(p.body, 3)
        loop = [
            "#pragma unroll",
            f"  for (unsigned vy_j = 0; vy_j < {k}u; ++vy_j) {{",
            *("  " + line for line in per_j),
            "    {",
            *self.lines,
            "    }",
            "    vy_next: ;  // an invocation's `return` jumps here",
            "  }",
        ]
        return "\n".join([*head, *loop, "}", ""])


    def indirect_kernel(self, head: list[str]) -> str:
        """An indirect grid: the workgroup counts are read on the device from `vy_grid`
        (three u32), and the launch's fixed number of blocks (enough to fill the device)
        runs the virtual workgroups 0, 1, ... of that grid in turn, each block taking every
        gridDim.x-th one (x fastest, as the IR numbers them). Over the per-dimension limit
        nothing runs: block 0 records the count in `vy_status` (page-locked host memory)
        and the runtime raises DispatchError at its next check. An invocation's `return`
        ends its part of the current workgroup (goto vy_next); the validator guarantees no
        barrier follows a non-uniform return, so the barrier after each workgroup (which
        also keeps the next one's workgroup-memory writes after this one's reads) is the
        only one the returned invocations meet."""
        wx, wy, _ = self.p.workgroup_size
        head += [
            "  const unsigned vy_nwg0 = vy_grid[0], vy_nwg1 = vy_grid[1], vy_nwg2 = vy_grid[2];",
            "  const unsigned vy_most = max(vy_nwg0, max(vy_nwg1, vy_nwg2));",
            "  if (vy_most > vy_limit) {  // nothing runs; the host raises DispatchError",
            "    if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0 && "
            "threadIdx.z == 0) {",
            "      vy_status[1] = vy_most;",
            "      __threadfence_system();",
            "      vy_status[0] = 1u;",
            "    }",
            "    return;",
            "  }",
            "  const unsigned long long vy_groups = "
            "(unsigned long long)vy_nwg0 * vy_nwg1 * vy_nwg2;",
            "  const unsigned vy_lid0 = threadIdx.x;",
            "  const unsigned vy_lid1 = threadIdx.y;",
            "  const unsigned vy_lid2 = threadIdx.z;",
            f"  const unsigned vy_lidx = vy_lid0 + vy_lid1 * {wx}u + vy_lid2 * {wx * wy}u;",
            "  for (unsigned long long vy_v = blockIdx.x; vy_v < vy_groups; "
            "vy_v += gridDim.x) {",
            "    const unsigned vy_wid0 = (unsigned)(vy_v % vy_nwg0);",
            "    const unsigned vy_wid1 = (unsigned)((vy_v / vy_nwg0) % vy_nwg1);",
            "    const unsigned vy_wid2 = (unsigned)(vy_v / ((unsigned long long)vy_nwg0 * "
            "vy_nwg1));",
        ]
        for i, (w, _ax) in enumerate(zip(self.p.workgroup_size, "xyz")):
            head.append(f"    const unsigned vy_gid{i} = vy_wid{i} * {w}u + vy_lid{i};")
        self.block(self.p.body, 3)
        tail = [
            "    }",
            "    vy_next: ;  // an invocation's `return` ends its part of this workgroup",
            "    __syncthreads();",
            "  }",
        ]
        return "\n".join([*head, "    {", *self.lines, *tail, "}", ""])

    # ------------------------------------------------------------ lockstep coarsening
    def lockstep_kernel(self, head: list[str], k: int) -> str:
        """The k invocations of a thread run statement by statement (like lanes of a warp):
        every statement is done for all k before the next, and a store evaluates all k
        values before writing any, so the loads of all k invocations are in flight
        together. Only for bodies of let / assign / store / if / atomic (no loops, no
        return), where this is one valid interleaving of independent invocations."""
        wx, wy, _ = self.p.workgroup_size
        bx = wx // k
        v = self.plan_vectors(k)
        defs = []
        for j in range(k):
            if v:  # lanes of a vector are consecutive invocations; vectors `bx * v` apart
                g, lane = divmod(j, v)
                lid = f"{g * bx * v}u + {self.tx} * {v}u + {lane}u"
            else:  # consecutive threads run consecutive invocations (coalesced scalars)
                lid = f"{self.tx} + {j * bx}u"
            defs += [
                f"  const unsigned vy_lid0_{j} = {lid};",
                f"  const unsigned vy_gid0_{j} = vy_wid0 * {wx}u + vy_lid0_{j};",
                f"  const unsigned vy_lidx_{j} = vy_lid0_{j} + vy_lid1 * {wx}u"
                f" + vy_lid2 * {wx * wy}u;",
            ]
        head.append(f"  // lockstep: {k} invocations per thread, statement by statement")
        if v:
            head.append(f"  // vectorised: loads / stores at the x invocation id + an invariant"
                        f" move {v} elements at once when aligned and in bounds")
        self.ls_block(self.p.body, 1, [None] * k)
        return "\n".join([*head, *defs, *self.lines, "}", ""])

    # ------------------------------------------------------------ vectorisation
    def stride(self, e: N.ExprNode) -> int | None:
        """How `e` changes from one lane to the next of a vector: 0 (the same in every lane),
        1 (a 32-bit integer one larger, wrapping) or None (anything else)."""
        if isinstance(e, N.Builtin):
            moves = e.name == "local_index" or (
                e.axis == 0 and e.name in ("global_id", "local_id"))
            return 1 if moves else 0
        if isinstance(e, (N.Const, N.Param, N.Length)):
            return 0
        if isinstance(e, N.Var):
            return self.var_stride.get(e.name)
        if isinstance(e, N.Load):
            return 0 if self.stride(e.index) == 0 else None
        kids: tuple[N.ExprNode, ...]
        if isinstance(e, N.Binary) and e.op in ("add", "sub") and e.ty in _INT32:
            sa, sb = self.stride(e.a), self.stride(e.b)
            if sa is None or sb is None:
                return None
            if e.op == "add" and sa + sb <= 1:
                return sa + sb
            return sa if e.op == "sub" and sb == 0 else None
        if isinstance(e, N.Cast) and e.ty in _INT32 and e.a.ty in _INT32:
            return self.stride(e.a)  # same width: the bits are unchanged
        from vyre.ir.analysis import child_exprs

        kids = child_exprs(e)
        return 0 if all(self.stride(c) == 0 for c in kids) else None

    def vec_load(self, e: N.ExprNode) -> bool:
        """Whether `e` is a guarded load (vyre.lower) of consecutive buffer elements."""
        ld = guarded_load(e)
        return (ld is not None and ld.buffer in self.buf_ty and ld.ty in VEC_TYPES
                and self.stride(ld.index) == 1)

    def plan_vectors(self, k: int) -> int:
        """Lanes per vector for this lockstep body (0: no vectorised access, keep the
        strided mapping). Top-level lets assigned once get a known stride first."""
        if not self.options.vectorise or k % 2:
            return 0
        from vyre.ir.analysis import stmt_exprs, walk_expr, walk_stmts

        body = self.p.body
        lets: dict[str, int] = {}
        assigned: set[str] = set()
        for st in walk_stmts(body):
            if isinstance(st, N.Let):
                lets[st.name] = lets.get(st.name, 0) + 1
            elif isinstance(st, N.Assign):
                assigned.add(st.name)
            elif isinstance(st, N.Atomic) and st.result is not None:
                assigned.add(st.result)
        for st in body:  # only top level: there every lane runs the let (no mask)
            if isinstance(st, N.Let) and lets[st.name] == 1 and st.name not in assigned:
                sv = self.stride(st.value)
                if sv is not None:
                    self.var_stride[st.name] = sv
        found = False
        for st in walk_stmts(body):
            if isinstance(st, N.Atomic):
                continue
            if isinstance(st, N.Store) and st.buffer in self.buf_ty and \
                    self.buf_ty[st.buffer] in VEC_TYPES and self.stride(st.index) == 1:
                found = True
            for ex in stmt_exprs(st):
                if any(self.vec_load(x) for x in walk_expr(ex)):
                    found = True
        if not found:
            self.var_stride.clear()
            return 0
        self.vec = 4 if k % 4 == 0 else 2
        return self.vec

    def hoist_loads(self, exprs: tuple[N.ExprNode, ...], d: int) -> None:
        """Load every vectorisable load of a statement for all lanes before the statement.

        Guarded loads have no side effects, so loading them all first (also for lanes whose
        mask is off) is one valid order. A vector is used when its first lane's index is
        aligned and all lanes are in bounds (then, with stride 1 and no wrap, lane l reads
        index + l); otherwise every lane does its own guarded scalar load of its own index.
        """
        from vyre.ir.analysis import walk_expr

        k, v = self.coarsen, self.vec
        for ex in exprs:
            for e in walk_expr(ex):
                ld = guarded_load(e)
                if ld is None or not self.vec_load(e) or e in self.hoisted:
                    continue
                ptr, n = self.mem(ld.buffer)
                c = CTYPE[ld.ty]
                names = [self.fresh("vy_lv") for _ in range(k)]
                self.emit(d, f"{c} {', '.join(names)};")
                for g in range(0, k, v):
                    self.per(g)
                    ix = self.fresh("vy_ix")
                    pack = f"vy_pack<{c}, {v}>"
                    self.emit(d, f"{{ const unsigned {ix} = {self.expr(ld.index)};")
                    self.emit(d + 1, f"if (vy_vok<{c}, {v}>({ptr}, {ix}, {n})) {{")
                    self.emit(d + 2, f"const {pack} vy_pk = *reinterpret_cast<const {pack}*>"
                                     f"({ptr} + {ix});")
                    self.emit(d + 2, " ".join(f"{names[g + ln]} = vy_pk.v[{ln}];"
                                              for ln in range(v)))
                    self.emit(d + 1, "} else {")
                    for ln in range(v):
                        self.per(g + ln)
                        self.emit(d + 2, f"{names[g + ln]} = {self.expr(e)};")
                    self.emit(d + 1, "} }")
                self.hoisted[e] = names
        self.sfx, self.cur_j = "", None

    def fresh(self, prefix: str) -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def per(self, j: int) -> None:
        self.sfx = f"_{j}"
        self.cur_j = j

    def ls_block(self, body: tuple[N.StmtNode, ...], d: int, masks: list[str | None]) -> None:
        for s in body:
            self.ls_stmt(s, d, masks)
        self.sfx = ""
        self.cur_j = None

    def ls_stmt(self, s: N.StmtNode, d: int, masks: list[str | None]) -> None:
        k = len(masks)
        saved = dict(self.hoisted)
        if self.vec and not isinstance(s, N.Atomic):
            from vyre.ir.analysis import stmt_exprs

            self.hoist_loads(stmt_exprs(s), d)
        try:
            self.ls_stmt_body(s, d, masks, k)
        finally:
            self.hoisted = saved  # a hoisted value is only valid within its statement

    def ls_stmt_body(self, s: N.StmtNode, d: int, masks: list[str | None], k: int) -> None:
        if isinstance(s, (N.Let, N.Assign)):
            for j, m in enumerate(masks):
                self.per(j)
                name, val = self.name_of(s.name), self.expr(s.value)
                decl = f"{CTYPE[s.value.ty]} " if isinstance(s, N.Let) else ""
                if m is None:
                    self.emit(d, f"{decl}{name} = {val};")
                else:
                    if decl:
                        self.emit(d, f"{decl}{name}{{}};")
                    self.emit(d, f"if ({m}) {name} = {val};")
        elif isinstance(s, N.Store):
            self.ls_store(s, d, masks, k, None)
        elif isinstance(s, N.If) and (raw := guarded_store(s)) is not None:
            if self.vec:  # vyre.lower's `if (i < len(b)) { raw b[i] = v }` as one store
                from vyre.ir.analysis import stmt_exprs

                self.hoist_loads(stmt_exprs(raw), d)
            self.ls_store(raw, d, masks, k, s.cond)
        elif isinstance(s, N.If):
            conds = []
            for j in range(k):
                self.per(j)
                c = self.fresh("vy_c")
                self.emit(d, f"const bool {c} = {self.expr(s.cond)};")
                conds.append(c)
            then = [c if m is None else f"({m} && {c})" for m, c in zip(masks, conds)]
            other = [f"!{c}" if m is None else f"({m} && !{c})" for m, c in zip(masks, conds)]
            mt = [self.fresh("vy_m") for _ in range(k)]
            for name, expr_ in zip(mt, then):
                self.emit(d, f"const bool {name} = {expr_};")
            self.emit(d, "{")
            self.ls_block(s.then, d + 1, list(mt))
            self.emit(d, "}")
            if s.orelse:
                mo = [self.fresh("vy_m") for _ in range(k)]
                for name, expr_ in zip(mo, other):
                    self.emit(d, f"const bool {name} = {expr_};")
                self.emit(d, "{")
                self.ls_block(s.orelse, d + 1, list(mo))
                self.emit(d, "}")
        elif isinstance(s, N.Atomic):
            for j, m in enumerate(masks):
                self.per(j)
                if s.result is not None:
                    ty = self.buf_ty.get(s.buffer) or self.arr[s.buffer].ty
                    self.emit(d, f"{CTYPE[ty]} {self.name_of(s.result)}{{}};")
                    s_ = s.model_copy(update={"result": None})
                    target = self.name_of(s.result)
                else:
                    s_, target = s, None
                self.emit(d, f"if ({m or 'true'}) {{")
                self.atomic(s_, d + 1, target)
                self.emit(d, "}")
        else:
            raise InvalidProgram(f"{type(s).__name__} cannot run in lockstep")

    def ls_store(self, s: N.Store, d: int, masks: list[str | None], k: int,
                 guard: N.ExprNode | None) -> None:
        """A store for all lanes: every value first, then one vector store where all lanes
        are on and the vector is aligned and in bounds, else each lane's own store (only
        where `guard`, vyre.lower's index test of a raw store, holds)."""
        ptr, n = self.mem(s.buffer)
        ty = self.buf_ty.get(s.buffer) or self.arr[s.buffer].ty
        slots = []
        ok: dict[str, str] = {}  # per lane (by its index slot): its guard, masked (pure)
        for j, m in enumerate(masks):
            self.per(j)
            si, sv = self.fresh("vy_si"), self.fresh("vy_sv")
            idx, val = self.expr(s.index), self.expr(s.value)
            if m is None:
                self.emit(d, f"const unsigned {si} = {idx}; const {CTYPE[ty]} {sv} = {val};")
            else:
                self.emit(d, f"unsigned {si} = 0u; {CTYPE[ty]} {sv}{{}};")
                self.emit(d, f"if ({m}) {{ {si} = {idx}; {sv} = {val}; }}")
            if guard is not None:
                test = self.expr(guard)
                ok[si] = test if m is None else f"{m} && {test}"
            slots.append((m, si, sv))
        self.sfx, self.cur_j = "", None
        v = self.vec
        if not (v and ty in VEC_TYPES and s.buffer in self.buf_ty
                and self.stride(s.index) == 1):
            v = 0
        for g in range(0, k, v or k):
            group = slots[g:g + v] if v else slots
            if v:  # all lanes on and the vector aligned and in bounds: one store
                c, pack = CTYPE[ty], f"vy_pack<{CTYPE[ty]}, {v}>"
                on = [m for m, _, _ in group if m is not None]
                cond = " && ".join([*on, f"vy_vok<{c}, {v}>({ptr}, {group[0][1]}, {n})"])
                self.emit(d, f"if ({cond}) {{")
                self.emit(d + 1, f"{pack} vy_pk; " + " ".join(
                    f"vy_pk.v[{ln}] = {sv};" for ln, (_, _, sv) in enumerate(group)))
                self.emit(d + 1, f"*reinterpret_cast<{pack}*>({ptr} + {group[0][1]}) = vy_pk;")
                self.emit(d, "} else {")
            for m, si, sv in group:  # all values first, then the stores
                on_j = ok[si] if guard is not None else m
                self.emit(d + (1 if v else 0),
                          f"{f'if ({on_j}) ' if on_j is not None else ''}{self.raw(s, si)} = {sv};")
            if v:
                self.emit(d, "}")


def _loaded(e: N.ExprNode) -> N.Load | None:
    """The load `e` is, else None: vyre.lower's guarded load (the IR's index test around a
    raw load)."""
    return guarded_load(e)


def _run_part(st: N.StmtNode, buffers: dict[str, ScalarType]
              ) -> tuple[str, N.ExprNode, int] | None:
    """(buffer, base, c) of a statement `x = buffer[base + c]` (u32 index, constant c)."""
    ld = _loaded(st.value) if isinstance(st, (N.Let, N.Assign)) else None
    if ld is None:
        return None
    ix = ld.index
    if ld.buffer not in buffers or ld.ty not in VEC_TYPES or not isinstance(ix, N.Binary) \
            or ix.op != "add" or ix.ty is not ST.U32 or not isinstance(ix.b, N.Const):
        return None
    return ld.buffer, ix.a, int(ix.b.value)


def _load_run(body: tuple[N.StmtNode, ...], i: int, buffers: dict[str, ScalarType]) -> int:
    """Length (4 or 2; 0: none) of a run body[i:] of statements x_l = buf[base + c + l],
    one buffer, one base, distinct targets none of which the base reads: what
    `_Gen.load_run` reads as one vector. Loads have no side effects and nothing in the run
    writes memory, so reading all lanes first is the statements' own result."""
    from vyre.ir.analysis import walk_expr

    head = _run_part(body[i], buffers)
    if head is None:
        return 0
    buf, base, c = head
    reads = {e.name for e in walk_expr(base) if isinstance(e, N.Var)}
    names: list[str] = []
    for want in (4, 2):
        # at most 16 bytes (one load instruction); a run starts at a multiple of its
        # length, where a base aligned to the vector puts the whole run in one vector
        if want * ARG_SIZE[buffers[buf]] > 16 or c % want:  # element bytes
            continue
        names.clear()
        for ln in range(want):
            st = body[i + ln] if i + ln < len(body) else None
            part = _run_part(st, buffers) if st is not None else None
            if part is None or part[0] != buf or part[1] != base or part[2] != c + ln:
                break
            name = st.name  # type: ignore[union-attr]
            if name in reads or name in names:
                break
            names.append(name)
        else:
            return want
    return 0


def lockstep_allowed(program: N.Program) -> bool:
    """Bodies of let / assign / store / if / atomic only (see _Gen.lockstep_kernel)."""
    from vyre.ir.analysis import walk_stmts

    ok = (N.Let, N.Assign, N.Store, N.If, N.Atomic)
    return all(isinstance(s, ok) for s in walk_stmts(program.body))


def coarsening_allowed(program: N.Program, factor: int) -> bool:
    """Whether each CUDA thread may run `factor` invocations of a workgroup in sequence.

    Only without barriers and workgroup arrays (invocations never wait for each other), and
    when the workgroup's x size splits into warps-sized thread groups.
    """
    if factor <= 1 or uses_subgroups(program):  # a warp's lanes must be invocations
        return False
    wx = program.workgroup_size[0]
    if program.workgroup_arrays or wx % factor or (wx // factor) % 32:
        return False
    from vyre.ir.analysis import walk_stmts

    return not any(isinstance(s, N.Barrier) for s in walk_stmts(program.body))


def generate(program: N.Program, restrict: bool = True, coarsen: int = 1,
             options: CudaOptions = DEFAULT_OPTIONS, indirect: bool = False) -> Generated:
    """CUDA C for `program`. `restrict=False` when buffer slots alias one buffer;
    `coarsen=k` runs k invocations per CUDA thread where `coarsening_allowed`; `options`:
    the printer's switches (options.py); `indirect=True`: the grid is read on the device
    (see _Gen.indirect_kernel)."""
    validate(program)  # every printer refuses a bad Program the same way: InvalidProgram
    check_fits(program, SUBGROUP_SIZE, "cuda")
    written, program = program, lower(program, TRAITS)
    # not where a function's exact definition (vyre.lower.maths) was inlined: its code is
    # hundreds of operations per call, which coarsening would copy k times (compute-bound
    # anyway, so there is little to gain; NVRTC took minutes over a 1.7 MB kernel)
    k = coarsen if coarsening_allowed(program, coarsen) and not lowered_calls(written) \
        and not indirect else 1
    wx, wy, wz = program.workgroup_size
    bx = wx // k
    merge = 1
    if k > 1 and options.lockstep and lockstep_allowed(program):  # (same for either lowering)
        program = lower(written, LOCKSTEP_TRAITS)
        if wy == wz == 1 and bx < options.merge_threads:
            merge = options.merge_threads // bx
    gen = _Gen(program, restrict, k, merge, options, indirect)
    src = gen.kernel()
    fns = gen.function_decls()
    src = src.replace(_PRELUDE_SLOT, prelude(src + fns) + gen.table_decls() + fns, 1)
    sig = KernelSignature(
        buffers=tuple(b.ty for b in program.buffers),
        params=tuple(q.ty for q in program.params),
        grid_x=merge > 1,
        indirect=indirect,
    )
    return Generated(source=src, signature=sig, block=(bx * merge, wy, wz), merge=merge)


def pack_params(sig: KernelSignature, values: tuple[bool | int | float, ...]) -> list[bytes]:
    """Each param's bytes (little-endian, its C type)."""
    out = []
    for ty, v in zip(sig.params, values):
        out.append(struct.pack(STRUCT_CODE[ty], v))
    return out
