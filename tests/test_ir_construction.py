"""Nodes the lowering builds without validation (`made`, pydantic's `model_construct`;
`copied`, `model_copy`) are the same objects as validated ones: equal, same hash, same fields
set, same dump and wire JSON, accepted by the validator. Before, `made` wrote pydantic's
internals by hand (`__pydantic_fields_set__`), which a pydantic release could break
silently; these tests would see it."""

from __future__ import annotations

from typing import Any

import pytest

from vyre import ProgramBuilder
from vyre.ir import nodes as N
from vyre.ir.nodes import copied, made
from vyre.ir.serialize import from_json, to_json
from vyre.ir.types import ScalarType as T
from vyre.ir.validate import validate
from vyre.lower import all_traits, lower

X = N.Var(name="x", ty=T.U32)
CASES: list[tuple[type[N.Node], dict[str, Any]]] = [
    (N.Var, {"name": "x", "ty": T.U32}),
    (N.Length, {"buffer": "out"}),  # a default field left out
    (N.Binary, {"op": "lt", "a": X, "b": N.Length(buffer="out"), "ty": T.BOOL}),
    (N.Load, {"buffer": "out", "index": X, "ty": T.U32}),
    (N.If, {"cond": N.Binary(op="lt", a=X, b=X, ty=T.BOOL),
            "then": (N.Let(name="y", value=X),)}),
]


def _same(a: N.Node, b: N.Node) -> None:
    assert type(a) is type(b)
    assert a == b and hash(a) == hash(b)
    assert a.model_fields_set == b.model_fields_set
    assert a.model_dump() == b.model_dump()
    assert a.model_dump_json() == b.model_dump_json()
    assert list(vars(a)) == list(vars(b))  # the same fields, in declaration order


@pytest.mark.parametrize(("cls", "values"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_a_made_node_is_a_validated_node(cls: type[N.Node], values: dict[str, Any]) -> None:
    node = made(cls, **values)
    _same(node, cls(**values))
    assert type(node).model_validate(node.model_dump()) == node


def test_a_program_of_made_nodes_passes_the_validator() -> None:
    i = made(N.Var, name="i", ty=T.U32)
    body = (made(N.Let, name="i", value=made(N.Builtin, name="global_id")),
            made(N.If, cond=made(N.Binary, op="lt", a=i, b=made(N.Length, buffer="out"),
                                 ty=T.BOOL),
                 then=(made(N.Store, buffer="out", index=i, value=i),)))
    prog = N.Program(name="made", workgroup_size=(64, 1, 1),
                     buffers=(N.BufferDecl(name="out", ty=T.U32, access="write"),), body=body)
    validate(prog)
    assert from_json(to_json(prog)) == prog


def test_a_copied_node_is_the_validated_node_with_the_update() -> None:
    node = N.Binary(op="add", a=X, b=X, ty=T.U32)
    y = N.Var(name="y", ty=T.U32)
    _same(copied(node, {"b": y}), N.Binary(op="add", a=X, b=y, ty=T.U32))
    assert node.b == X  # the original is untouched


def _program() -> N.Program:
    k = ProgramBuilder("construction", workgroup_size=64)
    src = k.buffer("src", T.F32)
    out = k.buffer("out", T.F32, "write")
    i = k.global_linear_id()
    out[i] = src[i] * 2.0 + src[i + 1]  # unguarded: the lowering guards both loads
    return k.build()


@pytest.mark.parametrize("traits", all_traits(), ids=str)
def test_a_lowered_program_round_trips_like_a_built_one(traits: Any) -> None:
    """(A lowered Program holds names only the lowering may make, so vyre's validator,
    which checks user Programs, is not asked; pydantic's validation of every node is.)"""
    lowered = lower(_program(), traits)
    # every node rebuilt through pydantic's validation
    again = N.Program.model_validate_json(lowered.model_dump_json())
    assert again == lowered and again.model_dump() == lowered.model_dump()
    assert again.content_hash == lowered.content_hash


def test_the_fast_construction_matches_pydantic_and_falls_back_where_unplanned() -> None:
    """vyre.ir.construct: a planned node class builds and copies as pydantic does; a model
    whose construction does more (a default factory) is left to pydantic."""
    from pydantic import BaseModel, Field

    from vyre.ir import construct

    node = made(N.Binary, op="add", a=X, b=X, ty=T.U32)
    assert construct._PLANS[N.Binary] is not None
    _same(node, N.Binary.model_construct(op="add", a=X, b=X, ty=T.U32))
    _same(copied(node, {"op": "sub"}), N.Binary(op="sub", a=X, b=X, ty=T.U32))

    class Listed(BaseModel):
        items: list[int] = Field(default_factory=list)

    got = construct.construct(Listed, {})
    assert construct._PLANS[Listed] is None and got.items == [] and got.model_fields_set == set()
