"""Who may use one GPU while a case is timed: nobody else of the run.

Each kernel runs in a worker process of its own, and several work on one GPU at once: the lanes
of harness.pipeline.running (one kernel's checks run while another's case is timed), and the
next kernels' workers, which start (their CUDA context, their module loads, the occupancy
queries of their specs' setup) ahead of their turn. Every worker of the GPU opens one lock file:
timing holds it exclusively, and any other GPU work of the run (a worker's CUDA context made,
uploads, checked launches, digests, downloads, module loads) holds it shared, as does the run's
own process while it kills a worker and reaps it (harness.run.pool: a context torn down is GPU
work too). So checks of two kernels may overlap each other, and the host's share of a check
(comparing with the reference) overlaps a timing, but nothing the run itself does reaches the
GPU during a timing.

The kernel releases a file lock with its holder, so a worker killed while it holds it cannot
leave the others waiting. Within a process, threads take it one at a time, and a thread that
holds it may take it again: timing inside a shared hold (a vendor library's, set up under it)
turns the process's hold exclusive for its length, then shared again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path


class QuietLock:
    """A lock across threads, and across processes through the file at `path` (None: this
    process only), held exclusively (exclusive()) or shared (shared())."""

    def __init__(self, path: Path | None = None):
        self._threads = threading.RLock()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600) if path else None
        self._held: list[int] = []  # the modes of the holding thread's nested holds
        self.waited_s = 0.0  # for the file, by every thread of this process, all told

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """For a timing: no other holder, shared or exclusive, in any process."""
        return self._hold(fcntl.LOCK_EX)

    def shared(self) -> contextlib.AbstractContextManager[None]:
        """For GPU work that must not fall inside a timing: other processes' shared holds may
        overlap it, no exclusive one."""
        return self._hold(fcntl.LOCK_SH)

    @contextlib.contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        self._threads.acquire()
        try:
            before = self._held[-1] if self._held else None
            now = fcntl.LOCK_EX if fcntl.LOCK_EX in (mode, before) else fcntl.LOCK_SH
            self._lock_file(now, before)
            self._held.append(now)
            try:
                yield
            finally:
                self._held.pop()
                self._lock_file(before, now)
        finally:
            self._threads.release()

    def close(self) -> None:
        """Close the file: once nothing holds it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _lock_file(self, mode: int | None, current: int | None) -> None:
        """The file held in `mode` (None: released), from `current`. A change of mode is not
        atomic (the kernel drops the old hold, then waits for the new): two processes turning
        shared into exclusive at once never wait on each other."""
        if self._fd is not None and mode != current:
            started = time.monotonic()
            fcntl.flock(self._fd, fcntl.LOCK_UN if mode is None else mode)
            self.waited_s += time.monotonic() - started


@contextlib.contextmanager
def held_shared(path: Path | None) -> Iterator[None]:
    """A shared hold of the lock at `path`, through a file opened for it alone: holds taken at
    once on threads of one process overlap, as those of several processes do (one QuietLock
    takes its threads' holds one at a time)."""
    lock = QuietLock(path)
    try:
        with lock.shared():
            yield
    finally:
        lock.close()
