"""Whether a program's Barriers must order storage memory in WGSL, or workgroup memory only.

The IR's Barrier orders workgroup and storage memory within the workgroup (docs/IR.md).
WGSL says the storage half with `storageBarrier()`, which naga turns into an
OpControlBarrier with *Device* memory scope (a fence of the whole GPU's memory at every
barrier, where CUDA's __syncthreads orders the block only): a cost paid per barrier by
every block algorithm (reductions, scans, histograms, sorts, matmul tiles), although most of
them never let one invocation see another's storage accesses across a barrier.

The storage half is only observable when some invocation touches a storage buffer that the
dispatch may write (a store or an atomic anywhere in the program, a buffer declared
writable, or a read slot aliased with a writable one) and then reaches a Barrier: only
then can an access on one side of a barrier race with another invocation's on the other
side. When no such access can come before any barrier in program order (loops counted
twice: an access in one iteration precedes the next iteration's barrier), every barrier
may be `workgroupBarrier()` alone: read-only buffers cannot race, and the writes all come
after the last barrier, where no barrier orders them anyway.

Pure analysis over the (lowered) Program; this module must never print WGSL or decide
anything about a device.
"""

from __future__ import annotations

from vyre.ir import nodes as N
from vyre.ir.analysis import walk_expr, walk_stmts
from vyre.ir.visit import stmt_exprs


def needs_storage_barrier(program: N.Program, read_write_slots: frozenset[int] = frozenset()
                          ) -> bool:
    """True when some invocation may touch a written storage buffer before a Barrier."""
    written = {b.name for i, b in enumerate(program.buffers)
               if b.writable or i in read_write_slots}
    if not written or not any(isinstance(s, N.Barrier) for s in walk_stmts(program.body)):
        return False  # (no barrier at all: none can follow a touch)
    return _Walk(frozenset(written)).block(program.body, False)[1]


class _Walk:
    def __init__(self, written: frozenset[str]) -> None:
        self.written = written

    def _reads(self, exprs: tuple[N.ExprNode, ...]) -> bool:
        return any(isinstance(x, N.Load) and x.buffer in self.written
                   for e in exprs for x in walk_expr(e))

    def _touches(self, s: N.StmtNode) -> bool:
        if isinstance(s, (N.Store, N.Atomic)) and s.buffer in self.written:
            return True
        return self._reads(stmt_exprs(s))

    def block(self, body: tuple[N.StmtNode, ...], touched: bool) -> tuple[bool, bool]:
        """(touched after `body`, whether a barrier in it follows a touch)."""
        for s in body:
            if isinstance(s, N.Barrier):
                if touched:
                    return True, True
            elif isinstance(s, N.If):
                touched = touched or self._reads(stmt_exprs(s))
                t1, n1 = self.block(s.then, touched)
                t2, n2 = self.block(s.orelse, touched)
                if n1 or n2:
                    return True, True
                touched = t1 or t2
            elif isinstance(s, (N.For, N.While)):
                head = self._reads(stmt_exprs(s))
                t, needed = self.block(s.body, touched or head)
                if needed:
                    return True, True
                # the next iteration starts after this one's accesses
                t, needed = self.block(s.body, t or head)
                if needed:
                    return True, True
                touched = t or head
            else:
                touched = touched or self._touches(s)
        return touched, False
