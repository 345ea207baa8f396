"""The program library as a user meets it (issue 31, item 5): histograms of any bin count
(past workgroup memory: the global-atomic path) exact against NumPy on every backend;
compaction returning positions; a public `Plan` spliced into a user's own pipeline; and
every argument error a `vyre.BackendError` that names the fix."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
import vyre.programs
from vyre.backend import BaseBackend
from vyre.programs import LibraryArgumentError, Plan, run_plan
from vyre.programs import histogram as H
from vyre.programs import matmul as M
from vyre.programs import radix_sort as RS
from vyre.programs import reduce as R
from vyre.programs import scan as S
from vyre.programs import stencil as ST
from vyre.programs._common import f32, u32

# ------------------------------------------------------------------ histogram, any bin count


@pytest.mark.parametrize("nbins", [H.MAX_BINS, H.MAX_BINS + 1, 5000, 70_000])
def test_histogram_past_workgroup_memory_u32(backend: BaseBackend, nbins: int) -> None:
    x = np.random.default_rng(nbins).integers(0, nbins + 100, 20_000).astype(np.uint32)
    x[:50] = nbins - 1                                 # the last bin, and collisions
    got = H.histogram_host(backend, x, nbins)
    np.testing.assert_array_equal(got, np.bincount(x[x < nbins], minlength=nbins))
    assert got.dtype == np.uint32 and got.size == nbins


def test_histogram_past_workgroup_memory_i32_f32_strided(backend: BaseBackend) -> None:
    rng = np.random.default_rng(5)
    xi = rng.integers(-100, 9000, 30_000).astype(np.int32)
    got = H.histogram_host(backend, xi, 8192, workgroup_size=64, per_thread=2, max_groups=3)
    np.testing.assert_array_equal(got, np.bincount(xi[(xi >= 0) & (xi < 8192)], minlength=8192))
    xf = rng.standard_normal(30_000).astype(np.float32)
    xf[:3] = [np.nan, np.inf, -np.inf]
    got = H.histogram_host(backend, xf, 10_000, lo=-4.0, scale=1250.0)
    np.testing.assert_array_equal(got, H.histogram_reference(xf, 10_000, lo=-4.0, scale=1250.0))
    assert got.sum() == ((xf >= -4) & (xf < 4)).sum()


def test_histogram_global_path_uses_no_workgroup_memory() -> None:
    assert H.histogram_program(H.MAX_BINS).workgroup_arrays
    assert not H.histogram_program(H.MAX_BINS + 1).workgroup_arrays


@pytest.mark.parametrize("nbins", [0, -3, H.MAX_ANY_BINS + 1, 2.5, True])
def test_histogram_bad_bin_count_is_a_backend_error(reference: BaseBackend, nbins: object
                                                    ) -> None:
    with pytest.raises(LibraryArgumentError, match=r"nbins must be an int in 1\.\.16777216.*"
                                                   r"histogram the range in parts"):
        H.histogram_host(reference, np.zeros(4, np.uint32), nbins)  # type: ignore[arg-type]


# ------------------------------------------------------------------ compaction with positions


@pytest.mark.parametrize("n", [0, 1, 1000, 70_000])
def test_compact_returns_positions(backend: BaseBackend, n: int) -> None:
    x = np.random.default_rng(n).integers(-5, 5, n).astype(np.int32)
    values, idx = S.compact_indices_host(backend, x)
    want = np.flatnonzero(x != 0)
    np.testing.assert_array_equal(idx, want.astype(np.uint32))
    np.testing.assert_array_equal(values, x[want])
    assert idx.dtype == np.uint32
    np.testing.assert_array_equal(S.compact_host(backend, x), x[want])  # values only: as before


def test_compact_positions_with_a_predicate(backend: BaseBackend) -> None:
    x = np.random.default_rng(9).standard_normal(3000).astype(np.float32)

    def positive(v):  # type: ignore[no-untyped-def]
        return v > 0.0

    values, idx = S.compact_indices_host(backend, x, positive)
    np.testing.assert_array_equal(idx, np.flatnonzero(x > 0))
    np.testing.assert_array_equal(values, x[x > 0])


# ------------------------------------------------------------------ a public Plan


def test_plan_is_public_and_splices_into_a_pipeline(backend: BaseBackend) -> None:
    assert vyre.programs.Plan is Plan and Plan.__doc__ and "splice" in Plan.__doc__

    @vyre.kernel(workgroup_size=64)
    def square(x: vyre.InOut[vyre.u32]):
        i = vyre.global_linear_id()
        with vyre.if_(i < x.length()):
            x[i] = x[i] * x[i]

    n = 5000
    data = np.arange(n, dtype=np.uint32) % 97
    src = backend.allocate_device_buffer(data.nbytes)
    dst = backend.allocate_device_buffer(data.nbytes)
    try:
        backend.write(src, data)
        plan = S.plan_scan(backend, src, dst, n, u32, inclusive=True)
        assert isinstance(plan, Plan) and plan.steps
        steps = [square.step(n, src), *plan.steps]        # my step, then the library's scan
        out = backend.pipeline(steps).run(read=[dst]).reads[0]
        np.testing.assert_array_equal(out, np.cumsum(data * data, dtype=np.uint32))
        run_plan(backend, Plan())                         # an empty plan runs nothing
    finally:
        for b in (src, dst, *plan.temporaries):
            backend.free(b)


# ------------------------------------------------------------------ errors name the fix


def _errors(reference: BaseBackend, buf: object) -> list[tuple[object, str]]:
    a = np.zeros((2, 3), np.float32)
    cases: list[tuple[object, str]] = [
        (lambda: M.matmul_host(reference, a.astype(np.float64), a.T), "astype(np.float32)"),
        (lambda: M.matmul_host(reference, a, a), "transpose one of them"),
        (lambda: R.reduce_program("mean", f32), "one of ('sum', 'min', 'max')"),
        (lambda: R.reduce_program("sum", vyre.f64), "convert the data first"),
        (lambda: ST.stencil_program("wrap"), "boundary must be one of"),
        (lambda: ST.stencil_host(reference, np.zeros(4, np.float32)), ".reshape(H, W)"),
        (lambda: RS.radix_sort_host(reference, np.zeros(4, np.uint32), np.zeros(3, np.uint32)),
         "np.arange(keys.size, dtype=np.uint32)"),
        (lambda: S.plan_scan(reference, buf, buf, 4, u32, True), "allocate a second buffer"),
        (lambda: M.matmul_program(per_thread=3), "power of two"),
    ]
    return cases


def test_library_errors_are_backend_errors_naming_the_fix(reference: BaseBackend) -> None:
    buf = reference.allocate_device_buffer(16)
    try:
        for call, fix in _errors(reference, buf):
            with pytest.raises(vyre.BackendError) as info:
                call()  # type: ignore[operator]
            assert isinstance(info.value, LibraryArgumentError), info.value
            assert isinstance(info.value, ValueError)          # what these raised before
            assert fix in str(info.value), str(info.value)
    finally:
        reference.free(buf)


# ------------------------------------------------------------------ counts from the device


@pytest.mark.parametrize("nbins", [64, 3000])
def test_histogram_of_a_compaction_reads_its_count_on_the_device(backend: BaseBackend,
                                                                  nbins: int) -> None:
    """Compaction writes how many it kept to a device buffer; the histogram of the kept
    values reads that count there, in one pipeline, with no readback between."""
    x = np.random.default_rng(nbins).integers(0, 3 * nbins, 9000).astype(np.uint32)
    x[::3] = 0                                        # dropped by the compaction
    n = x.size
    src = backend.allocate_device_buffer(x.nbytes)
    kept = backend.allocate_device_buffer(x.nbytes)
    count = backend.allocate_device_buffer(4)
    bins = backend.allocate_device_buffer(nbins * 4)
    try:
        backend.write(src, x)
        backend.write(kept, np.ones(n, np.uint32))      # stale values past the count: bin 1
        plan = S.plan_compact(backend, src, kept, count, n, u32)
        plan.extend(H.plan_histogram(backend, kept, n, bins, nbins, count=count))
        run_plan(backend, plan)
        got = backend.read(bins, dtype=np.uint32)
        nz = x[x != 0]
        np.testing.assert_array_equal(got, np.bincount(nz[nz < nbins], minlength=nbins))
        assert int(backend.read(count, dtype=np.uint32)[0]) == nz.size < n
    finally:
        for b in (src, kept, count, bins):
            backend.free(b)


def test_new_library_programs_compile_for_cuda() -> None:
    """No GPU here: NVRTC compiles the global-atomic histogram, its device-count form and
    compaction with positions (tests on every backend run them where CUDA is present)."""
    from vyre.backends.cuda import compile_program

    for p in (H.histogram_program(5000, f32), H.histogram_program(5000, u32, 256, 8, True, True),
              H.histogram_program(100, u32, device_count=True),
              S.compact_scatter_program(u32, with_indices=True)):
        assert type(compile_program(p, "sm_90")).__name__ == "CompiledCubin", p.name
