"""The Program IR: types, nodes, validation, wire format."""

from . import nodes
from .nodes import Program
from .serialize import from_json, to_json
from .types import ScalarType
from .validate import validate

__all__ = ["Program", "ScalarType", "from_json", "nodes", "to_json", "validate"]
