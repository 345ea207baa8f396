"""C's double promotion in vyre (issue 31 item 4): in C, `0.33333 * x` with a float `x` is a
double multiply (the literal is a double, `x` is promoted, the product rounds to float only
where it is stored); in vyre a Python float takes the other operand's type, so the same
text is an f32 multiply. The documented idiom `(x.cast(f64) * 0.33333).cast(f32)` is C's
arithmetic, bit for bit: checked against gcc (PolyBench's jacobi-1d statement, compiled with
the real-kernel suite's IEEE flags) where gcc is present, and always against NumPy doing
C's steps."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import vyre
from vyre import Buffer, Output, f32, f64, u32
from vyre.backend import BaseBackend
from vyre.tools.realkernels.make_expected import CFLAGS, compiler

N = 120
C_SOURCE = r"""
#include <stdio.h>
int main(void) {
    static float A[%(n)d], B[%(n)d];
    for (int i = 0; i < %(n)d; i++) A[i] = ((float)i + 2.0f) / %(n)d.0f;
    for (int i = 1; i < %(n)d - 1; i++) B[i] = 0.33333 * (A[i-1] + A[i] + A[i+1]);
    fwrite(B, sizeof(float), %(n)d, stdout);
    return 0;
}
""".replace("%(n)d", str(N))


@vyre.kernel
def jacobi_c(A: Buffer[f32], B: Output[f32], n: u32) -> None:
    i = vyre.global_linear_id()
    if 0 < i < n - 1:  # C: 0.33333 is a double, so the float sum is promoted
        B[i] = ((A[i - 1] + A[i] + A[i + 1]).cast(f64) * 0.33333).cast(f32)


@vyre.kernel
def jacobi_f32(A: Buffer[f32], B: Output[f32], n: u32) -> None:
    i = vyre.global_linear_id()
    if 0 < i < n - 1:  # the same text without the cast: 0.33333 becomes an f32
        B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])


def _inputs() -> np.ndarray:
    return (np.arange(N, dtype=np.float32) + np.float32(2)) / np.float32(N)


def _c_steps(a: np.ndarray) -> np.ndarray:
    """C's evaluation: the float sum left to right, promoted, a double multiply, stored as
    float (round to nearest)."""
    out = np.zeros(N, np.float32)
    s = (a[:-2] + a[1:-1]) + a[2:]
    out[1:-1] = (s.astype(np.float64) * 0.33333).astype(np.float32)
    return out


def test_cast_idiom_is_cs_double_promotion(backend: BaseBackend) -> None:
    if not backend.supports("f64"):
        pytest.skip(f"{backend.capabilities().backend} has no f64")
    a = _inputs()
    got = jacobi_c.launch(backend, N, a, N, n=N)["B"]
    assert got.tobytes() == _c_steps(a).tobytes()
    plain = jacobi_f32.launch(backend, N, a, N, n=N)["B"]
    assert plain.tobytes() != got.tobytes()  # the f32 multiply the port silently got


def test_cast_idiom_equals_gcc(reference: BaseBackend, tmp_path: Path) -> None:
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler (gcc or $CC)")
    src, exe = tmp_path / "jacobi.c", tmp_path / "jacobi"
    src.write_text(C_SOURCE)
    subprocess.run([cc, *CFLAGS, "-o", str(exe), str(src)], check=True)
    expected = np.frombuffer(subprocess.run([str(exe)], check=True, capture_output=True).stdout,
                             np.float32)
    assert expected.tobytes() == _c_steps(_inputs()).tobytes()
    got = jacobi_c.launch(reference, N, _inputs(), N, n=N)["B"]
    assert got.tobytes() == expected.tobytes()
