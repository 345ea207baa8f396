"""The validator's expression checks: every expression's type recomputed from its
operands (docs/IR.md's typing rules), its names resolved and its uniformity dependencies
collected, plus the state and the error wording the statement walk shares
(vyre.ir.validate_stmts derives its Validator from ExprChecks).

This module must never mutate a Program, import a backend, or evaluate a kernel.
"""

from __future__ import annotations

import math
import re
from typing import NoReturn

from ..errors import InvalidProgram
from . import ops
from .limits import MAX_DEPTH, MAX_NAME_LEN, MAX_NODES
from .nodes import (
    CORE_ONLY,
    Atomic,
    Binary,
    Bitcast,
    Builtin,
    Call,
    Cast,
    Const,
    Length,
    Load,
    Native,
    Param,
    Program,
    Select,
    Store,
    Subgroup,
    Unary,
    Var,
)
from .types import ScalarType, normalise_literal
from .uniformity import UNIFORM_CF, Uniformity

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

BOOL = ScalarType.BOOL
U32 = ScalarType.U32
I32 = ScalarType.I32
F32 = ScalarType.F32
_UNIFORM_BUILTINS = frozenset({"workgroup_id", "num_workgroups", "subgroup_size"})
_SUBGROUP_TYPES = frozenset({ScalarType.I32, ScalarType.U32, ScalarType.F32})
_COMPARISON = ops.binary_names("comparison")
_LOGICAL = ops.binary_names("logical")
_BITWISE = ops.binary_names("bitwise")
_SHIFT = ops.binary_names("shift")


def is_valid_name(name: object) -> bool:
    """Whether `name` may name a buffer, param, workgroup array or local."""
    return isinstance(name, str) and len(name) <= MAX_NAME_LEN and bool(_IDENT.match(name))


# ------------------------------------------------------------------ error paths

_PART = re.compile(r"([A-Za-z_]+)((?:\[\d+\])*)\Z")


def _node_at(program: Program, path: str) -> object:
    """The object at `path` (e.g. ``body[2].then[0].value``); only used to word errors."""
    cur: object = program
    try:
        for part in path.split("."):
            m = _PART.match(part)
            if m is None:
                return None
            cur = getattr(cur, m.group(1))
            for idx in re.findall(r"\d+", m.group(2)):
                cur = cur[int(idx)]  # type: ignore[index]
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return cur


def _kind(node: object) -> str:
    """A short description of a node: "binary add", "builtin global_id", "store", ..."""
    if isinstance(node, Binary | Unary):
        return f"{node.kind} {node.op}"
    if isinstance(node, Call):
        return f"call {node.fn}"
    if isinstance(node, Builtin):
        return f"builtin {node.name}"
    if isinstance(node, Subgroup):
        return f"subgroup {node.op}"
    if isinstance(node, Atomic):
        return f"atomic {node.op}"
    if isinstance(node, Load | Store | Length):
        return f"{node.kind} {node.buffer}"
    kind = getattr(node, "kind", None)
    if isinstance(kind, str):
        return kind
    name = type(node).__name__
    return {"BufferDecl": "buffer", "ParamDecl": "param", "WorkgroupArray": "workgroup array",
            "tuple": "workgroup size", "str": "name"}.get(name, name)


class Local:
    __slots__ = ("loop", "node", "ty")

    def __init__(self, ty: ScalarType, node: int, loop: bool) -> None:
        self.ty = ty
        self.node = node
        self.loop = loop


class Loop:
    __slots__ = ("div", "path")

    def __init__(self, path: str, div: int) -> None:
        self.path = path
        self.div = div


# ------------------------------------------------------------------ the walk's state


