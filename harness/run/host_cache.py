"""A case's host work kept across runs: its problem and reference, served while nothing they
were made of changed.

setup() and reference() are the spec's Python, given the case, a generator of the case's fixed
seed (harness.run.case: seed_of, fresh_seed_of) and what setup() asks of the GPU. Made again,
they make the same arrays, as long as they read the same: the proof is the CPU check's
(harness.run.check_cache). While a worker makes a case's host work, it records on that thread
what the code reads (ReadRecorder: files, listings, modules, environment variables, fresh
entropy drawn, files written) and what it asks of the device (FactLog over the GPU). An entry is
served only while every file read is as it was, every question is answered alike by the GPU of
the run (an occupancy by the build the case runs now), and the interpreter is the same. Work
that drew fresh entropy or wrote a file is never kept.

Who writes what. A worker runs its kernel's spec, which could do anything the worker can, so it
never writes the cache (harness.sandbox keeps it out). Each worker is given a folder of its own
to offer host work in, which no other worker may write (its confinement's `own`), and names
what it wrote there in its reply (an Offer). The run's process, which knows whose folder that
is, moves the file (a plain file of one name: no other process holds a link to it) into the
kernel's folder of the cache and writes the entry's record, signed with the compile cache's MAC
over the kernel's folder: a record moved to another kernel's folder, changed, or not the
harness's is a miss. Where specs run unconfined, nothing keeps one from writing another's
folder, as nothing keeps it from the cache itself (docs/security.md).

A worker serves an entry by mapping its data, copy on write: pages the page cache holds cost no
copy, and nothing the run writes into an array reaches the file.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import mmap
import os
import pickle
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.model.spec import Problem
from harness.run.check_cache import (
    Fingerprints,
    Heard,
    ReadRecorder,
    Reads,
    entry_mac,
    mac_key_of,
    signed_record,
    write_whole,
)
from harness.run.stand_in import LIMITS, facts_hold

FOLDER = "host"  # under the compile cache folder
OFFERS = "host-offers"  # beside it: each run's workers' folders, removed as the run ends
STALE_OFFERS_S = 6 * 3600  # a run's offer folder untouched this long was left by a killed run
FORMAT = "host-work/1"
MAC_DOMAIN = b"cuda-matrix host work"  # no check answer's or compile entry's MAC reads alike
MOST_FACT_SETS = 4  # the entries of a case kept and looked at, newest first
# Host work made faster is made again: looking an entry up and checking what it read (a worker's
# installed modules by stat, its files by content) took ~50 ms a case on an H200 machine
MIN_MADE_S = 0.1
ALIGN = 64  # each array's offset in an entry's data: a cache line, and numpy's widest SIMD
KEEP_FREE_BYTES = 4 << 30  # what an offer or a copy leaves free on its file system
_OFFER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.bin")


def host_key(spec_folder: Path, case: str, seed: int, confinement: str | None) -> str:
    """What names a case's entries: its kernel, the case, the seed its inputs are drawn from,
    how its worker is confined, and the interpreter (a venv, an import path, each its own)."""
    material = {
        "format": FORMAT,
        "kernel": str(spec_folder),
        "case": case,
        "seed": seed,
        "confinement": confinement,
        "python": [sys.version, sys.prefix, sys.path],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Kept:
    """A case's host work as made or as served: its problem, its reference, and the seconds
    setup() and reference() took when they ran."""

    problem: Problem
    expected: Mapping[str, np.ndarray]
    setup_s: float
    reference_s: float


@dataclass(frozen=True)
class Offer:
    """Host work a worker wrote to be kept: `file`, a name in its offer folder; the data's
    size; and the entry's record but for those (layout, reads, facts, seconds)."""

    key: str
    file: str
    size: int
    record: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "file": self.file,
            "size": self.size,
            "record": dict(self.record),
        }

    @classmethod
    def from_json(cls, data: Any) -> Offer:
        """ValueError where `data` is not an offer: a worker may say anything."""
        if not isinstance(data, dict):
            raise ValueError(f"an offer is a {type(data).__name__}")
        key, file, size, record = (data.get(name) for name in ("key", "file", "size", "record"))
        if not (isinstance(key, str) and re.fullmatch(r"[0-9a-f]{40}", key)):
            raise ValueError("an offer's key is malformed")
        if not (isinstance(file, str) and _OFFER_NAME.fullmatch(file)):
            raise ValueError(f"an offer names {file!r}, not a file of its folder")
        if not (isinstance(size, int) and not isinstance(size, bool) and size > 0):
            raise ValueError("an offer's size is malformed")
        if not isinstance(record, dict):
            raise ValueError("an offer's record is malformed")
        return cls(key, file, size, record)


