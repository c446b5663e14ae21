"""Lanes: kernels in flight on one GPU at once, their timings taking turns under the GPU's quiet
lock (harness.run.quiet), their memory reserved together, a hang of one never failing the other
(harness.run.lanes). The GPUs are fake_workers.fake_gpu processes that take the real lock."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time

import pytest

from harness.model.matrix import ComputeCapability
from harness.model.outcome import CellKind, Outcome
from harness.pipeline.context import RunOptions
from harness.pipeline.running import Workers
from harness.pipeline.stages import run_target
from harness.run.device import DeviceInfo
from harness.run.lanes import Flight, Lanes
from harness.run.quiet import QuietLock, held_shared
from tests import fake_workers
from tests.conftest import PLANTED

FAKES = Workers(fake_workers.fake_gpu, fake_workers.serve_case)


def _holds_within(lock_in, seconds: float = 0.3) -> bool:
    """Whether another thread takes `lock_in` (a context manager factory) within `seconds`."""
    taken = threading.Event()

    def take() -> None:
        with lock_in():
            taken.set()

    threading.Thread(target=take, daemon=True).start()
    return taken.wait(seconds)


def test_shared_holds_overlap_and_a_timing_excludes_them(tmp_path):
    path = tmp_path / "gpu0.lock"
    mine, theirs = QuietLock(path), QuietLock(path)  # two open files: as two processes
    with mine.shared():
        assert _holds_within(theirs.shared)
        assert not _holds_within(theirs.exclusive)
    with mine.exclusive():
        assert not _holds_within(theirs.shared)
        waited = theirs.waited_s
    time.sleep(0.1)
    assert theirs.waited_s >= waited + 0.2  # what its thread waited for the file, counted


def test_a_timing_inside_a_shared_hold_is_exclusive_for_its_length_only(tmp_path):
    path = tmp_path / "gpu0.lock"
    mine, theirs = QuietLock(path), QuietLock(path)
    with mine.shared():
        with mine.exclusive():  # a vendor library's timing, set up under the shared hold
            assert not _holds_within(theirs.shared)
        assert _holds_within(theirs.shared)  # shared again
        assert not _holds_within(theirs.exclusive)
    assert _holds_within(theirs.exclusive)


def test_shared_holds_on_files_of_their_own_overlap_on_threads_of_one_process(tmp_path):
    """Workers killed at once (harness.run.pool's exit guard) hold the lock together, not one
    after another, and none while a case is timed."""
    path = tmp_path / "gpu0.lock"
    one = QuietLock(path)
    with held_shared(path):
        assert _holds_within(lambda: held_shared(path))
        assert not _holds_within(one.exclusive)
    with one.shared():  # one QuietLock: its other threads wait
        assert not _holds_within(one.shared)
    with one.exclusive():
        assert not _holds_within(lambda: held_shared(path))
    one.close()


def test_a_case_of_unknown_or_large_size_runs_alone_and_waits_its_turn():
    lanes = Lanes(memory_bytes=100)
    assert lanes.weight(None) == lanes.budget == 50
    assert lanes.weight(80) == 50 and lanes.weight(10) == 10
    assert Lanes(memory_bytes=None).weight(None) == 0  # a driver that does not say: no budget
    order = []
    with lanes.flight(0, 10):
        big = threading.Thread(target=lambda: _fly(lanes, 1, None, order, "big"))
        big.start()
        time.sleep(0.2)
        small = threading.Thread(target=lambda: _fly(lanes, 2, 10, order, "small"))
        small.start()
        time.sleep(0.2)
        assert order == []  # the big one waits for the GPU's memory; the small one behind it
    big.join()
    small.join()
    assert order == ["big", "small"]


def _fly(lanes: Lanes, lane: int, size: int | None, order: list[str], name: str, **how) -> None:
    with lanes.flight(lane, size, **how):
        order.append(name)


def test_a_flight_alone_waits_for_the_others_and_holds_off_the_next():
    lanes = Lanes(memory_bytes=None)
    order = []
    with lanes.flight(0, 1):
        again = threading.Thread(target=lambda: _fly(lanes, 1, 1, order, "alone", alone=True))
        again.start()
        time.sleep(0.2)
        assert order == []
    again.join()
    with lanes.flight(1, 1, alone=True):
        other = threading.Thread(target=lambda: _fly(lanes, 0, 1, order, "next"))
        other.start()
        time.sleep(0.2)
        assert order == ["alone"]
    other.join()
    assert order == ["alone", "next"]


def test_a_timeout_beside_another_lanes_timeout_is_run_again_and_alone_is_not():
    lanes = Lanes(memory_bytes=None)
    with lanes.flight(0, None) as hanging, lanes.flight(1, None) as waiting:
        hanging.timed_out = waiting.timed_out = True
    assert lanes.flight_again(waiting) and lanes.flight_again(hanging)
    alone = Lanes(memory_bytes=None)
    with alone.flight(0, None) as own:
        own.timed_out = True
    with alone.flight(1, None):
        pass
    assert not alone.flight_again(own)
    assert not Flight(0, 1.0, 2.0).overlaps(Flight(1, 2.5, 3.0))


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "kernels"
    for name in ("add_one", "big_smem"):
        shutil.copytree(PLANTED / "planted" / name, root / "planted" / name)
    return root


def _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes: int, **env: str):
    log = tmp_path / f"lanes{lanes}.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    timer = dataclasses.replace(matrix.timer, lanes=lanes, case_timeout_s=3.0)
    matrix = dataclasses.replace(matrix, timer=timer)
    options = RunOptions(matrix.targets["sm_90a"], (project,), tmp_path / "reports", tmp_path)
    gpu = DeviceInfo(0, "Fake GPU", ComputeCapability(9, 0), "580", "13.0", 132, 50 << 20, 1, None)
    result = run_target(matrix, options, toolchain, [gpu], FAKES)
    spans = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    cells = {(c.kernel, c.case): c for c in result.cells if c.kind is CellKind.CASE}
    return cells, [(kernel, *map(float, times)) for kernel, _, *times in spans]


def _overlap(one, other) -> bool:
    return one[0] < other[1] and other[0] < one[1]


def test_two_lanes_overlap_two_kernels_cases_and_never_their_timings(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    (tmp_path / "meet").mkdir()  # each case waits there for a case of the other kernel
    meet = {"FAKE_GPU_MEET": str(tmp_path / "meet")}
    cells, spans = _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes=2, **meet)
    assert {c.outcome for c in cells.values()} == {Outcome.PASSED} and len(cells) == 4
    timings = [(timing, timed) for _, _, timing, timed, _ in spans]
    assert not any(_overlap(a, b) for i, a in enumerate(timings) for b in timings[i + 1 :])
    cases = [(kernel, (begun, ended)) for kernel, begun, _, _, ended in spans]
    assert any(
        k1 != k2 and _overlap(s1, s2) for i, (k1, s1) in enumerate(cases) for k2, s2 in cases[i:]
    )


def test_one_lane_runs_one_case_at_a_time(matrix, toolchain, project, tmp_path, monkeypatch):
    cells, spans = _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes=1)
    assert len(cells) == 4
    cases = [(begun, ended) for _, begun, _, _, ended in spans]
    assert not any(_overlap(a, b) for i, a in enumerate(cases) for b in cases[i + 1 :])


def test_a_kernel_that_hangs_holding_the_gpu_fails_alone(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    """big_smem's second case (blocks4; blocks1 runs first) hangs in its checked launch,
    holding the lock shared, soon after both lanes start; add_one's first case, which checks for
    1 s of its 3 s timeout, waits on it for its timing and times out first: run again, alone, it
    passes, and only the case that hangs fails."""
    hang = {"FAKE_GPU_HANG": "planted.big_smem::blocks4", "FAKE_GPU_CHECK_S": "1.0"}
    cells, _ = _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes=2, **hang)
    hung = cells["big_smem", "blocks4"]
    assert hung.outcome is Outcome.FAILED and "timeout" in hung.message, hung.message
    others = [cells["big_smem", "blocks1"], cells["add_one", "n1"], cells["add_one", "n1000"]]
    assert [c.outcome for c in others] == [Outcome.PASSED] * 3, [c.message for c in others]


def test_a_kernel_whose_worker_has_not_caught_up_is_passed_over_and_runs_once_it_has(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    """One lane, two kernels: the first in order, whose worker answers late (as one importing
    torch for its vendor does), runs after the other, not waited for before it; what the lane
    then still waited for it is its first case's wait for its worker."""
    (tmp_path / "first").mkdir()
    _, spans = _run(matrix, toolchain, project, tmp_path / "first", monkeypatch, lanes=1)
    first = spans[0][0]
    slow = {"FAKE_GPU_PREPARE_S": f"{first}:1.5"}
    cells, spans = _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes=1, **slow)
    assert {c.outcome for c in cells.values()} == {Outcome.PASSED} and len(cells) == 4
    order = [kernel for kernel, *_ in spans]
    assert order[:2] != [first] * 2 and order[-1] == first, order
    assert spans[0][1] < min(begun for kernel, begun, *_ in spans if kernel == first) - 1.0
    waited = [c for c in cells.values() if c.classname == first and c.worker_start_s]
    assert len(waited) == 1 and waited[0].worker_start_s > 0.3, waited


def test_a_worker_that_never_catches_up_costs_its_kernel_one_case_and_the_run_goes_on(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    """A worker that never answers the first cases it was told of (a vendor's import that
    hangs): the lane runs the other kernel, waits for it no longer than a case's timeout, and
    the kernel's first case fails saying so; a fresh worker runs the rest. No cell is lost."""
    (tmp_path / "first").mkdir()
    _, spans = _run(matrix, toolchain, project, tmp_path / "first", monkeypatch, lanes=1)
    first = spans[0][0]
    hang = {"FAKE_GPU_PREPARE_S": f"{first}:3600"}
    started = time.monotonic()
    cells, _ = _run(matrix, toolchain, project, tmp_path, monkeypatch, lanes=1, **hang)
    assert time.monotonic() - started < 30
    assert len(cells) == 4
    mine = [c for c in cells.values() if c.classname == first]
    others = [c for c in cells.values() if c.classname != first]
    assert [c.outcome for c in others] == [Outcome.PASSED] * 2
    failed = [c for c in mine if c.outcome is not Outcome.PASSED]
    assert len(failed) == 1 and "timeout" in failed[0].message, [c.message for c in mine]
