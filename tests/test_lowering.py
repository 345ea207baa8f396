"""The shared lowering (vyre.lower) checked on the CPU: for every fuzz case, every saved
regression and every combination of target traits, the reference backend gives the same
bits for the lowered Program as for the Program itself. The reference evaluates the
lowered core's `Native` nodes with an assertion of their domain, so a lowering that ever
asks a target for a division by zero, an oversized shift or an out-of-range conversion
fails here, on any machine, before it could misbehave on a GPU. The fuzz cases are the
same whatever ran before in the process (tests/conftest.py pins Hypothesis's literals).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vyre import DispatchConfig
from vyre.backends.reference.runtime import ReferenceBackend
from vyre.builder import ProgramBuilder
from vyre.errors import InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType as T
from vyre.ir.validate import validate
from vyre.lower import NOTHING_NATIVE, Traits, all_traits, lower
from vyre.tools import fuzz
from vyre.tools.testing import EXACT, assert_agree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lowering_cases import (
    EDGE_A,
    EDGE_B,
    EDGE_F,
    EDGE_H,
    MEM_A,
    MEM_F,
    LoweredReference,
    edge_program,
    memory_program,
)

# every combination, less those where guarded_expr and in_place cannot matter (they only
# choose the form of the memory rule's accesses, which checked_memory turns off)
TRAITS = [t for t in all_traits() if not (t.checked_memory and (t.guarded_expr or t.in_place))]
CASES = sorted(fuzz.regressions_dir().glob("*.json"))


_REF = ReferenceBackend()
_LOWERED = {t: LoweredReference(t) for t in TRAITS}


def teardown_module() -> None:
    for b in (_REF, *_LOWERED.values()):
        b.close()


def _same(case: fuzz.FuzzCase, traits: Traits, want: dict[str, np.ndarray] | None = None,
          core: N.Program | None = None, alike: int = 0) -> None:
    """lower(P, traits) gives the reference's bits for P (`core`: that lowering, made
    already; `alike`: how many other combinations lower P to it)."""
    if want is None:
        want = _REF.dispatch(case.program, case.inputs, case.config)
    if core is None:
        got = _LOWERED[traits].dispatch(case.program, case.inputs, case.config)
    else:
        with closing(LoweredReference(traits, core)) as b:
            got = b.dispatch(case.program, case.inputs, case.config)
    also = f" (and {alike} other traits combinations lowering to this core)" if alike else ""
    for name, w in want.items():
        assert got[name].tobytes() == w.tobytes(), (
            f"{case.program.name}: {name} differs after lower(P, {traits}){also}:\n"
            f"got      {got[name]!r}\nexpected {w!r}")


_FIELDS = frozenset(f.name for f in dataclasses.fields(Traits))


@contextmanager
def _traits_read() -> Iterator[set[str]]:
    """The names of the Traits fields read while the block runs: every field once a Traits
    is used in any other way (hashed, compared, printed, copied, its __dict__ read: the
    generated methods and copy read every field, and any other attribute counts as all)."""
    read: set[str] = set()

    def getattribute(self: Traits, name: str) -> Any:
        if name in _FIELDS:
            read.add(name)
        elif name != "__class__":
            read.update(_FIELDS)
        return object.__getattribute__(self, name)

    setattr(Traits, "__getattribute__", getattribute)  # noqa: B010 (mypy: a method)
    try:
        yield read
    finally:
        delattr(Traits, "__getattribute__")


def _cores(program: N.Program) -> list[tuple[N.Program, list[Traits]]]:
    """lower(program, t) for every t of TRAITS, as (core, the combinations lowering to it).

    lower is a deterministic function of the program and of the traits fields it reads
    (_traits_read): a combination with the same values as an earlier one in every field
    that earlier lowering read takes the very same steps, so it gets that core without
    lowering again (most traits touch nothing in a given program: 640 lowerings of
    f16_pow's exact pow were 3 minutes of CI, its cores 20). Cores equal in content (two
    reads that lower alike) are one core."""
    known: list[tuple[dict[str, bool], N.Program, list[Traits]]] = []
    for t in TRAITS:
        same = next((ts for reads, _, ts in known
                     if all(getattr(t, k) == v for k, v in reads.items())), None)
        if same is not None:
            same.append(t)
            continue
        with _traits_read() as read:
            core = lower(program, t)
        known.append(({k: getattr(t, k) for k in read}, core, [t]))
    by_content: dict[str, tuple[N.Program, list[Traits]]] = {}
    for _, core, ts in known:
        by_content.setdefault(core.content_hash, (core, []))[1].extend(ts)
    return list(by_content.values())


def _every_traits(case: fuzz.FuzzCase) -> None:
    """`case` under every traits combination; combinations that lower the Program to the
    same core (traits it does not touch) run that core once."""
    want = _REF.dispatch(case.program, case.inputs, case.config)
    for core, ts in _cores(case.program):
        _same(case, ts[0], want, core, len(ts) - 1)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_lowering_keeps_every_regression(path: Path) -> None:
    _every_traits(fuzz.load_case(path))


# No long loops (65,536+ passes): a rewrite does not depend on a trip count, and the
# reference interprets such a loop for tens of seconds, twice per example (Hypothesis
# mutates one drawn long loop into many of the next examples: 12-25 s each for half of
# the 80 in CI's derandomized profile once f64 trig changed the draws). The saved
# regressions keep long loops here (for_loop_70000, nested_loops_100x1000: every traits
# combination) and test_fuzz draws them against the backends.
_EVERY_TYPE = fuzz.GenOptions(
    types=frozenset({T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64}),
    atomic_types=frozenset({T.I32, T.U32, T.I64, T.U64}), long_loops=0.0)


@fuzz.fuzz_settings(max_examples=80)
@given(fuzz.cases(_EVERY_TYPE), st.sampled_from(TRAITS))
def test_lowering_keeps_fuzz_cases(case: fuzz.FuzzCase, traits: Traits) -> None:
    _same(case, traits)


def _derandomized_fuzz_draws() -> list[str]:
    """The content hashes of the first derandomized fuzz.cases(_EVERY_TYPE) draws."""
    drawn: list[str] = []

    @settings(derandomize=True, database=None, max_examples=30, deadline=None)
    @given(fuzz.cases(_EVERY_TYPE))
    def draw(case: fuzz.FuzzCase) -> None:
        drawn.append(case.program.content_hash)

    draw()
    return drawn


def test_fuzz_draws_do_not_depend_on_the_modules_imported_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's examples are the same whatever earlier tests imported. Hypothesis draws some
    values from the literals of every local module in sys.modules; tests/conftest.py pins
    that pool to vyre's own literals for the session. Unpinned, test_distributed's import of
    vyre.distributed changed test_lowering_keeps_fuzz_cases's examples from the 9th on
    (3 s alone, minutes after it)."""
    before = _derandomized_fuzz_draws()
    path = tmp_path / "many_literals.py"  # a local module an earlier test could import
    path.write_text("LITERALS = (" + ", ".join(
        [str(i) for i in range(3, 400, 7)] + [f"{i}.625" for i in range(-50, 50, 3)]
        + [repr(f"s{i}") for i in range(60)]) + ")\n")
    spec = importlib.util.spec_from_file_location("_vyre_many_literals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, spec.name, module)
    assert _derandomized_fuzz_draws() == before


def edge_case() -> fuzz.FuzzCase:
    p = edge_program()
    return fuzz.FuzzCase(p, {"a": EDGE_A, "b": EDGE_B, "f": EDGE_F, "h": EDGE_H,
                             "lp": np.zeros(8, np.uint32)},
                         (8, 1, 1))


def test_lowering_edges() -> None:
    _every_traits(edge_case())


def test_edges_agree_on_every_backend(backend: Any) -> None:
    """The same edge program on each backend (wgpu: abs(i64(x)) once returned -5)."""
    case = edge_case()
    missing = case.program.required_features - backend.capabilities().features
    if missing:
        pytest.skip(f"{backend.id} lacks {sorted(missing)}")
    want = _REF.dispatch(case.program, case.inputs, case.config)
    got = backend.dispatch(case.program, case.inputs, case.config)
    for name, w in want.items():  # bit for bit, but a NaN's bits are not the IR's (docs/IR.md)
        assert_agree(got[name], w, EXACT, f"{backend.id} {name}")


def memory_case() -> fuzz.FuzzCase:
    return fuzz.FuzzCase(memory_program(), {"a": MEM_A, "f": MEM_F,
                                            "acc": np.array([0, 7, 0, 2], np.uint32)},
                         (1, 1, 1))


def test_lowering_memory_edges() -> None:
    _every_traits(memory_case())


# small saved cases whose lowerings read only some of the traits (the shortcut's check)
_PARTIAL = ("abs_of_i64_cast", "div_self_at_the_limits", "float_rem_step_by_step",
            "for_loop_70000", "u64_narrow_after_float_cast")


def test_cores_are_every_lowering() -> None:
    """_cores' shortcut holds: for programs whose lowering reads only some traits, each
    combination's own lower(P, t) is the core _cores gives it; a Traits used as a whole
    counts as read in full."""
    for name in _PARTIAL:
        p = fuzz.load_case(fuzz.regressions_dir() / f"{name}.json").program
        cores = _cores(p)
        got = {t: core.content_hash for core, ts in cores for t in ts}
        assert sorted(got, key=TRAITS.index) == TRAITS and len(cores) < len(TRAITS) / 10
        assert all(lower(p, t).content_hash == got[t] for t in TRAITS), name
    with _traits_read() as read:
        assert NOTHING_NATIVE.in_place is False
    assert read == {"in_place"}
    with _traits_read() as read:
        hash(NOTHING_NATIVE)
    assert read == _FIELDS


def test_memory_edges_agree_on_every_backend(backend: Any) -> None:
    """Out-of-range loads, stores and atomics give the reference's bits on each backend
    (the bounds checks are vyre.lower's; the printers spell raw accesses)."""
    case = memory_case()
    want = _REF.dispatch(case.program, case.inputs, case.config)
    assert want["o"][4:8].tolist() == [8, 8, 8, 8] and want["o"][20:24].tolist() == [0, 2, 0, 0]
    got = backend.dispatch(case.program, case.inputs, case.config)
    for name, w in want.items():
        assert_agree(got[name], w, EXACT, f"{backend.id} {name}")


def _programs() -> list[N.Program]:
    return [memory_program(), edge_program(), *(fuzz.load_case(c).program for c in CASES)]


@pytest.mark.parametrize("traits", [NOTHING_NATIVE, Traits(guarded_expr=True)], ids=str)
def test_lowered_core_has_only_raw_accesses(traits: Traits) -> None:
    """Below checked_memory every load / store / atomic is a raw one behind an index
    test (the printers refuse anything else)."""
    from vyre.ir.analysis import walk_stmts

    for p in _programs():
        core = lower(p, traits)
        exprs, stmts = _all_exprs(core), list(walk_stmts(core.body))
        assert not [e for e in exprs if type(e) is N.Load], p.name
        assert not [s for s in stmts if type(s) in (N.Store, N.Atomic)], p.name
        guarded = any(isinstance(e, N.Guarded) for e in exprs)  # (WGSL's select is eager)
        assert guarded if traits.guarded_expr and p.name == "lower_memory" else (
            traits.guarded_expr or not guarded), p.name


def test_checked_memory_keeps_the_accesses() -> None:
    """A target with checked memory keeps every load / store / atomic (no raw ones)."""
    from vyre.ir.analysis import walk_stmts

    for p in _programs():
        core = lower(p, Traits(checked_memory=True))
        assert core is p or not any(isinstance(x, (N.RawLoad, N.RawStore, N.RawAtomic))
                                    for x in [*_all_exprs(core), *walk_stmts(core.body)])


def test_raw_access_out_of_range_is_caught_by_the_reference() -> None:
    """The reference checks the memory rule: a raw access out of range on an active lane
    is an AssertionError (a lowering that dropped an index test fails on the CPU)."""
    k = ProgramBuilder("bad_raw", workgroup_size=2)
    a = k.buffer("a", T.U32)
    o = k.buffer("o", T.U32, "write", count=1)
    k.store(o, 0, a[k.local_index()])
    p = k.build()
    (st_,) = p.body
    assert isinstance(st_, N.Store)
    raw_load = N.RawLoad(buffer="a", index=N.Builtin(name="local_index"), ty=T.U32)
    guarded = N.Guarded(cond=N.Binary(op="lt", a=raw_load.index, b=N.Length(buffer="a"),
                                      ty=T.BOOL),
                        a=raw_load, b=N.Const(ty=T.U32, value=0), ty=T.U32)
    zero = N.Const(ty=T.U32, value=0)
    variants = {
        "unguarded load": N.RawStore(buffer="o", index=zero, value=raw_load),
        "store": N.RawStore(buffer="o", index=N.Builtin(name="local_index"), value=zero),
        "atomic": N.RawAtomic(op="add", buffer="o", index=N.Builtin(name="local_index"),
                              value=zero),
    }
    for what, bad in variants.items():
        broken = p.model_copy(update={"body": (bad,)})
        with pytest.raises(AssertionError, match="out of range"):
            LoweredReference(NOTHING_NATIVE, broken).dispatch(
                p, {"a": np.ones(1, np.uint32)}, DispatchConfig(grid=(1, 1, 1)))
        del what
    # the lazy guard keeps the same raw load in range: lane 1 never evaluates it
    fine = p.model_copy(update={"body": (N.RawStore(buffer="o", index=zero, value=guarded),)})
    got = LoweredReference(NOTHING_NATIVE, fine).dispatch(p, {"a": np.array([5], np.uint32)},
                                                          DispatchConfig(grid=(1, 1, 1)))
    assert got["o"].tolist() in ([5], [0])  # racy store of lanes 0 (5) and 1 (0)


def test_lowered_core_is_refused_by_the_validator() -> None:
    k = ProgramBuilder("shift", workgroup_size=1)
    a = k.buffer("a", T.U32, "read_write", count=2)
    a[0] = a[0] << a[1]  # lowered without new locals: a masked native shift
    lowered = lower(k.build(), Traits(checked_memory=True))
    assert any(isinstance(e, N.Native) for e in _all_exprs(lowered))
    with pytest.raises(InvalidProgram, match="internal node of the lowered core"):
        validate(lowered)
    # the raw accesses of the memory rule likewise (with guarded_expr no local is added)
    with pytest.raises(InvalidProgram, match="RawStore is an internal node"):
        validate(lower(k.build(), Traits(guarded_expr=True)))
    # the locals the lowering adds are named so no user name can collide with them
    with pytest.raises(InvalidProgram, match="not a valid name"):
        validate(lower(edge_program(), NOTHING_NATIVE))


def test_native_outside_its_domain_is_caught_by_the_reference() -> None:
    k = ProgramBuilder("bad_native", workgroup_size=1)
    o = k.buffer("o", T.I32, "write", count=1)
    k.store(o, 0, 1)
    p = k.build()
    (st_,) = [s for s in p.body if isinstance(s, N.Store)]
    bad = N.Native(op="div", args=(N.Const(ty=T.I32, value=1), N.Const(ty=T.I32, value=0)),
                   ty=T.I32)
    broken = p.model_copy(update={"body": (st_.model_copy(update={"value": bad}),)})
    with pytest.raises(AssertionError, match="outside its domain"):
        LoweredReference(NOTHING_NATIVE, broken).dispatch(p, {}, DispatchConfig(grid=(1, 1, 1)))


def _all_exprs(p: N.Program) -> list[N.ExprNode]:
    from vyre.ir.analysis import walk_all_exprs

    return list(walk_all_exprs(p))


def test_printers_refuse_a_bad_program_the_same_way() -> None:
    """A Program the validator refuses fails in both printers with the same InvalidProgram
    (not a TypeError / KeyError from deep inside one of them)."""
    from vyre.backends.cuda.render import generate as cuda_generate
    from vyre.backends.wgpu.render import generate as wgsl_generate

    k = ProgramBuilder("bad", workgroup_size=1)
    o = k.buffer("o", T.U32, "write", count=1)
    o[0] = 1
    good = k.build()
    (st_,) = good.body
    undeclared = N.Var(name="nowhere", ty=T.U32)
    bad = good.model_copy(update={"body": (st_.model_copy(update={"value": undeclared}),)})
    errors = []
    for gen in (cuda_generate, wgsl_generate):
        with pytest.raises(InvalidProgram) as info:
            gen(bad)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "nowhere" in errors[0]


def test_ranges_drop_the_index_tests_of_the_matmul_tile_reads() -> None:
    """The library matmul's workgroup tile reads (its hot loop) are bounded by
    vyre.lower.ranges, so they reach the printers as raw reads with no test."""
    from vyre.ir.analysis import walk_stmts
    from vyre.programs.matmul import matmul_program

    for traits in (NOTHING_NATIVE, Traits(guarded_expr=True)):
        core = lower(matmul_program(), traits)
        reads = [e for e in _all_exprs(core)
                 if isinstance(e, N.RawLoad) and e.buffer.startswith("tile")]
        tested = [s for s in walk_stmts(core.body) if isinstance(s, N.If)
                  and any(isinstance(x, N.Assign) and isinstance(x.value, N.RawLoad)
                          and x.value.buffer.startswith("tile") for x in s.then)]
        lazy = [e for e in _all_exprs(core) if isinstance(e, N.Guarded)
                and isinstance(e.a, N.RawLoad) and e.a.buffer.startswith("tile")]
        assert len(reads) >= 64 and not tested and not lazy
