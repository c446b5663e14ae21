"""Specs read in processes of their own: the run's own process never imports a spec.

A spec is Python, and in the process that forms the verdicts it could replace the code that
forms them, for every kernel. Each spec is imported in a child forked for it alone (confined,
where harness.sandbox can), which sends back what the run needs of it as JSON, never as a
pickle, and exits at once. Its name comes from the spec file it was started for, so a spec that
exits, hangs, or leaves a thread running at import is named, and never another in its place.
What a spec prints goes nowhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from harness.model.declared import Declared
from harness.model.discovery import KernelFolder, load_kernel
from harness.model.errors import SpecError
from harness.processes import describe_exit, fork_server
from harness.sandbox import Confinement, SandboxUnavailable, confine

# What a spec's child may send: a spec's cases at ~100 bytes each, 500k of them.
MAX_MESSAGE_BYTES = 64 << 20


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
    return load_kernel(KernelFolder.of(spec_file)).declared.to_json()


def in_spec_children(
    jobs: list[tuple[Path, Any]],
    work: Callable[[Path, Any], Any],
    timeout_s: float,
    doing: str = "importing it",
    confinement: Confinement | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[Path, Any]:
    """`work(spec_file, argument)` for each job, each in a child of that spec's own, at most a
    core's worth at once: what it returned (JSON), or a SpecError naming the spec file where
    it raised one, raised anything else, exited, hung past `timeout_s` or left a thread
    running; `doing` says what the child was doing in those messages. `work` must be a module's
    function (the child imports it by name), its argument and result plain JSON. Each child
    confines itself to `confinement` before it imports the spec (None: not confined);
    `progress(done, total)` is told as each child ends."""
    context = fork_server()
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
                    if progress is not None:
                        progress(len(found), len(jobs))
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
    # no bytecode of the spec's modules: a write the child attempts, in a tree it may not
    # write (confined), would mark its check as one that wrote, never kept
    sys.dont_write_bytecode = True
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
