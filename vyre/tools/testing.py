"""Test support: HostShimBuffer, the conformance helpers that compare backends, and the
device-resource counters leak tests assert on (device_resources, CudaAllocationLedger).

`HostShimBuffer` is host memory that claims a backend id; it exists so tests can prove that
no production path accepts host memory as device memory. The comparison rules here are the
IR's (docs/IR.md): integers and bools bit-exact; floats exact except for approximate
functions, compared within a stated ulp tolerance, with -0 == +0 and NaN == NaN. A backend
whose device flushes float subnormals (docs/IR.md flush mode, reported as
`capabilities().details["flushes_subnormals"]`) is compared with the reference evaluated in
the same mode (`reference_for`), exactly. This module must never be imported by production
code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre import features as F
from vyre.backend import BaseBackend
from vyre.config import DispatchConfig
from vyre.ir.analysis import uses_approximate_calls, uses_float_ops
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType


class HostShimBuffer:
    """Host bytes pretending to be a device buffer of `backend_id`. Tests only."""

    def __init__(self, data: bytes | int, backend_id: str = "reference", label: str | None = None):
        self.data = bytearray(data if isinstance(data, (bytes, bytearray)) else bytes(data))
        self.backend_id = backend_id
        self.byte_len = len(self.data)
        self.label = label

    @property
    def owner(self) -> object:
        return None

    @property
    def freed(self) -> bool:
        return False

    def free(self) -> None:
        pass


@dataclass(frozen=True)
class Tolerance:
    """Float comparison rule: |a - e| <= atol + rtol*|e|, or within `ulps` units in the last
    place. Any NaN equals any NaN (docs/IR.md leaves a NaN's bits open). `zero_sign`: also
    tell -0 from +0 (docs/IR.md leaves it open only after float min/max/clamp)."""

    ulps: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    zero_sign: bool = True

    @property
    def exact(self) -> bool:
        return self.ulps == 0 and self.atol == 0.0 and self.rtol == 0.0


EXACT = Tolerance()


def tolerance_for(program: Program, backend_kind: str) -> Tolerance:
    """The float tolerance a backend's results for `program` are held to: the same on
    every backend kind (`backend_kind` is accepted for callers that pass it).

    Approximate functions (the backends' own `approx_*`, sin, cos, ..., and f64 exp, log,
    ...; docs/IR.md names them) are allowed 4 ulp plus a small absolute slack near zero
    (sin(pi) is ~1e-8, far in ulps from 0). Everything else is exact: division and sqrt
    are correctly rounded on every backend (on wgpu, vyre's exact versions where the
    adapter's are not, see docs/IR.md), and the functions with one exact definition (f32
    and f16 exp, exp2, log, log2, ...: vyre.lower.maths) are the same IR everywhere.
    """
    del backend_kind
    if uses_approximate_calls(program):
        return Tolerance(ulps=4, atol=1e-6, rtol=1e-6, zero_sign=False)
    if uses_float_ops(program, SIGN_OF_ZERO_OPEN):
        return Tolerance(zero_sign=False)
    return EXACT


#: Float operations after which docs/IR.md leaves the sign of a zero result open.
SIGN_OF_ZERO_OPEN = frozenset({"min", "max", "clamp"})


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between same-dtype float arrays (treating -0 as +0)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia = a.view(bits).astype(np.int64)
    ib = b.view(bits).astype(np.int64)
    sign = np.int64(1) << (a.dtype.itemsize * 8 - 1)
    # map to a monotonic integer line: negative floats below positive ones
    ia = np.where(ia < 0, -(ia + sign) if a.dtype.itemsize == 8 else -(ia & (sign - 1)), ia)
    ib = np.where(ib < 0, -(ib + sign) if a.dtype.itemsize == 8 else -(ib & (sign - 1)), ib)
    return np.abs(ia - ib)


def mismatches(
    actual: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT
) -> np.ndarray:
    """Indices where `actual` disagrees with `expected` under the IR's comparison rules."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"shape/dtype differ: got {actual.shape} {actual.dtype}, "
            f"expected {expected.shape} {expected.dtype}"
        )
    if actual.dtype.kind != "f":
        return np.flatnonzero(actual != expected)
    a = actual.reshape(-1)
    e = expected.reshape(-1)
    both_nan = np.isnan(a) & np.isnan(e)
    with np.errstate(invalid="ignore", over="ignore"):
        equal = (a == e) | both_nan
        if not tol.exact:
            close = ulp_distance(a, e) <= tol.ulps
            diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
            close |= diff <= tol.atol + tol.rtol * np.abs(e.astype(np.float64))
            close &= ~(np.isnan(a) ^ np.isnan(e))
            equal |= close
        if tol.zero_sign:  # -0 is not +0, under a ulp bound too (sin(-0) = -0 exactly)
            equal &= ~((a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e)))
    return np.flatnonzero(~equal)


