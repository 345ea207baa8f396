"""kmeans (Rodinia openmp/kmeans/kmeans_serial/kmeans_clustering.c): per iteration one
invocation per point finds its nearest centre (find_nearest_point, euclid_dist_2) and flags
a membership change, then one invocation per (cluster, feature) sums its points in point
order and divides, as the serial loop accumulates; the host driver loops while delta >
threshold (at most 500 times). C: c/kmeans.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"npoints": 512, "nfeatures": 4, "nclusters": 5, "seed": 7}
WG = 64
FLT_MAX = float(np.finfo(np.float32).max)


@cache
def assign_program() -> Program:
    k = ProgramBuilder("rodinia_kmeans_assign", WG)
    feature = k.buffer("feature", f32)
    clusters = k.buffer("clusters", f32)
    membership = k.buffer("membership", i32, "read_write")
    changed = k.buffer("changed", i32, "write")
    npoints, nfeatures, nclusters = (k.param(n, i32) for n in ("npoints", "nfeatures",
                                                                 "nclusters"))
    p = k.let(k.global_id(0).cast(i32))
    with k.if_(p < npoints):
        index = k.let(0)
        min_dist = k.let(FLT_MAX)
        with k.for_range(0, nclusters, ty=i32) as c:
            ans = k.let(0.0)
            with k.for_range(0, nfeatures, ty=i32) as j:
                d = feature[p * nfeatures + j] - clusters[c * nfeatures + j]
                ans += d * d
            with k.if_(ans < min_dist):
                min_dist.set(ans)
                index.set(c)
        changed[p] = (membership[p] != index).cast(i32)
        membership[p] = index
    return k.build()


@cache
def centre_program() -> Program:
    k = ProgramBuilder("rodinia_kmeans_centres", WG)
    feature = k.buffer("feature", f32)
    membership = k.buffer("membership", i32)
    clusters = k.buffer("clusters", f32, "read_write")
    npoints, nfeatures, nclusters = (k.param(n, i32) for n in ("npoints", "nfeatures",
                                                                 "nclusters"))
    g = k.let(k.global_id(0).cast(i32))
    with k.if_(g < nclusters * nfeatures):
        c = k.let(g / nfeatures)
        j = k.let(g % nfeatures)
        total = k.let(0.0)
        count = k.let(0)
        with k.for_range(0, npoints, ty=i32) as p, k.if_(membership[p] == c):
            count += 1
            total += feature[p * nfeatures + j]
        with k.if_(count > 0):
            clusters[g] = total / count.cast(f32)
    return k.build()


def run(backend: Backend, npoints: int, nfeatures: int, nclusters: int,
        seed: int) -> list[np.ndarray]:
    feature = F(10.0) * Lcg(seed).unit(npoints * nfeatures)
    sizes = {"npoints": npoints, "nfeatures": nfeatures, "nclusters": nclusters}
    threshold = F(0.001)
    with resident(backend) as dev:
        feat = dev.put(feature, "feature")
        clusters = dev.put(feature[: nclusters * nfeatures].copy(), "clusters")
        member = dev.put(np.full(npoints, -1, np.int32), "membership")
        changed = dev.put(np.zeros(npoints, np.int32), "changed")
        loop = 0
        while True:
            dev.run(assign_program(), {"feature": feat, "clusters": clusters},
                    {"membership": member, "changed": changed}, groups(npoints, WG), sizes)
            dev.run(centre_program(), {"feature": feat, "membership": member},
                    {"clusters": clusters}, groups(nclusters * nfeatures, WG), sizes)
            loop += 1
            delta = F(dev.get(changed, np.int32, npoints).sum())
            if not (delta > threshold and loop < 500):
                break
        return [dev.get(clusters, np.float32, nclusters * nfeatures),
                dev.get(member, np.int32, npoints), np.array([loop], np.int32)]
