"""The packed 8-bit dot products `dot4_i8` / `dot4_u8` (docs/IR.md, Calls): acc + the sum
of the four byte products, wrapping in 32 bits as CUDA's `__dp4a` and WGSL's
`dot4I8Packed` / `dot4U8Packed` do, on every backend through `@vyre.kernel`; the builder's
and the validator's type errors; the conformance case checking the reference against
Python ints; the fuzzer drawing them; and the CUDA source compiling with NVRTC."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

import vyre
from vyre import Buffer, Output, i32, u32
from vyre.backend import BaseBackend
from vyre.backends.reference import numeric
from vyre.builder import BuildError, ProgramBuilder
from vyre.ir import nodes as N
from vyre.ir.analysis import walk_all_exprs
from vyre.tools import fuzz
from vyre.tools.conformance import CASES, check_case


def _python_dot4(a: int, b: int, acc: int, signed: bool) -> int:
    """The definition, byte by byte in Python ints, wrapped to 32 bits (as u32 bits)."""
    total = acc
    for i in range(4):
        x, y = (a >> 8 * i) & 0xFF, (b >> 8 * i) & 0xFF
        if signed:
            x, y = (x ^ 0x80) - 0x80, (y ^ 0x80) - 0x80
        total += x * y
    return total & 0xFFFFFFFF


@vyre.kernel(workgroup_size=64)
def _dots(a: Buffer[u32], b: Buffer[u32], c: Buffer[i32], s: Output[i32],
          u: Output[u32], s0: Output[i32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < a.length()):
        s[i] = vyre.dot4_i8(a[i], b[i], c[i])
        u[i] = vyre.dot4_u8(a[i], b[i], c[i].bitcast(u32))
        s0[i] = vyre.dot4_i8(a[i], b[i])  # acc defaults to 0


def test_dot4_wraps_on_every_backend(backend: BaseBackend) -> None:
    """The wrap edges: four (-128)^2 products on INT_MAX wrap negative, four 127 * -128 on
    INT_MIN wrap positive, 0xFF bytes as -1 (signed) and 255 (unsigned), one byte lane at
    a time; then random words."""
    edges = [(0x80808080, 0x80808080, 2**31 - 1), (0x7F7F7F7F, 0x80808080, -(2**31)),
             (0xFFFFFFFF, 0xFFFFFFFF, -1), (0x000000FF, 0x00000080, 0),
             (0x0000FF00, 0x00008000, 0), (0x00FF0000, 0x00800000, 0),
             (0xFF000000, 0x80000000, 0), (0x807F01FF, 0x7F80FF01, 12345)]
    rng = np.random.default_rng(5)
    n = 300
    a = np.concatenate([[e[0] for e in edges],
                        rng.integers(0, 2**32, n, dtype=np.uint64)]).astype(np.uint32)
    b = np.concatenate([[e[1] for e in edges],
                        rng.integers(0, 2**32, n, dtype=np.uint64)]).astype(np.uint32)
    c = np.concatenate([[e[2] for e in edges],
                        rng.integers(-(2**31), 2**31, n)]).astype(np.int32)
    m = len(a)
    out = _dots.launch(backend, m, a, b, c, s=np.zeros(m, np.int32), u=np.zeros(m, np.uint32),
                       s0=np.zeros(m, np.int32))
    want_s = [_python_dot4(int(x), int(y), int(z), True) for x, y, z in zip(a, b, c)]
    want_u = [_python_dot4(int(x), int(y), int(z) & 0xFFFFFFFF, False)
              for x, y, z in zip(a, b, c)]
    want_0 = [_python_dot4(int(x), int(y), 0, True) for x, y in zip(a, b)]
    assert out["s"].view(np.uint32).tolist() == want_s
    assert out["u"].tolist() == want_u
    assert out["s0"].view(np.uint32).tolist() == want_0
    assert out["s"][0] == -(2**31) + 65535  # INT_MAX + 65536 wrapped
    assert out["s"][1] == 2**31 - 65024  # INT_MIN - 65024 wrapped
    assert out["u"][2] == (4 * 255 * 255 - 1) & 0xFFFFFFFF


def test_builder_refuses_other_operand_types() -> None:
    k = ProgramBuilder("bad_dot", workgroup_size=64)
    x = k.buffer("x", i32)
    f = k.buffer("f", vyre.f32)
    with pytest.raises(BuildError, match=r"dot4_i8 takes \(u32, u32, i32\), got \(i32, i32, i32\)"
                                         r".*bitcast\(u32\)"):
        vyre.dot4_i8(x[0], x[1])
    with pytest.raises(BuildError, match=r"dot4_u8 takes \(u32, u32, u32\).*f32"):
        vyre.dot4_u8(x[0].bitcast(u32), x[1].bitcast(u32), f[0])
    with pytest.raises(BuildError, match="at least one argument must be a kernel value"):
        vyre.dot4_i8(1, 2)


def test_validator_checks_the_fixed_types() -> None:
    w = N.Const(ty=u32, value=7)
    prog = N.Program(name="p", buffers=(N.BufferDecl(name="o", ty=i32, access="write"),),
                     body=(N.Store(buffer="o", index=N.Const(ty=u32, value=0),
                                   value=N.Call(fn="dot4_i8", args=(w, w, w), ty=i32)),))
    with pytest.raises(vyre.InvalidProgram, match=r"dot4_i8 arguments are \['u32', 'u32', 'u32'\];"
                                                  r" it takes \['u32', 'u32', 'i32'\]"):
        vyre.validate(prog)
    acc = N.Const(ty=i32, value=0)
    wrong_ty = prog.model_copy(update={"body": (N.Store(
        buffer="o", index=N.Const(ty=u32, value=0),
        value=N.Call(fn="dot4_i8", args=(w, w, acc), ty=u32)),)})
    with pytest.raises(vyre.InvalidProgram, match="call dot4_i8 has ty u32 but"):
        vyre.validate(wrong_ty)


def test_conformance_case_catches_a_wrong_reference(reference: BaseBackend,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ir_dot4 compares the reference with Python ints: a reference that saturates instead
    of wrapping fails it."""
    check_case(CASES["ir_dot4"], reference, reference)
    right = numeric.dot4

    def saturating(a: Any, b: Any, acc: Any, signed: bool) -> Any:
        wide = right(a, b, np.zeros_like(acc), signed).astype(np.int64) + np.asarray(acc, np.int64)
        lo, hi = (-(2**31), 2**31 - 1) if signed else (0, 2**32 - 1)
        return np.clip(wide, lo, hi).astype(np.int32 if signed else np.uint32)

    monkeypatch.setattr(numeric, "dot4", saturating)
    with pytest.raises(AssertionError, match=r"against docs/IR\.md"):
        check_case(CASES["ir_dot4"], reference, reference)


def _has_dot4(program: N.Program) -> bool:
    return any(isinstance(e, N.Call) and e.fn in ("dot4_i8", "dot4_u8")
               for e in walk_all_exprs(program))


def test_the_operator_sweep_runs_dot4(reference: BaseBackend) -> None:
    seen: list[bool] = []

    @fuzz.fuzz_settings(max_examples=3)
    @given(fuzz.operator_cases(fuzz.options_for([reference])))
    def one(case: fuzz.FuzzCase) -> None:
        seen.append(_has_dot4(case.program))

    one()
    assert any(seen)


def test_nvrtc_compiles_dp4a() -> None:
    from vyre.backends.cuda import compile_source
    from vyre.backends.cuda.render import generate

    src = generate(_dots.program).source
    assert "__dp4a((int)(" in src and "__dp4a((unsigned)(" in src
    assert compile_source(src, "sm_90")