class LiveDevice:
    """The GPU a worker runs on, as FactLog asks it: its limits, and an entry's occupancy in
    the build the case runs (`occupancy(entry, threads, shmem_bytes)`)."""

    def __init__(self, limits: Mapping[str, Any], occupancy: Callable[[str, int, int], int]):
        self.limits = dict(limits)
        self.occupancy = occupancy

    def answer(self, question: Any) -> Any:
        """ValueError where `question` is not one setup() asks: a kept entry may say anything."""
        if not isinstance(question, list | tuple) or not question:
            raise ValueError(f"not a question: {question!r}")
        kind, *args = question
        if kind == "limit" and len(args) == 1 and args[0] in LIMITS:
            return self.limits[args[0]]
        if kind == "blocks_per_sm" and len(args) == 4:
            _, entry, threads, shmem = args  # the build is the case's own
            if isinstance(entry, str) and all(_whole(n) for n in (threads, shmem)):
                return int(self.occupancy(entry, threads, shmem))
        raise ValueError(f"not a question setup() asks: {question!r}")

    def blocks_per_sm_unnoted(
        self, defines: tuple[str, ...], entry: Any, threads: Any, shmem_bytes: Any
    ) -> int:
        return int(self.occupancy(entry, threads, shmem_bytes))


class HostCache:
    """In a GPU worker: the entries of its kernel's cases it may serve, and the offers of host
    work it made. One per worker process."""

    def __init__(
        self, cache_dir: Path, offers: Path, confinement: str | None, min_s_per_gib: float = 0.0
    ) -> None:
        """`offers`: the folder the run reads offers from; `confinement`: the worker's, as JSON;
        `min_s_per_gib`: host work that took less to make, for each GiB it holds, is not
        offered (served from the page cache or a disk, it would save less than writing and
        copying it costs)."""
        self.folder = Path(cache_dir) / FOLDER
        self.cache_dir = Path(cache_dir)
        self.offer_folder = Path(offers)
        self.confinement = confinement
        self.min_s_per_gib = min_s_per_gib
        self.recorder = ReadRecorder()
        self._files = Fingerprints()
        self._writer = concurrent.futures.ThreadPoolExecutor(1, initializer=self.recorder.quiet)
        self._written: list[concurrent.futures.Future[Offer | None]] = []
        self._lock = threading.Lock()
        self._mac_key: bytes | None = None
        self._imported = Reads((), (), {}, False, False)

    def start(self) -> None:
        """Hooks in, from now on; the calling thread's reads are the harness's."""
        self.recorder.install()
        self.recorder.quiet()

    def imported(self, heard: Heard) -> None:
        """What importing the kernel's spec read: a file its module loads is read by every
        case's host work that uses what it loaded."""
        self._imported = self._imported.merged(heard.reads())

    def key(self, spec_folder: Path, case: str, seed: int) -> str:
        return host_key(spec_folder, case, seed, self.confinement)

    def _key_of_mac(self) -> bytes | None:
        if self._mac_key is None:
            self._mac_key = mac_key_of(self.cache_dir)
        return self._mac_key

    def served(self, classname: str, key: str, device: LiveDevice) -> Kept | None:
        """The newest kept entry of `key` that stands; None where none does. One unreadable,
        malformed, not the harness's or not this kernel's is a miss."""
        mac_key = self._key_of_mac()
        if mac_key is None:
            return None
        try:
            found = self.folder.joinpath(classname).glob(f"{key}-*.json")
            records = sorted(found, key=_modified, reverse=True)[:MOST_FACT_SETS]
        except OSError:
            return None
        for path in records:
            record = signed_record(mac_key, MAC_DOMAIN, FORMAT, path)
            if record is None:
                continue
            if not (
                facts_hold(device, record.get("facts"))
                and self._files.stand(
                    record.get("files"), record.get("installed"), record.get("environ")
                )
            ):
                continue
            kept = _mapped(path.parent / str(record.get("data")), record)
            if kept is not None:
                return kept
        return None

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[Heard]]:
        """What the calling thread's code reads meanwhile: the one Heard in the list, once out."""
        heard: list[Heard] = []
        self.recorder.begin()
        try:
            yield heard
        finally:
            heard.append(self.recorder.end())

    def offer(self, key: str, kept: Kept, heard: Heard, facts: list[Any]) -> None:
        """Write `kept` to the offer folder, beside the worker's other work, where it is worth
        keeping (it took MIN_MADE_S or more, and min_s_per_gib for each GiB it holds), with
        what it read as it is now and what it asked of the GPU. Nothing where it drew fresh
        entropy, wrote a file, or cannot be pickled; offers() says what was written."""
        made_s, size = kept.setup_s + kept.reference_s, _held_bytes(kept)
        if made_s < MIN_MADE_S or made_s < self.min_s_per_gib * size / 2**30:
            return
        state = self._files.now(heard.reads().merged(self._imported))
        if state is None:
            return
        record = {
            "format": FORMAT,
            **state,
            "facts": facts,
            "setup_s": round(kept.setup_s, 6),
            "reference_s": round(kept.reference_s, 6),
        }
        written = self._writer.submit(self._write, key, kept, record)
        with self._lock:
            self._written.append(written)

    def offers(self) -> list[dict[str, Any]]:
        """The offers written since the last call, each once it is whole, as JSON."""
        with self._lock:
            written, self._written = self._written, []
        return [offer.to_json() for future in written if (offer := future.result()) is not None]

    def _write(self, key: str, kept: Kept, record: dict[str, Any]) -> Offer | None:
        buffers: list[pickle.PickleBuffer] = []
        # of the outputs only their shapes and types matter: allocated again, never kept
        shapes = {name: _shape_of(array) for name, array in kept.problem.outputs.items()}
        problem = dataclasses.replace(kept.problem, outputs={})
        try:
            pickled = pickle.dumps(
                (problem, shapes, dict(kept.expected)), protocol=5, buffer_callback=buffers.append
            )
            raws = [buffer.raw() for buffer in buffers]
        except Exception:  # what the spec put in its problem: not all of it pickles
            return None
        chunks, size = [(memoryview(pickled), 0)], _aligned(len(pickled))
        for raw in raws:
            chunks.append((raw, size))
            size = _aligned(size + raw.nbytes)
        layout = [[at, raw.nbytes] for raw, at in chunks[1:]]
        if not _room_for(self.offer_folder, size):
            return None
        name = f"{key}-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}.bin"
        try:
            with open(self.offer_folder / name, "xb") as data:
                for chunk, at in chunks:
                    data.write(b"\0" * (at - data.tell()))
                    data.write(chunk)
                data.write(b"\0" * (size - data.tell()))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(self.offer_folder / name)
            return None
        record["layout"] = {"pickle": len(pickled), "buffers": layout}
        return Offer(key, name, size, record)


