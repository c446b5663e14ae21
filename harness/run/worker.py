"""The GPU side of a worker process: one CaseJob in, one Cell out; or one PairJob in (a case's
base and head builds, for `ab`), one PairTiming out; or a Prepare, which starts the host work
of the cases to come.

A worker serves one kernel. It starts knowing none (its CUDA context and imports are what take
time, so it may start before the kernels are known), and takes the kernel of the first job it
gets: it imports that kernel's spec, and refuses any job of another. A spec is Python that runs
in this process, so it could change how this process judges; it cannot reach another kernel's
cells, which other processes judge. Replies are JSON (the result model's form), read back and
checked by the run's process.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.model.cell import Provenance
from harness.model.codec import cell_json
from harness.model.discovery import KernelFolder, LoadedKernel, load_kernel
from harness.model.errors import SpecError
from harness.model.matrix import ABSettings, Target, TimerSettings
from harness.model.spec import Case
from harness.run.device import DeviceInfo
from harness.run.host_cache import HostCache
from harness.run.pool import Reply, Serve, WorkerPool
from harness.run.quiet import held_shared
from harness.run.vendor_timing import import_quietly
from harness.sandbox import Confinement, confine


@dataclass(frozen=True)
class WorkerSetup:
    device: DeviceInfo
    timer: TimerSettings
    host_threads: int | None = None  # cores for this worker's host work; None: all of them
    quiet_lock: Path | None = None  # the file lock the GPU's workers time under (quiet.py)
    ahead_bytes: int | None = None  # host memory for cases prepared ahead; None: its own share
    preload: tuple[str, ...] = ()  # modules its kernel's vendor imports: imported at its start
    confinement: Confinement | None = None  # what it may touch once it imports a spec
    host_cache: Path | None = None  # the compile cache, where cases' host work is kept
    offers: Path | None = None  # where it writes host work for the run to keep (host_cache.py)
    keep_min_s_per_gib: float = 0.0  # host work made faster for its size is not offered


@dataclass(frozen=True)
class CaseJob:
    spec_file: Path
    case_name: str
    target: Target
    binary: Path
    provenance: Provenance
    upcoming: tuple[CaseJob, ...] = ()  # the jobs that follow: their host work starts early


@dataclass(frozen=True)
class Prepare:
    """The first jobs of the worker's kernel, to start their host work: answered once that
    has begun and what the kernel's vendor imports is in."""

    jobs: tuple[CaseJob, ...]


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


class OtherKernel(Exception):
    """A job of a kernel other than the one this worker serves: the run's bug, never served."""


