"""The error of vyre/lower/maths/exp32.py's f32 path, over every f32 of its fast range: a
NumPy emulation of its operations in the same order (f32 arithmetic, the fma exactly as
scripts/logf_error.py's), against exp / exp2 in long double, relative to the table's scale.

    python scripts/expf_error.py            # exp and exp2: the largest |s + small - y|
                                            # (y = exp(x) / 2^(k >> 6), in [0.99, 2)),
                                            # against exp32's margin, and the slow path's share

Session 26 (every f32 of the fast range): exp 2^-37.32 against the margin 2^-35, 2^-12.6 of
the arguments to the slow path (exp2 2^-37.59 by an earlier emulation whose fma rounded
twice).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logf_error import fma

from vyre.lower.maths import exp32

f32, ld = np.float32, np.longdouble
_PAIRS = np.array(exp32._PAIRS, f32).reshape(-1, 2)
_M = f32(exp32.MAGIC)


def approx(x: np.ndarray, fn: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, small, k) of exp32.exp_f32's fast path for f32 `x`."""
    if fn == "exp":
        t = fma(x, exp32._C, _M)
        kf = t - _M
        rh = fma(kf, -f32(exp32._L1), x)
        rl = kf * -f32(exp32._L2)
    else:
        t = x * f32(64) + _M
        kf = t - _M
        r0 = fma(kf, f32(-1 / 64), x)
        rh = r0 * f32(exp32._LN2_HI)
        rl = fma(r0, exp32._LN2_LO, fma(r0, exp32._LN2_HI, -rh))
    i = t.view(np.uint32) & 63
    th, tl = _PAIRS[i, 0], _PAIRS[i, 1]
    rh2 = rh * rh
    poly = fma(rh, fma(rh, exp32._C4, exp32._C3), f32(0.5))
    rlw = fma(rl, fma(rh2, f32(0.5), rh), rl)
    tail = fma(rh2, poly, rlw)
    ph = th * rh
    pl = fma(th, rh, -ph)
    s = th + ph
    e1 = (th - s) + ph
    small = (fma(th, tail, fma(tl, rh, tl)) + pl) + e1
    return s, small, t.view(np.int32) - np.int32(0x4B400000)


def run(fn: str) -> None:
    lo, hi = exp32.FAST_RANGE[fn]
    worst, slow, count = 0.0, 0, 0
    m = f32(exp32._MARGIN)
    for start in range(0, 1 << 32, 1 << 24):
        x = np.arange(start, start + (1 << 24), dtype=np.uint64).astype(np.uint32).view(f32)
        x = x[(x >= lo) & (x <= hi)]
        if not x.size:
            continue
        s, small, k = approx(x, fn)
        e = (k >> 6).astype(ld)
        xl = x.astype(ld)
        y = np.exp2(xl - e) if fn == "exp2" else np.exp(xl - e * np.log(ld(2)))
        worst = max(worst, float(np.abs(s.astype(ld) + small.astype(ld) - y).max()))
        slow += int(((s + (small + m)) != (s + (small - m))).sum())
        count += x.size
    print(f"{fn}: {count} arguments; max |s + small - y| = 2^{np.log2(worst):.2f} "
          f"(margin 2^{np.log2(float(m)):.0f}); slow path {slow} (2^{np.log2(slow / count):.1f})",
          flush=True)
    assert worst < float(m), f"{fn}: the error exceeds the margin"


if __name__ == "__main__":
    for name in sys.argv[1:] or ["exp", "exp2"]:
        run(name)
