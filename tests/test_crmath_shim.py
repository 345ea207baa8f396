"""c/crmath.h, the correctly rounded expf, logf and powf of the real-kernel suite's C drivers
(vyre/tools/realkernels), against vyre.tools.function_oracle (Python's decimal; not vyre's
code) bit for bit: special values, subnormals, the overflow and underflow thresholds,
random bit patterns, the arguments whose double value lies nearest a float rounding
boundary, where the shim must redo the call in long double, and pow's results exactly on
a midpoint (pow(66049, 1.5) = 257^3, pow(2, -150)), which only its integer check decides;
and a call it cannot decide stops the driver with a message instead of writing a result.
Needs gcc (the drivers do), skipped with that reason without it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from vyre.tools.function_oracle import fast_oracle
from vyre.tools.realkernels.common import C_DIR
from vyre.tools.realkernels.make_expected import CFLAGS, compiler

CC = compiler()
pytestmark = pytest.mark.skipif(CC is None, reason="gcc (or $CC) is not installed here")

#: f32 arguments whose f64 exp / log lies within 2^-47 (relative) of an f32 rounding
#: midpoint, from a search of every f32 with NumPy's f64 functions: the shim's double
#: window (2^-48) cannot decide about half of them, so they take its long double path
EXP_HARD = (
    0x337FFFFE, 0x337FFFFF, 0x33800000, 0x343FFFFF, 0x34DFFFFD, 0x356FFFF9, 0x35F7FFF1, 0x367BFFE1,
    0x36FDFFC1, 0x377EFF81, 0x37FE7F03, 0x383A3EF1, 0x38643E69, 0x38AD9E29, 0x38E69CC1, 0x39C6BE5B,
    0x39E5BB1D, 0x3A7BCD08, 0x3B18F346, 0x3B8C972E, 0x3C608A0E, 0x3C971AAA, 0x3CAFFE2E, 0x3D1A274E,
    0x3D7010DE, 0x3DFB09D6, 0x3E777FEC, 0x3F5BC24C, 0x3FA1D683, 0x3FE67199, 0x4001B249, 0x40315B33,
    0x4034D02B, 0x408B904B, 0x40A470E2, 0x40DD70CB, 0x4178966E, 0x41CBF87B, 0x41F77C01, 0x4283070F,
    0x4288942B, 0x428A94C5, 0xB2FFFFFD, 0xB2FFFFFE, 0xB2FFFFFF, 0xB3000000, 0xB3000001, 0xB3000002,
    0xB3C00000, 0xB3C00001, 0xB4200001, 0xB4600002, 0xB4B00002, 0xB5480005, 0xB59C0006, 0xB5D4000B,
    0xB616000B, 0xB6B50020, 0xB6D9002E, 0xB7C9C09F, 0xB7F4C0EA, 0xB9584DB6, 0xBA525799, 0xBA7242A6,
    0xBADD0AB0, 0xBAE0E25C, 0xBB8D98F5, 0xBB9AF86A, 0xBB9CBB8E, 0xBBB70EE8, 0xBBF0EDF1, 0xBC2A461A,
    0xBCB8F40F, 0xBCE017BB, 0xBDB393EB, 0xBDF128EB, 0xBE5F667D, 0xBE67B559, 0xBEE0E6CD, 0xBEED01AF,
    0xBF76FD92, 0xBF81EADF, 0xBFBFA14B, 0xC03359CB, 0xC0382E72, 0xC0781533, 0xC13D6631, 0xC159FA1E,
    0xC16912CD, 0xC236E4B4, 0xC2B2E798,
)
LOG_HARD = (
    0x01B5B6FF, 0x01F100D0, 0x022AE487, 0x02AE0DEC, 0x02C7A933, 0x031C2829, 0x03B0FFA6, 0x03D2F29F,
    0x04294560, 0x04366D72, 0x04D056A6, 0x064CB44B, 0x07180B41, 0x0793FF2F, 0x079D9E65, 0x07B2C054,
    0x07C060FA, 0x0825E048, 0x0A81559B, 0x0A9AEC95, 0x0B265D7B, 0x0C92281F, 0x0DC8BBA4, 0x0E951250,
    0x0F61FF63, 0x0FAC7485, 0x0FF317D9, 0x10D0ECCF, 0x10E848D7, 0x111C87F8, 0x11B257E3, 0x12711CDC,
    0x12F3506F, 0x12F3C073, 0x12F9411E, 0x13252717, 0x133578D2, 0x134140D7, 0x1344CD4B, 0x13B2D101,
    0x13B591ED, 0x13E56E75, 0x13FCD84A, 0x145CB6D4, 0x14907055, 0x14D745EB, 0x14E04F32, 0x14E8B5F0,
    0x152ED9F5, 0x153C8057, 0x155D60FC, 0x158772EB, 0x15EFDB35, 0x16319371, 0x16A57EA8, 0x16B3A0B6,
    0x16C5EE7A, 0x174167EC, 0x17843E8F, 0x17CFC9E5, 0x1889CDAE, 0x18A0AD04, 0x18B06F2A, 0x195A8A50,
    0x197FB389, 0x199EFD2B, 0x19A7260D, 0x19DFD217, 0x1A0E5CBC, 0x1A21DB87, 0x1A3DE5E8, 0x1A8446CB,
    0x1AAC80DC, 0x1AB7C313, 0x1ADFD25D, 0x1AEB68CC, 0x1B1CDFA8, 0x1B68EBDA, 0x1B7F9534, 0x1B81AB52,
    0x1C3ECBC1, 0x1C42534C, 0x1C9D1E58, 0x1CEE8837, 0x1D24A185, 0x1DC9BC00, 0x1DC9E7C1, 0x1E0B6C02,
    0x1E1FCD3A, 0x1E6BC9FA, 0x1E9977AC, 0x1F116AB8, 0x1F8D227E, 0x21515A4F, 0x2160FF81, 0x21BB4EBF,
    0x22925AD4, 0x22F6D580, 0x23385DF4, 0x2423C085, 0x24349AA3, 0x2434DF79, 0x246FF143, 0x2471FCD7,
    0x24A6075D, 0x24A8FB14, 0x24B0AAA6, 0x25BE734F, 0x25F12E61, 0x261329B1, 0x26BFCC46, 0x2702172E,
    0x2758EEC4, 0x27A51454, 0x284C9852, 0x28763C69, 0x28D6AF22, 0x28E3FA26, 0x28EB675D, 0x29408064,
    0x29BD4F07, 0x29E6126B, 0x29FD22F8, 0x2B5C2172, 0x2BA782FE, 0x2C4C24B7, 0x2C6A9B50, 0x2CC6B31A,
    0x2D05C0B6, 0x2D3304D6, 0x2D6E1BDA, 0x2D6F4A4E, 0x2E018902, 0x2E358635, 0x2E492984, 0x2E7A6221,
    0x2F12CAF6, 0x3031622E, 0x30A201DC, 0x31B1F11F, 0x324C4B9B, 0x3273091C, 0x3418949B, 0x3461A322,
    0x3465FDEC, 0x3509DCF6, 0x35B5889A, 0x35D46557, 0x362B8E87, 0x36E5459E, 0x372F2767, 0x37974BDC,
    0x37C92259, 0x37DA7A1A, 0x3889392D, 0x38D62464, 0x38DCBE38, 0x3936ED13, 0x395AFDDF, 0x396921EF,
    0x3983B91D, 0x39C31348, 0x39C7B1F9, 0x39DBDDA7, 0x39FE220C, 0x3A0A7D17, 0x3A10C24D, 0x3A25D245,
    0x3A51C713, 0x3A7ABA8A, 0x3B6A36D6, 0x3BF86EF0, 0x3C413D3A, 0x3C4A5B39, 0x3CA1C99F, 0x3D13E105,
    0x3E2B3421, 0x3E5C31F6, 0x3F7FFFFE, 0x3FA66C0B, 0x3FC55379, 0x3FD364D7, 0x3FDC4750, 0x404DC250,
    0x40504CB2, 0x4056EE45, 0x40C6DB3B, 0x40E3CDC4, 0x41178FEB, 0x41C14367, 0x41E3B2AF, 0x432C2B82,
    0x434F23A8, 0x435AD1E7, 0x4384C0A5, 0x43D5E7FA, 0x44BC4360, 0x44BF5704, 0x44E04EAC, 0x44EDF9F6,
    0x458EB363, 0x460131B3, 0x46067543, 0x4612274F, 0x46380ED4, 0x464D5B2B, 0x4665A9A6, 0x467925D0,
    0x46CA6C75, 0x46E597CB, 0x47321211, 0x474B88EE, 0x47C7002D, 0x47EE8989, 0x480B2128, 0x482DA3A8,
    0x48BBC285, 0x48FF9766, 0x4A164169, 0x4A308C63, 0x4AABE14F, 0x4ADF5591, 0x4B72EA54, 0x4B77325A,
    0x4BF70DB3, 0x4C08FF78, 0x4C5D65A5, 0x4C6B191E, 0x4C723804, 0x4CA8A9EE, 0x4D604EBE, 0x4DC87EC6,
    0x4DCB02F0, 0x4E85F412, 0x4FE4AB24, 0x50DFEF2E, 0x51E8644F, 0x51F5527E, 0x526A304F, 0x52D862A1,
    0x5371B0EC, 0x540592DE, 0x548BB842, 0x54AF989D, 0x54E5E6B0, 0x55185F82, 0x5539344C, 0x5546A384,
    0x5588E13B, 0x55B923C6, 0x56210E9A, 0x5642EC12, 0x5660D110, 0x593910D1, 0x5982AF5D, 0x5A32CF1E,
    0x5A8F8E03, 0x5A9007C2, 0x5B042BA3, 0x5B777193, 0x5B800531, 0x5B98E163, 0x5BE9C85F, 0x5BF9890B,
    0x5CAFFB5E, 0x5D800341, 0x5D8B2D5B, 0x5DA07E05, 0x5E8C886E, 0x5EE8984E, 0x5EFBCAAE, 0x5F4B59F9,
    0x5F64C24A, 0x5F8765A3, 0x5F945685, 0x60357B5C, 0x60CF7D1C, 0x60F5C5D6, 0x61B88994, 0x62B467BA,
    0x62DC7608, 0x62F13366, 0x633E130D, 0x63525405, 0x63B134D9, 0x63BD5DF8, 0x63F05815, 0x644A8B82,
    0x64BC5793, 0x64E27FA3, 0x650EC1EC, 0x65D890D3, 0x669326A1, 0x669AFCDD, 0x66A8C860, 0x66ABBD63,
    0x66B708D3, 0x672C6C43, 0x67D2390B, 0x68E0180A, 0x6914CB96, 0x69230AAA, 0x6A15AC59, 0x6A2510D0,
    0x6B65B8C5, 0x6BACCED0, 0x6BE8CF96, 0x6CE14942, 0x6D1F23EB, 0x6D6C9D3A, 0x6E64EBB1, 0x6E7054F2,
    0x6ECF9D23, 0x6F31A8EC, 0x6F70C41E, 0x70376BAA, 0x7055FEEE, 0x710D528D, 0x71C0D919, 0x7229E3F6,
    0x723B4A36, 0x736CC271, 0x7405DEE8, 0x74661451, 0x74896A73, 0x765E7DBD, 0x7681B9AD, 0x76A32B61,
    0x77996704, 0x77B945EB, 0x789E5998, 0x78D867DE, 0x78FDBA15, 0x793D0B73, 0x79E7EC37, 0x7A708B30,
    0x7A7F9A48, 0x7A854203, 0x7B6B064E, 0x7B6B6A75, 0x7C776A08, 0x7C7A5810, 0x7C97418C, 0x7D26F8DB,
    0x7D36AA4D, 0x7D98B8F4, 0x7DBDFE04, 0x7ED76689, 0x7F6CD440,
)
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 3.0, 0.25, 1.5, 10.0, -10.0, np.inf, -np.inf,
           np.nan, 1e-45, -1e-45, 1e-40, 2.0**-126, 3.4028235e38, -3.4028235e38, 88.72283,
           88.72284, -87.33655, -103.27893, -103.97208, -104.0, 0.99999994, 1.0000001, 1e-8,
           -1e-8, 0.6931472, 16777216.0, 66049.0]
Driver = Callable[[str, np.ndarray], tuple[np.ndarray, int]]


def _build(tmp: Path, name: str, *defines: str) -> Path:
    exe = tmp / name
    assert CC is not None
    subprocess.run([CC, *CFLAGS, *defines, "-o", str(exe), str(C_DIR / "crmath_check.c"),
                    "-lm"], check=True)
    return exe


def _runner(exe: Path, tmp: Path) -> Driver:
    def run(fn: str, args: np.ndarray) -> tuple[np.ndarray, int]:
        src, out = tmp / f"{fn}.in", tmp / f"{fn}.out"
        np.ascontiguousarray(args, np.float32).tofile(src)
        proc = subprocess.run([str(exe), fn, str(src), str(out)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return np.fromfile(out, np.float32), int(proc.stdout.split()[1])
    return run


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    tmp = tmp_path_factory.mktemp("crmath")
    return _runner(_build(tmp, "crmath_check"), tmp)


def _bits(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def _one_arg(fn: str) -> np.ndarray:
    rng = np.random.default_rng(len(fn))
    hard = np.array(EXP_HARD if fn == "exp" else LOG_HARD, np.uint32).view(np.float32)
    subnormal = rng.integers(1, 0x800000, 200, dtype=np.uint32).view(np.float32)
    ranged = (rng.uniform(-104, 89, 3000) if fn == "exp" else
              np.exp(rng.uniform(-100, 88, 3000))).astype(np.float32)
    return np.concatenate([np.array(SPECIAL, np.float32), hard, subnormal, -subnormal,
                           _bits(4000, 32), ranged])


def _assert_bits(got: np.ndarray, want: np.ndarray, args: list[np.ndarray], fn: str) -> None:
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    shown = "; ".join(f"{fn}{tuple(float(a[j]) for a in args)} = {got[j]!r}, correctly "
                      f"rounded {want[j]!r}" for j in bad[:6])
    assert bad.size == 0, f"{bad.size} of {got.size} differ: {shown}"


@pytest.mark.parametrize("fn", ["exp", "log"])
def test_one_argument_functions_are_correctly_rounded(shim: Driver, fn: str) -> None:
    args = _one_arg(fn)
    got, wide = shim(fn, args)
    _assert_bits(got, fast_oracle(fn, np.float32, args), [args], f"cr_{fn}f")
    assert wide > 0, "no argument took the long double path: the hard cases are not hard"


def test_pow_is_correctly_rounded(shim: Driver) -> None:
    rng = np.random.default_rng(2)
    sp = np.array(SPECIAL, np.float32)
    # the pairs of 2^18 random ones whose f64 pow lies nearest an f32 midpoint
    xs0 = rng.uniform(0.01, 100, 1 << 18).astype(np.float32)
    ys0 = rng.uniform(-20, 20, 1 << 18).astype(np.float32)
    with np.errstate(all="ignore"):  # (results past FLT_MAX: inf, never near a midpoint)
        w = np.power(xs0.astype(np.float64), ys0.astype(np.float64))
        r = w.astype(np.float32)
        dist = np.abs(np.abs(w - r.astype(np.float64)) / np.abs(np.spacing(r)) - 0.5)
    near = np.argsort(np.where(np.isfinite(dist), dist, np.inf))[:200]
    squares = (rng.integers(1, 4096, 300) ** 2).astype(np.float32)  # exact and float results
    xs = np.concatenate([np.repeat(sp, sp.size), xs0[near], _bits(3000, 5), squares,
                         np.ldexp(np.float32(1), rng.integers(-149, 128, 100))])
    ys = np.concatenate([np.tile(sp, sp.size), ys0[near], _bits(3000, 6),
                         rng.choice(np.array([0.5, 2.0, -0.5, 3.0, -1.0], np.float32), 300),
                         rng.integers(-3, 4, 100).astype(np.float32)])
    # exactly on a midpoint (the tie goes to even): 257^3, 4225^2, 2^-150 (between 0 and
    # the smallest subnormal), 3^15 * 2^-150 (between two subnormals)
    ties = np.array([[66049.0, 1.5], [4225.0, 2.0], [2.0, -150.0], [3 * 2.0**-10, 15.0],
                     [0.25, 75.0], [17850625.0, 0.5]], np.float32)
    xs = np.concatenate([xs, ties[:, 0]]).astype(np.float32)
    ys = np.concatenate([ys, ties[:, 1]]).astype(np.float32)
    got, wide = shim("pow", np.stack([xs, ys], axis=1).ravel())
    _assert_bits(got, fast_oracle("pow", np.float32, xs, ys), [xs, ys], "cr_powf")
    assert wide >= len(ties)


def test_the_long_double_path_alone_is_correctly_rounded(tmp_path: Path) -> None:
    """With the double window widened to 2^-12, nearly every call takes the long double
    path: it is correctly rounded on its own."""
    run = _runner(_build(tmp_path, "wide", "-DCR_WINDOW_DOUBLE=0x1p-12"), tmp_path)
    for fn in ("exp", "log"):
        args = _one_arg(fn)
        got, wide = run(fn, args)
        _assert_bits(got, fast_oracle(fn, np.float32, args), [args], f"cr_{fn}f")
        assert wide > args.size // 2, (fn, wide)


@pytest.mark.parametrize("fn", ["exp", "log", "pow"])
def test_an_undecidable_call_stops_the_driver(tmp_path: Path, fn: str) -> None:
    """With both windows widened to 2^-10 no call can be decided: the driver stops at the
    first, naming it, and writes no result (the integer check only rules on a midpoint)."""
    exe = _build(tmp_path, "blind", "-DCR_WINDOW_DOUBLE=0x1p-10", "-DCR_WINDOW_LONG=0x1p-10L")
    src, out = tmp_path / "in", tmp_path / "out"
    np.array([1.5, 3.0] if fn == "pow" else [1.5], np.float32).tofile(src)
    proc = subprocess.run([str(exe), fn, str(src), str(out)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 3, proc
    call = "powf(0x1.8p+0, 0x1.8p+1)" if fn == "pow" else f"{fn}f(0x1.8p+0)"
    assert f"crmath: {call} lies too near a float rounding boundary" in proc.stderr
    assert out.stat().st_size == 0  # (buffered: nothing reached the file)
