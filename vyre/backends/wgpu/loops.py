"""The WGSL printer's loops and the jumps out of them.

Loops are `loop { }` with their exit at the head (the fence flow's loop head, fences.py);
on a driver that silently ends long loops every loop is counted (loopcount.py), so
`break` and `return` leave through the loop's one exit. Must never touch a device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vyre.ir import nodes as N

from . import loopcount
from .fences import VISIBLE, loop_head
from .spelling import _SUFFIX, U_VAR, wgsl_type
from .uniforms import ZERO_FIELD

if TYPE_CHECKING:
    from .state import WgslState as _Ctx


def _while(ctx: _Ctx, s: N.While, d: int) -> list[str]:
    if ctx.count_loops:
        return _counted_while(ctx, s, d)
    ind = ctx.indent(d)
    nxt = ind + "    "
    head = loop_head(ctx.flow, s)
    ctx.flow = head.copy()
    out = [f"{ind}loop {{", f"{nxt}if (!({ctx.expr(s.cond)})) {{ break; }}"]
    out += ctx.block_lines(s.body, d + 1)
    ctx.flow = head  # the loop exits at its head
    out.append(f"{ind}}}")
    return out


def _break(ctx: _Ctx, s: N.Break, d: int) -> list[str]:
    if ctx.count_loops:  # leave through the loop's one exit (loopcount.py)
        return [f"{ctx.indent(d)}{ctx.loop_flags[-1]} = true; continue;"]
    return [f"{ctx.indent(d)}break;"]


def _continue(ctx: _Ctx, s: N.Continue, d: int) -> list[str]:
    return [f"{ctx.indent(d)}continue;"]


def _return(ctx: _Ctx, s: N.Return, d: int) -> list[str]:
    ind = ctx.indent(d)
    if ctx.count_loops and ctx.loop_flags:
        ctx.returns_in_loops = True
        return [f"{ind}{loopcount.RETURNING} = true; {ctx.loop_flags[-1]} = true; continue;"]
    return [f"{ind}return;"]


def _for(ctx: _Ctx, s: N.For, d: int) -> list[str]:
    """start/end once; var = start, start+1, ... < end (vyre.lower leaves only step 1,
    whose increment never overflows: it < hi <= MAX)."""
    if s.step != 1:
        raise ctx.unlowered(f"a for loop with step {s.step}")
    t = wgsl_type(s.ty)
    sfx = _SUFFIX[s.ty]
    k = ctx.fresh("")
    lo, hi, it = f"vy_lo{k}", f"vy_hi{k}", f"vy_it{k}"
    ind = ctx.indent(d)
    nxt, inner = ind + "    ", ind + "        "
    counted = ctx.count_loops
    flag = f"vy_brk{k}" if counted and loopcount.leaves_by_jump(s.body) else None
    out = [
        f"{ind}{{",
        f"{nxt}let {lo}: {t} = {ctx.expr(s.start)};",
        f"{nxt}let {hi}: {t} = {ctx.expr(s.end)};",
        f"{nxt}var {it}: {t} = {lo};",
    ]
    if flag is not None:
        out.append(f"{nxt}var {flag} = false;")
    if counted:
        enter = "" if flag is None else f" {loopcount.enter()}"
        out.append(f"{nxt}if ({lo} < {hi}) {{{enter} loop {{  {loopcount.COUNTED}")
        ctx.loop_flags.append(flag)
    else:
        out.append(f"{nxt}if ({lo} < {hi}) {{ loop {{")
    head = loop_head(ctx.flow, s)
    ctx.flow = head.copy()
    ctx.scopes.append({})
    ctx.flow.enter_scope()
    ctx.flow.declare(s.var, VISIBLE)
    var = ctx.declare(s.var)
    out.append(f"{inner}let {var}: {t} = {it};")
    out += ctx.block_lines(s.body, d + 2)
    ctx.flow.exit_scope()
    ctx.scopes.pop()
    ctx.flow = head  # the loop exits at its head
    step = f"{inner}    {it} = {it} + 1{sfx};"
    if not counted:
        return [*out, f"{inner}continuing {{", step, f"{inner}    break if !({it} < {hi});",
                f"{inner}}}", f"{nxt}}} }}", f"{ind}}}"]
    ctx.loop_flags.pop()
    if flag is None:  # its only exit ends the count: a cut one stopped short of hi
        short = f"{it} < {hi} + {t}({U_VAR}.{ZERO_FIELD})"
        return [*out, f"{inner}continuing {{", step, f"{inner}    break if !({it} < {hi});",
                f"{inner}}}", f"{nxt}}} {loopcount.count_cut(short)} }}", f"{ind}}}"]
    end = f"vy_end{k}"
    out += [
        f"{inner}continuing {{", step, f"{inner}    let {end} = {flag} || !({it} < {hi});",
        f"{inner}    {loopcount.leave(end)}", f"{inner}    break if {end};", f"{inner}}}",
        f"{nxt}}} }}",
        *_after_counted_loop(ctx, s.body, nxt),
        f"{ind}}}",
    ]
    return out


def _counted_while(ctx: _Ctx, s: N.While, d: int) -> list[str]:
    """A While on an adapter with a loop limit (loopcount.py): one exit, counted. Without
    a break or return of its own it exits at its head, as uncounted; with one, every way
    out sets its flag and leaves in the continuing block. Either way n iterations make
    n + 1 passes (measured: tests/test_wgpu_loop_budget.py)."""
    ind = ctx.indent(d)
    nxt = ind + "    "
    k = ctx.fresh("")
    flag = f"vy_brk{k}" if loopcount.leaves_by_jump(s.body) else None
    head = loop_head(ctx.flow, s)
    ctx.flow = head.copy()
    cond = ctx.expr(s.cond)
    out = [] if flag is None else [f"{ind}var {flag} = false;"]
    out += [f"{ind}{loopcount.enter()}", f"{ind}loop {{  {loopcount.COUNTED}"]
    if flag is None:
        end = f"vy_end{k}"
        out += [f"{nxt}let {end} = !({cond});", f"{nxt}{loopcount.leave(end)}",
                f"{nxt}if ({end}) {{ break; }}"]
    else:
        out.append(f"{nxt}if (!({cond})) {{ {flag} = true; continue; }}")
    ctx.loop_flags.append(flag)
    out += ctx.block_lines(s.body, d + 1)
    ctx.loop_flags.pop()
    ctx.flow = head  # the loop exits at its head
    if flag is not None:
        out += [f"{nxt}continuing {{", f"{nxt}    {loopcount.leave(flag)}",
                f"{nxt}    break if {flag};", f"{nxt}}}"]
    out.append(f"{ind}}}")
    return out + _after_counted_loop(ctx, s.body, ind)


def _after_counted_loop(ctx: _Ctx, body: tuple[N.StmtNode, ...], ind: str) -> list[str]:
    """After a counted loop a `return` inside it left: leave the enclosing loop the same
    way (through its one exit), or return (loopcount.py: returns never leave a loop)."""
    if not loopcount.returns(body):
        return []
    then = f"{ctx.loop_flags[-1]} = true; continue;" if ctx.loop_flags else "return;"
    return [f"{ind}if ({loopcount.RETURNING}) {{ {then} }}"]
