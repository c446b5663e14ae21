"""Runs jobs in a worker process that may crash, hang or poison itself, one job at a time.

A kernel that writes out of bounds leaves its CUDA context unusable for the rest of the process,
one that deadlocks never returns, and one that traps can take the interpreter down. So jobs go to
a spawned worker; when it dies, runs past the job's timeout, or asks to be replaced (after a
sticky CUDA error), run() raises WorkerFault for that job and the next job starts in a fresh
worker.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from harness.model.result import KernelFailed
from harness.processes import describe_exit


class WorkerFault(KernelFailed):
    """The worker produced no result for the job: it crashed, timed out, or its code raised."""


@dataclass(frozen=True)
class Reply:
    """What a worker sends back for one job; `replace_me` retires the worker after it, and
    `raised` says what the job's own code raised instead of giving a result."""

    result: Any
    replace_me: bool = False
    raised: str | None = None


# A worker is `serve(setup_arg, job) -> Reply`, run by _worker_main in the child process.
Serve = Callable[[Any, Any], Reply]


_READY = "ready"  # a worker's first message: set up, waiting for jobs


def _worker_main(
    serve: Serve, setup: Callable[[Any], Any], setup_arg: Any, conn: Connection
) -> None:
    state = setup(setup_arg)
    conn.send(_READY)
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone or done
            return
        try:
            reply = serve(state, job)
        except Exception as error:  # a bug in the job's own code: report it, then step down
            reply = Reply(None, True, f"worker raised {type(error).__name__}: {error}")
        conn.send(reply)
        if reply.replace_me:
            return


@dataclass(frozen=True)
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection


class WorkerPool:
    """One worker at a time, replaced whenever a job faults or asks for it.

    `start_s` is what the last job waited for a fresh worker to start and set up (0.0 when it
    reused one): after a fault, the price of recovering.
    """

    def __init__(self, setup: Callable[[Any], Any], serve: Serve, setup_arg: Any):
        self._setup, self._serve, self._setup_arg = setup, serve, setup_arg
        self._context = multiprocessing.get_context("spawn")  # never fork a CUDA process
        self._worker: _Worker | None = None
        self._starting = False  # a worker is up but has not said it is ready
        self.start_s = 0.0

    def start(self) -> None:
        """Start a worker now, if none is up, so that it sets up while the caller does other
        work; the first job waits for it to be ready."""
        if self._worker is None:
            self._start()

    def _start(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main,
            args=(self._serve, self._setup, self._setup_arg, child),
            daemon=True,
        )
        process.start()
        child.close()
        self._worker = _Worker(process, parent)
        self._starting = True
        return self._worker

    def _retire(self, kill: bool) -> None:
        if self._worker is None:
            return
        process, conn = self._worker.process, self._worker.conn
        if kill and process.is_alive():
            process.kill()
        conn.close()
        process.join(timeout=30)
        self._worker = None
        self._starting = False

    def run(self, job: Any, timeout_s: float) -> Any:
        """The job's result; WorkerFault saying how the worker failed it. The timeout covers
        a fresh worker's start too."""
        started = time.monotonic()
        worker = self._start() if self._worker is None else self._worker
        conn = worker.conn
        self.start_s = 0.0
        try:
            if self._starting:
                if not conn.poll(timeout_s):
                    self._retire(kill=True)
                    raise WorkerFault(f"timeout: no worker up after {timeout_s:g} s")
                conn.recv()  # _READY
                self._starting = False
                self.start_s = time.monotonic() - started
            conn.send(job)
            left = timeout_s - (time.monotonic() - started)
            if not conn.poll(max(left, 0.0)):
                self._retire(kill=True)
                raise WorkerFault(f"timeout: no result after {timeout_s:g} s; worker killed")
            reply: Reply = conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            worker.process.join(timeout=30)
            how = describe_exit(worker.process.exitcode)
            self._retire(kill=True)
            raise WorkerFault(f"worker process {how} during this job") from None
        if reply.replace_me:
            self._retire(kill=False)
        if reply.raised is not None:
            raise WorkerFault(reply.raised)
        return reply.result

    def close(self) -> None:
        self._retire(kill=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
