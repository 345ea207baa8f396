"""Plain Python control flow in `@vyre.kernel` (issue 31 item 1; vyre/kernel_ast.py): `if` /
`elif` / `else`, `while`, `for ... in range(...)`, `break`, `continue`, `return`, `a if c else
b`, `and` / `or` / `not`, chained comparisons and locals rebound in branches and loops run per
invocation on kernel values and at build time on Python values; what cannot be compiled is an
error at the user's line naming the fix."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import Buffer, InOut, Output, f32, f64, i32, u32
from vyre.backend import BaseBackend
from vyre.builder import BuildError
from vyre.ir import nodes as N
from vyre.ir.sites import site_of


def _line(mark: str) -> int:
    src = inspect.getsource(inspect.getmodule(_line)).splitlines()  # type: ignore[arg-type]
    return next(n for n, text in enumerate(src, 1) if f"# {mark}" in text)


def _kinds(stmts: tuple[Any, ...]) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out.append(s.kind)
        for field in ("then", "orelse", "body"):
            out += _kinds(getattr(s, field, ()) or ())
    return out


# ---------------------------------------------------------------- per-invocation results


@vyre.kernel(workgroup_size=64)
def collatz(x: Buffer[u32], steps: Output[u32]) -> None:
    i = vyre.global_linear_id()
    if i >= x.length():
        return
    v = x[i]
    count = vyre.lit(0, u32)
    while v != 1:
        if v & 1 == 0:
            v = v >> 1
        else:
            v = 3 * v + 1
        count += 1
    steps[i] = count


def test_while_if_else_return_and_loop_carried_locals(backend: BaseBackend) -> None:
    x = np.uint32([1, 2, 3, 27, 97, 871])
    got = collatz.launch(backend, len(x), x, len(x))["steps"]
    assert got.tolist() == [0, 1, 7, 111, 118, 178]


@vyre.kernel
def scan_until(x: Buffer[f32], out: Output[f32], n: u32, stop: f32) -> None:
    i = vyre.global_linear_id()
    acc = 0.0
    for k in range(n):  # n is a param: a device loop
        if x[k] < 0.0 and k != i:
            continue
        if x[k] > stop or k > i + 3:
            break
        acc = acc + x[k]
    out[i] = acc if i < n else -1.0


def _scan_until(x: np.ndarray, n: int, stop: float, count: int) -> list[float]:
    out = []
    for i in range(count):
        acc = np.float32(0)
        for k in range(n):
            if x[k] < 0 and k != i:
                continue
            if x[k] > stop or k > i + 3:
                break
            acc = np.float32(acc + x[k])
        out.append(float(acc) if i < n else -1.0)
    return out


def test_for_range_break_continue_and_or_ifexp(backend: BaseBackend) -> None:
    x = np.float32([1.5, -2, 3, 4, 50, 6, -7, 8, 9])
    got = scan_until.launch(backend, 11, x, 11, n=9, stop=40.0)["out"]
    assert got.tolist() == _scan_until(x, 9, 40.0, 11)


@vyre.kernel(workgroup_size=1)
def swap_and_keep(a: InOut[f32], out: Output[f32], n: u32) -> None:
    tmp = a[0]  # Python copies a value: a later store to a[0] does not change tmp
    a[0] = a[1]
    a[1] = tmp
    acc = a[2]
    prev = acc  # a copy, not another name for the variable
    for _k in range(n):
        acc += 1.0
    out[0] = acc - prev


def test_names_hold_values_not_references(backend: BaseBackend) -> None:
    res = swap_and_keep.launch(backend, 1, np.float32([1, 2, 10]), 1, n=5)
    assert res["a"].tolist() == [2.0, 1.0, 10.0]
    assert res["out"].tolist() == [5.0]


@vyre.kernel
def classify(x: Buffer[i32], out: Output[i32]) -> None:
    i = vyre.global_linear_id()
    v = x[i]
    if v < -10:
        r = -2
    elif v < 0:
        r = -1
    elif v == 0:
        r = 0
    elif 0 < v <= 10 and v != 7:
        r = min(v, 5)
    else:
        r = max(v, 100)
    out[i] = r


def test_elif_chain_chained_comparison_not_min_max_diverge(backend: BaseBackend) -> None:
    x = np.int32([-50, -3, 0, 3, 7, 9, 11, 200])
    got = classify.launch(backend, len(x), x, len(x))["out"]
    assert got.tolist() == [-2, -1, 0, 3, 100, 5, 100, 200]


# ---------------------------------------------------------------- what stays Python


@vyre.kernel
def unrolled(x: Buffer[f32], out: Output[f32], *, taps: int = 3, flip: bool = False) -> None:
    i = vyre.global_linear_id()
    acc = 0.0
    for k in range(taps):  # a Python int: unrolled at build time
        acc += x[i + k]
    if flip:  # a build-time constant: one branch is built
        acc = -acc
    out[i] = acc


def test_control_flow_on_python_values_runs_at_build_time(reference: BaseBackend) -> None:
    kinds = _kinds(unrolled.build(taps=3, flip=True).body)
    assert "for" not in kinds and "if" not in kinds, kinds
    x = np.float32([1, 2, 3, 4, 5])
    assert unrolled.launch(reference, 3, x, 3, flip=True)["out"].tolist() == [-6, -9, -12]


@vyre.kernel
def forced(out: Output[u32]) -> None:
    total = vyre.lit(0, u32)
    for k in vyre.range(4):  # vyre.range: a device loop even over a Python int
        total += k
    out[vyre.global_linear_id()] = total


def test_vyre_range_forces_a_device_loop(reference: BaseBackend) -> None:
    assert "for" in _kinds(forced.program.body)
    assert forced.launch(reference, 2, 2)["out"].tolist() == [6, 6]


def test_static_refuses_a_kernel_value() -> None:
    @vyre.kernel
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        for j in range(vyre.static(x[0])):  # MARK-static
            out[j] = 1

    with pytest.raises(BuildError, match="build-time") as info:
        _ = k.program
    assert info.value.site is not None and info.value.site.endswith(f":{_line('MARK-static')}")


def test_typed_declaration_and_with_style_mix(reference: BaseBackend) -> None:
    @vyre.kernel
    def k(x: Buffer[f64], out: Output[f64], n: u32) -> None:
        i = vyre.global_linear_id()
        acc: f64 = 0
        with vyre.if_(i < n):
            for j in range(n):
                acc += x[j]
        out[i] = acc

    if not reference.supports("f64"):
        pytest.skip("no f64")
    got = k.launch(reference, 3, np.float64([1, 2, 3.5]), 3, n=2)["out"]
    assert got.tolist() == [3.0, 3.0, 0.0]


# ---------------------------------------------------------------- lines, closures, decorators


def test_ir_sites_are_the_users_lines() -> None:
    @vyre.kernel
    def k(x: InOut[f32], n: u32) -> None:
        i = vyre.global_linear_id()
        if i < n:  # MARK-if
            x[i] = 1.0  # MARK-store
        while x[0] < 5.0:  # MARK-while
            x[0] = x[0] + 1.0

    prog = k.program
    if_stmt = next(s for s in prog.body if isinstance(s, N.If))
    loop = next(s for s in prog.body if isinstance(s, N.While))
    assert site_of(prog, if_stmt) == f"{__file__}:{_line('MARK-if')}"
    assert site_of(prog, if_stmt.then[0]) == f"{__file__}:{_line('MARK-store')}"
    assert site_of(prog, loop) == f"{__file__}:{_line('MARK-while')}"


def _register(fn: Any) -> Any:
    _register.seen = fn.__name__  # type: ignore[attr-defined]
    return fn


def test_closure_defaults_and_stacked_decorators(reference: BaseBackend) -> None:
    scale = 3.0

    @vyre.kernel
    @_register
    def k(x: Buffer[f32], out: Output[f32], *, limit: float = 2.0) -> None:
        i = vyre.global_linear_id()
        v = x[i] * scale
        out[i] = v if v < limit else limit

    assert _register.seen == "k"  # type: ignore[attr-defined]
    x = np.float32([0.5, 1, 2])
    assert k.launch(reference, 3, x, 3)["out"].tolist() == [1.5, 2.0, 2.0]
    scale = 0.5  # a closure is read when the kernel is built, like the function would
    assert k.launch(reference, 3, x, 3, limit=1.25)["out"].tolist() == [0.25, 0.5, 1.0]


def test_kernel_without_source_is_traced_and_says_so() -> None:
    space: dict[str, Any] = {"vyre": vyre, "Buffer": Buffer, "Output": Output, "f32": f32}
    exec("def k(x: Buffer[f32], out: Output[f32]):\n"
         "    i = vyre.global_linear_id()\n"
         "    if x[i] > 0.0:\n"
         "        out[i] = 1.0\n", space)
    k = vyre.kernel(space["k"])
    with pytest.raises(BuildError, match="REPL or by exec"):
        _ = k.program


# ---------------------------------------------------------------- errors at the user's line


def _fails(fn: Any, mark: str, *phrases: str) -> None:
    with pytest.raises(BuildError) as info:
        _ = vyre.kernel(fn).program
    for p in phrases:
        assert p in str(info.value), str(info.value)
    assert info.value.site == f"{__file__}:{_line(mark)}", str(info.value)


def test_first_assigned_in_a_branch_then_used_after() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        i = vyre.global_linear_id()
        if x[i] > 0.0:
            y = x[i] * 2.0
        out[i] = y  # MARK-after

    _fails(k, "MARK-after", "`y` is first assigned inside", "before the block")


def test_loop_carried_type_change_names_the_fix() -> None:
    def k(x: Buffer[f32], out: Output[f32], n: u32) -> None:
        acc = 0
        for j in range(n):
            acc = acc + x[j]  # MARK-type
        out[0] = acc

    with pytest.raises(BuildError) as info:
        _ = vyre.kernel(k).program
    assert "acc = 0.0" in str(info.value) and "i32" in str(info.value), str(info.value)
    assert info.value.site == f"{__file__}:{_line('MARK-type')}"


def test_rebinding_a_buffer_per_invocation_is_refused() -> None:
    def k(x: Buffer[f32], y: Buffer[f32], out: Output[f32]) -> None:
        src = x
        if out.length() > 3:
            src = y  # MARK-buf
        out[0] = src[0]

    _fails(k, "MARK-buf", "the buffer 'x'", "only kernel values and numbers")


def test_break_in_a_per_invocation_if_of_an_unrolled_loop() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        for j in range(4):
            if x[j] > 0.0:
                break  # MARK-break
            out[j] = 1.0

    _fails(k, "MARK-break", "vyre.range", "unrolled")


def test_for_over_a_buffer() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        for v in x:  # MARK-iter
            out[0] = v

    _fails(k, "MARK-iter", "for j in range(x.length())")


def test_unpacking_a_kernel_value() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        a, b = x[0]  # MARK-unpack
        out[0] = a + b

    _fails(k, "MARK-unpack", "cannot be unpacked", "on its own")


def test_assert_on_kernel_values_is_vyre_assert_and_raise_is_refused() -> None:
    @vyre.kernel(workgroup_size=64)
    def k(x: Buffer[f32], out: Output[f32], n: u32) -> None:
        i = vyre.global_linear_id()
        if i < n:
            assert x[i] > 0.0, "x must be positive"  # MARK-assert
            out[i] = x[i]

    line = next(n for n, text in enumerate(inspect.getsource(k.fn).splitlines())
                if "MARK-assert" in text) + k.fn.__code__.co_firstlineno
    with vyre.get_backend("reference") as b:
        got = k.launch(b, 4, np.array([1, 2, 3, 4], np.float32), 4, n=4)
        assert got["out"].tolist() == [1, 2, 3, 4]
        with pytest.raises(vyre.DispatchError, match=rf":{line}, invocation global id \(2, 0, "
                                                     r"0\): x must be positive"):
            k.launch(b, 4, np.array([1, 2, -3, 4], np.float32), 4, n=4)

    def r(x: Buffer[f32], out: Output[f32]) -> None:
        if x[0] > 0.0:
            raise ValueError("no")  # MARK-raise
        out[0] = 1.0

    _fails(r, "MARK-raise", "a kernel cannot raise")


def test_with_other_than_vyres() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        with open(__file__):  # MARK-with
            out[0] = 1.0

    _fails(k, "MARK-with", "`with` on", "plain `if`")


def test_while_else_on_a_kernel_value() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        while x[0] > 0.0:  # MARK-welse
            break
        else:
            out[0] = 1.0

    _fails(k, "MARK-welse", "set a flag")


def test_and_on_non_bool_kernel_values() -> None:
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        out[0] = 1 if x[0] and x[1] else 0  # MARK-and

    _fails(k, "MARK-and", "needs bool operands", "x != 0")


@pytest.mark.parametrize(("src", "phrases"), [
    ("    try:\n        out[0] = 1.0\n    except Exception:\n        pass\n", ("`try`",)),
    ("    global G\n    out[0] = 1.0\n", ("`global`", "Output buffer")),
    ("    match 1:\n        case 1:\n            out[0] = 1.0\n", ("`match`", "elif")),
    ("    if (v := x[0]) > 0.0:\n        out[0] = v\n", ("`:=`", "own line")),
    ("    return x[0]\n", ("returns no value", "out[i] = value")),
    ("    del x\n", ("`del`", "rebind it")),
])
def test_constructs_that_cannot_be_compiled(tmp_path: Any, src: str,
                                            phrases: tuple[str, ...]) -> None:
    """Refused when decorated, at the construct's own line of the user's file."""
    path = tmp_path / "user_kernel.py"
    path.write_text("import vyre\nfrom vyre import Buffer, Output, f32\n\n\n"
                    "def k(x: Buffer[f32], out: Output[f32]):\n" + src)
    space: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), space)
    import linecache
    linecache.checkcache(str(path))
    with pytest.raises(BuildError) as info:
        vyre.kernel(space["k"])
    for p in phrases:
        assert p in str(info.value), str(info.value)
    assert info.value.site == f"{path}:6", info.value.site


def test_plain_style_is_bit_identical_to_the_with_style(reference: BaseBackend) -> None:
    """One stencil in both notations: the same Program statement for statement."""
    @vyre.kernel
    def plain(u: Buffer[f32], out: Output[f32], n: u32) -> None:
        i = vyre.global_linear_id()
        if i < n:
            left = u[i - 1] if i > 0 else u[i]
            out[i] = left + u[i]

    @vyre.kernel
    def with_style(u: Buffer[f32], out: Output[f32], n: u32) -> None:
        i = vyre.global_linear_id()
        with vyre.if_(i < n):
            left = u[vyre.select(i > 0, i - 1, i)]
            out[i] = left + u[i]

    a, b = plain.program, with_style.program
    assert functools.reduce(lambda acc, s: [*acc, s.kind], a.body, []) == \
        [s.kind for s in b.body]
    x = np.float32([1, 2, 4, 8])
    got_a = plain.launch(reference, 4, x, 4, n=4)["out"]
    got_b = with_style.launch(reference, 4, x, 4, n=4)["out"]
    assert got_a.tobytes() == got_b.tobytes()


@vyre.kernel
def branches(x: Buffer[i32], out: Output[i32]) -> None:
    i = vyre.global_linear_id()
    if x[i] > 0:
        r = 1  # declared before the outer `if`: every path assigns it
        if x[i] > 10:
            r = r + 2
    else:
        r = 0
        if x[i] < -10:
            r = -5
    out[i] = r


def test_names_assigned_on_every_path_are_usable_after(backend: BaseBackend) -> None:
    x = np.int32([-20, -1, 0, 5, 50])
    assert branches.launch(backend, 5, x, 5)["out"].tolist() == [-5, 0, 0, 1, 3]


def test_the_else_branch_does_not_see_the_if_branchs_names() -> None:
    def k(x: Buffer[f32], out: Output[f32]) -> None:
        if x[0] > 0.0:
            scale = 2
        else:
            out[0] = x[0] * scale  # MARK-else

    _fails(k, "MARK-else", "used before it is assigned")


@vyre.kernel(workgroup_size=1)
def fib(out: Output[u32], n: u32) -> None:
    a, b = vyre.lit(0, u32), vyre.lit(1, u32)
    for _ in range(n):
        a, b = b, a + b  # both values are computed before either name changes
    out[0] = a


def test_tuple_assignment_computes_every_value_first(backend: BaseBackend) -> None:
    assert fib.launch(backend, 1, 1, n=10)["out"].tolist() == [55]


@vyre.kernel
def first_positive(x: Buffer[f32], out: Output[u32]) -> None:
    k = vyre.lit(0, u32)
    while vyre.lit(True):  # a device loop left by `break`
        if x[k] > 0.0 or k + 1 >= x.length():
            break
        k += 1
    out[0] = k


def test_device_while_true_with_break(backend: BaseBackend) -> None:
    x = np.float32([-1, 0, -3, 2, 5])
    assert first_positive.launch(backend, 1, x, 1)["out"].tolist() == [3]


@vyre.kernel
def count_down(lo: Buffer[i32], hi: Buffer[i32], out: Output[i32], passes: Output[i32]) -> None:
    i = vyre.global_linear_id()
    acc, n = 0, 0
    for j in range(hi[i], lo[i], -3):  # a negative step: counts down, as Python's range
        if j == 5:
            continue
        acc = acc * 7 + j
        n += 1
        if acc > 100000:
            break
    out[i], passes[i] = acc, n


@vyre.kernel
def count_down_u32(hi: Buffer[u32], out: Output[u32]) -> None:
    i = vyre.global_linear_id()
    acc = vyre.lit(0, u32)
    for j in vyre.range(hi[i], 0, -1):
        acc = acc * 3 + j
    out[i] = acc


def _count_down(lo: int, hi: int) -> tuple[int, int]:
    acc = n = 0
    for j in range(hi, lo, -3):
        if j == 5:
            continue
        acc = (acc * 7 + j + 2**31) % 2**32 - 2**31  # i32 wraps
        n += 1
        if acc > 100000:
            break
    return acc, n


def test_range_with_a_negative_step_counts_down(backend: BaseBackend) -> None:
    """Python's count for any bounds, the i32 extremes included (the pass count is exact
    where hi - lo does not fit an i32)."""
    rng = np.random.default_rng(31)
    lo = rng.integers(-40, 40, 200).astype(np.int32)
    hi = rng.integers(-40, 40, 200).astype(np.int32)
    lo[:4], hi[:4] = [-2**31, 2**31 - 10, 0, 5], [-2**31 + 7, 2**31 - 1, 0, 6]
    got = count_down.launch(backend, 200, lo, hi, 200, 200)
    want = np.array([_count_down(int(a), int(b)) for a, b in zip(lo, hi)])
    np.testing.assert_array_equal(got["out"], want[:, 0].astype(np.int32))
    np.testing.assert_array_equal(got["passes"], want[:, 1].astype(np.int32))
    hu = np.arange(40, dtype=np.uint32)
    want_u = [sum(j * 3 ** (j - 1) for j in range(1, h + 1)) % 2**32 for h in range(40)]
    assert count_down_u32.launch(backend, 40, hu, 40)["out"].tolist() == want_u


def test_a_step_computed_on_the_device_names_the_while_loop() -> None:
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        acc = vyre.lit(0, u32)
        for j in range(0, 100, x[0]):  # MARK-step
            acc += j
        out[0] = acc

    _fails(k, "MARK-step", "nonzero Python int", "while j < end")


K, NONE = (2, 3, 5), ()


@vyre.kernel
def membership(x: Buffer[u32], out: Output[u32]) -> None:
    i = vyre.global_linear_id()
    v = x[i]
    r = vyre.lit(0, u32)
    if v in (1, 2, 3):
        r += 1
    if v not in K:
        r += 10
    if 3 in K and v not in NONE:  # (an empty one: True at build time)
        r += 100
    if v in [v + 1, 7]:
        r += 1000
    out[i] = r


def test_in_and_not_in_a_tuple_on_kernel_values(backend: BaseBackend) -> None:
    want = [(v in (1, 2, 3)) + 10 * (v not in K) + 100 + 1000 * (v == 7) for v in range(10)]
    assert membership.launch(backend, 10, np.arange(10, dtype=np.uint32), 10)["out"].tolist() \
        == want


def test_in_a_range_or_a_buffer_names_the_fix() -> None:
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        out[0] = 1 if x[0] in range(3, 9) else 0  # MARK-in-range

    _fails(k, "MARK-in-range", "tuple, list or set", "lo <= v < hi")

    def k2(x: Buffer[u32], out: Output[u32]) -> None:
        out[0] = 1 if 3 in x else 0  # MARK-in-buf

    _fails(k2, "MARK-in-buf", "`in x`", "vyre.range(x.length())")


def test_a_literal_of_another_type_assigned_in_a_branch_names_the_start() -> None:
    def k(x: Buffer[u32], out: Output[f32]) -> None:
        acc = 0
        if x[0] > 2:
            acc = 1.5  # MARK-lit
        out[0] = acc

    _fails(k, "MARK-lit", "Python float 1.5", "`acc = 0.0` for f32")


def test_a_buffer_has_no_truth_value() -> None:
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        if x:  # MARK-bool-buf
            out[0] = 1

    _fails(k, "MARK-bool-buf", "no truth value", "x.length() > 0")


@vyre.kernel(workgroup_size=64)
def lane_sums(x: Buffer[u32], sums: Output[u32]) -> None:
    i = vyre.global_linear_id()
    total = vyre.subgroup_reduce(x[i], "add")  # named: computed here, by every lane
    if vyre.subgroup_lane() == 0:
        sums[i / vyre.subgroup_size()] = total


def test_a_named_subgroup_operation_is_computed_where_it_is_named(
        backend: BaseBackend) -> None:
    if not backend.supports("subgroup"):
        pytest.skip(f"{backend.id} does not report feature 'subgroup'")
    size = backend.capabilities().details["subgroup_size"]
    x = np.arange(128, dtype=np.uint32)
    got = lane_sums.launch(backend, 128, x, 128 // size)["sums"]
    np.testing.assert_array_equal(got, x.reshape(-1, size).sum(axis=1))


def test_a_kernel_value_as_a_python_int_names_the_device_loop() -> None:
    def k(x: Buffer[u32], out: Output[u32]) -> None:
        for j in reversed(range(x[0])):  # MARK-reversed
            out[j] = j

    _fails(k, "MARK-reversed", "cannot be used as a Python int", "range(n - 1, -1, -1)")


def test_a_float_literal_next_to_an_integer_names_the_conversion() -> None:
    def k(x: Buffer[u32], out: Output[f32]) -> None:
        out[0] = x[0] * 1.5  # MARK-float-int

    _fails(k, "MARK-float-int", "1.5 is not an integer", "`v.cast(vyre.f32) * 1.5`")
