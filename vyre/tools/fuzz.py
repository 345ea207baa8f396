"""Differential fuzzing: random valid Programs, run on every backend, checked against the
reference under the IR's comparison rules (docs/IR.md, vyre.tools.testing).

`cases(options)` is a Hypothesis strategy of `FuzzCase` values (a Program, its host inputs
and its DispatchConfig). Every generated Program is valid and deterministic by construction:

- expressions over every operator, cast, bitcast, select and call, on i32/u32/f32 (plus
  f16/f64/i64/u64 where every backend under test reports the feature);
- control flow: if/else, for loops with bounded trip counts, while loops with a counter and
  break/continue, early returns;
- loads and stores past the end of buffers (inputs of random size, including empty ones);
- workgroup memory written at every slot before a barrier and read (any slot) after it,
  barriers only in uniform control flow; workgroup atomics;
- atomics with order-independent results: one commutative op per accumulator buffer
  (add/min/max/and/or/xor), results unused; exchange / compare_exchange / RMW with a used
  result only on the invocation's own slots.

Every store lands on an index that is injective in the invocation (`gid * stride + slot`, or
an index past the end), so no two invocations race on one element. Approximate functions
(and, where a backend is only held to a ulp bound for them, float div/sqrt/rem) appear only
as the root of a value stored into a float buffer, so their error never feeds further
arithmetic and `vyre.tools.testing.tolerance_for` covers it. Bitcasts from floats read only
loaded values (computed NaN payloads and zero signs are not specified), and float min/max
results are canonicalised with `+ 0.0` (the sign of a zero result is unspecified).

`run_case` runs a case on the reference and on other backends and returns the disagreements;
`save_case` / `load_case` write and read regression files (tests/regressions/*.json: the
wire-format Program plus exact inputs and config).

This is test support: it must never be imported by production code, and it must never
generate a Program whose result depends on scheduling, or hide a disagreement.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from vyre.backend import BaseBackend
from vyre.config import DispatchConfig
from vyre.ir import nodes as N
from vyre.ir.serialize import from_json, to_json
from vyre.ir.types import ScalarType

from .testing import mismatches, random_array, reference_for, tolerance_for

T = ScalarType
BOOL, I32, U32, F32, F16, F64, I64, U64 = (
    T.BOOL, T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64,
)
CORE_TYPES = frozenset({I32, U32, F32})
CASE_FORMAT = "vyre.fuzz-case"
CASE_VERSION = 1
EXAMPLES_ENV = "VYRE_FUZZ_EXAMPLES"
DEFAULT_EXAMPLES = 40

settings.register_profile(
    "ci", max_examples=DEFAULT_EXAMPLES, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long", max_examples=2000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def fuzz_settings(max_examples: int | None = None, *, use_database: bool = True) -> settings:
    """Settings for a fuzz run: `max_examples` or $VYRE_FUZZ_EXAMPLES or 40; no deadline.

    Without `use_database`, earlier failures are not replayed first (long runs that collect
    several distinct failures)."""
    n = max_examples if max_examples is not None else int(
        os.environ.get(EXAMPLES_ENV, str(DEFAULT_EXAMPLES))
    )
    extra: dict[str, Any] = {} if use_database else {"database": None}
    # CI's profile (scripts/pytest_hypothesis_profile.py) may derandomize: honour it.
    extra["derandomize"] = bool(settings.default and settings.default.derandomize)
    return settings(
        settings.get_profile("ci"), max_examples=n, deadline=None, print_blob=True, **extra,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )


# ------------------------------------------------------------------ options


@dataclass(frozen=True)
class GenOptions:
    """What generated Programs may use (derived from the backends under test)."""

    types: frozenset[ScalarType] = CORE_TYPES
    workgroup_memory: bool = True
    atomics: bool = True
    atomic_types: frozenset[ScalarType] = frozenset({I32, U32})
    # Approximate functions to generate (a long run may leave out one with a known bug).
    approx_fns: frozenset[str] = N.APPROX_FNS
    # Float ops whose result is only ulp-bounded: allowed only as the root of a stored value.
    terminal_only: frozenset[str] = N.APPROX_FNS
    max_expr_depth: int = 4
    max_block_stmts: int = 4
    max_nesting: int = 3


def options_for(backends: Iterable[BaseBackend]) -> GenOptions:
    """The generator options every one of `backends` can run, under its tolerance rules."""
    feats: frozenset[str] | None = None
    terminal = set(N.APPROX_FNS)
    for b in backends:
        f = b.capabilities().features
        feats = f if feats is None else feats & f
        if b.kind == "wgpu":  # Vulkan promises div/sqrt to 2.5 ulp only (vyre.tools.testing)
            terminal |= {"div", "sqrt", "rem"}
    feats = feats or frozenset()
    types = set(CORE_TYPES)
    if "f16" in feats:
        types.add(F16)
    if "f64" in feats:
        types.add(F64)
    if "i64" in feats:
        types |= {I64, U64}
    return GenOptions(
        types=frozenset(types),
        workgroup_memory="workgroup_memory" in feats,
        atomics=True,
        atomic_types=frozenset({I32, U32} | ({I64, U64} if "atomic_i64" in feats else set())),
        terminal_only=frozenset(terminal),
    )


# ------------------------------------------------------------------ cases


@dataclass
class FuzzCase:
    """A Program with everything needed to dispatch it on the host path."""

    program: N.Program
    inputs: dict[str, np.ndarray]
    grid: tuple[int, int, int]
    params: dict[str, bool | int | float] = field(default_factory=dict)
    note: str = ""

    @property
    def config(self) -> DispatchConfig:
        return DispatchConfig(grid=self.grid, params=self.params)

    def __repr__(self) -> str:  # what Hypothesis prints for a falsifying example
        return f"FuzzCase(\n{case_to_json(self)}\n)"


def _enc_array(a: np.ndarray) -> dict[str, Any]:
    a = np.ascontiguousarray(a)
    out: dict[str, Any] = {
        "dtype": str(ScalarType.from_numpy(a.dtype)),
        "bytes": base64.b64encode(a.tobytes()).decode(),
    }
    if a.size <= 64:  # readable copy (the bytes are authoritative)
        out["values"] = [repr(x) for x in a.tolist()]
    return out


def _dec_array(d: dict[str, Any]) -> np.ndarray:
    ty = ScalarType(d["dtype"])
    raw = base64.b64decode(d["bytes"])
    return np.frombuffer(raw, dtype=ty.numpy).copy()


def case_to_json(case: FuzzCase) -> str:
    """A regression document: {"format": "vyre.fuzz-case", "program": <wire format>, ...}."""
    doc = {
        "format": CASE_FORMAT,
        "version": CASE_VERSION,
        "note": case.note,
        "grid": list(case.grid),
        "params": {
            k: {"ty": str(case.program.params[[p.name for p in case.program.params].index(k)].ty),
                "value": v}
            for k, v in case.params.items()
        },
        "inputs": {k: _enc_array(v) for k, v in case.inputs.items()},
        "program": json.loads(to_json(case.program)),
    }
    return json.dumps(doc, indent=1, allow_nan=True)


def case_from_json(text: str) -> FuzzCase:
    doc = json.loads(text)
    if doc.get("format") != CASE_FORMAT or doc.get("version") != CASE_VERSION:
        raise ValueError(f"not a {CASE_FORMAT} v{CASE_VERSION} document")
    program = from_json(json.dumps(doc["program"], allow_nan=True))
    grid = tuple(int(x) for x in doc["grid"])
    params = {k: v["value"] for k, v in doc["params"].items()}
    inputs = {k: _dec_array(v) for k, v in doc["inputs"].items()}
    return FuzzCase(program, inputs, cast(tuple[int, int, int], grid), params,
                    doc.get("note", ""))


def save_case(case: FuzzCase, directory: str | Path, note: str = "") -> Path:
    """Write `case` as `<dir>/<program hash prefix>.json` (idempotent); returns the path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if note:
        case.note = note
    digest = case.program.content_hash[:16]
    path = d / f"fuzz_{digest}.json"
    path.write_text(case_to_json(case) + "\n")
    return path


