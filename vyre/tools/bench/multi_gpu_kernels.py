# mypy: disable-error-code="valid-type,type-arg,index"
# (the decorated kernel annotates with vyre types, which are values, not Python types)
"""A sharded explicit heat equation: the kernel and driver that the multi_gpu benchmark
and tests/test_device_group.py run over a DeviceGroup with halo exchange every step, and
`heat_numpy`, the same arithmetic in NumPy (f32, the kernel's operation order)."""

from __future__ import annotations

from typing import Any

import numpy as np

import vyre
from vyre.config import DispatchConfig
from vyre.group import DeviceGroup, ShardedArray

HEAT_K = 0.2


@vyre.kernel(workgroup_size=(16, 16))
def heat_step(u: vyre.Buffer[vyre.f32], out: vyre.Output[vyre.f32], rows: vyre.u32,
              W: vyre.u32, k: vyre.f32) -> None:
    """One explicit heat step on a window of `rows` own rows between one ghost row on each
    side (zero beyond the whole grid's edges, which only ghost rows reach); writes only
    the own rows, in a fixed operation order."""
    x = vyre.let(vyre.global_id(0))
    r = vyre.let(vyre.global_id(1))
    with vyre.if_((x < W) & (r < rows)):
        y = vyre.let(r + 1)
        c = vyre.let(u[y * W + x])
        west = vyre.select(x > 0, u[y * W + x - 1], 0.0)
        east = vyre.select(x + 1 < W, u[y * W + x + 1], 0.0)
        lap = (((u[(y - 1) * W + x] + u[(y + 1) * W + x]) + west) + east) - 4.0 * c
        out[y * W + x] = c + k * lap


def heat_numpy(grid: np.ndarray, steps: int, k: float = HEAT_K) -> np.ndarray:
    u = grid.astype(np.float32)
    kk = np.float32(k)
    for _ in range(steps):
        p = np.pad(u, 1)
        lap = (((p[:-2, 1:-1] + p[2:, 1:-1]) + p[1:-1, :-2]) + p[1:-1, 2:]) - np.float32(4) * u
        u = (u + kk * lap).astype(np.float32)  # f32 already: a copy mypy can type
    return u


def heat_arrays(group: DeviceGroup, grid: np.ndarray) -> tuple[ShardedArray, ShardedArray]:
    """`grid` sharded by rows with one ghost row on each side, and its ping-pong partner
    (ghost rows beyond the grid zero in both)."""
    u = group.scatter(grid, halo=1, label="u")
    v = group.empty(u.shards, np.float32, (grid.shape[1],), label="v", halo=1)
    for _s, b in v.live():
        b.owner.write(b, np.zeros(b.byte_len // 4, np.float32))
    return u, v


def heat_steps(group: DeviceGroup, u: ShardedArray, v: ShardedArray, steps: int,
               k: float = HEAT_K) -> tuple[ShardedArray, ShardedArray]:
    """`steps` heat steps from `u`, ghost rows exchanged between the members after each
    (nothing waited for: each member's work and the copies are ordered on the devices);
    (the array holding the result, the other)."""
    w = u.row_shape[0]

    def cfg(s: Any) -> DispatchConfig:
        return DispatchConfig(grid=(-(-w // 16), -(-s.count // 16), 1),
                              params={"rows": s.count, "W": w, "k": k})

    for _ in range(steps):
        group.map(heat_step.program, {"u": u}, {"out": v}, cfg, wait=False)
        group.exchange_halos(v)
        u, v = v, u
    return u, v


def run_heat(group: DeviceGroup, grid: np.ndarray, steps: int, k: float = HEAT_K) -> np.ndarray:
    """`steps` heat steps of `grid` sharded by rows over `group`; the grid read back."""
    u, v = heat_arrays(group, grid)
    try:
        u, v = heat_steps(group, u, v, steps, k)
        return u.gather()
    finally:
        u.free()
        v.free()
