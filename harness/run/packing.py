"""Kernel arguments as bytes where cuda.core cannot pack them: scalars of ml_dtypes (bf16, fp8)
as their bits, structs by value in the C layout, and what a texture or surface object may be made
over.
Plain numpy, so the CPU check (spec_check) says the same of an argument as a launch on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from harness.model.spec import Buf, Launch, Problem, Struct, Surface, Texture

POINTER_BYTES = 8  # a device pointer inside a struct, on every 64-bit host CUDA supports
_NATIVE = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)}
# What cuda.core's texture objects take: CUarray_format's element types
TEXTURE_DTYPES = tuple(np.dtype(t) for t in ("u1", "u2", "u4", "i1", "i2", "i4", "f2", "f4"))
TEXTURE_FILTERS = ("point", "linear")
TEXTURE_ADDRESSES = ("clamp", "wrap", "mirror", "border")


def scalar_problem(value: object) -> str | None:
    """Why `value` cannot be a Scalar's: only a numpy scalar says its C type (a Python int
    could be an int or a long long), and ml_dtypes' bf16 and fp8 go as their bits."""
    packed = bits_of(value)
    if isinstance(packed, np.generic) and np.dtype(type(packed)).kind in "biuf":
        return None
    return (
        f"Scalar({value!r}) of {type(value).__name__}: a launch passes numpy scalars of bool, "
        "integer and float types (np.int32(n), np.float32(x)), and ml_dtypes' bf16 and fp8"
    )


def bits_of(value: object) -> object:
    """A scalar as cuda.core packs it: a bf16 or fp8 one (ml_dtypes, which cuda.core refuses)
    as an unsigned integer of its bits, the C type's size and bytes."""
    if not isinstance(value, np.generic) or value.dtype in _NATIVE or value.dtype.itemsize > 2:
        return value
    if value.dtype.kind not in "Vf":  # e5m2 says it is a float, bf16 and e4m3 a structure
        return value
    try:
        ml_dtypes.finfo(value.dtype)
    except (TypeError, ValueError):
        return value  # not a float of ml_dtypes: cuda.core says what it cannot pack
    return np.frombuffer(value.tobytes(), np.dtype(f"<u{value.dtype.itemsize}"))[0]


@dataclass(frozen=True)
class Member:
    """A field of a struct at its byte offset: a scalar's bytes, or a buffer's name."""

    offset: int
    name: str  # dotted through nested structs: "shape.rows"
    value: np.generic | Buf


@dataclass(frozen=True)
class Layout:
    """A struct as C lays it out: its leaf members, its size and its alignment."""

    members: tuple[Member, ...]
    size: int
    alignment: int


def layout_of(struct: Struct, prefix: str = "") -> Layout:
    """The C layout of `struct`; ValueError naming the field that no C member can hold."""
    if not isinstance(struct, Struct) or not isinstance(struct.fields, tuple | list):
        raise ValueError(f"{struct!r} is not a Struct((name, value), ...)")
    if not struct.fields:
        raise ValueError("a Struct with no fields (C has no empty struct)")
    members: list[Member] = []
    offset = alignment = 0
    for pair in struct.fields:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(f"{pair!r} is not a (name, value) field")
        name, value = prefix + pair[0], pair[1]
        if isinstance(value, Struct):
            inner = layout_of(value, name + ".")
            offset = _aligned(offset, inner.alignment)
            members += [Member(offset + m.offset, m.name, m.value) for m in inner.members]
            size, align = inner.size, inner.alignment
        elif isinstance(value, Buf):
            offset = _aligned(offset, POINTER_BYTES)
            members.append(Member(offset, name, value))
            size = align = POINTER_BYTES
        else:
            if why := scalar_problem(value):
                raise ValueError(f"field {name}: {why}")
            bits = bits_of(value)
            assert isinstance(bits, np.generic)  # scalar_problem said so
            offset = _aligned(offset, bits.itemsize)
            members.append(Member(offset, name, bits))
            size = align = bits.itemsize
        offset += size
        alignment = max(alignment, align)
    return Layout(tuple(members), _aligned(offset, alignment), alignment)


def packed(struct: Struct, address_of: Callable[[str], int]) -> bytes:
    """`struct`'s bytes as the kernel reads them, a Buf as the device address `address_of`
    gives for its name; padding is zero."""
    shape = layout_of(struct)
    data = bytearray(shape.size)
    for member in shape.members:
        if isinstance(member.value, Buf):
            raw = int(address_of(member.value.name)).to_bytes(POINTER_BYTES, "little")
        else:
            raw = member.value.astype(member.value.dtype.newbyteorder("<")).tobytes()
        data[member.offset : member.offset + len(raw)] = raw
    return bytes(data)


def struct_problem(struct: object, buffers: Mapping[str, np.ndarray]) -> str | None:
    """Why `struct` cannot be packed over `buffers`; None when it can."""
    try:
        shape = layout_of(struct)  # type: ignore[arg-type]
    except ValueError as error:
        return str(error)
    for member in shape.members:
        if isinstance(member.value, Buf) and member.value.name not in buffers:
            return (
                f"field {member.name} names buffer {member.value.name!r}, which the problem "
                f"does not have ({sorted(buffers)})"
            )
    return None


