"""The six kernels of tests/kernels_six.py: the `@vyre.kernel` version and the builder
version give bit-identical results on every backend, and both match the reference
backend bit for bit (and NumPy where its arithmetic order is the kernel's)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import vyre
from vyre import DispatchConfig, Step
from vyre.backend import BaseBackend
from vyre.ir.nodes import Program

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels_six as K


def _host(backend: BaseBackend, prog: Program, inputs: dict[str, object],
          cfg: DispatchConfig) -> dict[str, np.ndarray]:
    return backend.dispatch(prog, inputs, cfg)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()  # bit for bit (NaN payloads and -0.0 included)


def test_stencil(backend: BaseBackend, reference: BaseBackend) -> None:
    h, w = 37, 53
    u = np.random.default_rng(1).standard_normal((h, w)).astype(np.float32)
    dec = K.stencil_decorated.launch(backend, vyre.xyz(w, h), u, h * w, H=h, W=w)["out"]
    cfg = DispatchConfig.for_shape((w, h), (16, 16), params={"H": h, "W": w})
    bld = _host(backend, K.stencil_builder(), {"u": u, "out": h * w}, cfg)["out"]
    _same(dec, bld)
    _same(dec, K.stencil_decorated.launch(reference, vyre.xyz(w, h), u, h * w, H=h, W=w)["out"])
    p = np.pad(u, 1, mode="edge")
    want = (((np.float32(-4) * u + p[:-2, 1:-1]) + p[2:, 1:-1]) + p[1:-1, :-2]) + p[1:-1, 2:]
    _same(dec.reshape(h, w), want)


def test_reduction(backend: BaseBackend, reference: BaseBackend) -> None:
    n = 1000
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    groups = -(-n // K.WG)
    dec = K.block_sum_decorated.launch(backend, n, x, groups)["partial"]
    cfg = DispatchConfig.for_elements(n, K.WG)
    bld = _host(backend, K.block_sum_builder(), {"x": x, "partial": groups}, cfg)["partial"]
    _same(dec, bld)
    _same(dec, K.block_sum_decorated.launch(reference, n, x, groups)["partial"])
    np.testing.assert_allclose(dec.sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)


def test_scan(backend: BaseBackend, reference: BaseBackend) -> None:
    n = 700
    x = np.random.default_rng(3).integers(0, 1000, n).astype(np.uint32)
    dec = K.block_scan_decorated.launch(backend, n, x, n)["y"]
    cfg = DispatchConfig.for_elements(n, K.WG)
    _same(dec, _host(backend, K.block_scan_builder(), {"x": x, "y": n}, cfg)["y"])
    _same(dec, K.block_scan_decorated.launch(reference, n, x, n)["y"])
    want = np.concatenate([np.cumsum(x[s:s + K.WG], dtype=np.uint32) for s in range(0, n, K.WG)])
    _same(dec, want)


def _lu(backend: BaseBackend, a0: np.ndarray, steps: list[Step]) -> np.ndarray:
    n = a0.shape[0]
    res = backend.pipeline(steps).run(repeat=n - 1, read=[steps[0].outputs["a"]])
    return res.reads[0].reshape(n, n)


def test_lu_solver_one_step_with_repeat(backend: BaseBackend, reference: BaseBackend) -> None:
    """A time-stepped kernel: n - 1 rounds of two Steps whose param k is the round index."""
    n = 24
    rng = np.random.default_rng(4)
    a0 = (rng.standard_normal((n, n)) + n * np.eye(n)).astype(np.float32)  # no pivoting needed

    def run(be: BaseBackend, decorated: bool) -> np.ndarray:
        buf = be.allocate_device_buffer(a0.nbytes, label="a")
        be.write(buf, a0)
        try:
            if decorated:
                up, sc = K.lu_update_decorated, K.lu_scale_decorated
                steps = [up.step((n, n), buf, n=n, index_param="k"),
                         sc.step(n, buf, n=n, index_param="k")]
            else:
                up_p, sc_p = K.lu_update_builder(), K.lu_scale_builder()
                steps = [
                    Step(up_p, {}, {"a": buf}, DispatchConfig.for_shape((n, n), (16, 16),
                         params={"n": n}), index_param="k"),
                    Step(sc_p, {}, {"a": buf}, DispatchConfig.for_elements(n, 64,
                         params={"n": n}), index_param="k"),
                ]
            return _lu(be, a0, steps)
        finally:
            be.free(buf)

    dec = run(backend, True)
    assert dec.dtype == np.float32  # a pipeline read comes back typed as the steps declare
    _same(dec, run(backend, False))
    _same(dec, run(reference, True))
    lower = np.tril(dec, -1).astype(np.float64) + np.eye(n)
    upper = np.triu(dec).astype(np.float64)
    np.testing.assert_allclose(lower @ upper, a0, atol=1e-3)


def test_histogram(backend: BaseBackend, reference: BaseBackend) -> None:
    n, nbins = 5000, 300  # two rounds of bins per workgroup
    src = np.random.default_rng(5).integers(0, nbins + 20, n).astype(np.uint32)
    zero = np.zeros(nbins, np.uint32)
    dec = K.histogram_decorated.launch(backend, n, src, zero, n=n, nbins=nbins)["bins"]
    cfg = DispatchConfig.for_elements(n, K.WG, params={"n": n})
    bld = _host(backend, K.histogram_builder(nbins), {"src": src, "bins": zero}, cfg)["bins"]
    _same(dec, bld)
    _same(dec, K.histogram_decorated.launch(reference, n, src, zero, n=n, nbins=nbins)["bins"])
    _same(dec, np.bincount(src[src < nbins], minlength=nbins).astype(np.uint32))
    assert K.histogram_decorated.build(nbins=300) is K.histogram_decorated.build(nbins=300)


def test_matmul(backend: BaseBackend, reference: BaseBackend) -> None:
    n = 37
    rng = np.random.default_rng(6)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    dec = K.matmul_decorated.launch(backend, (n, n), a, b, n * n, n=n)["c"]
    cfg = DispatchConfig.for_shape((n, n), (K.T, K.T), params={"n": n})
    bld = _host(backend, K.matmul_builder(), {"a": a, "b": b, "c": n * n}, cfg)["c"]
    _same(dec, bld)
    _same(dec, K.matmul_decorated.launch(reference, (n, n), a, b, n * n, n=n)["c"])
    np.testing.assert_allclose(dec.reshape(n, n), a @ b, rtol=1e-4, atol=1e-4)


def test_decorated_and_builder_programs_have_the_same_shape() -> None:
    """Same declarations (buffers, params, arrays) and statement count: one notation, one
    kernel."""
    for name, (dec, bld) in K.PAIRS.items():
        decs = dec if isinstance(dec, tuple) else (dec,)
        blds = bld if isinstance(bld, tuple) else (bld,)
        for d, b in zip(decs, blds):
            p, q = d.program, b()
            assert [(x.name, x.ty, x.access) for x in p.buffers] == \
                [(x.name, x.ty, x.access) for x in q.buffers], name
            assert [(x.name, x.ty) for x in p.params] == [(x.name, x.ty) for x in q.params], name
            assert p.workgroup_size == q.workgroup_size, name
            assert len(p.body) == len(q.body), name
            assert isinstance(d, vyre.Kernel)


def test_decorated_kernels_compile_for_cuda_and_wgsl_without_a_gpu() -> None:
    """The generated CUDA C compiles with NVRTC (no driver needed) and the WGSL generates,
    for every decorated kernel, so a GPU run meets no compile surprise."""
    from vyre.backends.cuda import compile_source
    from vyre.backends.cuda.render import generate as cuda_source
    from vyre.backends.wgpu.render import generate as wgsl_source

    kernels = [K.stencil_decorated, K.block_sum_decorated, K.block_scan_decorated,
               K.lu_update_decorated, K.lu_scale_decorated, K.matmul_decorated]
    programs = [k.program for k in kernels] + [K.histogram_decorated.build(nbins=300)]
    for prog in programs:
        assert "@compute" in wgsl_source(prog).source
        assert compile_source(cuda_source(prog).source, "sm_90"), prog.name


def test_kernel_lines_report_is_what_the_docs_quote(capsys: object) -> None:
    """scripts/kernel_lines.py prints the table its docstring and the guide quote, and its
    recorded "before" figures are what git history gives (where the checkout has it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import kernel_lines

    kernel_lines.main()
    printed = capsys.readouterr().out.splitlines()  # type: ignore[attr-defined]
    quoted = [line.strip() for line in (kernel_lines.__doc__ or "").splitlines()[-7:]]
    assert [line.strip() for line in printed] == quoted
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide.md").read_text()
    assert all(line in guide for line in quoted[1:])
    assert kernel_lines.before_counts() == kernel_lines.BEFORE
