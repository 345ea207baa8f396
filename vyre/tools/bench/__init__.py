"""`vyre bench`: a fixed benchmark suite run on every available vyre backend and, where
installed, on the libraries a user would pick instead (raw cuda-bindings, CuPy, PyTorch,
raw wgpu-py, NumPy), in one process and on the same data, with every timed output checked.

Modules, one job each: `workloads` (the suite: sizes, data, checks), `runner` (timing,
medians, progress), `vyre_impl` (the workloads on a vyre backend), `peers` (the same on the
peer libraries), `suite` (running it all into a report document), `report` (text table and
JSON), `plot` (optional PNG), `command` (the CLI subcommand). Importing this package must
never import a peer library or a backend's device library.
"""

from __future__ import annotations

from .suite import Options, run_suite

__all__ = ["Options", "run_suite"]
