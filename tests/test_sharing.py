"""A GPU another process used, named: NVML's list where it can be believed, the samples' waits
everywhere."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import time
from types import SimpleNamespace

from harness.model.cell import Cell, Provenance, Timing
from harness.model.errors import Unavailable
from harness.model.outcome import CellKind, Outcome
from harness.pipeline.running import shared_gpu
from harness.processes import fork_server
from harness.run.sharing import QUEUED_LIMIT_US, Neighbours, own_processes, parent_of, shared_why


def _timing(queued_us: float | None, shared: str | None = None) -> Timing:
    return Timing(10.0, 9.0, 11.0, 1.0, (10.0,) * 10, queued_us=queued_us, shared_gpu=shared)


class _FakeNvml:
    def __init__(self, pids: list[int]):
        self.pids = pids

    def device_get_compute_running_processes_v3(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, used_gpu_memory=2**30) for pid in self.pids]


def _neighbours(pids: list[int]) -> Neighbours:
    found = Neighbours.__new__(Neighbours)
    found._nvml, found._handle, found.ours = _FakeNvml(pids), 1, own_processes()
    return found


def test_nvml_names_the_other_processes_only_where_it_lists_this_one():
    assert _neighbours([os.getpid(), os.getppid()]).others() == []
    assert _neighbours([os.getpid(), 1]).others() == ["pid 1 (1.0 GiB)"]  # init: not the run's
    # A list without this process is of another PID namespace: it cannot tell ours from others'
    foreign = _neighbours([17, 4242]).others()
    assert isinstance(foreign, Unavailable) and "does not list this process" in foreign.why


def test_an_entry_of_no_process_here_is_not_another_process():
    """NVML's list, read while a worker exits, can hold an entry that is no process (seen on
    an H200: pid 909670445 with 7.4 EiB): it does not make a timing shared."""
    assert _neighbours([os.getpid(), 909670445]).others() == []


def _others_seen_by_a_child(pids: list[int], answer) -> None:
    answer.put(_neighbours([os.getpid(), *pids]).others())


def _seen_by_a_worker(context, listed: list[int]) -> list[str]:
    """What a worker started in `context` calls another's, NVML listing it and `listed`."""
    answer = context.Queue()
    worker = context.Process(target=_others_seen_by_a_child, args=(listed, answer))
    worker.start()
    seen = answer.get(timeout=60)
    worker.join()
    return seen


def test_the_run_s_other_workers_are_not_another_s_processes():
    """A worker of another kernel, a child of the run's process too, waits on the GPU's quiet
    lock while this one times: it is not another's use of the GPU. The run's parent is."""
    context = multiprocessing.get_context("fork")  # no CUDA here: fork is safe
    sibling = subprocess.Popen(["sleep", "30"])
    grandparent = os.getppid()
    try:
        seen = _seen_by_a_worker(context, [sibling.pid, grandparent])
    finally:
        sibling.kill()
        sibling.wait()
    assert seen == [f"pid {grandparent} (1.0 GiB)"]


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def test_from_the_fork_server_the_run_and_its_other_workers_are_not_another_s_processes():
    """A worker forked by the fork server (harness.processes) is the server's child, not the
    run's: the run (which holds a CUDA context of its own, from the device probe) and the run's
    other workers, children of the server too, are still the run's. The run's parent is not."""
    context = fork_server()
    sibling = context.Process(target=_sleep, args=(30,), daemon=True)
    sibling.start()
    outsider = os.getppid()
    try:
        seen = _seen_by_a_worker(context, [sibling.pid, os.getpid(), outsider])
    finally:
        sibling.kill()
        sibling.join()
    assert seen == [f"pid {outsider} (1.0 GiB)"]


def test_a_process_s_parent_is_read_from_proc_even_with_parentheses_in_its_name(tmp_path):
    named = tmp_path / "x) 7 (y"  # /proc/<pid>/stat shows `pid (x) 7 (y) S ppid`
    named.symlink_to(shutil.which("sleep"))
    child = subprocess.Popen([str(named), "30"])
    try:
        assert parent_of(child.pid) == os.getpid()
    finally:
        child.kill()
        child.wait()
    assert parent_of(os.getpid()) == os.getppid()
    assert parent_of(2**22 + 12345) is None  # no such process


def test_the_samples_waits_or_nvml_say_shared_and_quiet_samples_do_not():
    alone = _timing(12.0)
    assert shared_why(alone, []) is None
    assert shared_why(alone, Unavailable("no NVML")) is None
    assert shared_why(_timing(None), Unavailable("no NVML")) is None
    waited = shared_why(_timing(2400.0), Unavailable("no NVML"))
    assert waited and "waited 2400 us (median) beyond their own GPU time" in waited
    assert shared_why(_timing(QUEUED_LIMIT_US), []) is None  # at the limit: not beyond it
    named = shared_why(alone, ["pid 4242 (1.0 GiB)"])
    assert named == "NVML lists another process on this GPU: pid 4242 (1.0 GiB)"


def test_the_report_counts_the_shared_cells_and_names_the_first():
    def cell(case: str, timing: Timing | None) -> Cell:
        where = Provenance("r")
        return Cell(CellKind.CASE, "ch", "k", case, "sm_90a", where, Outcome.PASSED, timing=timing)

    quiet = [cell("a", _timing(10.0)), cell("b", None)]
    assert shared_gpu(quiet) is None
    shared = [*quiet, cell("c", _timing(900.0, "why c")), cell("d", _timing(800.0, "why d"))]
    assert shared_gpu(shared) == (
        "2 of 3 timed cells ran while another process used the GPU (the first, ch.k c[sm_90a]: "
        "why c)"
    )


def test_nvml_is_asked_for_the_gpu_by_its_uuid_as_a_string(monkeypatch):
    from cuda.bindings import nvml

    asked = []
    monkeypatch.setattr(nvml, "init_v2", lambda: None)
    monkeypatch.setattr(nvml, "device_get_handle_by_uuid", lambda uuid: asked.append(uuid) or 7)
    Neighbours("e114c679-1b6f-2ab0-cee0-ce2f5e3d5ea9", 0)
    Neighbours("GPU-819f1207-950d-4bec-39ba-7bacffa2fbba", 0)
    assert asked == [
        "GPU-e114c679-1b6f-2ab0-cee0-ce2f5e3d5ea9",
        "GPU-819f1207-950d-4bec-39ba-7bacffa2fbba",
    ]
