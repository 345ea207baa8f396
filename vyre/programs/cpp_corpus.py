"""Inputs for the C front end's tests and benchmark: load C files, build large ones.

`replicate` concatenates real files up to a size; `generate_c_source` writes deterministic
C-like text dense in the tricky cases (continuations, comment markers in literals, escaped
quotes, CRLF, UTF-8, unterminated comments at the very end). This module only makes bytes:
it must never run the front end or touch a backend.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path


def load_sources(directory: str | Path, pattern: str = "*.c") -> dict[str, bytes]:
    """Every file matching `pattern` in `directory`, by name, in name order."""
    return {p.name: p.read_bytes() for p in sorted(Path(directory).glob(pattern))}


def replicate(sources: Sequence[bytes], size: int) -> bytes:
    """Concatenate `sources` (cycling, each followed by a newline) to exactly `size` bytes."""
    parts = [s for s in sources if s]
    if size <= 0 or not parts:
        return b""
    out = bytearray()
    i = 0
    while len(out) < size:
        out += parts[i % len(parts)] + b"\n"
        i += 1
    return bytes(out[:size])


_FRAGMENTS = (
    b"int {id} = {num};\n",
    b"#define {ID}(x) \\\n    ((x) * {num})\n",
    b"char *{id} = \"{id} /* not a comment */ // nor this\";\n",
    b"char {id} = '\\'';\n",
    b"char {id} = '\"';\n",
    b"/* {id} comment with \"quotes\" and 'ticks' */\n",
    b"// {id} line comment with /* opener\n",
    b"x = a / b /* divide */ * c; // {id}\r\n",
    b"s = \"escaped \\\" quote /* {id} */\";\n",
    b"{id}({id}, {num}); /**/ /***/ /*/ */\n",
    "/* UTF-8: caf\u00e9 \u65e5\u672c {id} */ char *u = \"\u00fc\u00f1\u00ee\";\n".encode(),
    b"long {id} = 0x{num}UL + 1e{num} - 07;\n",
    b"if ({id} > {num}) {{ {id}--; }} else {{ {id}++; }}\n",
    b"#if defined({ID}) \\\r\n    && {ID} > {num}\n#endif\n",
)


def generate_c_source(size: int, seed: int = 0) -> bytes:
    """Deterministic C-like text of exactly `size` bytes (`seed` picks the mix)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(1, 9)))
        frag = rng.choice(_FRAGMENTS)
        out += (
            frag.replace(b"{id}", name.encode())
            .replace(b"{ID}", name.upper().encode())
            .replace(b"{num}", str(rng.randint(0, 99999)).encode())
            .replace(b"{{", b"{")
            .replace(b"}}", b"}")
        )
    return bytes(out[:size])
