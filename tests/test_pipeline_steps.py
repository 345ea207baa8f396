"""pipeline() over steps given as an iterator: read once, every step recorded (an iterator
consumed by the validation pass used to leave an empty pipeline that ran nothing)."""

from __future__ import annotations

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, Step, f32
from vyre.ir import nodes as N


def _add_one() -> N.Program:
    k = ProgramBuilder("add_one", workgroup_size=64)
    y = k.buffer("y", f32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] + 1.0
    return k.build()


@pytest.mark.parametrize("name", [a.name for a in vyre.available_backends() if a.available])
def test_pipeline_of_a_generator_runs_every_step(name: str) -> None:
    with vyre.get_backend(name) as b:
        if not b.supports("pipeline"):
            pytest.skip(f"{b.id} has no pipelines")
        y = b.allocate_device_buffer(16)
        b.write(y, np.zeros(4, np.float32))
        cfg = DispatchConfig.for_elements(4, 64)
        pipe = b.pipeline(Step(_add_one(), [], [y], cfg) for _ in range(3))
        res = pipe.run(repeat=2, read=[y])
        np.testing.assert_array_equal(res.reads[0], np.full(4, 6.0, np.float32))
