"""Is vyre.print free for a kernel without it, and what does a 1% shadow run cost?

    python3 scripts/zero_cost_print.py                 # on the GPU machine: cuda:0 and wgpu
    python3 scripts/zero_cost_print.py --dry           # anywhere: quick sizes, reference + wgpu
    python3 scripts/zero_cost_print.py --prepare       # here, where git history is: see below

Part 1, zero cost (issue 30): the launch-overhead rows (`vyre bench` workload "dispatch":
launch, roundtrip, readback, batch100) and the bandwidth rows ("copy", "saxpy") of three
trees, interleaved round by round (the order rotates each round): main just before the
print branch was merged (BEFORE = dbd9917^1), just after (AFTER = dbd9917), and the
current checkout. Each run is its own `vyre bench` process, importing that tree's vyre
(checked) with that tree's own bench code. One table: per row the median over rounds of
each tree, after/before and current/before.

Part 2, shadow cost: a realistic stream of resident dispatches (saxpy, a 3-point stencil
and a workgroup reduction over 1M-element buffers, 3 x --steps dispatches, one sync at the
end) on the primary backend alone, then under vyre.tools.shadow.Shadow at rate 0.01 with
each shadow backend (default: the other bench backends and the reference), interleaved;
the primary-alone time against the time with the shadow, and what one sampled dispatch
costs. Differences found are counted (there must be none).

The older trees come from git (`git archive`, into a temporary folder) when the checkout
has its history; a copy of a checkout without .git needs them carried: run `--prepare`
where the history is (it writes them into .zerocost/, ignored by git) and carry
".zerocost". Without either it stops, saying so. Output: the tables on stdout and
zero_cost.json (every figure) in --out ($OUT when set). On one H200 the whole run takes
about 2-3 minutes. This is a measurement tool: it must never change what it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REVS = {"before": "dbd9917^1", "after": "dbd9917"}  # main around the print merge
PREPARED = ROOT / ".zerocost"  # --prepare writes the older trees here (carry it)
WORKLOADS = "dispatch,copy,saxpy"
ROWS = ("dispatch.launch", "dispatch.roundtrip", "dispatch.readback", "dispatch.batch100",
        "copy", "saxpy")
# a bench process: this tree's vyre (checked: not an installed copy), then `vyre bench`
BOOT = ("import os, sys; tree = os.path.realpath(sys.argv[1]); import vyre; "
        "got = os.path.realpath(vyre.__file__); "
        "sys.exit(f'vyre came from {got}, not from the tree {tree}') "
        "if not got.startswith(tree + os.sep) else None; "
        "from vyre.tools.cli import main; sys.exit(main(sys.argv[2:]))")


def fail(msg: str) -> None:
    print(f"zero_cost_print: {msg}", file=sys.stderr)
    sys.exit(2)


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True)


def has_history() -> bool:
    try:
        return all(git("rev-parse", "--verify", "--quiet", f"{r}^{{commit}}").returncode == 0
                   for r in REVS.values())
    except OSError:  # no git at all
        return False


def export(rev: str, dest: Path) -> None:
    """The vyre package of `rev` (all a bench run imports) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = git("archive", "--format=tar", rev, "vyre")
    if archive.returncode != 0:
        fail(f"git archive {rev} failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def prepare() -> None:
    if not has_history():
        fail(f"--prepare needs the git history with {', '.join(REVS.values())} in {ROOT}")
    shutil.rmtree(PREPARED, ignore_errors=True)
    for label, rev in REVS.items():
        export(rev, PREPARED / label)
        sha = git("rev-parse", rev).stdout.decode().strip()
        (PREPARED / label / "REVISION").write_text(f"{rev} {sha}\n")
    exclude = Path(git("rev-parse", "--git-path", "info/exclude").stdout.decode().strip())
    if not exclude.is_absolute():
        exclude = ROOT / exclude
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if "/.zerocost/" not in lines:
        exclude.write_text("\n".join([*lines, "/.zerocost/"]) + "\n")
    size = sum(f.stat().st_size for f in PREPARED.rglob("*") if f.is_file())
    print(f"wrote {PREPARED} ({size / 1e6:.1f} MB, ignored by git): carry \".zerocost\" "
          "with the run")


def trees(work: Path) -> dict[str, Path]:
    """before / after / current: folders whose `vyre` package a bench run imports."""
    out: dict[str, Path] = {}
    if all((PREPARED / label / "vyre" / "__init__.py").exists() for label in REVS):
        for label in REVS:
            out[label] = PREPARED / label
            print(f"# {label}: {(PREPARED / label / 'REVISION').read_text().strip()} "
                  f"(carried in {PREPARED})")
    elif has_history():
        for label, rev in REVS.items():
            export(rev, work / label)
            out[label] = work / label
            sha = git("rev-parse", "--short", rev).stdout.decode().strip()
            print(f"# {label}: {rev} = {sha} (git archive into {work / label})")
    else:
        fail(f"{ROOT} has no git history with {' and '.join(REVS.values())} (the checkout "
             f"was copied without .git?) and no {PREPARED.name}/ folder: run `python3 "
             f"scripts/zero_cost_print.py --prepare` in a checkout with the history and "
             f"carry \"{PREPARED.name}\" with this run")
    out["current"] = ROOT
    head = git("rev-parse", "--short", "HEAD")
    print(f"# current: {ROOT}"
          + (f" at {head.stdout.decode().strip()}" if head.returncode == 0 else ""))
    return out


def bench_once(tree: Path, backends: list[str], out_dir: Path, quick: bool) -> dict[str, Any]:
    args = ["bench", "--workloads", WORKLOADS, "--no-peers", "--out", str(out_dir)]
    for b in backends:
        args += ["--backend", b]
    if quick:
        args.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for k in [k for k in env if k.startswith("VYRE_CHECK") or k == "VYRE_REPLAY_DIR"]:
        del env[k]  # (the same unchecked runtime in every tree)
    proc = subprocess.run([sys.executable, "-c", BOOT, str(tree), *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"vyre bench in {tree} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
             f"{proc.stderr[-3000:]}")
    doc: dict[str, Any] = json.loads((out_dir / "bench.json").read_text())
    return doc


def figures(doc: dict[str, Any]) -> dict[tuple[str, str], tuple[float, str]]:
    """(implementation, metric) -> (value, unit) of the passed vyre rows."""
    return {(r["implementation"], r["metric"]): (float(r["value"]), r["unit"])
            for r in doc["results"]
            if r["is_vyre"] and r["status"] == "ok" and r["value"] is not None
            and r["metric"] in ROWS}


def zero_cost(args: argparse.Namespace, work: Path, budget_end: float) -> dict[str, Any]:
    tr = trees(work)
    labels = list(tr)
    runs: dict[str, list[dict[tuple[str, str], tuple[float, str]]]] = {k: [] for k in labels}
    for rnd in range(args.rounds):
        if rnd and time.monotonic() > budget_end:
            print(f"# time budget reached: {rnd} round(s)")
            break
        order = labels[rnd % len(labels):] + labels[:rnd % len(labels)]
        for label in order:
            t0 = time.monotonic()
            doc = bench_once(tr[label], args.backends, work / f"bench-{rnd}-{label}", args.dry)
            runs[label].append(figures(doc))
            print(f"# round {rnd + 1}: {label} in {time.monotonic() - t0:.1f} s")
    keys = sorted({k for r in runs.values() for f in r for k in f},
                  key=lambda k: (k[0], ROWS.index(k[1])))
    table = []
    for key in keys:
        vals = {lab: [f[key][0] for f in runs[lab] if key in f] for lab in labels}
        unit = next(f[key][1] for r in runs.values() for f in r if key in f)
        med = {lab: statistics.median(v) if v else None for lab, v in vals.items()}
        spread = max((max(v) - min(v)) / statistics.median(v) for v in vals.values()
                     if len(v) > 1 and statistics.median(v)) if args.rounds > 1 else None
        table.append({"implementation": key[0], "metric": key[1], "unit": unit, **med,
                      "samples": vals, "spread": spread})
    print("\n== zero cost: vyre bench rows, median of the rounds (lower is better for us, "
          "higher for GB/s)")
    head = f"{'row':<32} {'unit':<5} {'before':>10} {'after':>10} {'current':>10} " \
           f"{'after/bef':>9} {'cur/bef':>8} {'spread':>7}"
    print(head)
    print("-" * len(head))
    def num(v: float | None) -> str:
        return "-" if v is None else (f"{v:,.1f}" if v >= 10 else f"{v:.3g}")

    def ratio(x: float | None, b: float | None) -> str:
        return "-" if x is None or not b else f"{x / b:.3f}"

    for t in table:
        b, a, c = t["before"], t["after"], t["current"]
        sp = "-" if t["spread"] is None else f"{t['spread']:.0%}"
        print(f"{t['implementation'] + ' ' + t['metric']:<32} {t['unit']:<5} {num(b):>10} "
              f"{num(a):>10} {num(c):>10} {ratio(a, b):>9} {ratio(c, b):>8} {sp:>7}")
    print("(spread: the largest (max - min) / median of one tree's rounds: the noise "
          "a ratio must clear)")
    return {"trees": {k: str(v) for k, v in tr.items()}, "rows": table}


# ------------------------------------------------------------------ part 2: shadow cost


def stream_programs() -> list[Any]:
    """saxpy (the library's), a 3-point stencil and a workgroup reduction."""
    import vyre
    from vyre import f32
    from vyre.programs import elementwise

    # (annotations spelled in full: names imported in a function are not kept for them)
    @vyre.kernel(workgroup_size=256)
    def smooth(y: vyre.Buffer[vyre.f32], z: vyre.Output[vyre.f32], n: vyre.u32) -> None:
        i = vyre.global_linear_id()
        if i < n:
            left = vyre.select(i > 0, y[vyre.max_(i, 1) - 1], y[i])
            right = vyre.select(i + 1 < n, y[vyre.min_(i + 1, n - 1)], y[i])
            z[i] = (left + y[i] + right) * 0.25

    @vyre.kernel(workgroup_size=256)
    def block_sums(z: vyre.Buffer[vyre.f32], sums: vyre.Output[vyre.f32], n: vyre.u32) -> None:
        tile = vyre.shared(f32, 256)
        t = vyre.local_index()
        i = vyre.global_linear_id()
        tile[t] = vyre.select(i < n, z[vyre.min_(i, n - 1)], 0.0)
        vyre.barrier()
        for s in (128, 64, 32, 16, 8, 4, 2, 1):
            if t < s:
                tile[t] = tile[t] + tile[t + s]
            vyre.barrier()
        if t == 0:
            sums[vyre.workgroup_id(0)] = tile[0]

    return [elementwise.saxpy(), smooth, block_sums]


def shadow_cost(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    import vyre
    from vyre import DispatchConfig
    from vyre.tools.shadow import Shadow

    n = args.elements
    saxpy, smooth, block_sums = stream_programs()
    primary = vyre.get_backend(args.primary)
    others = {name: vyre.get_backend(name) for name in args.shadows}
    rng = np.random.default_rng(7)
    bufs = {k: primary.allocate_device_buffer(4 * n) for k in ("x", "y", "z")}
    sums = primary.allocate_device_buffer(4 * (n // 256 + 1))
    x0 = rng.standard_normal(n).astype(np.float32)
    calls = [(saxpy, [bufs["x"]], [bufs["y"]],
              DispatchConfig.for_elements(n, 256, params={"n": n, "a": 0.5})),
             (smooth.program, [bufs["y"]], [bufs["z"]], smooth.config(n, n=n)),
             (block_sums.program, [bufs["z"]], [sums], block_sums.config(n, n=n))]

    def run(be: Any) -> float:
        primary.write(bufs["x"], x0)
        primary.write(bufs["y"], np.zeros(n, np.float32))
        primary.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            for prog, ins, outs, cfg in calls:
                be.dispatch_with_device_buffers(prog, ins, outs, cfg)
        be.synchronize()
        return time.perf_counter() - t0

    run(primary)  # compiles and warms every program
    shadows = {name: Shadow(primary, against=be, rate=args.rate, seed=11,
                            on_difference="log") for name, be in others.items()}
    for sh in shadows.values():  # one full sampled step each: the shadows' compiles
        warm = Shadow(primary, against=sh.against, every=1, on_difference="log")
        for prog, ins, outs, cfg in calls:
            warm.dispatch_with_device_buffers(prog, ins, outs, cfg)
        sh.differences.extend(warm.differences)
    alone: list[float] = []
    under: dict[str, list[float]] = {k: [] for k in shadows}
    for _ in range(args.repeats):
        alone.append(run(primary))
        for name, sh in shadows.items():
            under[name].append(run(sh))
    base = statistics.median(alone)
    total = args.steps * len(calls)
    print(f"\n== shadow cost: {total} resident dispatches ({len(calls)} programs over "
          f"{n:,} f32, one sync at the end) on {primary.id}, rate {args.rate}, median of "
          f"{args.repeats}")
    print(f"{'primary alone':<28} {base * 1e3:10.1f} ms")
    rows = {}
    for name, sh in shadows.items():
        t = statistics.median(under[name])
        per = sh.shadowed / args.repeats
        each = (t - base) / per * 1e3 if per else float("nan")
        cost = f"~{each:.1f} ms each" if per else "none sampled: raise --steps"
        print(f"{'with a ' + sh.against.id + ' shadow':<28} {t * 1e3:10.1f} ms  "
              f"x{t / base:.2f}  ({per:.1f} sampled per stream, {cost}; "
              f"{len(sh.differences)} difference(s))")
        rows[name] = {"median_s": t, "samples_s": under[name], "ratio": t / base,
                      "sampled_per_stream": per, "ms_per_sampled": each,
                      "differences": [m for m, _ in sh.differences]}
        for msg, _ in sh.differences[:3]:
            print(f"   DIFFERENCE: {msg[:400]}")
    for b in (*bufs.values(), sums):
        primary.free(b)
    for be in others.values():
        be.close()
    primary.close()
    return {"primary": args.primary, "elements": n, "dispatches": total, "rate": args.rate,
            "alone_s": alone, "alone_median_s": base, "shadows": rows}


def available(specs: list[str]) -> list[str]:
    """`specs` without the backends this machine lacks (each named, with the reason)."""
    import vyre
    from vyre.registry import parse_spec

    why = {a.name: a.reason for a in vyre.available_backends() if not a.available}
    kept = [s for s in specs if parse_spec(s)[0] not in why]
    for s in specs:
        if s not in kept:
            print(f"# {s} is not available here, left out: {why[parse_spec(s)[0]]}")
    if not kept:
        fail(f"none of {specs} is available here (see `vyre probe`)")
    return kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prepare", action="store_true",
                    help="write the older trees into .zerocost/ (for a copy without .git)")
    ap.add_argument("--dry", action="store_true", help="quick sizes, one round, a short "
                    "stream, wgpu and the reference (a check that the script works)")
    ap.add_argument("--backends", help="bench backends, comma-separated (default "
                    "cuda:0,wgpu; --dry: wgpu,reference); unavailable ones are left out")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 2; --dry: 1)")
    ap.add_argument("--primary", help="shadow part: the shadowed backend (default: the "
                    "first bench backend)")
    ap.add_argument("--shadows", help="shadow part: shadow backends, comma-separated "
                    "(default: the other bench backends, then the reference)")
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--steps", type=int, help="stream steps of 3 dispatches (default 400; "
                    "--dry: 100)")
    ap.add_argument("--elements", type=int, help="f32 elements per buffer (default 2^20; "
                    "--dry: 2^14)")
    ap.add_argument("--repeats", type=int, default=3, help="streams per setting")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds after which no new bench round starts (default 120)")
    ap.add_argument("--skip", choices=("bench", "shadow"), action="append", default=[],
                    help="leave a part out")
    ap.add_argument("--out", help="folder for zero_cost.json (default $OUT, else "
                    "./zero-cost-out)")
    args = ap.parse_args()
    if args.prepare:
        prepare()
        return
    args.backends = available((args.backends or ("wgpu,reference" if args.dry else
                                                  "cuda:0,wgpu")).split(","))
    args.rounds = args.rounds or (1 if args.dry else 2)
    args.steps = args.steps or (100 if args.dry else 400)
    args.elements = args.elements or (1 << 14 if args.dry else 1 << 20)
    args.primary = args.primary or args.backends[0]
    args.shadows = (args.shadows.split(",") if args.shadows else
                    [*(b for b in args.backends if b != args.primary), "reference"])
    args.shadows = list(dict.fromkeys(s for s in args.shadows if s != args.primary))
    out = Path(args.out or os.environ.get("OUT") or "zero-cost-out")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    doc: dict[str, Any] = {"args": {k: v for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="vyre-zero-cost-") as tmp:
        if "bench" not in args.skip:
            doc["zero_cost"] = zero_cost(args, Path(tmp), t0 + args.budget)
    if "shadow" not in args.skip:
        doc["shadow"] = shadow_cost(args)
    doc["seconds"] = time.monotonic() - t0
    (out / "zero_cost.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"\n# {doc['seconds']:.0f} s in all; every figure in {out / 'zero_cost.json'}")


if __name__ == "__main__":
    main()
