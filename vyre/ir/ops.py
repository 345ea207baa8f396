"""The operation registry: one frozen record per unary, binary and call operation.

Everything that says what an op is (its name, arity, operand and result type rule, float
class, the reference's NumPy semantics for approximate functions, the C and WGSL spellings,
the conformance sample arguments) is written here once; `ir/nodes.py` (the `CallFn`
Literal and the per-class sets), the validator, the reference, both printers' tables, the
conformance suite and the fuzzer derive theirs from it (the Warp `add_builtin` idea), and
so do the kernel's functions: `vyre.<py_name>` = `vyre.builder.<py_name>` (vyre.approx's for
an `approx_` record) is generated from the record into vyre/builder/calls.py
(calls_approx.py), whose `__all__` vyre.builder, vyre and vyre.approx extend theirs by.

To add a function (an exact one, the usual case), edit three files: its `CallOp` in
CALL_OPS here (the builder function's `doc` included); its one exact definition,
vyre/lower/maths/<name>.py (`@lowering`, found by that package's registry); its correctly
rounded oracle in vyre/tools/function_oracle.py (FUNCTIONS, _NUMPY; the trigonometric
family's in function_oracle_trig.py). Then `python -m vyre.tools.gen_calls --write`
regenerates vyre/builder/calls.py (tests/test_gen_calls.py fails, naming that command,
until it has run); docs/IR.md "Calls" states the semantics. Everything else (validator,
reference, printers, conformance, fuzzer, the exhaustive checker's list, the exports)
follows from the record. A function the targets spell instead (its C / WGSL names in the
record) has no definition and no oracle, only a WGSL hook where no WGSL builtin meets
docs/IR.md's bound (its helper in vyre/backends/wgpu/maths.py, named in expressions.py's
`_FN_HOOKS`). A helper with a special
signature (a default argument, extra checks: the packed dot products) is written by hand
in vyre/builder/functions.py, which the generator then leaves out, and exported by name
in vyre/builder/__init__.py and vyre/__init__.py.

Spellings are data, not printing: this module must never import a backend or print source.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .types import ScalarType

# how an operator types its result from its operands (docs/IR.md, Binary):
# "same" = the operands' type, "bool" = bool
BinaryKind = Literal["arith", "bitwise", "shift", "comparison", "logical"]


@dataclass(frozen=True)
class BinaryOp:
    """`a op b`. `symbol`: the infix operator C and WGSL share where the op is one (the
    printers spell the rest themselves: div, rem, min, max, shifts and the logical ops have
    target-specific exact forms)."""

    name: str
    kind: BinaryKind
    symbol: str | None = None

    @property
    def result_is_bool(self) -> bool:
        return self.kind in ("comparison", "logical")


@dataclass(frozen=True)
class UnaryOp:
    """`op a`: `neg` (numbers), `bit_not` (integers), `not` (bool)."""

    name: str
    operand: Literal["number", "int", "bool"]


@dataclass(frozen=True)
class CallOp:
    """A function call. Operands and result share one type.

    `approximate`: docs/IR.md's approximate class (compared within 4 ulp plus 1e-6 near
    zero) for every float type not in `exact_types`; `reference` is then the f64 NumPy
    function the reference evaluates and rounds once to the type (exact functions have
    their own code in the reference's numeric.py). `exact_types`: the types for which the
    function has one exact definition (vyre.lower.maths rewrites every call of it into IR
    operations before any backend sees it, the reference included), so it is compared
    bit for bit there. The `approx_*` functions are the backends' own (vyre.approx).
    `c_f32` / `c_f64`: the C math library names (CUDA); f16 goes through f32.
    `wgsl`: the WGSL builtin printed as is, or None where the WGSL printer has a hook (a
    helper that gives the IR's semantics) for it. `wgsl_f64`: WGSL/SPIR-V has an f64 form
    (GLSL.std.450's transcendental functions are 16/32-bit only).
    `samples`: conformance arguments (one tuple per operand) on which every backend must
    agree with `reference` within the approximate tolerance; () for functions the
    conformance suite covers by hand.
    `signature`: for a function whose operands do not share the result's type, the operand
    types and then the result type (the packed dot products); None: one shared type.
    `doc`: the docstring of its builder function (vyre.<py_name>, generated into
    vyre/builder/calls.py); `params`: that function's parameter names, () for the usual
    ones (x; x, y; a, b, c). Unused where functions.py writes the helper by hand."""

    name: str
    arity: int
    float_only: bool = True
    approximate: bool = False
    reference: Callable[..., np.ndarray] | None = None
    c_f32: str = ""
    c_f64: str = ""
    wgsl: str | None = None
    wgsl_f64: bool = True
    samples: tuple[tuple[float, ...], ...] = ()
    exact_types: frozenset[str] = frozenset()

    def approximate_for(self, ty: str) -> bool:
        """Whether a call of this function with result type `ty` is approximate."""
        return self.approximate and ty not in self.exact_types
    signature: tuple[tuple[ScalarType, ...], ScalarType] | None = None
    doc: str = ""
    params: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert not self.approximate or self.reference is not None, self.name
        assert not self.samples or len(self.samples) == self.arity, self.name
        assert self.signature is None or len(self.signature[0]) == self.arity, self.name
        assert not self.params or len(self.params) == self.arity, self.name

    @property
    def py_name(self) -> str:
        """Its builder function's name: vyre.<py_name>, or vyre.approx.<py_name> for an
        `approx_` one; a trailing _ where the name is Python's own (abs_, pow_, round_)."""
        name = self.name.removeprefix("approx_")
        return f"{name}_" if hasattr(builtins, name) or keyword.iskeyword(name) else name

    @property
    def param_names(self) -> tuple[str, ...]:
        """Its builder function's parameter names (`params`, or x / x, y / a, b, c)."""
        return self.params or {1: ("x",), 2: ("x", "y")}.get(
            self.arity, tuple("abcdefgh"[:self.arity]))


def _dot4(name: str, acc: ScalarType, c_cast: str, wgsl: str) -> CallOp:
    """A packed 8-bit dot product with accumulation: `name(a, b, acc)` = acc + the sum over
    bytes i = 0..3 of a's byte i times b's byte i (little-endian bytes of u32 `a` and `b`,
    sign- or zero-extended by `acc`'s signedness), wrapping in 32 bits. The four products
    and their sum never overflow 32 bits (|sum| <= 4 * 128 * 128), so only the final
    `+ acc` wraps. CUDA: `__dp4a` (PTX `dp4a.s32.s32` / `.u32.u32`: d = c + sum, 32-bit);
    WGSL: `dot4I8Packed` / `dot4U8Packed` (the language feature
    packed_4x8_integer_dot_product) plus acc with WGSL's wrapping integer +. `c_f32` holds
    the C cast of the packed operands."""
    return CallOp(name, 3, float_only=False, c_f32=c_cast, wgsl=wgsl, wgsl_f64=False,
                  signature=((ScalarType.U32, ScalarType.U32, acc), acc))


#: The packed dot products (their operand and result types are fixed; see _dot4).
DOT4_I8 = _dot4("dot4_i8", ScalarType.I32, "(int)", "dot4I8Packed")
DOT4_U8 = _dot4("dot4_u8", ScalarType.U32, "(unsigned)", "dot4U8Packed")


def _libm(name: str, arity: int, wgsl: str | None, doc: str,
          params: tuple[str, ...] = ()) -> CallOp:
    """An exact float function spelled `namef` / `name` in C."""
    return CallOp(name, arity, c_f32=f"{name}f", c_f64=name, wgsl=wgsl, doc=doc,
                  params=params)


def _exact(name: str, arity: int, reference: Callable[..., np.ndarray], doc: str,
           samples: tuple[tuple[float, ...], ...] = (), f64: bool = False,
           params: tuple[str, ...] = ()) -> CallOp:
    """A function with one exact definition for f32 and f16 (and, with `f64`, for f64)
    in vyre.lower.maths, never spelled by a printer for those types; without `f64` its
    f64 form stays approximate (C's `name`; no WGSL f64 form)."""
    return CallOp(name, arity, approximate=True, reference=reference, c_f64=name, wgsl=None,
                  wgsl_f64=False, samples=samples,
                  exact_types=_LOWERED | {"f64"} if f64 else _LOWERED, doc=doc, params=params)


def _native(name: str, arity: int, reference: Callable[..., np.ndarray], wgsl: str | None,
            what: str, samples: tuple[tuple[float, ...], ...] = (),
            params: tuple[str, ...] = ()) -> CallOp:
    """`approx_<name>`: the backend's own function (C's `namef` / `name`, WGSL's builtin,
    or where that misses the bound a WGSL hook), reached only by this name (vyre.approx);
    backend-dependent within docs/IR.md's bound. `what` opens its docstring."""
    return CallOp(f"approx_{name}", arity, approximate=True, reference=reference,
                  c_f32=f"{name}f", c_f64=name, wgsl=wgsl, wgsl_f64=False, samples=samples,
                  doc=f"{what}, the backend's own (not the same bits on every backend).",
                  params=params)


_LOWERED = frozenset({"f32", "f16"})

# Near 1 asin's slope is unbounded: the samples include 1 - 2^-k and the ends exactly.
_ASIN_X = (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 0.999, -0.9999999, 1e-30, 0.25, 0.75,
           0.0625, 1.5, -2.0, float("inf"), float("nan"), 0.9999, 0.70710677, -0.3, 1e-5)
# hypot: no overflow of x*x, exact for Pythagorean triples, inf beats NaN (C99 Annex F)
_HYPOT_X = (3.0, -3.0, 0.0, -0.0, 1e30, 3e38, 1e-30, 1e-40, float("inf"), float("nan"),
            float("-inf"), 5.0, 1.0, 2.5, 1e20, 7.0, 0.1, -1e-20, 65504.0, 12.0)
_HYPOT_Y = (4.0, 4.0, 0.0, 0.0, 1e30, 3e38, 1e-30, 2e-40, float("nan"), float("inf"),
            1.0, 12.0, 1e-8, -2.5, 1e-20, 24.0, 0.2, 3e-20, 65504.0, 5.0)

def _hypot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C99 Annex F's hypot: +inf for an infinite operand beside any NaN, a signaling one
    included (NumPy/libm give NaN there; GPUs have no signaling NaNs)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x) | np.isinf(y), np.inf, np.hypot(x, y))


# the docstrings' recurring clauses
_CR = ("the same bits on every backend in f32, f16 and f64; correctly rounded, f64 on every "
       "argument tested: docs/IR.md")
_TRIG = f"radians; {_CR}"

CALL_OPS: tuple[CallOp, ...] = (
    CallOp("abs", 1, float_only=False, c_f32="fabsf", c_f64="fabs",
           doc="Absolute value (ints wrap: abs(INT_MIN) is INT_MIN)."),
    _libm("sqrt", 1, "sqrt", "Square root (correctly rounded)."),
    _exact("exp", 1, np.exp, f"e**x ({_CR}; vyre.approx.exp is the device's own).", f64=True),
    _exact("exp2", 1, np.exp2, f"2**x ({_CR}).", f64=True),
    _exact("log", 1, np.log, f"Natural logarithm ({_CR}).", f64=True),
    _exact("log2", 1, np.log2, f"Base-2 logarithm ({_CR}).", f64=True),
    _exact("sin", 1, np.sin, f"Sine ({_TRIG}; vyre.approx.sin is the device's own).", f64=True),
    _exact("cos", 1, np.cos, f"Cosine ({_TRIG}; vyre.approx.cos is the device's own).", f64=True),
    _exact("tan", 1, np.tan, f"Tangent ({_TRIG}; vyre.approx.tan is the device's own).", f64=True),
    _exact("tanh", 1, np.tanh, f"Hyperbolic tangent ({_CR}).", f64=True),
    _libm("floor", 1, "floor", "Round toward -inf."),
    _libm("ceil", 1, "ceil", "Round toward +inf."),
    _libm("trunc", 1, "trunc", "Round toward zero."),
    CallOp("round", 1, c_f32="rintf", c_f64="rint", wgsl="round",  # half to even
           doc="Round to nearest, ties to even."),
    _libm("fma", 3, "fma", "a * b + c rounded once."),
    CallOp("clamp", 3, float_only=False,  # min(max(x, lo), hi): spelled by each printer
           doc="min(max(x, lo), hi).", params=("x", "lo", "hi")),
    _exact("pow", 2, np.power, f"x**y, C99's pow ({_CR}).", f64=True),
    _exact("atan2", 2, np.arctan2, "The angle of (x, y), in radians, C99's atan2 "
           f"({_CR}; vyre.approx.atan2 is the device's own).", params=("y", "x"), f64=True),
    _exact("asin", 1, np.arcsin, "Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] "
           f"({_CR}; vyre.approx.asin is the device's own).", (_ASIN_X,), f64=True),
    _exact("acos", 1, np.arccos, f"Arc cosine in [0, pi]; NaN outside [-1, 1] ({_CR}).",
           (_ASIN_X,), f64=True),
    _exact("hypot", 2, _hypot, "sqrt(x^2 + y^2) without intermediate overflow or underflow "
           f"({_CR}); +inf if either is infinite, even beside a NaN.",
           (_HYPOT_X, _HYPOT_Y), f64=True),
    _native("exp", 1, np.exp, "exp", "e**x"),
    _native("exp2", 1, np.exp2, "exp2", "2**x"),
    _native("log", 1, np.log, "log", "Natural logarithm"),
    _native("log2", 1, np.log2, "log2", "Base-2 logarithm"),
    _native("sin", 1, np.sin, "sin", "Sine (radians)"),
    _native("cos", 1, np.cos, "cos", "Cosine (radians)"),
    _native("tan", 1, np.tan, "tan", "Tangent (radians)"),
    # WGSL's atan2 and asin inherit atan's 4096 ulp bound (llvmpipe's is ~20 ulp off):
    # hooks with Cephes' polynomials instead
    _native("atan2", 2, np.arctan2, None, "atan2(y, x)", params=("y", "x")),
    _native("asin", 1, np.arcsin, None, "Arcsine", (_ASIN_X,)),
    DOT4_I8,  # (their builder functions are written by hand: acc defaults to 0)
    DOT4_U8,
)

BINARY_OPS: tuple[BinaryOp, ...] = (
    BinaryOp("add", "arith", "+"),
    BinaryOp("sub", "arith", "-"),
    BinaryOp("mul", "arith", "*"),
    BinaryOp("div", "arith"),
    BinaryOp("rem", "arith"),
    BinaryOp("min", "arith"),
    BinaryOp("max", "arith"),
    BinaryOp("and", "bitwise", "&"),
    BinaryOp("or", "bitwise", "|"),
    BinaryOp("xor", "bitwise", "^"),
    BinaryOp("shl", "shift"),
    BinaryOp("shr", "shift"),
    BinaryOp("eq", "comparison", "=="),
    BinaryOp("ne", "comparison", "!="),
    BinaryOp("lt", "comparison", "<"),
    BinaryOp("le", "comparison", "<="),
    BinaryOp("gt", "comparison", ">"),
    BinaryOp("ge", "comparison", ">="),
    BinaryOp("logical_and", "logical"),
    BinaryOp("logical_or", "logical"),
)

UNARY_OPS: tuple[UnaryOp, ...] = (
    UnaryOp("neg", "number"),
    UnaryOp("bit_not", "int"),
    UnaryOp("not", "bool"),
)

CALLS: dict[str, CallOp] = {op.name: op for op in CALL_OPS}
BINARIES: dict[str, BinaryOp] = {op.name: op for op in BINARY_OPS}
UNARIES: dict[str, UnaryOp] = {op.name: op for op in UNARY_OPS}


def binary_names(kind: BinaryKind) -> frozenset[str]:
    """The binary operators of one kind."""
    return frozenset(op.name for op in BINARY_OPS if op.kind == kind)


def binary_symbols(*kinds: BinaryKind) -> dict[str, str]:
    """name -> infix symbol for the operators of `kinds` that have one, in registry order."""
    return {op.name: op.symbol for op in BINARY_OPS if op.kind in kinds and op.symbol}


__all__ = [
    "BINARIES", "BINARY_OPS", "CALLS", "CALL_OPS", "DOT4_I8", "DOT4_U8", "UNARIES", "UNARY_OPS", "BinaryKind",
    "BinaryOp", "CallOp", "UnaryOp", "binary_names", "binary_symbols",
]
