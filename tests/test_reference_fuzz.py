"""Random integer programs from the one generator (vyre.tools.fuzz.cases, i32/u32 without
atomics or workgroup memory): the vectorised, masked reference interpreter against a tiny
scalar interpreter written here (one invocation at a time, plain Python ints). The
generator's operator sweep (vyre.tools.fuzz.operator_cases) applies every operator to every
pair of edge values in each draw; a planted wrong xor, max or i32 shr in the reference is
caught by every draw (test_planted_operator_bugs_are_caught_every_time).

The programs use locals, if/else, for loops with break/continue, bounded while loops,
return, loads (some out of bounds) and stores into each invocation's own slots, so their
result is deterministic and independent of scheduling, and the scalar interpreter may run
the invocations one after another. It must never import the reference's own evaluation code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given

from vyre.backend import BaseBackend
from vyre.backends.reference import numeric
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType
from vyre.tools import fuzz

I32, U32, BOOL = ScalarType.I32, ScalarType.U32, ScalarType.BOOL
OPTIONS = fuzz.GenOptions(types=frozenset({I32, U32}), workgroup_memory=False, atomics=False,
                          long_loops=0.0,  # Python ints: 65,536 iterations take too long
                          workgroup_sizes=tuple(w for w in fuzz.WORKGROUP_SIZES
                                                if w[0] * w[1] * w[2] <= 64))


def wrap(v: int, ty: ScalarType) -> int:
    """`v` in `ty`: 32-bit and the narrow integer types (the fuzzer's byte and halfword
    loads and stores: casts to them keep the low bits, docs/IR.md)."""
    if ty is BOOL:
        return int(bool(v))
    bits = 8 * ty.byte_size
    v &= (1 << bits) - 1
    return v - (1 << bits) if ty.is_signed and v >= 1 << (bits - 1) else v


def c_div(a: int, b: int, ty: ScalarType) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap(q if (a < 0) == (b < 0) else -q, ty)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    pass


class Scalar:
    """One invocation of a Program, statement by statement, on Python ints."""

    def __init__(self, program: N.Program, mem: dict[str, list[int]], params: dict[str, int],
                 wid: tuple[int, ...], lid: tuple[int, ...], grid: tuple[int, ...]) -> None:
        self.p = program
        self.mem = mem
        self.params = params
        ws = program.workgroup_size
        self.builtins = {
            "global_id": [wid[a] * ws[a] + lid[a] for a in range(3)],
            "local_id": list(lid), "workgroup_id": list(wid), "num_workgroups": list(grid),
            "local_index": [lid[0] + lid[1] * ws[0] + lid[2] * ws[0] * ws[1]] * 3,
        }
        self.env: dict[str, int] = {}

    def ev(self, e: Any) -> int:
        if isinstance(e, N.Const):
            return int(e.value)
        if isinstance(e, N.Var):
            return self.env[e.name]
        if isinstance(e, N.Param):
            return self.params[e.name]
        if isinstance(e, N.Builtin):
            return self.builtins[e.name][e.axis]
        if isinstance(e, N.Length):
            return len(self.mem[e.buffer])
        if isinstance(e, N.Load):
            i, buf = self.ev(e.index), self.mem[e.buffer]
            return buf[i] if i < len(buf) else 0
        if isinstance(e, (N.Cast, N.Bitcast)):
            v = self.ev(e.a)
            return int(v != 0) if e.ty is BOOL else wrap(v, e.ty)
        if isinstance(e, N.Select):
            c, a, b = self.ev(e.cond), self.ev(e.a), self.ev(e.b)
            return a if c else b
        if isinstance(e, N.Unary):
            v = self.ev(e.a)
            return wrap({"neg": -v, "bit_not": ~v, "not": int(not v)}[e.op], e.ty)
        if isinstance(e, N.Call):
            args = [self.ev(a) for a in e.args]
            if e.fn == "abs":
                return wrap(abs(args[0]), e.ty)
            if e.fn in ("dot4_i8", "dot4_u8"):  # acc + the four byte products, wrapping
                a, b, acc = args
                signed = e.fn == "dot4_i8"

                def byte(w: int, i: int) -> int:
                    v = (w >> (8 * i)) & 0xFF
                    return v - 256 if signed and v >= 128 else v
                return wrap(acc + sum(byte(a, i) * byte(b, i) for i in range(4)), e.ty)
            assert e.fn == "clamp", e.fn
            return min(max(args[0], args[1]), args[2])
        assert isinstance(e, N.Binary), type(e)
        a, b, op, ty = self.ev(e.a), self.ev(e.b), e.op, e.ty
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            return int({"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                        "ge": a >= b}[op])
        if op in ("logical_and", "logical_or"):
            return int(bool(a) and bool(b)) if op == "logical_and" else int(bool(a) or bool(b))
        if op == "shl":
            return wrap(a << (b % 32), ty)
        if op == "shr":
            return wrap(a >> (b % 32), ty)  # Python's >> is arithmetic: i32 signed, u32 >= 0
        if op == "div":
            return c_div(a, b, ty)
        if op == "rem":  # the dividend's sign; INT_MIN % -1 = 0 through the wrapped quotient
            return wrap(a - b * c_div(a, b, ty), ty) if b else 0
        return wrap({"add": a + b, "sub": a - b, "mul": a * b, "and": a & b, "or": a | b,
                     "xor": a ^ b, "min": min(a, b), "max": max(a, b)}[op], ty)

    def run(self, stmts: tuple[Any, ...]) -> None:
        for s in stmts:
            if isinstance(s, (N.Let, N.Assign)):
                self.env[s.name] = self.ev(s.value)
            elif isinstance(s, N.Store):
                i, buf = self.ev(s.index), self.mem[s.buffer]
                v = self.ev(s.value)
                if i < len(buf):
                    buf[i] = v
            elif isinstance(s, N.If):
                self.run(s.then if self.ev(s.cond) else s.orelse)
            elif isinstance(s, (N.For, N.While)):
                self.loop(s)
            elif isinstance(s, N.Break):
                raise _Break
            elif isinstance(s, N.Continue):
                raise _Continue
            elif isinstance(s, N.Return):
                raise _Return
            else:
                raise AssertionError(f"the scalar interpreter has no rule for {s!r}")

    def loop(self, s: N.For | N.While) -> None:
        v = self.ev(s.start) if isinstance(s, N.For) else 0
        end = self.ev(s.end) if isinstance(s, N.For) else 0
        while (v < end) if isinstance(s, N.For) else self.ev(s.cond):
            if isinstance(s, N.For):
                self.env[s.var] = v
            try:
                self.run(s.body)
            except _Break:
                break
            except _Continue:
                pass
            if isinstance(s, N.For):
                v += s.step  # Python ints: the variable never overflows (docs/IR.md)


def scalar_results(case: fuzz.FuzzCase) -> dict[str, list[int]]:
    p = case.program
    mem = {k: [int(x) for x in v.tolist()] for k, v in case.inputs.items()}
    params = {k: int(v) for k, v in case.params.items()}
    ws, grid = p.workgroup_size, case.grid
    for wid in np.ndindex(grid[2], grid[1], grid[0]):
        for lid in np.ndindex(ws[2], ws[1], ws[0]):
            inv = Scalar(p, mem, params, wid[::-1], lid[::-1], grid)
            with contextlib.suppress(_Return):
                inv.run(p.body)
    return {d.name: mem[d.name] for d in p.buffers if d.access != "read"}


@fuzz.fuzz_settings(max_examples=200)
@given(fuzz.cases(OPTIONS))
def test_reference_matches_scalar_interpreter(reference: BaseBackend,
                                              case: fuzz.FuzzCase) -> None:
    got = reference.dispatch(case.program, case.inputs, case.config)
    expected = scalar_results(case)
    for name, exp in expected.items():
        assert got[name].tolist() == exp, (name, reference.source(case.program))


@fuzz.fuzz_settings(max_examples=8)
@given(fuzz.operator_cases(OPTIONS))
def test_operator_sweep_matches_scalar_interpreter(reference: BaseBackend,
                                                   case: fuzz.FuzzCase) -> None:
    got = reference.dispatch(case.program, case.inputs, case.config)
    for name, exp in scalar_results(case).items():
        assert got[name].tolist() == exp, name


def _wrong_xor(op: str, a: Any, b: Any, ty: ScalarType) -> Any:
    return np.bitwise_or(a, b) if op == "xor" else None  # right unless bits overlap


def _wrong_max(op: str, a: Any, b: Any, ty: ScalarType) -> Any:
    if op != "max" or not ty.is_signed:
        return None
    u = np.dtype(ty.numpy.str.replace("i", "u"))  # compared as unsigned: wrong on mixed signs
    return np.where(np.asarray(a).view(u) >= np.asarray(b).view(u), a, b).astype(ty.numpy)


def _wrong_shr(op: str, a: Any, b: Any, ty: ScalarType) -> Any:
    if op != "shr" or ty is not I32:
        return None
    s = np.asarray(b, np.uint32) % 32  # logical instead of arithmetic: wrong when a < 0
    return (np.asarray(a).view(np.uint32) >> s).view(np.int32)


PLANTED: dict[str, Callable[[str, Any, Any, ScalarType], Any]] = {
    "xor": _wrong_xor, "max": _wrong_max, "i32_shr": _wrong_shr,
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_operator_bugs_are_caught_every_time(reference: BaseBackend, bug: str) -> None:
    """A reference with one wrong operator (planted by patching its numeric kernel)
    disagrees with the scalar interpreter on every operator-sweep draw."""
    planted = PLANTED[bug]
    right = numeric._binary
    draws: list[bool] = []

    def patched(op: str, a: Any, b: Any, ty: ScalarType, operand_ty: ScalarType) -> Any:
        wrong = planted(op, a, b, operand_ty)
        return right(op, a, b, ty, operand_ty) if wrong is None else wrong

    @fuzz.fuzz_settings(max_examples=6, use_database=False)
    @given(fuzz.operator_cases(OPTIONS))
    def one(case: fuzz.FuzzCase) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(numeric, "_binary", patched)
            got = reference.dispatch(case.program, case.inputs, case.config)
        expected = scalar_results(case)
        draws.append(any(got[n].tolist() != e for n, e in expected.items()))

    one()
    assert draws and all(draws), f"planted wrong {bug} missed in {draws.count(False)} of " \
        f"{len(draws)} operator-sweep draws"
