"""Workers that misbehave on purpose, for the pool tests (test_pool.py; no GPU involved).

A job is (action, value): "ok" echoes the value with the worker's pid, "crash" kills the
process with SIGSEGV, "exit" leaves with status 3, "hang" never answers, "raise" throws,
"poisoned" answers but asks to be replaced, as a worker does after a sticky CUDA error, "set"
answers what JSON cannot hold, "environ" answers a variable of its environment and its folder,
and "pickle" writes to the pipe itself, as a hostile spec could, a pickle that would create the
file `value` if the run's process unpickled it.
"""

from __future__ import annotations

import gc
import os
import signal
import time
import zlib
from multiprocessing.connection import Connection
from pathlib import Path

from harness.model.codec import cell_json
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
    if action == "set":
        return Reply({value})
    if action == "environ":  # the variable `value`, and the folder the worker is in
        return Reply((os.environ.get(value), os.getcwd()))
    if action == "pickle":
        (conn,) = [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed]
        conn.send(_Planted(value))
        time.sleep(3600)
    return Reply((state["tag"], value, state["pid"]), replace_me=action == "poisoned")


class _Planted:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


# Fake GPU workers for run_target: a CaseJob in, a passed Cell out, after a short sleep. Each
# case "takes" a duration of its own (from its name), which its cell records as its seconds.
# With FAKE_GPU_CRASH=<ordinal>:<marker file>, the worker of that GPU dies on its third case,
# once: the marker says it did. With FAKE_GPU_FORGE set, each cell says it was carried, under
# another key. With FAKE_GPU_LOG=<file>, each case checks for FAKE_GPU_CHECK_S (0.1 s), then
# "times" for 0.1 s
# holding the GPU's quiet lock exclusively, as a real worker does, and appends a line
# `<kernel> <case> <begun> <timing began> <timing ended> <ended>` (time.time()) to the file; with
# FAKE_GPU_HANG=<kernel>::<case> too, that case hangs holding the lock shared, as a kernel that
# never returns from its checked launch does; with FAKE_GPU_MEET=<folder>, each case waits (up
# to 20 s) before its check until cases of two kernels have begun. With
# FAKE_GPU_PREPARE_S=<kernel>:<seconds>, the worker of that kernel answers the first cases it is
# told of that much later.


def fake_gpu(setup):
    return {"ordinal": setup.device.ordinal, "served": 0, "quiet": setup.quiet_lock}


def _checked_and_timed(state, kernel: str, case: str, log: str) -> None:
    from harness.run.quiet import QuietLock

    lock = state.setdefault("lock", QuietLock(state["quiet"]))
    begun = time.time()
    if meet := os.environ.get("FAKE_GPU_MEET"):
        Path(meet, kernel).touch()
        while len(os.listdir(meet)) < 2 and time.time() < begun + 20:
            time.sleep(0.01)
    if os.environ.get("FAKE_GPU_HANG") == f"{kernel}::{case}":
        with lock.shared():
            time.sleep(3600)
    time.sleep(float(os.environ.get("FAKE_GPU_CHECK_S", "0.1")))
    with lock.exclusive():
        timing = time.time()
        time.sleep(0.1)
        timed = time.time()
    with open(log, "a") as lines:
        lines.write(f"{kernel} {case} {begun} {timing} {timed} {time.time()}\n")


def fake_seconds(classname: str, case: str) -> float:
    return 0.01 + zlib.crc32(f"{classname}/{case}".encode()) % 1000 / 1000 * 0.4


def serve_case(state, job):
    """A passed cell whose message names the worker's pid and the spec files it served."""
    from harness.model.cell import CarriedFrom, Cell
    from harness.model.outcome import CellKind, Outcome
    from harness.run.worker import Prepare

    if isinstance(job, Prepare):
        state.setdefault("specs", set()).update(str(j.spec_file) for j in job.jobs)
        slow, _, seconds = os.environ.get("FAKE_GPU_PREPARE_S", "").rpartition(":")
        spec = job.jobs[0].spec_file if job.jobs else None
        if spec is not None and slow == f"{spec.parent.parent.name}.{spec.parent.name}":
            time.sleep(float(seconds))  # as a worker importing its vendor's library answers
        return Reply(len(job.jobs))
    state.setdefault("specs", set()).add(str(job.spec_file))
    state["served"] += 1
    ordinal, _, marker = os.environ.get("FAKE_GPU_CRASH", "").partition(":")
    if ordinal == str(state["ordinal"]) and state["served"] == 3 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGSEGV)
    chapter, kernel = job.spec_file.parent.parent.name, job.spec_file.parent.name
    seconds = fake_seconds(f"{chapter}.{kernel}", job.case_name)
    if log := os.environ.get("FAKE_GPU_LOG"):
        _checked_and_timed(state, f"{chapter}.{kernel}", job.case_name, log)
    else:
        time.sleep(seconds / 40)
    where = job.provenance
    cell = Cell(
        CellKind.CASE, chapter, kernel, job.case_name, job.target.name, where, Outcome.PASSED
    )
    cell.seconds = seconds
    cell.message = f"pid {os.getpid()} served {sorted(state['specs'])}"
    if os.environ.get("FAKE_GPU_FORGE"):  # as a hostile spec could answer: carried, keyed
        cell.verdict_key = "a key of another cell"
        cell.carried_from = CarriedFrom("f" * 40, "forged", "2099-01-01", "forged")
    return Reply({"cell": cell_json(cell), "offers": []})
