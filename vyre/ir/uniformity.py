"""The validator's uniformity graph (docs/IR.md, "Uniformity"): which values and which
control flow may differ between the invocations of a workgroup.

The graph is plain ints and reasons; the statement walk (vyre.ir.validate_stmts) adds its
nodes and reads the verdict. This module must never look at an IR node.
"""

from __future__ import annotations

# Nodes are ints. A node is non-uniform if it is a source (marked directly) or any of its
# dependencies is non-uniform. Locals, control-flow contexts, loop divergence and
# divergent returns are nodes; after the walk one linear propagation settles them all.

UNIFORM_CF = 0  # the control flow at the top of the program: uniform


class Uniformity:
    def __init__(self) -> None:
        self.what: list[str] = ["the program entry"]
        self.deps: list[list[int]] = [[]]
        self.sources: dict[int, str] = {}
        self.why: dict[int, int | str] = {}

    def node(self, what: str, deps: list[int] | None = None) -> int:
        self.what.append(what)
        self.deps.append(list(deps) if deps else [])
        return len(self.what) - 1

    def mark(self, n: int, reason: str) -> None:
        self.sources.setdefault(n, reason)

    def solve(self) -> None:
        users: list[list[int]] = [[] for _ in self.what]
        for n, ds in enumerate(self.deps):
            for d in ds:
                users[d].append(n)
        stack = list(self.sources)
        for n, reason in self.sources.items():
            self.why[n] = reason
        while stack:
            n = stack.pop()
            for u in users[n]:
                if u not in self.why:
                    self.why[u] = n
                    stack.append(u)

    def explain(self, n: int) -> str:
        chain: list[str] = []
        cur: int | str = n
        for _ in range(8):
            if isinstance(cur, str):
                chain.append(cur)
                break
            if cur in self.sources:
                chain.append(self.sources[cur])
                break
            chain.append(self.what[cur])
            cur = self.why[cur]
        return " <- ".join(chain)
