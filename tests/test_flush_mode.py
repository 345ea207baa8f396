"""Flush mode's tininess rules (docs/IR.md, "Subnormals and flush mode").

A device that flushes f32 subnormals reports which results next to FLT_MIN it flushes
(`details["flush_tininess"]`, one of `vyre.features.TININESS_RULES`), and the reference in
that mode computes the same bits. The rules differ only where a result's exact value lies
within half an ulp below FLT_MIN: products, fma and narrowing casts there. The pairs here
are checked against their exact values (Fractions), so neither the pairs nor the reference
can be wrong without a failure; every backend is run on them and compared with the
reference in its own mode, and with the value its reported rule gives.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from vyre import DispatchConfig, ProgramBuilder, ScalarType
from vyre import features as F
from vyre.backend import BaseBackend
from vyre.backends.reference import ReferenceBackend
from vyre.builder import fma
from vyre.tools.testing import EXACT, assert_agree, flush_tininess, flushed_types, reference_for

F32, F64 = ScalarType.F32, ScalarType.F64
TINY = np.float32(np.finfo(np.float32).tiny)


def _f32(bits: list[int]) -> np.ndarray:
    return np.array(bits, dtype=np.uint32).view(np.float32)


# x[i] * y[i]: exact value FLT_MIN (1 - d 2^-24), d = 0.46 (band A: rounds to FLT_MIN with an
# unbounded exponent) and d = 0.77 (band B: rounds below it), then both negated, then one
# exactly representable product (2 FLT_MIN * 0.5), then FLT_MIN (1 - 2^-24) exactly (the
# band B boundary: representable with 24 bits below FLT_MIN, a tie on the subnormal grid).
X = np.concatenate([_f32([0x205187F6, 0x205D6025]), -_f32([0x205187F6, 0x205D6025]),
                    np.array([2 * TINY, TINY], dtype=np.float32)])
Y = np.concatenate([_f32([0x1F9C6325, 0x1F94051B] * 2),
                    np.array([0.5, np.nextafter(np.float32(1), np.float32(0))], np.float32)])
BANDS = ["A", "B", "A", "B", "exact", "B"]
EXPECTED = {  # the product (and fma(x, y, 0), and the f64 product narrowed) per rule
    F.TININESS_AFTER_ROUNDING: {"A": TINY, "B": 0.0, "exact": TINY},
    F.TININESS_BEFORE_ROUNDING: {"A": 0.0, "B": 0.0, "exact": TINY},
    F.TININESS_SUBNORMAL_RESULT: {"A": TINY, "B": TINY, "exact": TINY},
    "ieee": {"A": TINY, "B": TINY, "exact": TINY},
}


def test_the_pairs_lie_where_the_rules_differ() -> None:
    t = Fraction(float(TINY))
    for x, y, band in zip(X, Y, BANDS, strict=True):
        d = 1 - abs(Fraction(float(x)) * Fraction(float(y))) / t
        assert {"A": 0 < d < Fraction(1, 2**25), "B": Fraction(1, 2**25) < d <= Fraction(1, 2**24),
                "exact": d == 0}[band], (x, y, band, float(d * 2**24))


def _program(wide: bool) -> object:
    k = ProgramBuilder("tiny_products", workgroup_size=8)
    xs, ys = k.buffer("x", F32), k.buffer("y", F32)
    p, f = k.buffer("p", F32, "write"), k.buffer("f", F32, "write")
    w = k.buffer("w", F32, "write") if wide else None
    i = k.global_linear_id()
    with k.if_(i < xs.length()):
        x, y = k.let(xs[i]), k.let(ys[i])
        p[i] = x * y
        f[i] = fma(x, y, k.lit(0.0, F32))
        if w is not None:  # exact in f64, one rounding to f32: a narrowing cast's tininess
            w[i] = (x.cast(F64) * y.cast(F64)).cast(F32)
    return k.build()


def _expected(rule: str) -> np.ndarray:
    mag = np.array([EXPECTED[rule][b] for b in BANDS], dtype=np.float32)
    return np.copysign(mag, X * Y).astype(np.float32)


def _run(b: BaseBackend, wide: bool) -> dict[str, np.ndarray]:
    n = X.size
    inputs = {"x": X, "y": Y, "p": n, "f": n, **({"w": n} if wide else {})}
    return b.dispatch(_program(wide), inputs, DispatchConfig(grid=1))


@pytest.mark.parametrize("rule", [*F.TININESS_RULES, "ieee"])
def test_reference_flushes_by_each_rule(rule: str) -> None:
    ref = (ReferenceBackend("reference[ieee]") if rule == "ieee" else
           ReferenceBackend(f"reference[{rule}]", flush_subnormals=frozenset({F32}),
                            flush_tininess=rule))
    got = _run(ref, wide=True)
    for name in ("p", "f", "w"):
        assert_agree(got[name], _expected(rule), EXACT, f"{name} under {rule}")
    if rule != "ieee":
        assert ref.capabilities().details["flush_tininess"] == rule


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="flush_tininess='sometimes'"):
        ReferenceBackend("reference[x]", flush_subnormals=frozenset({F32}),
                         flush_tininess="sometimes")


def test_every_backend_matches_its_reported_rule(backend: BaseBackend,
                                                 reference: BaseBackend) -> None:
    """On the H100's Vulkan driver (which flushes): 'after rounding', band B products 0."""
    wide = backend.supports("f64")
    got = _run(backend, wide)
    rule = flush_tininess(backend) if F32 in flushed_types(backend) else "ieee"
    want = _run(reference_for(backend, reference), wide)
    for name in got:
        assert_agree(got[name], want[name], EXACT, f"{name} on {backend.id} vs its reference")
        assert_agree(got[name], _expected(rule), EXACT, f"{name} on {backend.id} ({rule})")


