"""The C front end: the plain-Python rules on hand-checked snippets, the DFA the GPU uses
against the plain-Python scanner, and the GPU pipeline (resident and host paths) against
plain Python byte for byte on real C files and random bytes, on every available backend."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vyre
from vyre.programs.cpp_corpus import generate_c_source, load_sources, replicate
from vyre.programs.cpp_frontend import CppFrontend, FrontendResult, cpp_frontend_python
from vyre.programs.cpp_python import splice
from vyre.programs.cpp_rules import (
    IDENTITY_FN,
    ST_NORMAL,
    byte_class,
    byte_flags,
    compose_words,
    starts_token,
    transition,
    transition_word,
)

DATA = Path(__file__).parent / "data" / "c"
FILES = load_sources(DATA)


def text(data: bytes) -> bytes:
    return cpp_frontend_python(data).text


# ------------------------------------------------------------------ plain Python: splicing


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        (b"a\\\nb", b"ab"),
        (b"a\\\r\nb", b"ab"),
        (b"a\\\\\n\nb", b"a\\\nb"),  # one pass: the pair formed by a removal stays
        (b"a\\\rb", b"a\\\rb"),  # backslash-CR without LF is not a splice
        (b"\\", b"\\"),
        (b"\\\n", b""),
        (b"\\\n\\\n\\\n", b""),
        (b"\\\\\n", b"\\"),
        (b"x\r\n", b"x\r\n"),
    ],
)
def test_splice(src: bytes, expected: bytes) -> None:
    assert splice(src) == expected


# ------------------------------------------------------------------ plain Python: comments


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        (b"a/*x*/b", b"a b"),
        (b"a//x\nb", b"a \nb"),
        (b"a//x\r\nb", b"a \nb"),  # the CR belongs to the line comment
        (b"a//", b"a "),
        (b"/**/", b" "),
        (b"/***/x", b" x"),
        (b"/*/ */x", b" x"),  # '/*/' does not close
        (b"/* /* */ */", b"  */"),  # no nesting
        (b"/*unterminated\nint x;", b" "),
        (b"a/\\\n*c*/b", b"a b"),  # the opener is formed by splicing
        (b"// x \\\ny\nz", b" \nz"),  # a continued line comment
        (b'"/*x*/"', b'"/*x*/"'),
        (b'"//x"', b'"//x"'),
        (b"'\\''/**/", b"'\\'' "),
        (b"'\"'//c", b"'\"' "),
        (b'"\\"//"x', b'"\\"//"x'),  # escaped quote keeps the string open
        (b'"a\\\\"//c', b'"a\\\\" '),  # escaped backslash: the quote closes
        (b"x = a/ *p;", b"x = a/ *p;"),
        (b"c = 4 /**// 2;", b"c = 4  / 2;"),
        (b"b //**/ 3", b"b  "),
        (b'"abc\n/*c*/', b'"abc\n '),  # an LF ends an unterminated string
        (b"'x\n//c", b"'x\n "),
        (b"/* \"*/ x \"*/", b'  x "*/'),
        ("/* é */ \"ü\"".encode(), "  \"ü\"".encode()),
    ],
)
def test_comments(src: bytes, expected: bytes) -> None:
    assert text(src) == expected


# ------------------------------------------------------------------ plain Python: classes


def test_classes_and_boundaries_identifiers_numbers_punct() -> None:
    r = cpp_frontend_python(b"int x1=0x1F;")
    assert r.text == b"int x1=0x1F;"
    assert list(r.classes) == [1, 1, 1, 0, 1, 2, 3, 2, 1, 2, 1, 3]
    assert list(r.boundaries) == [1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1]
    assert r.tokens() == [b"int", b"x1", b"=", b"0x1F", b";"]


def test_classes_and_boundaries_literals() -> None:
    r = cpp_frontend_python(b'L"a b"\n\'a\'\'b\'')
    assert list(r.classes) == [1, 4, 4, 4, 4, 4, 5, 4, 4, 4, 4, 4, 4]
    assert list(r.boundaries) == [1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0]
    assert r.tokens() == [b"L", b'"a b"', b"'a'", b"'b'"]


def test_classes_and_boundaries_operators_and_odd_bytes() -> None:
    r = cpp_frontend_python(b"a->b\t\x00\x80\x7f 1.5\r\n")
    assert list(r.classes) == [1, 3, 3, 1, 0, 6, 1, 6, 0, 2, 3, 2, 0, 5]
    assert list(r.boundaries) == [1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0]


def test_comment_becomes_a_space_between_tokens() -> None:
    r = cpp_frontend_python(b"a/**/b")
    assert r.text == b"a b"
    assert list(r.classes) == [1, 0, 1]
    assert list(r.boundaries) == [1, 0, 1]


def test_unterminated_literal_line() -> None:
    r = cpp_frontend_python(b"#error don't\nx")
    assert r.text == b"#error don't\nx"
    assert r.classes[-7:] == bytes([1, 1, 1, 4, 4, 5, 1])
    assert r.tokens() == [b"#", b"error", b"don", b"'t", b"x"]


def test_result_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        FrontendResult(b"ab", b"\x01", b"\x01\x00")


def test_empty_input_python() -> None:
    assert cpp_frontend_python(b"") == FrontendResult(b"", b"", b"")


# ------------------------------------------------------------------ the DFA the GPU runs


def dfa_frontend(data: bytes) -> FrontendResult:
    """The GPU's algorithm, sequentially: prefix-composed transition words, then flags."""
    t = splice(data)
    fn = IDENTITY_FN
    state = ST_NORMAL
    out, lit, starts = bytearray(), [], []
    for i, b in enumerate(t):
        nxt = t[i + 1] if i + 1 < len(t) else 0
        assert fn & 15 == state
        comment, opener, in_lit, lit_start = byte_flags(state, b, nxt)
        if opener or not comment:
            out.append(0x20 if opener else b)
            lit.append(in_lit)
            starts.append(lit_start)
        state = transition(state, b, nxt)
        fn = compose_words(fn, transition_word(b, nxt))
    classes = bytes(byte_class(b, x) for b, x in zip(out, lit))
    bounds, prev = bytearray(), 0
    for c, s in zip(classes, starts):
        bounds.append(int(starts_token(c, prev, s)))
        prev = c
    return FrontendResult(bytes(out), classes, bytes(bounds))


