"""The builder DSL: kernels read like kernels, and misuse fails at build time with a message
naming the fix (BuildError, a subclass of InvalidProgram)."""

from __future__ import annotations

import pytest

from vyre import InvalidProgram, ProgramBuilder, f32, i32, u32
from vyre.builder import BuildError, clamp, max_, min_, select, sqrt
from vyre.ir import nodes as N
from vyre.ir import validate


def test_saxpy_in_a_handful_of_lines() -> None:
    k = ProgramBuilder("saxpy", workgroup_size=256)
    x, y = k.buffer("x", f32), k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    p = k.build()

    assert p.workgroup_size == (256, 1, 1)
    assert [(b.name, b.ty, b.access) for b in p.buffers] == [
        ("x", f32, "read"), ("y", f32, "read_write")]
    assert [(q.name, q.ty) for q in p.params] == [("a", f32)]
    (stmt,) = p.body
    assert isinstance(stmt, N.If) and stmt.orelse == ()
    assert isinstance(stmt.cond, N.Binary) and stmt.cond.op == "lt" and stmt.cond.ty is N.ScalarType.BOOL
    (store,) = stmt.then
    assert isinstance(store, N.Store) and store.buffer == "y"
    assert isinstance(store.value, N.Binary) and store.value.op == "add"
    assert store.value.ty is f32
    mul = store.value.a
    assert isinstance(mul, N.Binary) and mul.op == "mul"
    assert mul.a == N.Param(name="a", ty=f32)
    assert p.inputs[0].name == "x" and p.outputs[0].name == "y"
    validate(p)


def test_literals_take_the_other_operands_type() -> None:
    k = ProgramBuilder("lits")
    o = k.buffer("o", u32, "write")
    g = k.global_id()
    o[0] = g + 1
    o[1] = 2 * g
    p = k.build()
    first = p.body[0]
    assert isinstance(first, N.Store) and isinstance(first.value, N.Binary)
    assert first.value.b == N.Const(ty=u32, value=1)
    with pytest.raises(BuildError, match="does not fit in u32"):
        _ = g + -1
    with pytest.raises(BuildError, match="not an integer"):
        _ = g + 1.5


def test_values_of_two_builders_cannot_mix() -> None:
    k1, k2 = ProgramBuilder("one"), ProgramBuilder("two")
    a, b = k1.global_id(), k2.global_id()
    with pytest.raises(BuildError, match="another ProgramBuilder"):
        _ = a + b
    o = k1.buffer("o", u32, "write")
    with pytest.raises(BuildError, match="another ProgramBuilder"):
        o[0] = b
    with pytest.raises(BuildError, match="another ProgramBuilder"):
        select(a < 1, a, b)
    with pytest.raises(BuildError, match="another ProgramBuilder"):
        min_(a, b)
    o2 = k2.buffer("o", u32, "write")
    with pytest.raises(BuildError, match="not a buffer of program 'one'"):
        k1.store(o2, 0, a)


def test_loop_variable_used_outside_its_loop() -> None:
    k = ProgramBuilder("loop")
    o = k.buffer("o", u32, "write")
    with k.for_range(4) as i:
        o[i] = i
    with pytest.raises(BuildError, match=r"loop variable .* outside the block"):
        o[0] = i


def test_let_used_outside_its_block() -> None:
    k = ProgramBuilder("scope")
    o = k.buffer("o", u32, "write")
    with k.if_(k.global_id() < 4):
        v = k.let(k.global_id())
    with pytest.raises(BuildError, match="outside the block"):
        o[0] = v
    with pytest.raises(BuildError, match="outside the block"):
        v.set(3)


def test_store_needs_the_buffer_type() -> None:
    k = ProgramBuilder("st")
    out = k.buffer("out", u32, "write")
    x = k.buffer("x", f32)
    with pytest.raises(BuildError, match=r"cannot store a f32 into 'out' \(u32\); cast it"):
        out[0] = x[0]
    out[0] = x[0].cast(u32)
    p = k.build()
    s = p.body[0]
    assert isinstance(s, N.Store) and isinstance(s.value, N.Cast) and s.value.ty is u32


def test_no_python_truth_value() -> None:
    k = ProgramBuilder("truth")
    g = k.global_id()
    with pytest.raises(BuildError, match="no Python truth value"):
        if g < 3:
            pass
    with pytest.raises(BuildError, match="no Python truth value"):
        _ = (g < 3) and (g > 1)
    with pytest.raises(BuildError, match="Python int"):
        range(g)
    buf = k.buffer("b", u32)
    with pytest.raises(BuildError, match=r"length\(\)"):
        len(buf)


def test_else_must_follow_if() -> None:
    k = ProgramBuilder("els")
    o = k.buffer("o", u32, "write")
    with pytest.raises(BuildError, match=r"else_\(\) must directly follow"), k.else_():
        pass
    o[0] = 1
    with pytest.raises(BuildError, match="must directly follow"), k.else_():
        pass
    g = k.global_id()
    with k.if_(g < 2):
        o[g] = 1
    with k.else_():
        o[g] = 2
    with pytest.raises(BuildError, match="must directly follow"), k.else_():
        pass
    p = k.build()
    last = p.body[-1]
    assert isinstance(last, N.If) and len(last.then) == 1 and len(last.orelse) == 1


