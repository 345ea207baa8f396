"""vyre.transfer between two CUDA devices against torch's peer copy of the same bytes, in one
process, same sizes, both timed by the host clock around N copies and one synchronize of
the destination (torch: `src.to("cuda:1")`, which allocates like vyre.transfer does, from its
caching allocator, and `dst.copy_(src)` into a tensor made once, like
`vyre.transfer(x, b, out=y)`). Every vyre copy is checked.

    python scripts/peer_copy.py [--mib 256] [--repeat 20] [--src 0 --dst 1]
"""

from __future__ import annotations

import argparse

import numpy as np

import vyre
from vyre.tools.bench.multi_gpu import median_seconds


def _gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--src", type=int, default=0)
    ap.add_argument("--dst", type=int, default=1)
    args = ap.parse_args()
    nbytes = args.mib << 20
    n = nbytes // 4
    data = np.random.default_rng(0).integers(0, 2**32, n, dtype=np.uint32)
    with vyre.get_backend(f"cuda:{args.src}") as a, vyre.get_backend(f"cuda:{args.dst}") as b:
        x = a.allocate_device_buffer(nbytes)
        a.write(x, data)
        made: list[vyre.BufferBase] = []

        def one() -> None:
            made.append(vyre.transfer(x, b))

        def sync_and_free() -> None:
            b.synchronize()
            for buf in made[:-1]:
                b.free(buf)
            del made[:-1]

        t_new = median_seconds(one, sync_and_free, args.repeat)
        assert np.array_equal(np.asarray(b.read(made[-1], dtype=np.uint32)), data)
        out = b.allocate_device_buffer(nbytes)
        t_vyre = median_seconds(lambda: vyre.transfer(x, b, out=out), b.synchronize, args.repeat)
        assert np.array_equal(np.asarray(b.read(out, dtype=np.uint32)), data)
        rows = [("vyre.transfer(out=)", t_vyre), ("vyre.transfer (allocates)", t_new)]
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            src = torch.from_numpy(data.view(np.int32)).to(f"cuda:{args.src}")
            dst = torch.empty_like(src, device=f"cuda:{args.dst}")

            def sync() -> None:
                torch.cuda.synchronize(args.src)
                torch.cuda.synchronize(args.dst)

            rows.append(("torch src.to(dst device)",
                         median_seconds(lambda: src.to(f"cuda:{args.dst}"), sync, args.repeat)))
            rows.append(("torch dst.copy_(src)",
                         median_seconds(lambda: dst.copy_(src), sync, args.repeat)))
    best_peer = min(t for name, t in rows[2:]) if len(rows) > 2 else None
    print(f"peer copy of {args.mib} MiB, cuda:{args.src} -> cuda:{args.dst}")
    for name, t in rows:
        print(f"  {name:28s} {t * 1e3:8.3f} ms  {_gbps(nbytes, t):7.1f} GB/s")
    if best_peer is not None:
        print(f"  vyre.transfer(out=) / best torch: {best_peer / t_vyre:.2f}x")


if __name__ == "__main__":
    main()
