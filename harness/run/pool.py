"""Runs jobs in a worker process that may crash, hang or poison itself, one job at a time.

A kernel that writes out of bounds leaves its CUDA context unusable for the rest of the process,
one that deadlocks never returns, and one that traps can take the interpreter down. So jobs go to
a worker process (forked by the fork server, harness.processes); when it dies, runs past the
job's timeout, or asks to be replaced (after a sticky CUDA error), run() raises WorkerFault for
that job and the next job starts in a fresh worker.

A worker runs a kernel's spec, which is Python a user wrote: what it sends back is JSON, read
and checked here, never a pickle (which would run whatever it was made to run in this process).

A worker ends when the pool kills it, under the pool's exit guard where it has one: a
process's CUDA context torn down (killed or exiting alike, until it is reaped) slowed memsets
timed beside it by 5-25 % on an H200, and nothing in their samples told them apart. The run's
guard for a GPU's workers is a shared hold of that GPU's lock (harness.run.quiet), so no timing
runs beside an exit. So a worker that asks to be replaced waits to be killed; one that hangs
may hold the lock itself, so it is killed first and reaped under the guard; one that crashes
has exited already, unguarded (its own cell fails).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from harness.model.errors import KernelFailed
from harness.processes import describe_exit, fork_server


class WorkerFault(KernelFailed):
    """The worker produced no result for the job: it crashed, timed out, or its code raised."""


class TimedOut(WorkerFault):
    """The worker gave no result within the job's timeout, and was killed."""


@dataclass(frozen=True)
class Reply:
    """What a worker sends back for one job: `result` as JSON values; `replace_me` retires the
    worker after it, and `raised` says what the job's own code raised instead of giving a
    result."""

    result: Any
    replace_me: bool = False
    raised: str | None = None

    def encoded(self) -> bytes:
        return json.dumps([self.result, self.replace_me, self.raised]).encode()

    @classmethod
    def decoded(cls, data: bytes) -> Reply:
        """ValueError where `data` is not what encoded() makes."""
        result, replace_me, raised = json.loads(data)
        if not isinstance(replace_me, bool) or not isinstance(raised, str | None):
            raise ValueError("not a worker's reply")
        return cls(result, replace_me, raised)


# A worker is `serve(setup_arg, job) -> Reply`, run by _worker_main in the child process.
Serve = Callable[[Any, Any], Reply]


_READY = b"ready"  # a worker's first message: set up, waiting for jobs
# The largest reply read back: a cell with its logs (bounded where they are kept) is far less.
MAX_REPLY_BYTES = 256 << 20


def _kill(process: multiprocessing.process.BaseProcess) -> None:
    """Kill `process` where it still runs, and reap it."""
    if process.is_alive():
        process.kill()
    process.join(timeout=30)


def _worker_main(
    serve: Serve,
    setup: Callable[[Any], Any],
    setup_arg: Any,
    conn: Connection,
    started_in: tuple[dict[str, str], str],
) -> None:
    # Forked by the fork server, it has the server's environment and folder: take the run's, as
    # they are now, as a process the run started itself would have them.
    environment, folder = started_in
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(folder)
    state = setup(setup_arg)
    conn.send_bytes(_READY)
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent is gone or done
            return
        try:
            reply = serve(state, job)
        except Exception as error:  # a bug in the job's own code: report it, then step down
            reply = Reply(None, True, f"worker raised {type(error).__name__}: {error}")
        try:
            data = reply.encoded()
        except (TypeError, ValueError) as error:  # a result JSON cannot hold: the job's bug
            data = Reply(None, True, f"worker's reply is not JSON: {error}").encoded()
        conn.send_bytes(data)
        if reply.replace_me:  # killed by the pool, under its exit guard: never exits by itself
            with contextlib.suppress(EOFError, OSError):
                while True:
                    conn.recv_bytes()
            return


@dataclass(frozen=True)
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection


