"""The examples in examples/ run, agree bit for bit on every available backend (each
example's own check, through its `main`), and compute the right thing: each is compared here
with an independent host computation (NumPy or plain Python, same f32 operations in the
same order) on the reference backend, which the examples' check ties every other backend to.

Sizes are small so the whole file runs in well under a minute on lavapipe.
"""

from __future__ import annotations

import importlib
import struct
import sys
import zlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import vyre

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str) -> ModuleType:
    """Import examples/<name>.py the way `python examples/<name>.py` sees it."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def read_png(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB, filter-0 PNG as written by the harness."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF
        chunks[tag] = body
        pos += 12 + length
    w, h, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour) == (8, 2)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()
    return rows[:, 1:].reshape(h, w, 3)


@pytest.fixture(scope="module")
def ref():
    with vyre.get_backend("reference") as b:
        yield b


# Every example through its command line: exit status 0 means every available backend
# matched the reference bit for bit (and its own host check passed).
MAINS = {
    "mandelbrot": ["--width", "48", "--height", "32", "--max-iter", "40"],
    "heat": ["--size", "24", "--steps", "20"],
    "nbody": ["--bodies", "40", "--steps", "3"],
    "wordcount": [],
    "monte_carlo_pi": ["--points", "4096"],
    "spmv": ["--grid", "8", "--iters", "3"],
    "equalize": ["--size", "40"],
}
PICTURES = ("mandelbrot", "heat", "equalize")


@pytest.mark.parametrize("name", sorted(MAINS))
def test_example_main_matches_on_every_backend(name, tmp_path, capsys):
    args = list(MAINS[name])
    if name in PICTURES:
        args += ["--out", str(tmp_path / f"{name}.png")]
    assert example(name).main(args) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for a in vyre.available_backends():
        if a.available:
            assert f"  {a.name}: bit-identical to reference" in out
    if name in PICTURES:
        img = read_png(tmp_path / f"{name}.png")
        assert img.shape[2] == 3 and len(np.unique(img.reshape(-1, 3), axis=0)) > 4


def test_mandelbrot_counts_match_numpy(ref):
    m = example("mandelbrot")
    w, h, it = 40, 30, 60
    got = m.compute(ref, w, h, it)["counts"]
    step = np.float32(3.0 / w)
    x0, y0 = np.float32(-2.2), np.float32(step * h / 2)
    cr = x0 + np.arange(w, dtype=np.float32)[None, :] * step
    ci = y0 - np.arange(h, dtype=np.float32)[:, None] * step
    cr, ci = np.broadcast_to(cr, (h, w)), np.broadcast_to(ci, (h, w))
    zr, zi = np.zeros((h, w), np.float32), np.zeros((h, w), np.float32)
    n = np.zeros((h, w), np.uint32)
    two, four = np.float32(2), np.float32(4)
    for _ in range(it):
        live = zr * zr + zi * zi <= four
        t = zr * zr - zi * zi + cr
        zi = np.where(live, two * zr * zi + ci, zi)
        zr = np.where(live, t, zr)
        n += live
    assert np.array_equal(got, n)
    assert (got == it).any() and (got < 3).any()


def test_heat_matches_numpy(ref):
    heat = example("heat")
    got = heat.simulate(ref, 20, 12)["u"]
    assert np.array_equal(got, heat.numpy_steps(20, 12))


def test_nbody_matches_numpy(ref):
    nb = example("nbody")
    n, steps, dt, eps = 24, 3, 0.01, 0.05
    got = nb.simulate(ref, n, steps, dt, eps)
    body, vel = nb.initial(n)
    f = np.float32
    dt32, eps2 = f(dt), f(eps * eps)
    for _ in range(steps):
        acc = np.zeros((n, 3), np.float32)
        for j in range(n):
            d = body[j, :3][None, :] - body[:, :3]
            inv = f(1) / np.sqrt(((d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) + d[:, 2] * d[:, 2])
                                 + eps2)
            s = body[j, 3] * inv * inv * inv
            acc += d * s[:, None]
        vel[:, :3] = vel[:, :3] + dt32 * acc
        body[:, :3] = body[:, :3] + dt32 * vel[:, :3]
    assert np.array_equal(got["vel"], vel)
    assert np.array_equal(got["body"], body)


def test_wordcount_matches_python(ref):
    wc = example("wordcount")
    text = b"  Hello, world!\n\tA\x0bB\x0cc  \r\nsupercalifragilisticexpialidocious" * 3 + b"x"
    got = wc.count(ref, text)
    want = wc.python_count(text)
    for k in want:
        assert np.array_equal(got[k], want[k]), k
    assert got["counts"].tolist() == [len(text.split()), 6]
    empty = wc.count(ref, b"")
    assert empty["counts"].tolist() == [0, 0] and not empty["letters"].any()


def test_monte_carlo_matches_numpy_philox(ref):
    mc = example("monte_carlo_pi")
    key = (12345, 0x5EED)
    got = mc.estimate(ref, 8192, key)
    assert int(got["inside"][0]) == mc.count_numpy(8192 // mc.SAMPLES, key)
    kat = np.array([v for _, _, r in mc.KAT for v in r], np.uint32)
    assert np.array_equal(got["kat"], kat)
    ctrs = np.array([c for c, _, _ in mc.KAT], np.uint32)
    for i, (_, k, r) in enumerate(mc.KAT):   # the host Philox passes the known answers too
        assert mc.philox_numpy(ctrs[i:i + 1], k)[0].tolist() == list(r)


def test_spmv_matches_python(ref):
    sp = example("spmv")
    rp, cols, vals = sp.laplacian(6)
    x = np.random.default_rng(3).random(36, dtype=np.float32)
    got = sp.power_iteration(ref, 6, 0)["y"]
    assert np.array_equal(got, sp.spmv_python(rp, cols, vals, x))
    dense = np.zeros((36, 36))
    for r in range(36):
        dense[r, cols[rp[r]:rp[r + 1]]] = vals[rp[r]:rp[r + 1]]
    assert np.allclose(got, dense @ x, rtol=1e-6)


def test_equalize_matches_numpy(ref):
    eq = example("equalize")
    img = eq.low_contrast(48)
    got = eq.equalize(ref, img)
    assert np.array_equal(got["out"], eq.numpy_equalize(img))
    assert np.array_equal(got["counts"], np.bincount(img.ravel(), minlength=256))
    assert got["out"].max() == 255 and img.max() - img.min() == 70


def test_harness_reports_a_one_bit_difference(capsys):
    h = example("_harness")
    a = np.float32([1.0, 2.0, 3.0])
    b = a.copy()
    b.view(np.uint32)[1] ^= 1
    assert h.mismatches({"v": a}, {"v": a}) == []
    bad = h.mismatches({"v": b}, {"v": a})
    assert len(bad) == 1 and "1 of 3 elements differ, first at 1" in bad[0]
    assert h.mismatches({"v": a.astype(np.float64)}, {"v": a}) != []
    assert h.finish(False) == 1 and h.finish(True) == 0
    assert "FAILED" in capsys.readouterr().out


def test_harness_fails_a_backend_that_differs(capsys):
    h = example("_harness")
    names = h.backend_names(None)
    if names == ["reference"]:
        pytest.skip("only the reference backend is available here")
    # A computation that (wrongly) depends on which backend runs it must be caught.
    _, ok = h.check_everywhere(lambda gpu: {"k": np.array([gpu.kind == "reference"])}, None)
    assert not ok
    assert "MISMATCH" in capsys.readouterr().out


def test_example_kernels_compile_for_cuda() -> None:
    """No GPU here: NVRTC compiles every example kernel to a cubin (the H100 runs them)."""
    from vyre.backends.cuda import compile_program

    kernels = [example("mandelbrot").mandelbrot, example("heat").heat_step,
               example("nbody").kick, example("nbody").drift, example("wordcount").count_text,
               example("monte_carlo_pi").count_inside, example("monte_carlo_pi").philox_blocks,
               example("spmv").spmv_csr, example("equalize").remap]
    for k in kernels:
        assert type(compile_program(k.program, "sm_90")).__name__ == "CompiledCubin", k


def test_an_unknown_backend_fails_with_the_reason(capsys) -> None:
    with pytest.raises(SystemExit, match="no backend ran"):
        example("spmv").main(["--backend", "nope", "--grid", "4", "--iters", "1"])
    assert "no backend of that name is registered" in capsys.readouterr().out