@pytest.mark.wgpu
def test_wgpu_forced_flush_mode_reports_and_follows_its_rule(
    reference: BaseBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VYRE_WGPU_FLUSH_SUBNORMALS=1 on a device that keeps subnormals: vyre's code flushes
    the IEEE result ('subnormal result'); on a flushing device the device's rule stays."""
    from vyre.backends.wgpu import PROVIDER

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    native = PROVIDER.create()
    try:
        native_rule = flush_tininess(native) if flushed_types(native) else None
    finally:
        native.close()
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    forced = PROVIDER.create()
    try:
        rule = flush_tininess(forced)
        assert flushed_types(forced) == {F32}
        assert rule == (native_rule or F.TININESS_SUBNORMAL_RESULT)
        got = _run(forced, wide=False)
        want = _run(reference_for(forced, reference), wide=False)
        for name in got:
            assert_agree(got[name], want[name], EXACT, f"{name} forced vs its reference")
            assert_agree(got[name], _expected(rule), EXACT, f"{name} forced ({rule})")
    finally:
        forced.close()


# ------------------------------------------------------------------ the device's own flush


def _native_case_program() -> object:
    """Every native_flush.CASES operation, case i on invocation i's operands (a, b, c)."""
    from vyre.backends.wgpu import native_flush

    k = ProgramBuilder("native_flush_cases", workgroup_size=32)
    a, b, c = (k.buffer(n, F32) for n in ("a", "b", "c"))
    op = k.buffer("op", ScalarType.U32)
    out = k.buffer("out", F32, "write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        x, y, z, o = k.let(a[i]), k.let(b[i]), k.let(c[i]), k.let(op[i])
        r = k.let(fma(x, y, z))
        for code, result in enumerate((x + y, x - y, x * y)):  # add, sub, mul
            with k.if_(o == code):
                r.set(result)
        out[i] = r
    assert {op for op, _, _ in native_flush.CASES} == {"add", "sub", "mul", "fma"}
    return k.build()


def _native_case_inputs() -> dict[str, object]:
    from vyre.backends.wgpu import native_flush

    cols = [[*args, *[0] * (3 - len(args))] for _, args, _ in native_flush.CASES]
    ops = ["add", "sub", "mul", "fma"]
    return {"a": _f32([c[0] for c in cols]), "b": _f32([c[1] for c in cols]),
            "c": _f32([c[2] for c in cols]), "out": len(cols),
            "op": np.array([ops.index(o) for o, _, _ in native_flush.CASES], np.uint32)}


@pytest.mark.parametrize("rule", F.TININESS_RULES)
def test_native_flush_cases_are_flush_mode_by_the_reference(rule: str) -> None:
    """The results the native-flush probe demands are the reference's flush mode under each
    rule (so the probe cannot accept a device the conformance would then fail), and every
    case differs from IEEE gradual underflow."""
    from vyre.backends.wgpu import native_flush

    flushing = ReferenceBackend(f"reference[{rule}]", flush_subnormals=frozenset({F32}),
                                flush_tininess=rule)
    got = flushing.dispatch(_native_case_program(), _native_case_inputs(), DispatchConfig(grid=1))
    want = native_flush.expected(rule)
    assert want is not None
    assert got["out"].view(np.uint32).tolist() == want
    ieee = ReferenceBackend("reference[ieee]").dispatch(
        _native_case_program(), _native_case_inputs(), DispatchConfig(grid=1))
    same = [i for i, (g, w) in enumerate(zip(ieee["out"].view(np.uint32).tolist(), want,
                                             strict=True)) if g == w]
    # only the band cases agree with IEEE, and only where the rule rounds as IEEE does
    assert all(isinstance(native_flush.CASES[i][2], str) for i in same), same
    assert native_flush.expected("unknown: x") is None


@pytest.mark.wgpu
def test_wgpu_native_flush_is_reported_only_where_the_device_flushes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The device's own arithmetic is used for flush mode only on a device that flushes by
    itself (never in the forced mode on one that keeps subnormals, like lavapipe) and not
    with VYRE_WGPU_NATIVE_FLUSH=0; every way, the probe's cases give flush mode's bits."""
    from vyre.backends.wgpu import PROVIDER, native_flush

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    natively_flushes = None
    for env in ({}, {"VYRE_WGPU_FLUSH_SUBNORMALS": "1"}, {"VYRE_WGPU_NATIVE_FLUSH": "0"}):
        monkeypatch.delenv("VYRE_WGPU_FLUSH_SUBNORMALS", raising=False)
        monkeypatch.delenv("VYRE_WGPU_NATIVE_FLUSH", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        b = PROVIDER.create()
        try:
            native = b.capabilities().details["native_flush_ops"]
            if natively_flushes is None:
                natively_flushes = bool(flushed_types(b))
            assert native in ([], ["add", "sub", "mul", "fma"]), (env, native)
            if not natively_flushes or "VYRE_WGPU_NATIVE_FLUSH" in env:
                assert native == [], (env, native)
            if not flushed_types(b):
                continue
            got = b.dispatch(_native_case_program(), _native_case_inputs(), DispatchConfig(grid=1))
            want = native_flush.expected(flush_tininess(b))
            assert got["out"].view(np.uint32).tolist() == want, (env, native)
        finally:
            b.close()


@pytest.mark.wgpu
@pytest.mark.parametrize("rule", [F.TININESS_AFTER_ROUNDING, F.TININESS_BEFORE_ROUNDING])
def test_wgpu_narrowing_follows_the_rule_whatever_the_drivers_conversion_does(
    rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A narrowing f64 -> f32 in flush mode is tiny by the device's rule even where the
    driver's own conversion keeps f64's subnormal handling (NVIDIA's gives FLT_MIN for a
    band-B value, where 'after rounding' flushes it): vyre spells the rule. Here an adapter
    that does not flush (lavapipe) is made to report `rule` and flush mode is forced."""
    from vyre.backends.wgpu import PROVIDER
    from vyre.backends.wgpu import adapter as A

    avail = PROVIDER.probe()
    if not avail.available:
        pytest.skip(f"wgpu backend unavailable: {avail.reason}")
    monkeypatch.setattr(A, "_flushes_f32_subnormals", lambda device: (False, rule))
    monkeypatch.setenv("VYRE_WGPU_FLUSH_SUBNORMALS", "1")
    be = PROVIDER.create()
    try:
        if not be.supports("f64"):
            pytest.skip(f"{be.id} has no f64")
        assert flush_tininess(be) == rule and flushed_types(be) == {F32}
        # only w, the narrowed f64 products: lavapipe's own f32 products (p, f) keep IEEE
        # tininess, which the rule this adapter is made to report does not describe
        got = _run(be, wide=True)["w"]
    finally:
        be.close()
    assert_agree(got, _expected(rule), EXACT, f"narrowed products on {be.id} ({rule})")
