"""The error of vyre/lower/maths/sincos32.py's f32 path, over every f32 of its fast range: a
NumPy emulation of its operations in the same order (f32 arithmetic, the fma exactly as
scripts/logf_error.py's), against sin / cos in long double, measured against the path's
margin m = 2^-35 |S| + 2^-36 |s| + 2^-52 (S the table's sine, s the head).

    python scripts/sinf_error.py            # sin, cos, tan: every x in [2^-60, 400]
    python scripts/sinf_error.py --sample   # 2^22 arguments in [-100, 100] (seconds)
    python scripts/sinf_error.py tan        # one function

It prints the largest error / m (tan: the quotient's error / (M |1 / s2|), tan_f32's
docstring; below 1: every fast result correctly rounded; the path's
negation symmetry makes the positive half enough) and the share of arguments the margin
test sends to the slow path, per argument and per 32-lane group.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logf_error import fma

from vyre.lower.maths import sincos32 as M

f32, ld = np.float32, np.longdouble
_T = np.array(M.PAIRS, f32).reshape(-1, 2)
_MAGIC = f32(M.MAGIC)


def approx(x: np.ndarray, is_cos: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, tail, |S|) of sincos32.sincos_f32's fast path for f32 `x`."""
    t = fma(x, M._C, _MAGIC)
    kf = t - _MAGIC
    a = fma(kf, -f32(M._P1), x)
    qh = kf * f32(M._P2)
    ql = fma(kf, M._P2, -qh)
    rh = a - qh
    bb = rh - a
    e = (a - (rh - bb)) + (-qh - bb)
    rl = fma(kf, -f32(M._P3), e - ql)
    j = t.view(np.uint32) + np.uint32(M._N // 2 if is_cos else 0)
    i_s, i_c = j & (2 * M._N - 1), (j + M._N // 2) & (2 * M._N - 1)
    s_hi, s_lo, c_hi, c_lo = _T[i_s, 0], _T[i_s, 1], _T[i_c, 0], _T[i_c, 1]
    r2 = rh * rh
    s_r = (rh * r2) * fma(r2, M._K120, -f32(M._K6))
    ph = c_hi * rh
    pl = fma(c_hi, rh, -ph)
    s = s_hi + ph
    e1 = (s_hi - s) + ph
    h = fma(r2, M._K24, f32(-0.5))
    small = fma(c_hi, s_r, pl)
    small = fma(c_lo, rh, small)
    small = fma(fma(-s_hi, rh, c_hi), rl, small)
    small = fma(s_lo, r2 * h, s_lo + small)
    tail = fma(s_hi * r2, h, small + e1)
    return s, tail, np.abs(s_hi)


def study(x: np.ndarray, is_cos: bool) -> tuple[float, int, int]:
    """(max error / m, arguments sent on, 32-lane groups sent on) over `x`."""
    s, tail, s_abs = approx(x, is_cos)
    xl = x.astype(ld)
    want = np.cos(xl) if is_cos else np.sin(xl)
    err = np.abs(s.astype(ld) + tail.astype(ld) - want)
    m = fma(s_abs, M._E_TABLE, fma(np.abs(s), M._E_RESULT, M._E_ABS))
    slow = (s + (tail + m)) != (s + (tail - m))
    groups = slow[: slow.size // 32 * 32].reshape(-1, 32).any(axis=1)
    return float((err / m.astype(ld)).max()), int(slow.sum()), int(groups.sum())


def study_tan(x: np.ndarray) -> tuple[float, int, int]:
    """study's figures for sincos32.tan_f32: the quotient's error against M |1 / s2|."""
    parts = []
    for is_cos in (False, True):
        s, tail, s_abs = approx(x, is_cos)
        m = fma(s_abs, M._E_TABLE, fma(np.abs(s), M._E_RESULT, M._E_ABS))
        hi = s + tail
        parts.append((hi, tail - (hi - s), m))
    (s1, t1, m1), (s2, t2, m2) = parts
    with np.errstate(all="ignore"):
        inv = f32(1) / s2
        q = s1 * inv
        c = fma(-q, t2, fma(-q, s2, s1) + t1)
        big = fma(np.abs(q), m2, m1)
        up, down = q + (c + big) * inv, q + (c - big) * inv
        want = np.tan(x.astype(ld))
        err = np.abs(q.astype(ld) + c.astype(ld) * inv.astype(ld) - want)
        bound = big.astype(ld) * np.abs(inv.astype(ld))
        ok = np.isfinite(bound) & (bound > 0)
    slow = up != down
    groups = slow[: slow.size // 32 * 32].reshape(-1, 32).any(axis=1)
    return float((err[ok] / bound[ok]).max()), int(slow.sum()), int(groups.sum())


def main() -> None:
    lo, hi = M.FAST_RANGE
    names = [a for a in sys.argv[1:] if not a.startswith("-")] or ["sin", "cos", "tan"]
    for name in names:
        is_cos = name == "cos"
        run = study_tan if name == "tan" else lambda v, c=is_cos: study(v, c)
        if "--sample" in sys.argv:
            x = np.random.default_rng(12).uniform(-100, 100, 1 << 22).astype(f32)
            worst, slow, groups = run(x)
            count = x.size
        else:
            worst, slow, groups, count = 0.0, 0, 0, 0
            start = int(np.float32(lo).view(np.uint32))
            stop = int(np.float32(hi).view(np.uint32)) + 1
            for b in range(start, stop, 1 << 24):
                x = np.arange(b, min(b + (1 << 24), stop), dtype=np.uint32).view(f32)
                w, sl, g = run(x)
                worst, slow, groups, count = max(worst, w), slow + sl, groups + g, count + x.size
        print(f"{name}: {count} arguments; max error / margin {worst:.3f}; slow path "
              f"{slow / count:.2e} of arguments, {32 * groups / count:.2e} of 32-lane groups",
              flush=True)
        assert worst < 1.0, f"{name}: an error exceeds the margin"


if __name__ == "__main__":
    main()
