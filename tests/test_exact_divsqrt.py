"""vyre's exact f32 / f16 division, sqrt (vyre.lower.divsqrt) and fma (vyre.lower.fma),
checked on the reference.

The definitions replace division and sqrt where a target's own are not correctly rounded
(wgpu on NVIDIA's Vulkan driver). Here: `reference(P) == reference(lower(P, t))` for
each form (with and without the f64 fast path, f16 through f32, rem through the
division) in IEEE mode and in flush mode under every tininess rule, on the adapter
probe's hard cases plus random pairs over the whole exponent range; the results against
Python's exact arithmetic (Fraction) on ties in the subnormal range, subnormal, huge and
tiny quotients and overflow; and the fast path's correction: with the target's
estimates deliberately worse than a driver's (a few ulp off, a Newton factor cut to 4
significant bits) the results stay exact, so the midpoint test really decides them.
fma: the definitions' bits are the reference's in both modes, on random operands and on
cancelling and sticky sums.
"""

from __future__ import annotations

import sys
from contextlib import closing
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre import features as F
from vyre.backends.reference.runtime import ReferenceBackend
from vyre.backends.wgpu.divsqrt import div_cases, random_f32, sqrt_cases
from vyre.builder import ProgramBuilder, fma
from vyre.ir import nodes as N
from vyre.ir.analysis import walk_stmts
from vyre.ir.nodes import made
from vyre.ir.types import ScalarType as T
from vyre.ir.visit import ExprMap, child_blocks, map_block, stmt_exprs, walk_exprs, with_parts
from vyre.lower import Traits, lower
from vyre.tools.testing import div_sqrt_inputs, div_sqrt_program

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lowering_cases import LoweredReference

# each fast path (f64; f32 with an fma that rounds once, beside f64 for sqrt), none, the
# f32 one without f64, float rem through the division, f16 in f32
_FORMS = [Traits(wide=True), Traits(wide=True, fused_fma=True), Traits(),
          Traits(fused_fma=True), Traits(wide=True, float_rem=True),
          Traits(fused_fma=True, f16_arith=True)]
_MODES = [{}] + [{"flush_subnormals": frozenset({T.F32}), "flush_tininess": rule}
                 for rule in F.TININESS_RULES]


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    """The probe's hard cases (divsqrt.py), its sqrt cases, 2^15 pairs of random bits and
    2^15 pairs within 2^+-20 of each other."""
    rng = np.random.default_rng(34)
    a, b = div_cases()
    s = sqrt_cases()
    n = 1 << 15
    near = rng.standard_normal(n).astype(np.float32)
    xs = np.concatenate([a, s, random_f32(rng, n), near])
    ys = np.concatenate([b, np.resize(b, s.size), random_f32(rng, n),
                         near * np.float32(2.0) ** rng.integers(-20, 21, n).astype(np.float32)])
    return xs.astype(np.float32), ys.astype(np.float32)


def _f64_pairs() -> tuple[np.ndarray, np.ndarray]:
    """f64 pairs: the f32 hard cases widened, random bits (every exponent, subnormals,
    inf and NaN included), pairs within 2^+-20, subnormal / overflowing quotients and
    ties in the subnormal range."""
    rng = np.random.default_rng(37)
    a, b = div_cases(1024)
    n = 1 << 13
    ra, rb = (rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2)
              + rng.integers(0, 2, n, dtype=np.uint64) for _ in range(2))
    near = rng.standard_normal(n)
    tiny = np.array([5e-324, 1e-310, 2.2250738585072014e-308, 3e-300, 1e300, 1.7e308])
    ta, tb = np.meshgrid(tiny, np.array([3.0, 0.5, 1e10, 1e-10, 7.0]))
    # ties in the subnormal range: odd multiples of the smallest subnormal, halved
    odd = (np.arange(1, 400, 2, dtype=np.uint64) * np.uint64(12345)).view(np.float64)
    sa, sb = np.meshgrid(odd, np.array([2.0, 4.0, 6.0, -2.0]))
    xs = np.concatenate([a.astype(np.float64), ra.view(np.float64), near, ta.ravel(),
                         sa.ravel()])
    ys = np.concatenate([b.astype(np.float64), rb.view(np.float64),
                         near * 2.0 ** rng.integers(-20, 21, n), tb.ravel(), sb.ravel()])
    return xs, ys