def texture_problem(
    texture: Texture, inputs: Mapping[str, np.ndarray], pitch_alignment: int
) -> str | None:
    """Why a texture object cannot be made as `texture` asks over `inputs` on a device whose
    texture pitch alignment is `pitch_alignment` bytes; None when it can."""
    if texture.name not in inputs:
        return f"a Texture over {texture.name!r}, which is not an input ({sorted(inputs)})"
    array = inputs[texture.name]
    if array.dtype not in TEXTURE_DTYPES:
        kinds = ", ".join(str(t) for t in TEXTURE_DTYPES)
        return f"a Texture over {texture.name!r} of {array.dtype}: textures hold {kinds}"
    if texture.array is not True and texture.array is not False:
        return f"a Texture with array={texture.array!r}: True or False"
    if texture.array and texture.dims not in (1, 2, 3):
        return f"a Texture of dims={texture.dims!r} over an array: 1, 2 or 3 (tex1D to tex3D)"
    if not texture.array and texture.dims not in (1, 2):
        return f"a Texture of dims={texture.dims!r}: 1 (tex1Dfetch) or 2 (tex2D)"
    if (texture.array or texture.dims == 2) and array.ndim != texture.dims:
        return f"a {texture.dims}-D Texture over {texture.name!r}, which is {array.ndim}-D"
    if texture.filter not in TEXTURE_FILTERS:
        return f"a Texture with filter={texture.filter!r}: one of {TEXTURE_FILTERS}"
    if texture.address not in TEXTURE_ADDRESSES:
        return f"a Texture with address={texture.address!r}: one of {TEXTURE_ADDRESSES}"
    if (
        not texture.array
        and texture.dims == 1
        and (texture.filter != "point" or texture.address != "clamp" or texture.normalized)
    ):
        return (
            "a 1-D Texture reads with tex1Dfetch: no filtering, addressing or normalized "
            "coordinates (those are a 2-D Texture's, or one over an array: array=True)"
        )
    if texture.array and texture.filter == "linear" and array.dtype.kind != "f":
        return (
            f"a Texture with linear filtering over {texture.name!r} of {array.dtype}: "
            "filtering interpolates float16 or float32 elements"
        )
    if texture.array and texture.address in ("wrap", "mirror") and not texture.normalized:
        return (
            f"a Texture with address={texture.address!r} reads normalized coordinates: "
            "normalized=True"
        )
    if array.size == 0:
        return f"a Texture over {texture.name!r}, which is empty"
    pitch = array.shape[-1] * array.dtype.itemsize
    if not texture.array and texture.dims == 2 and pitch % pitch_alignment:
        return (
            f"a 2-D Texture over {texture.name!r}: its rows are {pitch} bytes, not a multiple "
            f"of the device's texture pitch alignment ({pitch_alignment} bytes)"
        )
    return None


def surface_problem(surface: Surface, buffers: Mapping[str, np.ndarray]) -> str | None:
    """Why a surface object cannot be made as `surface` asks over the problem's inputs and
    outputs (`buffers`); None when it can."""
    if surface.name not in buffers:
        return (
            f"a Surface over {surface.name!r}, which is not an input or an output "
            f"({sorted(buffers)})"
        )
    array = buffers[surface.name]
    if array.dtype not in TEXTURE_DTYPES:
        kinds = ", ".join(str(t) for t in TEXTURE_DTYPES)
        return f"a Surface over {surface.name!r} of {array.dtype}: surfaces hold {kinds}"
    if array.ndim not in (1, 2, 3):
        return (
            f"a Surface over {surface.name!r}, which is {array.ndim}-D: surfaces are 1-, 2- or 3-D"
        )
    if array.size == 0:
        return f"a Surface over {surface.name!r}, which is empty"
    return None


def cuda_arrays(problem: Problem) -> Iterator[tuple[str, str]]:
    """Each buffer a launch of `problem` reads or writes through a CUDA array, with what the
    array is for: "surface" where any Surface names it (the array then takes surface loads and
    stores, and a surface's limits), else "texture"."""
    named: dict[str, str] = {}
    for step in problem.launches:
        for arg in step.args if isinstance(step, Launch) else ():
            if isinstance(arg, Surface):
                named[arg.name] = "surface"
            elif isinstance(arg, Texture) and arg.array:
                named.setdefault(arg.name, "texture")
    yield from named.items()


def array_beyond(
    kind: str, name: str, shape: tuple[int, ...], largest: Sequence[Sequence[int]]
) -> str | None:
    """Why a CUDA array of a buffer of numpy `shape` is larger than a device makes for a
    `kind` ("texture" or "surface") of its dimensions, whose `largest` extents (x first) are
    each a shape it takes; None when it fits one."""
    extent = tuple(reversed(shape))  # x along the last axis, as the array is made
    if any(all(e <= m for e, m in zip(extent, most, strict=True)) for most in largest):
        return None
    said = " or ".join(" x ".join(map(str, most)) for most in largest)
    return (
        f"a {len(extent)}-D {kind} over {name!r} of {' x '.join(map(str, extent))} elements "
        f"(x first), beyond the device's largest {len(extent)}-D {kind} array, {said}"
    )


def _aligned(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment
