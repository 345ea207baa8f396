"""Thin checked wrappers over the CUDA driver API (cuda-python's `cuda.bindings.driver`).

Every call goes through `call`, which turns a failing CUresult into a vyre error naming the
call and the driver's message: out-of-memory becomes OutOfDeviceMemory, a fault that
poisons the context (illegal address, launch failure, ...) becomes DispatchError with
`sticky=True`, anything else DispatchError. Importing this module never loads libcuda;
`load()` does, and reports BackendUnavailable with the reason when there is no driver.

This module must never hold backend state (streams, buffers, caches): runtime.py does.
"""

from __future__ import annotations

from typing import Any

from vyre.errors import BackendUnavailable, DispatchError, OutOfDeviceMemory

BACKEND = "cuda"

# Errors after which the context is unusable: illegal address, launch timeout, hardware
# stack error, illegal instruction, misaligned address, invalid address space, invalid PC,
# launch failed, unknown.
STICKY = frozenset({700, 702, 714, 715, 716, 717, 718, 719, 999})
OUT_OF_MEMORY = 2
NOT_READY = 600

_driver: Any = None


class CudaError(DispatchError):
    """A driver call failed; `code` is the CUresult, `sticky` whether the context is lost."""

    def __init__(self, what: str, code: int, name: str, message: str) -> None:
        self.code = code
        self.sticky = code in STICKY
        detail = (
            "; the CUDA context is now unusable (a kernel fault poisons it): close this "
            "backend and create a new one with vyre.get_backend('cuda')"
            if self.sticky else ""
        )
        super().__init__(f"{BACKEND}: {what} failed with {name} ({code}): {message}{detail}")


def load() -> Any:
    """The driver module, initialised; BackendUnavailable(reason) when there is none."""
    global _driver
    if _driver is not None:
        return _driver
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise BackendUnavailable(
            BACKEND, f"cuda-bindings is not installed ({exc}); pip install 'vyre[cuda]'"
        ) from None
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # libcuda missing: cuda-pathfinder raises its own error type
        raise BackendUnavailable(
            BACKEND, f"the NVIDIA driver library (libcuda) could not be loaded: {exc}"
        ) from None
    if int(err) != 0:
        raise BackendUnavailable(BACKEND, f"cuInit failed: {error_name(driver, err)} "
                                          "(no NVIDIA GPU or driver usable here)")
    _driver = driver
    return driver


def error_name(driver: Any, err: Any) -> str:
    try:
        _, name = driver.cuGetErrorName(err)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return str(err)


def error_string(driver: Any, err: Any) -> str:
    try:
        _, s = driver.cuGetErrorString(err)
        return s.decode() if isinstance(s, bytes) else str(s)
    except Exception:
        return ""


def fail(what: str, err: Any, requested: int | None = None) -> Exception:
    """The vyre error for a failed call."""
    driver = _driver
    code = int(err)
    if code == OUT_OF_MEMORY and requested is not None:
        free = total = -1
        if driver is not None:
            try:
                e, free, total = driver.cuMemGetInfo()
                if int(e) != 0:
                    free = total = -1
            except Exception:
                pass
        return OutOfDeviceMemory(
            BACKEND, requested, f"{what}: {free} bytes free of {total} on the device"
        )
    return CudaError(what, code, error_name(driver, err), error_string(driver, err))


def call(fn: Any, *args: Any, what: str | None = None) -> Any:
    """Call a driver function; raise on failure; return its results (None, one, or a tuple)."""
    res = fn(*args)
    err = res[0]
    if int(err) != 0:
        raise fail(what or str(getattr(fn, "__name__", "driver call")), err)
    if len(res) == 1:
        return None
    if len(res) == 2:
        return res[1]
    return res[1:]


def attribute(driver: Any, dev: Any, name: str) -> int:
    attr = getattr(driver.CUdevice_attribute, name)
    return int(call(driver.cuDeviceGetAttribute, attr, dev, what=f"cuDeviceGetAttribute({name})"))


def device_count() -> int:
    driver = load()
    return int(call(driver.cuDeviceGetCount))


def driver_version() -> int:
    driver = load()
    return int(call(driver.cuDriverGetVersion))
