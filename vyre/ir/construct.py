"""Unvalidated construction and copy of pydantic models, without pydantic's per-call work.

The lowering builds a few nodes per statement of every compiled Program with
`model_construct` / `model_copy` (vyre.ir.nodes.made / copied): pydantic's versions
look up aliases, defaults and the model config field by field on every call (about
2.6 us a node; this module's, 0.8 us). Here that is decided once per class, into a
plan: the fields in order with their defaults. A class is planned only when
`model_construct` is known to do nothing but fill `__dict__` (in field order),
`__pydantic_fields_set__` and empty extra / private slots: no aliases, no default
factories, no post-init, no root model, extra not allowed, immutable defaults (which
pydantic hands out uncopied too). And the first object built per class is built both ways
and compared; any difference (a pydantic release that stores something more) and the
class falls back to pydantic's own call for good. Values outside a plan (an unknown or
missing field) go to pydantic as well. This module must never validate, and never know a
node class.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_setattr = object.__setattr__
_REQUIRED = object()  # a field without a default
_UNPLANNED = object()
# per class: its fields' (name, default or _REQUIRED) in order, or None (pydantic's calls)
_PLANS: dict[type, tuple[tuple[str, Any], ...] | None] = {}
_IMMUTABLE = (str, int, float, bool, bytes, type(None), enum.Enum)


def _plan(cls: type[BaseModel]) -> tuple[tuple[str, Any], ...] | None:
    """The fields of `cls` with their defaults, or None when model_construct may do more
    than fill them (see the module docstring)."""
    try:
        if (cls.model_config.get("extra") == "allow" or cls.__pydantic_post_init__
                or cls.__pydantic_root_model__ or cls.__private_attributes__):
            return None
        out: list[tuple[str, Any]] = []
        for name, f in cls.__pydantic_fields__.items():
            if f.alias is not None or f.validation_alias is not None or f.default_factory:
                return None
            if f.is_required():
                out.append((name, _REQUIRED))
            elif isinstance(f.default, _IMMUTABLE) or f.default == ():
                out.append((name, f.default))
            else:
                return None
        return tuple(out)
    except Exception:  # (pydantic's internals moved: its own calls then)
        return None


def _state(m: BaseModel) -> tuple[Any, ...]:
    """What model_construct sets on `m`, to compare one build with pydantic's."""
    return (list(vars(m).items()), m.__pydantic_fields_set__,
            getattr(m, "__pydantic_extra__", _UNPLANNED),
            getattr(m, "__pydantic_private__", _UNPLANNED))


def _fill(cls: type[M], plan: tuple[tuple[str, Any], ...], values: dict[str, Any]) -> M | None:
    """A `cls` of `values` by `plan`, or None when `values` is not exactly plan fields with
    every required one."""
    d: dict[str, Any] = {}
    given = 0
    for name, default in plan:
        if name in values:
            d[name] = values[name]
            given += 1
        elif default is _REQUIRED:
            return None
        else:
            d[name] = default
    if given != len(values):
        return None  # (a key that is no field)
    m = cls.__new__(cls)
    _setattr(m, "__dict__", d)
    _setattr(m, "__pydantic_fields_set__", set(values))
    _setattr(m, "__pydantic_extra__", None)
    _setattr(m, "__pydantic_private__", None)
    return m


def _planned(cls: type[BaseModel]) -> tuple[tuple[str, Any], ...] | None:
    plan = _PLANS.get(cls, _UNPLANNED)
    if plan is _UNPLANNED:
        plan = _PLANS[cls] = _plan(cls)
    return plan  # type: ignore[return-value]


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """`cls.model_construct(**values)` (the same object, made faster where planned)."""
    plan = _planned(cls)
    if plan is not None:
        m = _fill(cls, plan, values)
        if m is not None:
            if cls in _CONSTRUCT_CHECKED:
                return m
            _CONSTRUCT_CHECKED.add(cls)  # the first one both ways: any difference, and
            theirs = cls.model_construct(**values)  # pydantic's calls for good
            if _state(m) == _state(theirs):
                return m
            _PLANS[cls] = None
            return theirs
    return cls.model_construct(**values)


def _copy(node: M, update: Mapping[str, Any]) -> M:
    cls = type(node)
    m = cls.__new__(cls)
    d = dict(node.__dict__)
    d.update(update)
    fields_set = set(node.__pydantic_fields_set__)
    fields_set.update(update)
    _setattr(m, "__dict__", d)
    _setattr(m, "__pydantic_extra__", None)
    _setattr(m, "__pydantic_fields_set__", fields_set)
    _setattr(m, "__pydantic_private__", None)
    return m


def copy_with(node: M, update: Mapping[str, Any]) -> M:
    """`node.model_copy(update=update)` (the same object, made faster where planned):
    `__dict__` copied and updated and the update's names added to the fields set, as
    pydantic's shallow copy does; pydantic's own call for a class that copies its own way
    (Program: its derived values), a node with extra or private values, or an update
    naming something that is no field."""
    cls = type(node)
    plan = _planned(cls)
    fields = cls.__pydantic_fields__
    if (plan is None or cls.model_copy is not BaseModel.model_copy
            or cls.__copy__ is not BaseModel.__copy__
            or getattr(node, "__pydantic_extra__", None) is not None
            or getattr(node, "__pydantic_private__", None) is not None
            or not all(k in fields for k in update)):
        return node.model_copy(update=update)
    m = _copy(node, update)
    if cls in _COPY_CHECKED:
        return m
    _COPY_CHECKED.add(cls)  # (as construct: the first copy both ways)
    theirs = node.model_copy(update=update)
    if _state(m) == _state(theirs):
        return m
    _PLANS[cls] = None
    return theirs


# the classes whose first construct / copy was compared with pydantic's (and agreed)
_CONSTRUCT_CHECKED: set[type] = set()
_COPY_CHECKED: set[type] = set()
