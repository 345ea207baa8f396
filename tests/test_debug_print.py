"""`vyre.print` and `vyre.assert_` (issue 30, item 1): output written on the device, read
back with the dispatch, printed in invocation order and identical on every backend;
bounded with a line saying how many records were dropped; a failed assert raises
DispatchError naming the kernel, the line, the invocation and the values, on every
backend and in pipelines; Python's own print / assert of a kernel value are build errors
naming vyre.print / vyre.assert_; a Program without them is never rewritten."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vyre
import vyre.debug.instrument as instrument
from vyre import Buffer, DispatchConfig, InOut, ProgramBuilder, Step, f32, i32, u32
from vyre.backend import BaseBackend
from vyre.backends.reference.checked import CheckSetting
from vyre.builder import BuildError
from vyre.debug.instrument import debug_program, has_debug
from vyre.errors import DispatchError, InvalidDispatch, InvalidProgram
from vyre.ir import nodes as N
from vyre.ir.serialize import from_json, to_json
from vyre.programs import elementwise

HERE = __file__


def _line(marker: str) -> int:
    """The line of this file holding `marker` (the site an error must name)."""
    with open(HERE) as f:
        return next(n for n, text in enumerate(f, 1) if marker in text and "_line(" not in text)


@pytest.fixture(autouse=True)
def _default_log_size() -> Iterator[None]:
    yield
    vyre.set_debug_log_bytes(None)


# ------------------------------------------------------------------ output


@vyre.kernel(workgroup_size=4)
def _values(xf: Buffer[f32], xi: Buffer[i32], y: InOut[u32], n: u32) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < n):
        # the second print comes first in the trace but later in program order than none:
        # order is (invocation, program order), whatever order the device ran them in
        vyre.print("i={} f={} i32={} big={} ok={}", i, xf[i], xi[i], y[i], xf[i] > 0.5)
        vyre.print("hex {:08x} fixed {:.2f}", y[i], xf[i])
        y[i] = y[i] + 1


F32S = np.array([0.1, -0.0, np.inf, -np.inf, 1e-45, 3.4028235e38, 1.0, 2.5, 1 / 3, 0.5],
                np.float32)
I32S = np.array([0, -1, -(2**31), 2**31 - 1, 7, -7, 100, 2, 3, 4], np.int32)
U32S = np.array([0, 1, 2**32 - 1, 2**31, 9, 10, 11, 12, 13, 14], np.uint32)


def _expected_values(n: int) -> list[str]:
    out = []
    for i in range(n):
        f, k, u = F32S[i], int(I32S[i]), int(U32S[i])
        out.append(f"i={i} f={f!s} i32={k} big={u} ok={bool(f > 0.5)}")
        out.append(f"hex {u:08x} fixed {float(f):.2f}")
    return out


def test_print_is_in_invocation_order_and_exact_on_every_backend(
        backend: BaseBackend, capsys: pytest.CaptureFixture[str]) -> None:
    n = 10  # three workgroups of 4, the last partial
    out = _values.launch(backend, n, F32S, I32S, U32S.copy(), n=n)
    np.testing.assert_array_equal(out["y"], U32S + 1)  # the kernel's own result unchanged
    lines = capsys.readouterr().out.splitlines()
    assert lines == _expected_values(n)
    # floats read back to the same bits
    for line, f in zip(lines[::2], F32S):
        assert np.float32(line.split()[1][2:]).tobytes() == f.tobytes()


def test_nan_prints_as_nan(backend: BaseBackend, capsys: pytest.CaptureFixture[str]) -> None:
    xf = F32S.copy()
    xf[0] = np.nan
    _values.launch(backend, 1, xf, I32S, U32S.copy(), n=1)
    assert capsys.readouterr().out.splitlines()[0].startswith("i=0 f=nan ")


@vyre.kernel(workgroup_size=8)
def _wide(y: InOut[u32], *, T: vyre.ScalarType) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < 2):
        first = vyre.lit(2.5, T) if T.is_float else vyre.lit(-3 if T.is_signed else 2**40 + 5, T)
        v = vyre.select(i == 0, first, vyre.lit(0.1, T) if T.is_float else vyre.lit(2**33, T))
        vyre.print("{}", v)
        y[i] = 1


@pytest.mark.parametrize("ty", ["f64", "i64", "u64", "f16"])
def test_64_and_16_bit_values_print_exactly(ty: str, reference: BaseBackend,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    T = vyre.ScalarType(ty)
    _wide.launch(reference, 2, np.zeros(2, np.uint32), T=T)
    got = capsys.readouterr().out.splitlines()
    want = {"f64": ["2.5", "0.1"], "i64": ["-3", "8589934592"],
            "u64": [str(2**40 + 5), "8589934592"], "f16": ["2.5", str(np.float16(0.1))]}[ty]
    assert got == want


def test_print_like_python_and_builder(backend: BaseBackend,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    k = ProgramBuilder("bprint", workgroup_size=2)
    y = k.buffer("y", u32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        k.print("lane", i, "of", y.length(), "{literal}", 2.5, True, sep=" | ")
        y[i] = i
    out = backend.dispatch(k.build(), {"y": np.zeros(3, np.uint32)},
                           DispatchConfig.for_elements(3, 2))
    np.testing.assert_array_equal(out["y"], [0, 1, 2])
    assert capsys.readouterr().out.splitlines() == [
        f"lane | {j} | of | 3 | {{literal}} | 2.5 | True" for j in range(3)]


def test_dropped_records_are_counted_on_one_line(backend: BaseBackend,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # a record of _values' first print takes 5 + 5 words, of its second 5 + 2; a log of
    # 4 + 40 words holds four to five of the 20 (which ones depends on the device's
    # schedule); a record that does not fit whole must not come out
    vyre.set_debug_log_bytes(4 * (4 + 40))
    _values.launch(backend, 10, F32S, I32S, U32S.copy(), n=10)
    lines = capsys.readouterr().out.splitlines()
    kept = lines[:-1]
    assert set(kept) <= set(_expected_values(10))
    assert 4 <= len(kept) <= 5
    words = sum(10 if line.startswith("i=") else 7 for line in kept)
    assert 40 - 10 < words <= 40
    assert re.fullmatch(rf"vyre\.print: {20 - len(kept)} of 20 debug records of kernel "
                        r"'_values' were dropped: its log holds 176 bytes; raise the bound "
                        r"with VYRE_DEBUG_LOG_BYTES=<bytes> or "
                        r"vyre\.set_debug_log_bytes\(<bytes>\)", lines[-1]), lines[-1]


def test_log_size_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidDispatch, match="at least 64"):
        vyre.set_debug_log_bytes(8)
    monkeypatch.setenv("VYRE_DEBUG_LOG_BYTES", "lots")
    with pytest.raises(InvalidDispatch, match=r"VYRE_DEBUG_LOG_BYTES='lots'.*unset it"):
        vyre.debug.debug_log_bytes()
    monkeypatch.setenv("VYRE_DEBUG_LOG_BYTES", "0x1000")
    assert vyre.debug.debug_log_bytes() == 4096


# ------------------------------------------------------------------ assert


@vyre.kernel(workgroup_size=4)
def _checked_sqrt(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        v = vyre.let(x[i])
        vyre.assert_(v >= 0.0, "negative input {} at {}", v, i)  # ASSERT-SITE
        y[i] = vyre.sqrt(vyre.abs_(v))


def _assert_error(exc: BaseException) -> str:
    msg = str(exc)
    site = f"{HERE}:{_line('# ASSERT-SITE')}"
    assert isinstance(exc, DispatchError), msg
    assert "vyre.assert_ failed in kernel '_checked_sqrt'" in msg, msg
    assert site in msg, msg
    assert "invocation global id (2, 0, 0): negative input -4.0 at 2 [v = -4.0]" in msg, msg
    assert "also global id (5, 0, 0)" in msg and "negative input -0.5 at 5" in msg, msg
    return msg


X_NEG = np.array([1, 4, -4, 9, 16, -0.5], np.float32)


def test_failed_assert_raises_naming_the_kernel_line_invocation_and_values(
        backend: BaseBackend) -> None:
    with pytest.raises(DispatchError) as info:
        _checked_sqrt.launch(backend, 6, X_NEG, np.zeros(6, np.float32))
    _assert_error(info.value)


@vyre.kernel(workgroup_size=4)
def _inlined_index(x: Buffer[f32], y: InOut[f32]) -> None:
    i = vyre.global_linear_id()  # (no let: x[i]'s text spells the whole index expression)
    vyre.assert_(x[i] < 5.0, "too big")
    y[i] = x[i]


def test_a_long_operand_is_named_by_its_buffer(reference: BaseBackend) -> None:
    with pytest.raises(DispatchError, match=r"global id \(1, 0, 0\): too big \[x\[\.\.\.\] = 7\.0\]"):
        _inlined_index.launch(reference, 4, np.array([1, 7, 2, 3], np.float32),
                              np.zeros(4, np.float32))


def test_resident_dispatch_reports_at_the_next_sync_point_and_keeps_its_writes(
        backend: BaseBackend) -> None:
    xb = backend.allocate_device_buffer(X_NEG.nbytes)
    yb = backend.allocate_device_buffer(X_NEG.nbytes)
    try:
        backend.write(xb, X_NEG)
        _checked_sqrt.launch(backend, 6, xb, yb)  # enqueued, returns at once: no wait
        with pytest.raises(DispatchError) as info:
            backend.read(yb, dtype=np.float32)  # the next completion reads the log too
        _assert_error(info.value)
        # every invocation ran to its end, the failing ones included
        np.testing.assert_array_equal(backend.read(yb, dtype=np.float32),
                                      np.sqrt(np.abs(X_NEG)))
        _checked_sqrt.launch(backend, 6, xb, yb)
        with pytest.raises(DispatchError) as info:
            backend.synchronize()
        _assert_error(info.value)
        backend.write(xb, np.abs(X_NEG))
        _checked_sqrt.launch(backend, 6, xb, yb)
        backend.synchronize()  # holds: nothing to report
    finally:
        backend.free(xb)
        backend.free(yb)
    assert all(b.label != "vyre_debug_log" for b in backend.live_buffers())


def test_host_dispatch_reads_the_log_with_its_outputs(backend: BaseBackend,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """No extra readback: the log comes back in the batch that reads the outputs."""
    batches: list[int] = []
    memory = backend._memory  # (the allocator part: it reads every batch)
    real = memory.read_batch

    def counted(ranges: list[Any]) -> list[Any]:
        batches.append(len(ranges))
        return real(ranges)

    monkeypatch.setattr(memory, "read_batch", counted)
    _values.launch(backend, 3, F32S, I32S, U32S.copy(), n=3)
    assert batches == [2]  # y and the log, together
    assert capsys.readouterr().out.splitlines() == _expected_values(3)


def test_a_failed_assert_saves_a_replay_file_on_request(backend: BaseBackend, tmp_path: Any,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """With $VYRE_REPLAY_DIR set, a failed assert on the host path, the resident path and
    dispatch_async each saves one file (the buffers before the dispatch) that names the
    failure again when rerun anywhere."""
    from vyre.tools.replay import load_dispatch, replay

    monkeypatch.setenv("VYRE_REPLAY_DIR", str(tmp_path))
    xb = backend.allocate_device_buffer(X_NEG.nbytes)
    yb = backend.allocate_device_buffer(X_NEG.nbytes)
    try:
        backend.write(xb, X_NEG)
        backend.write(yb, np.full(6, 7.0, np.float32))
        runs = [lambda: _checked_sqrt.launch(backend, 6, X_NEG, np.zeros(6, np.float32)),
                lambda: (_checked_sqrt.launch(backend, 6, xb, yb), backend.synchronize()),
                lambda: backend.dispatch_async(_checked_sqrt.program, [xb], [yb],
                                               _checked_sqrt.config(6)).wait()]
        for k, run in enumerate(runs, 1):
            with pytest.raises(DispatchError) as info:
                run()
            files = sorted(tmp_path.glob("_checked_sqrt-*.zip"))  # (named by the time)
            assert len(files) == k and _assert_error(info.value).count("replay file:") == 1
            assert f"replay file: {files[-1]}" in str(info.value)
            again = replay(files[-1], backend="reference")
            assert not again.ok and "negative input -4.0 at 2" in again.findings, str(again)
    finally:
        backend.free(xb)
        backend.free(yb)
    # (the resident file holds y as it was before the dispatch, not after it)
    assert load_dispatch(files[1]).inputs["y"].tolist() == [7.0] * 6


def test_waiting_logs_are_bounded(backend: BaseBackend,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    xb = backend.allocate_device_buffer(X_NEG.nbytes)
    yb = backend.allocate_device_buffer(X_NEG.nbytes)
    try:
        backend.write(xb, np.abs(X_NEG))
        for _ in range(3 * vyre.debug.MAX_PENDING_LOGS):
            _values.launch(backend, 2, xb, xb, yb, n=0)  # (n=0: no records)
            logs = [b for b in backend.live_buffers() if b.label == "vyre_debug_log"]
            assert len(logs) <= vyre.debug.MAX_PENDING_LOGS + 1
        backend.synchronize()
        assert all(b.label != "vyre_debug_log" for b in backend.live_buffers())
    finally:
        backend.free(xb)
        backend.free(yb)


def test_dispatch_async_reports_at_wait(backend: BaseBackend,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    xb = backend.allocate_device_buffer(X_NEG.nbytes)
    yb = backend.allocate_device_buffer(X_NEG.nbytes)
    try:
        backend.write(xb, X_NEG)
        pending = backend.dispatch_async(_checked_sqrt.program, [xb], [yb],
                                         _checked_sqrt.config(6))
        with pytest.raises(DispatchError) as info:
            pending.wait()
        _assert_error(info.value)
        assert pending.wait() is not None  # reported once; waiting again is harmless
    finally:
        backend.free(xb)
        backend.free(yb)


@vyre.kernel(workgroup_size=4)
def _accumulate(x: Buffer[f32], y: InOut[f32], t: u32) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < 2):
        vyre.print("t={} i={} y={}", t, i, y[i])
        vyre.assert_(y[i] < 3.0)
        y[i] = y[i] + x[i]


def test_pipeline_prints_and_raises_after_the_whole_run(
        backend: BaseBackend, capsys: pytest.CaptureFixture[str]) -> None:
    xb = backend.allocate_device_buffer(16)
    yb = backend.allocate_device_buffer(16)
    try:
        backend.write(xb, np.array([0, 1, 0, 0], np.float32))
        backend.write(yb, np.zeros(4, np.float32))
        pipe = backend.pipeline([_accumulate.step(4, xb, yb, index_param="t")])
        res = pipe.run(repeat=3, read=[yb])  # y[1] = 0, 1, 2: the assert holds
        np.testing.assert_array_equal(res.reads[0], [0, 3, 0, 0])
        assert len(res.reads) == 1
        assert capsys.readouterr().out.splitlines() == [
            "t=0 i=0 y=0.0", "t=1 i=0 y=0.0", "t=2 i=0 y=0.0",
            "t=0 i=1 y=0.0", "t=1 i=1 y=1.0", "t=2 i=1 y=2.0"]
        with pytest.raises(DispatchError) as info:
            pipe.run(repeat=2, read=[yb])  # y[1] = 3: fails in both rounds
        msg = str(info.value)
        assert "kernel '_accumulate' (pipeline step 0)" in msg and "global id (1, 0, 0)" in msg
        assert "y[1]" not in msg or "= 3.0" in msg
        np.testing.assert_array_equal(backend.read(yb, dtype=np.float32), [0, 5, 0, 0])
        assert capsys.readouterr().out.splitlines()[-2:] == ["t=0 i=1 y=3.0", "t=1 i=1 y=4.0"]
    finally:
        backend.free(xb)
        backend.free(yb)


def test_a_plain_pipeline_step_mixes_with_a_debug_one(backend: BaseBackend,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    xb = backend.allocate_device_buffer(X_NEG.nbytes)
    yb = backend.allocate_device_buffer(X_NEG.nbytes)
    try:
        backend.write(xb, np.abs(X_NEG))
        plain = elementwise.saxpy()
        n = X_NEG.size
        steps = [Step(plain, [xb], [yb], DispatchConfig.for_elements(n, 256,
                                                                     params={"n": n, "a": 1.0})),
                 _checked_sqrt.step(n, xb, yb)]
        res = backend.pipeline(steps).run(read=[yb])
        np.testing.assert_array_equal(res.reads[0], np.sqrt(np.abs(X_NEG)))
        assert capsys.readouterr().out == ""
    finally:
        backend.free(xb)
        backend.free(yb)


def test_bind_refuses_a_debug_program_naming_what_works(reference: BaseBackend) -> None:
    with pytest.raises(InvalidDispatch, match=r"vyre\.print / vyre\.assert_.*"
                                              r"dispatch_with_device_buffers.*pipeline"):
        reference.bind(_checked_sqrt.program, [reference.allocate_device_buffer(16)],
                       [reference.allocate_device_buffer(16)], _checked_sqrt.config(4))


def test_checked_mode_finds_nothing_in_the_log() -> None:
    be = vyre.get_backend("reference", check=CheckSetting(mode="error", bounds="error"))
    try:
        vyre.set_debug_log_bytes(4 * (4 + 40))  # full log: the dropping path too
        _values.launch(be, 10, F32S, I32S, U32S.copy(), n=10)
        assert be.last_check_report is not None and be.last_check_report.ok  # type: ignore[attr-defined]
    finally:
        be.close()


# ------------------------------------------------------------------ build-time errors


def _trace(body: Any) -> Any:
    @vyre.kernel
    def k(x: Buffer[f32], y: InOut[f32]) -> None:
        body(x, y)
    return k.program


def test_python_print_of_a_kernel_value_names_vyre_print() -> None:
    for body in (lambda x, y: print(x[0]), lambda x, y: f"{x[0]}",
                 lambda x, y: str(x[0] + 1.0), lambda x, y: print(x)):
        with pytest.raises(BuildError, match=r"vyre\.print\(.*after the dispatch"):
            _trace(body)
    assert repr(ProgramBuilder("r").lit(1.0)) == "<vyre Value f32: const>"  # repr stays


def _python_assert(x: Any, y: Any) -> None:
    assert x[0] > 0.0  # (the mistake under test)


def test_python_assert_on_a_kernel_value_names_vyre_assert() -> None:
    with pytest.raises(BuildError, match=r"Python's assert.*vyre\.assert_\(cond"):
        _trace(_python_assert)
    with pytest.raises(BuildError, match=r"no Python truth value.*vyre\.assert_\(cond\)"):
        _trace(lambda x, y: bool(x[0] > 0.0))


@pytest.mark.parametrize("args,phrase", [
    (("{} and {}", 1), "2 field"),
    (("{:q}", 1.0), "spec 'q'"),
    (("{name}", 1), "not supported"),
    (("{!r}", 1), "not supported"),
    (("{", 1), "malformed"),
    ((object(),), "cannot be printed from a kernel"),
])
def test_bad_formats_are_build_errors(args: tuple[Any, ...], phrase: str) -> None:
    with pytest.raises(BuildError, match=re.escape(phrase)):
        _trace(lambda x, y: vyre.print(*args))


def test_validator_checks_hand_built_print_and_assert() -> None:
    y = N.BufferDecl(name="y", ty=u32, access="read_write")
    one = N.Const(ty=u32, value=1)
    bad = N.Program(name="p", buffers=(y,), body=(N.Print(fmt="{} {}", args=(one,)),))
    with pytest.raises(InvalidProgram, match="1 value"):
        vyre.validate(bad)
    bad2 = N.Program(name="p", buffers=(y,), body=(N.Assert(cond=one),))
    with pytest.raises(InvalidProgram, match="assert condition is u32"):
        vyre.validate(bad2)


def test_wire_format_round_trips_print_and_assert() -> None:
    p = _checked_sqrt.program
    back = from_json(to_json(p))
    assert back == p and has_debug(back)


# ------------------------------------------------------------------ zero cost


def test_a_program_without_print_is_never_rewritten(backend: BaseBackend,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every dispatch path of a plain program runs the program as written: no log buffer,
    no rewrite (a rewrite here would raise)."""
    def refuse(program: N.Program) -> Any:
        raise AssertionError(f"{program.name} was rewritten")

    monkeypatch.setattr(instrument, "_rewrite", refuse)
    monkeypatch.setattr(instrument, "_CACHE", type(instrument._CACHE)(4))
    plain = elementwise.saxpy()
    assert not has_debug(plain) and debug_program(plain) is plain
    n = 5
    cfg = DispatchConfig.for_elements(n, 256, params={"n": n, "a": 2.0})
    xs = np.arange(n, dtype=np.float32)
    out = backend.dispatch(plain, {"x": xs, "y": np.ones(n, np.float32)}, cfg)
    np.testing.assert_array_equal(out["y"], 2 * xs + 1)
    xb, yb = backend.allocate_device_buffer(20), backend.allocate_device_buffer(20)
    try:
        backend.write(xb, xs)
        backend.dispatch_with_device_buffers(plain, [xb], [yb], cfg)
        backend.dispatch_async(plain, [xb], [yb], cfg).wait()
        backend.dispatch_with_device_buffers(backend.bind(plain, [xb], [yb], cfg))
        backend.pipeline([Step(plain, [xb], [yb], cfg)]).run()
        assert all(b.label != "vyre_debug_log" for b in backend.live_buffers())
    finally:
        backend.free(xb)
        backend.free(yb)


