"""Layout of the per-dispatch uniform block: buffer element counts, then scalar params.

WGSL's uniform address space lays scalars out at their natural alignment; this module
computes the same offsets in Python and packs values into bytes. 64-bit fields go first so
no padding is needed between them and the 32-bit fields; f16 params travel as f32 (an exact
conversion both ways). Three `vy_zero*` fields (always 0) give the shader values the
driver's compiler cannot know (render.py's float fences: one per operand position). This module must never talk to a device or generate shader code
beyond the struct declaration.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

from vyre.ir.nodes import Program
from vyre.ir.types import ScalarType

# struct format char and byte size of a uniform field holding a param of this type
_FIELD = {
    ScalarType.I32: ("i", 4, "i32"),
    ScalarType.U32: ("I", 4, "u32"),
    ScalarType.F32: ("f", 4, "f32"),
    ScalarType.F16: ("f", 4, "f32"),  # widened: f16 -> f32 -> f16 is exact
    ScalarType.I64: ("q", 8, "i64"),
    ScalarType.U64: ("Q", 8, "u64"),
    ScalarType.F64: ("d", 8, "f64"),
}


@dataclass(frozen=True)
class Field:
    name: str  # WGSL member name
    wgsl_type: str
    offset: int
    fmt: str  # struct module format char


@dataclass(frozen=True)
class UniformLayout:
    """Members of the uniform struct; `count_fields[i]` holds buffer i's element count."""

    fields: tuple[Field, ...]
    count_fields: tuple[str, ...]
    param_fields: tuple[str, ...]  # in program.params order
    size: int  # bytes of the uniform buffer (a multiple of 16)
    _fmt: str
    _order: tuple[int, ...]  # for each packed slot, index into (counts + params)

    def struct_source(self) -> str:
        return self._struct_source

    @cached_property  # (layouts are shared by shape: see layout_for)
    def _struct_source(self) -> str:
        lines = ["struct VyUniforms {"]
        for f in self.fields:
            lines.append(f"    {f.name}: {f.wgsl_type},  // offset {f.offset}")
        lines.append("}")
        return "\n".join(lines)

    def pack(self, counts: tuple[int, ...], params: tuple[bool | int | float, ...]) -> bytes:
        values = (*counts, *params, *(0 for _ in ZERO_FIELDS))
        data = struct.pack(self._fmt, *(values[i] for i in self._order))
        return data + bytes(self.size - len(data))


ZERO_FIELDS = ("vy_zero", "vy_zero1", "vy_zero2")
ZERO_FIELD = ZERO_FIELDS[0]


def param_field(name_mangled: str) -> str:
    return f"p_{name_mangled}"


def count_field(slot: int) -> str:
    return f"n_{slot}"


# layouts by shape (buffer count, param types and names): a cold compile's is usually known
_LAYOUTS: dict[tuple[int, tuple[tuple[ScalarType, str], ...]], UniformLayout] = {}
_LAYOUTS_MAX = 256


def layout_for(program: Program, mangled_params: tuple[str, ...]) -> UniformLayout:
    """The uniform layout of `program` (`mangled_params`: WGSL-safe param names, in order)."""
    key = (len(program.buffers), tuple(zip([p.ty for p in program.params], mangled_params)))
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = _layout(program, mangled_params)
    return layout


def _layout(program: Program, mangled_params: tuple[str, ...]) -> UniformLayout:
    n_counts = len(program.buffers)
    # (align, index into counts+params, name, wgsl type, fmt)
    items: list[tuple[int, int, str, str, str]] = []
    for i in range(n_counts):
        items.append((4, i, count_field(i), "u32", "I"))
    for j, (p, m) in enumerate(zip(program.params, mangled_params)):
        fmt, size, wt = _FIELD[p.ty]
        items.append((size, n_counts + j, param_field(m), wt, fmt))
    # always 0 at run time, but unknown to the driver's compiler (see float_fences._fence_code)
    for k, zf in enumerate(ZERO_FIELDS):
        items.append((4, n_counts + len(program.params) + k, zf, "u32", "I"))
    # 8-byte fields first (stable within each class): no padding anywhere.
    items.sort(key=lambda it: -it[0])
    fields: list[Field] = []
    off = 0
    fmt = "<"
    order: list[int] = []
    for size, idx, name, wt, f in items:
        fields.append(Field(name, wt, off, f))
        off += size
        fmt += f
        order.append(idx)
    size = max(16, (off + 15) // 16 * 16)
    return UniformLayout(
        fields=tuple(fields),
        count_fields=tuple(count_field(i) for i in range(n_counts)),
        param_fields=tuple(param_field(m) for m in mangled_params),
        size=size,
        _fmt=fmt,
        _order=tuple(order),
    )
