"""The IR's size limits (docs/IR.md): how deep, how large and how wide a valid Program may be.

Constants only, at the bottom of vyre.ir: the nodes, the digest, the validator, the wire
format and the builders all bound their work by these. This module must never import
another module of vyre.
"""

from __future__ import annotations

MAX_DEPTH = 64
"""Most nested levels of statements plus expressions (a top-level statement is level 1)."""
MAX_NAME_LEN = 64
"""Longest name of a declaration or local (and of the program)."""
MAX_NODES = 1_000_000
"""Most statement + expression nodes, a subexpression shared by several parents counted once
per use (what every walk, the wire format and code generation see). Python code can build
a DAG whose tree is exponentially large (x = x + x, 60 times); this bound turns that into
an error instead of a hang."""
MAX_WORKGROUP_INVOCATIONS = 1024
"""Most invocations of one workgroup (the product of workgroup_size)."""
MAX_WORKGROUP_DIM = (1024, 1024, 64)
"""Largest workgroup_size in each axis."""
