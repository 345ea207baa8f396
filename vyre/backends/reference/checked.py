"""The reference backend's checked mode: runs a dispatch exactly as the unchecked
interpreter does (same results, bit for bit) while logging every memory access, then
reports what makes a program's results depend on the backend or the run:

- data races: two invocations touch one element, at least one writes, and no barrier
  orders them (invocations of different workgroups are never ordered; within a workgroup
  a Barrier orders accesses before it against accesses after it); atomics racing with
  atomics are fine, atomics mixed with plain accesses are not; stores racing only with
  stores of the same bits (a "found" flag set to 1 by many invocations) are benign: every
  order gives the same result; so are reads racing only with stores that leave the element
  as it was (floyd-warshall's row k: min(d, d + w) with w >= 0);
- reads of workgroup memory no invocation has written yet;
- loads, stores and atomics past the end of a buffer (the IR defines them as a zero read /
  dropped store, but they are nearly always an off-by-one);
- barriers and subgroup operations reached by only part of a workgroup (a subgroup).

How: `CheckedInvocations` is the interpreter with hooks on its accesses. Each access of a
statement appends one vector record per lane (element, invocation, barrier epoch, kind,
statement) to its buffer's log; the epoch counter rises at every Barrier. After the run the
logs are checked with NumPy sorts and segment reductions (no per-element Python), and
the first findings of each kind are kept (bounded). Workgroup-array logs are checked per
chunk (they never outlive it); storage-buffer logs at the end of the dispatch (workgroups
of different chunks race too).

Cost: a 1M-invocation saxpy (3M logged accesses) takes 0.6-0.8 s checked against 20 ms
unchecked on a shared 2-core machine (some 30x); the unchecked path is unchanged.

This module must never change what the interpreter computes; `vyre.backends.reference.
runtime` only calls it when the instance's check setting is on, so the unchecked path
keeps its code and speed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vyre.errors import BackendError, DispatchError
from vyre.ir import nodes as N
from vyre.ir.sites import site_of
from vyre.ir.types import ScalarType

from . import numeric
from .interpreter import Chunk, Invocations, Memory
from .plan import HostMemory, Launch, memory_of
from .render import expr

Array = np.ndarray

ENV_CHECK = "VYRE_CHECK"
ENV_CHECK_BOUNDS = "VYRE_CHECK_BOUNDS"
MODES = ("off", "error", "warn")
# SILENT: a store of the bits the element already holds (a reader sees the same bits
# whether it runs before or after it)
READ, WRITE, ATOMIC, SILENT = 0, 1, 2, 3
# Findings kept per kind (the counts stay exact); the error message lists the first few.
MAX_FINDINGS_PER_KIND = 20
MESSAGE_FINDINGS = 8

KINDS = ("race", "atomic-race", "uninitialised-read", "out-of-bounds",
         "divergent-barrier", "divergent-subgroup")
HINTS = {
    "race": "put a vyre.barrier() between the accesses (same workgroup), give each "
            "invocation its own elements, or use an atomic",
    "atomic-race": "access the element only atomically in this part of the dispatch, or "
                   "separate the plain access from the atomics with a barrier (same "
                   "workgroup) or a second dispatch",
    "uninitialised-read": "write every element of the workgroup array (and barrier) "
                          "before reading it; its contents start undefined on GPUs",
    "out-of-bounds": "guard the index (if i < buf.length()) or fix the off-by-one; the "
                     "IR reads 0 and drops the store there, which is rarely what was meant",
    "divergent-barrier": "make every invocation of the workgroup reach the barrier (no "
                         "return or data-dependent branch around it)",
    "divergent-subgroup": "make every invocation of the subgroup reach the subgroup "
                          "operation (move it out of the branch)",
}


class CheckWarning(UserWarning):
    """A checked-mode finding reported as a warning (check="warn", or bounds warnings)."""


@dataclass(frozen=True)
class Finding:
    """One defect: what, where (buffer or workgroup array, element), who (the two
    invocations, as 'wg (x,y,z) lane l'), and the statements (pseudo-code) involved."""

    kind: str
    buffer: str
    element: int
    invocations: tuple[str, ...]
    statements: tuple[str, ...]

    def __str__(self) -> str:
        what = {
            "race": "data race on", "atomic-race": "atomic and plain accesses race on",
            "uninitialised-read": "read of never-written workgroup memory",
            "out-of-bounds": "access past the end of",
            "divergent-barrier": "barrier reached by only part of a workgroup",
            "divergent-subgroup": "subgroup operation reached by only part of a subgroup",
        }[self.kind]
        where = f" {self.buffer}[{self.element}]" if self.buffer else ""
        who = " and ".join(self.invocations)
        stmts = " / ".join(dict.fromkeys(self.statements))
        return f"{what}{where}: {who}; at {stmts}"


@dataclass
class CheckReport:
    """What the checked mode found in one dispatch: `findings` (the first
    MAX_FINDINGS_PER_KIND of each kind) and `counts` (every finding, per kind)."""

    program: str
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def add(self, finding: Finding) -> None:
        n = self.counts.get(finding.kind, 0)
        self.counts[finding.kind] = n + 1
        if n < MAX_FINDINGS_PER_KIND:
            self.findings.append(finding)

    def count(self, kind: str, extra: int) -> None:
        """Count `extra` findings of `kind` beyond those added one by one."""
        if extra > 0:
            self.counts[kind] = self.counts.get(kind, 0) + extra

    def summary(self, limit: int = MESSAGE_FINDINGS) -> str:
        total = sum(self.counts.values())
        head = (f"checked mode: program {self.program!r} has {total} finding(s) ("
                + ", ".join(f"{k}: {v}" for k, v in self.counts.items()) + ")")
        lines = [head] + [f"  - {f}" for f in self.findings[:limit]]
        if total > min(limit, len(self.findings)):
            lines.append(f"  ... {total - min(limit, len(self.findings))} more "
                         "(backend.last_check_report has the first "
                         f"{MAX_FINDINGS_PER_KIND} of each kind)")
        lines.append("fix: " + "; ".join(f"{k}: {HINTS[k]}" for k in self.counts))
        return "\n".join(lines)

    __str__ = summary


@dataclass(frozen=True)
class CheckSetting:
    """How findings surface: `mode` "error" raises DispatchError (the default of check=True),
    "warn" emits CheckWarning; `bounds` does the same for out-of-bounds findings alone."""

    mode: str = "error"
    bounds: str = "error"

    @property
    def on(self) -> bool:
        return self.mode != "off"

    @classmethod
    def parse(cls, check: bool | str | CheckSetting | None) -> CheckSetting:
        """check: None (from $VYRE_CHECK, default off), a bool, or one of MODES ("1" is
        "error"); out-of-bounds findings follow $VYRE_CHECK_BOUNDS when it is set."""
        if isinstance(check, CheckSetting):
            for v in (check.mode, check.bounds):
                if v not in MODES:
                    raise BackendError(f"CheckSetting: {v!r} is not a check setting; use "
                                       f"one of {MODES}")
            return check
        src = "check="
        if check is None:
            check, src = os.environ.get(ENV_CHECK, "").strip() or "off", f"${ENV_CHECK}="
        mode = {True: "error", False: "off", "1": "error", "0": "off", "": "off",
                "true": "error", "false": "off", "on": "error"}.get(
            check.lower() if isinstance(check, str) else check,
            check if isinstance(check, str) else "?")
        if mode not in MODES:
            raise BackendError(f"{src}{check!r} is not a check setting; use one of "
                               f"{MODES} (or True/False, 1/0)")
        bounds = os.environ.get(ENV_CHECK_BOUNDS, "").strip().lower() or mode
        if bounds not in MODES:
            raise BackendError(f"${ENV_CHECK_BOUNDS}={bounds!r} is not a check setting; "
                               f"use one of {MODES}")
        return cls(mode=mode, bounds=bounds)

    def surface(self, report: CheckReport) -> None:
        """Raise or warn about the report's findings as the setting says."""
        if report.ok:
            return
        errors = [f for f in report.findings
                  if (self.bounds if f.kind == "out-of-bounds" else self.mode) == "error"]
        if errors:
            raise DispatchError(report.summary())
        if any((self.bounds if f.kind == "out-of-bounds" else self.mode) == "warn"
               for f in report.findings):
            warnings.warn(report.summary(), CheckWarning, stacklevel=4)


