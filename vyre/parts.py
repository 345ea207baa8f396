"""The four parts every backend is made of, and the hooks each offers: the backend author's
contract.

A backend instance is `vyre.backend.BaseBackend`, a thin facade over the parts the core
keeps the same on every device (the buffer registry, the compile cache, the launch path
and its launch cache, host I/O checks) and four parts a backend supplies, which have the
same names in every backend (reference, wgpu, cuda, an out-of-tree plugin):

- `Device`: the instance's hold on its device: the lock, open / closing / closed, the
  context generation (a lost context makes older buffers stale), the capabilities and the
  error mapping (driver errors and conditions the device flags become vyre errors).
- `Allocator`: device memory: allocate, free, write, read (and the optional managed,
  page-locked, DLPack and device-to-device copy paths).
- `Compiler`: a validated Program to what launches run (its artifact), behind the one
  generic compile cache (`vyre.compile_cache`), which keys, counts and evicts.
- `Queue`: launch records and the work enqueued: `prepare` makes a binding's record once,
  `launch` enqueues it (the hot path), `launch_pending` returns a Pending, pipelines are
  recorded and run, `synchronize` waits.

Every method below that a part's subclass may override is a hook: marked `@hook`, its
docstring begins "Hook" and says whether it is required (a backend overrides it in its
part's subclass); every other member is the core's, and a part subclass that redefines one
is refused when its class is made (Part.__init_subclass__). A hook a backend does not
supply raises `UnsupportedFeature` naming what to use instead: the core never routes
resident work through host copies. Hooks run with the
arguments checked (ownership, ranges, freed state, a validated Program) and, where they
say so, under the instance's lock. A part knows the instance it serves (`backend`, set once
by BaseBackend) and its `device` (given to its constructor).

This module must never hold behaviour of a particular device, nor import vyre.backend
(which imports it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .config import Timing
from .errors import BackendUnavailable, UnsupportedFeature
from .features import PAGE_LOCKED_HOST
from .interface import Capabilities, CompileStats

if TYPE_CHECKING:
    from .binding import BoundDispatch
    from .buffer import BufferBase
    from .ir.nodes import Program
    from .pipeline import Pipeline, PipelineResult, ReadRange

__all__ = ["Allocator", "Compiler", "Device", "HostBytes", "Pending", "Queue", "hook",
           "host_array"]

F = TypeVar("F", bound=Callable[..., Any])

#: What an allocator hands back for bytes read from the device: a fresh uint8 array (the one copy,
#: which read_many views as the asked dtype) or bytes / a memoryview (copied once more there).
#: Fresh arrays come from np.empty: NumPy asks Linux for huge pages for large ones, which the
#: first write faults in ~4x faster than a bytearray's pages (256 MiB: 45 against 175 ms here).
HostBytes = bytes | bytearray | memoryview | np.ndarray

_NO_DLPACK = ("this backend's buffers cannot be handed to array frameworks without a copy; "
              "read them into numpy with backend.read(buffer, dtype=...)")


class Pending:
    """Work enqueued on a backend; `wait()` blocks until it is done and returns its Timing."""

    def __init__(
        self,
        is_ready: Callable[[], bool],
        wait: Callable[[], Timing],
    ) -> None:
        self._is_ready = is_ready
        self._wait = wait
        self._timing: Timing | None = None

    def is_ready(self) -> bool:
        return self._timing is not None or self._is_ready()

    def wait(self) -> Timing:
        if self._timing is None:
            self._timing = self._wait()
        return self._timing

    @classmethod
    def done(cls, timing: Timing) -> Pending:
        p = cls(lambda: True, lambda: timing)
        p._timing = timing
        return p


def hook(fn: F) -> F:
    """Marks a part's method as a hook: a backend overrides it in its part's subclass."""
    fn.__vyre_hook__ = True  # type: ignore[attr-defined]
    return fn


def is_hook(member: Any) -> bool:
    """Whether a class member (a function, or a property over one) is marked `@hook`."""
    fn = member.fget if isinstance(member, property) else member
    return getattr(fn, "__vyre_hook__", False) is True


class Part:
    """What every part has: the instance it serves (set by BaseBackend.__init__)."""

    backend: Any = None  # the BaseBackend this part serves (the owner of its buffers)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuses a subclass that redefines a method of vyre's parts that is not a hook:
        the core calls those (some bound once, for the hot path) and relies on what they
        do, so an override would be ignored or break it."""
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__[1:]:
            if base.__module__ != __name__ or base is Part:
                continue
            core = sorted(name for name, member in vars(base).items()
                          if not name.startswith("__") and name in vars(cls)
                          and callable(getattr(member, "fget", member)) and not is_hook(member))
            if core:
                raise TypeError(
                    f"{cls.__qualname__} redefines {', '.join(core)} of vyre.parts."
                    f"{base.__name__}, which the core calls and a backend never overrides; "
                    f"its hooks are {', '.join(hooks_of(base))}")


