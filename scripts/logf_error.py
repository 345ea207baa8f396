"""The error of vyre/lower/maths/log32.py's f32 path, over every positive normal f32: a
NumPy emulation of its operations in the same order (f32 arithmetic; the fma exactly, by
an f64 sum rounded to odd and then to f32), against log1p(z - 1) in long double.

    python scripts/logf_error.py            # log and log2: max relative error of s + small,
                                            # and how many arguments the margin test sends on

For each function: the largest |s + small - log(x)| / |log(x)| (and its argument), the
same over the bins beside 1 (where log(x) = log1p(r)), whether log(1) and log2(2^k) come
out exact, and the share of arguments whose RN(s + (small +- margin)) differ (the slow
path's). Also checks that r = z c - 1 is exact and the Fast2Sum operands are ordered.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from vyre.lower.maths import log32

f32, f64, ld = np.float32, np.float64, np.longdouble


def fma(a: np.ndarray, b: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """a * b + c rounded once to f32: the f64 sum rounded to odd, then to f32 (53 >= 24 + 2
    bits, so the second rounding is correct)."""
    p = np.asarray(a, f32).astype(f64) * f64(f32(b))  # exact (48 bits)
    cc = np.asarray(c, f32).astype(f64)
    s = p + cc
    bb = s - p
    err = (p - (s - bb)) + (cc - bb)  # TwoSum: s + err = p + c exactly
    even = (s.view(np.uint64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(f32)


def per_z(fn: str) -> dict[str, np.ndarray]:
    """What depends only on z = x / 2^k (2^23 values, bins in order)."""
    tab = np.array(log32.TABLE[fn], f32).reshape(-1, 4)
    t = np.arange(1 << 23, dtype=np.uint32)
    z = (np.uint32(log32.OFF) + t).view(f32)
    i = t >> 16
    c, th, tl = tab[i, 0], tab[i, 1], tab[i, 2]
    r = fma(z, c, f32(-1))
    exact_r = (z.astype(f64) * c.astype(f64) - 1.0) == r.astype(f64)
    assert exact_r.all(), "r = z c - 1 not exact"
    h = r * f32(-0.5)
    p0 = fma(h, r, r)
    e0 = fma(h, r, r - p0)
    c3, c4, c5 = (f32(v) for v in log32.POLY)
    pl = fma((r * r) * r, fma(r, fma(r, c5, c4), c3), e0)
    d: dict[str, np.ndarray] = {"i": i, "z": z, "tl": tl, "pl": pl}
    if fn == "log":
        ph = p0
    else:
        ph = p0 * f32(log32.L2EH)
        phl = fma(p0, log32.L2EH, -ph)
        d["tail"] = fma(p0, log32.L2EL, fma(pl, log32.L2EH, tl)) + phl
    assert ((np.abs(th) >= np.abs(ph)) | (th == 0)).all(), "Fast2Sum(th, ph) unordered"
    v = th + ph
    d["v"], d["ev"] = v, ph - (v - th)
    zl = z.astype(ld)
    true = np.log1p(zl - 1)  # (z - 1 is exact)
    d["true"] = true if fn == "log" else true / np.log(ld(2))
    return d


def run(fn: str) -> None:
    t0 = time.time()
    d = per_z(fn)
    ln2 = np.log(ld(2))
    margin = f32(log32._MARGIN)
    worst, worst_x, worst1 = 0.0, 0.0, 0.0
    slow = total = 0
    for k in range(-126, 129):
        t = np.arange(1 << 23, dtype=np.int64)
        u = log32.OFF + (k << 23) + t
        ok = (u >= 0x00800000) & (u < 0x7F800000)
        if not ok.any():
            continue
        kf = f32(k)
        if fn == "log":
            head = kf * f32(log32.L2H)
            assert float(head) == k * log32.L2H
            tail = fma(np.full(1 << 23, kf), log32.L2L, d["tl"]) + d["pl"]
            true = k * ln2 + d["true"]
        else:
            head = kf
            tail = d["tail"]
            true = k + d["true"]
        v = d["v"]
        s = head + v
        assert k == 0 or (np.abs(v) < abs(float(head))).all()
        es = v - (s - head)
        small = (tail + d["ev"]) + es
        mv = s * margin
        up = s + (small + mv)
        down = s + (small - mv)
        y = s.astype(ld) + small.astype(ld)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs((y - true) / true)
        zero = true == 0
        assert (y[zero & ok] == 0).all() and (up[zero & ok] == 0).all()
        rel = np.where(zero | ~ok, 0, rel)
        j = int(np.argmax(rel))
        if rel[j] > worst:
            worst = float(rel[j])
            worst_x = float((np.uint32(u[j])).view(f32))
        if k == 0:
            near1 = (d["i"] == 76) | (d["i"] == 77)
            worst1 = float(rel[near1].max())
        if fn == "log2":
            exact = (t == 77 << 16) & ok  # x = 2^k
            assert (up[exact] == k).all() and (down[exact] == k).all()
        total += int(ok.sum())
        slow += int((ok & (up != down)).sum())
    print(f"{fn}: max relative error 2^{np.log2(worst):.2f} (x = {worst_x!r}); "
          f"beside 1: 2^{np.log2(worst1):.2f}; margin 2^{np.log2(float(margin)):.0f}: "
          f"{slow} of {total} arguments to the slow path (2^{np.log2(slow / total):.2f}); "
          f"{time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["log", "log2"]:
        run(name)