def describe(s: N.StmtNode | N.Stmt) -> str:
    """One line of pseudo-code for a statement (its head for blocks)."""
    if isinstance(s, N.Store):
        return f"{s.buffer}[{expr(s.index)}] = {expr(s.value)}"
    if isinstance(s, N.Atomic):
        return f"atomic_{s.op}({s.buffer}[{expr(s.index)}], {expr(s.value)})"
    if isinstance(s, (N.Let, N.Assign)):
        return f"{s.name} = {expr(s.value)}"
    if isinstance(s, N.If):
        return f"if {expr(s.cond)}"
    if isinstance(s, N.While):
        return f"while {expr(s.cond)}"
    if isinstance(s, N.For):
        return f"for {s.var} in {expr(s.start)}..{expr(s.end)}"
    if isinstance(s, N.Barrier):
        return "barrier()"
    return type(s).__name__.lower()


class _Log:
    """The accesses of one buffer or workgroup array: lists of per-statement vectors
    (stores also keep the bits they write: racing stores of equal bits are benign)."""

    def __init__(self) -> None:
        self.parts: list[tuple[Array, Array, int, int, int, Array | None]] = []

    def add(self, elem: Array, inv: Array, epoch: int, kind: int, site: int,
            bits: Array | None = None) -> None:
        if elem.size:
            self.parts.append((elem.astype(np.int64, copy=False), inv, epoch, kind, site, bits))

    def columns(self) -> tuple[Array, Array, Array, Array, Array, Array]:
        elem = np.concatenate([p[0] for p in self.parts])
        inv = np.concatenate([p[1] for p in self.parts])
        sizes = [p[0].size for p in self.parts]
        epoch = np.repeat(np.array([p[2] for p in self.parts], dtype=np.int64), sizes)
        kind = np.repeat(np.array([p[3] for p in self.parts], dtype=np.int8), sizes)
        site = np.repeat(np.array([p[4] for p in self.parts], dtype=np.int32), sizes)
        bits = np.concatenate([p[5] if p[5] is not None else np.zeros(p[0].size, np.int64)
                               for p in self.parts])
        return elem, inv, epoch, kind, site, bits


