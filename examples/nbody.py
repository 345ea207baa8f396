"""Gravitational n-body: each step every body sums the softened pull of all the others
(O(n^2), one invocation per body), then all move (leapfrog: kick, then drift).

    python examples/nbody.py [--backend wgpu] [--bodies 512 --steps 10]

a_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps^2)^(3/2). The sum runs over j in one
fixed order, and the 1/sqrt is written with vyre.sqrt and `/`, which the IR makes exact
(correctly rounded) on every backend; vyre.exp/sin/... are approximate (docs/IR.md:
within 4 ulp) and would not give the same bits everywhere, so they are not used here.
Bodies are stored as (x, y, z, mass) quadruples.
"""

from __future__ import annotations

import sys

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Buffer, InOut, f32, u32


@vyre.kernel(workgroup_size=64)
def kick(body: Buffer[f32], vel: InOut[f32], n: u32, dt: f32, eps2: f32):
    """vel_i += dt * a_i (vel: (vx, vy, vz, 0) quadruples)."""
    i = vyre.global_linear_id()
    if i < n:
        px, py, pz = body[4 * i], body[4 * i + 1], body[4 * i + 2]
        ax, ay, az = 0.0, 0.0, 0.0
        for j in range(n):                                   # n is a param: a device loop
            dx = body[4 * j] - px
            dy = body[4 * j + 1] - py
            dz = body[4 * j + 2] - pz
            inv = 1.0 / vyre.sqrt(dx * dx + dy * dy + dz * dz + eps2)
            s = body[4 * j + 3] * inv * inv * inv     # m_j / r^3 (j == i: dx = 0)
            ax += dx * s
            ay += dy * s
            az += dz * s
        vel[4 * i] = vel[4 * i] + dt * ax
        vel[4 * i + 1] = vel[4 * i + 1] + dt * ay
        vel[4 * i + 2] = vel[4 * i + 2] + dt * az


@vyre.kernel(workgroup_size=64)
def drift(body: InOut[f32], vel: Buffer[f32], n: u32, dt: f32):
    """p_i += dt * vel_i (the mass, component 3, stays)."""
    i = vyre.global_linear_id()
    if i < n:
        for k in range(3):                                   # Python loop: unrolled
            body[4 * i + k] = body[4 * i + k] + dt * vel[4 * i + k]


def initial(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A rotating disc of n bodies with random masses: (n, 4) positions+mass, (n, 4) velocity."""
    rng = np.random.default_rng(7)
    r = np.sqrt(rng.uniform(0.05, 1.0, n))
    phi = rng.uniform(0, 2 * np.pi, n)
    body = np.stack([r * np.cos(phi), r * np.sin(phi), rng.normal(0, 0.02, n),
                     rng.uniform(0.5, 1.5, n) / n], axis=1).astype(np.float32)
    vel = np.stack([-np.sin(phi) * r, np.cos(phi) * r, np.zeros(n), np.zeros(n)],
                   axis=1).astype(np.float32) * np.float32(0.8)
    return body, vel


def simulate(gpu: vyre.BaseBackend, n: int, steps: int, dt: float = 0.01,
             eps: float = 0.05) -> h.Outputs:
    """Positions+mass and velocities after `steps` steps."""
    body0, vel0 = initial(n)
    bb = gpu.allocate_device_buffer(body0.nbytes, label="body")
    vb = gpu.allocate_device_buffer(vel0.nbytes, label="vel")
    try:
        gpu.write_many([(bb, body0), (vb, vel0)])
        pipe = gpu.pipeline([kick.step(n, bb, vb, n=n, dt=dt, eps2=eps * eps),
                             drift.step(n, bb, vb, n=n, dt=dt)])
        body, vel = pipe.run(repeat=steps, read=[bb, vb]).reads
        return {"body": body.reshape(n, 4), "vel": vel.reshape(n, 4)}
    finally:
        gpu.free(bb)
        gpu.free(vb)


def energy(body: np.ndarray, vel: np.ndarray, eps: float = 0.05) -> float:
    """Kinetic plus softened potential energy, in f64 on the host."""
    p, m, v = body[:, :3].astype(np.float64), body[:, 3].astype(np.float64), vel[:, :3]
    kinetic = 0.5 * float((m * (v.astype(np.float64) ** 2).sum(axis=1)).sum())
    d = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(axis=2) + eps * eps)
    potential = -0.5 * float((m[:, None] * m[None, :] / d).sum() - (m * m / eps).sum())
    return kinetic + potential


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--bodies", type=int, default=512)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args(argv)
    result, ok = h.check_everywhere(lambda gpu: simulate(gpu, args.bodies, args.steps),
                                    args.backend)
    e0, e1 = energy(*initial(args.bodies)), energy(result["body"], result["vel"])
    b = result["body"].astype(np.float64)
    com = ", ".join(f"{c:+.5f}" for c in (b[:, :3] * b[:, 3:]).sum(axis=0) / b[:, 3].sum())
    print(f"{args.bodies} bodies, {args.steps} steps: energy {e0:.6f} -> {e1:.6f} "
          f"(drift {abs(e1 - e0) / abs(e0):.2e}), centre of mass ({com})")
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