def adopt(cache_dir: Path, offers: Path, classname: str, offer: Offer) -> Path | None:
    """Keep `offer`, made by the worker of `classname` whose own folder is `offers` (no other
    worker can write there): its data moved into the kernel's folder of the cache, then its
    record, signed. The record's path; None where it is not kept (no key to sign with, no
    room, a file not as the offer says, or not a plain file of one name). The offered file
    is gone either way."""
    source = offers / offer.file
    try:
        mac_key = mac_key_of(cache_dir)
        folder = Path(cache_dir) / FOLDER / classname
        if mac_key is None or not _room_for(Path(cache_dir), offer.size):
            return None
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / f"{offer.key}-{secrets.token_hex(8)}.bin"
        if not _moved(source, data, offer.size):
            return None
        record = {**offer.record, "data": data.name, "size": offer.size, "format": FORMAT}
        said = json.dumps(record.get("facts"), sort_keys=True)
        stem = f"{offer.key}-{hashlib.sha256(said.encode()).hexdigest()[:16]}"
        record["mac"] = entry_mac(mac_key, MAC_DOMAIN, f"{classname}/{stem}", record)
        write_whole(folder / f"{stem}.json", json.dumps(record).encode())
        _prune(folder, offer.key)
        return folder / f"{stem}.json"
    except (OSError, TypeError, ValueError):  # a record JSON cannot hold: the worker's word
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(source)