class ExprChecks:
    """The validator's state over one Program and its checks of expressions (the statement
    walk, validate_stmts.Validator, derives from it)."""

    def __init__(self, program: Program) -> None:
        self.p = program
        self.names: set[str] = set()
        self.decl: dict[str, tuple[str, ScalarType, str]] = {}  # name -> (what, ty, access)
        self.locals: dict[str, Local] = {}
        self.u = Uniformity()
        self.loops: list[Loop] = []
        self.barriers: list[tuple[str, int]] = []
        self.subgroups: list[tuple[str, int]] = []  # (path, control flow) of subgroup ops
        self.lane_deps: list[tuple[str, list[int]]] = []  # broadcast lanes: must be uniform
        self.cf = UNIFORM_CF  # the control flow of the statement whose expressions are checked
        self.count = 0

    def fail(self, path: str, message: str) -> NoReturn:
        name = self.p.name if isinstance(self.p.name, str) else repr(self.p.name)
        raise InvalidProgram(f"{message} (program {name[:MAX_NAME_LEN]!r})",
                             node=f"{path} ({_kind(_node_at(self.p, path))})")

    def too_many(self, path: str) -> NoReturn:
        self.fail(path, f"the program has more than MAX_NODES={MAX_NODES} nodes (a "
                  "subexpression used in several places counts once per use); keep shared "
                  "values in a let instead of repeating the expression")

    def core_only(self, node: object, path: str) -> NoReturn:
        what = f"native {node.op}" if isinstance(node, Native) else type(node).__name__
        self.fail(path, f"{what} is an internal node of the lowered core (vyre.lower); a "
                  "Program cannot contain it: write the IR operation instead")

    def buffer(self, name: str, path: str, what: str) -> tuple[str, ScalarType, str]:
        d = self.decl.get(name)
        if d is None or d[0] == "param":
            self.fail(path, f"{what} names {name!r}, which is not a declared buffer or "
                      "workgroup array; declare it (k.buffer / k.shared) or fix the name")
        return d

    def cond(self, e: object, path: str, d: int, what: str) -> list[int]:
        ty, deps = self.expr(e, path, d)
        if ty is not BOOL:
            self.fail(path, f"{what} condition is {ty}, not bool; compare it (e.g. x != 0)")
        return deps

    def index(self, e: object, path: str, d: int) -> None:
        ty, _ = self.expr(e, path, d)
        if ty is not U32:
            self.fail(path, f"an index must be u32, got {ty}; cast or bitcast it to u32")

    # -- expressions: return (recomputed type, uniformity dependencies)
    def expr(self, e: object, path: str, depth: int) -> tuple[ScalarType, list[int]]:
        if isinstance(e, CORE_ONLY):  # (subclasses of user nodes: checked first)
            self.core_only(e, path)
        if depth > MAX_DEPTH:
            self.fail(path, f"nesting deeper than MAX_DEPTH={MAX_DEPTH} levels of statements "
                      "and expressions; split the expression with lets")
        d = depth + 1
        self.count += 1
        if self.count > MAX_NODES:
            self.too_many(path)
        if isinstance(e, Const):
            self.const(e, path)
            return e.ty, []
        if isinstance(e, Var):
            loc = self.locals.get(e.name)
            if loc is None:
                self.fail(path, f"var {e.name!r} is not a local visible here (a let is "
                          "visible after it in its block; a loop variable only in its body); "
                          "declare it before use")
            if e.ty is not loc.ty:
                self.fail(path, f"var {e.name!r} says {e.ty} but the local is {loc.ty}; fix "
                          "its ty")
            return loc.ty, [loc.node]
        if isinstance(e, Binary):
            ta, da = self.expr(e.a, f"{path}.a", d)
            tb, db = self.expr(e.b, f"{path}.b", d)
            self.wide(ta, f"{path}.a", f"binary {e.op}")
            self.wide(tb, f"{path}.b", f"binary {e.op}")
            ty = self.binary_type(e.op, ta, tb, path)
            self.same(e.ty, ty, path, f"binary {e.op}")
            return ty, da + db
        if isinstance(e, Load):
            _, ety, access = self.buffer(e.buffer, path, "load")
            if access == "write":
                self.fail(path, f"load from buffer {e.buffer!r}, which is declared 'write' "
                          "(write-only); declare it 'read_write' to read it back")
            self.index(e.index, f"{path}.index", d)
            self.same(e.ty, ety, path, f"load from {e.buffer!r}")
            src = self.u.node(f"a load from {e.buffer!r} ({path})")
            self.u.mark(src, f"a load from {e.buffer!r} ({path})")
            return ety, [src]
        if isinstance(e, Param):
            dd = self.decl.get(e.name)
            if dd is None or dd[0] != "param":
                self.fail(path, f"param {e.name!r} is not declared; declare it with k.param")
            self.same(e.ty, dd[1], path, f"param {e.name!r}")
            return e.ty, []
        if isinstance(e, Builtin):
            if isinstance(e.axis, bool) or e.axis not in (0, 1, 2):
                self.fail(path, f"builtin {e.name} axis {e.axis!r}; the axis must be 0, 1 or 2")
            if e.name == "local_index" and e.axis != 0:
                self.fail(path, f"builtin local_index is flat; its axis must be 0, got {e.axis}")
            self.same(e.ty, U32, path, f"builtin {e.name}")
            if e.name in _UNIFORM_BUILTINS:
                return U32, []
            src = self.u.node(f"builtin {e.name} ({path})")
            self.u.mark(src, f"builtin {e.name}")
            return U32, [src]
        if isinstance(e, Length):
            self.buffer(e.buffer, path, "length")
            self.same(e.ty, U32, path, f"length of {e.buffer!r}")
            return U32, []
        if isinstance(e, Unary):
            t, deps = self.expr(e.a, f"{path}.a", d)
            self.wide(t, f"{path}.a", f"unary {e.op}")
            if e.op == "neg" and not (t.is_float or t.is_signed):
                self.fail(path, f"unary neg on {t}; negation needs a signed int or float "
                          "(for unsigned wrap-around use 0 - x)")
            if e.op == "bit_not" and not t.is_int:
                self.fail(path, f"unary bit_not on {t}; it needs an integer (use 'not' for "
                          "bool)")
            if e.op == "not" and t is not BOOL:
                self.fail(path, f"unary not on {t}; it needs bool (use bit_not for integers)")
            self.same(e.ty, t, path, f"unary {e.op}")
            return t, deps
        if isinstance(e, Call):
            return self.call(e, path, d)
        if isinstance(e, Select):
            tc, dc = self.expr(e.cond, f"{path}.cond", d)
            ta, da = self.expr(e.a, f"{path}.a", d)
            tb, db = self.expr(e.b, f"{path}.b", d)
            self.wide(ta, f"{path}.a", "select")
            if tc is not BOOL:
                self.fail(f"{path}.cond", f"select condition is {tc}, not bool; compare it")
            if ta is not tb:
                self.fail(path, f"select branches are {ta} and {tb}; they must share one "
                          "type (cast one)")
            self.same(e.ty, ta, path, "select")
            return ta, dc + da + db
        if isinstance(e, Cast):
            _, deps = self.expr(e.a, f"{path}.a", d)
            return e.ty, deps
        if isinstance(e, Bitcast):
            t, deps = self.expr(e.a, f"{path}.a", d)
            if BOOL in (t, e.ty) or t.bits != e.ty.bits:
                self.fail(path, f"bitcast {t} -> {e.ty}: a bitcast needs two non-bool types of "
                          "one width; use a cast for value conversion")
            if (t.is_narrow or e.ty.is_narrow) and not (t.is_int and e.ty.is_int):
                self.fail(path, f"bitcast {t} -> {e.ty}: a 16-bit integer bitcasts only to "
                          "the other 16-bit integer; for f16 bits cast to u32 first and "
                          "bitcast the f16 through f32, or keep the bits in a u16 buffer")
            return e.ty, deps
        if isinstance(e, Subgroup):
            return self.subgroup(e, path, d)
        self.fail(path, f"{type(e).__name__} is not an expression node")

    def subgroup(self, e: Subgroup, path: str, d: int) -> tuple[ScalarType, list[int]]:
        what = f"subgroup {e.op}"
        t, deps = self.expr(e.value, f"{path}.value", d)
        self.wide(t, f"{path}.value", what)
        if t not in _SUBGROUP_TYPES:
            self.fail(path, f"{what} on {t}; subgroup operations take i32, u32 or f32 "
                      "(cast the value)")
        if e.op in ("shuffle", "broadcast"):
            if e.lane is None:
                self.fail(path, f"{what} needs a lane (the u32 lane index to read from)")
            if e.combine is not None:
                self.fail(path, f"{what} takes no combine operation; remove it")
            lt, ldeps = self.expr(e.lane, f"{path}.lane", d)
            if lt is not U32:
                self.fail(f"{path}.lane", f"{what} lane is {lt}; it must be u32 (cast it)")
            if e.op == "broadcast":
                self.lane_deps.append((f"{path}.lane", ldeps))
            deps = deps + ldeps
        else:
            if e.lane is not None:
                self.fail(path, f"{what} takes no lane (only shuffle and broadcast do)")
            if e.combine is None:
                self.fail(path, f"{what} needs a combine operation: add, min, max, and, or "
                          "or xor")
            if e.combine in _BITWISE and not t.is_int:
                self.fail(path, f"{what} with {e.combine} on {t}; bitwise combines need "
                          "i32 or u32")
        self.same(e.ty, t, path, what)
        self.subgroups.append((path, self.cf))
        # differs between subgroups (and, for shuffles and scans, between lanes)
        src = self.u.node(f"{what} ({path})", deps)
        self.u.mark(src, f"the result of {what} ({path})")
        return t, [src]

    def wide(self, t: ScalarType, path: str, what: str) -> None:
        """8/16-bit values are only loaded, cast, bitcast and stored (docs/IR.md "Narrow
        integers"): refuse one anywhere else, naming the cast to write."""
        if t.is_narrow:
            self.fail(path, f"{what} on a {t} value; 8/16-bit integers are storage types "
                      f"with no arithmetic of their own: cast the value to {t.promoted} "
                      f"first (and back to {t} to store it)")

    def same(self, declared: ScalarType, actual: ScalarType, path: str, what: str) -> None:
        if declared is not actual:
            self.fail(path, f"{what} has ty {declared} but its operands make it {actual}; "
                      f"set ty={actual} (or cast the operands)")

    def const(self, e: Const, path: str) -> None:
        v = e.value
        try:
            n = normalise_literal(v, e.ty)
        except ValueError as exc:
            self.fail(path, f"const {v!r} is not a valid {e.ty}: {exc}")
        if type(n) is not type(v) or not (
            n == v or (isinstance(n, float) and math.isnan(n) and math.isnan(v))
        ):
            self.fail(path, f"const {v!r} is not exactly representable as {e.ty} (nearest "
                      f"{n!r}); use the representable value")

    def binary_type(self, op: str, ta: ScalarType, tb: ScalarType, path: str) -> ScalarType:
        if op in _SHIFT:
            if not ta.is_int:
                self.fail(path, f"binary {op} needs an integer left operand, got {ta}")
            if tb is not U32:
                self.fail(f"{path}.b", f"shift amount is {tb}; it must be u32 (cast or "
                          "bitcast it)")
            return ta
        if ta is not tb:
            self.fail(path, f"binary {op} on {ta} and {tb}; both operands must have one "
                      "type: cast one of them")
        if op in _LOGICAL:
            if ta is not BOOL:
                self.fail(path, f"binary {op} needs bool operands, got {ta}; use and/or for "
                          "integers")
            return BOOL
        if op in _COMPARISON:
            if ta is BOOL and op not in ("eq", "ne"):
                self.fail(path, f"binary {op} is not defined on bool; only eq/ne are")
            return BOOL
        if op in _BITWISE:
            if not ta.is_int:
                self.fail(path, f"bitwise {op} needs integers, got {ta}; bitcast floats, use "
                          "logical_and/logical_or for bool")
            return ta
        if not ta.is_numeric:
            self.fail(path, f"binary {op} needs numbers, got {ta}")
        return ta

    def call(self, e: Call, path: str, d: int) -> tuple[ScalarType, list[int]]:
        rec = ops.CALLS[e.fn]
        arity = rec.arity
        if len(e.args) != arity:
            self.fail(path, f"call {e.fn} has {len(e.args)} arguments; it takes {arity}")
        deps: list[int] = []
        tys: list[ScalarType] = []
        for i, a in enumerate(e.args):
            t, da = self.expr(a, f"{path}.args[{i}]", d)
            self.wide(t, f"{path}.args[{i}]", f"call {e.fn}")
            tys.append(t)
            deps += da
        if rec.signature is not None:  # fixed operand and result types (dot4_i8 / _u8)
            want, result = rec.signature
            if tys != list(want):
                self.fail(path, f"call {e.fn} arguments are {[str(x) for x in tys]}; it takes "
                          f"{[str(x) for x in want]} (bitcast or cast them)")
            self.same(e.ty, result, path, f"call {e.fn}")
            return result, deps
        t = tys[0]
        if any(x is not t for x in tys):
            self.fail(path, f"call {e.fn} arguments are {[str(x) for x in tys]}; they must "
                      "share one type (cast them)")
        if not t.is_numeric:
            self.fail(path, f"call {e.fn} needs numbers, got {t}")
        if rec.float_only and not t.is_float:
            self.fail(path, f"call {e.fn} needs a float argument, got {t}; cast it to f32")
        self.same(e.ty, t, path, f"call {e.fn}")
        return t, deps
