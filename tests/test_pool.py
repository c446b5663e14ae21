"""Worker isolation without a GPU: crashes, hangs and poisoned workers cost one job each."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.model.errors import KernelFailed
from harness.processes import fork_server
from harness.run.pool import WorkerFault, WorkerPool
from tests import fake_workers
from tests.conftest import ROOT

CRASH = re.compile(r"^worker process .* during this job$")  # what a worker that died says


def _pool():
    return WorkerPool(fake_workers.setup, fake_workers.serve, "t")


def _faulted_then_ok(action: str, value: object) -> tuple[str, list]:
    """What the pool raised for the job (action, value), and the answer of an "ok" job after
    it, in the same pool."""
    with _pool() as pool:
        with pytest.raises(WorkerFault) as fault:
            pool.run((action, value), timeout_s=30)
        after = pool.run(("ok", 2), timeout_s=30)
    return str(fault.value), after


def test_a_worker_starts_with_the_run_s_environment_and_folder_as_they_are_then(
    tmp_path, monkeypatch
):
    """Workers are forked by the fork server, which started before this: each still sees what
    a process the run started itself would (what the run set since, where it is now)."""
    fork_server()
    monkeypatch.setenv("CUDA_MATRIX_POOL_TEST", "set after the server started")
    monkeypatch.chdir(tmp_path)
    with _pool() as pool:
        said = pool.run(("environ", "CUDA_MATRIX_POOL_TEST"), timeout_s=30)
    assert said == ["set after the server started", str(tmp_path)]


def test_results_come_back_from_one_reused_worker():
    with _pool() as pool:
        first = pool.run(("ok", 1), timeout_s=30)
        second = pool.run(("ok", 2), timeout_s=30)
    assert first[:2] == ["t", 1] and second[:2] == ["t", 2]
    assert first[2] == second[2]  # same process


def test_a_crash_fails_its_job_and_the_next_job_runs_in_a_fresh_worker():
    with _pool() as pool:
        before = pool.run(("ok", 1), timeout_s=30)
        with pytest.raises(WorkerFault) as crashed:
            pool.run(("crash", 2), timeout_s=30)
        after = pool.run(("ok", 3), timeout_s=30)
    assert isinstance(crashed.value, KernelFailed) and CRASH.match(str(crashed.value))
    assert "killed by SIGSEGV" in str(crashed.value)
    assert after[:2] == ["t", 3] and after[2] != before[2]


def test_an_exit_is_reported_with_its_status():
    with _pool() as pool:
        with pytest.raises(WorkerFault) as exited:
            pool.run(("exit", 0), timeout_s=30)
    assert CRASH.match(str(exited.value)) and "exited with status 3" in str(exited.value)


def test_a_hang_times_out_and_is_killed():
    with _pool() as pool:
        started = time.monotonic()
        with pytest.raises(WorkerFault) as hung:
            pool.run(("hang", 0), timeout_s=2)
        waited = time.monotonic() - started
        after = pool.run(("ok", 5), timeout_s=30)
    assert str(hung.value).startswith("timeout:")
    assert "timeout" in str(hung.value) and waited < 20
    assert after[:2] == ["t", 5]


def test_an_exception_in_the_worker_is_a_fault_not_a_crash_of_the_run():
    raised, after = _faulted_then_ok("raise", 7)
    assert raised == "worker raised ValueError: bad job 7"
    assert not CRASH.match(raised)
    assert after[:2] == ["t", 2]


def test_a_poisoned_worker_answers_then_is_replaced():
    with _pool() as pool:
        poisoned = pool.run(("poisoned", 1), timeout_s=30)
        after = pool.run(("ok", 2), timeout_s=30)
    assert poisoned[:2] == ["t", 1]
    assert after[2] != poisoned[2]


def test_the_wait_for_a_fresh_worker_is_measured_and_a_reused_one_costs_nothing():
    with _pool() as pool:
        pool.run(("ok", 1), timeout_s=30)
        first_start = pool.start_s
        pool.run(("ok", 2), timeout_s=30)
        reused = pool.start_s
        with pytest.raises(WorkerFault):
            pool.run(("crash", 3), timeout_s=30)
        pool.run(("ok", 4), timeout_s=30)
        after_crash = pool.start_s
    assert first_start > 0 and after_crash > 0  # a spawned interpreter takes real time
    assert reused == 0.0


def test_a_worker_whose_setup_dies_fails_the_job_as_a_crash():
    with WorkerPool(fake_workers.setup_that_exits, fake_workers.serve, "t") as pool:
        with pytest.raises(WorkerFault) as died:
            pool.run(("ok", 1), timeout_s=30)
    assert CRASH.match(str(died.value))
    assert "exited with status 4" in str(died.value)


def test_replies_are_read_as_json_never_unpickled(tmp_path):
    """A worker runs a user's spec, which may write to the pipe itself: a pickle that would run
    code in the run's process is refused unread, and costs that job only."""
    planted = tmp_path / "unpickled"
    refused, after = _faulted_then_ok("pickle", str(planted))
    assert "the worker's reply is not readable" in refused
    assert not planted.exists()
    assert after[:2] == ["t", 2]


