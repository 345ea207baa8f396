"""Mandelbrot set: one invocation per pixel iterates z = z^2 + c in f32 and counts the steps
until |z| > 2; the host colours the counts and writes `mandelbrot.png`.

    python examples/mandelbrot.py [--backend wgpu] [--width 288 --height 192]

Only + - * and comparisons: exact IEEE f32 in vyre's IR, so every backend gives the same
counts, bit for bit (checked here against the reference backend).
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Output, f32, u32


@vyre.kernel(workgroup_size=(16, 16))
def mandelbrot(counts: Output[u32], width: u32, height: u32, x0: f32, y0: f32, step: f32,
               max_iter: u32):
    py, px = vyre.global_index(2)              # (row, column): NumPy order, like the image
    if px < width and py < height:
        cr = x0 + px.cast(f32) * step
        ci = y0 - py.cast(f32) * step
        zr, zi, n = 0.0, 0.0, vyre.lit(0, u32)
        while n < max_iter and zr * zr + zi * zi <= 4.0:   # per pixel: a device loop
            zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci   # both from the old z
            n += 1
        counts[py * width + px] = n


def compute(gpu: vyre.BaseBackend, width: int, height: int, max_iter: int) -> h.Outputs:
    """The iteration count of each pixel, (height, width) u32, of the view around the set."""
    step = np.float32(3.0 / width)
    out = mandelbrot.launch(gpu, (height, width), width * height, width=width, height=height,
                            x0=-2.2, y0=float(np.float32(step * height / 2)), step=float(step),
                            max_iter=max_iter)
    return {"counts": out["counts"].reshape(height, width)}


def picture(counts: np.ndarray, max_iter: int) -> np.ndarray:
    """Colour by a smooth function of the count; points in the set (max_iter) are black."""
    t = np.sqrt(counts / max_iter)
    rgb = h.colormap(t)
    rgb[counts >= max_iter] = 0
    return rgb


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=288)
    p.add_argument("--height", type=int, default=192)
    p.add_argument("--max-iter", type=int, default=200)
    p.add_argument("--out", default=str(h.HERE / "mandelbrot.png"))
    args = p.parse_args(argv)
    result, ok = h.check_everywhere(
        lambda gpu: compute(gpu, args.width, args.height, args.max_iter), args.backend)
    counts = result["counts"]
    inside = int((counts >= args.max_iter).sum())
    print(f"{args.width}x{args.height} pixels, {inside} inside the set "
          f"(area ~ {inside * (3.0 / args.width) ** 2:.4f}), mean count {counts.mean():.2f}")
    if args.out:
        h.write_png(args.out, picture(counts, args.max_iter))
        print(f"wrote {args.out}")
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
