"""The CUDA leak test (tests/test_cuda_runtime.py::test_no_leaks_over_thousands_of_cycles)
alone and while another process on the same GPU allocates and frees memory, as parallel
test shards do:

    python scripts/leak_test_contention.py

The test counts vyre's own driver allocations by pointer, so it must pass both times. For
comparison the script prints how far cuMemGetInfo's device-wide free bytes moved while each
run's process lived (its own CUDA context included: ~540 MiB on the H100, where the old
test, comparing those bytes before and after its cycles, allowed 8 MiB). H100 at 469d319:
both runs `1 passed`. Takes about 40 s on an H100.
This script must never change the GPU's settings; it only allocates device memory.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import vyre

# the other process: 512 MiB taken and given back in turns until killed
_CHURN = (
    "import time, vyre\n"
    "b = vyre.get_backend('cuda')\n"
    "while True:\n"
    "    x = [b.allocate_device_buffer(64 << 20) for _ in range(8)]\n"
    "    time.sleep(0.05)\n"
    "    for y in x: y.free()\n"
    "    time.sleep(0.05)\n"
)
_TEST = "tests/test_cuda_runtime.py::test_no_leaks_over_thousands_of_cycles"


def run_test(watch: Any) -> tuple[str, float]:
    """The test's outcome line and the largest move (MiB) of the device's free bytes from
    before the test, sampled while it runs."""
    before, _ = watch.memory_info()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             _TEST], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    moved = 0
    while proc.poll() is None:
        free, _ = watch.memory_info()
        moved = max(moved, abs(free - before))
        time.sleep(0.02)
    out = (proc.stdout.read() if proc.stdout else "").strip().splitlines()
    return (out[-1] if out else f"rc={proc.returncode}"), moved / (1 << 20)


def main() -> None:
    watch = vyre.get_backend("cuda")
    rows = [("alone", *run_test(watch))]
    churn = subprocess.Popen([sys.executable, "-c", _CHURN])
    try:
        time.sleep(3)  # its backend is up and churning
        rows.append(("with churn", *run_test(watch)))
    finally:
        churn.kill()
        churn.wait()
    print(f"{'run':<11} {'free bytes moved':>17}  new test")
    for name, outcome, mib in rows:
        print(f"{name:<11} {mib:>13.1f} MiB  {outcome}")


if __name__ == "__main__":
    main()
