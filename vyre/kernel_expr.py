"""What a compiled `@vyre.kernel` body's expressions call at build time: `and` / `or` /
`not`, `a if c else b`, chained comparisons, `in` / `not in` and `min` / `max` (the base of
`vyre.kernel_flow.Flow`, which vyre/kernel_ast.py's rewritten body calls).

Each decides *when the kernel is built* what the expression is: on Python values
(build-time constants) it is plain Python (short-circuiting as Python does); on a kernel
value (anything computed from buffers, params, ids) it becomes a device expression in which
every operand is evaluated (`&`, `|`, `~`, `select`, `min_` / `max_`). Also here: the
placeholder a local holds before Python would have bound it (`Unbound`: every use of it is
an error naming the fix).

This module must never evaluate a kernel or talk to a device; it only calls the builder.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from .builder import BOOL, BufferRef, BuildError, ProgramBuilder, Value
from .builder import max_ as _max
from .builder import min_ as _min
from .builder import select as _select


class Unbound:
    """What a local holds before Python would have bound it (or after a per-invocation
    block that bound it on some paths only): any use is an error naming the fix."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<no value: {self.why}>"

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise BuildError(self.why)

    __bool__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __invert__ = _fail
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _fail
    __lshift__ = __rshift__ = __getitem__ = __setitem__ = __call__ = __iter__ = _fail
    __index__ = __float__ = __int__ = __abs__ = _fail

    def __eq__(self, other: object) -> Any:
        return self._fail()

    def __ne__(self, other: object) -> Any:
        return self._fail()

    __hash__ = None  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fail()


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge,
    "Eq": operator.eq, "NotEq": operator.ne, "Is": operator.is_, "IsNot": operator.is_not,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}


class ExpressionFlow:
    """The expressions of one compiled kernel body's build (module docstring)."""

    def __init__(self, builder: ProgramBuilder) -> None:
        self.b = builder

    def _mine(self, x: Any) -> bool:
        return isinstance(x, Value) and x._b is self.b

    def and_(self, *parts: Callable[[], Any]) -> Any:
        return self._logic(parts, "and")

    def or_(self, *parts: Callable[[], Any]) -> Any:
        return self._logic(parts, "or")

    def _logic(self, parts: tuple[Callable[[], Any], ...], op: str) -> Any:
        v = parts[0]()
        for part in parts[1:]:
            if self._mine(v):
                v = self._both(v, part(), op)
            elif (not v) if op == "and" else bool(v):
                return v
            else:
                v = part()
        return v

    def _both(self, a: Value, b: Any, op: str) -> Value:
        if isinstance(b, Unbound):
            b._fail()
        for x in (a, b):
            if (self._mine(x) and x.ty is not BOOL) or not (self._mine(x) or
                                                             isinstance(x, (bool, np.bool_))):
                what = x.ty if self._mine(x) else type(x).__name__
                raise BuildError(
                    f"`{op}` on a kernel value needs bool operands, got a {what}; compare it "
                    "(e.g. `x != 0`). On the device both sides are evaluated (a load past a "
                    "buffer's end reads 0)")
        return a & b if op == "and" else a | b

    def not_(self, v: Any) -> Any:
        if self._mine(v):
            if v.ty is not BOOL:
                raise BuildError(f"`not` on a {v.ty} kernel value: compare it instead "
                                 "(`x == 0`)")
            return ~v
        return not v

    def ifexp(self, test: Any, a: Callable[[], Any], b: Callable[[], Any]) -> Any:
        if self._mine(test):
            if test.ty is not BOOL:
                raise BuildError(f"the condition of `x if c else y` is a {test.ty} kernel "
                                 "value; compare it (e.g. `c != 0`)")
            return _select(test, a(), b())  # both sides are evaluated on the device
        return a() if test else b()

    def compare(self, parts: tuple[Callable[[], Any], ...], ops: tuple[str, ...],
                text: str | None) -> Any:
        """A chained comparison `a < b < c`: Python's `and` of each pair, each operand
        evaluated once. `text`: the source where a middle operand is `x & y` / `x | y`."""
        left = parts[0]()
        acc: Any = None
        for op, part in zip(ops, parts[1:]):
            right = part()
            r = self._contains(left, right, op) if op in ("In", "NotIn") else (
                _COMPARE[op](left, right))
            if self._mine(r) and text is not None:
                raise BuildError(
                    f"`{text}` is the chained comparison it reads as in Python (& and | "
                    "bind tighter than comparisons: `i < n & j < n` means `i < (n & j) < n`); "
                    "parenthesise each comparison, `(i < n) & (j < n)`, or write `i < n and "
                    "j < n`")
            if self._mine(r):
                acc = r if acc is None else self._both(acc, r, "and")
            elif not r:
                return False
            left = right
        return True if acc is None else acc

    def _contains(self, item: Any, box: Any, op: str) -> Any:
        """`v in (a, b, c)` with a kernel value on either side: `v == a or v == b or ...`
        on the device (`not in`: `v != a and ...`); Python's `in` on Python values."""
        if isinstance(box, BufferRef):
            box.__contains__(item)  # (its error: search on the device instead)
        listed = isinstance(box, (tuple, list, set, frozenset))
        if not (self._mine(item) or (listed and any(self._mine(x) for x in box))):
            return _COMPARE[op](item, box)
        word = "in" if op == "In" else "not in"
        if not listed:
            bounds = (" (a range: write its bounds, `lo <= v < hi`)"
                      if isinstance(box, builtins.range) else "")
            raise BuildError(
                f"`v {word} ...` on a kernel value compares it with each value written in "
                f"the kernel: the right side must be a tuple, list or set (`v {word} (1, 2, "
                f"3)`), got a {type(box).__name__}{bounds}")
        acc: Any = None
        for x in box:
            r = item == x if op == "In" else item != x
            if not self._mine(r):  # two Python values: decided now
                if bool(r) == (op == "In"):
                    return bool(r)
                continue
            acc = r if acc is None else (acc | r if op == "In" else acc & r)
        return op == "NotIn" if acc is None else acc

    def minmax(self, fn: Any, *args: Any) -> Any:
        if fn in (builtins.min, builtins.max) and len(args) >= 2 and any(
                self._mine(a) for a in args):
            pick = _min if fn is builtins.min else _max
            v = args[0]
            for a in args[1:]:
                v = pick(v, a)
            return v
        return fn(*args)
