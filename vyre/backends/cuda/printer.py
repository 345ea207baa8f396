"""The CUDA printer's spellings: each IR node kind of the lowered core as C.

`CudaPrinter` fills in vyre.backends.printer's skeleton (which walks the Program) with the
C of each expression and statement kind; vyre.lower has rewritten what C gets wrong into the
core before (see render.py). A run of statements loading consecutive elements
(x_l = buf[base + c + l]) is one vector load where aligned and in bounds, else the same
guarded scalar loads. The kernel around the body is render.py's; lockstep coarsening is
lockstep.py's. This module must never talk to NVRTC or the driver, and never emits
fast-math constructs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vyre.errors import InvalidProgram, UnsupportedFeature
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.analysis import walk_stmts
from vyre.ir.types import ScalarType
from vyre.lower import guarded_load
from vyre.subgroups import identity as sg_identity

from ..printer import Printer
from .options import DEFAULT_OPTIONS, CudaOptions
from .spelling import (
    ARG_SIZE,
    ARITH,
    BITS,
    CMP,
    CTYPE,
    F32_FN,
    F64_FN,
    ST,
    SUBGROUP_SIZE,
    UTYPE,
    VEC_TYPES,
    literal,
    mangle,
)

# a core function of at most this many statements is inlined at every call: a definition's
# common path with its slow path outlined (Builder.outlined) has 17-36 (hypot's 34); the
# f64 paths and the slow paths have hundreds
INLINE_STATEMENTS = 100
# a float table's C element type: its values' bits (CudaPrinter.table_decls)
_TABLE_CTYPE = {ScalarType.F32: "unsigned", ScalarType.F64: "unsigned long long"}


def _table_entry(v: float | int, ty: ScalarType) -> str:
    """One table entry: a float's bits (RN to f32 for an f32 table), else the literal."""
    if ty is ScalarType.F32:
        with np.errstate(over="ignore"):
            return f"0x{int(np.array(v, np.float32).view(np.uint32)):08x}u"
    if ty is ScalarType.F64:
        return f"0x{int(np.array(v, np.float64).view(np.uint64)):016x}ull"
    return literal(v, ty)


