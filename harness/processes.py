"""Child processes the harness starts and may have to end: starting one in a session of its own,
waiting for it within a timeout, ending it whole, and saying how it ended; and the fork server
the run's Python children are forked from.

nvcc, compute-sanitizer and the spec import probe each run in a process group of their own, so
that ending them ends whatever they started too (cc1plus, the tool's helpers, a spec's children).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

_STDERR = {"pipe": subprocess.PIPE, "stdout": subprocess.STDOUT, "discard": subprocess.DEVNULL}
KILL_WAIT_S = 30  # for the pipes to close once a timed-out group is killed


@dataclass(frozen=True)
class Finished:
    """A process that ended, or was killed at its timeout (status None)."""

    status: int | None
    stdout: str
    stderr: str  # "" when stderr went to stdout


def start(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stderr: Literal["pipe", "stdout", "discard"] = "pipe",
    stdout: Literal["pipe", "discard"] = "pipe",
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[str]:
    """`argv` in a session (and process group) of its own, stdin closed, its output piped;
    `stderr` "pipe" apart, "stdout" into stdout, or "discard"; `pass_fds` kept open in it."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=_STDERR[stdout],
        stderr=_STDERR[stderr],
        pass_fds=tuple(pass_fds),
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
    )


def finish(process: subprocess.Popen[str], timeout_s: float) -> Finished:
    """Wait for `process` (from start) within `timeout_s`; past it, kill its whole group."""
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        return Finished(process.returncode, stdout or "", stderr or "")
    except subprocess.TimeoutExpired:
        kill_group(process)
        try:
            stdout, stderr = process.communicate(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:  # something left the group and holds the pipes
            process.wait()
            stdout, stderr = "", ""
        return Finished(None, stdout or "", stderr or "")


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL to the process group of `process`, started with start()."""
    with contextlib.suppress(ProcessLookupError):  # it ended in between
        os.killpg(process.pid, signal.SIGKILL)


def fork_server() -> multiprocessing.context.ForkServerContext:
    """The context the run's Python children start in (each spec's child, each GPU worker):
    forked by multiprocessing's fork server, which is started now if it is not up, and imports
    what they all import (harness.forked) while the caller goes on. A child then starts with
    them imported, in ~10 ms, where a spawned one takes 0.4-0.6 s on an H200 machine to import
    them. None of them initializes CUDA, so a child forked from the server may."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["harness.forked"])
    multiprocessing.forkserver.ensure_running()
    return context
