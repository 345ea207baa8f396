"""What every example shares: run a computation on each available backend, check it bit for
bit against the reference backend, and write a PNG without any dependency beyond NumPy.

An example defines `run(backend) -> dict[str, np.ndarray]` (its outputs, as host arrays) and
calls `check_everywhere(run, backend_choice)`. The reference it compares a backend with is
`vyre.tools.testing.reference_for(backend, reference)`: the NumPy reference itself, or, on a
device whose float arithmetic flushes subnormals (NVIDIA's Vulkan driver), a reference in
the same flush mode, so "bit-identical" is the IR's exact promise on that device too.
"""

from __future__ import annotations

import argparse
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

import vyre
from vyre.tools.testing import reference_for

Outputs = dict[str, np.ndarray]
HERE = Path(__file__).resolve().parent


def parser(description: str) -> argparse.ArgumentParser:
    """The command line every example takes: `--backend B` (default: every available one)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--backend", default=None,
                   help="run on this backend only (default: every available backend; "
                        "`vyre probe` lists them)")
    return p


def backend_names(choice: str | None) -> list[str]:
    """The backends to run on: `choice`, or every backend available here."""
    if choice is not None:
        return [choice]
    return [a.name for a in vyre.available_backends() if a.available]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """True when the two arrays have one dtype and shape and the same bytes (NaNs included)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def mismatches(got: Outputs, want: Outputs) -> list[str]:
    """Each output of `got` that is not bit-identical to `want`, with its first difference."""
    bad = []
    for name in want:
        g, w = got.get(name), want[name]
        if g is None:
            bad.append(f"{name}: missing")
        elif not same_bits(g, w):
            if g.shape != w.shape or g.dtype != w.dtype:
                bad.append(f"{name}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}")
            else:
                gb = g.reshape(-1).view(np.uint8).reshape(g.size, -1)
                wb = w.reshape(-1).view(np.uint8).reshape(w.size, -1)
                diff = np.flatnonzero((gb != wb).any(axis=1))
                i = int(diff[0])
                bad.append(f"{name}: {diff.size} of {g.size} elements differ, first at "
                           f"{i}: {g.reshape(-1)[i]!r} vs {w.reshape(-1)[i]!r}")
    return bad


def check_everywhere(run: Callable[[vyre.BaseBackend], Outputs],
                     choice: str | None) -> tuple[Outputs, bool]:
    """Run `run` on each backend (see `backend_names`) and on the reference in that backend's
    float mode; print one line per backend. Returns the reference's outputs and whether
    every backend matched it bit for bit."""
    ok = True
    ref_outputs: dict[int, Outputs] = {}
    first: Outputs | None = None
    with vyre.get_backend("reference") as reference:
        for name in backend_names(choice):
            try:
                gpu = vyre.get_backend(name)
            except vyre.BackendError as exc:      # e.g. --backend cuda on a machine without
                print(f"  {name}: {exc}")          # one: the reason and the fix, then fail
                ok = False
                continue
            with gpu:
                got = run(gpu)
                ref = reference_for(gpu, reference)
                if id(ref) not in ref_outputs:
                    ref_outputs[id(ref)] = got if ref is gpu else run(ref)
                want = ref_outputs[id(ref)]
                bad = mismatches(got, want)
                if first is None:
                    first = want
                if bad:
                    ok = False
                    print(f"  {name}: MISMATCH against {ref.id}: " + "; ".join(bad))
                else:
                    print(f"  {name}: bit-identical to {ref.id} "
                          f"({', '.join(sorted(want))})")
    if first is None:
        raise SystemExit(f"no backend ran (asked for {choice!r}); `vyre probe` lists them")
    return first, ok


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Write an (H, W, 3) uint8 image as an 8-bit RGB PNG: a signature, IHDR, one
    zlib-compressed IDAT of filter-0 rows, IEND (the PNG spec's minimal file)."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"write_png takes an (H, W, 3) uint8 array, got {rgb.dtype}{rgb.shape}")
    h, w, _ = rgb.shape

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)
    png = (b"\x89PNG\r\n\x1a\n"
           + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
           + chunk(b"IEND", b""))
    Path(path).write_bytes(png)


def colormap(t: np.ndarray) -> np.ndarray:
    """Map values in [0, 1] to RGB (dark blue - red - yellow - white), as (..., 3) uint8."""
    stops = np.array([[0, 0, 32], [40, 0, 120], [200, 30, 60], [255, 160, 0], [255, 255, 230]],
                     dtype=np.float64)
    x = np.clip(np.asarray(t, np.float64), 0.0, 1.0) * (len(stops) - 1)
    i = np.minimum(x.astype(np.int64), len(stops) - 2)
    f = (x - i)[..., None]
    return np.round(stops[i] * (1 - f) + stops[i + 1] * f).astype(np.uint8)


def finish(ok: bool) -> int:
    """The exit status: 0 when every backend matched, 1 (with a line saying so) otherwise."""
    if not ok:
        print("FAILED: a backend's result differs from the reference (see above)")
        return 1
    return 0