def load_case(path: str | Path) -> FuzzCase:
    return case_from_json(Path(path).read_text())


# ------------------------------------------------------------------ comparing


@dataclass
class Disagreement:
    backend: str
    buffer: str | None  # None: the backend raised instead of returning results
    message: str

    def __str__(self) -> str:
        where = f"buffer {self.buffer!r}" if self.buffer else "dispatch"
        return f"{self.backend}, {where}: {self.message}"


def run_case(
    case: FuzzCase, reference: BaseBackend, others: Sequence[BaseBackend]
) -> list[Disagreement]:
    """Run `case` on the reference and on each of `others`; every disagreement, listed.

    The reference must run the case (an exception there propagates: a valid Program must
    run). Another backend raising is a disagreement (with the exception as the message).
    Each backend is compared with the reference in its float mode (testing.reference_for).
    """
    by_ref = {reference.id: reference.dispatch(case.program, case.inputs, case.config)}
    out: list[Disagreement] = []
    for b in others:
        ref = reference_for(b, reference)
        if ref.id not in by_ref:
            by_ref[ref.id] = ref.dispatch(case.program, case.inputs, case.config)
        expected = by_ref[ref.id]
        try:
            got = b.dispatch(case.program, case.inputs, case.config)
        except Exception as exc:
            out.append(Disagreement(b.id, None, f"{type(exc).__name__}: {exc}"))
            continue
        tol = tolerance_for(case.program, b.kind)
        for name, exp in expected.items():
            g = got.get(name)
            if g is None:
                out.append(Disagreement(b.id, name, "missing from the results"))
                continue
            try:
                bad = mismatches(g, exp, tol)
            except AssertionError as exc:
                out.append(Disagreement(b.id, name, str(exc)))
                continue
            if bad.size:
                shown = ", ".join(
                    f"[{i}] got {g[i]!r} expected {exp[i]!r}" for i in bad[:6]
                )
                out.append(Disagreement(
                    b.id, name, f"{bad.size} of {exp.size} elements disagree ({tol}): {shown}"
                ))
    return out


