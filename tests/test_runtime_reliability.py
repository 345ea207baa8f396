"""Runtime reliability (issue 28): configs that cannot change behind the caches, errors that
survive pickling, host arrays of either byte order, bounded indirect grids and repeats."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32
from vyre.backend import BaseBackend
from vyre.errors import InvalidDispatch

BACKENDS = [a.name for a in vyre.available_backends() if a.available]


@pytest.fixture(params=BACKENDS)
def be(request: pytest.FixtureRequest) -> Iterator[BaseBackend]:
    b = vyre.get_backend(request.param)
    yield b
    b.close()


def saxpy() -> vyre.Program:
    k = ProgramBuilder("saxpy", workgroup_size=64)
    x = k.buffer("x", f32)
    y = k.buffer("y", f32, "read_write")
    a = k.param("a", f32)
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = a * x[i] + y[i]
    return k.build()


# ------------------------------------------------------------------ configs are immutable


def test_changed_params_are_refused_not_ignored(be: BaseBackend) -> None:
    """Mutating a config's params used to be silently ignored by the next resident dispatch
    with the same config (the launch cache remembers configs by identity)."""
    x = np.arange(4, dtype=np.float32)
    bx = be.allocate_device_buffer(16)
    by = be.allocate_device_buffer(16)
    try:
        be.write(bx, x)
        be.write(by, np.zeros(4, np.float32))
        cfg = DispatchConfig(params={"a": 1.0})
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg)
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg.params["a"] = 5.0
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg.params.clear()
        assert cfg.params == {"a": 1.0}
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg)
        np.testing.assert_array_equal(be.read(by, dtype=np.float32), 2 * x)
        # the way to change them: a new, validated config, which the next dispatch honours
        cfg5 = cfg.model_copy(update={"params": {**cfg.params, "a": 5.0}})
        assert cfg5.params["a"] == 5.0 and cfg.params["a"] == 1.0
        be.dispatch_with_device_buffers(saxpy(), [bx], [by], cfg5)
        np.testing.assert_array_equal(be.read(by, dtype=np.float32), 7 * x)
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            cfg5.params["a"] = 1.0
    finally:
        be.free(bx)
        be.free(by)


def test_config_survives_pickle_and_copy_immutable() -> None:
    import copy
    import pickle

    cfg = DispatchConfig(grid=(3, 1, 1), params={"a": 2.0, "n": 7})
    for again in (pickle.loads(pickle.dumps(cfg)), copy.deepcopy(cfg), copy.copy(cfg)):
        assert again == cfg and dict(again.params) == {"a": 2.0, "n": 7}
        with pytest.raises(InvalidDispatch, match="cannot be changed"):
            again.params["a"] = 1.0
