"""Confining a process's file system access with Landlock: what a spec's process, or nvcc, may
read and write.

A spec is the user's Python, imported in processes of its own (its declaration, its check, its
GPU worker, its sanitized case). Confined, such a process cannot write the compile cache, the
reports or the project: what the harness trusts stays the harness's.
Landlock is the Linux kernel's own sandbox for unprivileged processes (5.13 and later); a
process confines itself, irrevocably, and its children inherit the confinement.

Landlock grants access by trees: a right given to a folder holds for everything beneath it. A
tree to keep out of a write grant (the cache inside a temporary folder) is carved out by
granting each of its ancestors' other entries instead; what an ancestor holds later, created
after the confinement, it does not grant. Reads are never carved so: a worker confined before
the compile must read the builds made after it.

    python -m harness.sandbox '<confinement as JSON>' -- program [args...]

runs a program confined (nvcc, for one build); `confined()` makes that command line.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# The system call numbers are one table on every architecture (they came after the tables
# were unified).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Landlock's file system rights (linux/landlock.h)
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_MAKE_DIR = 1 << 7
_REFER = 1 << 13  # ABI 2: link or rename across folders
_TRUNCATE = 1 << 14  # ABI 3
_WRITE = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | _REFER | _TRUNCATE
# The rights that mean something on a file that is not a folder
_FILE_RIGHTS = _WRITE_FILE | _READ_FILE | _TRUNCATE


class SandboxUnavailable(Exception):
    """This process cannot be confined here; the message says why."""


@dataclass(frozen=True)
class Confinement:
    """What a confined process may do with files. `readable`: the trees it may read (None:
    every file); `writable`: the trees it may write in (create, change, remove); `read_only`:
    trees inside `writable` it may still read but not write; `own`: trees it may write even
    inside a `read_only` one (a worker's folder for what it offers to the cache)."""

    readable: tuple[Path, ...] | None
    writable: tuple[Path, ...]
    read_only: tuple[Path, ...] = ()
    own: tuple[Path, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "readable": None if self.readable is None else [str(p) for p in self.readable],
                "writable": [str(p) for p in self.writable],
                "read_only": [str(p) for p in self.read_only],
                "own": [str(p) for p in self.own],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Confinement:
        data = json.loads(text)
        readable = data["readable"]
        return cls(
            readable=None if readable is None else tuple(map(Path, readable)),
            writable=tuple(map(Path, data["writable"])),
            read_only=tuple(map(Path, data.get("read_only", ()))),
            own=tuple(map(Path, data.get("own", ()))),
        )


def scratch_folders() -> tuple[Path, ...]:
    """Where a process may keep scratch files: the temporary folders, shared memory, the
    devices (a GPU is opened for writing), and its user's home (the CUDA JIT cache, cupy's and
    triton's caches live there)."""
    places = [Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp"), Path("/dev")]
    if os.environ.get("CUDA_CACHE_PATH"):
        places.append(Path(os.environ["CUDA_CACHE_PATH"]))
    places.append(Path.home())
    return tuple(dict.fromkeys(places))


def for_specs(protected: Sequence[Path]) -> Confinement:
    """A spec's process: it reads what it likes, and writes scratch folders only, never inside
    `protected` (the project, the compile cache, the reports)."""
    return Confinement(readable=None, writable=scratch_folders(), read_only=tuple(protected))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """Landlock's ABI version here; SandboxUnavailable with why where it has none."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"Landlock is Linux's; this is {sys.platform}")
    libc = _libc()
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    if version >= 1:
        return int(version)
    code = ctypes.get_errno()
    if code == errno.ENOSYS:
        why = "this kernel has no Landlock (Linux 5.13 or later has it)"
    elif code == errno.EOPNOTSUPP:
        why = "Landlock is built in but not enabled (the kernel's lsm= list lacks it)"
    elif code == errno.EPERM:
        why = "a seccomp filter (a container's, say) refuses Landlock's system calls"
    else:
        why = f"landlock_create_ruleset failed: {os.strerror(code)}"
    raise SandboxUnavailable(why)


def unavailable() -> str | None:
    """None where this process could be confined, else why not."""
    try:
        abi_version()
    except SandboxUnavailable as error:
        return str(error)
    return None


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _real(path: Path) -> Path:
    """`path` with its links resolved; a path that does not exist yet stands for its nearest
    existing folder, which then holds whatever will be made there."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path.resolve()


def grants(root: Path, carved: Sequence[Path]) -> Iterator[Path]:
    """The paths whose trees together are `root`'s tree without the `carved` trees: `root`
    itself where none is inside it, else each entry of it, carved in turn. A link among the
    entries that leads into or around a carved tree is left out, not followed."""
    root = root.resolve()
    if any(root.is_relative_to(c) for c in carved):  # itself carved, or inside a carved tree
        return
    if not any(c.is_relative_to(root) for c in carved):
        yield root
        return
    try:
        entries = sorted(root.iterdir())
    except OSError:  # unreadable: nothing of it is granted
        return
    for entry in entries:
        try:
            real = entry.resolve()
        except (OSError, RuntimeError):
            continue
        near = any(c == real or c.is_relative_to(real) or real.is_relative_to(c) for c in carved)
        if entry.is_symlink() and near:
            continue
        if entry.is_symlink():
            yield real
        else:
            yield from grants(entry, carved)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # gone, or unreachable: nothing to grant
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        if not rights:
            return
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            code = ctypes.get_errno()
            raise SandboxUnavailable(f"landlock_add_rule on {path}: {os.strerror(code)}")
    finally:
        os.close(fd)


def confine(confinement: Confinement) -> None:
    """Confine this process (and every process it starts) to `confinement`, irrevocably;
    SandboxUnavailable, with why, where Landlock cannot."""
    abi = abi_version()
    write = _WRITE
    if abi < 2:
        write &= ~_REFER
    if abi < 3:
        write &= ~_TRUNCATE
    handled = write | _READ_FILE
    kept_from_writes = [_real(p) for p in confinement.read_only]
    libc = _libc()
    ruleset = libc.syscall(
        _CREATE_RULESET,
        ctypes.byref(_RulesetAttr(handled)),
        ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)),
        0,
    )
    if ruleset < 0:
        raise SandboxUnavailable(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        readable = confinement.readable if confinement.readable is not None else (Path("/"),)
        for root in readable:
            _add_rule(libc, ruleset, _real(root), _READ_FILE)
        for root in confinement.writable:
            if not os.path.exists(root):
                continue  # granting its nearest folder would grant far more than asked
            for path in grants(_real(root), kept_from_writes):
                _add_rule(libc, ruleset, path, write | _READ_FILE)
        for root in confinement.read_only:  # carved out of the writes, not of the reads
            _add_rule(libc, ruleset, _real(root), _READ_FILE)
        for root in confinement.own:  # a rule of its own: Landlock grants what any rule does
            if os.path.exists(root):
                _add_rule(libc, ruleset, _real(root), write | _READ_FILE)
        # Its own /proc entry, resolved now to this process's id: the CUDA driver names each
        # thread it starts in /proc/self/task/<tid>/comm, and cuInit fails where it cannot.
        own = Path("/proc/self")
        if own.exists():
            _add_rule(libc, ruleset, own.resolve(), write | _READ_FILE)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxUnavailable(f"no_new_privs: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise SandboxUnavailable(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def confined(confinement: Confinement, argv: Sequence[str]) -> list[str]:
    """An argv that runs `argv` confined: this file, run by this Python in isolated mode (it
    needs nothing but the standard library), confines itself and becomes the program."""
    return [sys.executable, "-I", str(Path(__file__).resolve()), confinement.to_json(), "--", *argv]


def main(argv: list[str]) -> int:
    """`<confinement JSON> -- program [args...]`: the program, run confined."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m harness.sandbox '<confinement JSON>' -- program [args...]")
        return 2
    try:
        confine(Confinement.from_json(argv[0]))
    except SandboxUnavailable as error:
        print(f"harness.sandbox: cannot confine {argv[2]}: {error}", file=sys.stderr)
        return 126
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