def _same_bits(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    for name, w in want.items():
        g = got[name]
        differ = g.view(np.uint8) != w.view(np.uint8)
        if g.dtype.kind == "f":  # any NaN is any NaN (docs/IR.md)
            nan = np.isnan(g) & np.isnan(w)
            differ = (g.view(f"u{g.itemsize}") != w.view(f"u{w.itemsize}")) & ~nan
        bad = np.flatnonzero(differ)
        assert not bad.size, f"{what}: {name}: {bad.size} differ, e.g. {bad[:4]}"


@pytest.mark.parametrize("mode", _MODES, ids=["ieee", *F.TININESS_RULES])
@pytest.mark.parametrize("traits", _FORMS, ids=str)
def test_the_definitions_give_the_references_bits(traits: Traits, mode: dict) -> None:
    xs, ys = _pairs()
    rng = np.random.default_rng(35)  # f16 from random bits: every f16 exponent
    h = rng.integers(0, 1 << 16, 1 << 14, dtype=np.uint32).astype(np.uint16).view(np.float16)
    d, e = _f64_pairs()
    cases = [(T.F32, xs, ys), (T.F16, h, np.roll(h, 1)), (T.F64, d, e)]
    with closing(ReferenceBackend(**mode)) as ref, \
            closing(LoweredReference(traits, **mode)) as low:
        for ty, x, y in cases:
            p = div_sqrt_program(ty)
            _same_bits(low.dispatch(p, *div_sqrt_inputs(x, y)),
                       ref.dispatch(p, *div_sqrt_inputs(x, y)), f"{ty} {traits} {mode}")


def _f32(v: Fraction) -> np.float32:
    """`v` rounded to f32, nearest even, gradual underflow and overflow to inf included
    (Python's exact arithmetic: the oracle)."""
    if v == 0:
        return np.float32(0.0)
    s, m = (-1, -v) if v < 0 else (1, v)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    q = Fraction(2) ** (max(e, -126) - 23)  # the grid of the result's binade
    n, r = divmod(m / q, 1)
    n = int(n) + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2) else 0)
    out = n * q
    return np.float32(s * float(out)) if out < 2 ** 128 else np.float32(s * np.inf)


