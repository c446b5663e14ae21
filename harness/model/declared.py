"""What a kernel's spec declares, as plain data, read in a process of the spec's own.

The run's own process never imports a spec: a spec is Python, and in the process that forms the
verdicts it could replace the code that forms them, for every kernel. Each spec is imported in a
child forked for it alone, which sends back what the run needs of it (its source, requirement,
SASS demands, case names and sizes) as JSON, never as a pickle, and exits at once. Its name comes
from the spec file it was started for, so a spec that exits, hangs, or leaves a thread running at
import is named, and never another in its place. What a spec prints goes nowhere.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from harness.model.build_options import (
    LIBRARIES,
    define_flags,
    entry_problem,
    flag_problem,
    nvcc_flags,
    source_problem,
)
from harness.model.result import SpecError
from harness.processes import describe_exit
from harness.sandbox import Confinement, SandboxUnavailable, confine
from harness.spec import (
    BuildOptions,
    KernelSpec,
    Math,
    RequireAny,
    RequireArch,
    Requirement,
    RequireSm,
    Work,
)

# What a spec's child may send: a spec's cases at ~100 bytes each, 500k of them.
MAX_MESSAGE_BYTES = 64 << 20
# Modules every spec imports, loaded once into the process the children are forked from.
PRELOAD = ["numpy", "harness.model.discovery", "harness.vendor"]


@dataclass(frozen=True)
class DeclaredCase:
    """A case by name, and its size where work() says it without a device (else None)."""

    name: str
    work: Work | None
    defines: tuple[str, ...] = ()  # the case's own macros (-DNAME=VALUE): its build's


@dataclass(frozen=True)
class Declared:
    """What the stages before the GPU need of a spec, and nothing that runs its code."""

    source: str
    requires: Requirement | None
    sass_must_contain: tuple[str, ...]
    cases: tuple[DeclaredCase, ...]
    vendor: str | None  # the vendor library's name, as the report shows it
    preload: tuple[str, ...] = ()  # what the vendor imports: its worker imports it at start
    # what the spec puts on nvcc's command line (build_options.nvcc_flags), its standard first
    build: tuple[str, ...] = field(default_factory=lambda: nvcc_flags(BuildOptions()))
    entries: tuple[str, ...] = ()  # C++ entries the build instantiates and maps
    sources: tuple[str, ...] = ()  # more units, device-linked with the source
    libraries: tuple[str, ...] = ()  # what the device link takes: cudadevrt

    @classmethod
    def of(cls, spec: KernelSpec) -> Declared:
        return cls(
            source=spec.source,
            requires=spec.requires,
            sass_must_contain=tuple(spec.sass_must_contain),
            cases=tuple(
                DeclaredCase(case.name, _work_or_none(spec, case), define_flags(case.defines))
                for case in spec.cases
            ),
            vendor=spec.vendor.library if spec.vendor else None,
            preload=tuple(spec.vendor.preload) if spec.vendor else (),
            build=nvcc_flags(spec.build),
            entries=tuple(spec.entries),
            sources=tuple(spec.build.sources),
            libraries=tuple(spec.build.libraries),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "requires": _requirement_json(self.requires),
            "sass_must_contain": list(self.sass_must_contain),
            "cases": [
                {
                    "name": case.name,
                    "work": None
                    if case.work is None
                    else [case.work.bytes, case.work.flops, case.work.math.value],
                    "defines": list(case.defines),
                }
                for case in self.cases
            ],
            "vendor": self.vendor,
            "preload": list(self.preload),
            "build": list(self.build),
            "entries": list(self.entries),
            "sources": list(self.sources),
            "libraries": list(self.libraries),
        }

    @classmethod
    def from_json(cls, record: Any) -> Declared:
        """ValueError where `record` is not what to_json makes: it comes from a spec's process."""
        try:
            requires = _requirement_from(record["requires"])
            cases = []
            for case in _list(record["cases"]):
                work = None
                if case["work"] is not None:
                    size, flops, units = case["work"]
                    work = Work(_count(size), _count(flops), Math(units))
                defines = _defines_from(case.get("defines", []))
                cases.append(DeclaredCase(_str(case["name"]), work, defines))
            vendor = record["vendor"]
            return cls(
                source=_str(record["source"]),
                requires=requires,
                sass_must_contain=tuple(_str(op) for op in _list(record["sass_must_contain"])),
                cases=tuple(cases),
                vendor=None if vendor is None else _str(vendor),
                preload=tuple(_module_name(m) for m in _list(record["preload"])),
                build=_build_from(record.get("build", ["-std=c++17"])),
                entries=_entries_from(record.get("entries", [])),
                sources=_sources_from(record.get("sources", [])),
                libraries=_libraries_from(record.get("libraries", [])),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a spec's declaration: {type(error).__name__}: {error}") from None


def _strings(record: Any, problem: Callable[[str], str | None]) -> tuple[str, ...]:
    """A list of strings from a spec's process, each one `problem` finds none in."""
    values = tuple(_str(value) for value in _list(record))
    for value in values:
        if why := problem(value):
            raise ValueError(why)
    return values


def _entries_from(record: Any) -> tuple[str, ...]:
    return _strings(record, entry_problem)


def _defines_from(record: Any) -> tuple[str, ...]:
    def problem(flag: str) -> str | None:
        refused = not flag.startswith("-D") or flag_problem(flag)
        return f"case define {flag!r} refused" if refused else None

    return _strings(record, problem)


def _sources_from(record: Any) -> tuple[str, ...]:
    return _strings(record, source_problem)


def _libraries_from(record: Any) -> tuple[str, ...]:
    return _strings(
        record,
        lambda name: None if name in LIBRARIES else f"library {name!r} is not one of {LIBRARIES}",
    )


def _build_from(record: Any) -> tuple[str, ...]:
    flags = tuple(_list(record))
    for flag in flags:
        if why := flag_problem(flag):
            raise ValueError(why)
    if not flags or not flags[0].startswith("-std="):
        raise ValueError(f"build flags {flags!r} do not start with the standard")
    return flags


def _requirement_json(requires: Requirement | None) -> dict[str, Any] | None:
    if isinstance(requires, RequireSm):
        return {"sm": [requires.major, requires.minor]}
    if isinstance(requires, RequireArch):
        return {"arch": requires.arch}
    if isinstance(requires, RequireAny):
        return {"any": [_requirement_json(option) for option in requires.options]}
    return None


def _requirement_from(record: Any) -> Requirement | None:
    if record is None:
        return None
    if "sm" in record:
        major, minor = record["sm"]
        return RequireSm(_int(major), _int(minor))
    if "any" in record:
        options = [_requirement_from(option) for option in _list(record["any"])]
        if not options or not all(isinstance(o, RequireSm | RequireArch) for o in options):
            raise ValueError(f"not a list of requirements: {record['any']!r}")
        return RequireAny(tuple(options))  # type: ignore[arg-type]
    return RequireArch(_str(record["arch"]))


def _work_or_none(spec: KernelSpec, case: Any) -> Work | None:
    """work() where it answers with finite counts, 0 or more, before any device is known."""
    try:
        work = spec.work(case)
    except Exception:  # a param only setup() derives: the case's own cell says what it raised
        return None
    if not isinstance(work, Work) or not isinstance(work.math, Math):
        return None
    counts = (work.bytes, work.flops)
    if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in counts):
        return None
    if not all(math.isfinite(c) and c >= 0 for c in counts):
        return None
    return work


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a count, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a count, 0 or more, got {value!r}")
    return int(value)