def test_generated_source_has_no_log_without_print(backend: BaseBackend) -> None:
    """The generated code of library programs and a kernel carries no log buffer, and is
    byte for byte what each printer makes of the Program as written (backend.source is
    what a dispatch compiles); the same kernel with a print differs by the log alone: its
    debug statements stripped, it prints byte-identical to the kernel written without."""
    from vyre.backends.cuda.render import generate as cuda_source
    from vyre.backends.wgpu.render import generate as wgsl_source
    from vyre.debug.instrument import without_debug
    from vyre.programs import reduce as R
    from vyre.programs import scan as S

    plain = _accumulate_plain()
    for p in (elementwise.saxpy(), R.reduce_program("sum", f32),
              S.scan_block_program(u32, True), plain):
        assert debug_program(p) is p
        cuda = cuda_source(p).source
        assert "dbg" not in cuda and "dbg" not in wgsl_source(p).source  # (CUDA mangles:
        # vyre_1dbg_1log)
        assert "dbg" not in backend.source(p)
        if backend.kind == "cuda":  # (the instance prints its coarsened variant)
            assert backend.source(p) == cuda_source(
                p, coarsen=backend.coarsen, options=backend.options).source  # type: ignore[attr-defined]
    debugged = cuda_source(debug_program(_accumulate.program)).source
    assert "vyre_1dbg_1log" in debugged and "atomicAdd" in debugged
    stripped = without_debug(_accumulate.program)
    assert stripped == plain and stripped.content_hash == plain.content_hash
    assert backend.source(stripped) == backend.source(plain)


