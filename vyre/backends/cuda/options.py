"""`CudaOptions`: the CUDA code generator's debug and measurement switches, per instance.

They change how a Program is printed, never what it computes (every setting gives the same
results, bit for bit); the defaults are the measured best and what production uses. A
`CudaBackend` holds one frozen value (`CudaBackend(0, options=CudaOptions(...))`), passes it
to `render.generate` explicitly and keys its compiled kernels on it, so two instances with
different options never share a kernel and no module global is patched. Probed device facts
(architecture, limits) are the backend's, never here. This module must never read the
environment or import the rest of the backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from vyre.errors import InvalidDispatch


@dataclass(frozen=True)
class CudaOptions:
    """Switches of the CUDA printer (see the module docstring)."""

    lockstep: bool = True  # coarsened straight-line bodies run their invocations statement by statement
    vectorise: bool = True  # lockstep bodies load / store consecutive elements as one vector
    vector_runs: bool = True  # runs of loads of consecutive elements become one vector load
    # lockstep bodies compute total values under a bounds test for every invocation, only
    # their effect masked, so the k computations interleave
    speculate: bool = True
    # lockstep kernels run several (independent, barrier-free) workgroups per CUDA block, so a
    # block has this many threads however far coarsening shrank one workgroup (0: off)
    merge_threads: int = 256

    def __post_init__(self) -> None:
        for name in ("lockstep", "vectorise", "vector_runs", "speculate"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidDispatch(
                    f"CudaOptions.{name} must be True or False, got {getattr(self, name)!r:.40}")
        m = self.merge_threads
        if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m <= 1024:
            raise InvalidDispatch(
                f"CudaOptions.merge_threads must be an int from 0 (off) to 1024 (a CUDA "
                f"block's most threads), got {m!r:.40}")


DEFAULT_OPTIONS = CudaOptions()
