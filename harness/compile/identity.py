"""A binary's code identity: one hash of what the GPU executes, the same wherever it was built.

A fatbin's bytes depend on where it was compiled: `-lineinfo` writes the source's path and line
table into it, so the same `.cu` built in two folders differs in thousands of bytes. The code
identity hashes what changes execution and nothing else: each cubin's ELF sections but its debug
sections (line tables, the PTX kept for debuggers) and the toolkit's note, and the embedded PTX
without its `.file` and `.loc` directives and comments. The same source and toolchain give the
same identity in any folder on any machine; a changed instruction, constant, resource or launch
bound gives another.
"""

from __future__ import annotations

import hashlib
import re
import struct
import subprocess
import tempfile
from pathlib import Path

# Sections that say where the code came from, not what it does: line tables and debug info under
# any prefix (`.rela.debug_line`, sm_100's `.nv.merc.debug_line`), and the toolkit's note.
_NOT_CODE = re.compile(r"\.(nv_)?debug|^\.note\.nv\.tkinfo$")
_PTX_NOISE = re.compile(r"^\s*(\.file|\.loc)\b.*$|//.*$", re.MULTILINE)
_SHT_NOBITS = 8  # a section with no bytes in the file (.bss, .nv.shared)


class IdentityError(Exception):
    """The binary could not be taken apart (no cuobjdump, not a fatbin)."""


def code_identity(cuobjdump: Path, binary: Path, timeout_s: float = 120) -> str:
    """The code identity of `binary`: a SHA-256 over its cubins' code sections and its PTX."""
    with tempfile.TemporaryDirectory(prefix="identity-") as scratch:
        for what in ("-xelf", "-xptx"):
            _extract(cuobjdump, what, binary, Path(scratch), timeout_s)
        # Each part's own digest, in an order of what they hold, not of how the directory lists
        # them: a binary of several sources has several cubins of one arch.
        parts = sorted(_part_digest(part) for part in Path(scratch).iterdir())
        if not parts:
            raise IdentityError(f"{binary.name} holds no cubin and no PTX")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def sass_identity(cuobjdump: Path, binary: Path, timeout_s: float = 120) -> str:
    """A SHA-256 over the instructions alone: each cubin's `.text.<entry>` sections, by arch and
    name. Two toolkits' builds of one source differ in their cubins' attributes and notes even
    where every instruction is the same; this says whether the instructions are."""
    with tempfile.TemporaryDirectory(prefix="sass-") as scratch:
        _extract(cuobjdump, "-xelf", binary, Path(scratch), timeout_s)
        parts = []
        for cubin in Path(scratch).iterdir():
            arch, _ = _arch_and_kind(cubin)
            for name, data in code_sections(cubin.read_bytes()):
                if name.startswith(".text."):
                    parts.append(f"{arch} {name} {hashlib.sha256(data).hexdigest()}")
    if not parts:
        raise IdentityError(f"{binary.name} holds no instructions (no cubin)")
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def _extract(cuobjdump: Path, what: str, binary: Path, into: Path, timeout_s: float) -> None:
    """`cuobjdump <what> all` (-xelf: the cubins, -xptx: the PTX) of `binary`, into `into`."""
    try:
        done = subprocess.run(
            [str(cuobjdump), what, "all", str(binary.resolve())],
            cwd=into,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise IdentityError(f"cannot run {cuobjdump}: {error}") from error
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip()[-300:]
        raise IdentityError(f"{cuobjdump.name} {what} failed: {why}")


def _part_digest(part: Path) -> str:
    """ "<arch> <kind> <sha256>" of one extracted cubin or PTX, over its code only."""
    arch, kind = _arch_and_kind(part)
    digest = hashlib.sha256()
    if kind == "cubin":
        for name, data in code_sections(part.read_bytes()):
            digest.update(name.encode() + b"\0" + data + b"\0")
    else:
        digest.update(_PTX_NOISE.sub("", part.read_text(errors="replace")).encode())
    return f"{arch} {kind} {digest.hexdigest()}"


def _arch_and_kind(part: Path) -> tuple[str, str]:
    """`add_one.sm_90a.cubin` -> ("sm_90a", "cubin"): the source's name is left out."""
    *_, arch, kind = part.name.split(".")
    return arch, kind


def code_sections(elf: bytes) -> list[tuple[str, bytes]]:
    """The (name, bytes) of each section of a 64-bit little-endian ELF (what cubins are) that is
    code or data the GPU uses, in the file's order; debug sections and the toolkit note left
    out."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise IdentityError("not a 64-bit little-endian ELF")
    (table,) = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, table + i * entry_size) for i in range(count)]
    names_offset = headers[names_index][4]

    def name_of(offset: int) -> str:
        start = names_offset + offset
        return elf[start : elf.index(b"\0", start)].decode(errors="replace")

    sections = []
    for name_at, kind, _, _, offset, size, *_ in headers:
        name = name_of(name_at)
        if _NOT_CODE.search(name):
            continue
        sections.append((name, b"" if kind == _SHT_NOBITS else elf[offset : offset + size]))
    return sections
