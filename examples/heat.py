"""Heat equation on a square plate: explicit 5-point finite differences in f32, two hot
spots and a cold edge, many time steps in one pipeline run; writes `heat.png`.

    python examples/heat.py [--backend wgpu] [--size 128 --steps 200]

u'[y, x] = u + r * (u[y-1, x] + u[y+1, x] + u[y, x-1] + u[y, x+1] - 4 u), r = 0.2 (stable
for r <= 0.25), boundaries held fixed. The two buffers swap roles each step (a -> b, b -> a:
one pipeline of two Steps run `steps / 2` times, one host sync). Only + - *: exact f32, the
same bits on every backend.
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Buffer, Output, f32, u32


@vyre.kernel(workgroup_size=(16, 16))
def heat_step(u: Buffer[f32], out: Output[f32], width: u32, height: u32, r: f32):
    x, y = vyre.global_id(0), vyre.global_id(1)
    if x < width and y < height:
        i = y * width + x
        edge = (x == 0) | (y == 0) | (x == width - 1) | (y == height - 1)
        if edge:
            out[i] = u[i]                               # fixed boundary values
        else:
            lap = (u[i - width] + u[i + width]) + (u[i - 1] + u[i + 1]) - 4.0 * u[i]
            out[i] = u[i] + r * lap


def initial(n: int) -> np.ndarray:
    """A plate at 0 with two hot discs (1.0 and 0.7) and its top edge held at 0.4."""
    yy, xx = np.mgrid[0:n, 0:n] / n
    u = np.zeros((n, n), np.float32)
    u[(xx - 0.3) ** 2 + (yy - 0.4) ** 2 < 0.01] = 1.0
    u[(xx - 0.7) ** 2 + (yy - 0.65) ** 2 < 0.02] = 0.7
    u[0, :] = 0.4
    return u


def simulate(gpu: vyre.BaseBackend, n: int, steps: int) -> h.Outputs:
    """The plate after `steps` (even) time steps, as an (n, n) f32 array."""
    u0 = initial(n)
    a = gpu.allocate_device_buffer(u0.nbytes, label="a")
    b = gpu.allocate_device_buffer(u0.nbytes, label="b")
    try:
        gpu.write(a, u0)
        pipe = gpu.pipeline([heat_step.step((n, n), a, b, width=n, height=n, r=0.2),
                             heat_step.step((n, n), b, a, width=n, height=n, r=0.2)])
        u = pipe.run(repeat=steps // 2, read=[a]).reads[0]
        return {"u": u.reshape(n, n)}
    finally:
        gpu.free(a)
        gpu.free(b)


def numpy_steps(n: int, steps: int) -> np.ndarray:
    """The same scheme in NumPy, same f32 operations in the same order (for the test)."""
    u = initial(n)
    r = np.float32(0.2)
    for _ in range(steps):
        v = u.copy()
        c = u[1:-1, 1:-1]
        lap = (u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]) - np.float32(4) * c
        v[1:-1, 1:-1] = c + r * lap
        u = v
    return u


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--steps", type=int, default=200, help="time steps (rounded up to even)")
    p.add_argument("--out", default=str(h.HERE / "heat.png"))
    args = p.parse_args(argv)
    steps = args.steps + args.steps % 2
    result, ok = h.check_everywhere(lambda gpu: simulate(gpu, args.size, steps), args.backend)
    u = result["u"]
    print(f"{args.size}x{args.size} plate after {steps} steps: heat {u.sum(dtype=np.float64):.4f}"
          f" (was {initial(args.size).sum(dtype=np.float64):.4f}), max {u.max():.4f}")
    if args.out:
        h.write_png(args.out, h.colormap(u / u.max()))  # brightest = white
        print(f"wrote {args.out}")
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
