"""nn (Rodinia openmp/nn/nn_openmp.c): one invocation per record computes its distance to
the target (sqrt of the float sum of squares), then one invocation runs the original's
selection loop over the records in order, keeping the k nearest. C: c/nn.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import sqrt
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"nrecords": 2048, "k": 8, "seed": 8}
WG = 64
OPEN = 10000.0


@cache
def distance_program() -> Program:
    k = ProgramBuilder("rodinia_nn_distance", WG)
    lat, lng = k.buffer("lat", f32), k.buffer("lng", f32)
    z = k.buffer("z", f32, "write")
    n = k.param("rec_count", i32)
    target_lat, target_long = k.param("target_lat", f32), k.param("target_long", f32)
    i = k.let(k.global_id(0).cast(i32))
    with k.if_(i < n):
        tmp_lat, tmp_long = k.let(lat[i]), k.let(lng[i])
        z[i] = sqrt(((tmp_lat - target_lat) * (tmp_lat - target_lat))
                    + ((tmp_long - target_long) * (tmp_long - target_long)))
    return k.build()


@cache
def select_program() -> Program:
    k = ProgramBuilder("rodinia_nn_select", 1)
    z = k.buffer("z", f32)
    dist = k.buffer("dist", f32, "read_write")
    entry = k.buffer("entry", i32, "read_write")
    n, kk = k.param("rec_count", i32), k.param("k", i32)
    with k.for_range(0, n, ty=i32) as i:
        max_dist = k.let(-1.0)
        max_idx = k.let(0)
        with k.for_range(0, kk, ty=i32) as j, k.if_(dist[j] > max_dist):
            max_dist.set(dist[j])
            max_idx.set(j)
        with k.if_(z[i] < dist[max_idx]):
            entry[max_idx] = i
            dist[max_idx] = z[i]
    return k.build()


def run(backend: Backend, nrecords: int, k: int, seed: int) -> list[np.ndarray]:
    u = Lcg(seed).unit(2 * nrecords)
    lat = F(7.0) + F(56.0) * u[0::2]
    lng = F(62.0) + F(102.0) * u[1::2]
    with resident(backend) as dev:
        la, lo = dev.put(lat, "lat"), dev.put(lng, "lng")
        z = dev.put(np.zeros(nrecords, np.float32), "z")
        dist = dev.put(np.full(k, OPEN, np.float32), "dist")
        entry = dev.put(np.full(k, -1, np.int32), "entry")
        dev.run(distance_program(), {"lat": la, "lng": lo}, {"z": z}, groups(nrecords, WG),
                {"rec_count": nrecords, "target_lat": F(30.0), "target_long": F(90.0)})
        dev.run(select_program(), {"z": z}, {"dist": dist, "entry": entry}, 1,
                {"rec_count": nrecords, "k": k})
        return [dev.get(z, np.float32, nrecords), dev.get(dist, np.float32, k),
                dev.get(entry, np.int32, k)]
