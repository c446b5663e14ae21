"""CPU check answers kept beside the compile cache, served while nothing the check read changed.

A kernel's check on the CPU (harness.run.spec_check) is a function of how its spec's child was
confined, of the interpreter it ran in (its version, installation and import path), of what it
asked of the device it stands in for (harness.run.stand_in: each DeviceLimits field it read, each
occupancy it asked, whether the binary has an entry, whether shared memory fits), and of what it
read: its spec.py, the modules the spec imports (the harness's own among them), the files it
opens, the folders it lists and the environment variables it looks up. The child records those as
it runs (ReadRecorder: an audit hook on opens and listings, sys.modules' files at the end;
FactLog: each question to the device, with its answer); the run keeps an answer with no finding
under `<cache>/checks/<kernel>/<key>-<facts>.json`, each file it read with its SHA-256 (a package
of the installation: each module file's size and time, as pip leaves them) and each question with
its answer, and serves it on a later run, of this target or another, only while every file is as
it was and every question is answered alike: a spec that never reads the device is checked once
for all targets, one that sizes its grid by the SM count once per stand-in. An answer whose check
drew fresh entropy (its own unseeded RNG, os.urandom) is never kept; the check's own inputs come
from a fixed seed. Nor is one that wrote a file: where it may write is the one thing that differs
between runs confined alike (each protects its own reports and cache folders), so a check that
writes nothing answers the same under any of them, and the key leaves those folders out.

Entries carry the compile cache's MAC (HMAC-SHA256, keyed by the cache's key, over where the
entry lies and what it says): one a spec's child wrote, copied from another kernel, or that is
unreadable or malformed is a miss, and the kernel is checked again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import math
import os
import random
import site
import stat
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.model.errors import KernelFailed

FOLDER = "checks"  # under the compile cache folder
FORMAT = "check-cache/3"
MOST_FACT_SETS = 16  # the entries of a kernel looked at, newest first: a few targets' worth
MAC_DOMAIN = b"cuda-matrix check answer"  # no compile entry's MAC reads alike
UNUSABLE = "unusable"  # a device, a pipe: what it reads is not what a later read would be
HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # as modules name it
_WATCHED = frozenset({"open", "os.listdir", "os.scandir"})


def entry_key(spec_file: Path, confinement: str | None) -> str:
    """What names a kernel's entries: its spec, how its child is confined, and the interpreter
    it runs in (a venv, an import path, each its own entries)."""
    material = {
        "format": FORMAT,
        "spec": str(spec_file),
        "confinement": confinement,
        "python": [sys.version, sys.prefix, sys.path],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Reads:
    """What a spec's child read while its cases were checked: files and folders outside the
    interpreter's installation (the harness's included), module files of the installation's
    packages, environment variables (each by its value's SHA-256, None where unset), whether it
    drew fresh entropy, and whether it opened a file to write."""

    files: tuple[str, ...]
    installed: tuple[str, ...]
    environ: Mapping[str, str | None]
    drew_entropy: bool
    wrote: bool

    def merged(self, other: Reads) -> Reads:
        """What was read in both."""
        return Reads(
            tuple(sorted({*self.files, *other.files})),
            tuple(sorted({*self.installed, *other.installed})),
            {**other.environ, **self.environ},
            self.drew_entropy or other.drew_entropy,
            self.wrote or other.wrote,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "installed": list(self.installed),
            "environ": dict(self.environ),
            "drew_entropy": self.drew_entropy,
            "wrote": self.wrote,
        }

    @classmethod
    def from_json(cls, data: Any) -> Reads:
        """ValueError where `data` is not what a ReadRecorder sends."""
        if not isinstance(data, dict):
            raise ValueError(f"reads are a {type(data).__name__}")
        files, installed = _strings(data.get("files")), _strings(data.get("installed"))
        environ, drew, wrote = data.get("environ"), data.get("drew_entropy"), data.get("wrote")
        if not (isinstance(environ, dict) and _optional_strings(environ)):
            raise ValueError("the environment read is malformed")
        if not (isinstance(drew, bool) and isinstance(wrote, bool)):
            raise ValueError("whether it drew entropy or wrote is unsaid")
        return cls(files, installed, environ, drew, wrote)


class ReadRecorder:
    """What Python code reads, and whether it draws fresh entropy: each recording from its
    begin() to its end(), on the thread that began it. A read on a thread of no recording goes
    to every recording open (threads the recorded code starts), but on a thread said to be
    quiet() (the harness's own). Its hooks stay for the life of the process: a spec's child
    records once and exits; a GPU worker records each case's host work."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._open: list[Heard] = []
        self._quiet: set[int] = set()
        self._installed = False

    def start(self) -> None:
        """Record the whole process from now on: what finish() answers."""
        self.install()
        self.begin()

    def finish(self) -> Reads:
        return self.end().reads()

    def install(self) -> None:
        """The hooks, once: an audit hook on opens and listings, the environment's lookups, and
        the sources of entropy."""
        if self._installed:
            return
        self._installed = True
        sys.addaudithook(self._hear)
        self._watch_environ()
        self._watch_entropy()

    def quiet(self) -> None:
        """The calling thread's reads are nobody's, but those of a recording it begins."""
        self._quiet.add(threading.get_ident())

    def begin(self) -> None:
        """A recording on the calling thread; numpy's generators seed from entropy on import, so
        the states compared are the ones it begins with."""
        recording = Heard(_rng_states())
        self._open = [*self._open, recording]
        self._local.recording = recording

    def end(self) -> Heard:
        """What the calling thread's recording heard: its reads() say what that was."""
        recording: Heard = self._local.recording
        self._local.recording = None
        self._open = [open_ for open_ in self._open if open_ is not recording]
        return recording

    def _hearers(self) -> list[Heard]:
        own = getattr(self._local, "recording", None)
        if own is not None:
            return [own]
        return [] if threading.get_ident() in self._quiet else self._open

    def _hear(self, event: str, args: tuple[object, ...]) -> None:
        # an audit hook that raises breaks what was audited: it only notes, and only ours
        if event in _WATCHED and args:
            flags = args[2] if event == "open" and len(args) > 2 else None
            for recording in self._hearers():
                recording.heard.append((args[0], flags))

    def _watch_environ(self) -> None:
        """Each variable the check looks up, with the value it saw."""
        recorder = self

        class Recorded(os._Environ):  # type: ignore[type-arg]
            def __getitem__(self, name: str) -> str:
                try:
                    value: str = super().__getitem__(name)
                except KeyError:
                    recorder._saw_variable(name, None)
                    raise
                recorder._saw_variable(name, value)
                return value

            def __iter__(self) -> Any:
                for name in list(super().__iter__()):
                    _ = self[name]
                    yield name

        os.environ.__class__ = Recorded

    def _saw_variable(self, name: str, value: str | None) -> None:
        for recording in self._hearers():
            if name not in recording.environ:
                recording.environ[name] = None if value is None else _digest(value)

    def _watch_entropy(self) -> None:
        """os.urandom, and what draws on it through random (SystemRandom, secrets, numpy's
        unseeded generators); an unseeded random.Random; and the global RNGs' states."""
        urandom, seed = os.urandom, random.Random.seed

        def drawn(size: int) -> bytes:
            for recording in self._hearers():
                recording.drew_entropy = True
            return urandom(size)

        def seeded(rng: random.Random, a: Any = None, version: int = 2) -> None:
            if a is None:
                for recording in self._hearers():
                    recording.drew_entropy = True
            seed(rng, a, version)

        os.urandom = drawn
        setattr(random, "_urandom", drawn)  # noqa: B010 (a private name of random's)
        random.Random.seed = seeded  # type: ignore[method-assign,assignment]


class Heard:
    """What one recording heard: each path read with how it was opened, each variable looked
    up, whether entropy was drawn, and the global RNGs' states when it began."""

    def __init__(self, rng_states: tuple[object, bytes]) -> None:
        self.heard: list[tuple[object, object]] = []
        self.environ: dict[str, str | None] = {}
        self.drew_entropy = False
        self.rng_states = rng_states

    def reads(self) -> Reads:
        """What was heard, and the modules loaded by now (they are read too): the work of
        sorting them is left until an answer is kept."""
        opened = [_readable_path(path, flags) for path, flags in self.heard]
        modules = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
        paths = {os.path.abspath(p) for p in [*opened, *modules] if isinstance(p, str) and p}
        files, installed = [], []
        places = _Places.here()
        for path in sorted(paths):
            place = places.of(path)
            if place == "files" and not _derived(path):
                files.append(path)
            elif place == "installed":
                installed.append(path)
        drew = self.drew_entropy or _rng_states() != self.rng_states
        wrote = any(_writes(flags) for _, flags in self.heard)
        return Reads(tuple(files), tuple(installed), dict(self.environ), drew, wrote)


def _rng_states() -> tuple[object, bytes]:
    """The states of random's and numpy's global generators: a draw changes them."""
    legacy = np.random.get_state(legacy=True)
    assert isinstance(legacy, tuple)
    _, key, *rest = legacy
    return random.getstate(), np.asarray(key).tobytes() + repr(rest).encode()


def _readable_path(path: object, flags: object) -> str | None:
    """The path an open or a listing read; None where it wrote only, or named a descriptor."""
    if isinstance(flags, int) and flags & os.O_ACCMODE == os.O_WRONLY:
        return None
    if isinstance(path, str | bytes | os.PathLike):
        with contextlib.suppress(TypeError, ValueError):
            return os.fsdecode(path) or "."
    return None


def _writes(flags: object) -> bool:
    """Whether an open's flags ask to write (a listing has none)."""
    return isinstance(flags, int) and flags & os.O_ACCMODE != os.O_RDONLY


def _derived(path: str) -> bool:
    """A compiled module in __pycache__: its source is read too, and it is rewritten at will."""
    return os.path.basename(os.path.dirname(path)) == "__pycache__"


@dataclass(frozen=True)
class _Places:
    """Where a read lies: the harness's own files and those outside the interpreter's
    installation ("files", by content); the installation's packages ("installed", by their
    files' stat); the interpreter's own library (its version says it)."""

    harness: str
    packages: tuple[str, ...]
    interpreter: tuple[str, ...]

    @classmethod
    def here(cls) -> _Places:
        bases = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
        packages = [*site.getsitepackages(), site.getusersitepackages()]
        for paths in (sysconfig.get_paths(), sysconfig.get_paths(vars=bases)):
            packages += [paths["purelib"], paths["platlib"]]
        interpreter = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
        return cls(_folder(HARNESS), _folders(packages), _folders(interpreter))

    def of(self, path: str) -> str | None:
        if path.startswith(self.harness):
            return "files"
        if path.startswith(self.packages):
            return "installed"
        return None if path.startswith(self.interpreter) else "files"


def _folder(path: str | Path) -> str:
    return os.path.join(os.path.abspath(path), "")


def _folders(paths: Sequence[str | Path]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_folder(path) for path in paths if path))


class CheckCache:
    """The check answers kept in a compile cache folder. One per run: it hashes each file once
    for as long as its stat stays the same."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = Path(cache_dir)
        self.folder = self.cache_dir / FOLDER
        self._files = Fingerprints()

    @functools.cached_property
    def _mac_key(self) -> bytes | None:
        return mac_key_of(self.cache_dir)

    def served(
        self,
        classname: str,
        key: str,
        cases: Sequence[str],
        budget_s: float,
        hold: Callable[[Any], bool],
    ) -> dict[str, str | None] | None:
        """Each case's note (how far it was checked, where the device would skip it) from a
        kept answer of `classname`'s check under `key` that stands: each of `cases` without a
        finding, checked within `budget_s`, everything the check read as it was, and
        `hold(facts)` true of what it asked of the device. None where none stands; an entry
        unreadable, malformed or not the harness's is a miss."""
        mac_key = self._mac_key
        if mac_key is None:
            return None
        try:  # the newest first: an entry is rewritten whenever its check runs again
            found = self.folder.joinpath(classname).glob(f"{key}-*.json")
            kept = sorted(found, key=_modified, reverse=True)
        except OSError:
            return None
        for path in kept[:MOST_FACT_SETS]:
            notes = self._stands(mac_key, path, cases, budget_s, hold)
            if notes is not None:
                return notes
        return None

    def _stands(
        self,
        mac_key: bytes,
        path: Path,
        cases: Sequence[str],
        budget_s: float,
        hold: Callable[[Any], bool],
    ) -> dict[str, str | None] | None:
        record = signed_record(mac_key, MAC_DOMAIN, FORMAT, path)
        if record is None:
            return None
        seconds, notes, files = record.get("cases"), record.get("notes"), record.get("files")
        installed, environ = record.get("installed"), record.get("environ")
        if not (
            isinstance(seconds, dict)
            and sorted(seconds) == sorted(cases)
            and all(_duration(s) for s in seconds.values())
            and sum(seconds.values()) <= budget_s
            and isinstance(notes, dict)
            and sorted(notes) == sorted(cases)
            and all(note is None or isinstance(note, str) for note in notes.values())
        ):
            return None
        stands = hold(record.get("facts")) and self._files.stand(files, installed, environ)
        return notes if stands else None

    def keep(
        self,
        classname: str,
        key: str,
        seconds: Mapping[str, float],
        notes: Mapping[str, str | None],
        reads: Reads,
        facts: list[Any],
    ) -> None:
        """The answer of a check that found nothing (each case's `seconds`, and its `notes`:
        how far it was checked, where the device would skip it), kept with what it read as it
        is now and what it asked of the device (`facts`, [question, answer] each). Not kept
        where the check drew fresh entropy, wrote a file or read a device, nor where the cache
        cannot be written (the answer stands; the next run checks again)."""
        mac_key = self._mac_key
        state = self._files.now(reads)
        if mac_key is None or state is None:
            return
        record: dict[str, object] = {
            "format": FORMAT,
            "cases": dict(seconds),
            "notes": dict(notes),
            **state,
            "facts": facts,
        }
        try:
            said = json.dumps(facts, sort_keys=True)
        except (TypeError, ValueError):
            return
        path = self.folder / classname / f"{key}-{_digest(said)[:16]}.json"
        record["mac"] = entry_mac(mac_key, MAC_DOMAIN, f"{classname}/{path.stem}", record)
        with contextlib.suppress(OSError):
            write_whole(path, json.dumps(record).encode())


def signed_record(mac_key: bytes, domain: bytes, format_: str, path: Path) -> dict[str, Any] | None:
    """The record at `path` (`<folder>/<kernel>/<entry>.json`) where it is of `format_` and
    its MAC (entry_mac over `domain`, its kernel's folder and name) holds; None otherwise."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != format_:
        return None
    mac = record.get("mac")
    expected = entry_mac(mac_key, domain, f"{path.parent.name}/{path.stem}", record)
    if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
        return None
    return record


def mac_key_of(cache_dir: Path) -> bytes | None:
    """The compile cache's key; None where there is none to be had (nothing is served)."""
    # here, not above: every spec's child imports this module, and only the run needs nvcc's
    from harness.compile.nvcc import cache_mac_key

    try:
        return cache_mac_key(cache_dir)
    except (KernelFailed, OSError):
        return None


def write_whole(path: Path, data: bytes) -> None:
    """`data` under `path`, appearing whole or not at all (written aside, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as written:
            written.write(data)
        os.replace(scratch, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)


class Fingerprints:
    """What a kept answer read, as it is now: files by content (a folder by its names), the
    installation's module files by stat, variables by value. One per run or process: each
    file is hashed once for as long as its stat stays the same."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple[int, ...], str | None]] = {}
        self._installed: dict[str, str | None] = {}  # pip leaves them be while a run goes on

    def now(self, reads: Reads) -> dict[str, dict[str, str | None]] | None:
        """The "files", "installed" and "environ" an entry keeps of `reads`; None where it
        cannot be kept: it drew entropy, wrote, or read what cannot be read again alike."""
        if reads.drew_entropy or reads.wrote:
            return None
        try:  # what the recorded code read may name anything
            files = {path: self.of(path) for path in reads.files}
            installed = {path: self._signature(path) for path in reads.installed}
        except ValueError:  # a path no file can have (a NUL in it)
            return None
        if UNUSABLE in files.values():
            return None
        return {"files": files, "installed": installed, "environ": dict(reads.environ)}

    def _signature(self, path: str) -> str | None:
        if path not in self._installed:
            self._installed[path] = _stat_signature(path)
        return self._installed[path]

    def stand(self, files: object, installed: object, environ: object) -> bool:
        """Whether what an entry kept (as now() made it) is still so."""
        return (
            _each(files, self.of)
            and _each(installed, self._signature)
            and _each(environ, _environ_digest)
        )

    def of(self, path: str) -> str | None:
        """A file's SHA-256, a folder's names', UNUSABLE for anything else; None where there is
        nothing; hashed again when its stat changes."""
        try:
            handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:  # as the check found it: unreadable
            return f"error {error.errno}"
        try:
            status = os.fstat(handle)
            signature = (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
            known = self._known.get(path)
            if known is not None and known[0] == signature:
                return known[1]
            fingerprint = _fingerprint_of(handle, status.st_mode)
        except OSError as error:
            return f"error {error.errno}"
        finally:
            os.close(handle)
        self._known[path] = (signature, fingerprint)
        return fingerprint


def _fingerprint_of(handle: int, mode: int) -> str:
    if stat.S_ISDIR(mode):  # what a listing saw; __pycache__ comes and goes with imports
        names = sorted(name for name in os.listdir(handle) if name != "__pycache__")
        return "folder " + hashlib.sha256("\0".join(names).encode()).hexdigest()
    if not stat.S_ISREG(mode):
        return UNUSABLE
    digest = hashlib.sha256()
    with os.fdopen(os.dup(handle), "rb") as read:
        for block in iter(functools.partial(read.read, 1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _modified(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _stat_signature(path: str) -> str | None:
    """A module file of an installed package as pip leaves it: another version, or the same
    one installed again, is another size or time."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return f"{status.st_size} {status.st_mtime_ns}"


def _environ_digest(name: str) -> str | None:
    try:
        value = os.environ.get(name)
    except ValueError:  # a name no variable can have
        return UNUSABLE
    return None if value is None else _digest(value)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _each(kept: object, now: Callable[[str], str | None]) -> bool:
    """Whether `kept` maps names to what `now` still says of each."""
    return (
        isinstance(kept, dict)
        and _optional_strings(kept)
        and all(now(name) == value for name, value in kept.items())
    )


def entry_mac(key: bytes, domain: bytes, where: str, record: Mapping[str, object]) -> str:
    """As the compile cache's entry_mac: over the kind of entry (`domain`: no two kinds' MACs
    read alike), where it lies (`where`: its kernel's folder and name) and its fields."""
    fields = {name: value for name, value in record.items() if name != "mac"}
    mac = hmac.new(key, digestmod=hashlib.sha256)
    parts = [domain, where.encode(), json.dumps(fields, sort_keys=True).encode()]
    for part in parts:  # each with its length: no two splits of the bytes read alike
        mac.update(len(part).to_bytes(8, "little") + part)
    return mac.hexdigest()


def _duration(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _strings(value: object) -> tuple[str, ...]:
    """`value`, a list of strings; ValueError where it is not one."""
    if not isinstance(value, list) or not all(isinstance(each, str) for each in value):
        raise ValueError("a list of paths is malformed")
    return tuple(value)


def _optional_strings(mapping: Mapping[object, object]) -> bool:
    return all(
        isinstance(name, str) and (value is None or isinstance(value, str))
        for name, value in mapping.items()
    )
