"""Differential fuzzing: random valid Programs, run on every backend, checked against the
reference under the IR's comparison rules (docs/IR.md, vyre.tools.testing). This is the one
random-program generator: `cases(options)` (a Hypothesis strategy of `FuzzCase` values: a
Program, its host inputs and its DispatchConfig) and `programs(options)` (their Programs) are
what the fuzz, wire-format, CUDA-compile and reference tests draw from; `operator_cases`
(the operator sweep) draws one Program that applies every operator, function, cast and
bitcast to every value type over every pair of edge values, so that a single wrong
operator fails every draw (random programs reach a given operator on a given type with a
telling operand pair too rarely). Every generated Program is valid and deterministic by
construction:

- expressions over every operator, cast, bitcast, select and call, on i32/u32/f32 (plus
  f16/f64/i64/u64 where every backend under test reports the feature); float constants and
  inputs span the whole exponent range (subnormals, +-max, overflow), with x/x, exact integer
  quotients (33/33, q*k/k, scaled by a power of two anywhere in the range, often cast to an
  int), float rem and sqrt feeding further arithmetic, values widened to i64/u64 (abs(i64(x))),
  approximate functions at +-0 and other special arguments;
- control flow: if/else, for loops with bounded trip counts, while loops with a counter and
  break/continue, early returns; now and then one long loop (a For, two nested Fors or a While
  of 65,534 to 70,002 iterations per invocation, counted in an output);
- loads and stores past the end of buffers (inputs of random size, including empty ones;
  some buffers declare their count); accesses under a test of their own index against the
  length (then / else branch, early exit, loop bound), which the lowering may drop;
- workgroup memory written at every slot before a barrier and read (any slot) after it,
  barriers only in uniform control flow; workgroup atomics;
- subgroup operations (every op and combine on i32/u32/f32) in a uniform prologue, where
  the workgroup is a multiple of every backend's subgroup size (each backend is compared
  with the reference at its own size);
- atomics with order-independent results: one commutative op per accumulator buffer
  (add/min/max/and/or/xor), results unused; exchange / compare_exchange / RMW with a used
  result only on the invocation's own slots.

Every store lands on an index that is injective in the invocation (`gid * stride + slot`, or
an index past the end), so no two invocations race on one element. Approximate functions
appear only as the root of a value stored into a float buffer, so their error never feeds
further arithmetic; `run_case` gives `tolerance_for`'s bound only to the buffers that hold
them (`approximate_buffers`) and compares everything else exactly, zero signs included:
docs/IR.md makes division, sqrt and rem exact on every backend. Bitcasts from floats read
only loaded values (computed NaN payloads are not specified), and float min/max/clamp
results are canonicalised with `+ 0.0` (the sign of a zero result is unspecified there).
A backend that reports a loop limit (`LOOP_LIMIT_KEYS` in its capabilities' limits or
details) may refuse a case with a DispatchError naming that limit, but only when the
reference shows that an invocation, or the invocations of one workgroup together, really
run more loop passes (`loop_passes`; docs/IR.md: llvmpipe's budget is shared by the
invocations it runs as one SIMD group, a part of a workgroup).
A backend may also refuse a Program with subgroup operations whose workgroup shape it
measured to break docs/IR.md's lane mapping (UnsupportedFeature "subgroup" naming the shape
and the mapping: llvmpipe pads rows of x invocations shorter than its subgroups), but never
one where it promises the mapping (`vyre.subgroups.mapping_promised`: the shapes it reports
measuring, or every shape; `refuses_subgroup_shape`).

`run_case` runs a case on the reference and on other backends and returns the disagreements;
`save_case` / `load_case` write and read regression files (tests/regressions/*.json: the
wire-format Program plus exact inputs and config).

This is test support: it must never be imported by production code, and it must never
generate a Program whose result depends on scheduling, or hide a disagreement.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from vyre import features as F
from vyre.config import DispatchConfig
from vyre.errors import DispatchError, UnsupportedFeature
from vyre.interface import Backend
from vyre.ir import nodes as N
from vyre.ir import ops
from vyre.ir.analysis import child_exprs, walk_stmts
from vyre.ir.compare import SIGN_OF_ZERO_OPEN, Tolerance, mismatches, tolerance_for
from vyre.ir.serialize import from_json, to_json
from vyre.ir.types import NARROW_INTS, ScalarType
from vyre.subgroups import mapping_promised

from .replay import save_on_request
from .testing import random_array, reference_for

T = ScalarType
BOOL, I32, U32, F32, F16, F64, I64, U64 = (
    T.BOOL, T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64,
)
CORE_TYPES = frozenset({I32, U32, F32})
_LANE_OPS = get_args(N.SubgroupOp)[:2]  # shuffle (any lane), broadcast (a uniform lane)
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
    """Settings for a fuzz run: `max_examples` or $VYRE_FUZZ_EXAMPLES or 40; no deadline;
    every phase but `explain` (a diagnostic after the shrunk failure: it reran the
    failing dispatch under a line tracer for minutes; the failure, its saved case and the
    blob are reported without it).

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
        phases=[p for p in Phase if p is not Phase.explain],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )


# ------------------------------------------------------------------ options


WORKGROUP_SIZES = ((1, 1, 1), (4, 1, 1), (8, 1, 1), (32, 1, 1), (64, 1, 1), (2, 2, 1),
                    (4, 2, 2), (3, 1, 1), (5, 3, 1), (16, 1, 1), (8, 8, 1), (4, 4, 4),
                    (1024, 1, 1))


@dataclass(frozen=True)
class GenOptions:
    """What generated Programs may use (derived from the backends under test)."""

    types: frozenset[ScalarType] = CORE_TYPES
    workgroup_memory: bool = True
    atomics: bool = True
    atomic_types: frozenset[ScalarType] = frozenset({I32, U32})
    # Approximate functions to generate (a long run may leave out one with a known bug);
    # not the backends' own (N.NATIVE_FNS: lavapipe's log of a subnormal is -88, no bound)
    approx_fns: frozenset[str] = N.APPROX_FNS - N.NATIVE_FNS
    # Float ops whose result is only ulp-bounded: allowed only as the root of a stored value.
    # docs/IR.md names only the approximate functions; div, sqrt and rem are exact.
    terminal_only: frozenset[str] = N.APPROX_FNS
    # (type, function) calls some backend under test refuses (features.refused_calls)
    refused_calls: frozenset[tuple[ScalarType, str]] = frozenset()
    max_expr_depth: int = 4
    max_block_stmts: int = 4
    max_nesting: int = 3
    # Chance that a top-level statement is a long loop (more than 65,535 iterations per
    # invocation, the loop budget of Mesa's llvmpipe), at most one per Program. The reference
    # runs ~20k loop iterations a second, so CI keeps this small.
    long_loops: float = 0.03
    workgroup_sizes: tuple[tuple[int, int, int], ...] = WORKGROUP_SIZES
    # Subgroup operations in Programs whose workgroups have a multiple of this many
    # invocations (the largest subgroup size of the backends under test); None: never.
    subgroup_multiple: int | None = None


