"""`@vyre.kernel` reliability (issue 28): build-time constants cached by type and bits,
annotations evaluated where the kernel was written, NumPy scalars still meeting kernel
values as operators, and control blocks that must be entered. The hostile misuses (each
a vyre error naming the fix) are rows in tests/hostile_rows_kernel.py."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import InOut, Output, ProgramBuilder, f32, u32
from vyre.backend import BaseBackend
from vyre.builder import BuildError
from vyre.ir import nodes as N


@vyre.kernel
def store_const(y: Output[f32], *, c: Any) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        y[i] = vyre.lit(c, f32)


def test_negative_zero_constant_is_not_the_cached_positive_zero(backend: BaseBackend) -> None:
    # `0.0 == -0.0`: a cache keyed by == handed the +0.0 kernel to c=-0.0
    pos = store_const.launch(backend, 4, 4, c=0.0)["y"]
    neg = store_const.launch(backend, 4, 4, c=-0.0)["y"]
    assert not np.signbit(pos).any()
    assert np.signbit(neg).all(), neg


def let_const() -> vyre.Kernel:
    @vyre.kernel
    def k(y: Output[u32], *, c: Any) -> None:
        v = vyre.let(c)  # its type follows the Python type of c
        y[0] = vyre.lit(0, u32) if v.ty is vyre.bool_ else vyre.lit(1, u32)
    return k


def _let_type(prog: N.Program) -> vyre.ScalarType:
    lets = [s for s in prog.body if isinstance(s, N.Let)]
    return lets[0].value.ty


@pytest.mark.parametrize(("first", "second", "want"), [
    (1, True, vyre.bool_),                     # True == 1
    (True, 1, vyre.i32),
    (2.0, np.float64(2.0), vyre.f64),         # np.float64(2.0) == 2.0
    (np.float64(2.0), 2.0, vyre.f32),
    (np.int64(3), 3, vyre.i32),
], ids=["1-then-True", "True-then-1", "float-then-np.float64", "np.float64-then-float",
        "np.int64-then-int"])
def test_constants_equal_by_value_but_not_type_get_their_own_kernel(
        first: Any, second: Any, want: vyre.ScalarType) -> None:
    k = let_const()  # a fresh cache per case
    k.build(c=first)
    assert _let_type(k.build(c=second)) is want


def test_constant_cache_still_reuses_the_same_value() -> None:
    nan = float("nan")  # same bits: reused, though nan != nan
    assert store_const.build(c=0.5) is store_const.build(c=0.5)
    assert store_const.build(c=nan) is store_const.build(c=float("nan"))
    assert store_const.build(c=-0.0) is not store_const.build(c=0.0)


def _import(tmp_path: Path, name: str, source: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_future_annotations_resolve_in_the_kernels_module_and_closure(
        tmp_path: Path, reference: BaseBackend) -> None:
    mod = _import(tmp_path, "kmod_future", """
        from __future__ import annotations
        import vyre

        @vyre.kernel
        def scale(y: vyre.InOut[vyre.f32], a: vyre.f32):
            i = vyre.global_linear_id()
            with vyre.if_(i < y.length()):
                y[i] = y[i] * a

        def make():
            T = vyre.f32  # a closure variable (used in the body, so Python keeps it)
            @vyre.kernel
            def add(y: vyre.InOut[T], a: T):
                i = vyre.global_linear_id()
                with vyre.if_(i < y.length()):
                    y[i] = y[i] + a * vyre.lit(1.0, T)
            return add
        """)
    y = np.arange(4, dtype=np.float32)
    assert mod.scale.launch(reference, 4, y, 3.0)["y"].tolist() == [0.0, 3.0, 6.0, 9.0]
    assert mod.make().launch(reference, 4, y, 0.5)["y"].tolist() == [0.5, 1.5, 2.5, 3.5]


def test_vyre_types_as_annotations_after_a_plain_import(tmp_path: Path,
                                                       reference: BaseBackend) -> None:
    """`a: vyre.f32` without the future import: the annotation is the type itself (a str
    Enum member, which must not be evaluated as the text 'f32')."""
    mod = _import(tmp_path, "kmod_plain_import", """
        import vyre

        @vyre.kernel
        def scale(y: vyre.InOut[vyre.f32], a: vyre.f32, n: vyre.u32):
            i = vyre.global_linear_id()
            if i < n:
                y[i] = y[i] * a
        """)
    y = np.arange(4, dtype=np.float32)
    assert mod.scale.launch(reference, 4, y, 3.0, 3)["y"].tolist() == [0.0, 3.0, 6.0, 3.0]


def test_an_annotation_that_is_not_a_vyre_type_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"argument 'a' .*uint32.*not a vyre type"):
        _import(tmp_path, "kmod_shadow", """
            import numpy as np
            import vyre
            u32 = np.uint32  # the module's own u32, not vyre's

            @vyre.kernel
            def k(y: vyre.InOut[vyre.u32], a: u32):
                y[0] = a
            """)


def test_a_numpy_type_on_a_keyword_only_argument_is_refused_not_made_a_constant(
        tmp_path: Path) -> None:
    # keyword-only + a non-vyre annotation used to mean "build-time constant": with the
    # module's own u32 = np.uint32, `*, n: u32` silently stopped being a param
    with pytest.raises(BuildError, match=r"'n' is annotated <class 'numpy.uint32'>.*vyre.u32"):
        _import(tmp_path, "kmod_kwonly", """
            import numpy as np
            import vyre
            u32 = np.uint32

            @vyre.kernel
            def k(y: vyre.InOut[vyre.u32], *, n: u32):
                y[0] = n
            """)


def test_an_unresolvable_annotation_names_itself(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"annotation 'Missing' of kernel argument 'a'.*"
                                         r"module level"):
        _import(tmp_path, "kmod_missing", """
            from __future__ import annotations
            import vyre

            @vyre.kernel
            def k(y: vyre.InOut[vyre.f32], a: Missing):
                y[0] = 1.0
            """)


@vyre.kernel
def numpy_scalars(x: vyre.Buffer[f32], y: Output[f32]) -> None:
    i = vyre.global_linear_id()
    with vyre.if_(i < y.length()):
        big = np.float32(1.0) < x[i]
        y[i] = vyre.select(big, np.float32(2.0) * x[i] + np.float32(0.5), np.float32(3.0) - x[i])


def test_numpy_scalars_on_the_left_still_build_operators(  # kept working by __array_ufunc__
backend: BaseBackend) -> None:
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    got = numpy_scalars.launch(backend, 64, x, 64)["y"]
    np.testing.assert_array_equal(got, np.where(x > 1.0, 2 * x + 0.5, 3 - x).astype(np.float32))


def test_builder_if_without_with_is_refused_at_build() -> None:
    k = ProgramBuilder("forgot_with")
    y = k.buffer("y", f32, "read_write")
    k.if_(y[0] > 0.0)  # a dropped context manager: nothing recorded
    y[0] = 1.0
    with pytest.raises(BuildError, match=r"never entered.*with k.if_\(cond\):"):
        k.build()


def test_a_control_block_is_entered_once() -> None:
    @vyre.kernel
    def twice(y: InOut[f32]) -> None:
        block = vyre.if_(y[0] > 0.0)
        with block:
            y[0] = 1.0
        with block:
            y[0] = 2.0

    with pytest.raises(BuildError, match="entered once"):
        _ = twice.program
