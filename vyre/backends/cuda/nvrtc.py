"""NVRTC compilation of generated CUDA C to a cubin, and the on-disk cubin cache.

Always compiles to a **cubin** for one exact architecture (`sm_XY`), never to PTX: a newer
NVRTC emits PTX that an older driver cannot load, while a cubin for the device's own
architecture loads on any driver that supports the device. Options never include fast-math;
`--fmad=false` forbids contracting a*b+c into an fma (docs/IR.md).

The disk cache key is sha256(source, options, arch, NVRTC version, format); entries are
written atomically (temp file + os.replace) so concurrent processes are safe, and carry a
checksum so a corrupted entry is detected, removed and rebuilt, never loaded.

This module needs no GPU and no driver, and must never load a module or touch a device.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vyre.errors import BackendUnavailable, CompileError
from vyre.ir.nodes import Program

from .codegen import Generated, generate

FORMAT = "vyre-cuda-cubin-1"
MAGIC = b"VYRECUBIN1\n"
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


def _nvrtc():  # type: ignore[no-untyped-def]
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendUnavailable(
            BACKEND, f"cuda-bindings is not installed ({exc}); pip install 'vyre[cuda]'"
        ) from None
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor); BackendUnavailable if NVRTC cannot be loaded."""
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


def compile_source(source: str, arch: str, options: tuple[str, ...] = BASE_OPTIONS,
                   name: str = "vyre.cu") -> bytes:
    """NVRTC `source` to a cubin for `arch` ("sm_90"); CompileError with source and log."""
    nv = _nvrtc()
    opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
    err, prog = nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
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
    if env:
        return Path(env) / "cuda"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "vyre" / "cuda"


def cache_key(source: str, arch: str, options: tuple[str, ...] = BASE_OPTIONS) -> str:
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


class DiskCache:
    """Content-addressed cubins on disk; see the module docstring."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.stats = DiskCacheStats()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.cubin"

    def get(self, key: str) -> bytes | None:
        p = self.path(key)
        try:
            data = p.read_bytes()
        except OSError:
            self.stats.misses += 1
            return None
        payload = _unwrap(data)
        if payload is None:
            self.stats.corrupt += 1
            self.stats.misses += 1
            with contextlib.suppress(OSError):
                p.unlink()
            return None
        self.stats.hits += 1
        return payload

    def put(self, key: str, cubin: bytes) -> None:
        """Write atomically; a failure to write only costs a recompile later."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_wrap(cubin))
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path(key))
                self.stats.writes += 1
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            pass


def _wrap(payload: bytes) -> bytes:
    digest = hashlib.sha256(payload).hexdigest().encode()
    return MAGIC + digest + b"\n" + len(payload).to_bytes(8, "little") + payload


def _unwrap(data: bytes) -> bytes | None:
    if not data.startswith(MAGIC):
        return None
    rest = data[len(MAGIC):]
    if len(rest) < 65 + 8:
        return None
    digest, size = rest[:64], int.from_bytes(rest[65:73], "little")
    payload = rest[73:]
    if rest[64:65] != b"\n" or len(payload) != size:
        return None
    if hashlib.sha256(payload).hexdigest().encode() != digest:
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
                    restrict: bool = True, coarsen: int = 1) -> CompiledCubin:
    """Generate CUDA C for `program` and compile it to a cubin for `arch` (no GPU needed).

    With `cache`, a valid entry on disk is used instead of NVRTC, and a fresh cubin is
    stored there.
    """
    gen = generate(program, restrict=restrict, coarsen=coarsen)
    key = cache_key(gen.source, arch)
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return CompiledCubin(gen, arch, hit, key, True)
    cubin = compile_source(gen.source, arch, name=f"{program.name[:40] or 'vyre'}.cu")
    if cache is not None:
        cache.put(key, cubin)
    return CompiledCubin(gen, arch, cubin, key, False)
