"""Choosing a WebGPU adapter, requesting a device, and probing what it can really run.

Adapter choice: the device spec (`wgpu:1` by index, `wgpu:llvmpipe` by a substring of the
name), else $VYRE_WGPU_ADAPTER (same forms), else the high-performance adapter. The device
is requested with the optional features vyre can use and the largest buffer limits the
adapter offers. A vyre feature (f16, f64, i64, atomic_float) is reported only if the
adapter has the wgpu feature *and* naga accepts a probe shader that uses it the way the
WGSL generator emits it. Float behaviour the generated code depends on is measured, not
assumed: subnormal flushing, whether fma rounds once, whether f32 division and sqrt are
correctly rounded (divsqrt.py's hard cases), and the driver's silent loop limit (docs/IR.md,
"Probed capabilities"). This module must never run user programs or hold vyre buffers.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import platform
import shutil
import stat
import struct
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vyre import features as F
from vyre.errors import BackendUnavailable
from vyre.ir.types import ScalarType

from . import native_flush
from .options import WgpuOptions  # (its ENV_* switches are read there, once per instance)

ENV_ADAPTER = "VYRE_WGPU_ADAPTER"
# wgpu feature names we ask for when the adapter offers them
OPTIONAL_FEATURES = (
    "shader-f16",
    "shader-f64",
    "shader-int64",
    "shader-float32-atomic",
    "timestamp-query",
    "subgroup",
)
LIMITS_WANTED = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroup-size-z",
    "max-compute-workgroups-per-dimension",
)

# probe shaders: exactly the constructs the generator emits for each feature
_PROBES = {
    F.F16: (
        "shader-f16",
        "enable f16;\n@group(0) @binding(0) var<storage, read_write> b: array<f16>;\n"
        "@compute @workgroup_size(1) fn main() { b[0] = b[1] * 1.5h + f16(f32(b[2])); }",
    ),
    F.F64: (
        "shader-f64",
        "@group(0) @binding(0) var<storage, read_write> b: array<f64>;\n"
        "fn t(x: f64) -> i32 { if (x != x) { return 0i; } return i32(x); }\n"
        "@compute @workgroup_size(1) fn main() { b[0] = b[1] * 1.5lf + f64(t(b[2])); }",
    ),
    F.I64: (
        "shader-int64",
        "struct U { a: i64, b: u64, n: u32 }\n@group(0) @binding(1) var<uniform> u: U;\n"
        "@group(0) @binding(0) var<storage, read_write> b: array<i64>;\n"
        "@compute @workgroup_size(1) fn main() {\n"
        "  b[0] = b[1] / u.a + bitcast<i64>(u.b >> (u.n & 63u)) + i64(i32(b[2]));\n}",
    ),
    F.ATOMIC_FLOAT: (
        "shader-float32-atomic",
        "@group(0) @binding(0) var<storage, read_write> b: array<atomic<f32>>;\n"
        "@compute @workgroup_size(1) fn main() { atomicAdd(&b[0], 1.0f); }",
    ),
}

FEATURE_TYPES = {F.F16: ScalarType.F16, F.F64: ScalarType.F64, F.I64: ScalarType.I64}


def ensure_runtime_dir() -> None:
    """Give Mesa's Vulkan drivers a valid $XDG_RUNTIME_DIR (a private 0700 directory) when
    it is unset or unusable, before the Vulkan loader starts: otherwise every adapter
    probe prints "XDG_RUNTIME_DIR is invalid or not set" to the user's terminal. A valid
    one the user set is left alone."""
    current = os.environ.get("XDG_RUNTIME_DIR", "")
    if current:
        try:
            st = os.stat(current)
            if (stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o077
                    and (not hasattr(os, "getuid") or st.st_uid == os.getuid())):
                return
        except OSError:
            pass
    private = tempfile.mkdtemp(prefix="vyre-xdg-")  # mode 0700
    os.environ["XDG_RUNTIME_DIR"] = private
    atexit.register(shutil.rmtree, private, True)


class _Collect(logging.Handler):
    """Appends each record's message to a list (one class, not a class defined per
    compile: that was a third of the capture's cost)."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# wgpu-py's logger (looked up at the first capture, after wgpu made it of its own
# class; a logger lives as long as the process) and each thread's idle handler: a
# capture reuses them instead of looking the logger up and making a handler (its lock,
# its registration) per compile, about half the capture's cost
_WGPU_LOG: logging.Logger | None = None
_IDLE = threading.local()


@contextlib.contextmanager
def captured_wgpu_log() -> Iterator[list[str]]:
    """Collect what wgpu-native (naga's shader messages included) logs through wgpu-py's
    "wgpu" logger during the block, instead of letting it reach the user's terminal; the
    caller puts it into the error it raises."""
    global _WGPU_LOG
    logger = _WGPU_LOG
    if logger is None:
        logger = _WGPU_LOG = logging.getLogger("wgpu")
    messages: list[str] = []
    handler: _Collect | None = getattr(_IDLE, "handler", None)
    if handler is None:  # (the first capture in this thread, or one nested in another)
        handler = _Collect(messages)
    else:
        _IDLE.handler = None
        handler.messages = messages
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        handler.messages = []  # (the caller keeps its list; the idle handler holds none)
        _IDLE.handler = handler


def import_wgpu() -> Any:
    ensure_runtime_dir()
    try:
        import wgpu
    except ImportError as exc:
        raise BackendUnavailable(
            "wgpu", f"the 'wgpu' package is not installed ({exc}); pip install 'vyre[wgpu]'"
        ) from None
    return wgpu


def no_adapter_fix() -> str:
    if platform.system() == "Linux":
        return (
            "install a Vulkan driver: `apt-get install mesa-vulkan-drivers` (lavapipe runs "
            "on the CPU) or your GPU vendor's driver"
        )
    if platform.system() == "Windows":
        return "install or update your GPU driver (D3D12/Vulkan)"
    return "install or update your GPU driver (Metal on macOS, Vulkan elsewhere)"


def _info(adapter: Any) -> dict[str, Any]:
    info = adapter.info
    return {k: info.get(k, "") for k in ("device", "vendor", "adapter_type", "backend_type",
                                          "description")}


def adapter_name(adapter: Any) -> str:
    info = _info(adapter)
    return str(info["device"] or info["description"] or info["vendor"] or "unknown adapter")


def list_adapters() -> list[Any]:
    wgpu = import_wgpu()
    try:
        adapters = list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as exc:
        raise BackendUnavailable("wgpu", f"enumerating adapters failed: {exc!r}") from None
    # compute work wants a real API: keep OpenGL adapters only if nothing else exists
    good = [a for a in adapters if _info(a)["backend_type"] != "OpenGL"]
    return good or adapters


def select_adapter(spec: str | int | None) -> Any:
    """The adapter for a device spec (index, name substring, None), see module docstring."""
    wgpu = import_wgpu()
    if spec is None:
        spec = os.environ.get(ENV_ADAPTER) or None
    if spec is None:
        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as exc:
            raise BackendUnavailable(
                "wgpu", f"no WebGPU adapter found ({exc}); {no_adapter_fix()}"
            ) from None
        if adapter is None:
            raise BackendUnavailable("wgpu", f"no WebGPU adapter found; {no_adapter_fix()}")
        return adapter
    adapters = list_adapters()
    names = [f"{i}: {adapter_name(a)} ({_info(a)['backend_type']})" for i, a in enumerate(adapters)]
    if not adapters:
        raise BackendUnavailable("wgpu", f"no WebGPU adapter found; {no_adapter_fix()}")
    s = str(spec).strip()
    if s.isdigit():
        i = int(s)
        if i >= len(adapters):
            raise BackendUnavailable(
                f"wgpu:{s}", f"adapter index {i} out of range; adapters here: {names}"
            )
        return adapters[i]
    for a in adapters:
        info = _info(a)
        hay = " ".join(str(v) for v in info.values()).lower()
        if s.lower() in hay:
            return a
    raise BackendUnavailable(f"wgpu:{s}", f"no adapter matches {s!r}; adapters here: {names}")


@dataclass
class DeviceInfo:
    adapter: Any
    device: Any
    name: str
    details: dict[str, Any]
    wgpu_features: frozenset[str]
    limits: dict[str, int]
    vyre_features: frozenset[str]  # IR features that probe shaders proved
    fma_fused: bool = True  # the driver's f32 fma rounds once (measured)
    flush_subnormals: bool = False  # f32 subnormals flushed: measured, or options.force_flush
    flush_tininess: str = F.TININESS_SUBNORMAL_RESULT  # which results flush (measured)
    native_flush: bool = False  # the device's f32 + - * fma are flush mode (native_flush.py)
    div_correct: bool = True  # the driver's f32 division is correctly rounded (measured)
    sqrt_correct: bool = True  # the driver's f32 sqrt is correctly rounded (measured)
    exact_div: bool = False  # emit vyre's exact division (not div_correct, or options.div_sqrt)
    exact_sqrt: bool = False  # emit vyre's exact sqrt (not sqrt_correct, or options.div_sqrt)
    loop_limit: int | None = None  # the driver ends loops after this many passes (loopcount.py)
    subgroup_size: int | None = None  # probed (None: no subgroups vyre can use)
    subgroup_note: str = "no: the adapter has no 'subgroup' feature"  # what the probe found


def open_device(adapter: Any, options: WgpuOptions) -> DeviceInfo:
    """Open `adapter`'s device and measure what vyre needs to know about it; `options`
    force modes the probe would not choose (flush mode, exact or native division)."""
    feats = [f for f in OPTIONAL_FEATURES if f in adapter.features]
    alimits = dict(adapter.limits)
    limits = {k: alimits[k] for k in LIMITS_WANTED if k in alimits}
    try:
        device = adapter.request_device_sync(
            label="vyre", required_features=feats, required_limits=limits
        )
    except Exception as exc:
        raise BackendUnavailable(
            "wgpu", f"requesting a device from {adapter_name(adapter)} failed: {exc}"
        ) from None
    dev_feats = frozenset(str(f) for f in device.features)
    dev_limits = {str(k): int(v) for k, v in dict(device.limits).items()}
    proven = {F.WORKGROUP_MEMORY}
    with captured_wgpu_log():  # a probe the device refuses is an answer, not a message
        for vf, (wf, code) in _PROBES.items():
            if wf in dev_feats and _compiles(device, code):
                proven.add(vf)
        device_flushes, tininess = _flushes_f32_subnormals(device)
        flush = options.force_flush or device_flushes
        native_ops = (
            device_flushes and options.native_flush
            and _flushes_like_flush_mode(device, tininess)
        )
        div_ok, sqrt_ok = _probe_div_sqrt(device, flush)
        fma_fused = _fma_rounds_once(device)
        loop_limit = _probe_loop_limit(device)
        sg_size, sg_note = (None, "no: the adapter has no 'subgroup' feature")
        if "subgroup" in dev_feats:
            sg_size, sg_note = _probe_subgroups(device)
    if sg_size is not None:
        proven.add(F.SUBGROUP)
    mode = options.div_sqrt
    return DeviceInfo(
        fma_fused=fma_fused,
        flush_subnormals=flush,
        flush_tininess=tininess,
        native_flush=native_ops,
        div_correct=div_ok,
        sqrt_correct=sqrt_ok,
        exact_div=mode.startswith("exact") or (mode != "native" and not div_ok),
        exact_sqrt=mode.startswith("exact") or (mode != "native" and not sqrt_ok),
        loop_limit=loop_limit,
        subgroup_size=sg_size,
        subgroup_note=sg_note,
        adapter=adapter,
        device=device,
        name=adapter_name(adapter),
        details=_info(adapter),
        wgpu_features=dev_feats,
        limits=dev_limits,
        vyre_features=frozenset(proven),
    )


def _run_probe(device: Any, code: str, data: bytes, groups: int = 1) -> bytes:
    """Run `code` (one read_write f32/u32 buffer at binding 0) over `data` in `groups`
    workgroups; the buffer after."""
    wgpu = import_wgpu()
    u = wgpu.BufferUsage
    buf = device.create_buffer_with_data(data=data, usage=u.STORAGE | u.COPY_SRC)
    try:
        m = device.create_shader_module(code=code)
        pipe = device.create_compute_pipeline(
            layout="auto", compute={"module": m, "entry_point": "main"}
        )
        bg = device.create_bind_group(
            layout=pipe.get_bind_group_layout(0),
            entries=[{"binding": 0, "resource": {"buffer": buf, "offset": 0, "size": len(data)}}],
        )
        enc = device.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, bg)
        cp.dispatch_workgroups(groups)
        cp.end()
        device.queue.submit([enc.finish()])
        return bytes(device.queue.read_buffer(buf))
    finally:
        buf.destroy()


