"""Threads sharing one backend instance, freeing buffers the others are using:

    python scripts/thread_stress.py --backend NAME --seconds S [--threads N] [--seed K]

Each thread picks operations at random until the time is up: compile a new program;
dispatch (bound, unbound, async, host path), pipeline and read on a buffer of its own and
check the exact result; dispatch, re-dispatch a bound dispatch, pipeline, write, read and
read_into on buffers shared by all threads, which other threads free and replace at any moment (a read of a shared
buffer must show every element equal to a whole number of increments); drop buffers
without freeing them. Every exception must be a vyre.BackendError (a freed buffer refused
is the expected one); anything else, or a wrong result, or a hang, fails the run.

Prints the counts (operations, vyre errors by class, wrong results, other exceptions) and
exits 0 only when there was no wrong result and no non-vyre exception; 1 otherwise, 2 if a
thread hung. A crash of the process (SIGABRT) is the caller's to see: run it in a
subprocess (tests/test_thread_safety.py does).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import vyre
from vyre import DispatchConfig, ProgramBuilder, Step, u32
from vyre.backend import BaseBackend
from vyre.errors import BackendError

N = 1024  # u32 elements per buffer
SHARED = 4  # buffers every thread uses and frees


def add_program(constant: int | None = None) -> vyre.Program:
    """y[i] += a (a param), or += `constant` baked in (a new program per constant)."""
    k = ProgramBuilder("add" if constant is None else f"add{constant}", workgroup_size=64)
    y = k.buffer("y", u32, "read_write")
    a = k.lit(constant, u32) if constant is not None else k.param("a", u32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + a
    return k.build()


class Stress:
    def __init__(self, be: BaseBackend, seconds: float, seed: int) -> None:
        self.be = be
        self.deadline = time.monotonic() + seconds
        self.seed = seed
        self.prog = add_program()
        self.cfg1 = DispatchConfig.for_elements(N, 64, params={"a": 1})
        self.shared: list[Any] = [self._new_shared() for _ in range(SHARED)]
        self.lock = threading.Lock()  # guards the counters only, never the backend
        self.ops = 0
        self.vyre_errors: collections.Counter[str] = collections.Counter()
        self.samples: dict[str, str] = {}  # the first message of each vyre error class
        self.wrong: list[str] = []
        self.other: list[str] = []
        self.pipelines = "pipeline" in be.capabilities().features
        self.asynchronous = "async" in be.capabilities().features

    def _new_shared(self) -> Any:
        b = self.be.allocate_device_buffer(N * 4, label="shared")
        self.be.write(b, np.zeros(N, np.uint32))
        return b

    # ------------------------------------------------------------ own buffers: exact
    def own_dispatches(self, rng: random.Random) -> None:
        be = self.be
        start = rng.randrange(1 << 20)
        buf = be.allocate_device_buffer(N * 4, label="own")
        try:
            be.write(buf, np.full(N, start, np.uint32))
            want = start
            bound = be.bind(self.prog, [], [buf], self.cfg1)
            for _ in range(rng.randrange(1, 6)):
                be.dispatch_with_device_buffers(bound)
                a = rng.randrange(1, 100)
                be.dispatch_with_device_buffers(
                    self.prog, [], [buf], DispatchConfig.for_elements(N, 64, params={"a": a}))
                want += 1 + a
            if self.asynchronous and rng.random() < 0.5:
                be.dispatch_async(bound).wait()
                want += 1
            if self.pipelines and rng.random() < 0.5:
                r = rng.randrange(1, 5)
                res = be.pipeline([Step(self.prog, [], [buf], self.cfg1)]).run(
                    repeat=r, read=[buf])
                want += r
                self.check_exact(res.reads[0], want, "pipeline read of an own buffer")
            self.check_exact(be.read(buf, dtype=np.uint32), want, "read of an own buffer")
        finally:
            be.free(buf)
        if rng.random() < 0.2:  # the host path: its own buffers, allocated and freed inside
            x = np.full(N, start, np.uint32)
            got = be.dispatch(self.prog, {"y": x}, DispatchConfig.for_elements(
                N, 64, params={"a": 5}))["y"]
            self.check_exact(got, start + 5, "host dispatch")

    def check_exact(self, got: np.ndarray, want: int, what: str) -> None:
        if got.shape != (N,) or not np.all(got == np.uint32(want)):
            bad = np.flatnonzero(got != np.uint32(want))
            self.note_wrong(f"{what}: want {want} everywhere, got {got[bad[:4]]} at {bad[:4]}")

    def compile_new(self, rng: random.Random) -> None:
        prog = add_program(rng.randrange(1 << 30))
        self.be.compile(prog)
        if rng.random() < 0.3:  # and run it, exactly
            with self.be.allocate_device_buffer(N * 4) as b:
                self.be.write(b, np.zeros(N, np.uint32))
                self.be.dispatch_with_device_buffers(prog, [], [b],
                                                     DispatchConfig.for_elements(N, 64))
                c = int(prog.name[3:])
                self.check_exact(self.be.read(b, dtype=np.uint32), c, f"{prog.name} result")

    def drop(self, rng: random.Random) -> None:
        b = self.be.allocate_device_buffer(N * 4 * rng.randrange(1, 64), label="dropped")
        self.be.write(b, np.ones(b.byte_len // 4, np.uint32))
        self.be.dispatch_with_device_buffers(self.prog, [], [b], DispatchConfig.for_elements(
            b.byte_len // 4, 64, params={"a": 1}))
        del b  # never freed: released when dropped

    # ------------------------------------------------------------ shared buffers: racy
    def shared_use(self, rng: random.Random) -> None:
        be = self.be
        buf = self.shared[rng.randrange(SHARED)]
        choice = rng.randrange(7)
        if choice == 0:
            bound = be.bind(self.prog, [], [buf], self.cfg1)
            for _ in range(rng.randrange(1, 50)):
                be.dispatch_with_device_buffers(bound)
        elif choice == 1:
            be.dispatch_with_device_buffers(self.prog, [], [buf], self.cfg1)
        elif choice == 2 and self.pipelines:
            p = be.pipeline([Step(self.prog, [], [buf], self.cfg1)])
            res = p.run(repeat=rng.randrange(1, 4), read=[buf])
            self.check_uniform(res.reads[0], "pipeline read of a shared buffer")
        elif choice == 3 and self.asynchronous:
            be.dispatch_async(self.prog, [], [buf], self.cfg1).wait()
        elif choice == 4:  # every element the same value: still uniform
            be.write(buf, np.full(N, rng.randrange(1 << 20), np.uint32))
        elif choice == 5:
            out = np.empty(N, np.uint32)
            self.check_uniform(be.read_into(buf, out), "read_into of a shared buffer")
        else:
            self.check_uniform(be.read(buf, dtype=np.uint32), "read of a shared buffer")

    def check_uniform(self, got: np.ndarray, what: str) -> None:
        """Every dispatch adds 1 to every element, and a read waits for the dispatches
        enqueued before it: all elements are equal."""
        if got.shape != (N,) or not np.all(got == got[0]):
            bad = np.flatnonzero(got != got[0])
            self.note_wrong(f"{what}: elements differ: {got[0]} and {got[bad[:4]]} at "
                            f"{bad[:4]}")

    def shared_free(self, rng: random.Random) -> None:
        i = rng.randrange(SHARED)
        old = self.shared[i]
        self.shared[i] = self._new_shared()
        self.be.free(old)

    # ------------------------------------------------------------ bookkeeping
    def note_wrong(self, msg: str) -> None:
        with self.lock:
            self.wrong.append(msg)

    def worker(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        ops: list[tuple[float, Callable[[random.Random], None]]] = [
            (0.25, self.own_dispatches), (0.05, self.compile_new), (0.05, self.drop),
            (0.5, self.shared_use), (0.15, self.shared_free),
        ]
        weights = [w for w, _ in ops]
        while time.monotonic() < self.deadline:
            op = rng.choices([f for _, f in ops], weights)[0]
            try:
                op(rng)
            except BackendError as exc:
                with self.lock:
                    self.vyre_errors[type(exc).__name__] += 1
                    self.samples.setdefault(type(exc).__name__, f"{op.__name__}: {exc}")
            except BaseException:  # what this script is here to find
                with self.lock:
                    self.other.append(f"{op.__name__}: {traceback.format_exc()}")
            with self.lock:
                self.ops += 1


def run(backend: str, seconds: float, threads: int, seed: int) -> int:
    be = vyre.get_backend(backend)
    stress = Stress(be, seconds, seed)
    workers = [threading.Thread(target=stress.worker, args=(i,), daemon=True)
               for i in range(threads)]
    for t in workers:
        t.start()
    hang_after = time.monotonic() + seconds + 120  # one operation never takes minutes
    for t in workers:
        t.join(max(0.0, hang_after - time.monotonic()))
    hung = [t.name for t in workers if t.is_alive()]
    # the instance still computes exactly after all that
    if not hung:
        try:
            stress.own_dispatches(random.Random(seed))
        except BaseException:  # (reported, not raised)
            stress.other.append(f"after the run: {traceback.format_exc()}")
    print(f"backend: {be.id}  threads: {threads}  seconds: {seconds}  seed: {seed}")
    print(f"operations: {stress.ops}")
    print(f"vyre errors: {sum(stress.vyre_errors.values())} "
          f"{dict(sorted(stress.vyre_errors.items()))}")
    print(f"wrong results: {len(stress.wrong)}")
    print(f"other exceptions: {len(stress.other)}")
    print(f"hung threads: {len(hung)}")
    for name, msg in sorted(stress.samples.items()):
        print(f"  first {name}: {msg[:300]!r}")
    for msg in stress.wrong[:5] + stress.other[:5]:
        print("----\n" + msg)
    sys.stdout.flush()
    if hung:
        os._exit(2)  # a hung thread would block interpreter exit
    be.close()
    return 1 if stress.wrong or stress.other else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True, help="reference, wgpu, cuda, ...")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--switch-interval", type=float, default=1e-5,
                    help="sys.setswitchinterval: small values switch threads often")
    args = ap.parse_args()
    if args.seconds <= 0 or args.threads < 1:
        ap.error("--seconds must be > 0 and --threads >= 1")
    sys.setswitchinterval(args.switch_interval)
    # the programs compiled here (new ones all the time) never fill the user's disk cache
    with tempfile.TemporaryDirectory(prefix="vyre-stress-cache-") as cache:
        os.environ.setdefault("VYRE_CACHE_DIR", cache)
        return run(args.backend, args.seconds, args.threads, args.seed)


if __name__ == "__main__":
    sys.exit(main())