def hooks_of(part: type) -> list[str]:
    """The names of `part`'s hooks (its own and its bases'), sorted."""
    return sorted({name for c in part.__mro__ for name, member in vars(c).items()
                   if is_hook(member)})


class Device(Part):
    """The instance's hold on its device (see the module docstring). Used as it is, it is a
    device that needs no setting up and cannot be lost (a CPU backend): give it the
    capabilities. A GPU backend subclasses it with its context, stream and error mapping."""

    def __init__(self, instance_id: str, caps: Capabilities | None = None) -> None:
        self.id = instance_id
        self.caps = caps
        # the instance's lock: every device call that may interleave with another thread's
        # is made under it (launches hold it from their check to their enqueue)
        self.lock = threading.RLock()
        self.closed = False
        # set when close() begins: a driver call racing it that the driver then refuses
        # is reported as the closed instance it is (BackendUnavailable)
        self.closing = False
        self.generation = 0  # bumped by lose(): buffers of older generations are stale
        self.lost_reason: str | None = None
        self.on_lost: Callable[[], None] = lambda: None  # the facade's: re-check launches

    @hook
    def capabilities(self) -> Capabilities:
        """Hook (required unless the backend overrides BaseBackend.capabilities): what this
        instance can do, reported before anything runs."""
        if self.caps is None:
            raise NotImplementedError(f"{type(self).__name__} reports no capabilities")
        return self.caps

    @hook
    def check(self) -> None:
        """Hook (optional): raise BackendUnavailable when the device cannot take work (its
        context was lost); called by check_open once the instance is known open. It may
        make the device current on the calling thread."""

    def check_open(self) -> None:
        """Raise BackendUnavailable unless the instance is open and its device usable."""
        if self.closed:
            raise self.closed_error()
        self.check()

    def closed_error(self) -> BackendUnavailable:
        return BackendUnavailable(
            self.id, "this instance was closed; create a new one with vyre.get_backend()"
        )

    @property
    @hook
    def context_generation(self) -> int:
        """Hook (optional): which device context buffers allocated now belong to."""
        return self.generation

    def lose(self, reason: str) -> None:
        """The device context is gone: every buffer allocated so far becomes stale."""
        with self.lock:
            self.generation += 1
            self.lost_reason = reason
            self.on_lost()

    @hook
    def stale_reason(self, buffer: BufferBase) -> str | None:
        """Hook (optional): why `buffer`'s memory went with a lost context, or None."""
        if buffer.generation == self.context_generation:
            return None
        return (f"it was allocated in context generation {buffer.generation} of "
                f"{self.id!r}, which was lost ({self.lost_reason or 'device reset'}); "
                f"the backend is now in generation {self.context_generation}")

    @hook
    def close(self) -> None:
        """Hook (optional): release the device, after the other parts closed (lock held)."""


