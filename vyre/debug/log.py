"""Reading a dispatch's debug log (vyre.debug.instrument wrote it): the records in a fixed
order (global id z, y, x, then program order within the invocation), printed as text,
the dropped ones counted on one line, and the first failed assertion raised as a
DispatchError.

The order does not depend on the backend or on how the device scheduled the invocations:
records are sorted by (invocation, seq) and, for records with the same key (a pipeline
step run several times), by their contents. When records were dropped (the log was full),
which ones made it depends on scheduling: the line saying so is the cue to raise the bound.

This module must never run anything on a device.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from vyre.errors import DispatchError

from .fmt import exact, from_bits, render, words_of
from .instrument import HEADER_WORDS, MARKER, RECORD_HEAD, Instrumented, Site

ENV_LOG_BYTES = "VYRE_DEBUG_LOG_BYTES"
# failed assertions listed in the error beyond the first
MORE_FAILURES_LISTED = 3


@dataclass(frozen=True)
class Record:
    site: Site
    gid: tuple[int, int, int]
    seq: int
    values: tuple[Any, ...]  # the format's values, then (assert) the condition's operands
    key: tuple[int, ...]  # the sort key: z, y, x, seq, then the raw words

    def text(self) -> str:
        n = len(self.site.types)
        return render(self.site.fmt, list(self.values[:n]), list(self.site.types))

    def operand_text(self) -> str:
        n = len(self.site.types)
        return ", ".join(f"{name} = {exact(v, ty)}" for (name, ty), v in
                         zip(self.site.operands, self.values[n:]))


@dataclass(frozen=True)
class DebugLog:
    records: list[Record]  # in the fixed order
    attempted: int  # records the invocations tried to write

    @property
    def dropped(self) -> int:
        return self.attempted - len(self.records)


def decode(inst: Instrumented, words: np.ndarray) -> DebugLog:
    """The records of a log buffer's contents (u32 words), sorted."""
    words = np.asarray(words, dtype=np.uint32)
    if words.size < HEADER_WORDS:
        return DebugLog([], 0)
    reserved, attempted = int(words[0]), int(words[1])
    cap = words.size - HEADER_WORDS
    body = words[HEADER_WORDS:]
    end = min(reserved, cap)
    out: list[Record] = []
    pos = 0
    while pos < end:
        sid = int(body[pos])
        if sid == MARKER or sid >= len(inst.sites):
            break
        site = inst.sites[sid]
        w = site.words
        if pos + w > cap:
            break
        rec = body[pos:pos + w]
        values = []
        at = RECORD_HEAD
        for ty in (*site.types, *(t for _, t in site.operands)):
            k = words_of(ty)
            values.append(from_bits(rec[at:at + k], ty))
            at += k
        gid = (int(rec[1]), int(rec[2]), int(rec[3]))
        key = (gid[2], gid[1], gid[0], int(rec[4]), *(int(x) for x in rec))
        out.append(Record(site, gid, int(rec[4]), tuple(values), key))
        pos += w
    out.sort(key=lambda r: r.key)
    return DebugLog(out, attempted)


def report(log: DebugLog, kernel: str, log_bytes: int, where: str = "",
           out: TextIO | None = None) -> None:
    """Print the records (and the dropped line) to `out` (sys.stdout), then raise
    DispatchError for the first failed assertion, if any. `where` names a pipeline step."""
    stream = out if out is not None else sys.stdout
    lines = [r.text() for r in log.records if r.site.kind == "print"]
    if log.dropped:
        lines.append(
            f"vyre.print: {log.dropped} of {log.attempted} debug records of kernel "
            f"{kernel!r}{where} were dropped: its log holds {log_bytes} bytes; raise the bound "
            f"with {ENV_LOG_BYTES}=<bytes> or vyre.set_debug_log_bytes(<bytes>)")
    if lines:
        stream.write("".join(line + "\n" for line in lines))
        stream.flush()
    failed = [r for r in log.records if r.site.kind == "assert"]
    if failed:
        raise DispatchError(_assert_message(failed, kernel, where, log.dropped))


def _assert_message(failed: list[Record], kernel: str, where: str, dropped: int) -> str:
    first = failed[0]
    lines = [f"vyre.assert_ failed in kernel {kernel!r}{where} at "
             f"{first.site.where or '(source line unknown: the Program was not built here)'}, "
             f"invocation global id {first.gid}: " + _what(first)]
    more = len(failed) - 1
    for r in failed[1:1 + MORE_FAILURES_LISTED]:
        lines.append(f"  also global id {r.gid} at {r.site.where or '?'}: {_what(r)}")
    if more > MORE_FAILURES_LISTED:
        lines.append(f"  ... {more - MORE_FAILURES_LISTED} more failed assertion(s)")
    if dropped:
        lines.append(f"  ({dropped} debug record(s) did not fit the log; raise "
                     f"{ENV_LOG_BYTES} to see them)")
    ran = ("Every step and round of the pipeline run went on to its end" if where else
           "The dispatch ran to its end")
    lines.append(f"{ran} (an invocation goes on past a failed assert, so barriers stay "
                 "uniform) and its writes are kept. Fix the kernel or its inputs so that the "
                 "condition holds.")
    return "\n".join(lines)


def _what(r: Record) -> str:
    text = r.text() if r.site.fmt else "assertion failed"
    ops = r.operand_text()
    return f"{text} [{ops}]" if ops else text
