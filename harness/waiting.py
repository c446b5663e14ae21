"""The main thread's waits on work in other threads, made so that Ctrl-C still ends the run.

The kernel hands a signal sent to the process to any of its threads that does not block it
(Python's, a library's). Python raises KeyboardInterrupt in the main thread, but only once that
thread runs Python code again: a main thread asleep on a lock with no timeout sleeps on until
the lock is let go, so a Ctrl-C that landed in a compiling thread waited for nvcc. These waits
wake every POLL_S to let a pending interrupt through.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.1


def as_completed(futures: Iterable[Future[T]]) -> Iterator[Future[T]]:
    """Each of `futures` as it finishes."""
    pending = set(futures)
    while pending:
        done, pending = concurrent.futures.wait(
            pending, timeout=POLL_S, return_when=concurrent.futures.FIRST_COMPLETED
        )
        yield from done


def result(future: Future[T]) -> T:
    """`future`'s result, or what it raised, once it is done."""
    while not concurrent.futures.wait([future], timeout=POLL_S).done:
        pass
    return future.result()


def join(threads: Iterable[threading.Thread]) -> None:
    """Once every one of `threads` has ended."""
    for thread in threads:
        while thread.is_alive():
            thread.join(POLL_S)
