"""Where the WGSL printer keeps storageBarrier() (vyre/backends/wgpu/barriers.py): only
where an invocation can touch a written storage buffer before a Barrier. Programs that
need it still see each other's storage writes across a barrier on wgpu; the library's
block programs get workgroup-only barriers."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre.backend import BaseBackend
from vyre.backends.wgpu.barriers import needs_storage_barrier
from vyre.backends.wgpu.render import generate
from vyre.builder import ProgramBuilder
from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType
from vyre.programs.histogram import histogram_program
from vyre.programs.matmul import matmul_program
from vyre.programs.radix_sort import radix_count_program, radix_scatter_program
from vyre.programs.reduce import arg_reduce_program, reduce_program
from vyre.programs.scan import scan_block_program

f32, u32 = ScalarType.F32, ScalarType.U32


def _storage_barriers(program: Program, rw: frozenset[int] = frozenset()) -> int:
    return generate(program, rw).source.count("storageBarrier()")


def _publish() -> Program:
    """Invocation 0 of workgroup g writes out[65 g], a barrier, then every invocation t of
    it writes out[65 g + t + 1] = that + 1: needs the storage half of the barrier."""
    k = ProgramBuilder("publish", 64)
    out = k.buffer("out", u32, "read_write")
    t = k.let(k.local_index())
    base = k.let(k.workgroup_id(0) * 65)
    with k.if_(t == 0):
        out[base] = 41 + k.workgroup_id(0)
    k.barrier()
    out[base + t + 1] = out[base] + 1
    return k.build()


def _write_after_barriers() -> Program:
    k = ProgramBuilder("late_write", 32)
    src = k.buffer("src", u32)
    dst = k.buffer("dst", u32, "write")
    sh = k.shared("sh", u32, 32)
    t = k.let(k.local_index())
    sh[t] = src[t]
    k.barrier()
    dst[t] = sh[31 - t]
    return k.build()


def _loop_write() -> Program:
    """The write in one iteration precedes the next iteration's barrier."""
    k = ProgramBuilder("loop_write", 32)
    dst = k.buffer("dst", u32, "write")
    sh = k.shared("sh", u32, 32)
    t = k.let(k.local_index())
    with k.for_range(0, 4) as r:
        sh[t] = r + t
        k.barrier()
        dst[t] = sh[31 - t]
        k.barrier()
    return k.build()


def _read_written_before_barrier() -> Program:
    k = ProgramBuilder("read_then_barrier", 32)
    buf = k.buffer("buf", u32, "read_write")
    t = k.let(k.local_index())
    v = k.let(buf[t])
    k.barrier()
    buf[31 - t] = v
    return k.build()


def test_analysis() -> None:
    assert needs_storage_barrier(_publish())
    assert needs_storage_barrier(_loop_write())
    assert needs_storage_barrier(_read_written_before_barrier())
    late = _write_after_barriers()
    assert not needs_storage_barrier(late)
    assert needs_storage_barrier(late, frozenset({0}))  # src aliased with a writable slot
    assert _storage_barriers(late) == 0
    assert _storage_barriers(late, frozenset({0})) == 1
    assert _storage_barriers(_loop_write()) == 2


@pytest.mark.parametrize("program", [
    scan_block_program(f32, True, 256, 16, True),
    scan_block_program(u32, False, 256, 16, False, True),
    histogram_program(256, u32, 256, 16, True),
    reduce_program("sum", f32, 256, 16, True),
    arg_reduce_program("argmax", f32, False),
    matmul_program(),
    radix_count_program(),
    radix_scatter_program(True),
], ids=lambda p: p.name)
def test_library_block_programs_need_no_storage_barrier(program: Program) -> None:
    assert _storage_barriers(program) == 0
    assert "workgroupBarrier()" in generate(program).source


def test_storage_barrier_kept_where_observable(backends: dict[str, BaseBackend]) -> None:
    if "wgpu" not in backends:
        pytest.skip("wgpu is not available here")
    b = backends["wgpu"]
    prog = _publish()
    assert "storageBarrier()" in b.source(prog)
    groups = 3
    cfg = vyre.DispatchConfig(grid=(groups, 1, 1))
    got = b.dispatch(prog, {"out": np.zeros(65 * groups, np.uint32)}, cfg)["out"]
    want = np.concatenate([[41 + g] + [42 + g] * 64 for g in range(groups)]).astype(np.uint32)
    np.testing.assert_array_equal(got, want)