def test_compose_is_associative_with_identity() -> None:
    rng = random.Random(7)
    words = [transition_word(rng.randrange(256), rng.choice(b"*/x\n")) for _ in range(60)]
    for _ in range(200):
        a, b, c = rng.sample(words, 3)
        assert compose_words(compose_words(a, b), c) == compose_words(a, compose_words(b, c))
        assert compose_words(IDENTITY_FN, a) == a == compose_words(a, IDENTITY_FN)


TRICKY = b"/*\"'\\\n\r ax1;"


def test_dfa_matches_plain_python_exhaustively_on_short_strings() -> None:
    rng = random.Random(1)
    for _ in range(20000):
        data = bytes(rng.choice(TRICKY) for _ in range(rng.randint(0, 24)))
        assert dfa_frontend(data) == cpp_frontend_python(data), data


@pytest.mark.parametrize("name", sorted(FILES))
def test_dfa_matches_plain_python_on_files(name: str) -> None:
    assert dfa_frontend(FILES[name]) == cpp_frontend_python(FILES[name])


# ------------------------------------------------------------------ GPU pipeline


def _available() -> list[str]:
    return sorted(a.name for a in vyre.available_backends() if a.available)


@pytest.fixture(scope="module", params=_available())
def backend(request: pytest.FixtureRequest) -> Iterator[vyre.BaseBackend]:
    b = vyre.get_backend(request.param)
    yield b
    b.close()


@pytest.fixture(scope="module")
def frontend(backend: vyre.BaseBackend) -> Iterator[CppFrontend]:
    with CppFrontend(backend, capacity=4096) as fe:
        yield fe


def assert_same(got: FrontendResult, exp: FrontendResult, what: str) -> None:
    if got == exp:
        return
    for field in ("text", "classes", "boundaries"):
        g, e = getattr(got, field), getattr(exp, field)
        if g != e:
            i = next((k for k, (x, y) in enumerate(zip(g, e)) if x != y), min(len(g), len(e)))
            raise AssertionError(
                f"{what}: {field} differs first at byte {i} (lengths {len(g)} vs {len(e)}): "
                f"got {g[max(0, i - 20):i + 20]!r}, expected {e[max(0, i - 20):i + 20]!r}"
            )
    raise AssertionError(what)


@pytest.mark.parametrize("name", sorted(FILES))
def test_gpu_matches_python_on_files(frontend: CppFrontend, name: str) -> None:
    data = FILES[name]
    exp = cpp_frontend_python(data)
    assert_same(frontend.run(data), exp, f"{name} resident on {frontend.backend.id}")
    assert_same(frontend.run_host_path(data), exp, f"{name} host path")


def test_gpu_empty_input(frontend: CppFrontend) -> None:
    assert frontend.run(b"") == FrontendResult(b"", b"", b"")
    assert frontend.run_host_path(b"") == FrontendResult(b"", b"", b"")


tricky_bytes = st.lists(st.sampled_from(sorted(set(TRICKY))), max_size=300).map(bytes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=300), tricky_bytes))
def test_gpu_matches_python_on_random_bytes(frontend: CppFrontend, data: bytes) -> None:
    assert_same(frontend.run(data), cpp_frontend_python(data), f"random {data!r}")


