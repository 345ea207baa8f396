"""Monte Carlo estimate of pi with a counter-based random generator (Philox4x32-10, as in
Random123 and cuRAND): invocation i draws points from counter (i, k, 0, 0) and counts those
inside the quarter circle.

    python examples/monte_carlo_pi.py [--backend wgpu] [--points 4194304]

A counter-based generator needs no state between invocations: the k-th block of invocation
i is a pure function of (i, k, key), so every backend, any grid and any order give the same
numbers. Philox is integer only (32x32 -> 64-bit products, done here with 16-bit halves in
u32 arithmetic, no u64 needed); a 32-bit word becomes a float in [0, 1) exactly, as
(w >> 8) * 2^-24. Then x*x + y*y < 1 is exact f32 arithmetic, and the count an integer
atomic: the same bits on every backend. Also checked against a NumPy Philox and the
Random123 known-answer test.
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import InOut, f32, u32

M0, M1 = 0xD2511F53, 0xCD9E8D57          # Philox4x32 multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85          # Weyl key increments
SAMPLES = 16                              # points per invocation (each Philox block: 2)


def mul_hi_lo(a, b: int):
    """(hi, lo) 32-bit halves of the 64-bit product a * b (a a u32 kernel value, b a u32
    constant), from 16-bit halves so that no partial product overflows."""
    al, ah = a & 0xFFFF, a >> 16
    bl, bh = b & 0xFFFF, b >> 16
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = vyre.let((ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF))   # < 3 * 2^16: no overflow
    hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16)
    return hi, a * b


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10: ten rounds on four counter words with a two-word key."""
    c = [vyre.let(c0), vyre.let(c1), vyre.let(c2), vyre.let(c3)]
    k = [vyre.let(k0), vyre.let(k1)]
    for r in range(10):                                 # Python loop: unrolled
        hi0, lo0 = mul_hi_lo(c[0], M0)
        hi1, lo1 = mul_hi_lo(c[2], M1)
        n0, n1 = vyre.let(hi1 ^ c[1] ^ k[0]), vyre.let(lo1)
        n2, n3 = vyre.let(hi0 ^ c[3] ^ k[1]), vyre.let(lo0)
        c = [n0, n1, n2, n3]
        if r < 9:
            k = [vyre.let(k[0] + W0), vyre.let(k[1] + W1)]
    return c


@vyre.kernel(workgroup_size=64)
def count_inside(inside: InOut[u32], n: u32, key0: u32, key1: u32):
    i = vyre.global_linear_id()
    if i < n:
        hits = vyre.lit(0, u32)
        for k in vyre.range(SAMPLES // 2, ty=u32):       # a device loop over a Python int
            w = philox(i, k, vyre.lit(0, u32), vyre.lit(0, u32), key0, key1)
            for a in (0, 2):                              # two points from four words
                x = (w[a] >> 8).cast(f32) * (1.0 / (1 << 24))
                y = (w[a + 1] >> 8).cast(f32) * (1.0 / (1 << 24))
                if x * x + y * y < 1.0:
                    hits += 1
        inside.atomic_add(0, hits)


@vyre.kernel(workgroup_size=64)
def philox_blocks(c: vyre.Buffer[u32], out: vyre.Output[u32], n: u32, key0: u32, key1: u32):
    """Philox on given counters (4 words each): for the known-answer test."""
    i = vyre.global_linear_id()
    if i < n:
        w = philox(c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3], key0, key1)
        for a in range(4):
            out[4 * i + a] = w[a]


def philox_numpy(ctr: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 on (m, 4) u32 counters, in NumPy with u64 products."""
    c = ctr.astype(np.uint64)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0, p1 = c[:, 0] * np.uint64(M0), c[:, 2] * np.uint64(M1)
        c = np.stack([(p1 >> np.uint64(32)) ^ c[:, 1] ^ k0, p1 & mask,
                      (p0 >> np.uint64(32)) ^ c[:, 3] ^ k1, p0 & mask], axis=1)
        k0, k1 = (k0 + np.uint64(W0)) & mask, (k1 + np.uint64(W1)) & mask
    return c.astype(np.uint32)


def count_numpy(invocations: int, key: tuple[int, int]) -> int:
    """The same count on the host (for the test)."""
    i, k = np.meshgrid(np.arange(invocations), np.arange(SAMPLES // 2), indexing="ij")
    ctr = np.stack([i.ravel(), k.ravel(), 0 * i.ravel(), 0 * i.ravel()], 1).astype(np.uint32)
    w = philox_numpy(ctr, key).reshape(-1, 2, 2)
    xy = (w >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))
    return int((xy[..., 0] * xy[..., 0] + xy[..., 1] * xy[..., 1] < np.float32(1)).sum())


KAT = [  # Random123's kat_vectors for philox4x32_10: counter, key, result
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def estimate(gpu: vyre.BaseBackend, points: int, key: tuple[int, int]) -> h.Outputs:
    invocations = points // SAMPLES
    out = count_inside.launch(gpu, invocations, np.zeros(1, np.uint32), n=invocations,
                              key0=key[0], key1=key[1])
    kat = [philox_blocks.launch(gpu, 1, np.uint32(c), 4, n=1, key0=k[0], key1=k[1])["out"]
           for c, k, _ in KAT]
    return {"inside": out["inside"], "kat": np.concatenate(kat)}


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=1 << 22, help="a multiple of 16")
    p.add_argument("--seed", type=int, default=2026)
    args = p.parse_args(argv)
    key = (args.seed & 0xFFFFFFFF, 0x5EED)
    result, ok = h.check_everywhere(lambda gpu: estimate(gpu, args.points, key), args.backend)
    points = args.points // SAMPLES * SAMPLES
    inside = int(result["inside"][0])
    est = 4.0 * inside / points
    print(f"{points} points, {inside} inside: pi ~ {est:.6f} (error {est - np.pi:+.6f}, "
          f"expected spread ~{4 * np.sqrt(np.pi / 4 * (1 - np.pi / 4) / points):.6f})")
    want_kat = np.array([v for _, _, r in KAT for v in r], np.uint32)
    if not h.same_bits(result["kat"], want_kat):
        print(f"FAILED: Philox known-answer test: got {[hex(v) for v in result['kat']]}")
        ok = False
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
