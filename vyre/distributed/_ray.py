"""The one place vyre.distributed imports Ray: a clear error when the extra is missing.

Ray is an optional dependency (`pip install 'vyre[distributed]'`); importing
vyre.distributed without it must work, and only using it must fail, with the fix in the
message. This module must never start or connect to a Ray cluster itself.
"""

from __future__ import annotations

from typing import Any

from vyre.errors import BackendUnavailable


def require_ray() -> Any:
    """The `ray` module, or BackendUnavailable saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise BackendUnavailable(
            "ray", f"vyre.distributed needs Ray ({exc}); install it with "
            "pip install 'vyre[distributed]' (scripts/setup.sh does by default)"
        ) from None
    return ray


def require_cluster() -> Any:
    """The `ray` module of a driver already connected to a cluster."""
    ray = require_ray()
    if not ray.is_initialized():
        raise BackendUnavailable(
            "ray", "no Ray cluster is connected: call ray.init() for a local one, or "
            "ray.init(address='ray://head:10001') (or address='auto' on a cluster node) first"
        )
    return ray