class Checker:
    """One dispatch's logs, epoch counter, statement table and report."""

    def __init__(self, program: N.Program, grid: tuple[int, int, int],
                 bounds: bool = True) -> None:
        self.program = program
        self.bounds = bounds  # whether accesses past a buffer's end are findings
        self.grid = grid
        self.w = program.invocations_per_workgroup
        self.report = CheckReport(program.name)
        self.epoch = 0
        self.sites: list[str] = []
        self._site_ids: dict[int, int] = {}
        self.global_logs: dict[str, _Log] = {}

    def site(self, s: N.StmtNode | N.Stmt) -> int:
        """The statement's number in `sites`: its pseudo-code, then the user's file:line
        where the program was built by ProgramBuilder / @vyre.kernel."""
        got = self._site_ids.get(id(s))
        if got is None:
            got = self._site_ids[id(s)] = len(self.sites)
            where = site_of(self.program, s)
            self.sites.append(describe(s) + (f" [{where}]" if where else ""))
        return got

    def who(self, inv: int) -> str:
        """'wg (x,y,z) lane l' of a dispatch-linear invocation number."""
        wg, lane = divmod(int(inv), self.w)
        gx, gy, _ = self.grid
        return f"wg ({wg % gx},{(wg // gx) % gy},{wg // (gx * gy)}) lane {lane}"

    # ------------------------------------------------------------ race analysis
    def check_log(self, name: str, log: _Log, per_workgroup: int | None = None) -> None:
        """Find the races among `log`'s records (for a workgroup array, `per_workgroup`
        is its length: the logged elements are chunk-wide, workgroup by workgroup)."""
        if not log.parts:
            return
        elem, inv, epoch, kind, site, bits = log.columns()
        wg = inv // self.w
        changing, read, atomic = kind == WRITE, kind == READ, kind == ATOMIC
        write = changing | (kind == SILENT)
        plain = ~atomic
        groupings: list[tuple[list[Array], Array]] = [([elem, wg, epoch], inv)]
        if int(wg.min()) != int(wg.max()):
            # across workgroups no barrier orders anything
            groupings.append(([elem], wg))
        for keys, actor in groupings:
            grp = _Groups(keys, actor)  # one sort serves the three questions
            grp.wrap = per_workgroup
            grp.pairs(self, name, actor, changing, read, inv, site, "race")
            grp.pairs(self, name, actor, write, write, inv, site, "race", bits)
            grp.pairs(self, name, actor, atomic, plain, inv, site, "atomic-race")

    def finish(self) -> CheckReport:
        for name, log in self.global_logs.items():
            self.check_log(name, log)
        self.global_logs.clear()
        return self.report


