"""Immutable nodes of the Program IR.

Every node is a frozen pydantic model with a `kind` tag, so a Program is plain data: it
compares by value, hashes by content and round-trips through the wire format exactly.
Expressions carry their result type (`ty`); the validator checks it. This module must never
contain semantics (how an op evaluates) or backend code, nor import a module of vyre.ir
above it (visit, analysis, validate, ...): what Program derives with those it reaches
through the functions vyre/ir/__init__.py installs (`install_derivations`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InvalidProgram
from . import ops
from .construct import construct, copy_with
from .digest import (
    _const_key,
    _dag_digest_iterative,
    _dag_digest_recursive,
    _field_names,
    _leaf_getter,
    _TooDeep,
    describe_nodes,
)
from .digest import dag_digest as dag_digest  # (re-exported: vyre.ir.nodes.dag_digest)
from .digest import tree_size as tree_size  # (re-exported)
from .limits import MAX_NODES
from .limits import MAX_WORKGROUP_DIM as MAX_WORKGROUP_DIM  # (re-exported)
from .limits import MAX_WORKGROUP_INVOCATIONS as MAX_WORKGROUP_INVOCATIONS  # (re-exported)
from .types import ScalarType, normalise_literal

# cached_property names of Program: derived from the fields, dropped by model_copy.
_DERIVED = ("canonical_json", "content_hash", "debug_statements", "expr_facts",
            "required_features")


class Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")


NodeT = TypeVar("NodeT", bound=Node)


# ---------------------------------------------------------------- expressions

BuiltinName = Literal[
    "global_id", "local_id", "workgroup_id", "num_workgroups", "local_index",
    "subgroup_size", "subgroup_lane",
]

# The op names come from the registry (ops.py); to mypy they are plain strings.
if TYPE_CHECKING:
    BinaryOp = str
    UnaryOp = str
    CallFn = str
else:
    BinaryOp = Literal[tuple(o.name for o in ops.BINARY_OPS)]
    UnaryOp = Literal[tuple(o.name for o in ops.UNARY_OPS)]
    CallFn = Literal[tuple(o.name for o in ops.CALL_OPS)]
SubgroupOp = Literal["shuffle", "broadcast", "reduce", "inclusive_scan", "exclusive_scan"]
SubgroupCombine = Literal["add", "min", "max", "and", "or", "xor"]
SUBGROUP_BUILTINS = frozenset({"subgroup_size", "subgroup_lane"})
AtomicOp = Literal["add", "min", "max", "and", "or", "xor", "exchange", "compare_exchange"]
Access = Literal["read", "write", "read_write"]

COMPARISON_OPS = ops.binary_names("comparison")
LOGICAL_OPS = ops.binary_names("logical")
BITWISE_OPS = ops.binary_names("bitwise")
SHIFT_OPS = ops.binary_names("shift")
ARITH_OPS = ops.binary_names("arith")
FLOAT_ONLY_FNS = frozenset(o.name for o in ops.CALL_OPS if o.float_only)
# Functions whose float results are compared with a ulp tolerance rather than bit-exactly
# for at least one type (`approximate_call` says for which).
APPROX_FNS = frozenset(o.name for o in ops.CALL_OPS if o.approximate)
# The backends' own functions (vyre.approx): no bound holds for every argument (drivers
# flush subnormal ones), so generated tests do not draw them.
NATIVE_FNS = frozenset(o.name for o in ops.CALL_OPS if o.name.startswith("approx_"))


def approximate_call(fn: str, ty: ScalarType) -> bool:
    """Whether a call of `fn` with result type `ty` is approximate (docs/IR.md "Calls"):
    not for the types with an exact definition (vyre.lower.maths)."""
    op = ops.CALLS.get(fn)
    return op is not None and op.approximate_for(ty)
FN_ARITY = {o.name: o.arity for o in ops.CALL_OPS}


class Const(Node):
    """A literal. Float values are stored already rounded to `ty`."""

    kind: Literal["const"] = "const"
    ty: ScalarType
    value: bool | int | float

    @model_validator(mode="after")
    def _normalise(self) -> Const:
        v = normalise_literal(self.value, self.ty)
        if v is not self.value or type(v) is not type(self.value):
            object.__setattr__(self, "value", v)
        return self


class Var(Node):
    """A local variable (let, loop variable or atomic result)."""

    kind: Literal["var"] = "var"
    name: str
    ty: ScalarType


class Param(Node):
    """A scalar parameter: uniform for the whole dispatch."""

    kind: Literal["param"] = "param"
    name: str
    ty: ScalarType


class Builtin(Node):
    """An invocation id. `local_index` is the flattened local id; its axis is 0."""

    kind: Literal["builtin"] = "builtin"
    name: BuiltinName
    axis: int = 0
    ty: ScalarType = ScalarType.U32


class Load(Node):
    """Element `index` of a storage buffer or workgroup array; 0 outside its length."""

    kind: Literal["load"] = "load"
    buffer: str
    index: Expr
    ty: ScalarType


class Length(Node):
    """Number of elements of a storage buffer (as bound) or workgroup array, as u32."""

    kind: Literal["length"] = "length"
    buffer: str
    ty: ScalarType = ScalarType.U32


class Unary(Node):
    kind: Literal["unary"] = "unary"
    op: UnaryOp
    a: Expr
    ty: ScalarType


class Binary(Node):
    kind: Literal["binary"] = "binary"
    op: BinaryOp
    a: Expr
    b: Expr
    ty: ScalarType


class Call(Node):
    kind: Literal["call"] = "call"
    fn: CallFn
    args: tuple[Expr, ...]
    ty: ScalarType


class Select(Node):
    """`a` where `cond` is true, else `b` (both evaluated)."""

    kind: Literal["select"] = "select"
    cond: Expr
    a: Expr
    b: Expr
    ty: ScalarType


class Cast(Node):
    """Value conversion to `ty` (docs/IR.md, "Cast", gives the exact rules)."""

    kind: Literal["cast"] = "cast"
    a: Expr
    ty: ScalarType


class Bitcast(Node):
    """Reinterpret the bits of `a` as `ty` (same width)."""

    kind: Literal["bitcast"] = "bitcast"
    a: Expr
    ty: ScalarType


class Subgroup(Node):
    """An operation across the lanes of this invocation's subgroup (docs/IR.md, "Subgroups").

    Lane l of subgroup s is the invocation with local_index s * subgroup_size + l.
    `shuffle` / `broadcast`: `value` of lane `lane mod subgroup_size` (broadcast: `lane` is
    uniform). `reduce`, `inclusive_scan`, `exclusive_scan`: `combine` over the lanes in the
    fixed orders docs/IR.md defines. Only in uniform control flow (validator).
    """

    kind: Literal["subgroup"] = "subgroup"
    op: SubgroupOp
    value: Expr
    lane: Expr | None = None
    combine: SubgroupCombine | None = None
    ty: ScalarType


NativeOp = Literal["div", "rem", "shl", "shr", "f2i", "approx_div", "approx_sqrt"]


class Native(Node):
    """Internal: only vyre.lower emits it and the validator refuses it in a user Program.

    A target's own operation, which the lowering only applies inside its domain: `div` /
    `rem` on ints with a nonzero divisor and never MIN / -1, `shl` / `shr` with an amount
    below the bit width, `f2i` of a float (f32 / f64) whose truncation fits `ty`;
    `approx_div` / `approx_sqrt`: the target's own f32 division / sqrt, which may be a few
    ulp off (Vulkan allows 2.5 / 3), only as the estimate an exact method corrects
    (vyre.lower.divsqrt; the reference computes it correctly rounded). The reference
    backend evaluates it with an assertion of that precondition, so it checks the
    lowering (`reference(P) == reference(lower(P))`).
    """

    kind: Literal["native"] = "native"
    op: NativeOp
    args: tuple[Expr, ...]
    ty: ScalarType


class Table(Node):
    """Internal: only vyre.lower emits it and the validator refuses it in a user Program.

    `values[index]`: a table of constants (of type `ty`, f64 / u32 / i32) read at a u32
    `index` that the lowering has made sure is below len(values) (the reference asserts
    it). The function definitions' tables (vyre.lower.maths: 2^(i/16), log(1/c_i),
    atan(i/16), the bits of 2/pi): CUDA spells one array per distinct table (a
    `__device__ const` array and a read of it; WGSL, where lavapipe copies a `const`
    array into every invocation, a tree of selects on the index's bits).
    """

    kind: Literal["table"] = "table"
    values: tuple[float, ...] | tuple[int, ...]
    index: Expr
    ty: ScalarType


class Invoke(Node):
    """Internal: only vyre.lower emits it and the validator refuses it in a user Program.

    `fn(args)`: a call of a `Function` of the lowered core (a function's exact
    definition, vyre.lower.maths), which a printer spells once per program however often
    it is called (CUDA a `__device__` function, WGSL a `fn`) and the reference evaluates
    in place. Its operands (`children`) are the arguments only: the body is a scope of its
    own, already lowered for the target."""

    kind: Literal["invoke"] = "invoke"
    fn: Function
    args: tuple[Expr, ...]
    ty: ScalarType


class RawLoad(Load):
    """Internal (vyre.lower only, refused by the validator): a Load whose index the
    lowering has made sure is below the length (the target reads memory unchecked)."""

    kind: Literal["raw_load"] = "raw_load"  # type: ignore[assignment]


class Guarded(Select):
    """Internal (vyre.lower only, refused by the validator): a Select that evaluates only
    the operand it chooses (C's `?:`), so `a` may be partial (a RawLoad) where `cond` is
    false. The reference evaluates `a` on the lanes where `cond` holds only."""

    kind: Literal["guarded"] = "guarded"  # type: ignore[assignment]


Expr = Annotated[
    Const | Var | Param | Builtin | Load | Length | Unary | Binary | Call | Select | Cast | Bitcast
    | Native | Table | Invoke | Subgroup | RawLoad | Guarded,
    Field(discriminator="kind"),
]

# ---------------------------------------------------------------- statements


class Let(Node):
    """Declare a new mutable local `name` of `value`'s type."""

    kind: Literal["let"] = "let"
    name: str
    value: Expr


class Assign(Node):
    kind: Literal["assign"] = "assign"
    name: str
    value: Expr


class Store(Node):
    """Write element `index`; a store outside the length does nothing."""

    kind: Literal["store"] = "store"
    buffer: str
    index: Expr
    value: Expr


class If(Node):
    kind: Literal["if"] = "if"
    cond: Expr
    then: tuple[Stmt, ...] = ()
    orelse: tuple[Stmt, ...] = ()


class For(Node):
    """`for var in range(start, end, step)`: bounds evaluated once; never overflows."""

    kind: Literal["for"] = "for"
    var: str
    ty: ScalarType
    start: Expr
    end: Expr
    step: int = 1
    body: tuple[Stmt, ...] = ()


class While(Node):
    kind: Literal["while"] = "while"
    cond: Expr
    body: tuple[Stmt, ...] = ()


class Break(Node):
    kind: Literal["break"] = "break"


class Continue(Node):
    kind: Literal["continue"] = "continue"


class Return(Node):
    kind: Literal["return"] = "return"


class Barrier(Node):
    """Workgroup barrier: orders workgroup and storage memory within the workgroup."""

    kind: Literal["barrier"] = "barrier"


class Atomic(Node):
    """Atomic read-modify-write; `result` (if set) declares a local holding the old value.

    Outside the buffer's length it does nothing and the old value reads as 0. An f32 `add`
    whose old value is never read is order-independent (exact, rounded once when the
    dispatch ends, or for a workgroup array at the next barrier: vyre.lower.exact_sum)
    unless `relaxed` asks for the order-dependent hardware atomic; `relaxed` changes
    nothing for other atomics.
    """

    kind: Literal["atomic"] = "atomic"
    op: AtomicOp
    buffer: str
    index: Expr
    value: Expr
    comparand: Expr | None = None
    result: str | None = None
    relaxed: bool = False


class Print(Node):
    """Debug output (`vyre.print`): `fmt` with the values of `args` in its replacement
    fields (`{}` or `{:spec}`, one per arg, in order), written to the dispatch's debug log
    and printed by the host after the dispatch, ordered by invocation (docs/IR.md, "Print
    and Assert"). No effect on the program's buffers."""

    kind: Literal["print"] = "print"
    fmt: str
    args: tuple[Expr, ...] = ()
    # the user's "file:line" (the builder's), carried with the Program (wire format
    # included) so that a process that did not build it (a Ray actor) still names it
    site: str | None = None


class Assert(Node):
    """`vyre.assert_`: where `cond` (bool) is false, a record (`fmt` with `args`, as Print)
    goes to the dispatch's debug log and the dispatch raises DispatchError once it is
    done; the invocation carries on (docs/IR.md, "Print and Assert")."""

    kind: Literal["assert"] = "assert"
    cond: Expr
    fmt: str = ""
    args: tuple[Expr, ...] = ()
    site: str | None = None  # (as Print's)


class Function(Node):
    """Internal (vyre.lower only): a function of the lowered core, called by `Invoke`:
    `params` (name, type) bound to the arguments, `body` run (statements that never
    return, store or loop), then `result` is the value. `name` is unique per program
    (one per function and type, e.g. "exp_f32"). `cold`: called only on a rare path (a
    definition's slow path, `Builder.outlined`), so a printer keeps it out of line: the
    same bits either way."""

    kind: Literal["function"] = "function"
    name: str
    params: tuple[tuple[str, ScalarType], ...]
    body: tuple[Stmt, ...]
    result: Expr
    ty: ScalarType
    cold: bool = False


class RawStore(Store):
    """Internal (vyre.lower only, refused by the validator): a Store whose index the
    lowering has made sure is below the length (the target writes memory unchecked)."""

    kind: Literal["raw_store"] = "raw_store"  # type: ignore[assignment]


class RawAtomic(Atomic):
    """Internal (vyre.lower only, refused by the validator): an Atomic whose index the
    lowering has made sure is below the length (the target accesses memory unchecked)."""

    kind: Literal["raw_atomic"] = "raw_atomic"  # type: ignore[assignment]


Stmt = Annotated[
    Let | Assign | Store | If | For | While | Break | Continue | Return | Barrier | Atomic
    | Print | Assert | RawStore | RawAtomic,
    Field(discriminator="kind"),
]

# ---------------------------------------------------------------- declarations


class BufferDecl(Node):
    name: str
    ty: ScalarType
    access: Access = "read"
    count: int | None = None

    @property
    def writable(self) -> bool:
        return self.access != "read"


class ParamDecl(Node):
    name: str
    ty: ScalarType


class WorkgroupArray(Node):
    name: str
    ty: ScalarType
    count: int


class ExprFacts(NamedTuple):
    """What one walk over a Program's nodes finds (cached as Program.expr_facts)."""

    types: frozenset[ScalarType]  # every scalar type declared or computed with
    subgroups: bool  # a subgroup operation, or a read of a subgroup builtin
    # the class of every node (the Program, its declarations, statements and expressions):
    # what asks only whether a Program has a loop, an atomic or a barrier reads it here
    # instead of walking the statements again
    classes: frozenset[type]


class Program(Node):
    """A compute kernel: declarations plus the body every invocation runs."""

    name: str
    workgroup_size: tuple[int, int, int] = (64, 1, 1)
    buffers: tuple[BufferDecl, ...] = ()
    params: tuple[ParamDecl, ...] = ()
    workgroup_arrays: tuple[WorkgroupArray, ...] = ()
    body: tuple[Stmt, ...] = ()

    @field_validator("workgroup_size", mode="before")
    @classmethod
    def _pad_workgroup_size(cls, v: Any) -> Any:
        # Always hand pydantic a tuple, so strict validation (the wire format) accepts a
        # JSON array; shorter forms are padded with 1s.
        if isinstance(v, int) and not isinstance(v, bool):
            return (v, 1, 1)
        if isinstance(v, (list, tuple)):
            return (*v, *([1] * (3 - len(v)))) if 1 <= len(v) < 3 else tuple(v)
        return v

    # Derived data, computed once per (immutable) Program.
    @cached_property
    def canonical_json(self) -> str:
        check_tree_size(self)  # never ask pydantic to dump a tree of shared subexpressions
        try:
            data = self.model_dump(mode="json")
        except ValueError:
            # pydantic's serialiser stops at its depth limit; the validator names the node
            # that nests too deeply (MAX_DEPTH) with a clean InvalidProgram instead.
            _validate(self)
            raise
        return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)

    @cached_property
    def content_hash(self) -> str:
        """Stable across processes and Python versions: a Merkle sha256 over the node graph.

        Each distinct node object is hashed once (memoised by identity), so a program whose
        expression shares subexpressions (x = x + x, 60 times) hashes in time linear in its
        distinct nodes, never in its 2^60-node tree; equal programs hash equal however
        their nodes are shared. The walk also yields `expr_facts` (unless already known),
        which compiling asks for next: one walk of the program instead of two.
        """
        digest, facts = _program_digest(self)
        if facts is not None:
            self.__dict__.setdefault("expr_facts", facts)  # (as cached_property stores it)
        return digest

    @property
    def invocations_per_workgroup(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z

    def buffer(self, name: str) -> BufferDecl:
        """The declaration of buffer `name` (KeyError if none)."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    @property
    def inputs(self) -> tuple[BufferDecl, ...]:
        """Read-only buffers, in declaration order (the `inputs` of a resident dispatch)."""
        return tuple(b for b in self.buffers if b.access == "read")

    @property
    def outputs(self) -> tuple[BufferDecl, ...]:
        """Writable buffers (write, read_write), in declaration order."""
        return tuple(b for b in self.buffers if b.access != "read")

    @property
    def workgroup_bytes(self) -> int:
        return sum(a.count * a.ty.byte_size for a in self.workgroup_arrays)

    @cached_property
    def expr_facts(self) -> ExprFacts:
        """The scalar types and subgroup use of the body, found in one walk (vyre.ir.analysis
        types_used / uses_subgroups read them from here)."""
        return _expr_facts(self)

    @cached_property
    def debug_statements(self) -> bool:
        """Whether the body has a Print or Assert (vyre.print / vyre.assert_): a dispatch
        then runs the Program's instrumented twin (vyre.debug). Cached: dispatch paths ask."""
        classes = self.expr_facts.classes
        return Print in classes or Assert in classes

    @cached_property
    def required_features(self) -> frozenset[str]:
        return _required_features(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Program:
        """A copy (with `update` applied); derived data is recomputed, never carried over.

        pydantic copies `__dict__`, where cached_property keeps its values: without this a
        changed copy would keep the original's content hash (a wrong compile-cache key).
        The copy is not re-validated by pydantic; vyre's validator checks it before use.
        """
        copy = super().model_copy(update=update, deep=deep)
        for key in _DERIVED:
            copy.__dict__.pop(key, None)
        return copy

    def __hash__(self) -> int:
        return hash(self.content_hash)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Program) and other.content_hash == self.content_hash


# ---------------------------------------------------------------- derived above the nodes

# What Program derives with the modules above this one: its expression facts and features
# (vyre.ir.analysis) and, for a clean error, validation (vyre.ir.validate). They import this
# module, so it never imports them (nodes are the bottom of the IR's layering):
# vyre/ir/__init__.py installs them with `install_derivations` once it has imported them.
# Python runs that __init__ before any module of the package, so they are in place before
# any Program asks.


def _not_installed(program: Program) -> Any:
    raise RuntimeError(f"program {program.name!r}: vyre.ir's analysis is not installed "
                       "(vyre/ir/__init__.py installs it)")


_expr_facts: Callable[[Program], ExprFacts] = _not_installed
_required_features: Callable[[Program], frozenset[str]] = _not_installed
_validate: Callable[[Program], None] = _not_installed


def install_derivations(*, expr_facts: Callable[[Program], ExprFacts],
                        required_features: Callable[[Program], frozenset[str]],
                        validate: Callable[[Program], None]) -> None:
    """Give Program the functions of vyre.ir.analysis and vyre.ir.validate it derives its
    cached `expr_facts` and `required_features` with (and validates with, to name a node
    that nests too deeply to serialise). Called once, by vyre/ir/__init__.py."""
    global _expr_facts, _required_features, _validate
    _expr_facts, _required_features, _validate = expr_facts, required_features, validate


# ---------------------------------------------------------------- unvalidated copies


def copied(node: NodeT, update: Mapping[str, Any]) -> NodeT:
    """`node.model_copy(update=update)`: the lowering rebuilds a node over new operands with
    it; like model_copy it does not validate `update` (tests/test_ir_construction.py shows
    such a node compares, hashes and serialises like a validated one). By
    vyre.ir.construct: pydantic's copy without its per-call lookups."""
    return copy_with(node, update)


def made(cls: type[NodeT], **values: Any) -> NodeT:
    """`cls(**values)` without pydantic's validation (`model_construct`, pydantic's own API
    for it), for the lowering's hot paths. Only for a class without validators of its own
    (not Const, not Program) and values that already have their fields' types (nodes,
    tuples of nodes, ScalarType, str, int, None), which validation would pass through
    unchanged; tests/test_ir_construction.py holds such a node equal to the validated one.
    By vyre.ir.construct: the same object, without pydantic's per-call lookups."""
    return construct(cls, values)



def _program_digest(program: Program) -> tuple[str, ExprFacts | None]:
    """dag_digest of `program` and, found on the way (every node is visited), its
    ExprFacts: the `ty` of every node that has one (declarations, For, every expression)
    and whether a Subgroup or a subgroup builtin is among them; None past the recursion
    bound (the iterative digest does not look)."""
    tys: set[Any] = set()
    classes: set[type] = set()
    try:
        digest, subgroups = _dag_digest_recursive(program, tys, classes)
    except (_TooDeep, RecursionError):
        return _dag_digest_iterative(program), None
    return digest, ExprFacts(frozenset(tys), subgroups, frozenset(classes))



def check_tree_size(program: Program) -> None:
    """InvalidProgram if `program`'s tree exceeds the validator's MAX_NODES: what may be
    serialised node by node (pydantic's dump, the wire format) is bounded by it."""
    n = tree_size(program, MAX_NODES)
    if n > MAX_NODES:
        raise InvalidProgram(
            f"program {program.name!r} has more than MAX_NODES={MAX_NODES} nodes (a "
            "subexpression used in several places counts once per use), so it cannot be "
            "serialised; keep shared values in a let instead of repeating the expression"
        )


for _model in (Load, Unary, Binary, Call, Select, Cast, Bitcast, Native, Table, Invoke,
               Function, Subgroup, RawLoad, Guarded, If, For, While, Atomic, Let, Assign, Store,
               RawStore, RawAtomic, Print, Assert, Program):
    _model.model_rebuild()

describe_nodes(
    {**{leaf: _leaf_getter(leaf) for leaf in (
        Var, Param, Builtin, Length, Break, Continue, Return, Barrier, BufferDecl, ParamDecl,
        WorkgroupArray)},
     Const: _const_key},  # (only if Const has just these fields: checked here)
    Subgroup, Builtin, SUBGROUP_BUILTINS)
assert _field_names(Const) == ("kind", "ty", "value")

EXPR_TYPES = (Const, Var, Param, Builtin, Load, Length, Unary, Binary, Call, Select, Cast, Bitcast,
              Native, Table, Invoke, Subgroup, RawLoad, Guarded)
STMT_TYPES = (Let, Assign, Store, If, For, While, Break, Continue, Return, Barrier, Atomic,
              Print, Assert, RawStore, RawAtomic)
# the debug statements (vyre.print / vyre.assert_): a backend never sees them, vyre.debug
# rewrites them into stores to a log buffer before a dispatch binds the program
DEBUG_STMTS = (Print, Assert)
# the lowered core's own nodes (vyre.lower): never in a user Program
CORE_ONLY = (Native, Table, Invoke, RawLoad, Guarded, RawStore, RawAtomic)
ExprNode = (Const | Var | Param | Builtin | Load | Length | Unary | Binary | Call | Select | Cast
            | Bitcast | Native | Table | Invoke | Subgroup | RawLoad | Guarded)
StmtNode = (Let | Assign | Store | If | For | While | Break | Continue | Return | Barrier | Atomic
            | Print | Assert | RawStore | RawAtomic)
