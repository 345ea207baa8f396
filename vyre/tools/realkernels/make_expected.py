"""Compile each C driver in c/ with gcc at IEEE settings and write its output to
data/<kernel>.bin (the files the real-kernel tests compare vyre's ports against), plus
data/manifest.json (arguments, SHA-256 of each output, compiler).

    python -m vyre.tools.realkernels.make_expected [--check] [--large] [kernel ...]

--check recompiles and compares with the shipped files instead of writing them (exit 1 on a
difference). --large runs the kernels that have a larger problem (LARGE_ARGS) at that size
and records only the SHA-256 of the output in the manifest (the files would be too big to
ship; scripts/realkernels.py --large compares a port with it). Needs gcc (or $CC); nothing
else in the suite does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from vyre.tools.realkernels.common import C_DIR, DATA_DIR
from vyre.tools.realkernels.suite import KERNELS

HERE = Path(__file__).resolve().parent

#: IEEE f32 as written: no contraction into fma, no fast-math, SSE (never x87) on x86-64
CFLAGS = ["-O2", "-std=c11", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Werror"]


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("gcc")


def build_and_run(cc: str, name: str, out: Path, work: Path, large: bool = False) -> None:
    exe = work / name
    subprocess.run([cc, *CFLAGS, "-o", str(exe), str(C_DIR / f"{name}.c"), "-lm"], check=True)
    subprocess.run([str(exe), str(out), *KERNELS[name].c_args(large)], check=True)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    ap.add_argument("--large", action="store_true",
                    help="the larger problems (LARGE_ARGS): record or check their SHA-256 only")
    ap.add_argument("kernels", nargs="*")
    a = ap.parse_args(argv)
    names = a.kernels or [n for n, k in KERNELS.items() if k.large_args or not a.large]
    for name in names:
        if name not in KERNELS:
            ap.error(f"unknown kernel {name!r}; the kernels are {sorted(KERNELS)}")
        if a.large and KERNELS[name].large_args is None:
            ap.error(f"{name} has no larger problem (LARGE_ARGS)")
    cc = compiler()
    if cc is None:
        print("no C compiler: install gcc or set $CC", file=sys.stderr)
        return 2
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    manifest_path = DATA_DIR / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in names:
            fresh = work / f"{name}.bin"
            build_and_run(cc, name, fresh, work, a.large)
            data = fresh.read_bytes()
            if a.large:
                recorded = manifest.get(name, {}).get("large", {})
                if a.check:
                    same = (recorded.get("sha256") == digest(data)
                            and recorded.get("args") == KERNELS[name].large_args)
                    print(f"{name} (large): {'same' if same else 'DIFFERS from the manifest'}")
                    bad += not same
                    continue
                manifest.setdefault(name, {})["large"] = {
                    "args": KERNELS[name].large_args, "sha256": digest(data), "bytes": len(data)}
                print(f"{name} (large): recorded {digest(data)[:16]}... ({len(data)} bytes)")
                continue
            target = DATA_DIR / f"{name}.bin"
            if a.check:
                same = target.exists() and target.read_bytes() == data
                print(f"{name}: {'same' if same else 'DIFFERS from the shipped file'}")
                bad += not same
                continue
            target.write_bytes(data)
            manifest[name] = {
                **{k: v for k, v in manifest.get(name, {}).items() if k == "large"},
                "suite": KERNELS[name].suite,
                "source": KERNELS[name].source,
                "args": KERNELS[name].args,
                "sha256": digest(data),
                "bytes": len(data),
            }
            print(f"{name}: wrote {target.relative_to(HERE.parents[2])} ({len(data)} bytes)")
    if not a.check:
        manifest["_compiler"] = {"cc": cc, "flags": CFLAGS, "version": version.splitlines()[0]}
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
