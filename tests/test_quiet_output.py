"""vyre keeps driver noise off the user's terminal: what naga / wgpu-native log while a
shader compiles goes into the CompileError, and Mesa's "XDG_RUNTIME_DIR is invalid"
never appears (in a user's Python or in `vyre probe`), even with the variable unset."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import vyre
from vyre import DispatchConfig, ProgramBuilder, f32

AVAILABLE = {a.name for a in vyre.available_backends() if a.available}
needs_wgpu = pytest.mark.skipif("wgpu" not in AVAILABLE, reason="wgpu is not available here")


def _env_without_xdg() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env.get("PYTHONPATH", "")]
    )
    return env


@needs_wgpu
def test_no_xdg_noise_from_user_python() -> None:
    code = (
        "import numpy as np, vyre\n"
        "k = vyre.ProgramBuilder('q', workgroup_size=4)\n"
        "y = k.buffer('y', vyre.f32, 'read_write'); i = k.global_id()\n"
        "y[i] = y[i] + 1.0\n"
        "b = vyre.get_backend('wgpu')\n"
        "out = b.dispatch(k.build(), {'y': np.zeros(4, np.float32)}, vyre.DispatchConfig())\n"
        "print('RESULT', out['y'].tolist())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=_env_without_xdg(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "RESULT [1.0, 1.0, 1.0, 1.0]" in r.stdout
    assert "XDG_RUNTIME_DIR" not in r.stdout + r.stderr


@needs_wgpu
def test_no_xdg_noise_from_vyre_probe() -> None:
    r = subprocess.run([sys.executable, "-m", "vyre.tools.cli", "probe"], env=_env_without_xdg(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "wgpu" in r.stdout
    assert "XDG_RUNTIME_DIR" not in r.stdout + r.stderr


class _NoisyDevice:
    """The real device, except that shader creation logs like naga and then fails."""

    def __init__(self, device: Any) -> None:
        self._device = device

    def __getattr__(self, name: str) -> Any:
        return getattr(self._device, name)

    def create_shader_module(self, **kw: Any) -> Any:
        logging.getLogger("wgpu").error("naga: Shader validation error: the noisy detail")
        raise RuntimeError("Validation Error")


@needs_wgpu
def test_naga_messages_go_into_the_compile_error(capfd: pytest.CaptureFixture[str]) -> None:
    b = vyre.get_backend("wgpu")
    try:
        real = b.device
        b.device = _NoisyDevice(real)
        k = ProgramBuilder("noisy", workgroup_size=4)
        y = k.buffer("y", f32, "read_write")
        i = k.global_id()
        y[i] = y[i] * 3.0
        with pytest.raises(vyre.CompileError) as info:
            b.compile(k.build())
        assert "the noisy detail" in info.value.log
        assert "the noisy detail" in str(info.value)
        out, err = capfd.readouterr()
        assert "noisy detail" not in out + err, "naga's message reached the terminal"
        b.device = real
        got = b.dispatch(k.build(), {"y": np.ones(4, np.float32)}, DispatchConfig())["y"]
        np.testing.assert_array_equal(got, np.full(4, 3.0, np.float32))
    finally:
        b.close()
