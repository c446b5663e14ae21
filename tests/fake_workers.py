"""Workers that misbehave on purpose, for the isolation tests (no GPU involved).

A job is (action, value): "ok" echoes the value with the worker's pid, "crash" kills the
process with SIGSEGV, "exit" leaves with status 3, "hang" never answers, "raise" throws, and
"poisoned" answers but asks to be replaced, as a worker does after a sticky CUDA error.
"""

from __future__ import annotations

import os
import signal
import time

from harness.run.pool import Reply


def setup(tag):
    return {"tag": tag, "pid": os.getpid()}


def setup_that_exits(tag):
    os._exit(4)


def serve(state, job):
    action, value = job
    if action == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if action == "exit":
        os._exit(3)
    if action == "hang":
        time.sleep(3600)
    if action == "raise":
        raise ValueError(f"bad job {value}")
    return Reply((state["tag"], value, state["pid"]), replace_me=action == "poisoned")
