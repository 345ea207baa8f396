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
import os
from typing import Any

from vyre.errors import BackendUnavailable, InvalidDispatch

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
    actor = ray.remote(BackendActor).options(**opts).remote(local, actor_name)
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
    except ray.exceptions.RayActorError as exc:
        raise BackendUnavailable(
            f"ray:{actor_name}", f"the actor could not open backend {local!r}: "
            f"{str(exc).strip()[-600:]}") from None
    return RemoteBackend(actor, actor_name, info, timeout_s)


def _fmt(res: dict[str, float]) -> str:
    keys = ("CPU", "GPU")
    return ", ".join(f"{res.get(k, 0):g} {k}" for k in keys)