@pytest.mark.parametrize("size", [1023, 1024, 1025, 6000])
def test_gpu_larger_than_one_block(frontend: CppFrontend, size: int) -> None:
    data = generate_c_source(size, seed=size)
    assert len(data) == size
    exp = cpp_frontend_python(data)
    assert_same(frontend.run(data), exp, f"{size} bytes resident")


def test_gpu_three_scan_levels_and_folded_blocks(backend: vyre.BaseBackend) -> None:
    # 64-element blocks: 5000 bytes scan as 5000 -> 79 -> 2, three block-scan levels
    with CppFrontend(backend, capacity=64, workgroup_size=32, items_per_thread=2,
                     max_grid_x=7) as fe:  # 157 workgroups fold into a 7 x 23 grid
        for data in (generate_c_source(5000, seed=3), replicate(list(FILES.values()), 5000)):
            exp = cpp_frontend_python(data)
            assert_same(fe.run(data), exp, "3-level resident")
            assert fe.stats.dispatches == 1 + 5 + 1 + 1 + 5 + 1 + 5 + 1 + 1
            assert_same(fe.run_host_path(data), exp, "3-level host")
        assert fe.capacity >= 5000


def test_gpu_dispatch_mode_without_pipeline(backend: vyre.BaseBackend) -> None:
    data = replicate(list(FILES.values()), 3000)
    with CppFrontend(backend, use_pipeline=False) as fe:
        assert_same(fe.run(data), cpp_frontend_python(data), "resident, no pipeline")
        assert fe.stats.mode == "dispatch" and fe.stats.dispatches == 15


def test_gpu_buffers_are_reused_across_inputs(backend: vyre.BaseBackend) -> None:
    with CppFrontend(backend, capacity=8192) as fe:
        long = generate_c_source(3000, seed=11)
        assert_same(fe.run(long), cpp_frontend_python(long), "long first")
        bufs = dict(fe._buffers)
        # a shorter input after a longer one: stale bytes past its end must not leak in
        for data in (b"/* x", b'"a', b"ab\\", b"//", long[:77], long[:1]):
            assert_same(fe.run(data), cpp_frontend_python(data), f"after long: {data!r}")
        assert fe._buffers == bufs


class CountingBackend:
    """Forwards to a backend, counting the host-facing calls the front end makes."""

    COUNTED = ("write", "write_many", "read", "read_many", "dispatch",
               "dispatch_with_device_buffers", "dispatch_async", "allocate_device_buffer")

    def __init__(self, inner: vyre.BaseBackend) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name in self.COUNTED:
            return self._counted(name, attr)
        if name == "pipeline":
            def make(steps: Any) -> Any:
                p = attr(steps)
                p.run = self._counted("pipeline.run", p.run)
                return p
            return make
        return attr

    def _counted(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kw: Any) -> Any:
            self.calls[name] += 1
            return fn(*args, **kw)
        return wrapper


def test_resident_path_one_upload_many_dispatches_one_readback(
    backend: vyre.BaseBackend,
) -> None:
    spy = CountingBackend(backend)
    data = FILES["hashmap.c"]
    with CppFrontend(spy, capacity=8192) as fe:
        fe.run(data)  # first run allocates and records
        spy.calls.clear()
        got = fe.run(data)
        assert_same(got, cpp_frontend_python(data), "spied run")
        c = spy.calls
        assert fe.stats.dispatches >= 9
        assert c["write"] + c["write_many"] == 1, c
        assert c["dispatch"] == 0 and c["allocate_device_buffer"] == 0, c
        if fe.stats.mode == "pipeline":
            assert c["pipeline.run"] == 1 and c["read"] + c["read_many"] == 0, c
        else:
            assert fe.stats.mode == "dispatch"
            assert c["read"] + c["read_many"] == 1, c
            assert c["dispatch_with_device_buffers"] == fe.stats.dispatches, c

        spy.calls.clear()
        assert_same(fe.run_host_path(data), cpp_frontend_python(data), "spied host path")
        assert spy.calls["dispatch"] == fe.stats.dispatches >= 9, spy.calls
        assert spy.calls["dispatch_with_device_buffers"] == 0, spy.calls


def test_generated_corpus_is_deterministic_and_sized() -> None:
    a = generate_c_source(10_000, seed=5)
    assert a == generate_c_source(10_000, seed=5) and len(a) == 10_000
    assert b"\\\n" in a and b"\r\n" in a and b"/*" in a
    big = replicate(list(FILES.values()), 50_000)
    assert len(big) == 50_000 and big.startswith(FILES[sorted(FILES)[0]] or b"")
