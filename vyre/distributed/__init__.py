"""vyre across processes and machines, on Ray (`pip install 'vyre[distributed]'`).

`spawn(kind)` starts a Ray actor that owns one backend instance on one device and returns a
`RemoteBackend` (a `vyre.Backend`) on `RemoteBuffer` handles; `transfer` moves
bytes explicitly; `Sharded` splits data-parallel work over several actors. Importing this
package never needs Ray; using it does (BackendUnavailable says how to install it).
"""

from __future__ import annotations

from .cluster import spawn
from .handle import RemoteBuffer
from .remote import RemoteBackend, RemoteBound, RemotePending, RemotePipeline
from .sharded import Shard, Sharded, ShardedArray, split
from .transfer import transfer

__all__ = [
    "RemoteBackend", "RemoteBound", "RemoteBuffer", "RemotePending", "RemotePipeline", "Shard",
    "Sharded", "ShardedArray", "spawn", "split", "transfer",
]
