"""Word count on bytes, like `wc` plus a letter histogram: one invocation per byte decides
whether a word starts there, how long it is, and which letter it is; atomics add up.

    python examples/wordcount.py [--backend wgpu] [FILE]      (default: this file)

The text goes up as it is, a u8 buffer of its bytes, and the kernel reads byte i as
`text[i]` (a u32 0..255: loads of 8-bit elements promote, docs/IR.md). A word is a maximal run of
bytes that are not ASCII whitespace, as Python's `bytes.split()` defines it, and the
result is checked against that too. Integer atomics give exact counts in any order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _harness as h  # examples/_harness.py: every backend vs the reference, PNG writing
import numpy as np

import vyre
from vyre import Buffer, InOut, u8, u32

MAX_LEN = 32   # word lengths >= 31 share the last bin


def is_space(c):
    """ASCII whitespace as bytes.split() sees it: space, \\t \\n \\v \\f \\r."""
    return (c == 32) | ((c >= 9) & (c <= 13))


@vyre.kernel(workgroup_size=256)
def count_text(text: Buffer[u8], counts: InOut[u32], lengths: InOut[u32],
               letters: InOut[u32], n: u32):
    """counts = [words, lines]; lengths[k]: words of k bytes; letters[k]: 'a'+k either case."""
    i = vyre.global_linear_id()
    if i < n:
        c = text[i]                                      # one byte, as a u32
        if c == 10:
            counts.atomic_add(1, 1)
        lower = c | 0x20                                 # ASCII letters: set the case bit
        if 97 <= lower <= 122:
            letters.atomic_add(lower - 97, 1)
        if not is_space(c) and (i == 0 or is_space(text[i - 1])):  # a word starts here
            counts.atomic_add(0, 1)
            end = i + 1
            while end < n and not is_space(text[end]):
                end += 1
            lengths.atomic_add(min(end - i, MAX_LEN - 1), 1)


def count(gpu: vyre.BaseBackend, data: bytes) -> h.Outputs:
    text = np.frombuffer(data, np.uint8) if data else np.zeros(1, np.uint8)  # never empty
    out = count_text.launch(gpu, max(len(data), 1), text,
                            np.zeros(2, np.uint32), np.zeros(MAX_LEN, np.uint32),
                            np.zeros(26, np.uint32), n=len(data))
    return {"counts": out["counts"], "lengths": out["lengths"], "letters": out["letters"]}


def python_count(data: bytes) -> h.Outputs:
    """The same counts in plain Python (what the test compares with)."""
    words = data.split()
    lengths = np.zeros(MAX_LEN, np.uint32)
    for w in words:
        lengths[min(len(w), MAX_LEN - 1)] += 1
    low = data.lower()
    letters = np.array([low.count(bytes([97 + k])) for k in range(26)], np.uint32)
    return {"counts": np.array([len(words), data.count(b"\n")], np.uint32),
            "lengths": lengths, "letters": letters}


def main(argv: list[str] | None = None) -> int:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("file", nargs="?", default=__file__)
    args = p.parse_args(argv)
    data = Path(args.file).read_bytes()
    result, ok = h.check_everywhere(lambda gpu: count(gpu, data), args.backend)
    words, lines = (int(v) for v in result["counts"])
    print(f"{Path(args.file).name}: {lines} lines, {words} words, {len(data)} bytes")
    top = np.argsort(-result["letters"].astype(np.int64), kind="stable")[:8]
    letters = result["letters"]
    print("most frequent letters: " + " ".join(f"{chr(97 + k)}:{letters[k]}" for k in top))
    nz = np.flatnonzero(result["lengths"])
    print("word lengths: " + " ".join(f"{k}:{result['lengths'][k]}" for k in nz))
    want = python_count(data)
    if h.mismatches(result, want):
        print("FAILED: differs from Python's bytes.split(): "
              + "; ".join(h.mismatches(result, want)))
        ok = False
    return h.finish(ok)


if __name__ == "__main__":
    sys.exit(main())