# Two products of normal f32 whose exact values lie just below FLT_MIN (0x00800000):
# 0x205187f6 * 0x1f9c6325 = FLT_MIN (1 - 0.46 * 2^-24) rounds to FLT_MIN with an unbounded
# exponent; 0x205d6025 * 0x1f94051b = FLT_MIN (1 - 0.77 * 2^-24) rounds below it. Which of
# them a flushing device flushes is its tininess rule (docs/IR.md).
_TINY_PRODUCTS = (0x205187F6, 0x1F9C6325, 0x205D6025, 0x1F94051B)
_TININESS_OF = {  # (first product, second product) -> the rule
    (0x00800000, 0): F.TININESS_AFTER_ROUNDING,
    (0, 0): F.TININESS_BEFORE_ROUNDING,
    (0x00800000, 0x00800000): F.TININESS_SUBNORMAL_RESULT,
}


def _flushes_f32_subnormals(device: Any) -> tuple[bool, str]:
    """Vulkan lets f32 arithmetic flush subnormals (NVIDIA's driver does, lavapipe does
    not); measure a subnormal input (x * 1) and a subnormal result (min normal * 0.5), and
    on a flushing device which products just below FLT_MIN flush (`_TINY_PRODUCTS`).
    Returns (flushes, tininess rule); a device that keeps subnormals gets flush mode only
    from vyre's own code, which flushes subnormal results (TININESS_SUBNORMAL_RESULT)."""
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(1) fn main() {\n"
        "  b[3] = bitcast<u32>(bitcast<f32>(b[0]) * bitcast<f32>(b[2]));\n"
        "  b[4] = bitcast<u32>(bitcast<f32>(b[1]) * 0.5f * bitcast<f32>(b[2]));\n"
        "  b[9] = bitcast<u32>(bitcast<f32>(b[5]) * bitcast<f32>(b[6]));\n"
        "  b[10] = bitcast<u32>(bitcast<f32>(b[7]) * bitcast<f32>(b[8]));\n}"
    )
    data = struct.pack("<11I", 0x00000001, 0x00800000, 0x3F800000, 0, 0, *_TINY_PRODUCTS, 0, 0)
    try:
        out = struct.unpack("<11I", _run_probe(device, code, data))
    except Exception:  # could not measure: IEEE (the comparisons then show any flushing)
        return False, F.TININESS_SUBNORMAL_RESULT
    if out[3] == 0x00000001 and out[4] == 0x00400000:
        return False, F.TININESS_SUBNORMAL_RESULT
    pair = (out[9] & 0x7FFFFFFF, out[10] & 0x7FFFFFFF)
    return True, _TININESS_OF.get(pair, f"unknown: products just below FLT_MIN gave {pair}")


