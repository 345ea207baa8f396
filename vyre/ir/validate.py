"""The Program validator: every rule of docs/IR.md that can be checked before a backend runs.

`validate(program)` returns None for a valid Program and raises `InvalidProgram` otherwise.
The error's `node` is the path of the offending node (e.g. ``body[2].then[0].value``); the
message names the node kind, what is wrong and how to fix it.

Rules checked, in one walk over the program:

- names: every buffer, param, workgroup array, local (`Let`), loop variable (`For.var`) and
  atomic result is an ASCII identifier (``[A-Za-z_][A-Za-z0-9_]*``, at most
  `MAX_NAME_LEN` chars) and unique program-wide (no shadowing). The program's own name is
  looser: non-empty, at most `MAX_NAME_LEN` chars of letters, digits, ``_ . -``.
- declarations: element types of buffers, params and workgroup arrays are not bool; a fixed
  buffer count is >= 0; a workgroup array count is >= 1; the workgroup size is >= 1 in
  every axis, at most (1024, 1024, 64) and at most 1024 invocations.
- scoping: a `Let` (or an atomic `result`) is visible after it in its block and in nested
  blocks; a loop variable only inside its loop body. Assign only to visible locals that are
  not loop variables.
- types: every expression's `ty` is recomputed from its children (the builder's rules) and
  must match; loads/lengths/stores/atomics name declared buffers or arrays; indices and
  shift amounts are u32; conditions are bool; casts between any scalar types are legal;
  bitcasts need equal widths and no bool; `Const` values must be exactly representable.
- access: no load from a `write` buffer, no store/atomic to a `read` buffer; atomics need a
  `read_write` buffer or a workgroup array, an i32/u32/i64/u64 element (f32: `add` only),
  and a comparand exactly for `compare_exchange`.
- control flow: break/continue only inside a loop; `For` has ty i32/u32, bounds of that
  type and a step in 1..max of the type.
- uniformity: every `Barrier` sits in uniform control flow (docs/IR.md, "Uniformity"). The
  analysis is flow-insensitive for locals: a local is non-uniform if *any* of its
  assignments (Let, Assign, loop bounds) is non-uniform or sits in non-uniform control
  flow; atomic results and loads are always non-uniform. A loop containing a `break` or
  `continue` (of that loop) or a `return` in non-uniform control flow has a non-uniform
  body (the back edge makes every iteration after it divergent); a `return` in
  non-uniform control flow makes everything after it non-uniform.
- subgroups: subgroup operations take i32/u32/f32 values (bitwise combines: i32/u32), a
  u32 lane for shuffle / broadcast only, a combine for reduce / scans only; like a
  `Barrier` they must sit in uniform control flow, and a broadcast's lane must be uniform
  (`subgroup_size` is uniform, `subgroup_lane` and every subgroup result are not).
- depth: statement plus expression nesting is at most `MAX_DEPTH` (64) levels, so no walk
  over a valid Program (here, in serialisation or in a backend) can overflow the stack.
- size: at most `MAX_NODES` nodes, a shared subexpression counted once per use.

Programs are immutable, so a validated Program is remembered (by identity, and by content
hash where one was already computed) and validating it again is O(1).

The checks live in vyre.ir.validate_stmts (the walk over statements) and
vyre.ir.validate_exprs (expressions); this module is the entry and its cache. It must
never mutate a Program, import a backend, or evaluate a kernel.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

from ..errors import InvalidProgram
from .limits import MAX_DEPTH as MAX_DEPTH  # (re-exported: vyre.ir.validate.MAX_DEPTH)
from .limits import MAX_NAME_LEN as MAX_NAME_LEN  # (re-exported)
from .limits import MAX_NODES as MAX_NODES  # (re-exported)
from .limits import MAX_WORKGROUP_DIM as MAX_WORKGROUP_DIM  # (re-exported)
from .limits import MAX_WORKGROUP_INVOCATIONS as MAX_WORKGROUP_INVOCATIONS  # (re-exported)
from .nodes import Program, check_tree_size
from .validate_exprs import is_valid_name as is_valid_name  # (re-exported)
from .validate_stmts import Validator

# ------------------------------------------------------------------ cache

_VALID_BY_ID: dict[int, weakref.ref[Program]] = {}
_VALID_HASHES: OrderedDict[str, None] = OrderedDict()
_MAX_HASHES = 4096


class _Forget:
    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __call__(self, _ref: object) -> None:
        _VALID_BY_ID.pop(self.pid, None)


def _is_cached(program: Program) -> bool:
    ref = _VALID_BY_ID.get(id(program))
    if ref is not None and ref() is program:
        return True
    h = program.__dict__.get("content_hash")  # only if already computed (cached_property)
    if h is not None and h in _VALID_HASHES:
        _remember(program)
        return True
    return False


def _remember(program: Program) -> None:
    pid = id(program)
    _VALID_BY_ID[pid] = weakref.ref(program, _Forget(pid))
    h = program.__dict__.get("content_hash")
    if h is not None:
        _VALID_HASHES[h] = None
        if len(_VALID_HASHES) > _MAX_HASHES:
            _VALID_HASHES.popitem(last=False)


def validate(program: Program) -> None:
    """Raise InvalidProgram (naming the node and the fix) unless `program` is valid."""
    if not isinstance(program, Program):
        raise InvalidProgram(
            f"expected a vyre Program, got {type(program).__name__}; build one with "
            "vyre.ProgramBuilder or vyre.ir.from_json"
        )
    if _is_cached(program):
        return
    check_tree_size(program)  # linear in distinct nodes: refuses 2^60-node trees at once
    Validator(program).run()
    _remember(program)


__all__ = ["MAX_DEPTH", "MAX_NAME_LEN", "MAX_NODES", "is_valid_name", "validate"]