def _pack(keys: list[Array]) -> Array | None:
    """The keys (non-negative int64 columns) as one int64 whose order is theirs, when
    their ranges fit in 62 bits; else None."""
    if len(keys) == 1:
        return keys[0]
    out = np.zeros(keys[0].size, dtype=np.int64)
    span = 1
    for k in reversed(keys):
        lo, hi = int(k.min()), int(k.max())
        width = hi - lo + 1
        if lo < 0 or span * width >= 1 << 62:
            return None
        out += (k - lo) * span
        span *= width
    return out


class _Groups:
    """Records sorted into groups equal on `keys`, keeping only the groups touched by more
    than one actor (the only ones that can race: usually none, which makes the rest
    free); `order` lists the kept records group by group, `starts` where each begins."""

    wrap: int | None = None  # element numbers modulo this (workgroup arrays)

    def __init__(self, keys: list[Array], actor: Array) -> None:
        packed = _pack(keys)
        alo, ahi = int(actor.min()), int(actor.max())
        wa = ahi - alo + 1
        if packed is not None and alo >= 0 and (int(packed.max()) + 1) * wa < 1 << 62:
            # one int64 key, the actor least significant: a single argsort, and each
            # group's first and last records hold its smallest and largest actor
            full = packed * wa + (actor - alo)
            order = np.argsort(full, kind="stable")
            sk = full[order] // wa
            ks = [keys[0][order]]
            change = np.empty(order.size, dtype=bool)
            change[0] = True
            np.not_equal(sk[1:], sk[:-1], out=change[1:])
            starts = np.flatnonzero(change)
            a = actor[order]
            many = a[starts] != a[np.append(starts[1:], order.size) - 1]
        else:
            order = np.lexsort(tuple(reversed(keys)))
            ks = [k[order] for k in keys]
            change = np.zeros(order.size, dtype=bool)
            change[0] = True
            for k in ks:
                change[1:] |= k[1:] != k[:-1]
            starts = np.flatnonzero(change)
            a = actor[order]
            many = np.minimum.reduceat(a, starts) != np.maximum.reduceat(a, starts)
        self.empty = not many.any()
        if self.empty:
            return
        keep = np.repeat(many, np.diff(np.append(starts, order.size)))
        self.order = order[keep]
        first = ks[0][keep]
        change = change[keep]
        self.starts = np.flatnonzero(change)
        self.first_key = first

    def pairs(self, c: Checker, name: str, actor: Array, x: Array, y: Array,
              inv: Array, site: Array, kind: str, bits: Array | None = None) -> None:
        """Report each group (records equal on `keys`) holding an `x` record and a `y`
        record of different actors; with `bits` (write/write), not groups whose `x`
        records all store the same bits (every order gives the same result)."""
        if self.empty or not x.any() or not y.any():
            return
        order, starts = self.order, self.starts
        a = actor[order]
        big = np.iinfo(np.int64).max
        xs, ys = x[order], y[order]
        xmin = np.minimum.reduceat(np.where(xs, a, big), starts)
        xmax = np.maximum.reduceat(np.where(xs, a, -1), starts)
        ymin = np.minimum.reduceat(np.where(ys, a, big), starts)
        ymax = np.maximum.reduceat(np.where(ys, a, -1), starts)
        bad = (xmax >= 0) & (ymax >= 0) & ~((xmin == xmax) & (ymin == ymax) & (xmin == ymin))
        if bits is not None and bad.any():
            b = bits[order]
            same = (np.minimum.reduceat(np.where(xs, b, big), starts)
                    == np.maximum.reduceat(np.where(xs, b, np.iinfo(np.int64).min), starts))
            bad &= ~same
        hits = np.flatnonzero(bad)
        if not hits.size:
            return
        shown = hits[:MAX_FINDINGS_PER_KIND]
        ends = np.append(starts[1:], order.size)
        for g in shown:
            s0, s1 = int(starts[g]), int(ends[g])
            ax = int(xmin[g])
            ay = int(ymin[g]) if ymin[g] != ax else int(ymax[g])
            if ay == ax:  # y has only ax's records: another x actor races with them
                ax, ay = int(xmax[g]), ax
            seg = order[s0:s1]
            rx = seg[xs[s0:s1] & (a[s0:s1] == ax)][0]
            ry = seg[ys[s0:s1] & (a[s0:s1] == ay)][0]
            element = int(self.first_key[s0])
            c.report.add(Finding(kind, name, element % self.wrap if self.wrap else element,
                                 (c.who(inv[rx]), c.who(inv[ry])),
                                 (c.sites[site[rx]], c.sites[site[ry]])))
        c.report.count(kind, hits.size - shown.size)


