"""Whether a flushing device's own f32 add, sub, mul and fma already compute flush mode.

docs/IR.md's flush mode reads a subnormal f32 operand as a zero of its sign and turns a
tiny result into a zero of its sign (tiny by the device's `flush_tininess` rule). The
WGSL printer can spell that explicitly (every operand through a flushing fence, every
result through `vy_ftz`: the same bits whether or not the driver flushes), which costs
about ten integer operations per float operation. On a device whose arithmetic flushes by
itself (NVIDIA's Vulkan driver) that work repeats what the hardware does, so where this
probe shows the device's bare `a + b`, `a - b`, `a * b` and `fma(a, b, c)` give flush mode's
bits on the cases that tell the spellings apart (a subnormal in every operand position,
tiny sums, differences, products and fma results of either sign, and products and fma
within half an ulp below FLT_MIN), the printer leaves those four operations to the device:
their operands get plain fences (what stops folding and contraction, fences.py) and their
results no `vy_ftz`. Everything else (division, sqrt, comparisons, casts, min/max, the
approximate functions) keeps the explicit spelling.

The probe spells each operation exactly as the printer does on operands it leaves bare (a
load the compiler cannot see through). This module must never run a shader or hold a
device: adapter.py runs `PROBE_CODE` and passes the output to `agrees`.
"""

from __future__ import annotations

import struct

from vyre import features as F

_MIN = 0x00800000  # FLT_MIN
_MIN15 = 0x00C00000  # 1.5 FLT_MIN
_HALF_MIN = 0x00400000  # a subnormal, FLT_MIN / 2
_ONE, _HALF, _TWO23, _ZERO = 0x3F800000, 0x3F000000, 0x4B000000, 0x00000000
_NEG = 0x80000000
# products whose exact value is in band A / band B below FLT_MIN (adapter._TINY_PRODUCTS):
# A is FLT_MIN after rounding with an unbounded exponent, B is 0; IEEE gives FLT_MIN to both
_BAND_A = (0x205187F6, 0x1F9C6325)
_BAND_B = (0x205D6025, 0x1F94051B)

#: what a band-A / band-B product or fma gives under each tininess rule
BAND_RESULTS = {
    F.TININESS_AFTER_ROUNDING: (_MIN, _ZERO),
    F.TININESS_BEFORE_ROUNDING: (_ZERO, _ZERO),
    F.TININESS_SUBNORMAL_RESULT: (_MIN, _MIN),
}

# (operation, operands as f32 bits, flush mode's result bits or a band letter); every case
# has a different result under IEEE gradual underflow or under output-only flushing
CASES: tuple[tuple[str, tuple[int, ...], int | str], ...] = (
    ("add", (_HALF_MIN, _MIN), _MIN),  # subnormal left operand read as 0
    ("add", (_MIN, _HALF_MIN | _NEG), _MIN),  # subnormal right operand
    ("add", (_MIN15, _MIN | _NEG), _ZERO),  # tiny sum: +0
    ("add", (_MIN15 | _NEG, _MIN), _NEG),  # -0
    ("sub", (_HALF_MIN | _NEG, _ZERO), _NEG),  # (-0) - 0
    ("sub", (_MIN, _HALF_MIN), _MIN),
    ("sub", (_MIN15, _MIN), _ZERO),  # tiny difference
    ("sub", (_MIN, _MIN15), _NEG),
    ("mul", (_HALF_MIN, _TWO23), _ZERO),  # IEEE: 2^-104, normal
    ("mul", (_TWO23, _HALF_MIN | _NEG), _NEG),
    ("mul", (_MIN, _HALF), _ZERO),  # tiny product
    ("mul", (_MIN | _NEG, _HALF), _NEG),
    ("mul", _BAND_A, "A"),
    ("mul", _BAND_B, "B"),
    ("fma", (_HALF_MIN, _TWO23, _ZERO), _ZERO),  # subnormal multiplicands
    ("fma", (_TWO23, _HALF_MIN | _NEG, _NEG), _NEG),
    ("fma", (_ONE, _MIN, _HALF_MIN), _MIN),  # subnormal addend
    ("fma", (_ONE, _MIN15, _MIN | _NEG), _ZERO),  # tiny result
    ("fma", (_ONE | _NEG, _MIN15, _MIN), _NEG),
    ("fma", (*_BAND_A, _ZERO), "A"),
    ("fma", (*_BAND_B, _ZERO), "B"),
)

_SPELLING = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "fma": "fma({0}, {1}, {2})",
}
_WORDS = 4  # per case: three operands and the result


def _probe_code() -> str:
    lines = []
    for i, (op, args, _) in enumerate(CASES):
        base = i * _WORDS
        operands = [f"bitcast<f32>(b[{base + k}])" for k in range(len(args))]
        lines.append(f"  b[{base + 3}] = bitcast<u32>({_SPELLING[op].format(*operands)});")
    return (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(1) fn main() {\n" + "\n".join(lines) + "\n}"
    )


PROBE_CODE = _probe_code()
PROBE_DATA = b"".join(
    struct.pack("<4I", *(list(args) + [0] * (_WORDS - len(args)))) for _, args, _ in CASES
)


def expected(tininess: str) -> list[int] | None:
    """Flush mode's result bits of every case under `tininess` (None: an unknown rule)."""
    if tininess not in BAND_RESULTS:
        return None
    band = dict(zip("AB", BAND_RESULTS[tininess], strict=True))
    return [band[r] if isinstance(r, str) else r for _, _, r in CASES]


def agrees(out: bytes, tininess: str) -> bool:
    """Whether the probe's output buffer `out` holds flush mode's bits for every case."""
    want = expected(tininess)
    words = struct.unpack(f"<{len(CASES) * _WORDS}I", out)
    return want is not None and [words[i * _WORDS + 3] for i in range(len(CASES))] == want