def _moved(source: Path, target: Path, size: int) -> bool:
    """`source`, a plain file of `size` bytes and one name, moved to `target` (copied where
    they lie on two file systems); False, and nothing at `target`, where it is not one."""
    status = os.lstat(source)
    if not (stat.S_ISREG(status.st_mode) and status.st_nlink == 1 and status.st_size == size):
        return False
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        scratch = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, scratch, follow_symlinks=False)
        os.replace(scratch, target)
    status = os.lstat(target)
    if stat.S_ISREG(status.st_mode) and status.st_nlink == 1 and status.st_size == size:
        return True
    target.unlink()
    return False


def _prune(folder: Path, key: str) -> None:
    """Of `key`'s entries, the newest MOST_FACT_SETS records, and the data they name."""
    records = sorted(folder.glob(f"{key}-*.json"), key=_modified, reverse=True)
    for old in records[MOST_FACT_SETS:]:
        with contextlib.suppress(OSError):
            old.unlink()
    named = set()
    for kept in records[:MOST_FACT_SETS]:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            named.add(str(json.loads(kept.read_text()).get("data")))
    for data in folder.glob(f"{key}-*.bin"):
        if data.name not in named:
            with contextlib.suppress(OSError):
                data.unlink()


def _mapped(path: Path, record: Mapping[str, Any]) -> Kept | None:
    """The entry's problem and reference, their arrays over its data mapped copy on write;
    None where the data is not as its record says."""
    layout, size = record.get("layout"), record.get("size")
    setup_s, reference_s = record.get("setup_s"), record.get("reference_s")
    if not (
        isinstance(layout, dict)
        and _whole(size)
        and isinstance(setup_s, float | int)
        and isinstance(reference_s, float | int)
    ):
        return None
    pickled, places = layout.get("pickle"), layout.get("buffers")
    if not (_whole(pickled) and isinstance(places, list)):
        return None
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_size != size or size == 0:
            return None
        view = memoryview(mmap.mmap(handle, size, access=mmap.ACCESS_COPY))
    except (OSError, ValueError):
        return None
    finally:
        os.close(handle)
    try:
        buffers = []
        for place in places:
            at, length = place
            if not (_whole(at) and _whole(length) and at + length <= size):
                return None
            buffers.append(view[at : at + length])
        if pickled > size:
            return None
        problem, shapes, expected = pickle.loads(view[:pickled], buffers=buffers)
        outputs = {
            name: np.empty(shape, dtype, order) for name, (shape, dtype, order) in shapes.items()
        }
    except Exception:  # unpickling what the record names may raise anything
        return None
    if not (
        isinstance(problem, Problem)
        and isinstance(expected, dict)
        and all(isinstance(a, np.ndarray) for a in expected.values())
    ):
        return None
    problem = dataclasses.replace(problem, outputs=outputs)
    return Kept(problem, expected, float(setup_s), float(reference_s))


def _held_bytes(kept: Kept) -> int:
    """The bytes of the arrays an entry of `kept` holds: its outputs are only shapes."""
    problem = kept.problem
    held = [*problem.inputs.values(), *problem.scratch.values(), *problem.constants.values()]
    return sum(int(np.asarray(a).nbytes) for a in [*held, *kept.expected.values()])


def _shape_of(array: np.ndarray) -> tuple[tuple[int, ...], np.dtype[Any], str]:
    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
    return array.shape, array.dtype, order


def _worth(record: Mapping[str, Any], size: int) -> float:
    """The seconds host work took to make for each GiB it holds: what keeping it saves."""
    seconds = [record.get("setup_s"), record.get("reference_s")]
    if not all(isinstance(s, int | float) and math.isfinite(s) and s >= 0 for s in seconds):
        return 0.0
    return sum(float(s) for s in seconds if s is not None) / max(size / 2**30, 1e-9)