# ------------------------------------------------------------------ the generator

_INT_SPECIALS: dict[ScalarType, list[int]] = {
    I32: [0, 1, -1, 2, 7, -8, 31, 32, 33, 2**31 - 1, -(2**31), 12345, -100000],
    U32: [0, 1, 2, 3, 7, 31, 32, 33, 2**31, 2**32 - 1, 2**31 - 1, 65536, 123456789],
    I64: [0, 1, -1, 63, 64, 2**63 - 1, -(2**63), 2**32, -(2**32) - 1, 2**31],
    U64: [0, 1, 63, 64, 2**64 - 1, 2**63, 2**32, 2**32 - 1],
}
_FLOAT_SPECIALS = [
    0.0, 1.0, -1.0, 0.5, -0.0, 2.0, 1.5, -2.5, 3.0, 100.0, 0.1, -7.75, 1e10, -1e-3,
    float("inf"), float("-inf"), float("nan"), 3.4e38, 1e-30, 16777217.0, 2147483648.0,
    -2147483904.0, 4294967296.0, 65504.0, 1e-40,
]


def _range(ty: ScalarType) -> tuple[int, int]:
    info = np.iinfo(ty.numpy)
    return int(info.min), int(info.max)


class _Local:
    __slots__ = ("mutable", "name", "ty")

    def __init__(self, name: str, ty: ScalarType, mutable: bool) -> None:
        self.name = name
        self.ty = ty
        self.mutable = mutable


@dataclass
class _Strided:
    """A buffer written at `gid * stride + slot` (one owner per element)."""

    decl: N.BufferDecl
    stride: int


