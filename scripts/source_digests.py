"""Digests of every generated source over a fixed corpus, to prove a change leaves the code
generators' output byte-identical:

    python scripts/source_digests.py [--fuzz N] [--out FILE]

Run it on two checkouts (each digests its own vyre) and diff the outputs (`--out`): one line per (program, printer
variant) with the sha256 of the program's wire format and of the generated source (or the
error a printer raised), then one digest of everything. The corpus: the standard library
(vyre/programs) over its parameters, the bench programs, the saved regression cases, the
operator sweep and N derandomized fuzz programs (vyre.tools.fuzz). The printers: the WGSL
printer under each of its options, the live wgpu backend's `source` where an adapter is
present, the CUDA printer (restrict, aliased, coarsened) and the reference listing (of the
Program as written and as lowered for the CUDA printer); none needs a GPU.
This is a measurement tool: it must never change what it digests.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

# the checkout this script is in, not an installed vyre (an editable install of another
# checkout would be digested instead, and two checkouts would compare equal)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vyre
from vyre.ir import nodes as N
from vyre.ir.serialize import to_json
from vyre.ir.types import ScalarType as T

Printer = Callable[[N.Program], str]


def library() -> Iterator[tuple[str, N.Program]]:
    from vyre.programs import (
        cpp_kernels,
        cpp_scan,
        elementwise,
        histogram,
        matmul,
        radix_onesweep,
        radix_sort,
        scan,
        stencil,
    )
    from vyre.programs import reduce as red

    ints, floats = (T.I32, T.U32), (T.F32,)
    for ty in (*ints, *floats):
        for f in (elementwise.saxpy, elementwise.axpby, elementwise.fill, elementwise.iota,
                  elementwise.gather, elementwise.scatter):
            yield f"{f.__name__}({ty})", f(ty)
    for src in (T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64):
        for dst in (T.I32, T.U32, T.F32, T.F16, T.F64, T.I64, T.U64):
            yield f"convert({src},{dst})", elementwise.convert(src, dst)
    yield "map_program", elementwise.map_program(lambda a, b: a * b + a, [T.F32, T.F32], T.F32)
    for ws in (64, 256):
        for f in (cpp_kernels.splice_flags_program, cpp_kernels.splice_scatter_program,
                  cpp_kernels.lex_delta_program, cpp_kernels.strip_flags_program,
                  cpp_kernels.strip_scatter_program, cpp_kernels.finalize_program):
            yield f"{f.__name__}({ws})", f(ws)
        for op in ("add", "max"):
            yield f"block_scan({op},{ws})", cpp_scan.block_scan_program(op, ws, 4)
            yield f"add_down({op},{ws})", cpp_scan.add_down_program(op, ws, 4)
    for nb in (16, 256, 2048):
        for strided in (False, True):
            yield f"histogram({nb},{strided})", histogram.histogram_program(nb, strided=strided)
    for split in (False, True):
        for unroll in (False, True):
            yield f"matmul({split},{unroll})", matmul.matmul_program(split=split, unroll=unroll)
    yield "matmul(64,4,16)", matmul.matmul_program(64, 4, 16)
    for wv in (False, True):
        yield f"radix_scatter({wv})", radix_sort.radix_scatter_program(wv)
        for sg in (False, True):
            yield f"radix8_scatter({wv},{sg})", radix_sort.radix8_scatter_program(wv, subgroups=sg)
    yield "radix_count", radix_sort.radix_count_program()
    for wv in (False, True):
        for counts in ("table", "registers"):
            yield (f"radix_onesweep({wv},{counts})",
                   radix_onesweep.onesweep_program(wv, 256, 16, True, counts))
    yield "radix_digit_counts", radix_onesweep.digit_counts_program(4)
    yield "radix_digit_starts", radix_onesweep.digit_starts_program()
    for ty in (T.I32, T.F32):
        for bits in (False, True):
            yield f"key_map({ty},{bits})", radix_sort.key_map_program(ty, bits)
    for ty in (T.I32, T.U32, T.F32):
        for op in red.REDUCE_OPS:
            for sg in (False, True):
                yield f"reduce({op},{ty},{sg})", red.reduce_program(op, ty, subgroups=sg)
        for op in ("argmin", "argmax"):
            for first in (False, True):
                yield f"arg_reduce({op},{ty},{first})", red.arg_reduce_program(op, ty, first)
        for inc in (False, True):
            for carry in (False, True):
                for sg in (False, True):
                    yield (f"scan({ty},{inc},{carry},{sg})",
                           scan.scan_block_program(ty, inc, carry_in=carry, subgroups=sg))
        yield f"compact_flags({ty})", scan.compact_flags_program(ty)
        yield f"compact_scatter({ty})", scan.compact_scatter_program(ty)
    for boundary in stencil.BOUNDARIES:
        yield f"stencil({boundary})", stencil.stencil_program(boundary)


def bench() -> Iterator[tuple[str, N.Program]]:
    from vyre.tools.bench.cuda_tuning import saxpy_program
    from vyre.tools.bench.distributed import heavy_program, tiny_program
    from vyre.tools.bench.vyre_impl import compile_probe_program, inc_program

    yield "bench inc", inc_program()
    yield "bench cuda_tuning saxpy", saxpy_program()
    yield "bench distributed tiny", tiny_program()
    yield "bench distributed heavy", heavy_program(100)
    for salt in (0, 1, 999, 123456):
        yield f"bench compile_probe({salt})", compile_probe_program(salt)


def regressions() -> Iterator[tuple[str, N.Program]]:
    from vyre.tools import fuzz

    for path in sorted(fuzz.regressions_dir().glob("*.json")):
        yield f"regression {path.name}", fuzz.load_case(path).program


def drawn(strategy: Any, n: int) -> list[N.Program]:
    """`n` derandomized draws of a Hypothesis strategy of Programs (the same on every run
    of the same generator)."""
    out: list[N.Program] = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(p: N.Program) -> None:
        out.append(p)

    collect()
    return out


def fuzzed(n: int) -> Iterator[tuple[str, N.Program]]:
    from vyre.tools import fuzz

    wide = fuzz.GenOptions(types=fuzz.ALL_TYPES, atomic_types=frozenset(
        {T.I32, T.U32, T.I64, T.U64}), subgroup_multiple=32)
    for i, p in enumerate(drawn(fuzz.programs(wide), n)):
        yield f"fuzz {i}", p
    for i, p in enumerate(drawn(fuzz.programs(), n // 2)):
        yield f"fuzz core {i}", p
    for i, c in enumerate(drawn(fuzz.operator_cases(wide), max(n // 20, 2))):
        yield f"sweep {i}", c.program


def printers() -> dict[str, Printer]:
    from vyre.backends.cuda import render as cuda
    from vyre.backends.reference.render import listing
    from vyre.backends.wgpu import render as wgsl
    from vyre.backends.wgpu.options import WgpuOptions

    core = frozenset({T.BOOL, T.I32, T.U32, T.F32})

    def w(**kw: Any) -> Printer:
        return lambda p: wgsl.generate(p, **kw).source

    out: dict[str, Printer] = {
        "wgsl": w(),
        "wgsl core types": w(allowed_types=core | {T.F16}),
        "wgsl slot 0 rw": w(read_write_slots=frozenset({0})),
        "wgsl unfused fma": w(fma_fused=False),
        "wgsl flush": w(flush_subnormals=True),
        "wgsl native flush": w(flush_subnormals=True, native_flush=True),
        "wgsl exact div sqrt": w(exact_div=True, exact_sqrt=True),
        "wgsl loop limited": w(loop_limited=True),
        "wgsl all fences": w(options=WgpuOptions(all_fences=True, storage_barriers=True,
                                                 vectors=False)),
        "cuda": lambda p: cuda.generate(p).source,
        "cuda aliased": lambda p: cuda.generate(p, restrict=False).source,
        "cuda coarsen 4": lambda p: cuda.generate(p, coarsen=4).source,
        "reference": listing,
        "reference lowered": lambda p: listing(vyre.lower.lower(p, cuda.TRAITS)),
    }
    try:
        b = vyre.get_backend("wgpu")
    except vyre.BackendError as exc:
        print(f"# no wgpu adapter ({exc}): the live backend's source is left out",
              file=sys.stderr)
    else:
        out["wgpu backend"] = b.source
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzz", type=int, default=300, help="fuzz programs (default 300)")
    ap.add_argument("--out", help="write the lines here (default: stdout)")
    a = ap.parse_args()
    total = hashlib.sha256()
    lines: list[str] = []
    pr = printers()
    n = 0
    for source in (library(), bench(), regressions(), fuzzed(a.fuzz)):
        for name, prog in source:
            n += 1
            wire = hashlib.sha256(to_json(prog).encode()).hexdigest()[:16]
            for pname, f in pr.items():
                try:
                    text = f(prog)
                except vyre.BackendError as exc:
                    text = f"error {type(exc).__name__}: {exc}"
                digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                line = f"{name} | {wire} | {pname} | {digest}"
                lines.append(line)
                total.update(line.encode() + b"\n")
    lines.append(f"# {n} programs, {len(pr)} printers: {total.hexdigest()}")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    print(lines[-1], file=sys.stderr)


if __name__ == "__main__":
    main()