def options_for(backends: Iterable[Backend]) -> GenOptions:
    """The generator options every one of `backends` can run, under its tolerance rules."""
    feats: frozenset[str] | None = None
    for b in backends:
        f = b.capabilities().features
        feats = f if feats is None else feats & f
    feats = feats or frozenset()
    types = set(CORE_TYPES)
    if "f16" in feats:
        types.add(F16)
    if "f64" in feats:
        types.add(F64)
    if "i64" in feats:
        types |= {I64, U64}
    sizes = [b.capabilities().details.get("subgroup_size") for b in backends]
    subgroup_multiple = (max(x for x in sizes if isinstance(x, int))
                         if "subgroup" in feats and any(isinstance(x, int) for x in sizes)
                         else None)
    refused = frozenset((ScalarType(t), fn) for b in backends
                        for t, fn in F.refused_calls(b.capabilities().details))
    return GenOptions(
        refused_calls=refused,
        subgroup_multiple=subgroup_multiple,
        types=frozenset(types),
        workgroup_memory="workgroup_memory" in feats,
        atomics=True,
        atomic_types=frozenset({I32, U32} | ({I64, U64} if "atomic_i64" in feats else set())),
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


def save_case(case: FuzzCase, directory: str | Path, note: str = "",
              name: str | None = None) -> Path:
    """Write `case` as `<dir>/<name>.json`, by default `fuzz_<program hash prefix>.json`
    (idempotent); returns the path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if note:
        case.note = note
    path = d / f"{name or 'fuzz_' + case.program.content_hash[:16]}.json"
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


def buffers_computed_with(program: N.Program, ops: frozenset[str],
                          approximate_only: bool = False) -> frozenset[str]:
    """Buffers that may hold a float value computed with one of `ops` (function or binary
    operator names): its expression uses one, reads a local holding such a value or loads
    from such a buffer (to a fixpoint, flow-insensitive). A float min/max/clamp written
    `op(...) + 0.0` (the generator's canonical zero sign) does not count as using `op`.
    `approximate_only`: a call counts only where it is approximate for its type
    (N.approximate_call: f32 exp, with its exact definition, does not)."""
    tainted_locals: set[str] = set()
    tainted: set[str] = set()

    def uses(e: N.ExprNode) -> bool:
        if (isinstance(e, N.Binary) and e.op == "add" and isinstance(e.b, N.Const)
                and e.b.value == 0.0 and not np.signbit(e.b.value)
                and isinstance(e.a, (N.Binary, N.Call))):
            return any(uses(x) for x in child_exprs(e.a))  # canonical: e.a's op is settled
        if isinstance(e, (N.Call, N.Binary)) and e.ty.is_float and (
                (e.fn if isinstance(e, N.Call) else e.op) in ops) and not (
                approximate_only and isinstance(e, N.Call)
                and not N.approximate_call(e.fn, e.ty)):
            return True
        if isinstance(e, N.Subgroup) and e.ty.is_float and e.combine in ops:
            return True
        if isinstance(e, N.Var) and e.name in tainted_locals:
            return True
        if isinstance(e, N.Load) and e.buffer in tainted:
            return True
        return any(uses(x) for x in child_exprs(e))

    changed = True
    while changed:
        changed = False
        for s in walk_stmts(program.body):
            if isinstance(s, (N.Let, N.Assign)):
                if s.name not in tainted_locals and uses(s.value):
                    tainted_locals.add(s.name)
                    changed = True
            elif isinstance(s, (N.Store, N.Atomic)):
                if s.buffer not in tainted and uses(s.value):
                    tainted.add(s.buffer)
                    changed = True
                if (isinstance(s, N.Atomic) and s.result is not None
                        and s.result not in tainted_locals and s.buffer in tainted):
                    tainted_locals.add(s.result)
                    changed = True
    return frozenset(tainted)


def approximate_buffers(program: N.Program) -> frozenset[str]:
    """Buffers that may hold a value computed by a function approximate for its type
    (N.approximate_call): only these get `tolerance_for`'s ulp bound; docs/IR.md makes
    every other result exact (f32 / f16 exp, log, ... included: vyre.lower.maths)."""
    return buffers_computed_with(program, N.APPROX_FNS, approximate_only=True)


def buffer_tolerance(program: N.Program, buffer: str, backend_kind: str) -> Tolerance:
    """The rule for one buffer: `tolerance_for`'s bound where it holds approximate results,
    exact elsewhere; the sign of zero compared unless a float min/max/clamp (docs/IR.md
    leaves its zero sign open) may have produced the value."""
    sign = buffer not in buffers_computed_with(program, SIGN_OF_ZERO_OPEN)
    if buffer in approximate_buffers(program):
        return dataclasses.replace(tolerance_for(program, backend_kind), zero_sign=sign)
    return Tolerance(zero_sign=sign)


# Where a backend reports the most loop iterations one invocation may run (the sum over all
# its loops: Mesa's llvmpipe stops loops silently past 65,535). Read from
# capabilities().limits, then .details; the first key present wins.
LOOP_LIMIT_KEYS = ("loop_iteration_limit", "loop_iterations_per_invocation")
_COUNTER = "vyre_fuzz_loop_count"
_COUNTS = "vyre_fuzz_loop_counts"


def loop_limit(backend: Backend) -> int | None:
    """The per-invocation loop-iteration limit `backend` reports, or None (no limit)."""
    caps = backend.capabilities()
    for key in LOOP_LIMIT_KEYS:
        for source in (caps.limits, caps.details):
            v = source.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def names_loop_limit(exc: BaseException, limit: int) -> bool:
    """Whether `exc` is the documented refusal: a DispatchError naming the adapter's limit."""
    msg = str(exc)
    return isinstance(exc, DispatchError) and (str(limit) in msg or f"{limit:,}" in msg)


def refuses_subgroup_shape(exc: BaseException, program: N.Program,
                           backend: Backend) -> bool:
    """Whether `exc`, raised by `backend`, is the documented refusal of a subgroup Program's
    workgroup shape: an UnsupportedFeature "subgroup" that names the shape and docs/IR.md's
    lane mapping, for a shape where `backend` does not promise the mapping (its measured
    shapes, `vyre.subgroups.mapping_promised`: a backend that measures none promises all)."""
    shape = tuple(program.workgroup_size)
    return (isinstance(exc, UnsupportedFeature) and exc.name == "subgroup"
            and str(shape) in exc.detail and "lane mapping" in exc.detail
            and not mapping_promised(backend.capabilities().details, program.workgroup_size))


def count_loop_iterations(program: N.Program) -> N.Program:
    """`program` plus a u32 output buffer `vyre_fuzz_loop_counts` holding, per invocation (in
    linear order), how many loop passes it ran over all its loops (docs/IR.md's loop budget:
    each For iteration, each evaluation of a While's condition). Results are
    otherwise unchanged; the counter is never read by the program's own logic."""
    names = {d.name for d in program.buffers} | {a.name for a in program.workgroup_arrays}
    names |= {p.name for p in program.params}
    for s in walk_stmts(program.body):
        names |= {getattr(s, a) for a in ("name", "var", "result") if getattr(s, a, None)}
    counter, counts = _COUNTER, _COUNTS
    while counter in names or counts in names:
        counter, counts = counter + "_", counts + "_"
    wx, wy, wz = program.workgroup_size
    nwg = [N.Builtin(name="num_workgroups", axis=a) for a in range(3)]
    wid = [N.Builtin(name="workgroup_id", axis=a) for a in range(3)]

    def u(op: str, a: N.ExprNode, b: N.ExprNode) -> N.ExprNode:
        return N.Binary(op=op, a=a, b=b, ty=U32)

    wlin = u("add", u("add", wid[0], u("mul", wid[1], nwg[0])),
             u("mul", wid[2], u("mul", nwg[0], nwg[1])))
    linear = u("add", u("mul", wlin, N.Const(ty=U32, value=wx * wy * wz)),
               N.Builtin(name="local_index"))
    var = N.Var(name=counter, ty=U32)
    store = N.Store(buffer=counts, index=linear, value=var)
    bump = N.Assign(name=counter, value=u("add", var, N.Const(ty=U32, value=1)))

    def block(body: tuple[N.StmtNode, ...]) -> tuple[N.StmtNode, ...]:
        out: list[N.StmtNode] = []
        for s in body:
            if isinstance(s, N.Return):
                out += [store, s]
            elif isinstance(s, N.If):
                out.append(N.If(cond=s.cond, then=block(s.then), orelse=block(s.orelse)))
            elif isinstance(s, N.For):
                out.append(N.For(var=s.var, ty=s.ty, start=s.start, end=s.end, step=s.step,
                                 body=(bump, *block(s.body))))
            elif isinstance(s, N.While):
                # a While's budget is its condition checks: one per iteration plus the final
                # one (counted up front; a loop left by `break` is over-counted by one)
                out += [bump, N.While(cond=s.cond, body=(bump, *block(s.body)))]
            else:
                out.append(s)
        return tuple(out)

    body = (N.Let(name=counter, value=N.Const(ty=U32, value=0)), *block(program.body), store)
    return N.Program(
        name=program.name, workgroup_size=program.workgroup_size,
        buffers=(*program.buffers, N.BufferDecl(name=counts, ty=U32, access="write")),
        params=program.params, workgroup_arrays=program.workgroup_arrays, body=body,
    )


def loop_passes(case: FuzzCase, reference: Backend) -> tuple[int, int]:
    """(the most loop passes one invocation of `case` runs, the most the invocations of one
    workgroup run together), on `reference`."""
    counted = count_loop_iterations(case.program)
    size = int(np.prod(case.program.workgroup_size))
    total = int(np.prod(case.grid)) * size
    inputs = {**case.inputs, counted.buffers[-1].name: np.zeros(total, dtype=np.uint32)}
    out = reference.dispatch(counted, inputs, case.config)[counted.buffers[-1].name]
    if not out.size:
        return 0, 0
    per_group = out.astype(np.int64).reshape(-1, size).sum(axis=1)
    return int(out.max()), int(per_group.max())


def max_loop_iterations(case: FuzzCase, reference: Backend) -> int:
    """The most loop passes any one invocation of `case` runs (on `reference`)."""
    return loop_passes(case, reference)[0]


def run_case(
    case: FuzzCase, reference: Backend, others: Sequence[Backend],
    expected_by_reference: dict[str, dict[str, np.ndarray]] | None = None,
) -> list[Disagreement]:
    """Run `case` on the reference and on each of `others`; every disagreement, listed.

    The reference must run the case (an exception there propagates: a valid Program must
    run), except a device backend used as the oracle making the documented subgroup-shape
    refusal (`refuses_subgroup_shape`): nothing is compared then. Another backend raising is a disagreement (with the exception as the message),
    except the documented loop-limit refusal: a DispatchError naming the limit the backend
    reports (`loop_limit`) when the reference shows an invocation really runs more loop
    passes than that, alone or with the rest of its workgroup (`loop_passes`). Each
    backend is compared with the reference in its float mode (testing.reference_for),
    exactly (zero signs included) except buffers that hold results of approximate
    functions (`approximate_buffers`), which get `tolerance_for`.
    `expected_by_reference` (reference id -> results) caches the reference's results across
    calls for the same case.
    """
    by_ref = {} if expected_by_reference is None else expected_by_reference
    if reference.id not in by_ref:
        try:
            by_ref[reference.id] = reference.dispatch(case.program, case.inputs, case.config)
        except UnsupportedFeature as exc:
            # an oracle that is a device backend itself (wgpu against wgpu, the fences
            # test) may make the documented refusal: then there is nothing to compare
            if refuses_subgroup_shape(exc, case.program, reference):
                return []
            raise
    out: list[Disagreement] = []
    for b in others:
        ref = reference_for(b, reference)
        if ref.id not in by_ref:
            by_ref[ref.id] = ref.dispatch(case.program, case.inputs, case.config)
        expected = by_ref[ref.id]
        try:
            got = b.dispatch(case.program, case.inputs, case.config)
        except Exception as exc:
            limit = loop_limit(b)
            if limit is not None and names_loop_limit(exc, limit):
                runs, together = loop_passes(case, reference)
                if max(runs, together) > limit:
                    continue  # the documented, probed refusal
                out.append(Disagreement(
                    b.id, None, f"{type(exc).__name__}: {exc} (but no invocation runs more "
                    f"than {runs} loop iterations and no workgroup more than {together} "
                    f"together, within the limit of {limit})"))
                continue
            if refuses_subgroup_shape(exc, case.program, b):
                continue  # the documented, measured refusal
            out.append(Disagreement(b.id, None, f"{type(exc).__name__}: {exc}"))
            continue
        for name, exp in expected.items():
            g = got.get(name)
            if g is None:
                out.append(Disagreement(b.id, name, "missing from the results"))
                continue
            tol = buffer_tolerance(case.program, name, b.kind)
            try:
                bad = mismatches(g, exp, tol)
            except AssertionError as exc:
                out.append(Disagreement(b.id, name, str(exc)))
                continue
            if bad.size:
                shown = ", ".join(
                    f"[{i}] got {g[i]!r} expected {exp[i]!r}" for i in bad[:6]
                )
                rule = ("exact" if tol.exact else f"within {tol.ulps} ulp") + (
                    ", zero signs included" if tol.zero_sign else "")
                out.append(Disagreement(
                    b.id, name, f"{bad.size} of {exp.size} elements disagree ({rule}): {shown}"
                ))
    return out


# ------------------------------------------------------------------ the generator

_INT_SPECIALS: dict[ScalarType, list[int]] = {
    I32: [0, 1, -1, 2, 7, -8, 31, 32, 33, 2**31 - 1, -(2**31), 12345, -100000],
    U32: [0, 1, 2, 3, 7, 31, 32, 33, 2**31, 2**32 - 1, 2**31 - 1, 65536, 123456789],
    I64: [0, 1, -1, 63, 64, 2**63 - 1, -(2**63), 2**32, -(2**32) - 1, 2**31],
    U64: [0, 1, 63, 64, 2**64 - 1, 2**63, 2**32, 2**32 - 1],
}
FLT_MAX = float(np.finfo(np.float32).max)
_FLOAT_SPECIALS = [
    0.0, 1.0, -1.0, 0.5, -0.0, 2.0, 1.5, -2.5, 3.0, -3.0, 100.0, 0.1, -7.75, 1e10, -1e-3,
    float("inf"), float("-inf"), float("nan"), 3.4e38, 1e-30, 16777217.0, 2147483648.0,
    -2147483904.0, 4294967296.0, 65504.0, 1e-40,
    # the exponent limits: x/x, sqrt and rem must stay exact there (docs/IR.md)
    FLT_MAX, -FLT_MAX, 2.0**127, 2.0**-126, -(2.0**-126), 2.0**-149, -(2.0**-149), 1e-45,
    33.0, 0.99999994, 1.0000001, 8388609.0,
    # int <-> float casts at the i64/u64 limits
    9.223372036854775808e18, -9.223372036854775808e18, 1.8446744073709552e19,
]
# Arguments that probe the special cases of approximate functions (signs of zero results:
# pow(-0, odd), sin(-0), tan(-0); pow(+-0, y < 0) = +-inf).
# The exact functions (vyre.lower.maths) over their whole range: subnormals, huge values,
# the overflow / underflow thresholds of exp / exp2, 1 +- ulp for log, pow's special cases.
_APPROX_SPECIAL_ARGS = [0.0, -0.0, 0.0, -0.0, -0.0, -1.0, -3.0, 3.0, -2.0, -0.5, 0.5, float("inf"),
                        float("-inf"), float("nan"), 1.0, 1e-45, -1e-40, 2.0**-126, 3e38,
                        -3e38, 88.72283, -103.97208, 128.0, -149.5, -150.0, 0.99999994,
                        1.0000001, 2.0, 0.1]


def _in_range(ty: ScalarType, f: float) -> float:
    """`f` as a literal of float type `ty`: its inf where it overflows the type (3e38 in
    f16), since literals that overflow are refused, not rounded."""
    with np.errstate(over="ignore"):
        r = float(ty.numpy.type(f))
    return r if math.isinf(r) else f


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
        self.long_loop_done = False  # at most one long loop per Program (CI time)
        self.in_long_loop = False  # its body has no loops (the iterations would multiply)
        self.gid = N.Var(name="gid", ty=U32)

    # -- small draws
    def pick(self, xs: Sequence[Any]) -> Any:
        """One of `xs`, close to uniformly (sampled_from favours the first few; this too
        shrinks to the first)."""
        xs = list(xs)
        if not xs:
            raise ValueError("pick from an empty list")
        return xs[self.draw(st.integers(0, 2**32 - 1)) % len(xs)]

    def int_(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        """True with probability about p (shrinks to False). Hypothesis favours small
        integers, so a draw from 0..999 is True far less often than p; the low digits of a
        32-bit draw are close to uniform."""
        return self.draw(st.integers(0, 2**32 - 1)) % 1000 >= int(1000 * (1 - p))

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
            if any(t.is_float for t in self.types):
                kinds += ["quotient"]
            if any(t.bits == 64 and t.is_int for t in self.types):
                kinds += ["wide"]
        else:
            kinds += ["binary", "unary", "call", "call", "bitcast_in", "quotient"]
            if terminal:
                kinds += ["inexact"]
        if ty is not BOOL:
            kinds += ["narrow"]
        k = self.pick(kinds)
        if k == "narrow":  # an 8/16-bit element, cast (docs/IR.md "Narrow integers")
            return N.Cast(a=self.load_input(self.pick(NARROW_INTS), d), ty=ty)
        if k == "quotient":
            return self.quotient(ty, d)
        if k == "wide":
            return self.wide(ty, d)
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
        """An approximate call (any argument often a special value: +-0, odd/even/negative
        exponents, infinities), or a float div/rem/sqrt whose operands are the same value."""
        approx = {f for f in self.o.approx_fns if (ty, f) not in self.o.refused_calls}
        signed_zero_fns = sorted({"pow", "sin", "tan"} & approx)
        if signed_zero_fns and self.chance(0.3):  # where drivers lost the sign of zero
            fn = self.pick(signed_zero_fns)
        else:
            fn = self.pick([*sorted(approx), "div", "rem", "sqrt"])
        if fn in ("div", "rem"):
            x = self.expr(ty, d)
            return N.Binary(op=fn, a=x, b=x if self.chance(0.5) else self.expr(ty, d), ty=ty)
        # where drivers lost the sign of zero, -0 itself half the time a literal is drawn
        minus_zero = fn in signed_zero_fns
        args = tuple(
            self.lit(ty, _in_range(ty, -0.0 if minus_zero and self.chance(0.5) else self.pick(
                _APPROX_SPECIAL_ARGS))) if self.chance(0.5) else self.expr(ty, d)
            for _ in range(N.FN_ARITY[fn])
        )
        return N.Call(fn=fn, args=args, ty=ty)

    def float_type(self, like: ScalarType) -> ScalarType:
        return like if like.is_float else self.pick(
            [t for t in self.types if t.is_float] or [F32])

    def quotient(self, ty: ScalarType, d: int) -> N.ExprNode:
        """A float division whose exact quotient is an integer (33/33, q*k/k) or 1 (x/x),
        both operands scaled by one power of two anywhere in the exponent range; for an int
        `ty`, the quotient cast to it (a correctly rounded division gives q exactly, one a
        ulp low truncates to q - 1). Sometimes the float `rem` of the same operands (0)."""
        fty = self.float_type(ty)

        def small(n: int) -> N.ExprNode:  # a u32 in 1..n, from data (not constant-folded)
            return N.Binary(op="add", a=N.Binary(op="rem", a=self.expr(U32, 1),
                                                 b=self.lit(U32, n), ty=U32),
                            b=self.lit(U32, 1), ty=U32)

        if self.chance(0.3):  # x / x with x anything (FLT_MAX, subnormal, inf, ...)
            a = b = self.expr(fty, d)
        else:
            k = small(1000) if self.chance(0.5) else self.lit(U32, self.pick([33, 3, 7, 10, 49]))
            q = small(1000)
            a = N.Cast(a=N.Binary(op="mul", a=q, b=k, ty=U32), ty=fty)
            b = N.Cast(a=k, ty=fty)
            if self.chance(0.5):
                info = np.finfo(fty.numpy)
                scale = self.lit(fty, 2.0 ** self.int_(int(info.minexp) - int(info.nmant),
                                                       int(info.maxexp) - 1))
                a = N.Binary(op="mul", a=a, b=scale, ty=fty)
                b = N.Binary(op="mul", a=b, b=scale, ty=fty)
        e: N.ExprNode = (N.Binary(op="rem", a=a, b=b, ty=fty) if self.chance(0.25)
                         else N.Binary(op="div", a=a, b=b, ty=fty))
        return e if ty is fty else N.Cast(a=e, ty=ty)

    def wide(self, ty: ScalarType, d: int) -> N.ExprNode:
        """A value widened to a 64-bit int (abs, neg or arithmetic there), cast back to `ty`."""
        wide = ty if ty.bits == 64 and ty.is_int else self.pick(
            [t for t in self.types if t.bits == 64 and t.is_int])
        src = self.pick([t for t in self.types if t is not wide] or [I32])
        e: N.ExprNode = N.Cast(a=self.expr(src, d), ty=wide)
        k = self.pick(["abs", "neg", "mul", "none"])
        if k == "abs":
            e = N.Call(fn="abs", args=(e,), ty=wide)
        elif k == "neg" and wide.is_signed:
            e = N.Unary(op="neg", a=e, ty=wide)
        elif k == "mul":
            e = N.Binary(op="mul", a=e, b=N.Cast(a=self.expr(src, d), ty=wide), ty=wide)
        return e if ty is wide else N.Cast(a=e, ty=ty)

    def arith(self, ty: ScalarType, d: int) -> N.ExprNode:
        ops = ["add", "sub", "mul", "min", "max"]
        if ty.is_int:
            ops += ["div", "rem"]
        else:
            ops += [o for o in ("div", "rem") if o not in self.o.terminal_only]
        op = self.pick(ops)
        a = self.expr(ty, d)
        b = a if op in ("div", "rem") and self.chance(0.15) else self.expr(ty, d)  # x/x
        e: N.ExprNode = N.Binary(op=op, a=a, b=b, ty=ty)
        if ty.is_float and op in ("min", "max"):
            e = N.Binary(op="add", a=e, b=self.lit(ty, 0.0), ty=ty)  # -0 -> +0
        return e

    def call(self, ty: ScalarType, d: int) -> N.ExprNode:
        fns = ["abs", "clamp"]
        if ty.is_float:
            fns += ["floor", "ceil", "trunc", "round", "fma"]
            if "sqrt" not in self.o.terminal_only:
                fns.append("sqrt")
        dot4 = {I32: "dot4_i8", U32: "dot4_u8"}.get(ty)
        if dot4 is not None:  # the packed dot products: (u32, u32, acc of `ty`) -> ty
            fns.append(dot4)
        fn = self.pick(fns)
        sig = ops.CALLS[fn].signature
        arg_types = sig[0] if sig is not None else (ty,) * N.FN_ARITY[fn]
        args = tuple(self.expr(t, d) for t in arg_types)
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
            kinds += ["if"] if self.in_long_loop else ["if", "for", "while"]
        if (self.loop_depth == 0 and not self.long_loop_done and self.o.long_loops > 0
                and self.chance(self.o.long_loops)):
            self.long_loop_done = True
            return self.long_loop(allow_return)
        if self.o.atomics:
            kinds += ["atomic", "atomic_own"]
        kinds += ["rw", "guarded", "narrow_store"]
        # A long loop's one-statement body never ends the loop early (it would be short).
        if self.loop_depth:
            kinds += ["continue"] if self.in_long_loop else ["break", "continue"]
        if allow_return and not self.in_long_loop:
            kinds.append("return")
        k = self.pick(kinds)
        depth = self.o.max_expr_depth
        if k == "store":
            ty = self.pick(self.types)
            buf = self.out_buf(ty)
            oob = self.chance(0.1)
            return [N.Store(buffer=buf.decl.name, index=self.slot_index(buf, oob),
                            value=self.expr(ty, depth, terminal=True))]
        if k == "narrow_store":  # a cast to 8/16 bits stored next to other invocations'
            nt = self.pick(NARROW_INTS)
            nbuf = self.out_buf(nt)
            src = self.pick([*self.types, BOOL])
            return [N.Store(buffer=nbuf.decl.name, index=self.slot_index(nbuf, self.chance(0.1)),
                            value=N.Cast(a=self.expr(src, depth), ty=nt))]
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
        if k == "guarded":
            return self.guarded(allow_return)
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

    def long_loop(self, allow_return: bool) -> list[N.StmtNode]:
        """A loop of about 65,535 iterations per invocation or more (Mesa's llvmpipe stops
        loops past 65,535, counted over all loops of the invocation): a For to a large end, a
        For nested in a For (66 x 1000, 100 x 700, ...), or a While; the body has no loops.
        Just under the limit too, so a limit that is reached early is caught."""
        form = self.pick(["for", "nested", "while"])
        c = self.fresh("n")
        body_stmts: list[N.StmtNode] = [N.Let(name=c, value=self.lit(U32, 0))]
        self.declare(c, U32, mutable=False)
        bump = N.Assign(name=c, value=N.Binary(op="add", a=N.Var(name=c, ty=U32),
                                               b=self.lit(U32, 1), ty=U32))
        saved = self.o
        self.o = dataclasses.replace(self.o, max_block_stmts=1, max_expr_depth=2)
        self.in_long_loop = True
        self.loop_depth += 1
        self.scopes.append([])
        try:
            if form == "nested":
                outer, inner = self.pick([(66, 1000), (100, 700), (2, 32768), (100, 655)])
                vo, vi = self.fresh("i"), self.fresh("i")
                self.scopes[-1] += [_Local(vo, U32, False), _Local(vi, U32, False)]
                inner_loop = N.For(var=vi, ty=U32, start=self.lit(U32, 0),
                                   end=self.lit(U32, inner), step=1,
                                   body=(bump, *self.block(allow_return)))
                loop: N.StmtNode = N.For(var=vo, ty=U32, start=self.lit(U32, 0),
                                         end=self.lit(U32, outer), step=1, body=(inner_loop,))
            else:
                n = self.pick([65534, 65535, 65536, 70000])
                end: N.ExprNode = self.lit(U32, n)
                if self.chance(0.5):  # data-dependent: n .. n+2
                    end = N.Binary(op="add", a=end, b=N.Binary(
                        op="rem", a=self.expr(U32, 1), b=self.lit(U32, 3), ty=U32), ty=U32)
                if form == "for":
                    v = self.fresh("i")
                    self.scopes[-1].append(_Local(v, U32, False))
                    loop = N.For(var=v, ty=U32, start=self.lit(U32, 0), end=end, step=1,
                                 body=(bump, *self.block(allow_return)))
                else:  # the counter is bumped first: `continue` cannot skip it
                    loop = N.While(cond=N.Binary(op="lt", a=N.Var(name=c, ty=U32), b=end,
                                                 ty=BOOL),
                                   body=(bump, *self.block(allow_return)))
        finally:
            self.scopes.pop()
            self.loop_depth -= 1
            self.in_long_loop = False
            self.o = saved
        # The iteration count is an output, so a silently truncated loop shows.
        ty = U32
        buf = self.out_buf(ty)
        return [*body_stmts, loop, N.Store(buffer=buf.decl.name, index=self.slot_index(buf, False),
                                           value=N.Var(name=c, ty=U32))]

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

    def guarded(self, allow_return: bool) -> list[N.StmtNode]:
        """An access under a test of its own index against its buffer's length, in every
        form vyre.lower.facts reads (then / else branch, early exit, loop bound, the
        comparison either way round, with another condition), on the very index node or
        an equal copy, and sometimes a local of the index reassigned in between (its test
        must stay): the lowering drops the tests such a condition proves."""
        ty = self.pick(self.types)
        depth = self.o.max_expr_depth
        pre: list[N.StmtNode] = []
        store = self.chance(0.5)
        if store:  # a store: the index stays one the invocation owns
            sbuf = self.pick([self.out_buf, self.rw_buf])(ty)
            name, idx = sbuf.decl.name, self.slot_index(sbuf, self.chance(0.2))

            def access(i: N.ExprNode) -> list[N.StmtNode]:
                return [N.Store(buffer=name, index=i, value=self.expr(ty, depth, terminal=True))]
        else:  # a load of any index, stored where the invocation owns the slot
            name, out = self.input_buf(ty).name, self.out_buf(ty)
            idx = self.index(depth)
            mutable = self.visible(U32, mutable=True)
            if mutable and self.chance(0.3):  # the index's local changes after the test
                loc = self.pick(mutable)
                idx = N.Binary(op="add", a=N.Var(name=loc.name, ty=U32), b=idx, ty=U32)
                pre = [N.Assign(name=loc.name, value=self.expr(U32, 2))]

            def access(i: N.ExprNode) -> list[N.StmtNode]:
                return [N.Store(buffer=out.decl.name, index=self.slot_index(out, False),
                                value=N.Load(buffer=name, index=i, ty=ty))]
        length = N.Length(buffer=name)
        form = self.pick(["then", "else", "exit", "loop"])
        # a load in a loop over its buffer's last 1-3 elements: v in L - min(L, k) .. L (a
        # store there would not be at an index the invocation owns)
        if form == "loop" and not store and not self.in_long_loop:
            v = self.fresh("i")
            start = N.Binary(op="sub", a=length, b=N.Binary(
                op="min", a=length, b=self.lit(U32, self.int_(1, 3)), ty=U32), ty=U32)
            return [N.For(var=v, ty=U32, start=start, end=length, step=1,
                          body=tuple(access(N.Var(name=v, ty=U32))))]
        same = idx if self.chance(0.5) else idx.model_copy(deep=True)
        holds = self.pick([
            N.Binary(op="lt", a=idx, b=length, ty=BOOL),
            N.Binary(op="gt", a=length, b=idx, ty=BOOL),
            N.Unary(op="not", a=N.Binary(op="ge", a=idx, b=length, ty=BOOL), ty=BOOL)])
        fails = self.pick([
            N.Binary(op="ge", a=idx, b=length, ty=BOOL),
            N.Binary(op="le", a=length, b=idx, ty=BOOL),
            N.Unary(op="not", a=holds, ty=BOOL)])
        if form == "exit":
            jumps: list[N.StmtNode] = []
            if allow_return and not self.in_long_loop:
                jumps.append(N.Return())
            if self.loop_depth:
                jumps += [N.Continue()] if self.in_long_loop else [N.Break(), N.Continue()]
            if jumps:
                return [N.If(cond=fails, then=(self.pick(jumps),)), *pre, *access(same)]
        if self.chance(0.3):
            holds = N.Binary(op="logical_and", a=holds, b=self.expr(BOOL, 2), ty=BOOL)
            fails = N.Binary(op="logical_or", a=fails, b=self.expr(BOOL, 2), ty=BOOL)
        if form == "else":
            return [N.If(cond=fails, then=self.block(allow_return),
                         orelse=(*pre, *access(same)))]
        return [N.If(cond=holds, then=(*pre, *access(same)),
                     orelse=self.block(allow_return) if self.chance(0.3) else ())]

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

    def subgroup_phase(self) -> list[N.StmtNode]:
        """Uniform prologue: subgroup operations into locals (docs/IR.md, "Subgroups")."""
        # (every op and combine from the IR's own lists: a literal here would join the
        # constants Hypothesis collects from this module and move the derandomized draws
        # of every other test)
        out: list[N.StmtNode] = []
        for _ in range(self.int_(1, 3)):
            ty = self.pick([t for t in self.types if t in CORE_TYPES])
            op = self.pick(get_args(N.SubgroupOp))
            lane: N.ExprNode | None = None
            combine = None
            if op in _LANE_OPS:
                lane = self.expr(U32, 2) if op == _LANE_OPS[0] else self.pick(
                    [self.const(U32), N.Builtin(name="workgroup_id")])  # uniform
            else:
                combine = self.pick([c for c in get_args(N.SubgroupCombine)
                                     if ty.is_int or c not in N.BITWISE_OPS])
            value = N.Subgroup(op=op, value=self.expr(ty, 2), lane=lane, combine=combine,
                               ty=ty)
            name = self.fresh("r")
            out.append(N.Let(name=name, value=value))
            self.declare(name, ty)
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
        sg = self.o.subgroup_multiple
        if sg is not None and inv % sg == 0 and self.chance(0.35):
            body += self.subgroup_phase()
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


# ------------------------------------------------------------------ the operator sweep

_SWEEP_ORDER = ("i32", "u32", "f32", "f16", "f64", "i64", "u64")


def sweep_edges(ty: ScalarType) -> np.ndarray:
    """The edge values the operator sweep pairs with each other: the generator's integer
    specials, or its float specials (zeros of both signs, +-inf, NaN, the exponent limits,
    halves, values at the int <-> float limits) rounded to `ty`."""
    if ty.is_int:
        lo, hi = _range(ty)
        return np.array([v for v in _INT_SPECIALS[ty] if lo <= v <= hi], dtype=ty.numpy)
    with np.errstate(over="ignore"):
        return np.unique(np.array(_FLOAT_SPECIALS, dtype=np.float64).astype(ty.numpy))


def _sweep_ops(ty: ScalarType, gen: _Gen, x: N.ExprNode, y: N.ExprNode, z: N.ExprNode,
               lx: N.ExprNode) -> dict[str, list[N.ExprNode]]:
    """Every operator and function that accepts `ty`, applied to x, y (and z), grouped by
    the output buffer kind they are stored into: "out" (exact), "open" (float min/max/clamp:
    docs/IR.md leaves a zero result's sign open), "approx" (ulp-bounded), "flags" (bools, as
    u32). `lx` is x as loaded (bitcasts from floats read loaded values only)."""
    def b(op: str, a: N.ExprNode, c: N.ExprNode, t: ScalarType = ty) -> N.ExprNode:
        return N.Binary(op=cast(Any, op), a=a, b=c, ty=t)

    def call(fn: str, *args: N.ExprNode) -> N.ExprNode:
        return N.Call(fn=cast(Any, fn), args=args, ty=ty)

    groups: dict[str, list[N.ExprNode]] = {"out": [], "open": [], "approx": [], "flags": []}
    exact, open_ = groups["out"], groups["open"]
    for op in ("add", "sub", "mul", "div", "rem"):
        exact += [b(op, x, y), b(op, y, x)]
    exact += [b("div", x, x), b("rem", x, x)]
    (open_ if ty.is_float else exact).extend(
        [b("min", x, y), b("max", x, y), call("clamp", x, y, z)])
    exact.append(N.Call(fn="abs", args=(x,), ty=ty))
    if ty.is_signed or ty.is_float:
        exact.append(N.Unary(op="neg", a=x, ty=ty))
    if ty.is_int:
        amount = N.Cast(a=y, ty=U32)  # the edges hold 0, 1, 31..33, 63, 64 and -1 (all ones)
        exact += [b("and", x, y), b("or", x, y), b("xor", x, y),
                  b("shl", x, amount), b("shr", x, amount),
                  N.Unary(op="bit_not", a=x, ty=ty)]
        if ty in (I32, U32):  # the packed dot products, packed words as the u32 bits
            fn = "dot4_i8" if ty is I32 else "dot4_u8"
            ux, uy = (a if ty is U32 else N.Bitcast(a=a, ty=U32) for a in (x, y))
            exact += [call(fn, ux, uy, z), call(fn, ux, ux, y)]
    else:
        exact += [call(fn, x) for fn in ("floor", "ceil", "trunc", "round", "sqrt")]
        exact += [call("fma", x, y, z), call("fma", x, x, y)]
        groups["approx"] += [
            call(fn, *(x, y)[:N.FN_ARITY[fn]]) for fn in sorted(gen.o.approx_fns)
            if (ty, fn) not in gen.o.refused_calls
        ]
    for op in sorted(N.COMPARISON_OPS):
        groups["flags"].append(N.Cast(a=b(op, x, y, BOOL), ty=U32))
    lt, eq = b("lt", x, y, BOOL), b("eq", x, y, BOOL)
    groups["flags"] += [
        N.Cast(a=b(op, lt, eq, BOOL), ty=U32)
        for op in ("logical_and", "logical_or", "eq", "ne")
    ]
    groups["flags"] += [N.Cast(a=N.Unary(op="not", a=lt, ty=BOOL), ty=U32),
                        N.Cast(a=N.Cast(a=x, ty=BOOL), ty=U32)]
    exact.append(N.Select(cond=lt, a=x, b=y, ty=ty))
    for other in gen.types:  # bitcasts to and from the same-width types
        if other is not ty and other.bits == ty.bits and (ty.is_int or other.is_int):
            groups.setdefault(f"bits_{other}", []).append(N.Bitcast(a=lx, ty=other))
    return groups


def _sweep_program(gen: _Gen, workgroup_size: tuple[int, int, int]) -> N.Program:
    """One Program that applies every operator, function, cast and bitcast to every value
    type of `gen` (docs/IR.md), on the pairs of `sweep_inputs`: invocation g reads x, y, z
    of each type from in_<ty>[3g .. 3g + 2] and stores each result at `g * count + j` of
    the output buffer of its type and kind."""
    wx, wy, wz = workgroup_size
    lin = N.Binary(op="add", a=N.Binary(op="mul", a=N.Builtin(name="workgroup_id", axis=0),
                                        b=gen.lit(U32, wx * wy * wz), ty=U32),
                   b=N.Builtin(name="local_index"), ty=U32)  # the grid is (n, 1, 1)
    body: list[N.StmtNode] = [N.Let(name="gid", value=lin)]
    results: dict[tuple[str, ScalarType], list[N.ExprNode]] = {}
    loaded: dict[ScalarType, N.Var] = {}
    for ty in gen.types:
        src = f"in_{ty}"

        def at(k: int, name: str = src, t: ScalarType = ty) -> N.Load:
            idx = N.Binary(op="add", a=N.Binary(op="mul", a=gen.gid, b=gen.lit(U32, 3),
                                                ty=U32), b=gen.lit(U32, k), ty=U32)
            return N.Load(buffer=name, index=idx, ty=t)

        names = [f"x_{ty}", f"y_{ty}", f"z_{ty}"]
        for k, name in enumerate(names):
            body.append(N.Let(name=name, value=at(k)))
        x, y, z = (N.Var(name=n, ty=ty) for n in names)
        loaded[ty] = x
        for kind, exprs in _sweep_ops(ty, gen, x, y, z, at(0)).items():
            if kind.startswith("bits_"):
                dst = ScalarType(kind[5:])
                results.setdefault(("out", dst), []).extend(exprs)
            elif exprs:
                results.setdefault((kind, U32 if kind == "flags" else ty), []).extend(exprs)
    for src, v in loaded.items():  # every cast between two value types
        for dst in gen.types:
            if dst is not src:
                results.setdefault(("out", dst), []).append(N.Cast(a=v, ty=dst))
    buffers = [N.BufferDecl(name=f"in_{ty}", ty=ty, access="read") for ty in gen.types]
    for (kind, ty), exprs in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
        name = "flags" if kind == "flags" else f"{kind}_{ty}"
        buffers.append(N.BufferDecl(name=name, ty=ty, access="write"))
        stride = len(exprs)
        base = N.Binary(op="mul", a=gen.gid, b=gen.lit(U32, stride), ty=U32)
        for j, e in enumerate(exprs):
            idx = N.Binary(op="add", a=base, b=gen.lit(U32, j), ty=U32)
            body.append(N.Store(buffer=name, index=idx, value=e))
    return N.Program(name="operator_sweep", workgroup_size=workgroup_size,
                     buffers=tuple(buffers), body=tuple(body))


def sweep_inputs(types: Sequence[ScalarType], rng: np.random.Generator,
                 extra: int) -> tuple[dict[str, np.ndarray], int]:
    """The read buffers of a sweep Program: for each type, every ordered pair of its edge values
    (`sweep_edges`, the third operand drawn from them too) followed by `extra` random
    triples (`fuzz_array`), padded to one invocation count for all types; returns the
    inputs and that count. The pairs' order is shuffled by `rng`."""
    triples: dict[ScalarType, np.ndarray] = {}
    for ty in types:
        e = sweep_edges(ty)
        xs, ys = np.meshgrid(e, e, indexing="ij")
        zs = e[rng.integers(0, e.size, xs.size)]
        t = np.stack([xs.ravel(), ys.ravel(), zs], axis=1)
        t = t[rng.permutation(len(t))]
        triples[ty] = np.concatenate([t, fuzz_array(rng, ty, 3 * extra).reshape(-1, 3)])
    total = max(len(t) for t in triples.values())
    inputs: dict[str, np.ndarray] = {}
    for ty, t in triples.items():
        pad = fuzz_array(rng, ty, 3 * (total - len(t))).reshape(-1, 3)
        inputs[f"in_{ty}"] = np.concatenate([t, pad]).reshape(-1).astype(ty.numpy)
    return inputs, total


@st.composite
def _sweep_cases(draw: st.DrawFn, opts: GenOptions) -> FuzzCase:
    g = _Gen(draw, opts)
    ws = draw(st.sampled_from(opts.workgroup_sizes))
    program = _sweep_program(g, ws)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs, total = sweep_inputs(g.types, rng, extra=draw(st.integers(0, 64)))
    inv = ws[0] * ws[1] * ws[2]
    for d in program.buffers:  # every output slot starts as data the program overwrites
        if d.access == "write":
            stride = sum(1 for s in program.body if isinstance(s, N.Store) and s.buffer == d.name)
            inputs[d.name] = fuzz_array(rng, d.ty, total * stride)
    return FuzzCase(program, inputs, (-(-total // inv), 1, 1))


def operator_cases(opts: GenOptions | None = None) -> st.SearchStrategy[FuzzCase]:
    """The operator sweep: each drawn case applies every unary and binary operator, every
    function, cast and bitcast to every value type of `opts` (`sweep_edges` x `sweep_edges`,
    plus random values), so one wrong operator on one type fails every draw. Draws vary
    the workgroup size, the pairs' order, the random tail and the initial output data."""
    return _sweep_cases(opts or GenOptions())


def fuzz_array(rng: np.random.Generator, ty: ScalarType, n: int) -> np.ndarray:
    """`testing.random_array`, but floats also span the whole exponent range: about a third
    of the elements have a uniformly drawn exponent (subnormals to the largest finite value,
    either sign), and the limits themselves (+-max, +-smallest normal and subnormal, 33)
    appear, so division, sqrt and rem are exercised where rounding is hardest."""
    arr = random_array(rng, ty, n)
    if not ty.is_float or n == 0:
        return arr
    info = np.finfo(ty.numpy)
    lo, hi = int(info.minexp) - int(info.nmant), int(info.maxexp)
    wide = rng.random(n) < 0.35
    mant = rng.uniform(1.0, 2.0, n)
    exps = rng.integers(lo, hi, n)
    vals = np.ldexp(mant, exps) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    with np.errstate(over="ignore"):
        arr[wide] = np.clip(vals[wide], -float(info.max), float(info.max)).astype(ty.numpy)
    limits = np.array([info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal,
                       -info.smallest_subnormal, 33.0], dtype=ty.numpy)
    k = min(n, len(limits))
    if k and rng.random() < 0.5:
        arr[rng.choice(n, size=k, replace=False)] = limits[:k]
    return arr


@st.composite
def _cases(draw: st.DrawFn, opts: GenOptions) -> FuzzCase:
    g = _Gen(draw, opts)
    ws = draw(st.sampled_from(opts.workgroup_sizes))
    grid = (draw(st.integers(1, 3)), draw(st.sampled_from([1, 1, 2])),
            draw(st.sampled_from([1, 1, 1, 2])))
    program = g.program(ws)
    if g.long_loop_done:  # the reference's time per loop iteration grows with the lanes
        grid = (1, 1, 1)
    total = ws[0] * ws[1] * ws[2] * grid[0] * grid[1] * grid[2]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    inputs: dict[str, np.ndarray] = {}
    for ty, d in g.inputs.items():
        n = draw(st.sampled_from([total, total, 0, 1, max(total // 2, 1), total + 5]))
        inputs[d.name] = fuzz_array(rng, ty, n)
    for group in (g.outs, g.rws):
        for ty, s in group.items():
            full = total * s.stride
            n = draw(st.sampled_from([full, full, full + 3, max(full - 7, 0), full // 2]))
            inputs[s.decl.name] = fuzz_array(rng, ty, n)
    for (_, ty), d in g.accs.items():
        inputs[d.name] = fuzz_array(rng, ty, draw(st.sampled_from([8, 8, 3, 1, 0])))
    params: dict[str, bool | int | float] = {}
    for ty, p in g.params.items():
        params[p.name] = g.const(ty).value
    # Some buffers declare their count (binding then requires exactly that many elements).
    buffers = tuple(
        d.model_copy(update={"count": len(inputs[d.name])}) if g.chance(0.2) else d
        for d in program.buffers
    )
    name = draw(st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True))
    program = N.Program(name=name, workgroup_size=program.workgroup_size, buffers=buffers,
                        params=program.params, workgroup_arrays=program.workgroup_arrays,
                        body=program.body)
    return FuzzCase(program, inputs, grid, params)


def cases(opts: GenOptions | None = None) -> st.SearchStrategy[FuzzCase]:
    """Hypothesis strategy of valid, deterministic FuzzCases (see the module docstring)."""
    return _cases(opts or GenOptions())


ALL_TYPES = frozenset({I32, U32, F32, F16, F64, I64, U64})


def programs(opts: GenOptions | None = None) -> st.SearchStrategy[N.Program]:
    """Hypothesis strategy of valid Programs: the Programs of `cases` (by default over every
    value type, which validation and the wire format accept without a backend)."""
    return cases(opts or GenOptions(types=ALL_TYPES,
                                    atomic_types=frozenset({I32, U32, I64, U64})))\
        .map(lambda c: c.program)


# ------------------------------------------------------------------ driving


def available_instances(
    create: Callable[[str], Backend] | None = None,
) -> tuple[Backend, list[Backend], dict[str, str]]:
    """(reference, [other available backends], {unavailable name: reason}) instances."""
    from vyre.registry import available_backends, get_backend

    make = create or get_backend
    ref = make("reference")
    others: list[Backend] = []
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
    case: FuzzCase, reference: Backend, others: Sequence[Backend],
    expected_by_reference: dict[str, dict[str, np.ndarray]] | None = None,
) -> list[Disagreement]:
    """`run_case` plus the wire-format round trip of the case (Program and inputs)."""
    again = case_from_json(case_to_json(case))
    if again.program != case.program:
        return [Disagreement("wire format", None, "from_json(to_json(p)) != p")]
    for k, v in case.inputs.items():
        if again.inputs[k].tobytes() != v.tobytes():
            return [Disagreement("fuzz-case format", k, "inputs do not round-trip")]
    return run_case(case, reference, others, expected_by_reference)


def fuzz_backends(
    reference: Backend,
    others: Sequence[Backend],
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
            replay_file = save_on_request(case.program, case.inputs, case.config,
                                          others[0] if others else None, msg[:2000])
            also = f"; replay file: {replay_file}" if replay_file is not None else ""
            raise AssertionError(
                f"differential fuzzing found a disagreement; the shrunk case is saved as "
                f"{path} (replayed by tests/test_regressions.py){also}: {msg[:2000]}"
            ) from None
        raise
    return ran[0]


__all__ = [
    "ALL_TYPES", "CASE_FORMAT", "LOOP_LIMIT_KEYS", "WORKGROUP_SIZES", "Disagreement", "FuzzCase",
    "GenOptions",
    "approximate_buffers", "available_instances", "buffer_tolerance", "buffers_computed_with", "case_from_json", "case_to_json", "cases",
    "check_case", "count_loop_iterations", "fuzz_array", "fuzz_backends", "fuzz_settings",
    "load_case", "loop_limit", "loop_passes", "max_loop_iterations", "names_loop_limit",
    "operator_cases",
    "options_for", "programs", "regressions_dir", "run_case", "save_case", "sweep_edges",
    "sweep_inputs",
]