class CudaPrinter(Printer):
    """The C of the lowered core's nodes, for one kernel (its buffers, arrays, options)."""

    INDENT = "  "
    NAME = "the CUDA printer"

    def __init__(self, program: N.Program, restrict: bool, coarsen: int = 1,
                 merge: int = 1, options: CudaOptions = DEFAULT_OPTIONS,
                 indirect: bool = False) -> None:
        super().__init__()
        self.p = program
        self.options = options
        self.restrict = restrict
        self.coarsen = coarsen
        self.indirect = indirect
        self.merge = merge
        self.tx = "vy_tx" if merge > 1 else "threadIdx.x"  # thread index within a workgroup
        self.sfx = ""  # per-invocation name suffix in lockstep mode ("_0", "_1", ...)
        self.tmp = 0
        self.buf_ty = {b.name: b.ty for b in program.buffers}
        self.arr = {a.name: a for a in program.workgroup_arrays}
        # the core's constant tables (N.Table), one array each: (type, values) -> name
        self.tables: dict[tuple[ScalarType, tuple[float, ...] | tuple[int, ...]], str] = {}
        # the core's functions (N.Function): name -> [C text (None while printing), calls,
        # its inlining where fixed by the function alone], in the order their text was
        # finished (a function's callees before it)
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

    # ------------------------------------------------------------ leaves
    def const(self, e: N.Const, opaque: bool) -> str:
        return literal(e.value, e.ty)

    def var(self, e: N.Var, opaque: bool) -> str:
        return self.name_of(e.name)

    def param(self, e: N.Param, opaque: bool) -> str:
        return mangle("p", e.name)

    def builtin(self, e: N.Builtin, opaque: bool) -> str:
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

    def length(self, e: N.Length, opaque: bool) -> str:
        return self.mem(e.buffer)[1]

    # ------------------------------------------------------------ expressions
    def load(self, e: N.Load) -> str:
        return self.raw(e, self.expr(e.index))

    def select(self, e: N.Select) -> str:  # (a Guarded too: C's ?: evaluates only its choice)
        return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"

    def cast_node(self, e: N.Cast) -> str:
        return self.cast(self.expr(e.a), e.a.ty, e.ty)

    def bitcast_node(self, e: N.Bitcast) -> str:
        return self.bitcast(self.expr(e.a), e.a.ty, e.ty)

    def table_read(self, e: N.Table) -> str:
        read = f"{self.table(e)}[{self.expr(e.index)}]"
        if e.ty is ST.F32:  # (a float table holds its values' bits: table_decls)
            return f"__uint_as_float({read})"
        if e.ty is ST.F64:
            return f"__longlong_as_double((long long){read})"
        return read

    def invoke(self, e: N.Invoke) -> str:
        return f"{self.function(e.fn)}({', '.join(self.expr(a) for a in e.args)})"

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
        self.functions[fn.name] = [None, 1, None]

        def write() -> None:
            self.block(fn.body, 1)
            self.emit(1, f"return {self.expr(fn.result)};")

        body = self.capture(write)
        params = ", ".join(f"{CTYPE[t]} {self.name_of(p)}" for p, t in fn.params)
        entry = self.functions.pop(fn.name)  # (re-entered after the callees it printed)
        entry[0] = "\n".join([f"{CTYPE[fn.ty]} {name}({params}) {{", *body, "}"])
        small = sum(1 for _ in walk_stmts(fn.body)) <= INLINE_STATEMENTS
        # (None: decided by the number of calls, function_decls)
        entry[2] = "__noinline__" if fn.cold else "__forceinline__" if small else None
        self.functions[fn.name] = entry
        return name

    def function_decls(self) -> str:
        """The core's functions (vyre.lower.maths' definitions), each once: called once,
        or small (a definition's common path, whose slow path is a cold function of its
        own), NVRTC inlines it as it would the code in place, so a coarsened kernel runs
        its invocations' common paths without a call; a large one called more often, and
        a cold one, stays one function (`__noinline__`), so the kernel's size and compile
        time do not grow with the calls (a call costs a few instructions,
        docs/perf-notes.md)."""
        return "".join(
            f"__device__ {how or ('__noinline__' if calls > 1 else '__forceinline__')} {text}\n"
            for text, calls, how in self.functions.values())

    def table_decls(self) -> str:
        """The core's constant tables (vyre.lower.maths), in global memory: read through
        the L1 cache, where lanes that read different entries cost one cache line each
        (a `__constant__` array would serialise them). Aligned to 16 bytes, so reads of
        entries 2j and 2j + 1 (exp32's pairs) are one 8-byte load. A float table holds
        its values' bits (read back by `table_read`): every value, -0, a subnormal, an
        infinity or a NaN, is then a constant initializer, which a `__device__` array
        needs (`__uint_as_float(...)` in an initializer is refused by NVRTC)."""
        return "".join(
            f"__device__ __align__(16) const {_TABLE_CTYPE.get(ty, CTYPE[ty])} {name}"
            f"[{len(values)}] = {{{', '.join(_table_entry(v, ty) for v in values)}}};\n"
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
        if op in CMP and t is not ST.F16:
            return f"({a} {CMP[op]} {b})"
        # both sides are always evaluated (docs/IR.md), so the non-short-circuit forms
        # (as WGSL's): && would make NVRTC branch around a costly right side
        if op == "logical_and":
            return f"((bool)({a} & {b}))"
        if op == "logical_or":
            return f"((bool)({a} | {b}))"
        if op in ("shl", "shr"):
            raise self.unlowered(f"{op} on {t}")
        if op in BITS:
            return f"(({CTYPE[t]})({a} {BITS[op]} {b}))"
        if t.is_int:
            if op in ARITH:
                if not t.is_signed:  # unsigned C arithmetic already wraps
                    return f"({a} {ARITH[op]} {b})"
                u = UTYPE[t]
                return f"(({CTYPE[t]})(({u}){a} {ARITH[op]} ({u}){b}))"
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
            return f"vy_f2h({F32_FN[fn]}({fargs}))"
        table = F32_FN if t is ST.F32 else F64_FN
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
    def let_text(self, name: str, ty: ScalarType, value: str) -> str:
        return f"{CTYPE[ty]} {name} = {value};"

    def bind(self, name: str, value: N.ExprNode) -> str:
        return self.name_of(name)

    def rebind(self, name: str, value: N.ExprNode) -> str:
        return self.name_of(name)

    def store_text(self, s: N.Store, index: str, value: str) -> str:
        return f"{self.raw(s, index)} = {value};"

    def fresh(self, prefix: str) -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def run_at(self, body: tuple[N.StmtNode, ...], i: int, depth: int) -> int:
        run = _load_run(body, i, self.buf_ty) if self.options.vector_runs else 0
        if run:
            self.load_run(body[i:i + run], depth)
        return run

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

    def while_(self, s: N.While, d: int) -> None:
        self.emit(d, f"while ({self.expr(s.cond)}) {{")
        self.block(s.body, d + 1)
        self.emit(d, "}")

    def break_(self, s: N.Break, d: int) -> None:
        self.emit(d, "break;")

    def continue_(self, s: N.Continue, d: int) -> None:
        self.emit(d, "continue;")

    def return_(self, s: N.Return, d: int) -> None:
        self.emit(d, "goto vy_next;" if self.coarsen > 1 or self.indirect else "return;")

    def barrier(self, s: N.Barrier, d: int) -> None:
        self.emit(d, "__syncthreads();")

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

    LEAVES = {N.Const: const, N.Var: var, N.Param: param, N.Builtin: builtin,
              N.Length: length}
    EXPRESSIONS = {
        N.Load: load, N.Unary: unary, N.Binary: binary, N.Call: call, N.Select: select,
        N.Cast: cast_node, N.Bitcast: bitcast_node, N.Native: native, N.Table: table_read,
        N.Invoke: invoke, N.Subgroup: subgroup,
    }
    STATEMENTS = {N.For: for_, N.While: while_, N.Break: break_, N.Continue: continue_,
                  N.Return: return_, N.Barrier: barrier, N.Atomic: atomic}


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
    `CudaPrinter.load_run` reads as one vector. Loads have no side effects and nothing in the run
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

