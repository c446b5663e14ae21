"""Several GPUs, faked: every cell once, shards balanced by expected time, a crash kept to its
GPU. The workers are fake_workers.fake_gpu processes; nothing here needs a GPU."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from harness.model.discovery import kernel_folders, load_kernel
from harness.model.matrix import ComputeCapability
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.running import Workers
from harness.pipeline.stages import run_target
from harness.run.device import DeviceInfo
from harness.run.schedule import (
    AHEAD_MEMORY_MAX,
    ExpectedTime,
    ahead_memory,
    balanced_parts,
    estimate,
    expected_time,
    pipeline_order,
    within_memory,
)
from harness.spec import Work
from tests import fake_workers
from tests.conftest import ROOT

FAKES = Workers(fake_workers.fake_gpu, fake_workers.serve_case)


def _gpus(count: int) -> list[DeviceInfo]:
    return [
        DeviceInfo(
            i, "Fake GPU", ComputeCapability(9, 0), "580", "13.0", 132, 50 << 20, 227 << 10, None
        )
        for i in range(count)
    ]


def _cases() -> set[tuple[str, str]]:
    kernels = [load_kernel(folder) for folder in kernel_folders(ROOT / "kernels")]
    runs_on_sm90 = [k for k in kernels if str(k.spec.requires or "none") != "sm_100a"]
    return {(k.classname, c.name) for k in runs_on_sm90 for c in k.spec.cases}


def _run(matrix, toolchain, compile_cache, tmp_path, gpus):
    options = RunOptions(
        matrix.targets["sm_90a"], (ROOT / "kernels",), tmp_path / "reports", compile_cache
    )
    result = run_target(matrix, options, toolchain, _gpus(gpus), FAKES)
    return [c for c in result.cells if c.kind is not CellKind.COMPILE], result


def _ran(cells):
    """The cells a (fake) GPU ran: not those the target cannot express (sm_100a kernels)."""
    return [c for c in cells if c.skip_reason is not SkipReason.TARGET_UNSUPPORTED]


@pytest.mark.corpus
def test_four_fake_gpus_run_every_cell_once_balanced_by_expected_time(
    matrix, toolchain, compile_cache, tmp_path
):
    first, result = _run(matrix, toolchain, compile_cache, tmp_path, 4)
    assert Counter((c.classname, c.case) for c in first) == Counter(_cases())
    assert {c.gpu for c in _ran(first)} == {0, 1, 2, 3}
    assert result.report.wall_s > 0 and result.report.finished
    # The second run expects what the first took, and balances its shards by it.
    second, _ = _run(matrix, toolchain, compile_cache, tmp_path, 4)
    assert Counter((c.classname, c.case) for c in second) == Counter(_cases())
    loads = defaultdict(float)
    for cell in _ran(second):
        loads[cell.gpu] += fake_workers.fake_seconds(cell.classname, cell.case)
    mean = sum(loads.values()) / 4
    assert max(abs(load - mean) for load in loads.values()) <= 0.2 * mean, dict(loads)
    assert [c.name for c in second] == [c.name for c in first]  # the report's order is the book's


@pytest.mark.corpus
def test_a_crash_on_one_gpu_fails_its_case_and_restarts_only_that_worker(
    matrix, toolchain, compile_cache, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_GPU_CRASH", f"2:{tmp_path / 'crashed'}")
    cells, _ = _run(matrix, toolchain, compile_cache, tmp_path, 4)
    assert Counter((c.classname, c.case) for c in cells) == Counter(_cases())  # none lost
    (crashed,) = [c for c in _ran(cells) if c.outcome is not Outcome.PASSED]
    assert crashed.gpu == 2 and "worker process killed by SIGSEGV" in crashed.message
    # each kernel's cells on each GPU come from one worker (the fake's message names its pid),
    # but the crashed kernel's on GPU 2: a fresh worker took its cases after the crash, unless
    # the crash was its last case there, and the first of them paid for that worker's start
    workers = defaultdict(set)
    for cell in _ran(cells):
        if cell.outcome is Outcome.PASSED:
            workers[cell.gpu, cell.classname].add(cell.message.split()[1])
    restarted = {key for key, pids in workers.items() if len(pids) > 1}
    assert restarted <= {(2, crashed.classname)}, restarted
    after = [c for c in _ran(cells) if (c.gpu, c.classname) == (2, crashed.classname)]
    assert not restarted or any(c.worker_start_s for c in after if c is not crashed)
    # a worker's start is paid once, by one case: a kernel's first, or the one after a crash
    starts = Counter((c.gpu, c.classname) for c in cells if c.worker_start_s)
    assert all(count <= 1 + ((gpu, kernel) in restarted) for (gpu, kernel), count in starts.items())


@pytest.mark.corpus
def test_each_kernel_runs_in_workers_of_its_own(matrix, toolchain, compile_cache, tmp_path):
    """No worker serves two kernels, so no spec is in a process that judges another's cells."""
    cells, _ = _run(matrix, toolchain, compile_cache, tmp_path, 2)
    served = defaultdict(set)  # worker pid -> the spec files it was given, prepared or run
    pids = defaultdict(set)  # (kernel, gpu) -> worker pids
    for cell in _ran(cells):
        pid, _, specs = cell.message.removeprefix("pid ").partition(" served ")
        served[pid].update(eval(specs))  # the fake's own repr of a sorted list of paths
        pids[cell.classname, cell.gpu].add(pid)
    assert all(len(specs) == 1 for specs in served.values()), served
    assert all(len(workers) == 1 for workers in pids.values()), pids
    assert len(served) == len(pids)  # a worker per kernel and GPU


