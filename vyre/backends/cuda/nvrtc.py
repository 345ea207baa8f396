"""NVRTC compilation of generated CUDA C to a cubin, and the on-disk cubin cache.

Always compiles to a **cubin** for one exact architecture (`sm_XY`), never to PTX: a newer
NVRTC emits PTX that an older driver cannot load, while a cubin for the device's own
architecture loads on any driver that supports the device. Options never include fast-math;
`--fmad=false` forbids contracting a*b+c into an fma (docs/IR.md).

The disk cache key is sha256(source, options, arch, NVRTC version, format); entries are
written atomically (temp file + os.replace, not fsynced: a torn entry fails its checksum and
is rebuilt) so concurrent processes are safe, and carry
their own key and a checksum over key and payload, so a corrupted entry, or one copied onto
another key, is detected and rebuilt, never loaded (see DiskCache for the other guards).

This module needs no GPU and no driver, and must never load a module or touch a device.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vyre.errors import BackendUnavailable, CompileError
from vyre.interrupts import native_sigint_shield
from vyre.ir.nodes import Program

from .options import DEFAULT_OPTIONS, CudaOptions
from .render import Generated, generate

FORMAT = "vyre-cuda-cubin-2"
MAGIC = b"VYRECUBIN2\n"
BACKEND = "cuda"

# IEEE-exact code: no fast-math, no flush-to-zero, correctly rounded div and sqrt, and no
# fma contraction of separate multiplies and adds.
BASE_OPTIONS: tuple[str, ...] = (
    "--fmad=false",
    "--ftz=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--std=c++17",
    "--device-as-default-execution-space",
)


# Options that only make NVRTC faster, never change the cubin (checked by
# tests/test_cuda_compile.py over the conformance and regression programs): -minimal
# (NVRTC >= 12.4) skips the texture, device-runtime and runtime-API declarations the
# generated code never uses (about 4.5 ms of a 30-45 ms cold compile on the CI host).
MINIMAL_SINCE = (12, 4)


def compile_options() -> tuple[str, ...]:
    """BASE_OPTIONS and the speed-only options this NVRTC accepts (part of the cache key)."""
    return BASE_OPTIONS + (("-minimal",) if nvrtc_version() >= MINIMAL_SINCE else ())


def _nvrtc():  # type: ignore[no-untyped-def]
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendUnavailable(
            BACKEND, f"cuda-bindings is not installed ({exc}); pip install 'vyre[cuda]'"
        ) from None
    return nvrtc


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor); BackendUnavailable if NVRTC cannot be loaded (asked once:
    it is part of every cache key)."""
    nv = _nvrtc()
    try:
        err, major, minor = nv.nvrtcVersion()
    except Exception as exc:
        raise BackendUnavailable(BACKEND, f"NVRTC could not be loaded: {exc}") from None
    if int(err) != 0:
        raise BackendUnavailable(BACKEND, f"nvrtcVersion failed: {err}")
    return int(major), int(minor)


def supported_archs() -> tuple[int, ...]:
    """Compute capabilities (e.g. 90) this NVRTC can target."""
    nv = _nvrtc()
    err, _n = nv.nvrtcGetNumSupportedArchs()
    if int(err) != 0:
        return ()
    err, archs = nv.nvrtcGetSupportedArchs()
    return tuple(int(a) for a in archs) if int(err) == 0 else ()


def arch_for(major: int, minor: int) -> str:
    return f"sm_{major}{minor}"


def _check(result: Any, what: str) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise CompileError(BACKEND, f"{what} failed ({err})", "", "")


