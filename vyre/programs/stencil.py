# mypy: disable-error-code="valid-type,type-arg,index"
# (decorated kernels annotate with vyre types, which are values, not Python types)
"""2-D five-point stencils on row-major f32 grids (H rows x W columns): the Laplacian,
a blur, or any weights, with clamped (replicate-edge) or zero boundaries.

out[y, x] = ((((wc*u[y,x] + wn*u[y-1,x]) + ws*u[y+1,x]) + ww*u[y,x-1]) + we*u[y,x+1]),
evaluated in exactly that order in f32 with no fma, so every backend and the NumPy
`stencil_reference` agree bit for bit. Boundary "clamp" reads the nearest edge cell for a
neighbour outside the grid; "zero" reads 0 there. `iterate_stencil` ping-pongs two resident
buffers as one recorded pipeline (repeat), never touching the host between steps. This
module must never read neighbours outside the grid from memory.
"""

from __future__ import annotations

import numpy as np

from vyre.buffer import DeviceBuffer
from vyre.builder import Value, select
from vyre.config import MAX_GRID_DIM, DispatchConfig
from vyre.features import PIPELINE
from vyre.interface import Backend
from vyre.ir.nodes import Program
from vyre.kernel import Buffer, Output, global_id, kernel, let  # the kernel language
from vyre.pipeline import Step

from ._common import LibraryArgumentError, alloc, ceil_div, check_room, f32, read_elems, u32, upload

TILE = 16
BOUNDARIES = ("clamp", "zero")
LAPLACIAN = (-4.0, 1.0, 1.0, 1.0, 1.0)  # centre, north, south, west, east
BLUR = (0.5, 0.125, 0.125, 0.125, 0.125)


def _tile(boundary: str, tile: int) -> tuple[int, int]:
    return (tile, tile)


@kernel(workgroup_size=_tile, name="stencil5")
def _stencil5(u: Buffer[f32], out: Output[f32], H: u32, W: u32, wc: f32, wn: f32, ws: f32,
              ww: f32, we: f32, *, boundary: str, tile: int) -> None:
    x = let(global_id(0))
    y = let(global_id(1))
    if x < W and y < H:
        def nb(ok: Value, yy: Value, xx: Value) -> Value:  # neighbour, or the edge / 0
            v = u[select(ok, yy, y) * W + select(ok, xx, x)]
            return v if boundary == "clamp" else select(ok, v, 0.0)

        c = let(u[y * W + x])
        r = wc * c + wn * nb(y > 0, y - 1, x)
        r = r + ws * nb(y + 1 < H, y + 1, x)
        r = r + ww * nb(x > 0, y, x - 1)
        out[y * W + x] = r + we * nb(x + 1 < W, y, x + 1)


def stencil_program(boundary: str = "clamp", tile: int = TILE) -> Program:
    """One five-point step u -> out (params H, W and weights wc, wn, ws, ww, we)."""
    if boundary not in BOUNDARIES:
        raise LibraryArgumentError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    return _stencil5.build(boundary=boundary, tile=tile)


def stencil_config(
    h: int, w: int, weights: tuple[float, ...] = LAPLACIAN, tile: int = TILE
) -> DispatchConfig:
    gx, gy = ceil_div(w, tile), ceil_div(h, tile)
    if gx > MAX_GRID_DIM or gy > MAX_GRID_DIM:
        raise LibraryArgumentError(f"a {h} x {w} grid needs more than {MAX_GRID_DIM} tiles per side; "
                                   "use a larger tile or split the grid")
    names = ("wc", "wn", "ws", "ww", "we")
    return DispatchConfig(grid=(gx, gy, 1), params={"H": h, "W": w, **dict(zip(names, weights))})


def iterate_stencil(
    backend: Backend,
    u: DeviceBuffer,
    scratch: DeviceBuffer,
    h: int,
    w: int,
    steps: int,
    weights: tuple[float, ...] = BLUR,
    boundary: str = "clamp",
    use_pipeline: bool | None = None,
) -> DeviceBuffer:
    """Apply the stencil `steps` times, ping-ponging u <-> scratch on the device; returns
    the buffer holding the result (u for an even number of steps, else scratch)."""
    check_room("iterate_stencil", ("u", u, f32, h * w), ("scratch", scratch, f32, h * w))
    if steps == 0 or h == 0 or w == 0:
        return u
    prog = stencil_program(boundary)
    cfg = stencil_config(h, w, weights)
    there = Step(prog, {"u": u}, {"out": scratch}, cfg)
    back = Step(prog, {"u": scratch}, {"out": u}, cfg)
    if use_pipeline is None:
        use_pipeline = backend.supports(PIPELINE)
    pairs, odd = divmod(steps, 2)
    if use_pipeline:
        if pairs:
            backend.pipeline([there, back]).run(repeat=pairs)
        if odd:
            backend.pipeline([there]).run()
    else:
        for s in [there, back] * pairs + [there] * odd:
            backend.dispatch_with_device_buffers(s.program, s.inputs, s.outputs, s.config)
    return scratch if odd else u


def stencil_host(
    backend: Backend,
    grid2d: np.ndarray,
    steps: int = 1,
    weights: tuple[float, ...] = LAPLACIAN,
    boundary: str = "clamp",
    use_pipeline: bool | None = None,
) -> np.ndarray:
    """Upload an f32 (H, W) grid, apply the stencil `steps` times, read back."""
    if grid2d.dtype != np.float32 or grid2d.ndim != 2:
        raise LibraryArgumentError(f"stencil takes a 2-D float32 array, got {grid2d.dtype}"
                                   f"{grid2d.shape}; use .astype(np.float32) / .reshape(H, W)")
    h, w = grid2d.shape
    u = upload(backend, grid2d, "stencil_u")
    s = alloc(backend, f32, h * w, "stencil_scratch")
    try:
        res = iterate_stencil(backend, u, s, h, w, steps, weights, boundary, use_pipeline)
        return read_elems(backend, res, f32, h * w).reshape(h, w)
    finally:
        backend.free(u)
        backend.free(s)


def stencil_reference(
    u: np.ndarray, weights: tuple[float, ...] = LAPLACIAN, boundary: str = "clamp",
    steps: int = 1,
) -> np.ndarray:
    """The kernel's exact arithmetic in NumPy (same order, f32)."""
    wc, wn, ws, ww, we = (np.float32(v) for v in weights)
    for _ in range(steps):
        p = np.pad(u, 1, mode="edge") if boundary == "clamp" else np.pad(u, 1)
        c, north, south = p[1:-1, 1:-1], p[:-2, 1:-1], p[2:, 1:-1]
        west, east = p[1:-1, :-2], p[1:-1, 2:]
        u = (((wc * c + wn * north) + ws * south) + ww * west) + we * east
    return u.astype(np.float32)
