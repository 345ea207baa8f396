"""u8, i8, u16, i16 buffer elements (issue 31, item 3), through the public API on every
backend, bit for bit against NumPy and the reference (docs/IR.md "Narrow integers"):

- packed storage: n elements take n (2n) bytes; NumPy arrays go in and come out as they are
  (odd lengths too: the last word is partial on wgpu);
- loads promote (u8/u16 -> u32 zero-extended, i8/i16 -> i32 sign-extended), stores keep
  the low bits, float -> narrow casts saturate (NaN -> 0), bitcasts u8 <-> i8;
- neighbouring elements stored by different invocations at once are all kept (wgpu packs
  four bytes into a word: a plain word read-modify-write would lose them);
- out-of-range loads read 0, out-of-range stores do nothing, Length counts elements;
- workgroup arrays of narrow types;
- the rules the validator and builder enforce (no arithmetic, params, locals or atomics of
  a narrow type), with messages naming the fix;
- CUDA: the generated C compiles with NVRTC (running it needs a GPU).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, InvalidProgram, ProgramBuilder, ScalarType
from vyre.backend import BaseBackend
from vyre.ir import nodes as N
from vyre.ir.serialize import from_json, to_json

NARROW = (vyre.u8, vyre.i8, vyre.u16, vyre.i16)
U32, I32, F32, F64 = vyre.u32, vyre.i32, vyre.f32, vyre.f64
_RNG = np.random.default_rng(31)


def _full_range(ty: ScalarType, n: int) -> np.ndarray:
    info = np.iinfo(ty.numpy)
    a = _RNG.integers(info.min, info.max + 1, n).astype(ty.numpy)
    a[:4] = [info.min, info.max, 0, -1 if ty.is_signed else 1][:n]
    return a


def _arith(ty: ScalarType) -> vyre.Program:
    """o = a * 3 + 1 (wraps in the type); w = a promoted; g = f cast (saturating);
    h = a bitcast to the other signedness."""
    other = {vyre.u8: vyre.i8, vyre.i8: vyre.u8, vyre.u16: vyre.i16, vyre.i16: vyre.u16}[ty]
    k = ProgramBuilder(f"narrow_{ty}", 64)
    a, f = k.buffer("a", ty), k.buffer("f", F32)
    o, w = k.buffer("o", ty, "write"), k.buffer("w", ty.promoted, "write")
    g, h = k.buffer("g", ty, "write"), k.buffer("h", other, "write")
    i = k.global_linear_id()
    with k.if_(i < a.length()):
        o[i] = a[i] * 3 + 1
        w[i] = a[i]
        g[i] = f[i].cast(ty)
        h[i] = k.lit(0, ty.promoted) + a[i]  # (a u32 / i32 into the other type: wraps)
    return k.build()


_SPECIAL_F = [np.nan, -np.inf, np.inf, 1e9, -1e9, 127.9, 128.5, -128.5, -129.0, 255.5,
              256.0, -0.7, 65535.9, 65536.0, 32767.5, -32768.9, -32769.0, -0.0]


@pytest.mark.parametrize("ty", NARROW, ids=str)
@pytest.mark.parametrize("n", [1, 37, 1000])
def test_loads_stores_casts_are_exact(backend: BaseBackend, ty: ScalarType, n: int) -> None:
    a = _full_range(ty, n)
    f = np.array((_SPECIAL_F + list(_RNG.normal(0, 40000, n)))[:n], np.float32)
    inputs = {"a": a, "f": f, "o": n, "w": n, "g": n, "h": n}
    got = backend.dispatch(_arith(ty), inputs, DispatchConfig.for_elements(n, 64))
    assert got["o"].dtype == ty.numpy and got["o"].shape == (n,)
    np.testing.assert_array_equal(got["o"], (a.astype(np.int64) * 3 + 1).astype(ty.numpy))
    np.testing.assert_array_equal(got["w"], a.astype(ty.promoted.numpy))
    info = np.iinfo(ty.numpy)
    sat = np.where(np.isnan(f), 0, np.clip(np.trunc(np.nan_to_num(f, posinf=1e10, neginf=-1e10)),
                                           info.min, info.max))
    np.testing.assert_array_equal(got["g"], sat.astype(ty.numpy))
    np.testing.assert_array_equal(got["h"], a.view(got["h"].dtype))


@pytest.mark.parametrize("ty", NARROW, ids=str)
def test_storage_is_packed_and_round_trips(backend: BaseBackend, ty: ScalarType) -> None:
    n = 13  # not a whole number of u32 words
    a = _full_range(ty, n)
    buf = backend.allocate_device_buffer(n * ty.byte_size)
    try:
        assert buf.byte_len == n * ty.byte_size
        backend.write(buf, a)
        back = backend.read(buf, 0, buf.byte_len, ty.numpy)
        assert back.dtype == ty.numpy
        np.testing.assert_array_equal(back, a)
        # a kernel sees n elements (Length) and copies them exactly
        k = ProgramBuilder("copy_len", 64)
        src, dst = k.buffer("src", ty), k.buffer("dst", ty, "write")
        ln = k.buffer("ln", U32, "write")
        i = k.global_linear_id()
        with k.if_(i < src.length()):
            dst[i] = src[i]
        with k.if_(i == 0):
            ln[0] = src.length()
        got = backend.dispatch(k.build(), {"src": a, "dst": n, "ln": 1},
                               DispatchConfig.for_elements(n, 64))
        np.testing.assert_array_equal(got["dst"], a)
        assert got["ln"][0] == n
    finally:
        backend.free(buf)


def test_neighbouring_byte_stores_are_all_kept(backend: BaseBackend) -> None:
    """Invocation i stores byte i (and, later in the same dispatch, byte i again): on wgpu
    four invocations write into one u32 word at once, and every byte must survive."""
    n = 4096 + 3
    k = ProgramBuilder("bytes_by_invocation", 64)
    out = k.buffer("out", vyre.u8, "read_write")
    i = k.global_linear_id()
    with k.if_(i < out.length()):
        out[i] = i * 7 + 1
        out[i] = out[i] + (i >> 8)
    got = backend.dispatch(k.build(), {"out": np.zeros(n, np.uint8)},
                           DispatchConfig.for_elements(n, 64))
    idx = np.arange(n, dtype=np.uint32)
    np.testing.assert_array_equal(got["out"], ((idx * 7 + 1) % 256 + (idx >> 8)) % 256)


def test_out_of_range_loads_read_zero_and_stores_do_nothing(backend: BaseBackend) -> None:
    k = ProgramBuilder("narrow_oob", 8)
    a, o = k.buffer("a", vyre.i8), k.buffer("o", vyre.i16, "read_write")
    i = k.global_linear_id()
    o[i] = a[i + 3] - 1  # i + 3 >= 6 reads 0; i >= 6 stores nothing
    a_in = np.array([-1, -2, -3, -4, -5, -6], np.int8)
    o_in = np.array([100, 100, 100, 100, 100, 100], np.int16)
    got = backend.dispatch(k.build(), {"a": a_in, "o": o_in}, DispatchConfig(grid=(1, 1, 1)))
    np.testing.assert_array_equal(got["o"], [-5, -6, -7, -1, -1, -1])


@pytest.mark.parametrize("ty", [vyre.u8, vyre.i16], ids=str)
def test_workgroup_array_of_narrow_type(backend: BaseBackend, ty: ScalarType) -> None:
    """Each invocation writes its element of a shared array, then reads its neighbour's
    after the barrier (a reversal within the workgroup)."""
    wg, n = 64, 128
    k = ProgramBuilder(f"narrow_shared_{ty}", wg)
    a, o = k.buffer("a", ty), k.buffer("o", ty, "write")
    sh = k.shared("sh", ty, wg + 3)  # (not a whole number of words)
    i, lid = k.global_linear_id(), k.local_id(0)
    sh[lid] = a[i] + 1
    k.barrier()
    o[i] = sh[wg - 1 - lid]
    a_in = _full_range(ty, n)
    got = backend.dispatch(k.build(), {"a": a_in, "o": n}, DispatchConfig(grid=(n // wg, 1, 1)))
    plus = (a_in.astype(np.int64) + 1).astype(ty.numpy)
    np.testing.assert_array_equal(got["o"], plus.reshape(-1, wg)[:, ::-1].reshape(-1))


def test_decorated_kernel_reads_bytes(backend: BaseBackend) -> None:
    @vyre.kernel(workgroup_size=64)
    def upper(text: vyre.Buffer[vyre.u8], out: vyre.Output[vyre.u8]) -> None:
        i = vyre.global_linear_id()
        c = text[i]
        out[i] = vyre.select((c >= 97) & (c <= 122), c - 32, c)

    data = np.frombuffer(b"Hello, bytes! zz{", np.uint8)
    got = upper.launch(backend, data.size, data, out=np.zeros(data.size, np.uint8))
    got = got["out"] if isinstance(got, dict) else got
    assert bytes(np.asarray(got)) == b"HELLO, BYTES! ZZ{"


def test_narrow_types_survive_the_wire_format() -> None:
    p = _arith(vyre.i8)
    assert from_json(to_json(p)) == p


def test_cuda_source_compiles_with_nvrtc() -> None:
    pytest.importorskip("cuda.bindings.nvrtc")
    from vyre.backends.cuda import compile_program
    from vyre.tools.conformance import CASES

    narrow = [c.program for c in CASES.values()
              if any(b.ty.is_narrow for b in c.program.buffers)]
    assert len(narrow) >= 4 + 7  # narrow_from_* and every cast_from_* (narrow targets)
    from vyre.programs import cpp_kernels as cpp  # the C front end's byte stages

    front = [cpp.splice_flags_program(256), cpp.splice_scatter_program(256),
             cpp.finalize_program(256)]
    for p in [*(_arith(ty) for ty in NARROW), *narrow, *front]:
        c = compile_program(p, "sm_90")
        assert c.cubin.startswith(b"\x7fELF"), p.name


# ------------------------------------------------------------------ refusals

def _narrow_program(body: tuple[N.StmtNode, ...], params: tuple[N.ParamDecl, ...] = ()
                    ) -> N.Program:
    return N.Program(
        name="bad_narrow",
        buffers=(N.BufferDecl(name="a", ty=vyre.u8, access="read_write"),),
        params=params, body=body,
    )


_LOAD = N.Load(buffer="a", index=N.Const(ty=U32, value=0), ty=vyre.u8)


@pytest.mark.parametrize("program, phrases", [
    (_narrow_program((N.Store(buffer="a", index=N.Const(ty=U32, value=0), value=N.Binary(
        op="add", a=_LOAD, b=_LOAD, ty=vyre.u8)),)),
     ["binary add on a u8 value", "cast the value to u32"]),
    (_narrow_program((N.Let(name="x", value=_LOAD),)), ["a local on a u8 value", "u32"]),
    (_narrow_program((N.Atomic(op="add", buffer="a", index=N.Const(ty=U32, value=0),
                               value=N.Const(ty=vyre.u8, value=1)),)),
     ["8/16-bit elements have no atomics", "u32 or i32 buffer"]),
    (_narrow_program((), (N.ParamDecl(name="p", ty=vyre.i16),)),
     ["param 'p' has type i16", "declare the param i32"]),
    (_narrow_program((N.Store(buffer="a", index=N.Const(ty=U32, value=0),
                              value=N.Const(ty=U32, value=1)),)),
     ["store of a u32 value into 'a' (u8 elements)", "cast the value to u8"]),
], ids=["arithmetic", "local", "atomic", "param", "store_u32"])
def test_validator_refuses_narrow_misuse(program: N.Program, phrases: list[str]) -> None:
    with pytest.raises(InvalidProgram) as info:
        vyre.validate(program)
    for p in phrases:
        assert p in str(info.value)


def test_builder_refuses_narrow_misuse() -> None:
    k = ProgramBuilder("bad_narrow_builder")
    a = k.buffer("a", vyre.u8, "read_write")
    f = k.buffer("f", F32)
    with pytest.raises(vyre.BackendError, match=r"cannot store a f32 into 'a' \(u8\).*\.cast\(u8\)"):
        a[0] = f[0]
    with pytest.raises(vyre.BackendError, match=r"no atomics.*u32 or i32 buffer"):
        a.atomic_add(0, 1)
    with pytest.raises(vyre.BackendError, match=r"declare it ty=u32"):
        k.let(0, ty=vyre.u8)
    with pytest.raises(vyre.BackendError, match=r"param 'p'.*declare it i32"):
        k.param("p", vyre.i8)
    with pytest.raises(vyre.BackendError, match="does not fit in u8"):
        a[0] = 256


def test_dlpack_element_types_map_both_ways() -> None:
    """A DLPack int8/uint8/int16/uint16 tensor is a buffer of the narrow type, and back."""
    from vyre import dlpack as DL

    for ty in NARROW:
        dl = DL.dl_dtype(ty.numpy)
        assert (int(dl.bits), int(dl.lanes)) == (ty.bits, 1)
        got = DL.numpy_dtype(dl)
        assert got is not None and ScalarType.from_numpy(got) is ty


def test_cuda_host_path_passes_element_counts_of_narrow_buffers(tmp_path: Any) -> None:
    """On the stand-in driver (no GPU): a 13-byte u8 buffer and a 26-byte i16 one bind,
    compile and launch; the kernel's count arguments say 13 elements each."""
    import ctypes
    import sys
    from pathlib import Path

    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cuda_standin

    from vyre.backends.cuda import driver as D
    from vyre.backends.cuda.runtime import CudaBackend

    before = D._driver
    drv = cuda_standin.install(frozenset({"cuLaunchKernel"}))
    try:
        cuda = CudaBackend(0, cache_dir=str(tmp_path))
        try:
            k = ProgramBuilder("narrow_args", 64)
            a, o = k.buffer("a", vyre.u8), k.buffer("o", vyre.i16, "write")
            i = k.global_linear_id()
            o[i] = a[i]
            src = cuda.allocate_device_buffer(13)
            dst = cuda.allocate_device_buffer(26)
            bound = cuda.bind(k.build(), [src], [dst], DispatchConfig.for_elements(13, 64))
            cuda.dispatch_with_device_buffers(bound)
            assert [c[0] for c in drv.calls] == ["cuLaunchKernel"]
            params = cuda.launch_args(bound)[3]
            slots = (ctypes.c_void_p * 4).from_address(params)  # 2 pointers, 2 counts
            counts = [ctypes.c_uint32.from_address(slots[j]).value for j in (2, 3)]
            assert counts == [13, 13]
        finally:
            cuda.close()
    finally:
        D._driver = before
