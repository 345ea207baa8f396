"""Histogram equalization of a grey image with the program library: `histogram` counts the
pixel values, `scan` turns the counts into the cumulative distribution, and a small kernel
of our own maps every pixel through it: three stages, one pipeline, one host sync; writes
`equalize.png` (before | after).

    python examples/equalize.py [--backend wgpu] [--size 128]

The library's `plan_*` functions return a `vyre.programs.Plan` (its dispatch steps and the
temporaries they use) instead of running, so their steps splice into a pipeline with ours.
Everything is integer arithmetic: the same bits on every backend.
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Buffer, Output, u32
from vyre.programs import histogram, scan

LEVELS = 256


@vyre.kernel(workgroup_size=256)
def remap(img: Buffer[u32], cdf: Buffer[u32], out: Output[u32], n: u32):
    """out = round-down(255 * cdf[v] / n) for each pixel value v: the equalizing map."""
    i = vyre.global_linear_id()
    if i < n:
        c = cdf[img[i]]
        # 255 * c overflows u32 past 16.8M pixels: split c = q * n + r first (c <= n)
        out[i] = (c / n) * 255 + ((c % n) * 255) / n


def low_contrast(size: int) -> np.ndarray:
    """A synthetic photo-like image squeezed into grey levels 80..150 (a washed-out scan)."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    img = (np.sin(7 * xx) * np.cos(5 * yy) + 0.6 * np.exp(-((xx - 0.6) ** 2 + (yy - 0.35) ** 2)
                                                          * 30) + 0.2 * np.sin(40 * xx * yy))
    img += np.random.default_rng(11).normal(0, 0.01, img.shape)
    img = (img - img.min()) / (img.max() - img.min())
    return np.round(80 + 70 * img).astype(np.uint32)


def equalize(gpu: vyre.BaseBackend, img: np.ndarray) -> h.Outputs:
    n = img.size
    src = gpu.allocate_device_buffer(img.nbytes, label="img")
    bins = gpu.allocate_device_buffer(LEVELS * 4, label="bins")
    cdf = gpu.allocate_device_buffer(LEVELS * 4, label="cdf")
    out = gpu.allocate_device_buffer(img.nbytes, label="out")
    plan = histogram.plan_histogram(gpu, src, n, bins, LEVELS)
    plan.extend(scan.plan_scan(gpu, bins, cdf, LEVELS, u32, inclusive=True))
    try:
        gpu.write(src, np.ascontiguousarray(img, np.uint32))
        steps = [*plan.steps, remap.step(n, src, cdf, out, n=n)]
        counts, result = gpu.pipeline(steps).run(read=[bins, out]).reads
        return {"counts": counts, "out": result.reshape(img.shape)}
    finally:
        for b in (src, bins, cdf, out, *plan.temporaries):
            gpu.free(b)


def numpy_equalize(img: np.ndarray) -> np.ndarray:
    """The same map in NumPy (for the test)."""
    cdf = np.cumsum(np.bincount(img.ravel(), minlength=LEVELS)).astype(np.uint64)
    return (255 * cdf[img] // img.size).astype(np.uint32)


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--out", default=str(h.HERE / "equalize.png"))
    args = p.parse_args(argv)
    img = low_contrast(args.size)
    result, ok = h.check_everywhere(lambda gpu: equalize(gpu, img), args.backend)
    out = result["out"]
    print(f"{args.size}x{args.size} pixels: grey levels {img.min()}..{img.max()} "
          f"({np.count_nonzero(result['counts'])} used) -> {out.min()}..{out.max()} "
          f"({np.unique(out).size} used)")
    if args.out:
        side = np.concatenate([img, np.full((args.size, 4), 255, np.uint32), out], axis=1)
        h.write_png(args.out, np.repeat(side.astype(np.uint8)[..., None], 3, axis=2))
        print(f"wrote {args.out}")
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
