"""C++ entry points by the names their authors write (`block_sum<128>`, `ns::scale<float, 4>`):
the build instantiates each and maps it to its symbol.

nvcc has no name expressions (NVRTC's), so the build compiles a translation unit that includes
the kernel's source and adds, per name, an empty probe kernel whose parameter's type holds the
address of the named instance: taking it instantiates the template for the device, and the
probe's mangled name carries the instance's. Mangled names cannot be cut out of one another
(substitutions renumber), so both are demangled (libstdc++'s __cxa_demangle, which every
machine with nvcc's host compiler has) and matched as text. The probes are dropped from what
the compile cell reports; the cell shows the names the spec wrote.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from collections.abc import Iterable
from pathlib import Path

PROBE = "cuda_matrix_entry"


class EntryError(Exception):
    """A C++ entry the build cannot instantiate or map; the message says which and why."""


def is_plain(name: str) -> bool:
    """An `extern "C"` entry's name: its symbol, nothing to map."""
    return name.isidentifier()


def probe_source(source: Path, names: Iterable[str]) -> str:
    """The translation unit that builds `source` with a probe for each name."""
    lines = [
        f'#include "{source.resolve()}"',
        f"template <auto Entry> struct {PROBE} {{}};",
    ]
    for index, name in enumerate(names):
        lines.append(f"__global__ void {PROBE}_{index}({PROBE}<&{name}>*) {{}}")
    return "\n".join(lines) + "\n"


def symbols_of(names: list[str], compiled: Iterable[str]) -> dict[str, str]:
    """Each name's symbol among the `compiled` entry symbols (ptxas's), by the probes'."""
    demangled = Demangler()
    readable = {symbol: demangled(symbol) for symbol in compiled}
    by_text = {text: symbol for symbol, text in readable.items() if text}
    found: dict[str, str] = {}
    for index, name in enumerate(names):
        head = f"{PROBE}_{index}({PROBE}<&("
        probe = next((t for t in readable.values() if t and t.startswith(head)), None)
        if probe is None or not probe.endswith(")>*)"):
            raise EntryError(f"entry {name!r}: the build made no probe of it")
        instance = probe[len(head) : -len(")>*)")]
        if instance not in by_text:
            raise EntryError(f"entry {name!r}: {instance} is not among the binary's entries")
        # Two spellings of one instantiation (`tk<256>`, `tk<0x100>`) would share a symbol,
        # and a launch by one of them would find the other's name: the spec says it once.
        same = next((other for other, symbol in found.items() if symbol == by_text[instance]), None)
        if same is not None:
            raise EntryError(
                f"entries {same!r} and {name!r} name one instantiation, {instance}: name it once"
            )
        found[name] = by_text[instance]
    return found


def said_of_probes(log: str, unit: Path, names: list[str], source: Path) -> str:
    """nvcc's log with each line about the probes' unit said of the entry it probes: an entry
    the source cannot instantiate is named, not a line of a file that is gone."""

    def entry_at(found: re.Match[str]) -> str:
        line = int(found.group(1))
        if line == 2:  # the probe template: the source has a name of the harness's own
            return f"{source.name} (it may not define `{PROBE}`, a name the harness's probe uses):"
        index = line - 3  # the include and the probe template come first
        named = names[index] if 0 <= index < len(names) else "?"
        return f"{source.name}, entry {named!r}:"

    return re.sub(re.escape(str(unit)) + r"\((\d+)\):", entry_at, log)


def is_probe(symbol: str) -> bool:
    return f"{PROBE}_" in symbol and symbol.startswith("_Z")


class Demangler:
    """libstdc++'s __cxa_demangle, loaded once for the names of one build."""

    def __init__(self) -> None:
        found = ctypes.util.find_library("stdc++")
        if found is None:
            raise EntryError(
                "C++ entry names need libstdc++'s demangler (__cxa_demangle), and this machine "
                "has no libstdc++"
            )
        # by getattr: written as an attribute in a class, Python would mangle the name itself
        self._demangle = getattr(ctypes.CDLL(found), "__cxa_demangle")
        self._demangle.restype = ctypes.c_void_p
        self._free = ctypes.CDLL(None).free

    def __call__(self, symbol: str) -> str | None:
        """`symbol` as C++ source names it; None when it is not a mangled name."""
        status = ctypes.c_int()
        text = self._demangle(symbol.encode(), None, None, ctypes.byref(status))
        if status.value != 0 or not text:
            return None
        try:
            return ctypes.string_at(text).decode()
        finally:
            self._free(ctypes.c_void_p(text))