class Allocator(Part):
    """Device memory. Buffers are `vyre.buffer.BufferBase` subclasses owned by `backend`."""

    def __init__(self, device: Device) -> None:
        self.device = device

    @hook
    def allocate(self, byte_len: int, label: str | None) -> BufferBase:
        """Hook (required for resident buffers): `byte_len` bytes of device memory (lock
        held; the size is checked against the device's limits)."""
        raise UnsupportedFeature("allocate_device_buffer", self.device.id)

    @hook
    def free(self, buffer: BufferBase) -> None:
        """Hook (required with allocate): release a live buffer of this instance (lock held)."""
        raise UnsupportedFeature("free", self.device.id)

    @hook
    def write(self, buffer: BufferBase, data: memoryview, offset: int) -> None:
        """Hook (required with allocate): copy host bytes into the buffer at `offset`, in
        order after earlier work (lock held; the range is checked and non-empty)."""
        raise UnsupportedFeature("write", self.device.id)

    @hook
    def read(self, buffer: BufferBase, offset: int, length: int) -> HostBytes:
        """Hook (required with allocate): the bytes at [offset, offset + length), after the
        work enqueued before (lock held; the range is checked and non-empty)."""
        raise UnsupportedFeature("read", self.device.id)

    @hook
    def read_batch(self, ranges: list[tuple[BufferBase, int, int]]) -> list[HostBytes]:
        """Hook (optional): several ranges behind one wait (default: `read` each)."""
        return [self.read(b, o, n) if n else b"" for b, o, n in ranges]

    @hook
    def read_batch_into(self, ranges: list[tuple[BufferBase, int, int]],
                        outs: list[np.ndarray]) -> None:
        """Hook (optional): `read_batch`, each range's bytes into the uint8 array of `outs`
        beside it (default: copied out of what `read_batch` returns; an allocator that can
        copy straight into the caller's memory overrides this)."""
        for data, dst in zip(self.read_batch(ranges), outs):
            dst[...] = np.frombuffer(data, np.uint8)

    @hook
    def allocate_managed(self, byte_len: int, label: str | None) -> BufferBase:
        """Hook (optional, with the 'managed_memory' feature): memory the host addresses too."""
        raise UnsupportedFeature(
            "managed_memory", self.device.id,
            "this backend has no host-addressable (managed) memory; allocate with "
            "kind='device' and copy with write()/read()",
        )

    @hook
    def host_view(self, buffer: BufferBase, dtype: Any) -> np.ndarray:
        """Hook (optional, with allocate_managed): a managed buffer as a NumPy view."""
        raise UnsupportedFeature(
            "host_view", self.device.id,
            "only managed buffers (allocate_device_buffer(n, kind='managed') on a backend "
            "reporting 'managed_memory') are host-addressable; use backend.read(buffer) to copy",
        )

    @hook
    def page_locked_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Hook (optional, with the 'page_locked_host' feature): a host array this device's
        copies move by DMA directly."""
        raise UnsupportedFeature(
            PAGE_LOCKED_HOST, self.device.id,
            "this backend moves host data through its own staging memory, so no host array "
            "is faster than another; use np.empty(shape, dtype) with read_into",
        )

    @hook
    def release_cached(self) -> int:
        """Hook (optional): give back memory kept from freed buffers; the bytes given back."""
        return 0

    @hook
    def import_dlpack(self, tensor: Any, stream: Any, label: str | None) -> BufferBase:
        """Hook (optional): borrow a framework's device array as a buffer, without copying."""
        raise UnsupportedFeature(
            "from_dlpack", self.device.id,
            "this backend cannot borrow another library's memory; copy host data in with "
            "backend.write(buffer, np.asarray(x)) or pass it to dispatch()",
        )

    @hook
    def export_dlpack(self, buffer: BufferBase, dtype: Any, shape: Any, stream: Any,
                      max_version: Any, dl_device: Any, copy: Any) -> Any:
        """Hook (optional): `buffer.__dlpack__` (a DLPack capsule, no copy)."""
        raise UnsupportedFeature("dlpack", self.device.id, _NO_DLPACK)

    @hook
    def dlpack_device(self, buffer: BufferBase) -> tuple[int, int]:
        """Hook (optional, with export_dlpack): `buffer.__dlpack_device__`."""
        raise UnsupportedFeature("dlpack", self.device.id, _NO_DLPACK)

    @hook
    def copy_from(self, src: BufferBase, src_offset: int, dst: BufferBase, dst_offset: int,
                  nbytes: int) -> bool:
        """Hook (optional): copy `nbytes` bytes of `src` (a checked live buffer of any
        backend) at `src_offset` into `dst` (this instance's, checked, long enough) at
        `dst_offset` on the devices, where this backend reaches `src`'s device directly,
        ordered after both sides' earlier work and before their later work; False where it
        cannot, and `vyre.copy` goes through the host."""
        return False

    @hook
    def copy_batch(self, copies: list[Any]) -> bool:
        """Hook (optional), asked of the first copy's destination: run every
        `vyre.transfers.Copy` of `copies` (checked) on the devices, concurrently, and
        return True; False where this backend cannot take all of them (then each runs
        through `copy_from` or the host)."""
        return False

    @hook
    def close(self) -> None:
        """Hook (optional): release staging and kept memory, after every buffer was freed
        and before the device closes (lock held)."""


