"""The reference backend: a NumPy interpreter of the Program IR and the oracle every other
backend is checked against (docs/IR.md). Its device is the CPU; it is a backend of its own,
never a fallback for the others.

Modules, one job each: `numeric` (operator semantics), `atomics` (atomic RMW over lanes),
`interpreter` (statements with lane masks), `plan` (compiled form, running a bound
dispatch), `buffers` (host-memory device buffers), `render` (pseudo-code listing),
`runtime` (its four parts, small enough for one module, and the BaseBackend facade over
them), `subgroup` (subgroup operations), `checked` (the checked mode: the interpreter with an
access log, reporting races, uninitialised workgroup reads, out-of-bounds accesses and
divergent barriers; `ReferenceBackend(check=...)`, $VYRE_CHECK). This module only exposes the provider and must never
hold behaviour of its own.

Choices where docs/IR.md leaves freedom (the oracle is deterministic):
- Invocations run in lockstep, statement by statement, in lane order (workgroup-linear
  index, then local_index); workgroups run in linear order, in chunks of whole workgroups.
- Colliding atomics of one statement apply in lane order; old values are those of that
  sequential execution (one valid interleaving).
- Workgroup arrays start zeroed (the IR leaves them undefined until written).
- Racy plain stores to one address in one statement: the highest lane wins.
- fma: f32/f16 through an exact f64 product and a round-to-odd f64 sum (single rounding);
  f64 exactly, with rational arithmetic per element (slow, but exact).
- Approximate functions (exp, sin, pow, ...) are computed in f64 and rounded once.
- `DispatchConfig(options=DispatchOptions(max_loop_iterations=...))` bounds loops (DispatchError past it).
"""

from __future__ import annotations

from vyre.errors import BackendUnavailable
from vyre.interface import Availability

from .checked import CheckSetting
from .runtime import ReferenceBackend


class _Provider:
    """Entry point `vyre.backends:reference`: always available (NumPy is a dependency)."""

    name = "reference"

    def probe(self) -> Availability:
        return Availability(
            name=self.name,
            available=True,
            reason="NumPy interpreter on the CPU",
            devices=("cpu",),
        )

    def create(self, device: int | str | None = None,
               check: bool | str | CheckSetting | None = None) -> ReferenceBackend:
        """`check`: the checked mode (vyre.get_backend('reference', check=...))."""
        if check is not None:  # (named after the device asked for, as before)
            return ReferenceBackend(
                "reference" if device in (None, "", 0, "0", "cpu") else f"reference:{device}",
                check=check)
        # its one device is the CPU: any other device name is a typo, never a new device
        if device not in (None, "", 0, "0", "cpu"):
            raise BackendUnavailable(
                f"reference:{device}", f"the reference backend has one device, the CPU; "
                f"there is no device {device!r}: use 'reference' (or 'reference:cpu')"
            )
        return ReferenceBackend("reference")


PROVIDER = _Provider()

__all__ = ["PROVIDER", "ReferenceBackend"]
