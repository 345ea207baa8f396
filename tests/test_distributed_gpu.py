"""vyre.distributed on a node with several GPUs: two CUDA actors exchange device data through
CUDA IPC (not Ray's object store), bit for bit, ordered after the source's earlier work.
Marked gpu; skipped with the reason without two CUDA devices or without Ray. Runs in a
subprocess of its own so that its Ray cluster (real GPUs) is not the suite's local one."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import vyre

pytestmark = pytest.mark.gpu

SCRIPT = textwrap.dedent("""
    import time
    import numpy as np
    import ray
    import vyre
    from vyre import DispatchConfig
    from vyre.distributed import spawn, transfer
    from vyre.tools.bench.vyre_impl import inc_program

    ray.init(num_gpus=2, include_dashboard=False, log_to_driver=False)
    a, b = spawn("cuda"), spawn("cuda")
    assert a.gpu_ids != b.gpu_ids and a.node_id == b.node_id, (a.gpu_ids, b.gpu_ids)
    n = 16 << 20
    data = np.arange(n, dtype=np.uint32)
    x = a.allocate_device_buffer(4 * n)
    a.write(x, data)
    cfg = DispatchConfig.for_elements(n, 256)
    for _ in range(3):  # still queued on a's GPU when the transfer starts
        a.dispatch_with_device_buffers(inc_program(), [], [x], cfg)
    t0 = time.perf_counter()
    y = transfer(x, b)
    t1 = time.perf_counter()
    assert np.array_equal(b.read(y, dtype=np.uint32), data + 3)
    assert b._call("stats")["ipc_copies"] == 1
    print(f"ipc transfer of {4 * n >> 20} MiB: {(t1 - t0) * 1e3:.1f} ms")
    a.close(); b.close()
    print("ok")
""")


def test_gpu_cuda_actors_of_one_node_transfer_through_cuda_ipc() -> None:
    avail = {x.name: x for x in vyre.available_backends()}.get("cuda")
    if avail is None or not avail.available:
        pytest.skip(f"no CUDA here: {avail.reason if avail else 'backend not registered'}")
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'vyre[distributed]'")
    from vyre.backends.cuda import driver as D

    if D.device_count() < 2:
        pytest.skip("needs 2 CUDA devices (this machine has fewer)")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout[-2000:] + out.stderr[-4000:]
    print(out.stdout)