class WorkerPool:
    """One worker at a time, replaced whenever a job faults or asks for it.

    `start_s` is what the last job waited for a fresh worker to start and set up (0.0 when it
    reused one): after a fault, the price of recovering. A job may be posted ahead (post()):
    the worker takes it once set up, and its reply is read, and dropped, before the next job's.
    """

    def __init__(
        self,
        setup: Callable[[Any], Any],
        serve: Serve,
        setup_arg: Any,
        exit_guard: Callable[[], contextlib.AbstractContextManager[object]] | None = None,
    ):
        """`exit_guard`: held while a worker is killed and reaped (the module's docstring)."""
        self._setup, self._serve, self._setup_arg = setup, serve, setup_arg
        self._exit_guard = exit_guard or contextlib.nullcontext
        # forked from the fork server, which holds no CUDA context: never fork a CUDA process
        self._context = fork_server()
        self._worker: _Worker | None = None
        self._starting = False  # a worker is up but has not said it is ready
        self._posted: list[Any] = []  # jobs sent ahead to the worker up now, not yet answered
        self._start_fault: WorkerFault | None = None  # how the last worker failed to start
        self._exiting: list[threading.Thread] = []  # each killing and reaping a worker
        self.start_s = 0.0

    @property
    def setup_arg(self) -> Any:
        """What each of its workers is set up with."""
        return self._setup_arg

    def start(self) -> None:
        """Start a worker now, if none is up, so that it sets up while the caller does other
        work; the first job waits for it to be ready."""
        if self._worker is None:
            self._start()

    def _start(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main,
            args=(
                self._serve,
                self._setup,
                self._setup_arg,
                child,
                (dict(os.environ), os.getcwd()),
            ),
            daemon=True,
        )
        process.start()
        child.close()
        self._worker = _Worker(process, parent)
        self._starting = True
        return self._worker

    def _retire(self, hung: bool = False, wait: bool = True) -> None:
        """End the worker up now: killed and reaped under the exit guard; `hung`: one that gave
        no answer in time, which may hold what the guard waits for (a timing's exclusive hold
        of the GPU's lock), so it is killed first. `wait`: return once it is reaped, and every
        worker retired before; else that happens on a thread of its own."""
        if self._worker is not None:
            worker = self._worker
            if hung and worker.process.is_alive():
                worker.process.kill()
            ending = threading.Thread(target=self._end, args=(worker,), daemon=True)
            ending.start()
            self._exiting.append(ending)
        if wait:
            for ending in self._exiting:
                ending.join()
            self._exiting.clear()
        self._worker = None
        self._starting = False
        self._posted = []

    def _end(self, worker: _Worker) -> None:
        try:
            with self._exit_guard():
                _kill(worker.process)
        finally:  # a guard that could not be had (its lock file gone) leaves no worker behind
            _kill(worker.process)
            worker.conn.close()  # after the kill: the worker would take EOF for its cue to exit

    def post(self, job: Any) -> None:
        """Send `job` to the worker (started now if none is up) without waiting for it: what
        it does comes back, and is dropped, before the next run(); a worker that fails it is
        replaced then, for the job run() sends. A worker replaced meanwhile never gets it."""
        worker = self._start() if self._worker is None else self._worker
        try:
            worker.conn.send(job)
        except (OSError, BrokenPipeError):  # gone already: run() finds out and says how
            return
        self._posted.append(job)

    def caught_up(self) -> bool:
        """Whether a job run now would be taken at once: a worker is up, has said it is ready,
        and has answered every job posted to it. Never waits; what it reads, run() need not."""
        worker = self._worker
        if worker is None or self._start_fault is not None:
            return False
        if self._starting:
            if not worker.conn.poll(0):
                return False
            try:
                self._ready(time.monotonic(), 0.0)
            except WorkerFault as fault:  # the next job is told, as if it had found it
                self._start_fault = fault
                return False
        try:
            while self._posted and worker.conn.poll(0):
                self._posted_reply(worker, time.monotonic(), 0.0)
        except WorkerFault:  # as run() does: the next job goes to a fresh worker
            return False
        return not self._posted

    def on_its_way(self) -> bool:
        """Whether a worker is up that has yet to say it is ready or to answer what was posted
        to it: caught_up() may become true without another job."""
        return self._worker is not None and (self._starting or bool(self._posted))

    def run(self, job: Any, timeout_s: float) -> Any:
        """The job's result, as JSON values; WorkerFault saying how the worker failed it. The
        timeout covers a fresh worker's start too, and the jobs posted ahead of it."""
        started = time.monotonic()
        self.start_s = 0.0
        if self._start_fault is not None:  # found by caught_up()
            fault, self._start_fault = self._start_fault, None
            raise fault
        worker = self._ready(started, timeout_s)
        try:
            while self._posted:  # what a posted job did is for this one to use; its reply not
                if self._posted_reply(worker, started, timeout_s).replace_me:
                    break
        except WorkerFault:  # it failed the worker: this job goes to a fresh one
            pass
        if self._worker is not worker:
            worker = self._ready(started, timeout_s)
        try:
            worker.conn.send(job)
        except OSError:  # BrokenPipeError: it is gone
            self._died(worker)
        reply = self._reply(worker, started, timeout_s)
        if reply.raised is not None:
            raise WorkerFault(reply.raised)
        return reply.result

    def _ready(self, started: float, timeout_s: float) -> _Worker:
        """The worker up now, or a fresh one, once it says it is set up."""
        worker = self._start() if self._worker is None else self._worker
        if self._starting:
            left = timeout_s - (time.monotonic() - started)
            try:
                if not worker.conn.poll(max(left, 0.0)):
                    self._retire()
                    raise TimedOut(f"timeout: no worker up after {timeout_s:g} s")
                first = worker.conn.recv_bytes(len(_READY))
            except (EOFError, OSError):
                self._died(worker)
            if first != _READY:
                self._retire()
                raise WorkerFault("the worker's first message was not that it is ready")
            self._starting = False
            self.start_s = time.monotonic() - started
        return worker

    def _posted_reply(self, worker: _Worker, started: float, timeout_s: float) -> Reply:
        """The reply to the first job posted ahead, read and dropped from what waits."""
        self._posted.pop(0)
        return self._reply(worker, started, timeout_s)

    def _reply(self, worker: _Worker, started: float, timeout_s: float) -> Reply:
        """The worker's next reply within what is left of `timeout_s`; WorkerFault (the worker
        retired) when none comes or it cannot be read. A reply asking for it retires it."""
        left = timeout_s - (time.monotonic() - started)
        try:
            if not worker.conn.poll(max(left, 0.0)):
                self._retire(hung=True)
                raise TimedOut(f"timeout: no result after {timeout_s:g} s; worker killed")
            data = worker.conn.recv_bytes(MAX_REPLY_BYTES)
        except (EOFError, OSError):
            self._died(worker)
        try:
            reply = Reply.decoded(data)
        except (TypeError, ValueError) as error:
            self._retire()
            raise WorkerFault(f"the worker's reply is not readable: {error}") from None
        if reply.replace_me:
            self._retire()
        return reply

    def _died(self, worker: _Worker) -> NoReturn:
        worker.process.join(timeout=30)
        how = describe_exit(worker.process.exitcode)
        self._retire()
        raise WorkerFault(f"worker process {how} during this job")

    def close(self, wait: bool = True) -> None:
        """Kill the worker. `wait=False` returns at once: a process with a CUDA context takes a
        tenth of a second and more to exit (its context torn down), which a caller with other
        work need not wait out; the next close() that waits (the pool's exit) joins it."""
        self._retire(wait=wait)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
