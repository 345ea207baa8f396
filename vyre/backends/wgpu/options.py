"""`WgpuOptions`: one wgpu instance's debug and measurement switches, apart from the facts
the device probe measured (`adapter.DeviceInfo`).

Every switch keeps the results docs/IR.md defines (exact either way) or forces a mode the
IR defines (flush mode); the defaults are what production uses. A `WgpuBackend` holds one
frozen value, passes it to `render.generate` explicitly, and its compile cache keys on it
(`BaseBackend.options`). The environment variables below are read in one place,
`WgpuOptions.from_env()`, when the provider makes an instance; nothing else reads them.
This module must never probe a device or import the rest of the backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from vyre.errors import InvalidDispatch

# "1": generate docs/IR.md's f32 flush mode even on a device that keeps subnormals (to get
# bit-identical results across devices, or to test the mode on lavapipe)
ENV_FLUSH = "VYRE_WGPU_FLUSH_SUBNORMALS"
# Tests and scripts/div_bench.py only: "exact" emits vyre's exact division and sqrt even
# where the driver's are correctly rounded (to test them on lavapipe), "native" the
# driver's even where they are not (to time the difference); unset: the probe decides.
# (The exact methods' correction of a bad estimate is tested on the reference, with a
# deliberately worse estimate: tests/test_exact_divsqrt.py.)
ENV_DIV_SQRT = "VYRE_WGPU_DIV_SQRT"
# Measurement only (scripts/wgpu_matmul_sweep.py): "all" fences every f32 operand, as vyre
# did before fences.py decided which ones a driver could fold (both are exact).
ENV_FENCES = "VYRE_WGPU_FENCES"
# Measurement only (scripts/wgpu_scan_sweep.py): "storage" spells every Barrier with a
# storageBarrier too, as vyre did before barriers.py decided where one is observable.
ENV_BARRIERS = "VYRE_WGPU_BARRIERS"
# Measurement only (scripts/wgpu_matmul_sweep.py): "scalar" keeps every workgroup-array
# access scalar, as vyre did before vectors.py spelled aligned runs as vec4 (both exact).
ENV_SHARED = "VYRE_WGPU_SHARED"
# Measurement only (scripts/wgpu_matmul_ablation.py): "0" spells flush mode explicitly for
# every f32 operation even where native_flush.py shows the device's add, sub, mul and fma
# already compute it (both exact).
ENV_NATIVE_FLUSH = "VYRE_WGPU_NATIVE_FLUSH"

DIV_SQRT_MODES = ("auto", "native", "exact")


@dataclass(frozen=True)
class WgpuOptions:
    """Switches of one wgpu instance (see the module docstring and the ENV_* notes)."""

    force_flush: bool = False  # ENV_FLUSH=1: flush mode even where the device keeps subnormals
    native_flush: bool = True  # False (ENV_NATIVE_FLUSH=0): never rely on the device's flushing
    div_sqrt: str = "auto"  # ENV_DIV_SQRT: one of DIV_SQRT_MODES ("auto": the probe decides)
    all_fences: bool = False  # ENV_FENCES=all: fence every f32 operand
    storage_barriers: bool = False  # ENV_BARRIERS=storage: every Barrier a storageBarrier too
    vectors: bool = True  # False (ENV_SHARED=scalar): no vec4 workgroup-array runs

    def __post_init__(self) -> None:
        for name in ("force_flush", "native_flush", "all_fences", "storage_barriers", "vectors"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidDispatch(
                    f"WgpuOptions.{name} must be True or False, got {getattr(self, name)!r:.40}")
        if self.div_sqrt not in DIV_SQRT_MODES:
            raise InvalidDispatch(
                f"WgpuOptions.div_sqrt must be one of {DIV_SQRT_MODES}, got {self.div_sqrt!r:.40}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> WgpuOptions:
        """The options the ENV_* variables ask for (unset, or another value: the default)."""
        mode = environ.get(ENV_DIV_SQRT, "")
        return cls(
            force_flush=environ.get(ENV_FLUSH, "") == "1",
            native_flush=environ.get(ENV_NATIVE_FLUSH, "") != "0",
            div_sqrt=mode if mode in DIV_SQRT_MODES else "auto",
            all_fences=environ.get(ENV_FENCES, "") == "all",
            storage_barriers=environ.get(ENV_BARRIERS, "") == "storage",
            vectors=environ.get(ENV_SHARED, "") != "scalar",
        )


DEFAULT_OPTIONS = WgpuOptions()