def assert_agree(
    actual: np.ndarray, expected: np.ndarray, tol: Tolerance = EXACT, what: str = "result"
) -> None:
    bad = mismatches(actual, expected, tol)
    if bad.size:
        a = np.asarray(actual).reshape(-1)
        e = np.asarray(expected).reshape(-1)
        shown = ", ".join(f"[{i}] got {a[i]!r} expected {e[i]!r}" for i in bad[:8])
        raise AssertionError(
            f"{what}: {bad.size} of {a.size} elements disagree ({tol}): {shown}"
        )


def flushed_types(backend: BaseBackend) -> frozenset[ScalarType]:
    """The float types whose subnormals `backend` flushes (docs/IR.md flush mode)."""
    names = backend.capabilities().details.get("flushes_subnormals", ())
    return frozenset(ScalarType(n) for n in names)


def flush_tininess(backend: BaseBackend) -> str:
    """Which results next to the smallest normal `backend` flushes in flush mode (one of
    `vyre.features.TININESS_RULES`; docs/IR.md)."""
    return str(backend.capabilities().details.get("flush_tininess", F.TININESS_AFTER_ROUNDING))


def subgroup_size(backend: BaseBackend) -> int | None:
    """The subgroup size `backend` reports (None: no subgroups)."""
    size = backend.capabilities().details.get("subgroup_size")
    return int(size) if isinstance(size, int) else None


_MODE_REFERENCES: dict[tuple[frozenset[ScalarType], str, int | None], BaseBackend] = {}
_MODE_LOCK = threading.Lock()


def reference_for(backend: BaseBackend, reference: BaseBackend) -> BaseBackend:
    """The reference to compare `backend` with: `reference` itself, or (if `backend` flushes
    subnormals and `reference` does not, flushes by another tininess rule, or runs another
    subgroup size) a reference backend in the same flush mode with the same subgroup size."""
    want = flushed_types(backend)
    rule = flush_tininess(backend)
    size = subgroup_size(backend) or subgroup_size(reference)
    if (want == flushed_types(reference) and (not want or rule == flush_tininess(reference))
            and size == subgroup_size(reference)):
        return reference
    from vyre.backends.reference import ReferenceBackend

    with _MODE_LOCK:
        ref = _MODE_REFERENCES.get((want, rule, size))
        if ref is None:
            label = ",".join(sorted(t.value for t in want)) or "none"
            ref = ReferenceBackend(f"reference[flush {label} ({rule}), subgroup {size}]",
                                   flush_subnormals=want, subgroup_size=size,
                                   flush_tininess=rule)
            _MODE_REFERENCES[(want, rule, size)] = ref
        return ref


def run_host(
    backend: BaseBackend, program: Program, inputs: Mapping[str, Any] | Sequence[Any],
    config: DispatchConfig,
) -> dict[str, np.ndarray]:
    return backend.dispatch(program, inputs, config)


