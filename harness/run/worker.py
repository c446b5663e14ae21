"""The GPU side of a worker process: one CaseJob in, one Cell out; or one PairJob in (a case's
base and head builds, for `ab`), one PairTiming out.

Kernel specs hold functions, which do not cross process boundaries, so a job names the kernel by
its spec file and the worker imports it (once) itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.model.discovery import Kernel, KernelFolder, load_kernel
from harness.model.matrix import ABSettings, Target, TimerSettings
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


@dataclass(frozen=True)
class PairJob:
    """A case of two builds of one kernel, timed against each other: each spec file names its
    side's kernel, and `case_name` the case in both."""

    base_spec: Path
    head_spec: Path
    case_name: str
    target: Target
    base_binary: Path
    head_binary: Path
    settings: ABSettings


class _Worker:
    def __init__(self, setup: WorkerSetup):
        from harness.run.case import GpuRuntime  # cuda-python is imported in the worker only

        self.runtime = GpuRuntime(setup.device, setup.timer, setup.host_threads)
        self.kernels: dict[Path, Kernel] = {}

    def run(self, job: CaseJob | PairJob) -> Reply:
        if isinstance(job, PairJob):
            return self._pair(job)
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

    def _pair(self, job: PairJob) -> Reply:
        from harness.run.paired import PairTiming, Side, time_pair

        sides = []
        for name, spec_file, binary in (
            ("base", job.base_spec, job.base_binary),
            ("head", job.head_spec, job.head_binary),
        ):
            try:
                kernel, case = self._kernel_case(spec_file, job.case_name)
                module = self.runtime.module(binary, job.target)
            except Exception as error:  # a spec or binary the parent could use, changed since
                why = f"the {name} could not be loaded: {type(error).__name__}: {error}"
                return Reply(PairTiming(why=why))
            sides.append(Side(kernel, case, module))
        timing, healthy = time_pair(self.runtime, sides[0], sides[1], job.settings)
        return Reply(timing, replace_me=not healthy)

    def _case_of(self, job: CaseJob) -> tuple[Kernel, Case]:
        """SpecError if the spec no longer loads: the parent loaded it fine; it changed since."""
        return self._kernel_case(job.spec_file, job.case_name)

    def _kernel_case(self, spec_file: Path, case_name: str) -> tuple[Kernel, Case]:
        if spec_file not in self.kernels:
            self.kernels[spec_file] = load_kernel(KernelFolder.of(spec_file))
        kernel = self.kernels[spec_file]
        (case,) = [c for c in kernel.spec.cases if c.name == case_name]
        return kernel, case


def start(setup: WorkerSetup) -> _Worker:
    return _Worker(setup)


def serve(worker: _Worker, job: CaseJob | PairJob) -> Reply:
    return worker.run(job)
