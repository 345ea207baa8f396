"""8/16-bit buffer elements in WGSL, which has no 8- or 16-bit storage types.

A u8 / i8 / u16 / i16 buffer or workgroup array is declared as an array of u32 words, each
holding 4 (or 2) consecutive elements, little-endian (element i is bits 8*(i % 4) .. of
word i / 4): exactly the host's packed bytes, so data uploads and downloads as it is. A
narrow value lives in the 32-bit integer of its signedness (u32 / i32), always in its
type's range (docs/IR.md "Narrow integers"), so loads unpack into that and stores take it.

Stores: an invocation may store one byte of a word while others store its neighbours, so a
plain read-modify-write of the word would lose their bytes. An array that is stored into
is therefore `array<atomic<u32>>`, and a store is two atomics on the word: `atomicAnd`
clears the element's bits, `atomicOr` sets the new ones. Each touches only the element's
own bits, so whatever other invocations store into the word's other elements, at any
time, is never lost; no loop is involved (a compare-exchange loop would count towards
lavapipe's loop budget, loopcount.py). A store of the value the element already holds
changes nothing (an atomicLoad tests it first), so loads racing with such stores read the
value, as the reference's checked mode assumes of that benign race; stores of one value
by many invocations (a "found" flag) leave that value. What this does not order: two
invocations storing *different* values into the same element in one dispatch (an
unordered race in the IR, whose result is unspecified) may leave the bitwise or of them,
and a load racing a store that changes the element may see 0 between the two atomics.
Loads of a stored array use atomicLoad (WGSL requires it of an atomic).

Every access here is in range by construction: the lowering passes an element index
below the element count n (a raw access), and the word index i >> 2 (i >> 1) is then below
ceil(n / 4) (ceil(n / 2)), which the binding covers (the runtime rounds every buffer up to
whole words) and the workgroup array declares.
"""

from __future__ import annotations

from vyre.ir.types import ScalarType


def per_word(ty: ScalarType) -> int:
    """Elements of `ty` per u32 word (4 for 8-bit types, 2 for 16-bit ones)."""
    return 32 // ty.bits


def words(ty: ScalarType, count: int) -> int:
    """The u32 words that hold `count` elements of the narrow type `ty`."""
    return -(-count // per_word(ty))


def _shift(ty: ScalarType) -> tuple[str, str]:
    """(word index, bit offset) of element `i` as WGSL expressions."""
    lg = {8: 2, 16: 1}[ty.bits]
    return f"(i >> {lg}u)", f"((i & {per_word(ty) - 1}u) * {ty.bits}u)"


def load_fn(var: str, ty: ScalarType, atomic: bool) -> tuple[str, str]:
    """(name, WGSL code) of the function reading element i of packed array `var`, as the
    u32 (u8, u16: zero-extended) or i32 (i8, i16: sign-extended) it stands for."""
    name = f"vy_unpack_{var}"
    w, s = _shift(ty)
    word = f"atomicLoad(&{var}[{w}])" if atomic else f"{var}[{w}]"
    if ty.is_signed:  # its top bit to bit 31, then an arithmetic shift back: sign-extended
        body = f"return bitcast<i32>({word} << ({32 - ty.bits}u - {s})) >> {32 - ty.bits}u;"
        return name, f"fn {name}(i: u32) -> i32 {{ {body} }}"
    mask = (1 << ty.bits) - 1
    return name, f"fn {name}(i: u32) -> u32 {{ return ({word} >> {s}) & {mask}u; }}"


def store_fn(var: str, ty: ScalarType) -> tuple[str, str]:
    """(name, WGSL code) of the function storing the value v (u32 or i32, in the type's
    range) into element i of packed atomic array `var`, touching no other element's bits
    (module docstring)."""
    name = f"vy_pack_{var}"
    w, s = _shift(ty)
    mask = (1 << ty.bits) - 1
    t = "i32" if ty.is_signed else "u32"
    bits = "bitcast<u32>(v)" if ty.is_signed else "v"
    code = (f"fn {name}(i: u32, v: {t}) {{ let w = {w}; let s = {s}; "
            f"let m = {mask}u << s; let b = ({bits} & {mask}u) << s; "
            f"if ((atomicLoad(&{var}[w]) & m) != b) {{ "
            f"atomicAnd(&{var}[w], ~m); atomicOr(&{var}[w], b); }} }}")
    return name, code


def narrowed(ty: ScalarType, a: str) -> str:
    """The u32 `a` wrapped to the narrow type `ty` (its low bits; sign-extended for a signed
    type), as the u32 / i32 that holds it."""
    if ty.is_signed:
        return f"(bitcast<i32>(({a}) << {32 - ty.bits}u) >> {32 - ty.bits}u)"
    return f"(({a}) & {(1 << ty.bits) - 1}u)"