def check_against_reference(
    program: Program,
    inputs: Mapping[str, Any],
    config: DispatchConfig,
    backends: Iterable[BaseBackend],
    reference: BaseBackend,
    tol: Tolerance | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Run `program` on the reference and each backend; assert every output agrees (with
    the reference in each backend's float mode, see `reference_for`)."""
    expected = reference.dispatch(program, inputs, config)
    results = {reference.id: expected}
    for b in backends:
        ref = reference_for(b, reference)
        if ref.id not in results:
            results[ref.id] = ref.dispatch(program, inputs, config)
        expected = results[ref.id]
        got = b.dispatch(program, inputs, config)
        t = tol if tol is not None else tolerance_for(program, b.kind)
        for name, exp in expected.items():
            assert_agree(got[name], exp, t, f"{program.name} on {b.id}, buffer {name!r}")
        results[b.id] = got
    return results


def random_array(rng: np.random.Generator, ty: ScalarType, n: int) -> np.ndarray:
    """Inputs that exercise edge cases: extremes, zero, negatives, specials for floats."""
    dt = ty.numpy
    if ty.is_float:
        vals = rng.standard_normal(n).astype(np.float64) * 100
        arr = vals.astype(dt)
        specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], dtype=dt)
    elif ty.is_int:
        info = np.iinfo(dt)
        arr = rng.integers(int(info.min), int(info.max), size=n, dtype=dt, endpoint=True)
        specials = np.array([0, 1, info.max, info.min, info.max // 2], dtype=dt)
    else:
        return rng.integers(0, 2, size=n).astype(bool)
    k = min(n, len(specials))
    if k:
        idx = rng.choice(n, size=k, replace=False)
        arr[idx] = specials[:k]
    return arr


# Driver functions the CUDA backend allocates with and the function that releases what each
# returns, and the ledger's book for them: device memory (cuMemAlloc, and cuMemAllocManaged in
# managed.py) is freed by cuMemFree, pinned host memory by cuMemFreeHost, a loaded module
# (which holds device memory for its code and constants) by cuModuleUnload.
_LEDGER_CALLS = (
    ("cuMemAlloc", "cuMemFree", "device"),
    ("cuMemAllocManaged", "cuMemFree", "device"),
    ("cuMemAllocHost", "cuMemFreeHost", "pinned"),
    ("cuModuleLoadData", "cuModuleUnload", "modules"),
)


class CudaAllocationLedger:
    """vyre's own CUDA driver allocations while installed, by pointer or handle: each
    successful cuMemAlloc / cuMemAllocManaged / cuMemAllocHost / cuModuleLoadData not yet
    released by a successful cuMemFree / cuMemFreeHost / cuModuleUnload of the same pointer.

    It wraps those functions on the driver module object the backend calls through
    (`backend.driver`: the runtime, its buffers' finalizers and managed.py all call that
    one object), so it counts every instance in the process and nothing another process
    does: parallel test shards on one GPU cannot move it, unlike cuMemGetInfo's device-wide
    free bytes. Releases of what was allocated before it was installed are not its
    business; failed calls change nothing (a failed release is listed in
    `failed_releases`). Use it as a context manager, or `install()` then `remove()`;
    ledgers on one driver must be removed in the reverse order of installing.
    """

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.device: dict[int, int] = {}  # pointer -> bytes (device and managed memory)
        self.pinned: dict[int, int] = {}  # pointer -> bytes (page-locked host memory)
        self.modules: dict[int, int] = {}  # module handle -> bytes of the image it loaded
        self.calls: dict[str, int] = {}  # successful calls per wrapped function
        self.failed_releases: list[str] = []
        # re-entrant: a buffer's finalizer may run (and free) inside a wrapped call
        self._lock = threading.RLock()
        self._saved: list[tuple[str, Any, Any]] = []  # (name, original, wrapper)

    @classmethod
    def for_backend(cls, backend: BaseBackend) -> CudaAllocationLedger:
        """A ledger (not installed) on the driver module a CUDA backend calls."""
        if backend.kind != "cuda":
            raise ValueError(f"{backend.id}: the allocation ledger counts CUDA driver calls")
        return cls(backend.driver)  # type: ignore[attr-defined]

    def install(self) -> CudaAllocationLedger:
        if self._saved:
            raise RuntimeError("this allocation ledger is installed already")
        books = {"device": self.device, "pinned": self.pinned, "modules": self.modules}
        wrappers: dict[str, Any] = {}
        for alloc, release, book in _LEDGER_CALLS:
            wrappers[alloc] = self._alloc(alloc, getattr(self.driver, alloc), books[book])
            if release not in wrappers:
                wrappers[release] = self._release(release, getattr(self.driver, release),
                                                  books[book])
        for name, wrapper in wrappers.items():
            self._saved.append((name, getattr(self.driver, name), wrapper))
            setattr(self.driver, name, wrapper)
        return self

    def remove(self) -> None:
        """Put back the functions it wrapped (nothing when it is not installed)."""
        moved = [name for name, _, w in self._saved if getattr(self.driver, name) is not w]
        if moved:
            raise RuntimeError(f"the driver's {', '.join(moved)} were replaced after this "
                               "ledger was installed: remove the later wrapper first")
        for name, original, _ in self._saved:
            setattr(self.driver, name, original)
        self._saved.clear()

    def __enter__(self) -> CudaAllocationLedger:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def counters(self) -> dict[str, int]:
        """Live allocations and bytes of each kind, as `device_resources` reports them."""
        with self._lock:
            return {
                "cuda_live_device_allocations": len(self.device),
                "cuda_live_device_bytes": sum(self.device.values()),
                "cuda_live_pinned_allocations": len(self.pinned),
                "cuda_live_pinned_bytes": sum(self.pinned.values()),
                "cuda_live_modules": len(self.modules),
            }

    def allocations(self) -> int:
        """Successful allocating calls seen (device, managed, pinned and module loads)."""
        with self._lock:
            return sum(self.calls.get(alloc, 0) for alloc, _, _ in _LEDGER_CALLS)

    def _alloc(self, name: str, real: Any, book: dict[int, int]) -> Any:
        def alloc(*args: Any) -> Any:
            result = real(*args)
            if int(result[0]) == 0:
                first = args[0]  # the byte count, or a module's image
                size = len(first) if hasattr(first, "__len__") else int(first)
                with self._lock:
                    book[int(result[1])] = size
                    self.calls[name] = self.calls.get(name, 0) + 1
            return result
        return alloc

    def _release(self, name: str, real: Any, book: dict[int, int]) -> Any:
        def release(handle: Any) -> Any:
            key = int(handle)
            # the lock is held across the call: once the driver has released the pointer,
            # another thread may be given it again, and must not be booked before it is
            # taken out of the book here
            with self._lock:
                result = real(handle)
                if key not in book:
                    return result
                if int(result[0]) == 0:
                    del book[key]
                    self.calls[name] = self.calls.get(name, 0) + 1
                else:
                    self.failed_releases.append(f"{name}({key:#x}): {result[0]}")
            return result
        return release


# Counters device_resources reports for information only: cuMemGetInfo's used bytes are the
# whole device's, which every other process on the GPU moves.
INFORMATION_ONLY = frozenset({"cuda_device_used_bytes"})


def device_resources(backend: BaseBackend,
                     ledger: CudaAllocationLedger | None = None) -> dict[str, int]:
    """What the device side holds right now, as counters whose growth over many identical
    cycles means a leak: vyre's own live buffers and bytes on every backend; on CUDA the
    `ledger`'s live device allocations, pinned host allocations and modules (vyre's own
    driver calls), plus the device's used bytes (cuMemGetInfo, device-wide: information
    only, see INFORMATION_ONLY); on wgpu wgpu-py's count of each live native object and the
    bytes of its live buffers (process-wide, every wgpu device).
    On lavapipe the "device" is host memory, so RSS measures it as well."""
    live = backend.live_buffers()
    out = {"vyre_live_buffers": len(live), "vyre_live_bytes": sum(b.byte_len for b in live)}
    if backend.kind == "cuda":
        backend.synchronize()
        free, total = backend.memory_info()  # type: ignore[attr-defined]
        out["cuda_device_used_bytes"] = int(total) - int(free)
        if ledger is not None:
            out.update(ledger.counters())
    elif backend.kind == "wgpu":
        import wgpu

        counts = wgpu.diagnostics.object_counts.get_dict()
        for name, entry in counts.items():
            if name != "total":
                out[f"wgpu_{name}"] = int(entry.get("count", 0))
        out["wgpu_buffer_bytes"] = int(counts.get("Buffer", {}).get("resource_mem", 0))
    return out


def resources_grown(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The `device_resources` counters that grew from `before` to `after` (a leak, when
    both were taken after the same warm-up), by how much; information-only counters are
    left out. CUDA counters without a ledger's are refused: cuMemGetInfo alone cannot tell
    vyre's memory from other processes'."""
    if "cuda_device_used_bytes" in after and "cuda_live_device_bytes" not in after:
        raise ValueError("CUDA resources are checked on a CudaAllocationLedger's counters: "
                         "pass device_resources(backend, ledger)")
    return {k: v - before.get(k, 0) for k, v in after.items()
            if k not in INFORMATION_ONLY and v > before.get(k, 0)}


def div_sqrt_program(ty: ScalarType) -> Program:
    """Elementwise q = a / b, r = sqrt(a), m = a % b (float rem), t = i32(a / b): the
    operations whose exactness drivers break (issue 13); 64 invocations per workgroup."""
    from vyre.builder import ProgramBuilder, sqrt

    k = ProgramBuilder(f"div_sqrt_{ty}", workgroup_size=64)
    a, b = k.buffer("a", ty), k.buffer("b", ty)
    q, r = k.buffer("q", ty, "write"), k.buffer("r", ty, "write")
    m = k.buffer("m", ty, "write")
    t = k.buffer("t", ScalarType.I32, "write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        x, y = k.let(a[i]), k.let(b[i])
        q[i] = x / y
        r[i] = sqrt(x)
        m[i] = x % y
        t[i] = (x / y).cast(ScalarType.I32)
    return k.build()


def div_sqrt_inputs(a: np.ndarray, b: np.ndarray) -> tuple[dict[str, Any], DispatchConfig]:
    """Inputs and config of `div_sqrt_program` over the pairs (a, b)."""
    n = a.size
    return {"a": a, "b": b, "q": n, "r": n, "m": n, "t": n}, DispatchConfig(grid=-(-n // 64))
