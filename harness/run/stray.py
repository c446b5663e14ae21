"""Reads outside a buffer: whether a kernel's outputs depend on memory it was never given.

The verified launch runs with every buffer between two guard zones of 0xA5 bytes and every output
poisoned with 0xFF bytes; a kernel that reads a guard and uses what it read passes, since 0xA5
bytes are a value like any other (as float32, about -2.9e-16: nothing a sum shows). So the kernel
runs twice more on the same inputs, with every guard zone and every output's bytes before the
run filled with an extreme of its buffer's dtype: the largest finite value, then the smallest
(float32 +-3.4e38, bf16 +-3.4e38, int32 2147483647 and -2147483648, uint8 255 and 0). An output
whose digest is the verified run's both times depends on none of it. Two extremes, not one loud
value, because a kernel may read a stray value through an operation that hides most values: a
NaN vanishes in fmaxf, anything below the window's largest in a max, anything above its
smallest in a min, anything on the wrong side of a threshold in a comparison; the largest shows
through a max or a threshold above, the smallest through a min or a threshold below.

When an output changes, what it depends on is found by changing one guard zone (or one output's
bytes before the run) at a time. A kernel whose outputs differ bit for bit from run to run of
their own (atomics) is judged by the reference's tolerance instead; a kernel that is wrong on a
plain run after the verified one is left to the check on fresh inputs, which says so.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import ml_dtypes
import numpy as np

CONTENTS = "contents"  # the source "y:contents": output y's bytes before the run
SIDES = ("before", "after")  # of a guard zone, "x:before" and "x:after"
_FALLBACK = {"largest": b"\x7f", "smallest": b"\x80"}  # a dtype of no range: bytes


class Extreme(enum.Enum):
    """What a loud run fills the memory around buffers with: each element its dtype's largest
    finite value, or its smallest."""

    LARGEST = "largest"
    SMALLEST = "smallest"


def extreme_fill(dtype: np.dtype, extreme: Extreme) -> bytes:
    """The 1, 2 or 4 bytes that, repeated (a memset), make every element of `dtype` its
    largest or smallest finite value: an 8-byte element gets its extreme's high word twice
    (float64 +-1.8e308, int64 +-9.2e18); a complex number, its part's extreme in both parts; a
    bool, 1 or 0; a dtype with no range (a structure), 0x7F or 0x80 bytes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        dtype = np.dtype(f"f{dtype.itemsize // 2}")
    if dtype.kind == "b":
        return b"\x01" if extreme is Extreme.LARGEST else b"\x00"
    if dtype.itemsize in (1, 2, 4, 8):
        for info in (ml_dtypes.finfo, ml_dtypes.iinfo):
            try:
                limits = info(dtype)
            except (TypeError, ValueError):  # not a float (or not an integer)
                continue
            value = limits.max if extreme is Extreme.LARGEST else limits.min
            raw = np.array(value, dtype).tobytes()
            return raw[-4:]  # little-endian, as the GPU: the high word of an 8-byte element
    return _FALLBACK[extreme.value]


@dataclass(frozen=True)
class Dependence:
    """An output that changed with memory it was not given: `elements` of it, when `source`
    changed ("x:after", "x:before", "y:contents"); `source` None: only when all of them changed
    at once, never one alone."""

    output: str
    source: str | None
    elements: int


class Trials(Protocol):
    """Runs of the kernel on the verified inputs, and what each left in its outputs."""

    def run(self, loud: Mapping[str, Extreme]) -> Mapping[str, int]:
        """Run once with the sources in `loud` filled with their extremes, every other guard
        zone and output as the verified run had them; the outputs' digests."""
        ...

    def changed(self, output: str) -> int:
        """The elements of `output`, as the last run left it, whose values differ from what
        the verified run wrote (verify.changed_elements)."""
        ...

    def wrong(self, output: str) -> int:
        """The elements of `output`, as the last run left it, beyond the reference's
        tolerance."""
        ...


def stray_reads(
    trials: Trials, sources: Sequence[str], verified: Mapping[str, int]
) -> list[Dependence]:
    """What the outputs depend on of `sources`, given the verified run's output digests; empty
    when nothing (the fast path: two runs whose digests are the verified ones)."""
    everywhere = {extreme: dict.fromkeys(sources, extreme) for extreme in Extreme}
    loud = [extreme for extreme in Extreme if trials.run(everywhere[extreme]) != verified]
    if not loud:
        return []
    steady = trials.run({}) == verified

    def moved(fills: Mapping[str, Extreme]) -> dict[str, int]:
        """The outputs a run with `fills` changed, and by how many elements."""
        digests = trials.run(fills)
        if steady:
            differ = [name for name, digest in digests.items() if digest != verified[name]]
            counts = {name: trials.changed(name) for name in differ}
        else:
            counts = {name: trials.wrong(name) for name in digests}
        return {name: count for name, count in counts.items() if count}

    if not steady:  # its outputs vary on their own: what varies beyond the tolerance counts
        loud = [extreme for extreme in loud if moved(everywhere[extreme])]
        if not loud or moved({}):  # right however loud, or wrong on a plain run as well
            return []
    found: dict[tuple[str, str], int] = {}
    for source in sources:
        for extreme in loud:
            for output, elements in moved({source: extreme}).items():
                found[output, source] = max(elements, found.get((output, source), 0))
    if steady and trials.run({}) != verified:  # the kernel changed as it ran: not the memory
        return []
    if found:
        return [Dependence(output, source, n) for (output, source), n in found.items()]
    return [Dependence(output, None, n) for output, n in moved(everywhere[loud[0]]).items()]


def said(dependence: Dependence, kind_of: Callable[[str], str]) -> str:
    """The dependence as a cell says it: "output 'y' depends on memory past the end of input 'x'
    (1 element changes when the bytes after 'x' change)"; `kind_of` names a buffer's group."""
    output, count = dependence.output, dependence.elements
    changes = f"{count} element{'s change' if count != 1 else ' changes'}"
    if dependence.source is None:
        return (
            f"output {output!r} depends on memory outside its buffers ({changes} when the bytes "
            "around every buffer, and every output's bytes before the run, change at once; no "
            "one of them changes it alone)"
        )
    name, side = dependence.source.rsplit(":", 1)
    kind = kind_of(name)
    if side == CONTENTS:
        return (
            f"output {output!r} depends on what output {name!r} held before the kernel ran: it "
            f"reads {name!r} before writing it, or leaves some of it unwritten ({changes} when "
            f"{name!r} starts with other bytes)"
        )
    where = "past the end of" if side == "after" else "before the start of"
    return (
        f"output {output!r} depends on memory {where} {kind} {name!r} ({changes} when the "
        f"bytes {side} {name!r} change)"
    )