def compile_source(source: str, arch: str, options: tuple[str, ...] | None = None,
                   name: str = "vyre.cu") -> bytes:
    """NVRTC `source` to a cubin for `arch` ("sm_90") with `options` (default:
    compile_options()); CompileError with source and log."""
    nv = _nvrtc()
    if options is None:
        options = compile_options()
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
    err, prog = nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        with native_sigint_shield():  # NVRTC 13 exits the process on SIGINT mid-compile
            (res,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        err, size = nv.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        if int(err) == 0 and size > 1:
            nv.nvrtcGetProgramLog(prog, log)
        log_text = log.rstrip(b"\x00 ").decode(errors="replace")
        if int(res) != 0:
            raise CompileError(
                BACKEND, f"NVRTC could not compile the kernel for {arch} ({res})", source,
                log_text,
            )
        err, size = nv.nvrtcGetCUBINSize(prog)
        _check(err, "nvrtcGetCUBINSize")
        if size == 0:
            raise CompileError(BACKEND, f"NVRTC produced no cubin for {arch}", source, log_text)
        cubin = b" " * size
        _check(nv.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        nv.nvrtcDestroyProgram(prog)


def default_cache_dir() -> Path:
    """$VYRE_CACHE_DIR/cuda, else $XDG_CACHE_HOME/vyre/cuda, else ~/.cache/vyre/cuda."""
    env = os.environ.get("VYRE_CACHE_DIR")
    if env is not None and env and not env.strip():
        # a blank value would make a directory named " " in the current directory
        raise BackendUnavailable(
            "cuda", f"$VYRE_CACHE_DIR={env!r} is blank: set it to the directory for vyre's "
            "compile cache, or unset it for the default ($XDG_CACHE_HOME/vyre or "
            "~/.cache/vyre)")
    if env:
        return Path(env) / "cuda"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "vyre" / "cuda"


def cache_key(source: str, arch: str, options: tuple[str, ...] | None = None) -> str:
    if options is None:
        options = compile_options()
    major, minor = nvrtc_version()
    h = hashlib.sha256()
    for part in (FORMAT, source, "\0".join(options), arch, f"nvrtc-{major}.{minor}"):
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


@dataclass
class DiskCacheStats:
    hits: int = 0
    misses: int = 0
    corrupt: int = 0
    writes: int = 0


MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""Largest cache entry read back (cubins are kilobytes to a few megabytes)."""


class DiskCache:
    """Content-addressed cubins on disk; see the module docstring.

    Hostile or accidental damage costs a recompile, never a wrong or stalled load: an
    entry names its own key (one copied onto another key is refused), only regular files of
    at most MAX_ENTRY_BYTES are read (never a FIFO, a device or a symlink), and the cache
    is used only in a directory this user owns and no one else can write (else it is
    skipped, with one warning).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.stats = DiskCacheStats()
        self._usable: bool | None = None  # decided on first use
        self.disabled_reason: str | None = None

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.cubin"

    def usable(self) -> bool:
        """Whether the directory is safe to use (created 0700 if missing); checked once."""
        if self._usable is None:
            self.disabled_reason = self._check_directory()
            self._usable = self.disabled_reason is None
            if self.disabled_reason is not None:
                warnings.warn(
                    f"vyre: the CUDA compile cache in {str(self.directory)!r} is not used: "
                    f"{self.disabled_reason}; kernels are compiled afresh. Point "
                    "$VYRE_CACHE_DIR at a directory only you can write",
                    RuntimeWarning, stacklevel=3,
                )
        return self._usable

    def _check_directory(self) -> str | None:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(self.directory)
        except OSError as exc:
            return f"it cannot be created ({exc})"
        if not stat.S_ISDIR(st.st_mode):
            return "it is not a directory (a symlink or a file)"
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return f"it belongs to user id {st.st_uid}, not to this user ({os.getuid()})"
        if st.st_mode & 0o022:
            return (f"others can write to it (mode {stat.S_IMODE(st.st_mode):o}); "
                    "chmod go-w it")
        return None

    def get(self, key: str) -> bytes | None:
        if not self.usable():
            self.stats.misses += 1
            return None
        p = self.path(key)
        data = _read_entry(p)
        payload = None if data is None else _unwrap(data, key)
        if payload is None:
            self.stats.misses += 1
            if data is not None or _not_an_entry(p):
                # damaged, written for another key, or not a regular file: removed (unlink
                # never follows a symlink) and rebuilt by the caller
                self.stats.corrupt += 1
                with contextlib.suppress(OSError):
                    p.unlink()
            return None
        self.stats.hits += 1
        return payload

    def put(self, key: str, cubin: bytes) -> None:
        """Write atomically; a failure to write only costs a recompile later."""
        if not self.usable():
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.directory)
            try:
                # no fsync: an entry torn by a crash fails its checksum on read and is
                # rebuilt, so durability is not worth a disk flush on every cold compile
                with os.fdopen(fd, "wb") as f:
                    f.write(_wrap(cubin, key))
                os.replace(tmp, self.path(key))  # replaces a FIFO or symlink entry too
                self.stats.writes += 1
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass


def _not_an_entry(p: Path) -> bool:
    """Whether something that can never be an entry sits at `p` (a symlink, FIFO, directory
    or oversized file). False where nothing is there, or where a regular file is: that one
    was renamed in by another process after this one's read found nothing (a miss, not
    damage, so it must not be removed)."""
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return not _entry_shaped(st)


def _entry_shaped(st: os.stat_result) -> bool:
    """Whether `st` can be an entry: a regular file of at most MAX_ENTRY_BYTES."""
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_ENTRY_BYTES


def _read_entry(p: Path) -> bytes | None:
    """The bytes of entry `p` if it is a regular file (not followed through a symlink, never
    blocking on a FIFO) of at most MAX_ENTRY_BYTES; None otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(p, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _entry_shaped(st):
            return None
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _wrap(payload: bytes, key: str) -> bytes:
    digest = _digest(key, payload)
    return (MAGIC + key.encode() + b"\n" + digest + b"\n" + len(payload).to_bytes(8, "little")
            + payload)


def _digest(key: str, payload: bytes) -> bytes:
    h = hashlib.sha256(key.encode())
    h.update(b"\0")
    h.update(payload)
    return h.hexdigest().encode()


def _unwrap(data: bytes, key: str) -> bytes | None:
    """The payload of an entry written for `key`; None if damaged or written for another."""
    head = MAGIC + key.encode() + b"\n"
    if not data.startswith(head):
        return None
    rest = data[len(head):]
    if len(rest) < 65 + 8:
        return None
    digest, size = rest[:64], int.from_bytes(rest[65:73], "little")
    payload = rest[73:]
    if rest[64:65] != b"\n" or len(payload) != size:
        return None
    if _digest(key, payload) != digest:
        return None
    return payload


@dataclass(frozen=True)
class CompiledCubin:
    generated: Generated
    arch: str
    cubin: bytes
    key: str
    from_disk: bool

    @property
    def source(self) -> str:
        return self.generated.source


def compile_program(program: Program, arch: str, cache: DiskCache | None = None,
                    restrict: bool = True, coarsen: int = 1,
                    codegen_options: CudaOptions = DEFAULT_OPTIONS,
                    indirect: bool = False) -> CompiledCubin:
    """Generate CUDA C for `program` and compile it to a cubin for `arch` (no GPU needed).

    With `cache`, a valid entry on disk is used instead of NVRTC, and a fresh cubin is
    stored there (keyed on the source, which `codegen_options` shape).
    """
    gen = generate(program, restrict=restrict, coarsen=coarsen, options=codegen_options,
                   indirect=indirect)
    options = compile_options()
    key = cache_key(gen.source, arch, options)
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return CompiledCubin(gen, arch, hit, key, True)
    cubin = compile_source(gen.source, arch, options, name=f"{program.name[:40] or 'vyre'}.cu")
    if cache is not None:
        cache.put(key, cubin)
    return CompiledCubin(gen, arch, cubin, key, False)
