"""The GPU side of a worker process: one CaseJob in, one Cell out.

Kernel specs hold functions, which do not cross process boundaries, so a job names the kernel by
its spec file and the worker imports it (once) itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.model.discovery import Kernel, KernelFolder, load_kernel
from harness.model.matrix import Target, TimerSettings
from harness.model.result import Provenance, SpecError
from harness.run.device import DeviceInfo
from harness.run.pool import Reply
from harness.spec import Case


@dataclass(frozen=True)
class WorkerSetup:
    device: DeviceInfo
    timer: TimerSettings
    host_threads: int | None = None  # cores for this worker's host work; None: all of them


@dataclass(frozen=True)
class CaseJob:
    spec_file: Path
    case_name: str
    target: Target
    binary: Path
    provenance: Provenance
    upcoming: tuple[CaseJob, ...] = ()  # the jobs that follow: their host work starts early


class _Worker:
    def __init__(self, setup: WorkerSetup):
        from harness.run.case import GpuRuntime  # cuda-python is imported in the worker only

        self.runtime = GpuRuntime(setup.device, setup.timer, setup.host_threads)
        self.kernels: dict[Path, Kernel] = {}

    def run(self, job: CaseJob) -> Reply:
        from harness.run.case import Upcoming

        kernel, case = self._case_of(job)
        upcoming = []
        for later in job.upcoming:
            try:
                later_kernel, later_case = self._case_of(later)
            except SpecError:  # its own job reports that; nothing to start early
                continue
            upcoming.append(Upcoming(later_kernel, later_case, job.target, later.binary))
        cell, healthy = self.runtime.run_case(
            kernel, case, job.target, job.binary, job.provenance, upcoming=tuple(upcoming)
        )
        return Reply(cell, replace_me=not healthy)

    def _case_of(self, job: CaseJob) -> tuple[Kernel, Case]:
        """SpecError if the spec no longer loads: the parent loaded it fine; it changed since."""
        if job.spec_file not in self.kernels:
            self.kernels[job.spec_file] = load_kernel(KernelFolder.of(job.spec_file))
        kernel = self.kernels[job.spec_file]
        (case,) = [c for c in kernel.spec.cases if c.name == job.case_name]
        return kernel, case


def start(setup: WorkerSetup) -> _Worker:
    return _Worker(setup)


def serve(worker: _Worker, job: CaseJob) -> Reply:
    return worker.run(job)
