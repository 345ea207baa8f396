"""bfs (Rodinia openmp/bfs/bfs.cpp): per level one invocation per node expands the frontier
(mask -> updating mask, cost of unvisited neighbours), then one per node promotes the
updating mask and raises `stop`; the host driver repeats while stop was raised, as
BFSGraph's do/while does. C: c/bfs.c."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, i32
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import Lcg, groups, resident

ARGS = {"nodes": 2048, "seed": 9}
WG = 64


@cache
def expand_program() -> Program:
    k = ProgramBuilder("rodinia_bfs_expand", WG)
    starting, no_of_edges = k.buffer("starting", i32), k.buffer("no_of_edges", i32)
    edges, visited = k.buffer("edges", i32), k.buffer("visited", i32)
    mask = k.buffer("mask", i32, "read_write")
    updating = k.buffer("updating", i32, "read_write")
    cost = k.buffer("cost", i32, "read_write")
    n = k.param("no_of_nodes", i32)
    tid = k.let(k.global_id(0).cast(i32))
    with k.if_(tid < n), k.if_(mask[tid] == 1):
        mask[tid] = 0
        start = k.let(starting[tid])
        with k.for_range(start, no_of_edges[tid] + start) as i:
            nid = k.let(edges[i])
            with k.if_(visited[nid] == 0):
                cost[nid] = cost[tid] + 1
                updating[nid] = 1
    return k.build()


@cache
def promote_program() -> Program:
    k = ProgramBuilder("rodinia_bfs_promote", WG)
    mask = k.buffer("mask", i32, "read_write")
    updating = k.buffer("updating", i32, "read_write")
    visited = k.buffer("visited", i32, "read_write")
    stop = k.buffer("stop", i32, "read_write")
    n = k.param("no_of_nodes", i32)
    tid = k.let(k.global_id(0).cast(i32))
    with k.if_(tid < n), k.if_(updating[tid] == 1):
        mask[tid] = 1
        visited[tid] = 1
        stop[0] = 1
        updating[tid] = 0
    return k.build()


def run(backend: Backend, nodes: int, seed: int) -> list[np.ndarray]:
    lcg = Lcg(seed)
    degree = lcg.ints(nodes, 6) + 1
    starting = (np.cumsum(degree) - degree).astype(np.int32)
    edges = lcg.ints(int(degree.sum()), nodes)
    mask = np.zeros(nodes, np.int32)
    mask[0] = 1
    cost = np.full(nodes, -1, np.int32)
    cost[0] = 0
    grid = groups(nodes, WG)
    p = {"no_of_nodes": nodes}
    with resident(backend) as dev:
        graph = {"starting": dev.put(starting, "starting"),
                 "no_of_edges": dev.put(degree, "no_of_edges"), "edges": dev.put(edges, "edges")}
        state = {"mask": dev.put(mask, "mask"), "cost": dev.put(cost, "cost"),
                 "updating": dev.put(np.zeros(nodes, np.int32), "updating")}
        visited = dev.put(mask.copy(), "visited")
        stop = dev.put(np.zeros(1, np.int32), "stop")
        levels = 0
        while True:
            backend.write(stop, np.zeros(1, np.int32))
            dev.run(expand_program(), {**graph, "visited": visited}, state, grid, p)
            dev.run(promote_program(), {},
                    {"mask": state["mask"], "updating": state["updating"], "visited": visited,
                     "stop": stop}, grid, p)
            levels += 1
            if not dev.get(stop, np.int32, 1)[0]:
                break
        return [dev.get(state["cost"], np.int32, nodes), np.array([levels], np.int32)]
