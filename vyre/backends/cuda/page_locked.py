"""Page-locked host arrays on the CUDA backend (`page_locked_array`): NumPy arrays whose
memory the GPU's DMA reads and writes directly, so `read_into` and `write` move them at the
bus's speed instead of through the driver's pageable staging.

The memory is NumPy's own, registered with cuMemHostRegister; vyre never frees it, so the
array is valid memory for as long as Python keeps it, and ordinary (pageable) memory again
once it is unregistered: when the array dies, or when the backend closes, whichever comes
first. This module must never unregister memory a copy may still be using (every vyre copy
from or into host memory the driver knows has finished before its call returns), nor leave
memory registered after the array that owns it is gone.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from typing import Any

import numpy as np

from .device import ContextState, CudaDevice

PAGE = 4096  # registration works on whole pages: the array starts on one


def allocate(backend: CudaDevice, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A new page-locked array of `shape` and `dtype` (uninitialised)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + PAGE, np.uint8)  # NumPy owns it; we only lock its pages
    start = -raw.ctypes.data % PAGE
    mem = raw[start:start + nbytes]
    ptr = mem.ctypes.data
    st = backend.context_state
    with backend.lock:
        backend.check_open()
        err = backend.driver.cuMemHostRegister(ptr, nbytes, 0)[0]
        if int(err) != 0:
            backend.driver_fail(f"cuMemHostRegister of {nbytes} bytes", err, requested=nbytes)
        st.page_locked[ptr] = nbytes
    # when the last view of `raw` dies, before NumPy frees the memory (array_dealloc clears
    # weak references first)
    weakref.finalize(raw, unregister, st, ptr)
    return mem.view(dtype).reshape(shape)


def unregister(st: ContextState, ptr: int) -> None:
    """`ptr` back to ordinary memory, once (the array's finalizer and close() may race)."""
    if st.page_locked.pop(ptr, None) is None or not st.usable:
        return
    with contextlib.suppress(Exception):  # (a context lost meanwhile took the locks with it)
        st.make_current()
        st.drv.cuMemHostUnregister(ptr)


def unregister_all(st: ContextState) -> None:
    """Every array of this context back to ordinary memory (at close: they outlive it)."""
    for ptr in list(st.page_locked):
        unregister(st, ptr)


def is_page_locked(st: ContextState, array: Any) -> bool:
    """Whether `array`'s memory is registered here (tests and diagnostics)."""
    ptr = np.asarray(array).ctypes.data
    return any(p <= ptr < p + n for p, n in st.page_locked.items())
