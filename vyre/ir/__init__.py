"""The Program IR: types, nodes, validation, wire format."""

from . import nodes
from .nodes import Program
from .types import ScalarType

__all__ = ["Program", "ScalarType", "nodes"]