class CheckedInvocations(Invocations):
    """The interpreter with access logging: every hook first records, then does exactly
    what the unchecked interpreter does."""

    def __init__(self, program: N.Program, memory: Memory, chunk: Chunk,
                 checker: Checker, max_iterations: int | None = None,
                 subgroup_size: int = 32) -> None:
        super().__init__(program, memory, chunk, max_iterations, subgroup_size)
        self.checker = checker
        self.first_inv = chunk.first * self.w
        self.inv = np.arange(self.n, dtype=np.int64) + self.first_inv
        self.written = {name: np.zeros(arr.size, dtype=bool)
                        for name, (arr, _c, _t) in self.shared.items()}
        self.shared_logs = {name: _Log() for name in self.shared}
        self.site_id = 0
        self._quiet = False
        # lanes whose value a select keeps (None: all): loads on the other side are
        # discarded, so `select(i < n, a[i], 0)`, the IR's masked load, is no finding
        self._kept: Array | None = None

    def run(self) -> None:
        super().run()
        for name, log in self.shared_logs.items():
            self.checker.check_log(name, log, self.shared[name][1])

    # ------------------------------------------------------------ logging
    def _log(self, name: str, idx: Array, ok: Array, sel: Array, kind: int,
             what: str, bits: Array | None = None) -> None:
        """Record the accesses of lanes `sel` to `name` at per-lane index `idx` (in range
        where `ok`); report those out of range."""
        c = self.checker
        idx = self.lanes(idx)
        out = sel & ~ok
        if c.bounds and out.any():
            lanes = np.flatnonzero(out)
            for lane in lanes[:MAX_FINDINGS_PER_KIND]:
                c.report.add(Finding("out-of-bounds", name, int(idx[lane]),
                                     (c.who(self.inv[lane]),),
                                     (f"{what} in {c.sites[self.site_id]}",)))
            c.report.count("out-of-bounds", lanes.size - min(lanes.size, MAX_FINDINGS_PER_KIND))
        inside = sel & ok
        if not inside.any():
            return
        lanes = np.flatnonzero(inside)
        e = idx[lanes].astype(np.int64)
        sh = self.shared.get(name)
        if sh is None:
            log = c.global_logs.setdefault(name, _Log())
            log.add(e, self.inv[lanes], c.epoch, kind, self.site_id,
                    None if bits is None else bits[lanes])
            return
        count = sh[1]
        flat = self.wg_local()[lanes] * count + e
        if kind in (READ, ATOMIC):
            unset = ~self.written[name][flat]
            if unset.any():
                bad = np.flatnonzero(unset)
                for j in bad[:MAX_FINDINGS_PER_KIND]:
                    c.report.add(Finding("uninitialised-read", name, int(e[j]),
                                         (c.who(self.inv[lanes[j]]),),
                                         (c.sites[self.site_id],)))
                c.report.count("uninitialised-read",
                               bad.size - min(bad.size, MAX_FINDINGS_PER_KIND))
        if kind != READ:
            self.written[name][flat] = True
        self.shared_logs[name].add(flat, self.inv[lanes], c.epoch, kind, self.site_id,
                                   None if bits is None else bits[lanes])

    def _partial(self, mask: Array, group: int, kind: str) -> None:
        """Report groups of `group` lanes (workgroups, subgroups) that `mask` covers only
        in part."""
        rows = np.asarray(mask).reshape(-1, group)
        some, every = rows.any(axis=1), rows.all(axis=1)
        partial = np.flatnonzero(some & ~every)
        c = self.checker
        for r in partial[:MAX_FINDINGS_PER_KIND]:
            lanes = np.flatnonzero(rows[r])
            missing = np.flatnonzero(~rows[r])
            c.report.add(Finding(kind, "", -1, (
                c.who(self.inv[r * group + lanes[0]]) + " reaches it",
                c.who(self.inv[r * group + missing[0]]) + " does not"),
                (c.sites[self.site_id],)))
        c.report.count(kind, partial.size - min(partial.size, MAX_FINDINGS_PER_KIND))

    # ------------------------------------------------------------ hooks
    def stmt(self, s: N.StmtNode, mask: Array) -> None:
        self.site_id = self.checker.site(s)
        if isinstance(s, N.Barrier):
            self._partial(mask, self.w, "divergent-barrier")
            self.checker.epoch += 1
        super().stmt(s, mask)

    def load(self, name: str, index: Array, ty: ScalarType, raw: bool = False) -> Array:
        if self._quiet:  # (re-evaluating an expression the run itself evaluates too)
            return super().load(name, index, ty, raw)
        sh = self.shared.get(name)
        count = sh[1] if sh is not None else self.mem.counts[name]
        idx = self.lanes(np.asarray(index))
        sel = self.active if self._kept is None else self.active & self._kept
        self._log(name, idx, idx < count, sel, READ, "load")
        return super().load(name, index, ty, raw)

    def eval(self, e: N.ExprNode) -> Array:
        if not isinstance(e, N.Select) or isinstance(e, N.Guarded):
            return super().eval(e)
        c = self.eval(e.cond)
        cond, outer = self.lanes(c), self._kept
        try:
            self._kept = cond if outer is None else outer & cond
            a = self.eval(e.a)
            self._kept = ~cond if outer is None else outer & ~cond
            b = self.eval(e.b)
        finally:
            self._kept = outer
        return numeric.select(c, a, b, e.ty)  # exactly what the unchecked run computes

    def store(self, s: N.Store, mask: Array) -> None:
        self._access(s.buffer, s.index, mask, WRITE, "store", s.value)
        super().store(s, mask)

    def atomic(self, s: N.Atomic, mask: Array) -> None:
        self._access(s.buffer, s.index, mask, ATOMIC, "atomic")
        super().atomic(s, mask)

    def _access(self, name: str, index: N.ExprNode, mask: Array, kind: int,
                what: str, value: N.ExprNode | None = None) -> None:
        # Evaluating the index (and a store's value) twice is safe: expressions have no
        # side effects. Loads inside them are logged by the evaluation the parent does.
        self.active = mask
        sh = self.shared.get(name)
        count = sh[1] if sh is not None else self.mem.counts[name]
        logging, self._quiet = self._quiet, True
        try:
            idx = self.lanes(np.asarray(self.eval(index)))
            bits = None
            if value is not None:
                dt = sh[2].numpy if sh is not None else self.mem.views[name].dtype
                v = np.ascontiguousarray(self.lanes(np.asarray(self.eval(value), dtype=dt)))
                bits = v.view(f"u{dt.itemsize}").astype(np.int64)
                arr, flat, ok, _c, _t = self._where(name, idx)
                old = np.ascontiguousarray(arr[np.where(ok, flat, 0)]) if arr.size else v
                silent = old.view(f"u{dt.itemsize}").astype(np.int64) == bits
        finally:
            self._quiet = logging
        self.active = mask
        ok = idx < count
        if bits is not None and silent.any():
            self._log(name, idx, ok, mask & ~silent, kind, what, bits)
            self._log(name, idx, ok, mask & silent, SILENT, what, bits)
        else:
            self._log(name, idx, ok, mask, kind, what, bits)

    def subgroup(self, e: N.Subgroup) -> Array:
        if not self._quiet:
            self._partial(self.active, self.subgroup_size, "divergent-subgroup")
        return super().subgroup(e)


def execute_checked(launch: Launch, buffers: Sequence[HostMemory],
                    bounds: bool = True) -> CheckReport:
    """`plan.execute` with checking: the same chunks in the same order, then the report
    (without out-of-bounds findings unless `bounds`)."""
    plan = launch.plan
    grid = launch.workgroups()
    checker = Checker(plan.program, grid, bounds)
    total = grid[0] * grid[1] * grid[2]
    if total == 0:
        return checker.report
    mem = memory_of(launch, buffers)
    step = plan.workgroups_per_chunk
    for first in range(0, total, step):
        chunk = Chunk(grid=grid, first=first, count=min(step, total - first))
        CheckedInvocations(plan.program, mem, chunk, checker, launch.max_loop_iterations,
                           plan.subgroup_size).run()
    return checker.finish()


__all__ = [
    "CheckReport",
    "CheckSetting",
    "CheckWarning",
    "CheckedInvocations",
    "Checker",
    "Finding",
    "execute_checked",
]