def _accumulate_plain() -> N.Program:
    """_accumulate without its print and assert."""
    def strip(body: tuple[Any, ...]) -> tuple[Any, ...]:
        out = []
        for s in body:
            if isinstance(s, N.If):
                s = s.model_copy(update={"then": strip(s.then)})
            if not isinstance(s, (N.Print, N.Assert)):
                out.append(s)
        return tuple(out)
    return _accumulate.program.model_copy(update={"body": strip(_accumulate.program.body)})


def test_instrumented_kernels_compile_with_nvrtc() -> None:
    """The CUDA code of the debug kernels (every logged type) compiles (NVRTC needs no GPU);
    running them is the GPU suite's part (the `backend` tests above on cuda)."""
    pytest.importorskip("cuda")
    from vyre.backends.cuda import compile_source
    from vyre.backends.cuda.render import generate

    programs = [_values.program, _checked_sqrt.program, _accumulate.program]
    programs += [_wide.build(T=vyre.ScalarType(t)) for t in ("f64", "i64", "u64", "f16")]
    for p in programs:
        try:
            compile_source(generate(debug_program(p)).source, "sm_90")
        except vyre.BackendUnavailable as exc:
            pytest.skip(f"NVRTC is not available here: {exc}")


def test_the_log_buffer_past_the_buffer_limit_is_named(reference: BaseBackend,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    caps = reference.capabilities()
    two = caps.model_copy(update={"limits": {**caps.limits, "max_buffers_per_program": 2}})
    monkeypatch.setattr(reference, "capabilities", lambda: two)
    with pytest.raises(InvalidDispatch, match=r"declares 2 buffers and its vyre\.print / "
                                              r"vyre\.assert_ need one more.*at most 2"):
        _checked_sqrt.launch(reference, 6, X_NEG, np.zeros(6, np.float32))
    assert all(b.label != "vyre_debug_log" for b in reference.live_buffers())
