"""One exact definition per float function, written once as an IR -> IR rewrite.

`lower_maths(program)` replaces every call of a registered function (exp, exp2, log, ...)
by a call (`Invoke`) of its definition, one `Function` per function and type made of IR
operations every backend computes exactly, so every backend (the reference included: it
interprets the lowered Program) gets the same bits; correctly rounded is the goal
(docs/IR.md "Calls" says, per function, what is reached). It runs first in
`vyre.lower.lower` (which lowers each Function's body for the target) and in the
reference backend's plan.

Writing a function (the interface; stable):
- a module of this package (any name but the infrastructure modules: `apply`, `build`,
  `dd`, `registry`, `rounding`, `rounding64`; each other module is imported on first
  use) registers `@lowering("name", ScalarType.F32, ScalarType.F16)` (or `F64`) on
  `def f(b: Builder, args: tuple[X, ...]) -> X`: the call's arguments, each already a
  local or a constant, in; an expression of the call's type out.
- `Builder` / `X` (build.py): `X` has `+ - *` (numbers), `& | ^ << >> ~` (ints; shift
  amounts u32), `-x`, `.lt .le .gt .ge .eq .ne` (bool), `.land .lor .not_`, `.cast(ty)`,
  `.bitcast(ty)`, `.min .max`; Python numbers beside an `X` take its type. `b.f64(v)`,
  `b.f64_bits(0x3ff0...)`, `b.f32`, `b.i32`, `b.u32`, `b.const(ty, v)`,
  `b.select(c, a, b)`, `b.table(i, values, ty)` (values[i]: an IR `Table`, i a u32
  the lowering keeps in range), `b.f2i(x, ty)` (the target's own truncation, for an x
  kept in ty's range: no saturation tests), `b.let(x)` (evaluate once), `b.var(x)` +
  `b.assign(v, x)`,
  `with b.when(cond): ...` (statements under an `if`: slow paths).
- dd.py: double-double arithmetic from add and mul only (two_sum, fast_two_sum, two_prod
  by Veltkamp splitting, add / add_d / mul / mul_d, horner / horner_d with the
  high-order terms optionally in f64), and `split_const` / `dd_const` of an exact
  Fraction or Decimal.
- rounding.py: the last step. `finish(b, ty, y, rel_err, slow, tie_tol=0)` rounds an f64
  approximation `y` (relative error <= rel_err; finite: give special inputs a stand-in
  and select their results after) to f32 / f16, correctly, evaluating `slow()` (-> a
  double-double (hi, lo), made under an `if`) only where y (1 +- rel_err) straddles a
  rounding boundary; `round_dd(b, ty, hi, lo, tie_tol)`, `round_f64_f16`,
  `round_f16_grid`.
- rounding64.py: the f64 last step. `finish_f64(b, hi, lo, rel_err, slow, e, tie_tol)`
  rounds a double-double (hi, lo) (times 2^e) to f64 where hi + (lo +- err) agree, else
  rounds `slow()` (a double-double, or three terms from `dd.sum3`) under an `if`, a
  subnormal result once on its own grid (`round_scaled`); `scale(b, v, e)` = v 2^e.
- exp.py / log.py export their reductions for reuse: `power_of_two(b, e)`, `pow2(...)`
  (2^(k/16 + r) rounded), `reduce`, `log_dd`, `log2_fast`; exp64.py / log64.py theirs
  for f64: `exp64.reduce` (x = k ln2 / 64 + t, t a double-double), `exp64.pow_e`
  (2^(k/64) e^t rounded), `log64.reduce`, `log64.log_value` (FAST / SLOW).
Rules for a lowering: only integer ops, f32/f64 add / sub / mul, comparisons, select,
bitcasts and casts between float types (f64 division, sqrt and fma are not exact on every
backend: NVIDIA's Vulkan f64 division, the reference's slow f64 fma); keep every f64
intermediate far from the f64 subnormals (Vulkan may flush them); 32-bit integers only
(i64 is not on every device: an f64 definition finds exponents by comparisons and exact
scalings and reads bits from f32 casts, log64._normalise). Read the input through
`x.cast(F64)` (in flush mode that reads a subnormal f32 as zero, as docs/IR.md says a
function must) and classify the f64.
Cost (docs/perf-notes.md, scripts/maths_sass.py counts the SASS): on Hopper an f64 add /
mul issues at 64/clk/SM and a conversion (f32 <-> f64, float <-> int) at 16, so a
definition's common path keeps conversions few (rounding.finish: two) and its tables are
`b.table` reads, not select trees (NVRTC turned those into divergent branches).
"""

from .apply import lower_maths, lowered_calls
from .build import Builder, X
from .registry import Lowering, lowered, lowering, registered

__all__ = ["Builder", "Lowering", "X", "lower_maths", "lowered", "lowered_calls", "lowering",
           "registered"]