def _module_name(value: Any) -> str:
    """A dotted module name: what a worker may import by it, and nothing else."""
    name = _str(value)
    if not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"{name!r} is not a module name")
    return name


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def read_all(
    spec_files: list[Path], timeout_s: float, confinement: Confinement | None = None
) -> dict[Path, Declared | SpecError]:
    """Each spec's declaration, read in a child of its own; SpecError naming the spec file
    where it cannot be used, the import's own failures included (it raised, exited, hung past
    `timeout_s`, or left a thread running)."""
    jobs = [(spec, None) for spec in spec_files]
    answers = in_spec_children(jobs, _declare, timeout_s, confinement=confinement)
    found: dict[Path, Declared | SpecError] = {}
    for spec_file, answer in answers.items():
        if isinstance(answer, SpecError):
            found[spec_file] = answer
            continue
        try:
            found[spec_file] = Declared.from_json(answer)
        except ValueError as error:
            found[spec_file] = SpecError(f"{spec_file}: its process sent {error}")
    return found


def _declare(spec_file: Path, _: None) -> Any:
    """In the spec's child: its declaration, as JSON."""
    from harness.model.discovery import KernelFolder, load_kernel

    return load_kernel(KernelFolder.of(spec_file)).declared.to_json()


def in_spec_children(
    jobs: list[tuple[Path, Any]],
    work: Callable[[Path, Any], Any],
    timeout_s: float,
    doing: str = "importing it",
    confinement: Confinement | None = None,
) -> dict[Path, Any]:
    """`work(spec_file, argument)` for each job, each in a child of that spec's own, at most a
    core's worth at once: what it returned (JSON), or a SpecError naming the spec file where
    it raised one, raised anything else, exited, hung past `timeout_s` or left a thread
    running; `doing` says what the child was doing in those messages. `work` must be a module's
    function (the child imports it by name), its argument and result plain JSON. Each child
    confines itself to `confinement` before it imports the spec (None: not confined)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    parallel = max(1, os.cpu_count() or 1)
    pending = list(jobs)
    running: list[_Child] = []
    found: dict[Path, Any] = {}
    try:
        while pending or running:
            while pending and len(running) < parallel:
                spec_file, argument = pending.pop(0)
                child = _Child.start(
                    context, spec_file, work, argument, timeout_s, doing, confinement
                )
                running.append(child)
            soonest = min(child.deadline for child in running)
            ready = wait(
                [child.conn for child in running] + [child.process.sentinel for child in running],
                timeout=max(soonest - time.monotonic(), 0.0),
            )
            for child in list(running):
                result = child.result(ready)
                if result is not _PENDING:
                    found[child.spec_file] = result
                    running.remove(child)
    finally:
        for child in running:
            child.kill()
    return found


_PENDING = object()  # a child that may still answer


@dataclass
class _Child:
    spec_file: Path
    process: Any  # multiprocessing's ForkServerProcess
    conn: Connection
    deadline: float
    timeout_s: float
    doing: str

    @classmethod
    def start(
        cls,
        context: Any,
        spec_file: Path,
        work: Callable[[Path, Any], Any],
        argument: Any,
        timeout_s: float,
        doing: str,
        confinement: Confinement | None,
    ) -> _Child:
        parent, child = context.Pipe(duplex=False)
        confined = confinement.to_json() if confinement else None
        process = context.Process(
            target=_in_child,
            args=(spec_file, child, work, json.dumps(argument), confined),
            daemon=True,
        )
        process.start()
        child.close()
        return cls(spec_file, process, parent, time.monotonic() + timeout_s, timeout_s, doing)

    def result(self, ready: list[Any]) -> Any:
        """What the child said, or why it said nothing; _PENDING while it may still say it."""
        broken = f"{self.spec_file}: "
        if self.conn in ready:
            try:
                message = json.loads(self.conn.recv_bytes(MAX_MESSAGE_BYTES))
            except (EOFError, OSError, ValueError):
                message = None  # it ended without a word, or sent what no child of ours sends
            self.kill()
            if message is None:
                return SpecError(broken + f"{self.doing} ended the process ({self._ended()})")
            return _answer(self.spec_file, message, self.doing)
        if self.process.sentinel in ready:
            self.kill()
            return SpecError(broken + f"{self.doing} ended the process ({self._ended()})")
        if time.monotonic() >= self.deadline:
            self.kill()
            return SpecError(broken + f"{self.doing} did not finish within {self.timeout_s:g} s")
        return _PENDING

    def _ended(self) -> str:
        self.process.join(timeout=5)
        return describe_exit(self.process.exitcode)

    def kill(self) -> None:
        """The child and whatever it started (it leads a process group of its own)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