def _flushes_like_flush_mode(device: Any, tininess: str) -> bool:
    """Whether the device's own f32 + - * and fma, spelled bare, give docs/IR.md's flush
    mode under `tininess` on native_flush.py's cases (then the printer leaves them to it)."""
    try:
        out = _run_probe(device, native_flush.PROBE_CODE, native_flush.PROBE_DATA)
    except Exception:
        return False  # could not measure: the explicit spelling, exact on any device
    return native_flush.agrees(out, tininess)


# fma(-2.5, 1e10, 1e10) rounded once is f32(-1.5e10) = -15000000512.0; rounding the
# product first gives -15000001536.0
_FMA_ONCE_BITS = struct.unpack("<I", struct.pack("<f", -1.5e10))[0]


def _fma_rounds_once(device: Any) -> bool:
    """Vulkan lets fma round twice (llvmpipe does); measure fma(-2.5, 1e10, 1e10)."""
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(1) fn main() {\n"
        "  b[3] = bitcast<u32>(fma(bitcast<f32>(b[0]), bitcast<f32>(b[1]), bitcast<f32>(b[2])));\n}"
    )
    data = struct.pack("<3fI", -2.5, 1e10, 1e10, 0)
    try:
        out = struct.unpack("<4I", _run_probe(device, code, data))
    except Exception:
        return False  # could not measure: emulate (exact where f64 is available)
    return out[3] == _FMA_ONCE_BITS


