"""The run stage: each case launched, verified and timed on a GPU, in a worker process of its
kernel's own (harness.run.worker, whose case runs those steps in that order: harness.run.case).

With several GPUs visible, each has its own part of the cases (balanced by expected time); a
fault on one GPU fails only its case and restarts only that worker. A spec can reach no other
kernel's cells; the next kernel's worker starts, and starts its host work, while this one's
cases run. Each GPU takes its kernels, and each kernel its cases, in the order that overlaps
host work best with the GPU's (schedule.grouped_pipeline_order), `timing.lanes` kernels at once:
their timings take turns (harness.run.quiet), so one's checks run while another is timed
(harness.run.lanes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness import waiting
from harness.model.cell import Cell
from harness.model.codec import cell_from_json, report_from_json
from harness.model.declared import DeclaredCase
from harness.model.discovery import Kernel
from harness.model.errors import ReportError, Unavailable
from harness.model.outcome import CellKind
from harness.pipeline.cells import PlannedCell, settled_cell
from harness.pipeline.context import RunContext
from harness.pipeline.results import Results
from harness.run import worker
from harness.run.device import DeviceInfo
from harness.run.host_cache import Keeping
from harness.run.lanes import Lanes
from harness.run.pool import Serve, TimedOut, WorkerFault, WorkerPool
from harness.run.schedule import (
    AHEAD_CASES,
    ExpectedTime,
    ahead_memory,
    balanced_parts,
    grouped_pipeline_order,
)
from harness.run.worker import CaseJob, Prepare, WorkerSetup

T = TypeVar("T")


@dataclass(frozen=True)
class Workers:
    """How a GPU worker process is started and served: worker.start and worker.serve, or fakes."""

    start: Callable[[WorkerSetup], object] = worker.start
    serve: Serve = worker.serve


@dataclass(frozen=True)
class GpuJob:
    """A case cell that goes to a GPU."""

    kernel: Kernel
    case: DeclaredCase
    binary: Path
    expected_time: ExpectedTime
    verdict_key: str | None = None  # harness.pipeline.carrying; None: never carried


@dataclass(frozen=True)
class Gpu:
    """A GPU's workers: how one is set up, and the first ones, started before the kernels are
    known (first_workers()), which the first kernels take in turn."""

    setup: WorkerSetup
    workers: Workers
    first: tuple[WorkerPool, ...]
    keeping: Keeping  # what its workers offer to the host cache

    def pool(self, kernel: Kernel) -> WorkerPool:
        """A worker for `kernel` (not started yet), which imports what its vendor needs."""
        setup = dataclasses.replace(self.setup, preload=kernel.declared.preload)
        return _pool(self.workers, _offering(setup, self.keeping))


def _pool(workers: Workers, setup: WorkerSetup) -> WorkerPool:
    return worker.gpu_pool(setup, workers.start, workers.serve)


# Workers of one GPU holding cases prepared ahead at once: the one running, and the next three.
# A worker's start (its imports and CUDA context, ~1.2 s on an H200 machine) and its first
# cases' host work (up to ~1 s) outlast most kernels' turns there (0.4-1.4 s).
WORKERS_AHEAD = 4
CAUGHT_UP_POLL_S = 0.005  # how often a lane with no kernel to take asks the workers again


def first_workers(lanes: int, kernels: int) -> int:
    """How many workers a GPU starts before the kernels are known: as many as its lanes' first
    turns want up (each lane's kernel, and the next ones' up to WORKERS_AHEAD past the last
    lane's), at most one per kernel selected. Started later, the lanes' first cases would wait
    out their start (~1-2 s each on an H200 machine) instead of the load and compile stages."""
    return max(1, min(lanes + WORKERS_AHEAD - 1, kernels))


def start_workers(
    up: contextlib.ExitStack, context: RunContext, workers: Workers
) -> dict[int, Gpu]:
    """Each GPU, by ordinal, with its first workers starting (their imports and CUDA contexts
    overlap the load and compile stages); what `up` closes."""
    devices = context.devices
    if isinstance(devices, Unavailable):
        return {}
    host_threads = max(1, (os.cpu_count() or 1) // len(devices))
    ahead_bytes = ahead_memory() // (WORKERS_AHEAD * len(devices))
    locks = Path(up.enter_context(tempfile.TemporaryDirectory(prefix="cuda-matrix-")))
    gpus, kept = {}, context.matrix.host_cache
    # closed after the workers: what they offered is kept first
    keeping = up.enter_context(Keeping(context.options.cache_dir, int(kept.max_gib * 2**30)))
    for device in devices:
        quiet = locks / f"gpu{device.ordinal}.lock"
        setup = WorkerSetup(
            device,
            context.matrix.timer,
            host_threads,
            quiet,
            ahead_bytes,
            confinement=context.confinement,
            host_cache=context.options.cache_dir if kept.max_gib > 0 else None,
            keep_min_s_per_gib=kept.min_s_per_gib,
        )
        first = []
        for _ in range(first_workers(context.matrix.timer.lanes, len(context.folders))):
            pool = _pool(workers, _offering(setup, keeping))
            up.enter_context(pool).start()
            first.append(pool)
        gpus[device.ordinal] = Gpu(setup, workers, tuple(first), keeping)
    return gpus


def _offering(setup: WorkerSetup, keeping: Keeping) -> WorkerSetup:
    """`setup` for a worker of its own folder to offer host work in, the one folder inside the
    cache its confinement lets it write; none kept or served where no folder can be made."""
    if setup.host_cache is None:
        return setup
    offers = keeping.folder()
    if offers is None:
        return dataclasses.replace(setup, host_cache=None)
    confined = setup.confinement
    if confined is not None:
        confined = dataclasses.replace(confined, own=(offers,))
    return dataclasses.replace(setup, offers=offers, confinement=confined)


def run_on_gpus(
    context: RunContext, jobs: list[GpuJob], gpus: dict[int, Gpu], results: Results
) -> None:
    """Every job on one of the run's GPUs, each device working through its part kernel by
    kernel, each kernel in a worker of its own (`gpus`, by device ordinal); each cell goes to
    `results` the moment it is done."""
    assert not isinstance(context.devices, Unavailable)  # no GPU, no job
    devices = list(context.devices)
    balanced = balanced_parts(jobs, lambda job: job.expected_time.turn_s, len(devices))
    parts = [
        grouped_pipeline_order(
            queue, lambda job: job.kernel.classname, lambda job: job.expected_time
        )
        for queue in balanced
    ]
    longest = max(sum(j.expected_time.turn_s for group in part for j in group) for part in parts)
    results.expect(len(jobs), longest)

    def drive(device: DeviceInfo, groups: list[list[GpuJob]]) -> None:
        gpu = gpus[device.ordinal]
        with contextlib.ExitStack() as up:
            pools = _pools(gpu, groups, up)
            turns = _Turns(context, groups, pools)
            lanes = Lanes(device.memory_bytes)

            def lane(number: int) -> None:
                while (turn := turns.next()) is not None:
                    group, pool, waited_s = turn  # waited for its worker to catch up
                    for at, job in enumerate(group):
                        after = group[at + 1 : at + 1 + AHEAD_CASES]
                        upcoming = tuple(_case_job(context, later) for later in after)
                        case_job = _case_job(context, job, upcoming)
                        before_s = waited_s if at == 0 else 0.0
                        cell = _run_in_lane(
                            context, lanes, number, pool, job, case_job, gpu, before_s
                        )
                        results.add([cell])
                    pool.close(wait=False)  # the lane's next kernel need not wait for its exit

            _all_at_once(lane, range(min(context.matrix.timer.lanes, len(groups))))

    busy = [(d, q) for d, q in zip(devices, parts, strict=True) if q]
    _all_at_once(lambda pair: drive(*pair), busy)


def _pools(gpu: Gpu, groups: list[list[GpuJob]], up: contextlib.ExitStack) -> list[WorkerPool]:
    """A worker for each group's kernel: the GPU's first workers for the first kernels, in
    order, but a kernel whose vendor needs a module that takes seconds to import (torch), which
    gets one of its own, importing it from now on; the first workers left over are closed."""
    first = list(gpu.first)
    pools = []
    for group in groups:
        kernel = group[0].kernel
        if first and not kernel.declared.preload:
            pools.append(first.pop(0))
            continue
        pool = up.enter_context(gpu.pool(kernel))
        if kernel.declared.preload:
            pool.start()
        pools.append(pool)
    for spare in first:  # more than this GPU's part has kernels
        spare.close(wait=False)
    return pools


def _all_at_once(call: Callable[[T], None], each: Iterable[T]) -> None:
    """`call` of every item at once, each in a thread of its own (one alone in this one); what
    the first that failed raised (a harness bug), raised again here once all are done."""
    items = list(each)
    if len(items) == 1:
        call(items[0])
        return
    failures: list[BaseException] = []

    def guarded(item: T) -> None:
        try:
            call(item)
        except BaseException as error:  # raised again in the caller's thread
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(item,), daemon=True) for item in items]
    for thread in threads:
        thread.start()
    waiting.join(threads)
    if failures:
        raise failures[0]


class _Turns:
    """A GPU's kernels, handed out in order to its lanes, each with its worker; the workers of
    the next WORKERS_AHEAD kernels told their first cases as each is handed out.

    Of those WORKERS_AHEAD kernels, a lane takes the first whose worker has caught up (is up,
    and has answered what it was told): one still starting, or importing what its vendor needs
    (torch takes 5-7 s on an H200 machine), keeps its place at the front while the lanes' time
    goes to kernels that can run now. Where none has caught up, the lane waits for the first
    that does; where none of them is on its way to it (their workers failed), it takes the
    first, whose run says why."""

    def __init__(self, context: RunContext, groups: list[list[GpuJob]], pools: list[WorkerPool]):
        self._context, self._groups, self._pools = context, groups, pools
        self._left = list(range(len(groups)))  # the kernels not handed out, in order
        self._prepared: set[int] = set()
        self._lock = threading.Lock()

    def next(self) -> tuple[list[GpuJob], WorkerPool, float] | None:
        """The next kernel's jobs, its worker, and how long the lane waited for it to catch
        up (the other lanes' choosing included); None when every kernel is handed out."""
        started = time.monotonic()
        with self._lock:
            if not self._left:
                return None
            ahead = self._left[:WORKERS_AHEAD]
            for index in ahead:  # their workers: up, and preparing their first cases
                if index not in self._prepared:
                    self._pools[index].post(_prepare(self._context, self._groups[index]))
                    self._prepared.add(index)
            chosen = self._first_caught_up(ahead, time.monotonic() + self._context.case_timeout_s)
            self._left.remove(chosen)
            waited = time.monotonic() - started
            if waited < CAUGHT_UP_POLL_S:  # no poll: it had caught up already
                waited = 0.0
            return self._groups[chosen], self._pools[chosen], waited

    def _first_caught_up(self, ahead: list[int], deadline: float) -> int:
        while time.monotonic() < deadline:
            for index in ahead:
                if self._pools[index].caught_up():
                    return index
            if not any(self._pools[index].on_its_way() for index in ahead):
                break
            time.sleep(CAUGHT_UP_POLL_S)
        return ahead[0]


def _run_in_lane(
    context: RunContext,
    lanes: Lanes,
    lane: int,
    pool: WorkerPool,
    job: GpuJob,
    case_job: CaseJob,
    gpu: Gpu,
    before_s: float = 0.0,
) -> Cell:
    """The job's cell, run in `lane` of its GPU; once more, alone, where it timed out beside
    another lane's case that timed out (harness.run.lanes). `before_s`: what the lane waited
    for its worker before it sent the job (its kernel's first)."""
    moves = job.case.work.bytes if job.case.work is not None else None
    for attempt in range(2):
        size = None if moves is None else int(moves)
        with lanes.flight(lane, size, alone=attempt == 1) as flight:
            waited_s = before_s if attempt == 0 else 0.0
            cell, flight.timed_out = _run_one(context, pool, job, case_job, gpu, waited_s)
        if not flight.timed_out or attempt == 1 or not lanes.flight_again(flight):
            break
    return cell


def _prepare(context: RunContext, group: list[GpuJob]) -> Prepare:
    """What starts the host work of a kernel's first cases in its worker."""
    return Prepare(tuple(_case_job(context, job) for job in group[:AHEAD_CASES]))


def _run_one(
    context: RunContext,
    pool: WorkerPool,
    job: GpuJob,
    case_job: CaseJob,
    gpu: Gpu,
    before_s: float = 0.0,
) -> tuple[Cell, bool]:
    """The job's cell, and whether it timed out; what its worker offers to the host cache is
    kept as the kernel's. `before_s`: what the lane waited for the worker to catch up before
    it sent the job, counted as the case's wait for its worker's start."""
    started = time.monotonic()
    timed_out = False
    try:
        reply = pool.run(case_job, context.case_timeout_s)
        cell = _cell_of(reply, job, case_job)
        offers = pool.setup_arg.offers
        if offers is not None:
            gpu.keeping.take(job.kernel.classname, offers, reply.get("offers"))
    except WorkerFault as fault:  # the worker died on this case, or answered nonsense
        planned = PlannedCell(CellKind.CASE, job.case.name)
        cell = settled_cell(job.kernel, planned, context.target, context.provenance, fault)
        timed_out = isinstance(fault, TimedOut)
    waited = time.monotonic() - started + before_s
    # a faulted case costs what the parent waited, worker start included
    cell.seconds = cell.seconds or waited
    if cell.stages is not None:
        cell.stages = dataclasses.replace(cell.stages, waited_s=round(waited, 6))
    if pool.start_s or before_s:  # a kernel's first case, or the one after a fault
        cell.worker_start_s = pool.start_s + before_s
    cell.gpu = gpu.setup.device.ordinal
    # the parent's word, never the worker's: a spec could name another cell's key, or a source
    cell.verdict_key, cell.carried_from = job.verdict_key, None
    return cell, timed_out


def _cell_of(reply: object, job: GpuJob, case_job: CaseJob) -> Cell:
    """The cell a worker sent for `job` (its reply's "cell"), read back and checked to be that
    job's: a worker runs a spec, and may say anything; WorkerFault where it is not that job's
    cell."""
    try:
        if not isinstance(reply, dict):
            raise TypeError(f"{type(reply).__name__}, not an object")
        record = reply.get("cell")
        if not isinstance(record, dict):
            raise TypeError(f"its cell is a {type(record).__name__}, not an object")
        cell = cell_from_json(record, case_job.target.name, case_job.provenance)
    except (KeyError, TypeError, ValueError) as error:
        raise WorkerFault(f"the worker's cell is not readable: {error}") from None
    answered = (cell.kind, cell.chapter, cell.kernel, cell.case)
    asked = (CellKind.CASE, job.kernel.chapter, job.kernel.name, job.case.name)
    if answered != asked:
        raise WorkerFault(f"the worker answered for another cell: {answered[1:]}, not {asked[1:]}")
    return cell


def _case_job(context: RunContext, job: GpuJob, upcoming: tuple[CaseJob, ...] = ()) -> CaseJob:
    return CaseJob(
        job.kernel.folder / "spec.py",
        job.case.name,
        context.target,
        job.binary,
        context.provenance,
        upcoming,
    )


def expected_of_last_run(json_file: Path) -> dict[tuple[str, str], ExpectedTime]:
    """What each case cell took in the report this run replaces, its host work apart from its
    turn on the GPU; empty when there is none."""
    try:
        last = report_from_json(json.loads(json_file.read_text()), json_file)
    except (OSError, ValueError, ReportError):  # none yet, unreadable, or of another schema
        return {}
    return {
        (c.classname, c.case): ExpectedTime(
            c.stages.setup_s + c.stages.reference_s if c.stages else 0.0, c.seconds
        )
        for c in last.cells
        if c.kind is CellKind.CASE and c.carried_from is None  # a carried cell took none
    }


def shared_gpu(cells: list[Cell]) -> str | None:
    """What the report says of a GPU that another process used during the run: how many timed
    cells saw it, and the first one's why."""
    timed = [cell for cell in cells if cell.timing]
    shared = [cell for cell in timed if cell.timing and cell.timing.shared_gpu]
    if not shared:
        return None
    first = shared[0]
    why = first.timing.shared_gpu if first.timing else ""
    return (
        f"{len(shared)} of {len(timed)} timed cells ran while another process used the GPU "
        f"(the first, {first.classname} {first.name}: {why})"
    )