def test_other_misuse() -> None:
    k = ProgramBuilder("misc")
    x = k.buffer("x", f32)
    w = k.buffer("w", u32, "write")
    g = k.global_id()
    with pytest.raises(BuildError, match="read-only"):
        x[0] = 1.0
    with pytest.raises(BuildError, match="write-only"):
        _ = w[0]
    with pytest.raises(BuildError, match="break outside a loop"):
        k.break_()
    with pytest.raises(BuildError, match="// is integer division"):
        _ = x[0] // 2.0
    with pytest.raises(BuildError, match="// is integer division"):
        _ = 2.0 // x[0]
    with pytest.raises(BuildError, match="one width"):
        g.bitcast(N.ScalarType.I64)
    with pytest.raises(BuildError, match="needs a float"):
        sqrt(g)
    with pytest.raises(BuildError, match="already declared"):
        k.buffer("x", f32)
    with pytest.raises(BuildError, match="ASCII identifier"):
        k.buffer("bad-name", f32)
    with pytest.raises(BuildError, match="atomics need a read_write"):
        w.atomic_add(0, 1)
    with pytest.raises(BuildError, match=r"step must be a nonzero Python int.*while j < end"), \
            k.for_range(0, 4, step=0):
        pass
    with pytest.raises(BuildError, match="if condition must be bool"), k.if_(g):
        pass
    with pytest.raises(BuildError, match="1 to 3 ints"):
        ProgramBuilder("ws", workgroup_size=(4, 4, 4, 4))
    with pytest.raises(BuildError, match="count must be an int >= 1"):
        k.shared("tile", u32, 0)
    with pytest.raises(BuildError, match="fixed count"):
        k.buffer("c", u32, count=-1)
    assert issubclass(BuildError, InvalidProgram)


def test_atomics() -> None:
    k = ProgramBuilder("atom")
    hist = k.buffer("hist", u32, "read_write")
    fl = k.buffer("fl", f32, "read_write")
    with pytest.raises(BuildError, match="only atomic add exists for floats"):
        fl.atomic_max(0, 1.0)
    old = hist.atomic_add(k.global_id() % 16, 1)
    prev = hist.atomic_compare_exchange(0, old, 7)
    fl.atomic_add(0, 1.5)
    hist[1] = prev
    p = k.build()
    atomics = [s for s in p.body if isinstance(s, N.Atomic)]
    assert [a.op for a in atomics] == ["add", "compare_exchange", "add"]
    assert atomics[1].comparand == N.Var(name=atomics[0].result or "", ty=u32)
    # an f32 add whose old value is unused is exact: integer atomics, no float atomic needed
    assert "atomic_float" not in p.required_features
    k = ProgramBuilder("atom_relaxed")
    k.buffer("fl", f32, "read_write").atomic_add_relaxed(0, 1.5)
    assert "atomic_float" in k.build().required_features


def test_augmented_assignment_emits_assigns() -> None:
    k = ProgramBuilder("aug")
    o = k.buffer("o", i32, "write")
    v = k.let(10, i32)
    v += 3
    v //= 2
    v <<= 1
    o[0] = v
    p = k.build()
    kinds = [s.kind for s in p.body]
    assert kinds == ["let", "assign", "assign", "assign", "store"]
    div = p.body[2]
    assert isinstance(div, N.Assign) and isinstance(div.value, N.Binary)
    assert div.value.op == "div"


def test_functions_and_select() -> None:
    k = ProgramBuilder("fns")
    o = k.buffer("o", f32, "write")
    x = k.buffer("x", f32)
    g = k.global_id()
    o[g] = select(g < 4, clamp(x[g], 0.0, 1.0), max_(x[g], min_(x[g], 2.0)))
    p = k.build()
    s = p.body[0]
    assert isinstance(s, N.Store) and isinstance(s.value, N.Select)
    assert isinstance(s.value.a, N.Call) and s.value.a.fn == "clamp"


def test_shared_memory_reduction_with_barriers_validates() -> None:
    k = ProgramBuilder("reduce", workgroup_size=64)
    src = k.buffer("src", u32)
    out = k.buffer("out", u32, "read_write")
    tile = k.shared("tile", u32, 64)
    lid = k.local_index()
    tile[lid] = src[k.global_id()]
    k.barrier()
    stride = k.let(32, u32)
    with k.while_(stride > 0):
        with k.if_(lid < stride):
            tile[lid] = tile[lid] + tile[lid + stride]
        k.barrier()
        stride >>= 1
    with k.if_(lid == 0):
        out.atomic_add(0, tile[0])
    p = k.build()
    assert "workgroup_memory" in p.required_features


def test_divergent_barrier_fails_at_build_with_a_path() -> None:
    k = ProgramBuilder("bad")
    with k.if_(k.local_id() < 3):
        k.barrier()
    with pytest.raises(InvalidProgram, match=r"body\[0\]\.then\[0\] \(barrier\)"):
        k.build()


def test_build_once() -> None:
    k = ProgramBuilder("once")
    o = k.buffer("o", u32, "write")
    o[0] = 1
    p = k.build()
    with pytest.raises(BuildError, match="already built"):
        o[1] = 2
    assert len(p.body) == 1
    with pytest.raises(BuildError, match="inside an open block"), k.if_(True):
        ProgramBuilder.build(k)