def test_shards_are_balanced_longest_first():
    weights = [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0]
    shards = balanced_parts(weights, lambda w: w, 3)
    assert sorted(sum(s) for s in shards) == [14.0, 15.0, 16.0]  # LPT: within the last item
    assert all(s == sorted(s, reverse=True) for s in shards)
    assert balanced_parts([], lambda w: w, 2) == [[], []]


def test_a_case_is_expected_to_take_what_it_took_else_what_its_size_says():
    last = {("ch.k", "big"): ExpectedTime(host_s=1.5, turn_s=3.5)}
    assert expected_time(("ch.k", "big"), last, None) == ExpectedTime(1.5, 3.5)
    large, small = Work(bytes=1 << 30), Work(bytes=1 << 10)
    assert expected_time(("ch.k", "new"), last, large) == estimate(large)
    assert estimate(large).host_s > 10 * estimate(small).host_s
    assert estimate(large).turn_s > 5 * estimate(small).turn_s
    # a small case waits on its turn (timing), a large one on its host work (inputs, reference)
    assert estimate(small).host_s < estimate(small).turn_s
    assert estimate(large).host_s > estimate(large).turn_s


def test_each_gpu_takes_its_cases_in_johnsons_order():
    cases = {
        "tiny": ExpectedTime(0.01, 0.2),
        "small": ExpectedTime(0.05, 0.3),
        "huge": ExpectedTime(3.0, 1.0),
        "large": ExpectedTime(1.0, 0.6),
        "mid": ExpectedTime(0.4, 0.3),
    }
    order = pipeline_order(list(cases), cases.__getitem__)
    # the GPU starts on what needs the least host work, and ends on the shortest turns
    assert order == ["tiny", "small", "huge", "large", "mid"]
    assert pipeline_order([], cases.__getitem__) == []


def test_cases_are_prepared_ahead_as_far_as_the_memory_set_aside_holds():
    gib = 1 << 30
    assert within_memory([gib, gib, gib, gib], 3 * gib) == 3
    assert within_memory([gib, 4 * gib, gib], 3 * gib) == 1  # not past a case that does not fit
    assert within_memory([8 * gib, gib], 3 * gib) == 1  # the next case always: it is needed
    assert within_memory([], gib) == 0
    assert 0 < ahead_memory() <= AHEAD_MEMORY_MAX


@pytest.mark.corpus
@pytest.mark.parametrize("gpus", [1])
def test_one_fake_gpu_numbers_its_cells_zero(matrix, toolchain, compile_cache, tmp_path, gpus):
    cells, _ = _run(matrix, toolchain, compile_cache, tmp_path, gpus)
    assert {c.gpu for c in _ran(cells)} == {0}
