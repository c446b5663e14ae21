"""Held while a case is timed, by whichever of the run's processes on one GPU times it.

Each kernel runs in a worker process of its own, and the next kernel's worker starts (creates
its CUDA context, loads its module, asks occupancy for its spec's setup) while this one times:
those calls wait on this lock, a file lock every worker of the GPU opens, so nothing the run
itself does reaches the GPU during a timing. The kernel releases a file lock with its holder,
so a worker killed while timing cannot leave the others waiting. Within a process, threads
take it one at a time too.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType


class QuietLock:
    """A lock across threads, and across processes through the file at `path` (None: this
    process only)."""

    def __init__(self, path: Path | None = None):
        self._threads = threading.Lock()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600) if path else None

    def __enter__(self) -> bool:
        self._threads.acquire()
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except BaseException:
                self._threads.release()
                raise
        return True

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._threads.release()
