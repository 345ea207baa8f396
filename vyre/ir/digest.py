"""Content digests and sizes of a graph of IR nodes (the Merkle hash behind
Program.content_hash and the tree-size bound behind MAX_NODES).

Each distinct node object is visited once (memoised by identity), so a graph that shares
subexpressions is hashed and sized in time linear in its distinct nodes. This module knows
pydantic models and field values only, no node class: vyre.ir.nodes, above it, tells it
which classes are leaves and which use subgroups (`describe_nodes`). It must never import
a node class, validate, or change a node.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from .types import ScalarType

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type[BaseModel]) -> tuple[str, ...]:
    """`cls.model_fields`' names in order, cached: pydantic 2.14 builds that mapping on every
    class attribute read (~0.6 us), and the hash walks read it twice per node."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)
    return names


# How _encode spells a value, by its type: decided once per type by the isinstance chain
# below (isinstance against pydantic's BaseModel goes through ABCMeta, ~0.1 us a call, and
# the hash asked it several times per field).
_NODE, _TUPLE, _BOOL, _INT, _FLOAT, _STR, _NONE, _OTHER = range(1, 9)
_KINDS: dict[type, int] = {}


_KIND_BY_BASE = ((BaseModel, _NODE), (tuple, _TUPLE), (bool, _BOOL), (int, _INT),
                 (float, _FLOAT), (str, _STR), (type(None), _NONE))  # in _encode's order


def _kind(t: type) -> int:
    k = _KINDS.get(t)
    if k is None:
        k = _KINDS[t] = next((kind for base, kind in _KIND_BY_BASE if issubclass(t, base)),
                             _OTHER)
    return k


def _children(node: BaseModel) -> list[BaseModel]:
    out: list[BaseModel] = []
    for name in _field_names(type(node)):
        v = getattr(node, name)
        k = _KINDS.get(type(v)) or _kind(type(v))
        if k == _NODE:
            out.append(v)
        elif k == _TUPLE:
            out.extend(x for x in v if (_KINDS.get(type(x)) or _kind(type(x))) == _NODE)
    return out


def _encode(v: Any, memo: dict[int, bytes]) -> bytes:
    k = _KINDS.get(type(v)) or _kind(type(v))
    if k == _NODE:
        return b"N" + memo[id(v)]
    if k == _TUPLE:
        return b"(" + b",".join([_encode(x, memo) for x in v]) + b")"
    if k == _BOOL:
        return b"b1" if v else b"b0"
    if k == _INT:
        return b"i" + str(v).encode()
    if k == _FLOAT:
        return b"f" + (b"nan" if v != v else v.hex().encode())
    if k == _STR:
        raw = v.encode("utf-8", "surrogatepass")
        return b"s" + str(len(raw)).encode() + b":" + raw
    if k == _NONE:
        return b"n"
    raise TypeError(f"cannot hash a {type(v).__name__} in a vyre node")