class _Gen:
    """Draws one Program. Declarations are made lazily as the body asks for them."""

    def __init__(self, draw: st.DrawFn, opts: GenOptions) -> None:
        self.draw = draw
        self.o = opts
        self.types = sorted(opts.types, key=lambda t: ["i32", "u32", "f32", "f16", "f64",
                                                       "i64", "u64"].index(t.value))
        self.n = 0
        self.scopes: list[list[_Local]] = [[]]
        self.inputs: dict[ScalarType, N.BufferDecl] = {}
        self.outs: dict[ScalarType, _Strided] = {}
        self.rws: dict[ScalarType, _Strided] = {}
        self.accs: dict[tuple[str, ScalarType], N.BufferDecl] = {}
        self.params: dict[ScalarType, N.ParamDecl] = {}
        self.arrays: list[N.WorkgroupArray] = []
        self.loop_depth = 0
        self.nesting = 0
        self.gid = N.Var(name="gid", ty=U32)

    # -- small draws
    def pick(self, xs: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(xs)))

    def int_(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        """True with probability about p (shrinks to False)."""
        return self.draw(st.integers(0, 999)) >= int(1000 * (1 - p))

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    # -- locals
    def visible(self, ty: ScalarType | None = None, mutable: bool = False) -> list[_Local]:
        out = [x for s in self.scopes for x in s]
        if ty is not None:
            out = [x for x in out if x.ty is ty]
        if mutable:
            out = [x for x in out if x.mutable]
        return out

    def declare(self, name: str, ty: ScalarType, mutable: bool = True) -> None:
        self.scopes[-1].append(_Local(name, ty, mutable))

    # -- declarations (lazy)
    def input_buf(self, ty: ScalarType) -> N.BufferDecl:
        if ty not in self.inputs:
            self.inputs[ty] = N.BufferDecl(name=f"in_{ty}", ty=ty, access="read")
        return self.inputs[ty]

    def out_buf(self, ty: ScalarType) -> _Strided:
        if ty not in self.outs:
            self.outs[ty] = _Strided(N.BufferDecl(name=f"out_{ty}", ty=ty, access="write"),
                                     self.int_(1, 3))
        return self.outs[ty]

    def rw_buf(self, ty: ScalarType) -> _Strided:
        if ty not in self.rws:
            self.rws[ty] = _Strided(N.BufferDecl(name=f"rw_{ty}", ty=ty, access="read_write"),
                                    self.int_(1, 2))
        return self.rws[ty]

    def acc_buf(self, op: str, ty: ScalarType) -> N.BufferDecl:
        key = (op, ty)
        if key not in self.accs:
            self.accs[key] = N.BufferDecl(name=f"acc_{op}_{ty}", ty=ty, access="read_write")
        return self.accs[key]

    def param(self, ty: ScalarType) -> N.Param:
        if ty not in self.params:
            self.params[ty] = N.ParamDecl(name=f"p_{ty}", ty=ty)
        return N.Param(name=f"p_{ty}", ty=ty)

    # -- literals
    def const(self, ty: ScalarType) -> N.Const:
        if ty is BOOL:
            return N.Const(ty=BOOL, value=self.draw(st.booleans()))
        if ty.is_int:
            lo, hi = _range(ty)
            if self.chance(0.6):
                v = self.pick([x for x in _INT_SPECIALS[ty] if lo <= x <= hi])
            else:
                v = self.int_(lo, hi)
            return N.Const(ty=ty, value=v)
        if self.chance(0.7):
            f = self.pick(_FLOAT_SPECIALS)
        else:
            f = self.draw(st.floats(width=32 if ty is not F64 else 64, allow_nan=False))
        with np.errstate(over="ignore"):  # a special past the type's range means its inf:
            r = float(ty.numpy.type(f))   # literals that overflow are refused, not rounded
        return N.Const(ty=ty, value=r if math.isinf(r) else float(f))

    def lit(self, ty: ScalarType, v: int | float | bool) -> N.Const:
        return N.Const(ty=ty, value=v)

    # -- expressions
    def value_types(self) -> list[ScalarType]:
        return self.types

    def leaf(self, ty: ScalarType) -> N.ExprNode:
        opts: list[str] = ["const"]
        if self.visible(ty):
            opts += ["var", "var"]
        if ty is not BOOL:
            opts += ["param", "load"]
        if ty is U32:
            opts += ["gid", "builtin", "length"]
        if ty is BOOL:
            opts += ["cmp"]
        k = self.pick(opts)
        if k == "const":
            return self.const(ty)
        if k == "var":
            loc = self.pick(self.visible(ty))
            return N.Var(name=loc.name, ty=ty)
        if k == "param":
            return self.param(ty)
        if k == "load":
            return self.load_input(ty, 0)
        if k == "gid":
            return self.gid
        if k == "builtin":
            name = self.pick(["global_id", "local_id", "workgroup_id", "num_workgroups",
                              "local_index"])
            axis = 0 if name == "local_index" else self.int_(0, 2)
            return N.Builtin(name=name, axis=axis)
        if k == "length":
            names = [d.name for d in self.all_buffers()] + [a.name for a in self.arrays]
            if not names:
                return N.Length(buffer=self.input_buf(self.pick(self.types)).name)
            return N.Length(buffer=self.pick(names))
        # cmp
        t = self.pick(self.types)
        return N.Binary(op=self.pick(sorted(N.COMPARISON_OPS)), a=self.leaf(t), b=self.leaf(t),
                        ty=BOOL)

    def index(self, depth: int) -> N.ExprNode:
        """A u32 index, often near gid (in bounds or just past the end), sometimes wild."""
        k = self.pick(["gid", "gid_plus", "expr", "neg", "big"])
        if k == "gid":
            return self.gid
        if k == "gid_plus":
            return N.Binary(op="add", a=self.gid, b=self.lit(U32, self.int_(0, 9)), ty=U32)
        if k == "neg":  # a negative i32 index: huge as u32, out of bounds
            return N.Bitcast(a=self.expr(I32, depth - 1), ty=U32)
        if k == "big":
            return N.Binary(op="sub", a=self.lit(U32, 2**32 - 1), b=self.gid, ty=U32)
        return self.expr(U32, depth - 1)

    def load_input(self, ty: ScalarType, depth: int) -> N.Load:
        buf = self.input_buf(ty)
        idx = self.index(depth) if depth > 0 else self.pick([self.gid, self.lit(U32, 0)])
        return N.Load(buffer=buf.name, index=idx, ty=ty)

    def expr(self, ty: ScalarType, depth: int, terminal: bool = False) -> N.ExprNode:
        """An expression of type `ty`; `terminal`: its value is stored directly (no further
        arithmetic), so ulp-bounded float ops may sit at its root."""
        if depth <= 0 or not self.chance(0.75):
            return self.leaf(ty)
        d = depth - 1
        if terminal and ty.is_float and self.chance(0.3):
            return self.inexact_root(ty, d)
        kinds = ["leaf", "binary", "select", "cast"]
        if ty is BOOL:
            kinds += ["cmp", "cmp", "logical", "not"]
        elif ty.is_int:
            kinds += ["binary", "bitwise", "shift", "unary", "call", "bitcast"]
        else:
            kinds += ["binary", "unary", "call", "call", "bitcast_in"]
            if terminal:
                kinds += ["inexact"]
        k = self.pick(kinds)
        if k == "leaf":
            return self.leaf(ty)
        if k == "binary":
            if ty is BOOL:
                return self.expr(BOOL, d)
            return self.arith(ty, d)
        if k == "select":
            return N.Select(cond=self.expr(BOOL, d), a=self.expr(ty, d), b=self.expr(ty, d),
                            ty=ty)
        if k == "cast":
            src = self.pick([t for t in [*self.types, BOOL] if t is not ty] or [ty])
            return N.Cast(a=self.expr(src, d), ty=ty)
        if k == "cmp":
            t = self.pick(self.types)
            op = self.pick(sorted(N.COMPARISON_OPS))
            return N.Binary(op=op, a=self.expr(t, d), b=self.expr(t, d), ty=BOOL)
        if k == "logical":
            op = self.pick(["logical_and", "logical_or", "eq", "ne"])
            return N.Binary(op=op, a=self.expr(BOOL, d), b=self.expr(BOOL, d), ty=BOOL)
        if k == "not":
            return N.Unary(op="not", a=self.expr(BOOL, d), ty=BOOL)
        if k == "bitwise":
            return N.Binary(op=self.pick(["and", "or", "xor"]), a=self.expr(ty, d),
                            b=self.expr(ty, d), ty=ty)
        if k == "shift":
            return N.Binary(op=self.pick(["shl", "shr"]), a=self.expr(ty, d),
                            b=self.expr(U32, d), ty=ty)
        if k == "unary":
            ops = ["bit_not"] if ty.is_int else []
            if ty.is_signed or ty.is_float:
                ops.append("neg")
            return N.Unary(op=self.pick(ops), a=self.expr(ty, d), ty=ty)
        if k == "call":
            return self.call(ty, d)
        if k == "bitcast":  # int <- same-width type (floats only from loads: exact bits)
            srcs = [t for t in self.types if t.bits == ty.bits and t is not ty]
            if not srcs:
                return self.leaf(ty)
            src = self.pick(srcs)
            a = self.load_input(src, d) if src.is_float else self.expr(src, d)
            return N.Bitcast(a=a, ty=ty)
        if k == "bitcast_in":  # float <- int bits
            srcs = [t for t in self.types if t.bits == ty.bits and t.is_int]
            if not srcs:
                return self.leaf(ty)
            return N.Bitcast(a=self.expr(self.pick(srcs), d), ty=ty)
        return self.inexact_root(ty, d)

    def inexact_root(self, ty: ScalarType, d: int) -> N.ExprNode:
        """An approximate call, or a float div/rem/sqrt (ulp-bounded on some backends)."""
        fn = self.pick([*sorted(self.o.approx_fns), "div", "rem", "sqrt"])
        if fn in ("div", "rem"):
            return N.Binary(op=fn, a=self.expr(ty, d), b=self.expr(ty, d), ty=ty)
        args = tuple(self.expr(ty, d) for _ in range(N.FN_ARITY[fn]))
        return N.Call(fn=fn, args=args, ty=ty)

    def arith(self, ty: ScalarType, d: int) -> N.ExprNode:
        ops = ["add", "sub", "mul", "min", "max"]
        if ty.is_int:
            ops += ["div", "rem"]
        else:
            ops += [o for o in ("div", "rem") if o not in self.o.terminal_only]
        op = self.pick(ops)
        e: N.ExprNode = N.Binary(op=op, a=self.expr(ty, d), b=self.expr(ty, d), ty=ty)
        if ty.is_float and op in ("min", "max"):
            e = N.Binary(op="add", a=e, b=self.lit(ty, 0.0), ty=ty)  # -0 -> +0
        return e

    def call(self, ty: ScalarType, d: int) -> N.ExprNode:
        fns = ["abs", "clamp"]
        if ty.is_float:
            fns += ["floor", "ceil", "trunc", "round", "fma"]
            if "sqrt" not in self.o.terminal_only:
                fns.append("sqrt")
        fn = self.pick(fns)
        args = tuple(self.expr(ty, d) for _ in range(N.FN_ARITY[fn]))
        e: N.ExprNode = N.Call(fn=fn, args=args, ty=ty)
        if fn == "clamp" and ty.is_float:
            e = N.Binary(op="add", a=e, b=self.lit(ty, 0.0), ty=ty)
        return e

    # -- statements
    def all_buffers(self) -> list[N.BufferDecl]:
        return (list(self.inputs.values()) + [s.decl for s in self.outs.values()]
                + [s.decl for s in self.rws.values()] + list(self.accs.values()))

    def slot_index(self, buf: _Strided, oob: bool) -> N.ExprNode:
        slot = self.int_(0, buf.stride - 1)
        base = N.Binary(op="mul", a=self.gid, b=self.lit(U32, buf.stride), ty=U32)
        idx: N.ExprNode = N.Binary(op="add", a=base, b=self.lit(U32, slot), ty=U32)
        if oob:  # certainly past the end: count + own index (no wrap: counts are small)
            idx = N.Binary(op="add", a=idx, b=N.Length(buffer=buf.decl.name), ty=U32)
        return idx

    def block(self, allow_return: bool = True) -> tuple[N.StmtNode, ...]:
        self.scopes.append([])
        self.nesting += 1
        try:
            n = self.int_(1, self.o.max_block_stmts)
            return tuple(s for _ in range(n) for s in self.stmt(allow_return))
        finally:
            self.nesting -= 1
            self.scopes.pop()

    def stmt(self, allow_return: bool = True) -> list[N.StmtNode]:
        kinds = ["store", "let", "store", "let"]
        if self.visible(mutable=True):
            kinds.append("assign")
        if self.nesting < self.o.max_nesting:
            kinds += ["if", "for", "while"]
        if self.o.atomics:
            kinds += ["atomic", "atomic_own"]
        kinds += ["rw"]
        if self.loop_depth:
            kinds += ["break", "continue"]
        if allow_return:
            kinds.append("return")
        k = self.pick(kinds)
        depth = self.o.max_expr_depth
        if k == "store":
            ty = self.pick(self.types)
            buf = self.out_buf(ty)
            oob = self.chance(0.1)
            return [N.Store(buffer=buf.decl.name, index=self.slot_index(buf, oob),
                            value=self.expr(ty, depth, terminal=True))]
        if k == "let":
            ty = self.pick([*self.types, BOOL])
            name = self.fresh("v")
            s = N.Let(name=name, value=self.expr(ty, depth))
            self.declare(name, ty)
            return [s]
        if k == "assign":
            loc = self.pick(self.visible(mutable=True))
            return [N.Assign(name=loc.name, value=self.expr(loc.ty, depth))]
        if k == "if":
            cond = self.expr(BOOL, depth)
            then = self.block(allow_return)
            orelse = self.block(allow_return) if self.chance(0.5) else ()
            return [N.If(cond=cond, then=then, orelse=orelse)]
        if k == "for":
            return [self.for_(allow_return)]
        if k == "while":
            return self.while_(allow_return)
        if k == "atomic":
            return [self.atomic_shared()]
        if k == "atomic_own":
            return self.atomic_own()
        if k == "rw":
            return self.rw_stmt()
        if k == "break":
            return [N.If(cond=self.expr(BOOL, 2), then=(N.Break(),))] if self.chance(0.7) \
                else [N.Break()]
        if k == "continue":
            return [N.If(cond=self.expr(BOOL, 2), then=(N.Continue(),))]
        # return: mostly conditional
        if self.chance(0.8):
            return [N.If(cond=self.expr(BOOL, 2), then=(N.Return(),))]
        return [N.Return()]

    def for_(self, allow_return: bool) -> N.For:
        ty = self.pick([U32, I32])
        step = self.int_(1, 3)
        var = self.fresh("i")
        if ty is U32:  # start in 0..4, end in 0..8 (or a bounded expression)
            start: N.ExprNode = N.Binary(op="rem", a=self.expr(U32, 2), b=self.lit(U32, 5),
                                         ty=U32)
            end: N.ExprNode = self.lit(U32, self.int_(0, 8))
            if self.chance(0.3):
                end = N.Binary(op="rem", a=self.expr(U32, 2), b=self.lit(U32, 9), ty=U32)
        else:  # start in -4..4, end in -3..8
            start = N.Binary(op="rem", a=self.expr(I32, 2), b=self.lit(I32, 5), ty=I32)
            end = self.lit(I32, self.int_(-3, 8))
        self.loop_depth += 1
        self.scopes.append([_Local(var, ty, False)])
        try:
            body = self.block(allow_return)
        finally:
            self.scopes.pop()
            self.loop_depth -= 1
        return N.For(var=var, ty=ty, start=start, end=end, step=step, body=body)

    def while_(self, allow_return: bool) -> list[N.StmtNode]:
        c = self.fresh("c")
        limit = self.int_(0, 6)
        cond: N.ExprNode = N.Binary(op="lt", a=N.Var(name=c, ty=U32), b=self.lit(U32, limit),
                                    ty=BOOL)
        if self.chance(0.4):
            cond = N.Binary(op="logical_and", a=cond, b=self.expr(BOOL, 2), ty=BOOL)
        self.declare(c, U32, mutable=False)  # read-only for the body: it bounds the loop
        inc = N.Assign(name=c, value=N.Binary(op="add", a=N.Var(name=c, ty=U32),
                                              b=self.lit(U32, 1), ty=U32))
        self.loop_depth += 1
        try:
            body = self.block(allow_return)
        finally:
            self.loop_depth -= 1
        return [N.Let(name=c, value=self.lit(U32, 0)), N.While(cond=cond, body=(inc, *body))]

    def int_types(self) -> list[ScalarType]:
        """Element types atomics may use here."""
        return [t for t in self.types if t in self.o.atomic_types] or [U32]

    def atomic_shared(self) -> N.Atomic:
        """A commutative RMW into an accumulator shared by all invocations; result unused."""
        ty = self.pick(self.int_types())
        op = self.pick(["add", "min", "max", "and", "or", "xor"])
        buf = self.acc_buf(op, ty)
        idx = self.pick(["small", "wild"])
        index = (N.Binary(op="rem", a=self.expr(U32, 2), b=self.lit(U32, 8), ty=U32)
                 if idx == "small" else self.index(2))
        return N.Atomic(op=op, buffer=buf.name, index=index, value=self.expr(ty, 3))

    def atomic_own(self) -> list[N.StmtNode]:
        """An RMW on this invocation's own slot, whose old value is used (deterministic)."""
        ty = self.pick(self.int_types())
        buf = self.rw_buf(ty)
        op = self.pick(["exchange", "compare_exchange", "add", "min", "max", "and", "or",
                        "xor"])
        res = self.fresh("old")
        comparand = self.expr(ty, 2) if op == "compare_exchange" else None
        if comparand is not None and self.chance(0.5):  # make the compare succeed sometimes
            comparand = N.Load(buffer=buf.decl.name, index=self.slot_index(buf, False), ty=ty)
        a = N.Atomic(op=op, buffer=buf.decl.name, index=self.slot_index(buf, self.chance(0.1)),
                     value=self.expr(ty, 3), comparand=comparand, result=res)
        self.declare(res, ty, mutable=False)
        return [a]

    def rw_stmt(self) -> list[N.StmtNode]:
        """Store to / load from this invocation's own slots of a read_write buffer."""
        ty = self.pick(self.types)
        buf = self.rw_buf(ty)
        if self.chance(0.5):
            return [N.Store(buffer=buf.decl.name, index=self.slot_index(buf, self.chance(0.1)),
                            value=self.expr(ty, self.o.max_expr_depth, terminal=True))]
        name = self.fresh("r")
        self.declare(name, ty)
        return [N.Let(name=name, value=N.Load(buffer=buf.decl.name,
                                              index=self.slot_index(buf, self.chance(0.1)),
                                              ty=ty))]

    def workgroup_phase(self, invocations: int) -> list[N.StmtNode]:
        """Uniform prologue: write every slot, barrier, read any slot; workgroup atomics."""
        out: list[N.StmtNode] = []
        li = N.Builtin(name="local_index")
        rounds = self.int_(1, 2)
        ty = self.pick(self.types)
        arr = N.WorkgroupArray(name=self.fresh("sh"), ty=ty, count=invocations)
        self.arrays.append(arr)
        for r in range(rounds):
            if r:
                out.append(N.Barrier())  # reads of the last round finish before rewriting
            out.append(N.Store(buffer=arr.name, index=li, value=self.expr(ty, 3)))
            out.append(N.Barrier())
            k = self.pick(["neighbour", "xor", "wild"])
            if k == "neighbour":
                idx: N.ExprNode = N.Binary(
                    op="rem",
                    a=N.Binary(op="add", a=li, b=self.lit(U32, self.int_(1, 64)), ty=U32),
                    b=self.lit(U32, invocations), ty=U32)
            elif k == "xor":
                idx = N.Binary(op="xor", a=li, b=self.lit(U32, self.int_(1, 64)), ty=U32)
            else:  # any index: every slot < count was written, the rest read 0
                idx = self.expr(U32, 2)
            name = self.fresh("w")
            out.append(N.Let(name=name, value=N.Load(buffer=arr.name, index=idx, ty=ty)))
            self.declare(name, ty)
        if self.o.atomics and self.chance(0.5):
            aty = self.pick(self.int_types())
            op = self.pick(["add", "min", "max", "and", "or", "xor"])
            acc = N.WorkgroupArray(name=self.fresh("sa"), ty=aty, count=invocations)
            self.arrays.append(acc)
            out.append(N.Store(buffer=acc.name, index=li, value=self.expr(aty, 2)))
            out.append(N.Barrier())
            for _ in range(self.int_(1, 2)):
                aidx = self.pick([
                    N.Binary(op="rem", a=self.expr(U32, 2), b=self.lit(U32, 4), ty=U32),
                    self.expr(U32, 2),
                ])
                out.append(N.Atomic(op=op, buffer=acc.name, index=aidx,
                                    value=self.expr(aty, 2)))
            out.append(N.Barrier())
            name = self.fresh("w")
            out.append(N.Let(name=name, value=N.Load(buffer=acc.name,
                                                     index=self.expr(U32, 1), ty=aty)))
            self.declare(name, aty)
        return out

    def program(self, workgroup_size: tuple[int, int, int]) -> N.Program:
        wx, wy, wz = workgroup_size
        inv = wx * wy * wz
        nwg = [N.Builtin(name="num_workgroups", axis=a) for a in range(3)]
        wid = [N.Builtin(name="workgroup_id", axis=a) for a in range(3)]

        def mul(a: N.ExprNode, b: N.ExprNode) -> N.ExprNode:
            return N.Binary(op="mul", a=a, b=b, ty=U32)

        def add(a: N.ExprNode, b: N.ExprNode) -> N.ExprNode:
            return N.Binary(op="add", a=a, b=b, ty=U32)

        wlin = add(add(wid[0], mul(wid[1], nwg[0])), mul(wid[2], mul(nwg[0], nwg[1])))
        gid_value = add(mul(wlin, self.lit(U32, inv)), N.Builtin(name="local_index"))
        body: list[N.StmtNode] = [N.Let(name="gid", value=gid_value)]
        self.declare("gid", U32, mutable=False)
        if self.o.workgroup_memory and self.chance(0.35):
            body += self.workgroup_phase(inv)
        n = self.int_(1, self.o.max_block_stmts + 2)
        for _ in range(n):
            body += self.stmt(allow_return=True)
        # Always store something, so every case has an output to compare.
        ty = self.pick(self.types)
        buf = self.out_buf(ty)
        body.append(N.Store(buffer=buf.decl.name, index=self.slot_index(buf, False),
                            value=self.expr(ty, self.o.max_expr_depth, terminal=True)))
        return N.Program(
            name=f"fuzz_{self.n}",
            workgroup_size=workgroup_size,
            buffers=tuple(self.all_buffers()),
            params=tuple(self.params.values()),
            workgroup_arrays=tuple(self.arrays),
            body=tuple(body),
        )


_WORKGROUP_SIZES = [(1, 1, 1), (4, 1, 1), (8, 1, 1), (32, 1, 1), (64, 1, 1), (2, 2, 1),
                    (4, 2, 2), (3, 1, 1), (5, 3, 1), (16, 1, 1)]


@st.composite
def _cases(draw: st.DrawFn, opts: GenOptions) -> FuzzCase:
    g = _Gen(draw, opts)
    ws = draw(st.sampled_from(_WORKGROUP_SIZES))
    grid = (draw(st.integers(1, 3)), draw(st.sampled_from([1, 1, 2])),
            draw(st.sampled_from([1, 1, 1, 2])))
    program = g.program(ws)
    total = ws[0] * ws[1] * ws[2] * grid[0] * grid[1] * grid[2]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs: dict[str, np.ndarray] = {}
    for ty, d in g.inputs.items():
        n = draw(st.sampled_from([total, total, 0, 1, max(total // 2, 1), total + 5]))
        inputs[d.name] = random_array(rng, ty, n)
    for group in (g.outs, g.rws):
        for ty, s in group.items():
            full = total * s.stride
            n = draw(st.sampled_from([full, full, full + 3, max(full - 7, 0), full // 2]))
            inputs[s.decl.name] = random_array(rng, ty, n)
    for (_, ty), d in g.accs.items():
        inputs[d.name] = random_array(rng, ty, draw(st.sampled_from([8, 8, 3, 1, 0])))
    params: dict[str, bool | int | float] = {}
    for ty, p in g.params.items():
        params[p.name] = g.const(ty).value
    return FuzzCase(program, inputs, grid, params)


def cases(opts: GenOptions | None = None) -> st.SearchStrategy[FuzzCase]:
    """Hypothesis strategy of valid, deterministic FuzzCases (see the module docstring)."""
    return _cases(opts or GenOptions())


# ------------------------------------------------------------------ driving


def available_instances(
    create: Callable[[str], BaseBackend] | None = None,
) -> tuple[BaseBackend, list[BaseBackend], dict[str, str]]:
    """(reference, [other available backends], {unavailable name: reason}) instances."""
    from vyre.registry import available_backends, get_backend

    make = create or get_backend
    ref = make("reference")
    others: list[BaseBackend] = []
    skipped: dict[str, str] = {}
    for a in available_backends():
        if a.name == "reference":
            continue
        if not a.available:
            skipped[a.name] = a.reason
            continue
        try:
            others.append(make(a.name))
        except Exception as exc:
            skipped[a.name] = f"{type(exc).__name__}: {exc}"
    return ref, others, skipped


def regressions_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "tests" / "regressions"


def check_case(
    case: FuzzCase, reference: BaseBackend, others: Sequence[BaseBackend]
) -> list[Disagreement]:
    """`run_case` plus the wire-format round trip of the case (Program and inputs)."""
    again = case_from_json(case_to_json(case))
    if again.program != case.program:
        return [Disagreement("wire format", None, "from_json(to_json(p)) != p")]
    for k, v in case.inputs.items():
        if again.inputs[k].tobytes() != v.tobytes():
            return [Disagreement("fuzz-case format", k, "inputs do not round-trip")]
    return run_case(case, reference, others)


def fuzz_backends(
    reference: BaseBackend,
    others: Sequence[BaseBackend],
    *,
    max_examples: int | None = None,
    options: GenOptions | None = None,
    save_dir: str | Path | None = None,
    use_database: bool = True,
) -> int:
    """Differential-fuzz `others` against `reference`; returns the number of cases run.

    On a disagreement Hypothesis shrinks the case; the minimal one is saved under
    `save_dir` (unless None) and an AssertionError names the file and the disagreement.
    """
    from hypothesis import given

    opts = options or options_for([reference, *others])
    ran = [0]
    failure: list[tuple[FuzzCase, str]] = []

    @fuzz_settings(max_examples, use_database=use_database)
    @given(cases(opts))
    def one(case: FuzzCase) -> None:
        ran[0] += 1
        try:
            bad = check_case(case, reference, others)
        except Exception as exc:  # the reference (or the wire format) failed on a valid case
            failure[:] = [(case, f"{type(exc).__name__}: {exc}")]
            raise
        if bad:
            msg = "; ".join(str(b) for b in bad)
            failure[:] = [(case, msg)]
            raise AssertionError(msg)

    try:
        one()
    except Exception:
        if failure and save_dir is not None:
            case, msg = failure[0]  # the last failing example run: the shrunk one
            path = save_case(case, save_dir, note=msg[:2000])
            raise AssertionError(
                f"differential fuzzing found a disagreement; the shrunk case is saved as "
                f"{path} (replayed by tests/test_regressions.py): {msg[:2000]}"
            ) from None
        raise
    return ran[0]


__all__ = [
    "CASE_FORMAT", "Disagreement", "FuzzCase", "GenOptions", "available_instances",
    "case_from_json", "case_to_json", "cases", "check_case", "fuzz_backends", "fuzz_settings",
    "load_case", "options_for", "regressions_dir", "run_case", "save_case",
]