def _answer(spec_file: Path, message: Any, doing: str) -> Any:
    if not isinstance(message, dict):
        return SpecError(f"{spec_file}: its process sent {type(message).__name__}, not a reply")
    if isinstance(message.get("error"), str):
        return SpecError(message["error"])
    threads = message.get("threads")
    if threads:
        return SpecError(
            f"{spec_file}: {doing} left threads running ({', '.join(map(str, threads))}): "
            "a spec may not start work that outlives its import in the harness's processes"
        )
    return message.get("result")


def _in_child(
    spec_file: Path,
    conn: Connection,
    work: Callable[[Path, Any], Any],
    argument: str,
    confinement: str | None,
) -> None:
    """In the spec's child: confined, `work` on it, its result (or its error) sent, exit at
    once."""
    os.setsid()  # its group is ours to kill, with whatever the spec starts
    with open(os.devnull, "w") as nowhere:
        os.dup2(nowhere.fileno(), 1)
        os.dup2(nowhere.fileno(), 2)
    before = set(threading.enumerate())
    message: dict[str, Any]
    try:
        if confinement is not None:
            confine(Confinement.from_json(confinement))
        message = {"result": work(spec_file, json.loads(argument))}
    except SandboxUnavailable as error:  # never import it unconfined where it was asked
        message = {"error": f"{spec_file}: its process could not be confined: {error}"}
    except SpecError as error:
        message = {"error": str(error)}
    except Exception as error:  # a SPEC the checks let through, yet unreadable: the spec's
        message = {"error": f"{spec_file}: cannot be read: {type(error).__name__}: {error}"}
    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    if left:
        message["threads"] = left
    conn.send_bytes(json.dumps(message).encode())
    os._exit(0)  # now: no thread a spec left running may hold the process