def test_a_result_json_cannot_hold_is_the_job_s_fault():
    refused, after = _faulted_then_ok("set", 1)
    assert refused.startswith("worker's reply is not JSON")
    assert after[:2] == ["t", 2]


def test_a_posted_job_runs_before_the_next_and_its_reply_is_dropped():
    with _pool() as pool:
        pool.post(("ok", 1))
        answer = pool.run(("ok", 2), timeout_s=30)
        assert pool.start_s > 0  # the first run waited for the worker the post started
    assert answer[:2] == ["t", 2]


def test_a_posted_job_that_kills_the_worker_leaves_the_next_job_a_fresh_one():
    with _pool() as pool:
        first = pool.run(("ok", 0), timeout_s=30)
        pool.post(("crash", 1))
        after = pool.run(("ok", 2), timeout_s=30)
    assert after[:2] == ["t", 2] and after[2] != first[2]


def _until(ask, seconds: float = 30.0) -> bool:
    """Whether `ask()` became true within `seconds`, asked every 10 ms."""
    deadline = time.monotonic() + seconds
    while not ask():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_worker_has_caught_up_once_it_is_ready_and_has_answered_what_was_posted():
    with _pool() as pool:
        assert not pool.caught_up() and not pool.on_its_way()  # no worker up
        pool.start()
        assert pool.on_its_way()
        assert _until(pool.caught_up)  # ready, nothing posted
        pool.post(("ok", 1))
        assert _until(pool.caught_up)  # answered; its reply read and dropped
        answer = pool.run(("ok", 2), timeout_s=30)
        assert answer[:2] == ["t", 2] and pool.start_s == 0.0  # the run waited for nothing
        pool.post(("hang", 0))
        time.sleep(0.3)
        assert not pool.caught_up() and pool.on_its_way()  # its posted job is not answered


def test_a_worker_that_fails_to_start_is_never_caught_up_and_its_fault_goes_to_the_next_job():
    with WorkerPool(fake_workers.setup_that_exits, fake_workers.serve, "t") as pool:
        pool.start()
        assert not _until(pool.caught_up, seconds=3.0)
        assert not pool.on_its_way()  # waiting for it changes nothing
        with pytest.raises(WorkerFault) as died:
            pool.run(("ok", 1), timeout_s=30)
    assert CRASH.match(str(died.value)) and "exited with status 4" in str(died.value)