def _room_for(place: Path, size: int) -> bool:
    """Whether `size` more bytes leave KEEP_FREE_BYTES free where `place` lies."""
    try:
        return shutil.disk_usage(place).free - size >= KEEP_FREE_BYTES
    except OSError:
        return False


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _modified(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


class Keeping:
    """In the run's process: the host work its workers offer, each worker in a folder of its
    own (folder()), adopted on threads of their own while the run goes on, within `max_bytes`
    for the whole host cache: an offer that does not fit takes the place of entries worth less
    (fewer seconds of host work saved for each GiB they hold), or is dropped. close() waits for
    the adoptions and removes the folders."""

    def __init__(self, cache_dir: Path, max_bytes: int) -> None:
        self.cache_dir, self.max_bytes = Path(cache_dir), max_bytes
        self._copies = concurrent.futures.ThreadPoolExecutor(2)
        self._lock = threading.Lock()
        self._held: dict[Path, tuple[int, float]] | None = None  # each record: size, worth
        self._root: Path | None = None  # this run's offer folders, beside the cache's
        self._folders = 0

    def folder(self) -> Path | None:
        """A new folder for one worker's offers (its confinement's own), on the cache's file
        system, so that a kept offer is moved, not copied; None where none can be made."""
        try:
            with self._lock:
                if self._root is None:
                    (self.cache_dir / OFFERS).mkdir(parents=True, exist_ok=True)
                    _sweep(self.cache_dir / OFFERS)
                    self._root = Path(tempfile.mkdtemp(dir=self.cache_dir / OFFERS))
                self._folders += 1
                made = self._root / str(self._folders)
            made.mkdir()
        except OSError:
            return None
        return made

    def take(self, classname: str, folder: Path, said: object) -> None:
        """What the worker of `classname` whose folder is `folder` said it offers; what is not
        an offer is dropped."""
        for each in said if isinstance(said, list) else []:
            try:
                offer = Offer.from_json(each)
            except ValueError:
                continue
            self._copies.submit(self._adopt, classname, folder, offer)

    def _adopt(self, classname: str, folder: Path, offer: Offer) -> None:
        worth = _worth(offer.record, offer.size)
        with self._lock:
            room = self._make_room(offer.size, worth)
            if room:  # held now: a second adoption at once counts it too
                self._held_now()[folder / offer.file] = (offer.size, worth)
        if not room:
            with contextlib.suppress(OSError):
                os.unlink(folder / offer.file)
            return
        record = adopt(self.cache_dir, folder, classname, offer)
        with self._lock:
            held = self._held_now()
            held.pop(folder / offer.file, None)
            if record is not None:
                held[record] = (offer.size, worth)

    def _held_now(self) -> dict[Path, tuple[int, float]]:
        """Each record the cache holds, with its data's size and its worth (read once)."""
        if self._held is None:
            self._held = {}
            for record in (self.cache_dir / FOLDER).glob("*/*.json"):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    said = json.loads(record.read_text())
                    size = said.get("size")
                    if _whole(size):
                        self._held[record] = (size, _worth(said, size))
        return self._held

    def _make_room(self, size: int, worth: float) -> bool:
        """Whether `size` bytes worth `worth` fit, entries worth less removed where they must."""
        held = self._held_now()
        for gone in [record for record in held if not record.exists()]:
            del held[gone]  # replaced or removed since
        total = sum(bytes_ for bytes_, _ in held.values())
        cheaper = sorted(  # of what is kept: an offer being copied stays
            (w, record) for record, (_, w) in held.items() if w < worth and record.suffix == ".json"
        )
        freed = sum(held[record][0] for _, record in cheaper)
        if total + size - freed > self.max_bytes:
            return False
        for _, record in cheaper:
            if total + size <= self.max_bytes:
                break
            total -= held.pop(record)[0]
            _remove_entry(record)
        return True

    def close(self) -> None:
        self._copies.shutdown(wait=True)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Keeping:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sweep(offers: Path) -> None:
    """The offer folders of runs that were killed: untouched for STALE_OFFERS_S, no run still
    writes them (a case times out long before)."""
    now = time.time()
    for left in offers.iterdir():
        with contextlib.suppress(OSError):
            if now - left.lstat().st_mtime > STALE_OFFERS_S and left.is_dir():
                shutil.rmtree(left, ignore_errors=True)


def _remove_entry(record: Path) -> None:
    """A record and the data it names (an offer's file, held while it is copied, has none)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if record.suffix == ".json":
            data = str(json.loads(record.read_text()).get("data"))
            if _OFFER_NAME.fullmatch(data):
                record.with_name(data).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        if record.suffix == ".json":
            record.unlink()