class Compiler(Part):
    """A validated Program to the backend's artifact (a loaded kernel, a compute pipeline,
    an interpreter plan). The compile cache (vyre.compile_cache) calls it on a miss."""

    #: Hook (optional, a class attribute): the compile key of `BaseBackend.compile(program)`
    #: (the specialisation of a plain dispatch); a backend whose artifacts depend on the
    #: binding names its own
    plain_key: Any = None

    def __init__(self, device: Device, options: Any = None) -> None:
        self.device = device
        # the backend's debug and measurement switches: one frozen, hashable value per
        # instance (e.g. CudaOptions), given to the printer and part of every cache key
        self.options = options
        # the cache's counters: it counts hits, misses and evictions; a compiler with a
        # disk cache adds its disk_hits
        self.stats = CompileStats()

    @hook
    def compile(self, program: Program, key: Any) -> Any:
        """Hook (required for dispatches): the artifact of a validated `program` that fits
        the device, for compile key `key` (lock held)."""
        raise UnsupportedFeature("compile", self.device.id)

    @hook
    def specialisation(self, bound: BoundDispatch) -> Any:
        """Hook (optional): the part of the compile key that depends on the binding (e.g.
        which buffer slots alias); default None."""
        return None

    @hook
    def source(self, program: Program) -> str:
        """Hook (optional): the generated device source for `program` (for inspection)."""
        raise UnsupportedFeature("source", self.device.id)

    @hook
    def evict(self, artifact: Any) -> None:
        """Hook (optional): `artifact` left the cache (lock held). Drop what is keyed on it;
        device objects still used by recorded work must stay valid until that work is gone
        (hold them from the recording, not from the cache)."""

    @hook
    def close(self, artifacts: list[Any]) -> None:
        """Hook (optional): the instance closes: release `artifacts`, every one still
        cached, after the queue closed (lock held)."""


class Queue(Part):
    """Launch records and the work enqueued on the device."""

    def __init__(self, device: Device) -> None:
        self.device = device

    @hook
    def prepare(self, bound: BoundDispatch, artifact: Any) -> Any:
        """Hook (required for resident dispatches): everything a launch of `bound` needs
        that does not change between launches (`artifact`: its compiled program; packed
        arguments, bind groups): the backend's opaque launch record, made once per binding
        (lock held). It must not hold `bound` or its buffers strongly: the launch cache
        keeps records of buffers it holds only weakly."""
        raise UnsupportedFeature(
            "dispatch_with_device_buffers",
            self.device.id,
            "this backend cannot dispatch on resident device buffers, and vyre never "
            "substitutes host copies; use a backend that reports 'resident'",
        )

    @hook
    def launch(self, record: Any, buffers: tuple[BufferBase, ...]) -> None:
        """Hook (required with prepare): enqueue one launch of a prepared record; `buffers`
        are its buffers in declaration order. The hot path: called with the lock held,
        right after the core checked (at most once per epoch) that the instance is open and
        the buffers usable, so no free can come between that check and this enqueue."""
        raise UnsupportedFeature("dispatch_with_device_buffers", self.device.id)

    @hook
    def launch_pending(self, bound: BoundDispatch) -> Pending:
        """Hook (required for dispatch_async): enqueue `bound` (`bound.launch.record`
        prepared) and return a Pending for it (lock held); profiled dispatches come here."""
        raise UnsupportedFeature("dispatch_async", self.device.id)

    @hook
    def record_pipeline(self, pipeline: Pipeline, artifacts: list[Any]) -> None:
        """Hook (optional, with the 'pipeline' feature): prepare the recording of
        `pipeline` (its steps bound and checked; `artifacts[i]` is step i's compiled
        program) in `pipeline.state` (lock held)."""

    @hook
    def run_pipeline(self, pipeline: Pipeline, repeat: int,
                     reads: list[ReadRange]) -> PipelineResult:
        """Hook (optional, with record_pipeline): run every step `repeat` times, then the
        reads, behind one host synchronisation (lock held, buffers checked)."""
        raise UnsupportedFeature("pipeline", self.device.id)

    @hook
    def synchronize(self) -> None:
        """Hook (optional): block until all work enqueued has finished (lock held)."""

    @hook
    def close(self) -> None:
        """Hook (optional): wait for the work in flight and release the recordings, after
        every buffer was freed and before the compiler closes (lock held)."""


def host_array(data: HostBytes, dtype: Any) -> np.ndarray:
    """Bytes read from a device as a new writable array of `dtype`: a fresh uint8 array from
    the allocator (the one copy already made) is viewed, anything else copied once."""
    if type(data) is np.ndarray:
        return data.view(dtype)
    return np.frombuffer(bytearray(data), dtype=dtype)
