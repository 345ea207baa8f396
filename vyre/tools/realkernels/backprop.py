"""backprop (Rodinia openmp/backprop): one training step of the 16-hidden-unit network.
One invocation per unit of the next layer sums its weighted inputs in k order and applies
the sigmoid 1 / (1 + exp(-x)) with vyre's exact exp (bpnn_layerforward, both layers); one
invocation runs the output and hidden error loops in order (their |delta| sums are
sequential); one invocation per weight applies bpnn_adjust_weights' update (the hidden
weights first: the hidden error has read them). C: c/backprop.c (float throughout, expf
correctly rounded by c/crmath.h)."""

from __future__ import annotations

from functools import cache

import numpy as np

from vyre import ProgramBuilder, f32, i32
from vyre.builder import exp, select
from vyre.interface import Backend
from vyre.ir.nodes import Program

from .common import F, Lcg, groups, resident

ARGS = {"layer_size": 128, "seed": 7}
LARGE_ARGS = {"layer_size": 65536, "seed": 7}  # Rodinia's run script
HIDDEN, OUT = 16, 1
WG = 64
ETA = MOMENTUM = F(0.3)


@cache
def layerforward_program() -> Program:
    k = ProgramBuilder("rodinia_backprop_layerforward", WG)
    l1, conn = k.buffer("l1", f32), k.buffer("conn", f32)
    l2 = k.buffer("l2", f32, "read_write")
    n1, n2 = k.param("n1", i32), k.param("n2", i32)
    j = k.let(k.global_id(0).cast(i32) + 1)
    with k.if_(j <= n2):
        total = k.let(0.0)
        with k.for_range(0, n1 + 1, ty=i32) as kk:
            total += conn[kk * (n2 + 1) + j] * l1[kk]
        l2[j] = 1.0 / (1.0 + exp(-total))  # squash
    return k.build()


@cache
def errors_program() -> Program:
    """bpnn_output_error, then bpnn_hidden_error (one invocation: each sums |delta|)."""
    k = ProgramBuilder("rodinia_backprop_errors", 1)
    output, target = k.buffer("output", f32), k.buffer("target", f32)
    hidden, who = k.buffer("hidden", f32), k.buffer("who", f32)
    delta_o = k.buffer("delta_o", f32, "read_write")
    delta_h = k.buffer("delta_h", f32, "write")
    err = k.buffer("err", f32, "write")
    nh, no = k.param("nh", i32), k.param("no", i32)
    errsum = k.let(0.0)
    with k.for_range(1, no + 1, ty=i32) as j:
        o, t = k.let(output[j]), k.let(target[j])
        d = k.let(o * (1.0 - o) * (t - o))
        delta_o[j] = d
        errsum += select(d > 0.0, d, -d)  # ABS(x): ((x) > 0.0) ? (x) : (-(x))
    err[0] = errsum
    errsum.set(0.0)
    with k.for_range(1, nh + 1, ty=i32) as j:
        h = k.let(hidden[j])
        total = k.let(0.0)
        with k.for_range(1, no + 1, ty=i32) as kk:
            total += delta_o[kk] * who[j * (no + 1) + kk]
        d = k.let(h * (1.0 - h) * total)
        delta_h[j] = d
        errsum += select(d > 0.0, d, -d)
    err[1] = errsum
    return k.build()


@cache
def adjust_program() -> Program:
    """One invocation per w[k][j], k = 0..nly, j = 1..ndelta."""
    k = ProgramBuilder("rodinia_backprop_adjust_weights", WG)
    delta, ly = k.buffer("delta", f32), k.buffer("ly", f32)
    w, oldw = k.buffer("w", f32, "read_write"), k.buffer("oldw", f32, "read_write")
    ndelta, nly = k.param("ndelta", i32), k.param("nly", i32)
    eta, momentum = k.param("eta", f32), k.param("momentum", f32)
    e = k.let(k.global_id(0).cast(i32))
    with k.if_(e < (nly + 1) * ndelta):
        kk, j = k.let(e / ndelta), k.let(e % ndelta + 1)
        at = k.let(kk * (ndelta + 1) + j)
        new_dw = k.let((eta * delta[j] * ly[kk]) + (momentum * oldw[at]))
        w[at] = w[at] + new_dw
        oldw[at] = new_dw
    return k.build()


def run(backend: Backend, layer_size: int, seed: int) -> list[np.ndarray]:
    n_in = layer_size
    rng = Lcg(seed)
    input_weights = rng.unit((n_in + 1) * (HIDDEN + 1)) * F(2.0) - F(1.0)  # dpn1()
    hidden_weights = rng.unit((HIDDEN + 1) * (OUT + 1))
    target = np.full(OUT + 1, 0.1, F)
    units = np.zeros(n_in + 1, F)
    units[0] = 1.0  # l1[0] = 1.0 (the threshold unit, set by bpnn_layerforward)
    units[1:] = rng.unit(n_in)
    hidden0 = np.zeros(HIDDEN + 1, F)
    hidden0[0] = 1.0
    with resident(backend) as dev:
        inp, hid = dev.put(units, "input_units"), dev.put(hidden0, "hidden_units")
        outp = dev.put(np.zeros(OUT + 1, F), "output_units")
        tgt = dev.put(target, "target")
        iw, hw = dev.put(input_weights, "input_weights"), dev.put(hidden_weights, "hidden_weights")
        ip = dev.put(np.zeros_like(input_weights), "input_prev_weights")
        hp = dev.put(np.zeros_like(hidden_weights), "hidden_prev_weights")
        dh, do = dev.put(np.zeros(HIDDEN + 1, F), "hidden_delta"), dev.put(np.zeros(OUT + 1, F),
                                                                           "output_delta")
        err = dev.put(np.zeros(2, F), "err")
        for l1, l2, conn, n1, n2 in ((inp, hid, iw, n_in, HIDDEN), (hid, outp, hw, HIDDEN, OUT)):
            dev.run(layerforward_program(), {"l1": l1, "conn": conn}, {"l2": l2},
                    groups(n2, WG), {"n1": n1, "n2": n2})
        dev.run(errors_program(), {"output": outp, "target": tgt, "hidden": hid, "who": hw},
                {"delta_o": do, "delta_h": dh, "err": err}, 1, {"nh": HIDDEN, "no": OUT})
        for delta, nd, ly, nly, w, oldw in ((do, OUT, hid, HIDDEN, hw, hp),
                                            (dh, HIDDEN, inp, n_in, iw, ip)):
            dev.run(adjust_program(), {"delta": delta, "ly": ly}, {"w": w, "oldw": oldw},
                    groups((nly + 1) * nd, WG),
                    {"ndelta": nd, "nly": nly, "eta": ETA, "momentum": MOMENTUM})
        nw_in, nw_hid = (n_in + 1) * (HIDDEN + 1), (HIDDEN + 1) * (OUT + 1)
        return [dev.get(hid, np.float32, HIDDEN + 1), dev.get(outp, np.float32, OUT + 1),
                dev.get(dh, np.float32, HIDDEN + 1), dev.get(do, np.float32, OUT + 1),
                dev.get(err, np.float32, 2), dev.get(hw, np.float32, nw_hid),
                dev.get(hp, np.float32, nw_hid), dev.get(iw, np.float32, nw_in),
                dev.get(ip, np.float32, nw_in)]