def _probe_loop_limit(device: Any) -> int | None:
    """The number of loop passes a program's loops may make before the driver silently ends
    them (Mesa's llvmpipe ends every loop after 65535, counted over all loops of the shader
    and the invocations of a SIMD group: loopcount.py), or None. The trip count comes from
    the buffer, so no compiler can know or shorten the loop."""
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        "@compute @workgroup_size(1) fn main() {\n"
        "  let n = b[0];\n  let step = b[1];\n  var c = 0u;\n"
        "  loop { if (c >= n) { break; } c = c + step; }\n  b[2] = c;\n}"
    )
    try:
        out = struct.unpack("<3I", _run_probe(device, code, struct.pack("<3I", LOOP_PROBE, 1, 0)))
    except Exception:
        return None  # could not measure: no limit assumed
    if out[2] >= LOOP_PROBE:
        return None
    return int(out[2])  # all of it: the generated code counts its loops, it spends none


LOOP_PROBE = 70_000  # iterations the loop-limit probe asks for


def _probe_div_sqrt(device: Any, flush: bool) -> tuple[bool, bool]:
    """(division correctly rounded, sqrt correctly rounded) on the hard cases of
    `vyre.backends.wgpu.divsqrt`, compared bit for bit with IEEE (in flush mode: the
    flushed IEEE result of flushed operands, as the generated code computes it)."""
    from .divsqrt import div_cases, expected_div, expected_sqrt, same_bits, sqrt_cases

    a, b = div_cases()
    x = sqrt_cases()
    n, m = a.size, x.size
    code = (
        "@group(0) @binding(0) var<storage, read_write> v: array<u32>;\n"
        "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
        f"  let i = g.x;\n"
        f"  if (i < {n}u) {{ v[{2 * n + m}u + i] = bitcast<u32>("
        f"bitcast<f32>(v[i]) / bitcast<f32>(v[{n}u + i])); }}\n"
        f"  if (i < {m}u) {{ v[{3 * n + m}u + i] = bitcast<u32>(sqrt(bitcast<f32>(v[{2 * n}u + i]))); }}\n"
        "}"
    )
    data = b"".join(arr.astype("<f4").tobytes() for arr in (a, b, x)) + bytes(4 * (n + m))
    try:
        raw = _run_probe(device, code, data, groups=-(-max(n, m) // 64))
    except Exception:
        return False, False  # could not measure: emit the exact operations
    import numpy as np

    out = np.frombuffer(raw, dtype="<f4")
    got_div, got_sqrt = out[2 * n + m : 3 * n + m], out[3 * n + m :]
    return (
        same_bits(got_div, expected_div(a, b, flush), flush),
        same_bits(got_sqrt, expected_sqrt(x, flush), flush),
    )


# workgroup shapes the subgroup probe runs: docs/IR.md's lane mapping must hold in each
SUBGROUP_PROBE_SHAPES = ((64, 1, 1), (256, 1, 1), (1024, 1, 1), (8, 4, 2), (16, 16, 4))


def subgroup_lanes(device: Any, shape: tuple[int, int, int]) -> int | None:
    """The subgroup size every invocation of a workgroup of `shape` sees, if docs/IR.md's
    lane mapping holds there (shuffles from lane local_index mod size and from lane 0 read
    the local_index that mapping says, in every invocation), else None. Raises where the
    pipeline itself fails. (Vulkan does not promise the mapping: llvmpipe, whose subgroups
    are 8 lanes along x, pads each row whose x size is not a multiple of 8.)"""
    # (naga refuses @builtin(subgroup_invocation_id) in multi-dimensional workgroups, so
    # vyre never uses it: the lane is local_index mod size, checked here through shuffles)
    x, y, z = shape
    n = x * y * z
    code = (
        "@group(0) @binding(0) var<storage, read_write> b: array<u32>;\n"
        f"@compute @workgroup_size({x}, {y}, {z}) fn main(\n"
        "    @builtin(local_invocation_index) li: u32,\n"
        "    @builtin(subgroup_size) size: u32) {\n"
        "  let lane = li % size;\n"
        "  let ok = subgroupShuffle(li, lane) == li && subgroupShuffle(li, 0u) == li - lane;\n"
        "  b[li] = select(0u, size, ok);\n}"
    )
    got = set(struct.unpack(f"<{n}I", _run_probe(device, code, bytes(4 * n))))
    return got.pop() if len(got) == 1 and 0 not in got else None


def _probe_subgroups(device: Any) -> tuple[int | None, str]:
    """(subgroup size, note). docs/IR.md defines lane l of subgroup s as local_index
    s * S + l; Vulkan does not promise that mapping, nor one size for every pipeline, so
    both are measured over several workgroup shapes (subgroup_lanes); a program of another
    shape is measured again before it runs (runtime.py)."""
    sizes: set[int] = set()
    for shape in SUBGROUP_PROBE_SHAPES:
        try:
            size = subgroup_lanes(device, shape)
        except Exception as exc:
            return None, f"no: the subgroup probe failed ({str(exc)[:120]})"
        if size is None:
            return None, (f"no: in a workgroup of {shape} the driver's subgroup lanes are "
                          "not local_index mod subgroup_size (docs/IR.md's lane mapping)")
        sizes.add(size)
    if len(sizes) != 1:
        return None, (f"no: the driver picks different subgroup sizes {sorted(sizes)} for "
                      "different pipelines, so no single size can be reported")
    size = sizes.pop()
    if size not in (1, 2, 4, 8, 16, 32, 64, 128):
        return None, f"no: subgroup size {size} is not a power of two up to 128"
    return size, (f"yes: {size} lanes (measured in workgroups of {SUBGROUP_PROBE_SHAPES}; "
                  "a program of another shape is measured before it runs)")


def _compiles(device: Any, code: str) -> bool:
    try:
        m = device.create_shader_module(code=code)
        device.create_compute_pipeline(layout="auto", compute={"module": m, "entry_point": "main"})
        return True
    except Exception:
        return False
