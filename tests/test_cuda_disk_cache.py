"""The CUDA on-disk cubin cache against a hostile cache directory (no GPU needed: NVRTC
compiles here, and the cache layer is exercised through compile_program).

An entry copied onto another program's key, a FIFO, a symlink to /dev/zero, an oversized
file at an entry's path, and a directory others can write: each costs a recompile (or the
cache is skipped with one warning), never a wrong cubin, a stall or a huge read.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import warnings
from pathlib import Path

import pytest

import vyre
from vyre.builder import ProgramBuilder
from vyre.ir.types import ScalarType as ST

nvrtc = pytest.importorskip("vyre.backends.cuda.nvrtc")
try:
    nvrtc.nvrtc_version()
except vyre.BackendError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"NVRTC cannot be loaded here: {exc}", allow_module_level=True)

ARCH = "sm_90"


def _prog(name: str, scale: float) -> vyre.Program:
    k = ProgramBuilder(name, workgroup_size=64)
    y = k.buffer("y", ST.F32, "read_write")
    i = k.global_linear_id()
    with k.if_(i < y.length()):
        y[i] = y[i] * scale
    return k.build()


def _cache_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    return d


def test_entry_copied_onto_another_key_is_not_loaded(tmp_path: Path) -> None:
    d = _cache_dir(tmp_path)
    a = nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d))
    b = nvrtc.compile_program(_prog("b", 3.0), ARCH, nvrtc.DiskCache(d))
    assert a.key != b.key and a.cubin != b.cubin
    shutil.copyfile(nvrtc.DiskCache(d).path(b.key), nvrtc.DiskCache(d).path(a.key))
    cache = nvrtc.DiskCache(d)
    again = nvrtc.compile_program(_prog("a", 2.0), ARCH, cache)
    assert not again.from_disk, "program A must never load program B's cubin"
    assert again.cubin == a.cubin and cache.stats.corrupt == 1
    assert nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d)).from_disk


def _compile_with_deadline(d: Path, seconds: float = 60.0) -> nvrtc.CompiledCubin:
    """compile_program in a thread, failing the test (not hanging it) if it blocks."""
    out: list[nvrtc.CompiledCubin] = []
    t = threading.Thread(target=lambda: out.append(
        nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d))), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "compile_program blocked on the cache entry"
    return out[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_at_entry_path_does_not_block(tmp_path: Path) -> None:
    d = _cache_dir(tmp_path)
    key = nvrtc.compile_program(_prog("a", 2.0), ARCH).key
    os.mkfifo(nvrtc.DiskCache(d).path(key))
    got = _compile_with_deadline(d)
    assert not got.from_disk
    # the FIFO was replaced by a real entry
    assert nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d)).from_disk


def test_symlink_to_dev_zero_is_not_read(tmp_path: Path) -> None:
    d = _cache_dir(tmp_path)
    key = nvrtc.compile_program(_prog("a", 2.0), ARCH).key
    os.symlink("/dev/zero", nvrtc.DiskCache(d).path(key))
    t0 = time.perf_counter()
    got = _compile_with_deadline(d)
    assert not got.from_disk and time.perf_counter() - t0 < 30
    assert os.path.exists("/dev/zero"), "the symlink's target must never be touched"


def test_oversized_entry_is_not_read_whole(tmp_path: Path) -> None:
    d = _cache_dir(tmp_path)
    key = nvrtc.compile_program(_prog("a", 2.0), ARCH).key
    path = nvrtc.DiskCache(d).path(key)
    with open(path, "wb") as f:  # sparse: 3 GB on paper, nothing on disk
        f.truncate(3 * 1024**3)
    t0 = time.perf_counter()
    got = _compile_with_deadline(d)
    assert not got.from_disk and time.perf_counter() - t0 < 30
    assert not path.exists() or path.stat().st_size < nvrtc.MAX_ENTRY_BYTES


def test_directory_others_can_write_is_skipped_with_one_warning(tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    cache = nvrtc.DiskCache(d)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = nvrtc.compile_program(_prog("a", 2.0), ARCH, cache)
        second = nvrtc.compile_program(_prog("a", 2.0), ARCH, cache)
    msgs = [str(w.message) for w in caught if "compile cache" in str(w.message)]
    assert len(msgs) == 1 and "others can write" in msgs[0] and "VYRE_CACHE_DIR" in msgs[0]
    assert not first.from_disk and not second.from_disk
    assert list(d.iterdir()) == [], "nothing may be written to a directory others can write"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="changing a directory's owner needs root")
def test_directory_of_another_user_is_skipped(tmp_path: Path) -> None:
    d = _cache_dir(tmp_path)
    os.chown(d, 65534, 65534)
    cache = nvrtc.DiskCache(d)
    with pytest.warns(RuntimeWarning, match="belongs to user id 65534"):
        got = nvrtc.compile_program(_prog("a", 2.0), ARCH, cache)
    assert not got.from_disk and list(d.iterdir()) == []


def test_missing_directory_is_created_private(tmp_path: Path) -> None:
    d = tmp_path / "new" / "cuda"
    nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d))
    assert (d.stat().st_mode & 0o777) == 0o700
    assert nvrtc.compile_program(_prog("a", 2.0), ARCH, nvrtc.DiskCache(d)).from_disk


def test_entry_written_by_another_process_mid_read_is_a_miss_not_damage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that finds no entry while another process renames one in must count a miss
    and leave the new entry alone (it used to see the path exist, call it corrupt and
    delete it: found as a flaky two-process cache test)."""
    d = tmp_path / "cache"
    reader, writer = nvrtc.DiskCache(str(d)), nvrtc.DiskCache(str(d))
    key = "ab" * 32
    real_read = nvrtc._read_entry

    def read_then_writer_lands(p: Path) -> bytes | None:
        got = real_read(p)  # nothing there yet
        writer.put(key, b"\x7fELF cubin")
        return got

    monkeypatch.setattr(nvrtc, "_read_entry", read_then_writer_lands)
    assert reader.get(key) is None
    assert reader.stats.corrupt == 0 and reader.stats.misses == 1
    monkeypatch.setattr(nvrtc, "_read_entry", real_read)
    assert reader.get(key) == b"\x7fELF cubin", "the freshly written entry was removed"