class _Worker:
    def __init__(self, setup: WorkerSetup):
        from harness.run.case import GpuRuntime  # cuda-python is imported in the worker only
        from harness.run.printed import Printed
        from harness.run.quiet import QuietLock

        if setup.confinement is not None:  # first, while this process has one thread: every
            confine(setup.confinement)  # thread it starts from now on is confined too
        self.host_cache = None
        if setup.host_cache is not None and setup.offers is not None:
            # as the check cache keys it: where a run may not write (its own reports and cache
            # folders) and its offer folder differ between runs that read alike, and host work
            # that writes is not kept
            confined = setup.confinement
            kept = dataclasses.replace(confined, read_only=(), own=()) if confined else None
            said = kept.to_json() if kept else None
            self.host_cache = HostCache(
                setup.host_cache, setup.offers, said, setup.keep_min_s_per_gib
            )
            self.host_cache.start()
        for module in setup.preload:  # beside the CUDA start-up: ready by the vendor's turn
            threading.Thread(target=self._preload, args=(module,), daemon=True).start()
        quiet = QuietLock(setup.quiet_lock)
        self.runtime = GpuRuntime(
            setup.device,
            setup.timer,
            setup.host_threads,
            quiet,
            setup.ahead_bytes,
            printed=Printed(),
            host_cache=self.host_cache,
        )
        self.kernels: dict[Path, LoadedKernel] = {}
        self.serves: frozenset[Path] | None = None  # the spec files of its kernel, once bound

    def run(self, job: CaseJob | PairJob | Prepare) -> Reply:
        if isinstance(job, PairJob):
            return self._pair(job)
        if isinstance(job, Prepare):
            if not job.jobs:  # nothing to prepare, and no kernel to serve yet
                return Reply(0)
            self._bind(job.jobs[0].spec_file)
            upcoming = self._upcoming(job.jobs)
            self.runtime.prepare_ahead(upcoming)
            # Answered once what its vendor imports is in (begun at the worker's start): until
            # then the run passes this kernel over for one whose worker has answered.
            for module in upcoming[0].kernel.declared.preload if upcoming else ():
                import_quietly(module)
            return Reply(len(job.jobs))
        self._bind(job.spec_file)
        kernel, case = self._case_of(job)
        cell, healthy = self.runtime.run_case(
            kernel,
            case,
            job.target,
            job.binary,
            job.provenance,
            upcoming=self._upcoming(job.upcoming),
        )
        offers = self.host_cache.offers() if self.host_cache else []
        return Reply({"cell": cell_json(cell), "offers": offers}, replace_me=not healthy)

    def _preload(self, module: str) -> None:
        if self.host_cache is not None:
            self.host_cache.recorder.quiet()
        import_quietly(module)

    def _bind(self, *spec_files: Path) -> None:
        """Serve the kernel of `spec_files` (a PairJob's two, one otherwise) from now on;
        OtherKernel if this worker serves another."""
        files = frozenset(spec_files)
        if self.serves is None:
            self.serves = files
        elif not files <= self.serves:
            raise OtherKernel(f"this worker serves {sorted(map(str, self.serves))}, not {files}")

    def _upcoming(self, jobs: tuple[CaseJob, ...]) -> tuple[Any, ...]:
        from harness.run.case import Upcoming

        upcoming = []
        for later in jobs:
            if self.serves is None or later.spec_file not in self.serves:
                continue  # another kernel's: its own worker prepares it
            try:
                later_kernel, later_case = self._case_of(later)
            except SpecError:  # its own job reports that; nothing to start early
                continue
            upcoming.append(Upcoming(later_kernel, later_case, later.target, later.binary))
        return tuple(upcoming)

    def _pair(self, job: PairJob) -> Reply:
        from harness.run.paired import PairTiming, Side, time_pair

        self._bind(job.base_spec, job.head_spec)
        sides = []
        for name, spec_file, binary in (
            ("base", job.base_spec, job.base_binary),
            ("head", job.head_spec, job.head_binary),
        ):
            try:
                kernel, case = self._kernel_case(spec_file, job.case_name)
                module = self.runtime.module(binary, job.target, kernel.spec.context)
            except Exception as error:  # a spec or binary the parent could use, changed since
                why = f"the {name} could not be loaded: {type(error).__name__}: {error}"
                return Reply(asdict(PairTiming(why=why)))
            sides.append(Side(kernel, case, module))
        timing, healthy = time_pair(self.runtime, sides[0], sides[1], job.settings)
        return Reply(asdict(timing), replace_me=not healthy)

    def _case_of(self, job: CaseJob) -> tuple[LoadedKernel, Case]:
        """SpecError if the spec no longer loads: the parent read it fine; it changed since."""
        return self._kernel_case(job.spec_file, job.case_name)

    def _kernel_case(self, spec_file: Path, case_name: str) -> tuple[LoadedKernel, Case]:
        if spec_file not in self.kernels:
            if self.host_cache is None:
                self.kernels[spec_file] = load_kernel(KernelFolder.of(spec_file))
            else:
                with self.host_cache.recording() as heard:
                    self.kernels[spec_file] = load_kernel(KernelFolder.of(spec_file))
                self.host_cache.imported(heard[0])
        kernel = self.kernels[spec_file]
        named = [c for c in kernel.spec.cases if c.name == case_name]
        if len(named) != 1:
            raise SpecError(f"{spec_file}: no longer declares one case {case_name!r}")
        return kernel, named[0]


def start(setup: WorkerSetup) -> _Worker:
    return _Worker(setup)


def serve(worker: _Worker, job: CaseJob | PairJob | Prepare) -> Reply:
    return worker.run(job)


def gpu_pool(
    setup: WorkerSetup,
    starting: Callable[[WorkerSetup], object] = start,
    serving: Serve = serve,
) -> WorkerPool:
    """A pool of workers of the GPU `setup` names (started and served by `starting` and
    `serving`, or fakes), which kills one only under that GPU's lock, held shared: never beside
    a timing (harness.run.pool)."""
    return WorkerPool(starting, serving, setup, functools.partial(held_shared, setup.quiet_lock))
