"""The one compile cache every backend's compiler sits behind.

Compiled programs are kept per instance, least recently used dropped first, keyed by
(program content hash, the compile key, the compiler's options): the compile key is the
binding's specialisation (`Compiler.specialisation`) or `Compiler.plain_key`. A miss is
checked against the device (features, workgroup limits) before the compiler runs; an
evicted artifact is handed to `Compiler.evict` and compiled again (or loaded from a disk
cache) when next used. This module must never compile anything itself, nor know what an
artifact is.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any, Protocol

import numpy as np

from .binding import BindingBackend, check_program_fits
from .errors import InvalidDispatch
from .ir.nodes import Program
from .ir.validate import validate
from .parts import Compiler

ENV_COMPILE_CACHE = "VYRE_COMPILE_CACHE_SIZE"
DEFAULT_COMPILE_CACHE_SIZE = 512
"""Compiled programs an instance keeps (least recently used dropped first); an evicted
program is compiled again (or loaded from the disk cache) when next used."""


def compile_cache_size_from_env() -> int:
    """$VYRE_COMPILE_CACHE_SIZE (an int >= 1), else DEFAULT_COMPILE_CACHE_SIZE."""
    raw = os.environ.get(ENV_COMPILE_CACHE, "").strip()
    if not raw:
        return DEFAULT_COMPILE_CACHE_SIZE
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidDispatch(
            f"${ENV_COMPILE_CACHE}={raw!r}: the compile cache size must be an int >= 1 "
            f"(compiled programs kept per instance; default {DEFAULT_COMPILE_CACHE_SIZE})"
        )
    return n


class CacheOwner(BindingBackend, Protocol):
    """What the cache asks of the instance it serves: its lock and open check, and (as
    binding does) its id and capabilities."""

    _lock: Any

    def _check_open(self) -> None: ...


class CompileCache:
    """A backend instance's compiled programs over its `compiler` (see the module docstring)."""

    def __init__(self, owner: CacheOwner, compiler: Compiler) -> None:
        self.owner = owner
        self.compiler = compiler
        self.stats = compiler.stats
        # LRU: least recently used first; bounded by `limit` (see _trim)
        self._artifacts: OrderedDict[tuple[str, Any, Any], Any] = OrderedDict()
        self.limit = compile_cache_size_from_env()

    def get(self, program: Program, key: Any) -> Any:
        """The artifact of `program` for compile key `key`, compiled on a miss."""
        owner = self.owner
        owner._check_open()
        if not isinstance(program, Program):
            raise InvalidDispatch(f"expected a vyre Program, got {type(program).__name__}")
        validate(program)  # first: it bounds the program before anything walks all of it
        cache_key = (program.content_hash, key, self.compiler.options)
        with owner._lock:
            owner._check_open()
            hit = self._artifacts.get(cache_key)
            if hit is not None:
                self.stats.hits += 1
                self._artifacts.move_to_end(cache_key)
                return hit
            check_program_fits(owner, program)
            artifact = self.compiler.compile(program, key)
            self.stats.misses += 1
            self._artifacts[cache_key] = artifact
            self._trim()
            return artifact

    def set_limit(self, n: int) -> None:
        """Keep at most `n` artifacts (least recently used are dropped first)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidDispatch(
                f"the compile cache size must be an int >= 1, got {n!r:.40}"
            )
        with self.owner._lock:
            self.limit = int(n)
            self._trim()

    def __len__(self) -> int:
        return len(self._artifacts)

    def _trim(self) -> None:
        while len(self._artifacts) > self.limit:
            _, old = self._artifacts.popitem(last=False)
            self.stats.evictions += 1
            self.compiler.evict(old)

    def close(self) -> None:
        """Hand every artifact to the compiler to release, and forget them (lock held)."""
        artifacts = list(self._artifacts.values())
        self._artifacts.clear()
        self.compiler.close(artifacts)
