"""The standard program library: Programs and host drivers for the common parallel patterns,
each checked bit for bit against the reference on every backend.

Modules: `elementwise` (saxpy / axpby, fused maps, conversions, fill / iota, gather /
scatter), `reduce` (sum / min / max / argmin / argmax), `scan` (inclusive / exclusive
prefix sums; stream compaction, of values and of their positions), `histogram` (any bin
count, exact integer counts), `radix_sort` (stable u32 / i32 / f32 keys, key-value pairs),
`matmul` (tiled f32), `matmul_i8` (exact int8 / uint8 -> int32, on CUDA's tensor cores
where it has them), `stencil` (2-D five-point), `cpp_frontend` (a C-preprocessor-style
front end on bytes).

Each module offers up to three levels, by how much the caller keeps on the device:

- `*_host(backend, array, ...)`: upload a NumPy array, run, read the result back;
- `*_device(backend, src, dst, n, ...)`: run on resident buffers, nothing read back;
- `plan_*(backend, src, dst, n, ...)`: return a `Plan` (the dispatch steps and the
  temporaries they use) without running it, to run with `run_plan` or splice into your own
  pipeline: `backend.pipeline(my_steps + plan.steps)` (then free `plan.temporaries`).

Every argument error is a `LibraryArgumentError`, a `vyre.BackendError` (and a
`ValueError`) whose message names the values that work.
"""

from ._common import LibraryArgumentError, Plan, run_plan

__all__ = [
    "LibraryArgumentError",
    "Plan",
    "cpp_frontend",
    "elementwise",
    "histogram",
    "matmul",
    "matmul_i8",
    "radix_sort",
    "reduce",
    "run_plan",
    "scan",
    "stencil",
]
