"""Random control-flow programs: the vectorised, masked reference interpreter against a
tiny scalar interpreter written here (one invocation at a time, plain Python ints).

The programs use i32 locals, if/else, for loops with break/continue, bounded while loops,
return, loads (some out of bounds) and stores into each invocation's own slots, so their
result is deterministic and independent of scheduling.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import numpy as np
import pytest

from vyre import DispatchConfig
from vyre.backends.reference import PROVIDER, ReferenceBackend
from vyre.ir import nodes as N
from vyre.ir.types import ScalarType

I32, U32, BOOL = ScalarType.I32, ScalarType.U32, ScalarType.BOOL
SLOTS = 4
WG = 8
GROUPS = 3
IN_LEN = 20
INT_OPS = ["add", "sub", "mul", "div", "rem", "and", "or", "xor", "min", "max", "shl", "shr"]
CMP_OPS = ["eq", "ne", "lt", "le", "gt", "ge"]


def wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


# ------------------------------------------------------------------ generator


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def gid(self) -> N.ExprNode:
        return N.Bitcast(a=N.Builtin(name="global_id"), ty=I32)

    def expr(self, scope: list[str], depth: int = 0) -> N.ExprNode:
        r = self.r
        choice = r.random()
        if depth > 2 or choice < 0.3:
            pick = r.random()
            if scope and pick < 0.5:
                return N.Var(name=r.choice(scope), ty=I32)
            if pick < 0.7:
                return self.gid()
            return N.Const(ty=I32, value=r.choice([0, 1, 2, 3, -1, 7, -8, 2**31 - 1, -(2**31)]))
        if choice < 0.4:
            idx = N.Bitcast(a=self.expr(scope, depth + 1), ty=U32)
            return N.Load(buffer="inp", index=idx, ty=I32)
        if choice < 0.5:
            return N.Select(cond=self.cond(scope, depth + 1), a=self.expr(scope, depth + 1),
                            b=self.expr(scope, depth + 1), ty=I32)
        op = r.choice(INT_OPS)
        a = self.expr(scope, depth + 1)
        b = self.expr(scope, depth + 1)
        if op in ("shl", "shr"):
            b = N.Bitcast(a=b, ty=U32)
        return N.Binary(op=op, a=a, b=b, ty=I32)  # type: ignore[arg-type]

    def cond(self, scope: list[str], depth: int = 0) -> N.ExprNode:
        op = self.r.choice(CMP_OPS)
        return N.Binary(op=op, a=self.expr(scope, depth + 1),  # type: ignore[arg-type]
                        b=self.expr(scope, depth + 1), ty=BOOL)

    def block(self, scope: list[str], assignable: list[str], depth: int, in_loop: bool,
              ) -> tuple[N.StmtNode, ...]:
        r = self.r
        scope = list(scope)
        assignable = list(assignable)
        out: list[N.StmtNode] = []
        for _ in range(r.randint(1, 4)):
            k = r.random()
            if k < 0.25:
                name = self.fresh("v")
                out.append(N.Let(name=name, value=self.expr(scope)))
                scope.append(name)
                assignable.append(name)
            elif k < 0.4 and assignable:
                out.append(N.Assign(name=r.choice(assignable), value=self.expr(scope)))
            elif k < 0.55:
                slot = r.randint(0, SLOTS)  # slot SLOTS is past this invocation's range...
                base = N.Binary(op="mul", a=N.Builtin(name="global_id"),
                                b=N.Const(ty=U32, value=SLOTS), ty=U32)
                idx = N.Binary(op="add", a=base, b=N.Const(ty=U32, value=slot), ty=U32)
                if slot == SLOTS:  # ...so make it truly out of bounds
                    idx = N.Binary(op="add", a=idx, b=N.Const(ty=U32, value=10**6), ty=U32)
                out.append(N.Store(buffer="out", index=idx, value=self.expr(scope)))
            elif k < 0.67 and depth < 3:
                out.append(N.If(cond=self.cond(scope),
                                then=self.block(scope, assignable, depth + 1, in_loop),
                                orelse=self.block(scope, assignable, depth + 1, in_loop)
                                if r.random() < 0.5 else ()))
            elif k < 0.77 and depth < 3:
                var = self.fresh("i")
                start = N.Const(ty=I32, value=r.randint(-3, 3))
                end = N.Binary(op="rem", a=self.expr(scope), b=N.Const(ty=I32, value=7), ty=I32)
                out.append(N.For(var=var, ty=I32, start=start, end=end, step=r.randint(1, 3),
                                 body=self.block([*scope, var], assignable, depth + 1, True)))
            elif k < 0.85 and depth < 3:
                c = self.fresh("c")
                out.append(N.Let(name=c, value=N.Const(ty=I32, value=0)))
                limit = N.Const(ty=I32, value=r.randint(0, 5))
                inc = N.Assign(name=c, value=N.Binary(op="add", a=N.Var(name=c, ty=I32),
                                                      b=N.Const(ty=I32, value=1), ty=I32))
                body = (inc, *self.block([*scope, c], assignable, depth + 1, True))
                out.append(N.While(cond=N.Binary(op="lt", a=N.Var(name=c, ty=I32), b=limit,
                                                 ty=BOOL), body=body))
                scope.append(c)
            elif k < 0.9 and in_loop:
                out.append(N.If(cond=self.cond(scope), then=(r.choice([N.Break(), N.Continue()]),)))
            elif k < 0.93:
                out.append(N.If(cond=self.cond(scope), then=(N.Return(),)))
        return tuple(out)

    def program(self) -> N.Program:
        return N.Program(
            name="fuzz",
            workgroup_size=(WG, 1, 1),
            buffers=(N.BufferDecl(name="inp", ty=I32),
                     N.BufferDecl(name="out", ty=I32, access="read_write")),
            body=self.block([], [], 0, False),
        )


# ------------------------------------------------------------------ scalar interpreter


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    pass


def c_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return wrap32(q if (a < 0) == (b < 0) else -q)


def c_rem(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return wrap32(a - b * q)


class Scalar:
    def __init__(self, gid: int, inp: list[int], out: list[int]) -> None:
        self.gid = gid
        self.inp = inp
        self.out = out
        self.env: dict[str, int] = {}

    def ev(self, e: Any) -> Any:
        if isinstance(e, N.Const):
            return e.value
        if isinstance(e, N.Var):
            return self.env[e.name]
        if isinstance(e, N.Builtin):
            return self.gid
        if isinstance(e, N.Bitcast):
            v = self.ev(e.a)
            return v & 0xFFFFFFFF if e.ty is U32 else wrap32(v)
        if isinstance(e, N.Load):
            i = self.ev(e.index)
            return self.inp[i] if i < len(self.inp) else 0
        if isinstance(e, N.Select):
            c, a, b = self.ev(e.cond), self.ev(e.a), self.ev(e.b)
            return a if c else b
        assert isinstance(e, N.Binary)
        a, b = self.ev(e.a), self.ev(e.b)
        op = e.op
        if op in CMP_OPS:
            return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                    "ge": a >= b}[op]
        if e.ty is U32:
            return (a + b if op == "add" else a * b) & 0xFFFFFFFF
        if op == "shl":
            return wrap32(a << (b % 32))
        if op == "shr":
            return a >> (b % 32)
        return {
            "add": lambda: wrap32(a + b), "sub": lambda: wrap32(a - b),
            "mul": lambda: wrap32(a * b), "div": lambda: c_div(a, b),
            "rem": lambda: c_rem(a, b), "and": lambda: wrap32(a & b),
            "or": lambda: wrap32(a | b), "xor": lambda: wrap32(a ^ b),
            "min": lambda: min(a, b), "max": lambda: max(a, b),
        }[op]()

    def run(self, stmts: tuple[Any, ...]) -> None:
        for s in stmts:
            if isinstance(s, (N.Let, N.Assign)):
                self.env[s.name] = self.ev(s.value)
            elif isinstance(s, N.Store):
                i = self.ev(s.index)
                if i < len(self.out):
                    self.out[i] = self.ev(s.value)
            elif isinstance(s, N.If):
                self.run(s.then if self.ev(s.cond) else s.orelse)
            elif isinstance(s, N.For):
                v, end = self.ev(s.start), self.ev(s.end)
                while v < end:
                    self.env[s.var] = v
                    try:
                        self.run(s.body)
                    except _Break:
                        break
                    except _Continue:
                        pass
                    v += s.step
            elif isinstance(s, N.While):
                while self.ev(s.cond):
                    try:
                        self.run(s.body)
                    except _Break:
                        break
                    except _Continue:
                        pass
            elif isinstance(s, N.Break):
                raise _Break
            elif isinstance(s, N.Continue):
                raise _Continue
            elif isinstance(s, N.Return):
                raise _Return


@pytest.fixture(scope="module")
def be() -> ReferenceBackend:
    return PROVIDER.create()


@pytest.mark.parametrize("seed", range(300))
def test_random_control_flow_matches_scalar_interpreter(be: ReferenceBackend, seed: int) -> None:
    prog = Gen(seed).program()
    rng = np.random.default_rng(seed)
    inp = rng.integers(-50, 50, IN_LEN).astype(np.int32)
    n = WG * GROUPS
    init = np.full(n * SLOTS, -12345, dtype=np.int32)
    got = be.dispatch(prog, {"inp": inp, "out": init}, DispatchConfig(grid=GROUPS))["out"]
    expected = init.tolist()
    inp_l = inp.tolist()
    for gid in range(n):
        with contextlib.suppress(_Return):
            Scalar(gid, inp_l, expected).run(prog.body)
    assert got.tolist() == expected, be.source(prog)
