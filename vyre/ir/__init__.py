"""The Program IR: types, nodes, validation, wire format.

The modules layer bottom-up: types, ops and limits; digest; nodes; visit; analysis;
validate; serialize, sites and compare. Nothing imports a module above it: Program (nodes)
derives its facts and features and validates through functions installed here, once the
modules that define them are imported (Python runs this file before any module of the
package).
"""

from . import analysis, nodes
from . import validate as _validate
from .nodes import Program
from .serialize import from_json, to_json
from .types import ScalarType
from .validate import validate

nodes.install_derivations(expr_facts=analysis.expr_facts,
                          required_features=analysis.required_features,
                          validate=_validate.validate)

__all__ = ["Program", "ScalarType", "from_json", "nodes", "to_json", "validate"]
