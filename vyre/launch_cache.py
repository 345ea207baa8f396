"""The launch cache of a backend instance: dispatches re-issued over the same resident
buffers, bound and prepared once.

`LaunchCache` remembers what `bind` proved about a (program, buffers, grid, params,
options) call and the Launch holding the backend's record for it; `rebind` makes the
BoundDispatch a hit stands for. The launch path (vyre.launch_path) looks every unbound
dispatch up here. This module must never hold a buffer strongly (an entry dies with any of
its buffers), nor validate anything itself (that is `bind`'s).
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .binding import BoundDispatch, BufferArg, Launch, buffers_of, readable_twice
from .config import DispatchConfig
from .ir.nodes import Program


@dataclass(frozen=True)
class _Entry:
    """A remembered binding: what `bind` proved about it, by position in inputs + outputs."""

    order: tuple[int, ...]  # index into inputs + outputs of each declared buffer slot
    in_order: bool  # order is 0, 1, 2, ...: the given buffers are already in slot order
    counts: tuple[int, ...]
    params: tuple[bool | int | float, ...]
    aliased: frozenset[int]
    launch: Launch
    tracked: tuple[int, ...]  # ids of the buffers whose free or death evicts it


_pack_double = struct.Struct("<d").pack


def _ids(given: tuple[Any, ...]) -> tuple[int, ...]:
    """The identities of `given`: spelled out for the common short calls, where
    tuple(map(id, ...)) costs three times as much."""
    n = len(given)
    if n == 1:
        return (id(given[0]),)
    if n == 2:
        return (id(given[0]), id(given[1]))
    if n == 3:
        return (id(given[0]), id(given[1]), id(given[2]))
    return tuple(map(id, given))


def param_key(params: Mapping[str, Any]) -> tuple[Any, ...]:
    """Params as a key that tells apart what == does not: each value by its type and, for
    floats, its bit pattern (0.0 and -0.0, True and 1, NaN payloads are all different).
    A plain int, the common case, stands for itself."""
    return tuple([(k, v) if type(v) is int else (k, type(v), _bits(v))
                  for k, v in sorted(params.items())])


def _bits(v: Any) -> Any:
    return _pack_double(v) if isinstance(v, (float, np.floating)) else v


class LaunchCache:
    """The one cache of dispatches re-issued over the same resident buffers: what `bind`
    proved about a (program, buffers, grid, params, options) call and the backend's launch
    record for it, so a repeated call is validated and prepared once, not per call.

    Keyed by the buffers' identities; it holds them only weakly, and an entry is evicted as
    soon as any of its buffers (the indirect grid's included) is freed or dropped, so a hit
    always names the very live, unfreed buffers it validated (an id is never recycled while
    its object lives) and the cache never outgrows the buffers alive. Bounded: it starts
    afresh when full. Callers hold the backend's lock for everything but `get`.
    """

    LIMIT = 256

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self._entries: dict[tuple[Any, ...], _Entry] = {}
        self._keys: dict[int, dict[tuple[Any, ...], None]] = {}  # buffer id -> its keys
        self._refs: dict[int, weakref.ref[Any]] = {}  # buffer id -> ref that evicts on death
        self._configs: dict[int, tuple[DispatchConfig, tuple[Any, ...]]] = {}  # see _config_key

    def key(self, program: Program, ins: BufferArg, outs: BufferArg, config: DispatchConfig,
            given: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The cache key of a call (None when it cannot be cached: an unhashable param)."""
        # lists and tuples are told apart from mappings without an ABC isinstance check
        # (~0.1 us each): this runs on every unbound dispatch
        ti, to = type(ins), type(outs)
        try:
            hit = self._configs.get(id(config))
            return (program.content_hash, _ids(given),
                    len(ins) if ti is list or ti is tuple else
                    tuple(ins) if ti is dict or isinstance(ins, Mapping) else len(ins),
                    None if to is list or to is tuple else
                    tuple(outs) if to is dict or isinstance(outs, Mapping) else None,
                    hit[1] if hit is not None and hit[0] is config else
                    self._config_key(config))
        except (TypeError, AttributeError):  # an unhashable param, not a Program or config:
            return None  # bind() will say what is wrong

    def _config_key(self, config: DispatchConfig) -> tuple[Any, ...]:
        """The config's part of a key; remembered per config object, since a caller that
        re-dispatches usually passes the same one (params are sorted and their bits read
        once, not per call)."""
        hit = self._configs.get(id(config))
        if hit is not None and hit[0] is config:
            return hit[1]
        grid: Any = config.grid
        params = config.params
        indirect = type(grid) is not tuple
        if indirect:  # its buffer and offset (not remembered: that would keep the buffer)
            grid = (id(grid.buffer), grid.offset)
        key = (grid, param_key(params) if params else (), config.profile, config.options.key)
        hash(key)
        if not indirect:
            if len(self._configs) >= self.LIMIT:
                self._configs.clear()
            self._configs[id(config)] = (config, key)
        return key

    def get(self, key: tuple[Any, ...]) -> _Entry | None:
        return self._entries.get(key)

    def lookup(self, program: Program, inputs: BufferArg, outputs: BufferArg,
               config: DispatchConfig) -> tuple[_Entry | None, tuple[Any, ...],
                                                tuple[Any, ...] | None, BufferArg, BufferArg]:
        """The one lookup of a (program, inputs, outputs, config) call: (the entry
        remembered for it or None, its buffers in the order given, its key or None when it
        cannot be cached, the inputs and outputs read once: iterators become tuples)."""
        ti, to = type(inputs), type(outputs)
        if (ti is list or ti is tuple) and (to is list or to is tuple):
            given = (*inputs, *outputs)  # the common case, without helper calls
        else:
            if ti not in (tuple, list, dict) or to not in (tuple, list, dict):
                inputs, outputs = readable_twice(inputs), readable_twice(outputs)  # once
            given = (*buffers_of(inputs), *buffers_of(outputs))
        key = self.key(program, inputs, outputs, config, given)
        entry = self._entries.get(key) if key is not None else None
        return entry, given, key, inputs, outputs

    def put(self, key: tuple[Any, ...], bound: BoundDispatch, given: tuple[Any, ...],
            grid_buffer: Any) -> _Entry | None:
        """Remember `bound` (bound from `given`, inputs then outputs) under `key`."""
        position = {id(b): j for j, b in enumerate(given)}
        order = tuple(position[id(b)] for b in bound.buffers)
        if len(self._entries) >= self.LIMIT:  # before the refs below are looked up
            self.clear()
        tracked = (*given, grid_buffer) if grid_buffer is not None else given
        entry = _Entry(order, order == tuple(range(len(given))), bound.counts, bound.params,
                       bound.aliased, bound.launch, tuple({id(b): 0 for b in tracked}))
        wself = weakref.ref(self)
        new: dict[int, weakref.ref[Any]] = {}
        for b in tracked:
            bid = id(b)
            if bid in self._refs or bid in new:
                continue

            def gone(_ref: Any, bid: int = bid) -> None:
                me = wself()
                if me is not None:
                    with me._lock:
                        me.evict(bid)

            try:
                new[bid] = weakref.ref(b, gone)
            except TypeError:  # not weak-referenceable: it cannot be tracked, so no entry
                return None
        self._refs.update(new)
        for bid in entry.tracked:
            self._keys.setdefault(bid, {})[key] = None
        self._entries[key] = entry
        return entry

    def evict(self, buffer_id: int) -> None:
        """Forget every entry that uses the buffer with this id (freed or dying)."""
        for key in self._keys.pop(buffer_id, {}):
            entry = self._entries.pop(key, None)
            for bid in entry.tracked if entry is not None else ():
                keys = self._keys.get(bid)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del self._keys[bid]
                        self._refs.pop(bid, None)
        self._refs.pop(buffer_id, None)

    def clear(self) -> None:
        self._configs.clear()
        self._entries.clear()
        self._keys.clear()
        self._refs.clear()

    def __len__(self) -> int:
        return len(self._entries)


def rebind(entry: _Entry, program: Program, given: tuple[Any, ...],
           config: DispatchConfig) -> BoundDispatch:
    """The BoundDispatch a remembered entry stands for, sharing its Launch."""
    buffers = given if entry.in_order else tuple(given[j] for j in entry.order)
    return BoundDispatch(program, buffers, entry.counts, entry.params, config.grid, config,
                         entry.aliased, entry.launch)