def _post_order(root: BaseModel) -> list[BaseModel]:
    """Each distinct node object under `root` once, children before parents (iterative:
    no recursion limit; linear in distinct nodes however often they are shared)."""
    seen: set[int] = set()
    out: list[BaseModel] = []
    stack: list[tuple[BaseModel, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            out.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in seen)
    return out


# per class: (class name, per field (its name, "|name=", "|name=N", its table of str
# segments), whether it has a `ty` field, the getter of its leaf digest key or None)
_Layout = tuple[bytes, tuple[tuple[str, bytes, bytes, dict[str, bytes]], ...], bool,
                "Callable[[dict[str, Any]], tuple[Any, ...]] | None"]
_HASH_LAYOUT: dict[type, _Layout] = {}
# a field's spelling "|name=" plus the encoding of a str value, by value, per class and field
# (kinds, ops, types and names recur); each table stops growing at this size
_SEGMENTS_MAX = 512
# nesting the recursive digest follows before it hands the graph to the iterative one (a
# validated Program nests at most MAX_DEPTH = 64 levels; an unvalidated one may nest deeper)
_RECURSION_MAX = 200


class _TooDeep(Exception):
    pass


# Operand-less node classes whose fields hold only str, ScalarType, int or None: their
# digest is a function of their field values alone, so it is kept by value (not by
# identity), across Programs (kernels repeat their builtins, params, lengths and
# declarations): {(class, field values): (digest, its `ty` or None, subgroup builtin)}.
# Only values whose types are all in _PLAIN_TYPES are looked up: among those, values that
# compare equal are spelled equal (a str and a ScalarType of the same text both as the
# text), so the key determines the digest (1 / True / 1.0 / -0.0 would not: never keys).
# A Const's value enters its key as its type and its spelling (_const_key): the type
# tells 1 from True from 1.0, the float spelling 0.0 from -0.0 (and every NaN is "nan",
# as the digest spells it).
_LEAF_DIGESTS: dict[tuple[Any, ...], tuple[bytes, Any, bool]] = {}
_LEAF_DIGESTS_MAX = 4096
_PLAIN_TYPES = frozenset({str, ScalarType, int, type(None), type})
_LEAF_GETTERS: dict[type, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
# the subgroup operation's node class, the builtin's and the subgroup builtins' names: a
# program digest notes whether it saw one (ExprFacts.subgroups)
_SUBGROUP_OP: type | None = None
_BUILTIN: type | None = None
_SUBGROUP_BUILTINS: frozenset[str] = frozenset()


def describe_nodes(leaf_getters: Mapping[type, Callable[[dict[str, Any]], tuple[Any, ...]]],
                   subgroup_op: type, builtin: type, subgroup_builtins: frozenset[str]) -> None:
    """What the digest knows of the node classes, told once by vyre.ir.nodes as it is
    imported (this module sits below the nodes and imports none of them): the operand-less
    classes whose digest is kept by value, with the getter of their key, and the nodes that
    make a program use subgroups. Before any node exists, so every digest sees the same."""
    global _SUBGROUP_OP, _BUILTIN, _SUBGROUP_BUILTINS
    _LEAF_GETTERS.update(leaf_getters)
    _SUBGROUP_OP, _BUILTIN, _SUBGROUP_BUILTINS = subgroup_op, builtin, subgroup_builtins


def _const_key(values: dict[str, Any]) -> tuple[Any, ...]:
    v = values["value"]
    t = type(v)
    return (values["kind"], values["ty"], t,
            ("nan" if v != v else v.hex()) if t is float else v)


def _leaf_getter(cls: type[BaseModel]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """The field values of a node of `cls` (from its __dict__), in field order."""
    names = _field_names(cls)
    if len(names) == 1:
        only = names[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*names)


def _hash_layout(cls: type[BaseModel]) -> _Layout:
    """(class name, per field: its name, "|name=", "|name=N" (a node follows) and its
    table of str segments; whether a field is `ty`; the class's leaf key getter (None: not
    a leaf, _LEAF_DIGESTS)), made once per class."""
    layout = _HASH_LAYOUT.get(cls)
    if layout is None:
        names = _field_names(cls)
        layout = _HASH_LAYOUT[cls] = (cls.__name__.encode(), tuple(
            (name, b"|" + name.encode() + b"=", b"|" + name.encode() + b"=N", {})
            for name in names), "ty" in names, _LEAF_GETTERS.get(cls))
    return layout


def dag_digest(root: BaseModel) -> str:
    """sha256 over the node graph of `root`, each distinct node object hashed once: a node's
    digest is sha256(class name, then "|field=" and the field's encoding per field)."""
    try:
        return _dag_digest_recursive(root, None)[0]
    except (_TooDeep, RecursionError):  # (a caller already deep in its own stack)
        return _dag_digest_iterative(root)


def _dag_digest_recursive(root: BaseModel, tys: set[Any] | None,
                          classes: set[type] | None = None) -> tuple[str, bool]:
    """dag_digest by recursion (the fast way; _TooDeep past _RECURSION_MAX levels), with the
    common field values (str and ScalarType, nodes) spelled inline instead of by _encode;
    with `tys`, also the value of every `ty` field into it and whether a subgroup
    operation or builtin was seen; with `classes`, the class of every node into it."""
    memo: dict[int, bytes] = {}
    sha256, kinds, layouts = hashlib.sha256, _KINDS, _HASH_LAYOUT
    scalar, sg_op, builtin, sg_builtins = ScalarType, _SUBGROUP_OP, _BUILTIN, _SUBGROUP_BUILTINS
    leaves, plain = _LEAF_DIGESTS, _PLAIN_TYPES
    subgroups = False

    def digest(node: BaseModel, depth: int) -> bytes:
        nonlocal subgroups
        if depth > _RECURSION_MAX:
            raise _TooDeep
        cls = type(node)
        if classes is not None:
            classes.add(cls)
        values = node.__dict__
        head, fields, has_ty, getter = layouts.get(cls) or _hash_layout(cls)
        key = None
        if getter is not None:  # an operand-less node: its digest may be known by value
            vals = getter(values)
            if plain.issuperset(map(type, vals)):
                key = (cls, vals)
                hit = leaves.get(key)
                if hit is not None:
                    d, ty, sg = hit
                    if tys is not None:
                        if ty is not None:
                            tys.add(ty)
                        subgroups = subgroups or sg
                    memo[id(node)] = d
                    return d
        parts = [head]
        sg = cls is sg_op or (cls is builtin and values["name"] in sg_builtins)
        if tys is not None:
            if sg:
                subgroups = True
            if has_ty:
                tys.add(values["ty"])
        for name, prefix, node_prefix, segments in fields:
            v = values[name]
            t = type(v)
            if t is str or t is scalar:
                seg = segments.get(v)
                if seg is None:
                    seg = prefix + _encode(v, memo)
                    if len(segments) < _SEGMENTS_MAX:
                        segments[v] = seg
                parts.append(seg)
            else:
                k = kinds.get(t) or _kind(t)
                if k == _NODE:
                    parts.append(node_prefix)
                    parts.append(memo.get(id(v)) or digest(v, depth + 1))
                elif k == _TUPLE:  # _encode's spelling, a node element by its digest
                    items = []
                    for x in v:
                        if (kinds.get(type(x)) or _kind(type(x))) == _NODE:
                            items.append(b"N" + (memo.get(id(x)) or digest(x, depth + 1)))
                        else:
                            items.append(_encode(x, memo))
                    parts.append(prefix)
                    parts.append(b"(" + b",".join(items) + b")")
                else:
                    parts.append(prefix)
                    parts.append(_encode(v, memo))
        d = memo[id(node)] = sha256(b"".join(parts)).digest()
        if key is not None and len(leaves) < _LEAF_DIGESTS_MAX:
            leaves[key] = (d, values.get("ty"), sg)
        return d

    return digest(root, 0).hex(), subgroups


def _dag_digest_iterative(root: BaseModel) -> str:
    """dag_digest over an explicit post-order (no recursion: any nesting depth)."""
    memo: dict[int, bytes] = {}
    sha256 = hashlib.sha256
    for node in _post_order(root):
        head, fields, _, _ = _hash_layout(type(node))
        parts = [head]
        for name, prefix, _, _ in fields:
            parts.append(prefix)
            parts.append(_encode(getattr(node, name), memo))
        memo[id(node)] = sha256(b"".join(parts)).digest()
    return memo[id(root)].hex()


def tree_size(root: BaseModel, limit: int) -> int:
    """Nodes in the tree under `root` (a shared node counted once per use), computed over
    the graph in linear time; stops counting past `limit` (returns limit + 1)."""
    memo: dict[int, int] = {}
    for node in _post_order(root):
        memo[id(node)] = min(limit + 1, 1 + sum(memo[id(c)] for c in _children(node)))
    return memo[id(root)]
