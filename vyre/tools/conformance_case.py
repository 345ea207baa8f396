"""`Case`: one conformance case (a Program, its inputs and config, and how its outputs are
judged), in a module of its own so that the case families (conformance.py,
conformance_exact.py, conformance_subgroup.py) share it without importing one another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vyre.config import DispatchConfig
from vyre.ir.nodes import Program


@dataclass
class Case:
    name: str
    program: Program
    inputs: Callable[[np.random.Generator], dict[str, Any]]
    config: DispatchConfig
    # docs/IR.md's values of some outputs, computed from the inputs without any backend
    # (vyre.tools.conformance_exact): the reference must produce them.
    expected: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Outputs that depend on the order of colliding atomics: not compared with the
    # reference; `invariant(inputs, outputs)` (a reason, or None) checks them instead.
    order_dependent: frozenset[str] = frozenset()
    invariant: Callable[[dict[str, Any], dict[str, np.ndarray]], str | None] | None = None