class _ExitGuard:
    """An exit guard that notes, on entering and on leaving, whether the worker `pid` still
    runs: on entering after a pause, by which a worker that exits by itself would be gone."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.seen: list[tuple[str, bool]] = []

    @contextlib.contextmanager
    def hold(self):
        time.sleep(0.3)
        self.seen.append(("entered", _running(self.pid)))
        yield
        self.seen.append(("left", _running(self.pid)))


def _running(pid: int | None) -> bool:
    """Whether process `pid` runs: not gone, not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _guarded() -> tuple[WorkerPool, _ExitGuard]:
    guard = _ExitGuard()
    return WorkerPool(fake_workers.setup, fake_workers.serve, "t", guard.hold), guard


def test_a_worker_is_killed_and_reaped_inside_the_exit_guard():
    """A CUDA context torn down slows a timing beside it: the GPU's lock guards the kill."""
    pool, guard = _guarded()
    with pool:
        guard.pid = pool.run(("ok", 1), timeout_s=30)[2]
        pool.close()
        assert guard.seen == [("entered", True), ("left", False)]


def test_a_worker_that_asks_to_be_replaced_waits_to_be_killed_inside_the_guard():
    pool, guard = _guarded()
    with pool:
        guard.pid = pool.run(("ok", 1), timeout_s=30)[2]
        answer = pool.run(("poisoned", 2), timeout_s=30)
        assert answer == ["t", 2, guard.pid]
        assert guard.seen == [("entered", True), ("left", False)]  # it did not exit by itself


def test_a_hung_worker_is_killed_before_the_guard_and_reaped_inside_it():
    """A worker that hangs in a timing holds the GPU's lock that the guard would wait for."""
    pool, guard = _guarded()
    with pool:
        guard.pid = pool.run(("ok", 1), timeout_s=30)[2]
        with pytest.raises(WorkerFault, match=r"^timeout:"):
            pool.run(("hang", 0), timeout_s=2)
        assert guard.seen == [("entered", False), ("left", False)]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_worker_is_killed_all_the_same_where_its_exit_guard_cannot_be_had():
    """The guard's lock file gone (its folder removed under the run): no worker left running."""

    def missing():
        raise FileNotFoundError("no lock file")

    with WorkerPool(fake_workers.setup, fake_workers.serve, "t", missing) as pool:
        pid = pool.run(("ok", 1), timeout_s=30)[2]
        pool.close()
        assert not _running(pid)


def test_a_worker_closed_without_waiting_is_killed_on_a_thread_and_the_pool_s_exit_waits():
    """A lane goes on to its next kernel while the last one's worker waits for the guard and
    exits (a CUDA context's teardown); nothing is left unjoined once the pool is done."""
    pool, guard = _guarded()
    with pool:
        guard.pid = pool.run(("ok", 1), timeout_s=30)[2]
        pool.close(wait=False)
        assert guard.seen == [] and _running(guard.pid)  # not waited for
        after = pool.run(("ok", 2), timeout_s=30)  # a fresh worker at once
        assert after[2] != guard.pid
    assert guard.seen[:2] == [("entered", True), ("left", False)]  # then the fresh one's
    with pytest.raises(ProcessLookupError):
        os.kill(guard.pid, 0)  # killed, and reaped


def test_a_module_the_fork_server_cannot_import_fails_only_what_needs_it(tmp_path):
    """A cuda-python that raises on import (not ImportError: a driver library it cannot load)
    leaves the fork server up: a child that does not need it starts and ends well; one that does
    fails in itself, saying why."""
    broken = tmp_path / "cuda"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise RuntimeError('no driver library here')\n")
    script = (
        "import importlib\n"
        "from harness.processes import fork_server\n"
        "if __name__ == '__main__':\n"
        "    context = fork_server()\n"
        "    needs_cuda = (importlib.import_module, ('harness.run.case',))\n"
        "    for target, args in ((print, ('forked',)), needs_cuda):\n"
        "        child = context.Process(target=target, args=args)\n"
        "        child.start()\n"
        "        child.join()\n"
        "        print('exit', child.exitcode, flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["forked", "exit", "0", "exit", "1"], done.stderr
    assert "RuntimeError: no driver library here" in done.stderr
