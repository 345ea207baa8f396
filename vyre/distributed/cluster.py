"""`spawn`: start a backend actor placed by Ray's resources and return its RemoteBackend.

A cuda actor asks Ray for one GPU (`num_gpus=1`), and Ray both picks the device and makes it
the only one the actor's process sees (CUDA_VISIBLE_DEVICES), so the actor opens `cuda:0`;
reference and wgpu actors ask for none (lavapipe runs on CPU; pass num_gpus=1 to pin a wgpu
actor to a GPU node). An actor Ray cannot place within `placement_timeout_s` is refused with
what the cluster has free, never waited on forever. This module must never pick devices
itself (Ray does) or start a cluster (the caller's ray.init does).
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

from vyre.errors import BackendUnavailable, InvalidDispatch
from vyre.registry import _entry_points, parse_spec

from ._ray import require_cluster
from .actor import BackendActor
from .remote import DEFAULT_TIMEOUT_S, RemoteBackend

_serial = itertools.count(1)


def spawn(
    backend: str = "reference",
    *,
    name: str | None = None,
    num_gpus: float | None = None,
    num_cpus: float | None = None,
    resources: dict[str, float] | None = None,
    placement_timeout_s: float = 120.0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_restarts: int = 0,
) -> RemoteBackend:
    """A backend of kind `backend` ("reference", "wgpu", "cuda") in a new Ray actor.

    `num_gpus` defaults to 1 for cuda and 0 otherwise; `num_cpus` to 0 for cuda (the GPU
    does the work) and 1 otherwise (the reference and lavapipe compute on a core); `timeout_s` bounds every later call
    (a hung actor raises BackendUnavailable instead of blocking). Ray chooses the GPU of a
    cuda actor: its ids are `.gpu_ids`; "cuda:N" is refused for that reason.
    """
    _check_args(backend, name, num_gpus, num_cpus, resources, placement_timeout_s, timeout_s,
                max_restarts)
    ray = require_cluster()
    kind = backend.split(":", 1)[0]
    local = backend
    if kind == "cuda":
        if backend != "cuda":
            raise InvalidDispatch(
                f"spawn({backend!r}): Ray picks the GPU of a cuda actor; spawn 'cuda' (one GPU "
                "per actor) and read .gpu_ids to see which one it got")
        local = "cuda:0"  # the only device Ray leaves visible to the actor
        num_gpus = 1 if num_gpus is None else num_gpus
    num_gpus = 0 if num_gpus is None else num_gpus
    if num_cpus is None:
        num_cpus = 0 if kind == "cuda" else 1
    actor_name = name or f"vyre-{kind}-{os.getpid()}-{next(_serial)}"
    opts: dict[str, Any] = {"num_gpus": num_gpus, "num_cpus": num_cpus,
                            "max_restarts": max_restarts}
    if resources:
        opts["resources"] = resources
    if name is not None:
        opts["name"] = name
    try:
        actor = ray.remote(BackendActor).options(**opts).remote(local, actor_name)
    except ValueError as exc:  # Ray: "The name ... is already taken"
        raise InvalidDispatch(
            f"spawn: Ray refused an actor named {actor_name!r} ({exc}); an actor of that name "
            "is alive in this namespace: pick another name, leave name=None for a fresh one, "
            "or close() the RemoteBackend that holds it") from None
    try:
        info = ray.get(actor.info.remote(), timeout=placement_timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.kill(actor, no_restart=True)
        raise BackendUnavailable(
            f"ray:{actor_name}",
            f"Ray placed no actor asking for {num_gpus} GPU(s), {num_cpus} CPU(s)"
            f"{f', {resources}' if resources else ''} within {placement_timeout_s} s; "
            f"the cluster has {_fmt(ray.cluster_resources())}, free now "
            f"{_fmt(ray.available_resources())}: close() an actor that holds them, or add nodes"
        ) from None
    except ray.exceptions.RayError as exc:  # died opening it (or an error Ray can't unpickle)
        ray.kill(actor, no_restart=True)
        raise BackendUnavailable(
            f"ray:{actor_name}", f"the actor could not open backend {local!r}: "
            f"{str(exc).strip()[-600:]}") from None
    return RemoteBackend(actor, actor_name, info, timeout_s)


def _check_args(backend: Any, name: Any, num_gpus: Any, num_cpus: Any, resources: Any,
                placement_timeout_s: Any, timeout_s: Any, max_restarts: Any) -> None:
    """spawn's arguments, checked before Ray is asked for anything."""
    if not isinstance(backend, str):
        raise BackendUnavailable(
            repr(backend)[:40], f"spawn takes a backend kind as a str ('reference', 'wgpu' or "
            f"'cuda'), got {type(backend).__name__}; e.g. vyre.distributed.spawn('cuda')")
    kind = parse_spec(backend)[0]
    known = sorted(_entry_points())
    if kind not in known:
        raise BackendUnavailable(
            kind, f"spawn({backend!r}): no backend of that name is registered; known: {known}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidDispatch(
            f"spawn: name must be a non-empty str (a Ray actor name) or None, got "
            f"{type(name).__name__} {name!r:.40}")
    for what, v in (("num_gpus", num_gpus), ("num_cpus", num_cpus)):
        if v is not None and not _number(v, 0):
            raise InvalidDispatch(f"spawn: {what} must be a number >= 0 or None, got {v!r:.40}")
    for what, v in (("placement_timeout_s", placement_timeout_s), ("timeout_s", timeout_s)):
        if not _number(v, 0) or v == 0:
            raise InvalidDispatch(f"spawn: {what} must be a number of seconds > 0, got {v!r:.40}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
        raise InvalidDispatch(
            f"spawn: max_restarts must be an int >= 0 (or -1: without limit), got "
            f"{max_restarts!r:.40}")
    if resources is not None and not (
            isinstance(resources, dict)
            and all(isinstance(k, str) and _number(v, 0) for k, v in resources.items())):
        raise InvalidDispatch(
            f"spawn: resources must be a dict of resource name to amount >= 0, got "
            f"{resources!r:.60}")


def _number(v: Any, low: float) -> bool:
    """A real number (not a bool), finite and >= low."""
    return (not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            and v >= low)


def _fmt(res: dict[str, float]) -> str:
    keys = ("CPU", "GPU")
    return ", ".join(f"{res.get(k, 0):g} {k}" for k in keys)
