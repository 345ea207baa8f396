"""`@vyre.kernel`: every IR type and call, casts, select, min/max, control flow, shared
arrays, barriers and atomics traced from plain Python, checked against the reference on
every backend; launches from counts and 1-3-D shapes on host arrays and resident buffers;
errors that name the user's line and names; the builder and binding messages of issue 16."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import (
    Buffer,
    BufferOwnershipError,
    DispatchConfig,
    InOut,
    InvalidDispatch,
    InvalidProgram,
    Output,
    ProgramBuilder,
    UnsupportedFeature,
    f16,
    f32,
    f64,
    i32,
    i64,
    u32,
    u64,
)
from vyre.backend import BaseBackend
from vyre.builder import BuildError
from vyre.tools.testing import EXACT, assert_agree, check_against_reference, random_array

T = vyre.TypeParam("T")


def _line(marker: str) -> int:
    """The line number of the source line containing `marker` in this file."""
    with open(__file__) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "_line(" not in text:
                return n
    raise AssertionError(marker)


# ------------------------------------------------------------------ every type


@vyre.kernel(workgroup_size=64)
def arith(x: Buffer[T], y: Buffer[T], out: Output[T], *, T: vyre.ScalarType
          ) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < out.length()):
        a, b = x[i], y[i]
        r = vyre.let(a + b)
        r += a * b - vyre.min_(a, b) + vyre.max_(a, b)
        if T.is_float:  # a build-time branch: specialises the kernel per type
            r += a / vyre.select(b == 0, vyre.lit(1, T), b) + vyre.abs_(a) + vyre.floor(b)
            r += vyre.sqrt(vyre.abs_(a)) + vyre.fma(a, b, a) + vyre.clamp(a, b, b + 1)
            r += vyre.trunc(a) + vyre.ceil(b) + vyre.round_(a)
        else:
            r += (a & b) | (a ^ b) + (a << 3) + (b >> 1) + ~a
            r += a // vyre.select(b == 0, vyre.lit(1, T), b) + a % vyre.select(b == 0, 1, b)
            if T.is_signed:
                r += -a + abs(b)
        out[i] = vyre.select(r > a, r, a)


@pytest.mark.parametrize("ty", [i32, u32, f32, f16, f64, i64, u64], ids=str)
def test_every_type_against_reference(backend: BaseBackend, reference: BaseBackend,
                                      ty: vyre.ScalarType) -> None:
    n = 200
    rng = np.random.default_rng(7)
    prog = arith.build(T=ty)
    assert prog.name == f"arith_T{ty}"
    inputs = {"x": random_array(rng, ty, n), "y": random_array(rng, ty, n), "out": n}
    cfg = arith.config(n, prog)
    if ty.feature and not backend.supports(ty.feature):
        with pytest.raises(UnsupportedFeature):
            backend.dispatch(prog, inputs, cfg)
        return
    check_against_reference(prog, inputs, cfg, [backend], reference)


@vyre.kernel
def transcendental(x: Buffer[f32], out: Output[f32]) -> None:
    # one output per call: docs/IR.md's tolerance is per approximate call, and a sum of
    # calls (tan near its pole next to exp) is not held to 4 ulp of the sum
    i = vyre.global_linear_id()
    n = x.length()
    a = x[i]
    calls = [vyre.exp(a), vyre.exp2(a), vyre.log(vyre.abs_(a) + 1.0),
             vyre.log2(a * a + 1.0), vyre.sin(a), vyre.cos(a), vyre.tan(a), vyre.tanh(a),
             vyre.pow_(vyre.abs_(a), 0.5), vyre.atan2(a, 2.0)]
    for k, r in enumerate(calls):
        out[i + n * k] = r


def test_every_call_against_reference(backend: BaseBackend, reference: BaseBackend) -> None:
    x = np.linspace(-3, 3, 128, dtype=np.float32)
    prog = transcendental.program
    check_against_reference(prog, {"x": x, "out": 128 * 10}, transcendental.config(128),
                            [backend], reference)


@vyre.kernel(workgroup_size=32)
def casts(x: Buffer[f32], ints: Output[i32], bits: Output[u32],
          wide: Output[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < x.length()):
        ints[i] = x[i].cast(i32)  # truncates, saturates, NaN -> 0
        bits[i] = x[i].bitcast(u32)
        flag = x[i] > 0.0
        wide[i] = flag.cast(u32).cast(f32) + x[i].cast(f16).cast(f32)


def test_casts_and_bitcasts(backend: BaseBackend, reference: BaseBackend) -> None:
    prog = casts.program
    if "f16" in prog.required_features and not backend.supports("f16"):
        pytest.skip(f"{backend.id} has no f16 (the cast needs it)")
    x = random_array(np.random.default_rng(8), f32, 100)
    check_against_reference(prog, {"x": x, "ints": 100, "bits": 100, "wide": 100},
                            casts.config(100), [backend], reference)


# ------------------------------------------------------------------ control flow, atomics


@vyre.kernel(workgroup_size=64)
def collatz(x: Buffer[u32], steps: Output[u32], total: InOut[u32],
            cap: u32) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i >= x.length()):
        vyre.return_()
    v = vyre.let(x[i])
    count = vyre.let(vyre.lit(0, u32))
    with vyre.while_(v != 1):
        with vyre.if_(count >= cap):
            vyre.break_()
        with vyre.if_((v & 1) == 0):
            v.set(v >> 1)
        with vyre.else_():
            v.set(v * 3 + 1)
        count += 1
    skipped = vyre.let(vyre.lit(0, u32))
    for j in vyre.range(10):
        with vyre.if_(j % 3 == 0):
            vyre.continue_()
        skipped += j
    steps[i] = count + skipped
    total.atomic_add(0, count)
    total.atomic_max(1, count)
    total.atomic_min(2, count)
    total.atomic_or(3, count)
    total.atomic_xor(4, count & 1)
    total.atomic_and(5, count | 0xFFFF0000)
    total.atomic_compare_exchange(6, 0, i + 1)


def test_control_flow_and_atomics(backend: BaseBackend, reference: BaseBackend) -> None:
    x = np.arange(1, 301, dtype=np.uint32)
    total = np.array([0, 0, 2**32 - 1, 0, 0, 2**32 - 1, 0], np.uint32)
    prog = collatz.program
    assert {"v", "count", "skipped", "j"} <= {
        s.name for s in prog.body if hasattr(s, "name")} | {"j"}
    args = {"x": x, "steps": 300, "total": total}
    cfg = collatz.config(300, cap=100)
    mine, want = backend.dispatch(prog, args, cfg), reference.dispatch(prog, args, cfg)
    # total[6] is whichever invocation's compare-exchange ran first: any is valid (docs/IR.md
    # atomics are relaxed); every other result is order-independent and compared exactly
    assert_agree(mine["steps"], want["steps"], EXACT, "steps")
    assert_agree(mine["total"][:6], want["total"][:6], EXACT, "total[:6]")
    out = {backend.id: mine}
    got = out[backend.id]["total"]
    def ref_steps(v: int) -> int:
        c = 0
        while v != 1 and c < 100:
            v, c = (v // 2 if v % 2 == 0 else 3 * v + 1), c + 1
        return c
    counts = [ref_steps(v) for v in range(1, 301)]
    assert got[0] == sum(counts) and got[1] == max(counts) and got[2] == min(counts)
    assert 1 <= got[6] <= 300  # exactly one invocation won the compare-exchange
    np.testing.assert_array_equal(out[backend.id]["steps"], np.array(counts) + 27)


@vyre.kernel(workgroup_size=(8, 4, 2))
def fill3d(out: Output[u32], nx: u32, ny: u32, nz: u32) -> None:
    x, y, z = vyre.global_id(0), vyre.global_id(1), vyre.global_id(2)
    with vyre.if_((x < nx) & (y < ny) & (z < nz)):
        out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z


@pytest.mark.parametrize("shape", [(5,), (9, 3), (17, 5, 3)])
def test_launch_shapes(backend: BaseBackend, shape: tuple[int, ...]) -> None:
    nx, ny, nz = (*shape, 1, 1)[:3]
    got = fill3d.launch(backend, vyre.xyz(*shape), nx * ny * nz, nx=nx, ny=ny, nz=nz)["out"]
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(got, (x + 100 * y + 10000 * z).ravel().astype(np.uint32))


def test_count_launch_of_a_2d_kernel_is_refused(reference: BaseBackend) -> None:
    with pytest.raises(InvalidDispatch, match=r"vyre\.xyz\(nx, ny\[, nz\]\), not an element count"):
        fill3d.launch(reference, 10, 10, nx=10, ny=1, nz=1)


def test_for_shape_grid() -> None:
    assert DispatchConfig.for_shape((100, 33), (16, 16)).grid == (7, 3, 1)
    assert DispatchConfig.for_shape(5, 4).grid == (2, 1, 1)
    assert DispatchConfig.for_shape((2, 3, 4), (1, 1, 1)).grid == (2, 3, 4)
    with pytest.raises(InvalidDispatch, match="extent 1 = 0"):
        DispatchConfig.for_shape((4, 0), 8)
    with pytest.raises(InvalidDispatch, match="more than 65535"):
        DispatchConfig.for_shape((1 << 30,), 1)


@vyre.kernel(workgroup_size=64)
def saxpy(x: Buffer[f32], y: InOut[f32], a: f32) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        y[i] = a * x[i] + y[i]


def test_launch_host_and_resident(backend: BaseBackend) -> None:
    n = 1000
    xs = np.arange(n, dtype=np.float32)
    ys = np.ones(n, np.float32)
    np.testing.assert_array_equal(saxpy.launch(backend, n, xs, ys, a=2.0)["y"], 2 * xs + 1)
    np.testing.assert_array_equal(saxpy.launch(backend, n, y=ys, x=xs, a=3.0)["y"], 3 * xs + 1)
    xb, yb = backend.allocate_device_buffer(xs.nbytes), backend.allocate_device_buffer(ys.nbytes)
    try:
        backend.write_many([(xb, xs), (yb, ys)])
        saxpy.launch(backend, n, xb, yb, a=2.0)
        res = backend.pipeline([saxpy.step(n, xb, yb, a=1.0)]).run(repeat=2, read=[yb])
        np.testing.assert_array_equal(res.reads[0], 4 * xs + 1)  # typed: f32, not bytes
        with pytest.raises(InvalidDispatch, match=r"\['x'\] are host data.*allocate_device"):
            saxpy.launch(backend, n, xs, yb, a=2.0)
    finally:
        backend.free(xb)
        backend.free(yb)
    assert saxpy.program is saxpy.program  # built once
    with pytest.raises(InvalidDispatch, match=r"missing \['a'\]"):
        saxpy.launch(backend, n, xs, ys)


# ------------------------------------------------------------------ errors at the user's line


def test_error_names_the_user_line_and_names() -> None:
    @vyre.kernel
    def bad(x: InOut[f64]) -> None:
        acc = vyre.let(0.0)  # MARK-let
        for j in vyre.range(4):
            acc.set(x[j])  # MARK-set

    with pytest.raises(BuildError) as info:
        _ = bad.program
    msg = str(info.value)
    assert msg.startswith(f"{__file__}:{_line('MARK-set')}: in kernel 'bad'")
    assert "'acc'" in msg and f":{_line('MARK-let')}" in msg
    assert "let(0.0, ty=f64)" in msg and "lit(0.0, f64)" in msg
    assert "v1" not in msg


def test_precedence_hint() -> None:
    @vyre.kernel
    def bad(x: Output[f32], n: u32) -> None:
        i, j = vyre.global_id(0), vyre.global_id(1)
        with vyre.if_(i < n & j < n):  # MARK-prec
            x[i] = 1.0

    with pytest.raises(BuildError, match=r"\(i < n\) & \(j < n\)") as info:
        _ = bad.program
    assert info.value.site == f"{__file__}:{_line('MARK-prec')}"


def test_rebinding_inside_a_block_is_refused() -> None:
    @vyre.kernel
    def bad(x: InOut[f32]) -> None:
        i = vyre.global_linear_id()
        y = x[i]
        with vyre.if_(i < 4):
            y = y * 2.0
        x[i] = y  # MARK-use

    with pytest.raises(BuildError, match="does not change a kernel variable") as info:
        _ = bad.program
    assert info.value.site == f"{__file__}:{_line('MARK-use')}"


def test_python_break_in_device_loop_is_refused_where_the_kernel_is_traced() -> None:
    """A kernel Python has no source for (exec) is traced, not compiled: a Python `break`
    would only stop the trace, so it is refused. (Compiled kernels run it on the device:
    tests/test_kernel_plain.py.)"""
    space: dict[str, object] = {"vyre": vyre, "Output": Output, "f32": f32, "u32": u32}
    exec("def bad(x: Output[f32], n: u32) -> None:\n"
         "    for _ in vyre.range(n):\n"
         "        break\n", space)
    bad = vyre.kernel(space["bad"])
    with pytest.raises(BuildError, match=r"vyre\.break_"):
        _ = bad.program


def test_validation_error_points_at_lines_not_ir_paths() -> None:
    @vyre.kernel
    def bad(x: Output[f32]) -> None:
        i = vyre.global_linear_id()
        with vyre.if_(i < 4):  # MARK-if
            vyre.barrier()  # MARK-barrier

    with pytest.raises(InvalidProgram) as info:
        _ = bad.program
    msg = str(info.value)
    assert msg.startswith(f"{__file__}:{_line('MARK-barrier')}:")
    assert f"the if at line {_line('MARK-if')}" in msg


def test_annotation_errors() -> None:
    def no_ann(x) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(BuildError, match=r"needs an annotation.*keyword-only"):
        vyre.kernel(no_ann)

    @vyre.kernel
    def needs_const(x: Output[u32], *, k: int) -> None:
        x[0] = k

    with pytest.raises(BuildError, match="constant 'k'"):
        _ = needs_const.program
    assert needs_const.build(k=3).buffers[0].name == "x"
    with pytest.raises(BuildError, match="not called directly"):
        needs_const()
    with pytest.raises(BuildError, match="only meaningful inside"):
        vyre.global_id()


# ------------------------------------------------------------------ builder / binding messages


def test_builder_let_literal_hint() -> None:
    k = ProgramBuilder("p")
    x = k.buffer("x", f64, "read_write")
    acc = k.let(0.0)
    with pytest.raises(BuildError, match=r"'acc' is f32 because let\(0.0\).*let\(0.0, ty=f64\)"):
        acc.set(x[0])
    with pytest.raises(BuildError, match="'acc' is f32 because"):
        acc + x[0]


def test_builder_error_sites_and_names() -> None:
    k = ProgramBuilder("p")
    out = k.buffer("out", f32, "write")
    i = k.global_linear_id()
    total = k.let(0.0)
    with k.if_(i < 8):  # MARK-bif
        k.barrier()
    out[i] = total
    with pytest.raises(InvalidProgram) as info:
        k.build()
    assert f"line {_line('MARK-bif')}" in str(info.value)
    assert info.value.node is not None and "body[" in info.value.node  # kept for tools


def test_read_buffer_among_outputs_says_where_it_belongs(reference: BaseBackend) -> None:
    k = ProgramBuilder("copy")
    a = k.buffer("a", f32)
    b = k.buffer("b", f32, "write")
    b[k.global_linear_id()] = a[k.global_linear_id()]
    prog = k.build()
    ab, bb = reference.allocate_device_buffer(16), reference.allocate_device_buffer(16)
    try:
        with pytest.raises(InvalidDispatch, match=r"'a' is an input \(read: declared 'read'\) "
                                                  r"and belongs in inputs"):
            reference.dispatch_with_device_buffers(prog, {}, {"a": ab, "b": bb},
                                                   DispatchConfig(grid=1))
    finally:
        reference.free(ab)
        reference.free(bb)


def test_host_array_to_resident_dispatch_says_upload(reference: BaseBackend) -> None:
    with pytest.raises(BufferOwnershipError, match=r"host data.*allocate_device_buffer.*write"):
        reference.dispatch_with_device_buffers(
            saxpy.program, {"x": np.zeros(4, np.float32)},
            {"y": reference.allocate_device_buffer(16)}, DispatchConfig(grid=1,
                                                                       params={"a": 1.0}))


def test_index_param_errors(reference: BaseBackend) -> None:
    buf = reference.allocate_device_buffer(16)
    try:
        with pytest.raises(InvalidDispatch, match="index_param 'q' must be a u32"):
            reference.pipeline([vyre.Step(saxpy.program, {"x": buf}, {"y": buf},
                                          DispatchConfig(grid=1, params={"a": 1.0}),
                                          index_param="q")])
    finally:
        reference.free(buf)


def test_wgpu_probe_is_honest_about_f64(backends: dict[str, BaseBackend]) -> None:
    """`vyre probe` says yes to f64 exactly where an f64 dispatch runs (the adapter has
    shader-f64), and then it runs, bit for bit with the reference."""
    if "wgpu" not in backends:
        pytest.skip("the wgpu backend is not available here")
    caps = backends["wgpu"].capabilities()
    has = "shader-f64" in caps.details["wgpu_features"]
    assert ("f64" in caps.features) == has
    assert str(caps.details["f64_arithmetic"]).startswith("yes" if has else "no")
    prog = arith.build(T=f64)
    data = {"x": np.linspace(-3, 3, 4), "y": np.linspace(1, 2, 4), "out": 4}
    if not has:
        with pytest.raises(UnsupportedFeature):
            backends["wgpu"].dispatch(prog, data, arith.config(4, prog))
        return
    got = backends["wgpu"].dispatch(prog, data, arith.config(4, prog))
    want = backends["reference"].dispatch(prog, data, arith.config(4, prog))
    for name in want:
        np.testing.assert_array_equal(got[name].view(np.uint64), want[name].view(np.uint64))