def _hard_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Ties in the subnormal range (odd multiples of the smallest subnormal halved),
    subnormal and tiny quotients, huge ones, overflow, and quotients next to 1."""
    sub = (np.arange(1, 400, 2, dtype=np.uint32) * np.uint32(0x1235)).view(np.float32)
    small = np.array([2.0**-126, 1.5 * 2.0**-126, 2.0**-125, 3.0 * 2.0**-140, 1e-38],
                     np.float32)
    a = [sub, sub, small, small, np.float32([3.4e38, 1e38, 2.0**127, 1.0, 3.0] * 4)]
    b = [np.full(sub.size, 2.0, np.float32), np.full(sub.size, 6.0, np.float32),
         np.float32([2.0, 3.0, 4.0, 1.5, 7.0]), np.float32([1e10, 3e30, 7.5, 2.0**40, 9.0]),
         np.float32([1e-10, 0.5, 0.25, 3.0, 1.0000001] * 4)]
    return np.concatenate(a), np.concatenate(b)


@pytest.mark.parametrize("traits", _FORMS[:4], ids=str)
def test_the_definitions_are_correctly_rounded(traits: Traits) -> None:
    xs, ys = _hard_pairs()
    with closing(LoweredReference(traits)) as low:
        got = low.dispatch(div_sqrt_program(T.F32), *div_sqrt_inputs(xs, ys))
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        q = _f32(Fraction(float(x)) / Fraction(float(y)))
        assert got["q"][i].view(np.uint32) == q.view(np.uint32), (x, y, got["q"][i], q)
    # sqrt: the root's square brackets x by the neighbours' midpoints
    for x, r in zip(xs, got["r"], strict=True):
        lo, hi = (Fraction(float(np.nextafter(r, np.float32(v)))) for v in (0.0, np.inf))
        rr = Fraction(float(r))
        assert ((lo + rr) / 2) ** 2 < Fraction(float(x)) < ((hi + rr) / 2) ** 2, (x, r)


def _worse_estimates(core: N.Program) -> N.Program:
    """`core` with the target's estimates (Native approx_div / approx_sqrt) made worse
    than any driver's within Vulkan's bounds: a quotient or root 1 to 3 ulp off (its low
    bits XOR 3), the Newton factor (a division of a constant) cut to 4 significant bits."""

    def worse(e: N.ExprNode, written: N.ExprNode) -> N.ExprNode:
        if isinstance(e, N.Invoke):
            return e.model_copy(update={"fn": function(e.fn)})
        if not (isinstance(e, N.Native) and e.op.startswith("approx_")):
            return e
        bits = made(N.Bitcast, a=e, ty=T.U32)
        factor = isinstance(e.args[0], N.Const)
        off = made(N.Binary, op="and" if factor else "xor", a=bits,
                   b=N.Const(ty=T.U32, value=0xFFF80000 if factor else 3), ty=T.U32)
        return made(N.Bitcast, a=off, ty=T.F32)

    def stmt(s: N.StmtNode) -> list[N.StmtNode]:
        m = ExprMap(worse)
        return [with_parts(s, tuple(map(m, stmt_exprs(s))), child_blocks(s))]

    def function(fn: N.Function) -> N.Function:
        return fn.model_copy(update={"body": map_block(fn.body, stmt),
                                     "result": ExprMap(worse)(fn.result)})

    return core.model_copy(update={"body": map_block(core.body, stmt)})


@pytest.mark.parametrize("mode", _MODES[:2], ids=["ieee", "flush"])
@pytest.mark.parametrize("traits", _FORMS[:2], ids=str)
def test_the_fast_path_corrects_bad_estimates(traits: Traits, mode: dict) -> None:
    xs, ys = _pairs()
    p = div_sqrt_program(T.F32)
    with closing(ReferenceBackend(**mode)) as ref, closing(LoweredReference(
            traits, rewrite=_worse_estimates, **mode)) as bad:
        _same_bits(bad.dispatch(p, *div_sqrt_inputs(xs, ys)),
                   ref.dispatch(p, *div_sqrt_inputs(xs, ys)), f"worse estimates {mode}")
    # (the rewrite reaches all four estimates, inside the definitions: in the worse core
    # each is the operand of a bitcast)
    core = lower(p, traits)
    assert _estimates(core) == (4, 0) and _estimates(_worse_estimates(core)) == (4, 4)


def _estimates(core: N.Program) -> tuple[int, int]:
    """(the estimates in `core`'s definitions, how many are a bitcast's operand)."""
    nodes = [n for s in walk_stmts(core.body) for e in stmt_exprs(s) for n in walk_exprs(e)]
    fns = {id(n.fn): n.fn for n in nodes if isinstance(n, N.Invoke)}
    for fn in fns.values():
        nodes += [n for s in walk_stmts(fn.body) for e in stmt_exprs(s) for n in walk_exprs(e)]
        nodes += walk_exprs(fn.result)
    est = {id(n) for n in nodes if isinstance(n, N.Native) and n.op.startswith("approx_")}
    wrapped = {id(n.a) for n in nodes if isinstance(n, N.Bitcast)} & est
    return len(est), len(wrapped)


# ------------------------------------------------------------------ fma (vyre.lower.fma)


def _fma_program(ty: T) -> N.Program:
    k = ProgramBuilder(f"fma_{ty}", workgroup_size=64)
    a, b, c = (k.buffer(n, ty) for n in "abc")
    out = k.buffer("out", ty, "write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        out[i] = fma(a[i], b[i], c[i])
    return k.build()


def _midpoint_products(ty: T, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """a, b whose exact product is a midpoint between two floats of `ty` (a = 1 + u h,
    b = 1 + v g with u, v odd and h g half an ulp at 1: the product's last bit is that
    half ulp), scaled by powers of two, and c a tiny addend of either sign: rounding the
    product once more before adding c would give a tie and round it to even, wrong in
    half the cases (double rounding)."""
    m = ty.numpy
    frac = {T.F32: 23, T.F16: 10, T.F64: 52}[ty]
    hb = (frac + 1) // 2  # h = 2^-hb, g = 2^-(frac + 1 - hb)
    u = rng.integers(0, 1 << (hb - 1), n) * 2 + 1
    v = rng.integers(0, 1 << (frac - hb), n) * 2 + 1
    k = rng.integers(-6, 7, n).astype(np.float64)
    a = ((1 + u * 2.0 ** -hb) * 2.0 ** k).astype(m)
    b = ((1 + v * 2.0 ** -(frac + 1 - hb)) * 2.0 ** -k).astype(m)
    c = (rng.choice([-1.0, 1.0], n) * 2.0 ** -(2 * frac + 8)).astype(m)
    return a, b, c


def _fma_operands(ty: T) -> dict[str, np.ndarray]:
    """Random bits (every exponent, specials included), products cancelling their addend
    to a tiny or zero sum, addends far below the product (the sticky bit decides), and
    exact midpoints with tiny addends (_midpoint_products)."""
    rng = np.random.default_rng(36)
    n = 1 << 14
    ma, mb, mc = _midpoint_products(ty, rng, n)
    ut = {T.F32: np.uint32, T.F16: np.uint16, T.F64: np.uint64}[ty]
    a, b, c = ((rng.integers(0, 1 << 62, n, dtype=np.uint64) * np.uint64(4)
                + rng.integers(0, 4, n, dtype=np.uint64)).astype(ut).view(ty.numpy)
               for _ in range(3))
    x = rng.standard_normal(n).astype(ty.numpy)
    y = rng.standard_normal(n).astype(ty.numpy)
    with np.errstate(all="ignore"):
        cancel = -(x * y).astype(ty.numpy)  # p + c = the rounding error
        tiny = (np.float64(np.finfo(ty.numpy).eps) * np.abs(x * y) / 3).astype(ty.numpy)
        small = x * np.finfo(ty.numpy).tiny
    return {"a": np.concatenate([a, x, x, x, small, ma]),
            "b": np.concatenate([b, y, y, y, y, mb]),
            "c": np.concatenate([c, cancel, tiny, -tiny, small, mc])}


@pytest.mark.parametrize("mode", _MODES, ids=["ieee", *F.TININESS_RULES])
@pytest.mark.parametrize("ty", [T.F32, T.F16, T.F64], ids=str)
def test_the_fma_definitions_give_the_references_bits(ty: T, mode: dict) -> None:
    """fma rounded once (the reference's is exact) by the definitions, wherever a
    target's rounds twice."""
    p = _fma_program(ty)
    data = _fma_operands(ty)
    inputs = {**data, "out": data["a"].size}
    cfg = DispatchConfig(grid=(data["a"].size + 63) // 64)
    core = lower(p, Traits(wide=True))
    assert any(isinstance(n, N.Invoke) for s in walk_stmts(core.body) for e in stmt_exprs(s)
               for n in walk_exprs(e))  # (the fma really is the definition's)
    with closing(ReferenceBackend(**mode)) as ref, \
            closing(LoweredReference(Traits(wide=True), **mode)) as low:
        _same_bits(low.dispatch(p, inputs, cfg), ref.dispatch(p, inputs, cfg), f"fma {ty}")
