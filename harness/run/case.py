"""Runs a kernel's cases on the GPU: set up, launch, verify, then time what passed.

Imported only where a device exists, so machines without cuda-python's driver still compile and
report. A spec that raises is an `error` cell; a kernel that faults or computes wrong values is a
`failed` cell; either way the remaining cases still run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import traceback
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from cuda.core import Device

from harness.model.cell import Cell, Provenance, Stages, Timing
from harness.model.discovery import LoadedKernel
from harness.model.errors import CellError, KernelFailed, SpecError
from harness.model.matrix import Target, TimerSettings
from harness.model.outcome import CellKind, Outcome
from harness.model.spec import (
    Case,
    ContextLimits,
    DeviceLimits,
    DeviceUnsupported,
    Launch,
    Problem,
    StreamRef,
)
from harness.run.check_cache import Heard
from harness.run.checked import CudaError
from harness.run.context import ContextLimiter
from harness.run.device import DeviceInfo
from harness.run.digest import Digests
from harness.run.host_cache import HostCache, Kept, LiveDevice
from harness.run.launch import (
    POISON_BYTE,
    SECOND_POISON_BYTE,
    Module,
    Unlaunchable,
    Workspace,
    check_declared_fits,
    check_fits,
)
from harness.run.printed import Printed
from harness.run.quiet import QuietLock
from harness.run.schedule import AHEAD_CASES, AHEAD_UNKNOWN_BYTES, ahead_memory, within_memory
from harness.run.sharing import Neighbours, shared_why
from harness.run.staging import HostStaging
from harness.run.stand_in import FactLog
from harness.run.stray import Extreme, said, stray_reads
from harness.run.throughput import beyond_peak, throughput
from harness.run.timer import ClockProbe, StreamGate, measure
from harness.run.vendor_timing import import_quietly, measure_vendor
from harness.run.verify import (
    changed_elements,
    check_declared_bytes,
    check_reference_fits,
    checked_work,
    compare,
    declared_bytes,
    mismatch_count,
    unchanged,
)

T = TypeVar("T")


def seed_of(kernel: LoadedKernel, case: Case) -> int:
    """Stable across runs and machines, distinct per case: the recorded seed of its inputs."""
    return zlib.crc32(f"{kernel.classname}/{case.name}".encode())


def fresh_seed_of(kernel: LoadedKernel, case: Case) -> int:
    """The seed of the inputs the case is checked on after timing: inputs the kernel was never
    given before, so a result remembered from the timed launches cannot pass for a new one."""
    return zlib.crc32(f"{kernel.classname}/{case.name}/fresh".encode())


def describe_exception(error: BaseException) -> tuple[str, str]:
    """(one line for the message, the traceback for the cell's detail)."""
    return f"{type(error).__name__}: {error}", "".join(traceback.format_exception(error))


@dataclass(frozen=True)
class _Verified:
    """The digests of a run's outputs, the reference they were checked against, and the guard
    zones' digests as they were filled."""

    digests: Mapping[str, int]
    expected: Mapping[str, np.ndarray]
    guards: Mapping[str, int]


@dataclass(frozen=True)
class Upcoming:
    """The case a worker runs next, whose host work may start while this one is on the GPU."""

    kernel: LoadedKernel
    case: Case
    target: Target
    binary: Path


@dataclass(frozen=True)
class HostWork:
    """A case's host side, made on the host's cores (ahead of the GPU when the worker knows what
    comes next): its problem from setup() and its reference, or what the spec raised on the way,
    to be raised again at the case's turn (a reference that raises still lets the kernel run)."""

    problem: Problem | None
    expected: Mapping[str, np.ndarray] | None
    raised: CellError | None
    setup_s: float
    reference_s: float


def _spec_step(kernel: LoadedKernel, step: str, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, a function of the kernel's spec: what it raises is the spec's error, but
    for DeviceUnsupported, which skips the case."""
    try:
        return call(*args)
    except DeviceUnsupported:
        raise
    except Exception as error:  # anything a user's spec raises belongs to its cell
        message, detail = describe_exception(error)
        raise SpecError(f"{kernel.classname} spec {step}() raised {message}", detail) from error


class GpuRuntime:
    """One GPU's context, stream and timer, and the host threads that feed it.

    The GPU runs one case at a time. Host work overlaps it: the next case's setup and reference
    run on a thread of their own while this case is on the GPU, and comparisons spread over
    `host_threads` cores. Nothing touches the GPU while a case is timed: the CUDA calls host
    work makes (loading a module, and the occupancy query of setup()'s DeviceLimits) wait for
    the timing to end.
    """

    def __init__(
        self,
        info: DeviceInfo,
        timer: TimerSettings,
        host_threads: int | None = None,
        quiet: QuietLock | None = None,
        ahead_bytes: int | None = None,
        guarded: bool = True,
        printed: Printed | None = None,
        host_cache: HostCache | None = None,
    ):
        """`quiet`: the lock the GPU's other workers time under (this process's own if None);
        `ahead_bytes`: the host memory that cases prepared ahead may hold (ahead_memory());
        `guarded`: buffers between guard zones, checked for writes and reads past either end
        (else each an allocation of exactly its size, for a sanitizer to watch); `printed`:
        where this process's standard output goes, read into each case's cell (device printf);
        `host_cache`: where cases' host work is kept across runs (None: made every time)."""
        self.info = info
        self.timer = timer
        self.guarded = guarded
        self.printed = printed
        self.host_cache = host_cache
        self._context = ContextLimiter()
        self._quiet = quiet or QuietLock()  # exclusive while timing, shared for other GPU work
        with self._quiet.shared():
            # Making a context is GPU work too: one made beside a timing on an H200 delayed the
            # start of every sample over its last 60-80 ms by 150-260 us (two by 1.5 ms), and
            # slowed some memsets by up to 12 % (docs/reports/h200/contexts).
            self.device = Device(info.ordinal)
            self.device.set_current()
            self.stream = self.device.create_stream()
            # A memset over twice the L2 before each sample evicts what the last run left there.
            self.flush = self.device.allocate(2 * info.l2_bytes, stream=self.stream)
            self.gate = StreamGate()
            self.clock = ClockProbe(info.sm_count)
            self.clock.warm(self.stream)
            self.digests = Digests(self.device, self.stream, info.sm_count)
        self.staging = HostStaging()  # what checks download into
        self.neighbours = Neighbours(info.uuid, info.ordinal)
        quiet_thread = host_cache.recorder.quiet if host_cache else lambda: None
        # the harness's own threads: what they read is no case's host work
        self.cores = ThreadPoolExecutor(
            host_threads or os.cpu_count() or 1, initializer=quiet_thread
        )
        # cuda.core's Device objects are per thread: the helper thread makes the context current
        # through its own.
        ordinal = info.ordinal

        # A thread for each upcoming case's inputs, and one for its fresh inputs
        def ahead_thread() -> None:
            Device(ordinal).set_current()
            quiet_thread()

        self._ahead = ThreadPoolExecutor(2 * AHEAD_CASES, initializer=ahead_thread)
        self._ahead_memory = ahead_memory() if ahead_bytes is None else ahead_bytes
        # host work begun, by its case's key and whether it is of the fresh inputs
        self._prepared: dict[tuple[str, str, Path, bool], Future[HostWork]] = {}
        self._modules: dict[Path, Module] = {}

    def beside(self, call: Callable[..., T], *args: Any) -> Future[T]:
        """`call(*args)` on a host thread whose CUDA context is this GPU's (a spec's setup may
        ask the device's occupancy), while this thread goes on."""
        return self._ahead.submit(call, *args)

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        """Held while timing: no other GPU work of the run (harness.run.quiet) until it ends."""
        return self._quiet.exclusive()

    def gpu(self) -> contextlib.AbstractContextManager[None]:
        """Held for GPU work that is not a timing (uploads, checked runs, digests, downloads,
        module loads): it waits for a timing to end, and a timing waits for it."""
        return self._quiet.shared()

    def module(self, binary: Path, target: Target, limits: ContextLimits | None = None) -> Module:
        """The binary loaded, the context's limits first set as its kernel's spec asks
        (DeviceUnsupported where the driver will not)."""
        limits = limits or ContextLimits()
        loaded = self._modules.get(binary)
        if loaded is not None and self._context.holds(limits):
            return loaded  # no lock: the GPU's other workers would wait on it for nothing
        with self.gpu():
            self._context.allow(limits)
            if binary not in self._modules:
                self._modules[binary] = Module(binary, target, self.info)
            return self._modules[binary]

    def run_case(
        self,
        kernel: LoadedKernel,
        case: Case,
        target: Target,
        binary: Path,
        provenance: Provenance,
        timed: bool = True,
        upcoming: tuple[Upcoming, ...] = (),
    ) -> tuple[Cell, bool]:
        """The case's cell, and whether this process's CUDA context is still fit for more.

        Untimed, the case runs once (set up, launch, verify): what a sanitizer needs to watch.
        The host work of the `upcoming` cases (as many of the next AHEAD_CASES as fit in the
        host memory set aside for them) starts now, each on a helper thread, so that it is ready
        when its turn comes.
        """
        cell = Cell(
            CellKind.CASE,
            kernel.chapter,
            kernel.name,
            case.name,
            target.name,
            provenance,
            Outcome.PASSED,
        )
        try:
            module = self.module(binary, target, kernel.spec.context)
        except DeviceUnsupported as refused:  # a context limit this device will not give
            cell.settle(refused)
            return cell, True
        except Exception as error:  # a binary the driver refuses fails the case, not the run
            message, detail = describe_exception(error)
            cell.settle(KernelFailed(f"loading {binary.name} failed: {message}", detail))
            return cell, False
        key = (kernel.classname, case.name, binary)
        prepared = self._prepared.pop((*key, False), None)
        fresh = self._prepared.pop((*key, True), None) if timed else None
        if timed and fresh is None:  # before the upcoming cases' work: it is needed first
            seed = fresh_seed_of(kernel, case)
            fresh = self._ahead.submit(self.host_work, kernel, case, module, seed)
        self.prepare_ahead(upcoming[:AHEAD_CASES], timed)
        waiting = time.monotonic()
        host = prepared.result() if prepared else self.host_work(kernel, case, module)
        if timed and kernel.spec.vendor:
            # The library its vendor imports (begun at the worker's start), in before the case
            # takes the GPU's lock: an import beside a timing slows the timing's host loop, for
            # the interpreter's lock, and the vendor's set-up would wait for it in its hold.
            for library in kernel.spec.vendor.preload:
                import_quietly(library)
        host_wait_s = time.monotonic() - waiting
        try:
            return self._run_case(kernel, case, module, cell, host, fresh, host_wait_s)
        finally:
            if fresh is not None:
                fresh.cancel()  # not needed when the case failed before timing
            if self.printed is not None and (said := self.printed.read()):
                shown = f"device printf (standard output):\n{said}"
                cell.detail = f"{cell.detail}\n{shown}" if cell.detail else shown

    def prepare_ahead(self, upcoming: tuple[Upcoming, ...], timed: bool = True) -> None:
        """Begin what is not begun of the first of `upcoming` that fit in the memory set aside
        (timed, their fresh inputs' too); drop what was begun for cases no longer coming."""
        variants = (False, True) if timed else (False,)
        sizes = [self._host_bytes(one) * len(variants) for one in upcoming]
        upcoming = upcoming[: within_memory(sizes, self._ahead_memory)]
        keys = {
            (u.kernel.classname, u.case.name, u.binary, fresh): (u, fresh)
            for u in upcoming
            for fresh in variants
        }
        for stale in set(self._prepared) - set(keys):
            self._prepared.pop(stale).cancel()
        for key, (one, fresh) in keys.items():
            if key not in self._prepared:
                self._prepared[key] = self._ahead.submit(self._host_work_ahead, one, fresh)

    @staticmethod
    def _host_bytes(upcoming: Upcoming) -> int:
        """The host memory a case's inputs and reference hold, as the bytes its kernel moves
        (its spec's work()); AHEAD_UNKNOWN_BYTES where work() cannot say."""
        try:
            work = checked_work(upcoming.kernel.classname, upcoming.kernel.spec.work(upcoming.case))
        except Exception:  # its own cell reports what work() raised
            return AHEAD_UNKNOWN_BYTES
        return int(work.bytes)

    def _host_work_ahead(self, upcoming: Upcoming, fresh: bool) -> HostWork:
        try:
            module = self.module(upcoming.binary, upcoming.target, upcoming.kernel.spec.context)
        except Exception as error:  # its own run_case reports it when it loads it again
            message, detail = describe_exception(error)
            return HostWork(None, None, KernelFailed(message, detail), 0.0, 0.0)
        seed = fresh_seed_of(upcoming.kernel, upcoming.case) if fresh else None
        return self.host_work(upcoming.kernel, upcoming.case, module, seed)

    def host_work(
        self, kernel: LoadedKernel, case: Case, module: Module, seed: int | None = None
    ) -> HostWork:
        """The case's problem and reference, of its recorded seed or of `seed`: served from
        the host cache where an entry stands, else made (and offered to it)."""
        started = time.monotonic()
        seed = seed_of(kernel, case) if seed is None else seed
        device = self._live(module)
        cache, key = self.host_cache, ""
        try:
            declared = declared_bytes(kernel.classname, kernel.spec, case)
            check_declared_fits(declared, self.info)
            if cache is not None:
                key = cache.key(kernel.folder, case.name, seed)
                served = cache.served(kernel.classname, key, device)
                if served is not None:
                    check_declared_bytes(kernel.classname, served.problem, declared)
                    spent = time.monotonic() - started
                    return HostWork(served.problem, served.expected, None, spent, 0.0)
        except CellError as raised:
            return HostWork(None, None, raised, time.monotonic() - started, 0.0)
        log = FactLog(device)
        recording: contextlib.AbstractContextManager[list[Heard]] = (
            cache.recording() if cache is not None else contextlib.nullcontext([])
        )
        with recording as read:
            host = self._made(kernel, case, seed, log.limits(()), declared, started)
        if cache is not None and host.problem is not None and host.expected is not None:
            if host.raised is None and log.complete:
                made = Kept(host.problem, host.expected, host.setup_s, host.reference_s)
                cache.offer(key, made, read[0], log.noted())
        return host

    def _made(
        self,
        kernel: LoadedKernel,
        case: Case,
        seed: int,
        limits: DeviceLimits,
        declared: int | None,
        started: float,
    ) -> HostWork:
        """The case's host work from its spec's setup() and reference()."""
        rng = np.random.default_rng(seed)
        try:
            problem = _spec_step(kernel, "setup", kernel.spec.setup, case, rng, limits)
            check_declared_bytes(kernel.classname, problem, declared)
        except CellError as raised:
            return HostWork(None, None, raised, time.monotonic() - started, 0.0)
        made = time.monotonic()
        seen = problem.case_seen_by(case)
        try:
            expected = _spec_step(kernel, "reference", kernel.spec.reference, seen, problem.inputs)
        except CellError as raised:
            return HostWork(problem, None, raised, made - started, time.monotonic() - made)
        return HostWork(problem, expected, None, made - started, time.monotonic() - made)

    def _run_case(
        self,
        kernel: LoadedKernel,
        case: Case,
        module: Module,
        cell: Cell,
        host: HostWork,
        fresh: Future[HostWork] | None,
        host_wait_s: float = 0.0,
    ) -> tuple[Cell, bool]:
        """`fresh`: the host work of inputs the kernel never saw, to check it on after timing;
        None: untimed, the case runs once. `host_wait_s`: what the case waited for `host`."""
        started = time.monotonic()
        healthy = True
        cell.seed = seed_of(kernel, case)
        workspace = None
        spent = _Spent(self._quiet, host_wait_s)
        try:
            workspace, verified = self._check(kernel, case, module, cell, host, spent)
            if fresh is not None and cell.outcome is Outcome.PASSED:
                seen = workspace.problem.case_seen_by(case)
                inputs = workspace.problem.inputs
                work = checked_work(
                    kernel.classname, _spec_step(kernel, "work", kernel.spec.work, seen)
                )
                with spent.on("timing"):
                    timing = self.measure(workspace.run, workspace.reset_scratch)
                cell.timing = timing
                cell.throughput = throughput(work, timing.median_us, self.info)
                # Timing runs other launches than the verified one: check them again, on inputs
                # the kernel never saw, and check that what they timed is physically possible.
                launches = 1 + self.timer.warmup_runs + timing.samples
                with spent.on("verify"):
                    self._verify_fresh(
                        kernel, case, module, workspace, verified, fresh.result(), launches
                    )
                beyond_peak(work, cell.throughput, self.info)
                if kernel.spec.vendor:
                    stream = StreamRef(int(self.stream.handle), self.info.ordinal)
                    # The library sets itself up on the GPU under the shared hold, where the
                    # other lanes' checks go on; its timing turns the hold exclusive.
                    with spent.on("timing"), self.gpu():
                        cell.vendor = _spec_step(
                            kernel,
                            "vendor",
                            measure_vendor,
                            kernel.spec.vendor,
                            seen,
                            inputs,
                            stream,
                            self._run_once,
                            lambda run: self.measure(run, lambda: None),
                            timing,
                            work,
                        )
        except CellError as error:
            cell.settle(error)
            # illegal addresses and traps leave the context unusable
            healthy = not isinstance(error, CudaError)
        except Exception as error:  # a driver or launch error from cuda.core: the kernel's
            cell.settle(KernelFailed(*describe_exception(error)))
            healthy = False
        finally:
            if workspace is not None:
                try:
                    with self.gpu():
                        workspace.close()
                except Exception as error:  # a sticky fault surfaces here too
                    healthy = False
                    if cell.outcome is Outcome.PASSED:
                        cell.settle(KernelFailed(describe_exception(error)[0]))
        cell.seconds = time.monotonic() - started
        cell.stages = spent.stages(host)
        return cell, healthy

    def prepare(self, kernel: LoadedKernel, case: Case, module: Module) -> Workspace:
        """The case's problem set up on the device from its seeded inputs, not yet run."""
        host = self.host_work(kernel, case, module)
        if host.problem is None:
            raise host.raised or SpecError(f"{kernel.classname}: setup() made no problem")
        return self.upload(kernel, module, host.problem)

    def upload(self, kernel: LoadedKernel, module: Module, problem: Problem) -> Workspace:
        """The problem's buffers and launches on the device; a problem the launches cannot be
        made of (a buffer name unknown, an argument of the wrong type) is the spec's error."""
        check_fits(problem, self.info)
        try:
            return Workspace(self.device, self.stream, module, problem, self.guarded)
        except Unlaunchable as error:
            raise SpecError(
                f"{kernel.classname}: the problem setup() made cannot be launched: {error}"
            ) from error

    def measure(self, run: Callable[[], None], before_each: Callable[[], None]) -> Timing:
        """`run` timed as every case is: cold L2, gated, throttled samples discarded; said to be
        shared where another process used the GPU meanwhile (harness.run.sharing)."""
        # NVML is asked on either side of the hold, not inside it: each call takes ~1.5 ms on
        # an H200 machine, which the other lanes, waiting on the hold, would wait out too (a
        # second per column). A process that holds the GPU across the timing is listed either way.
        before = self.neighbours.others()
        with self.quiet():
            timing = measure(
                run,
                before_each,
                self.stream,
                self.flush,
                self.gate,
                self.timer,
                self.clock,
                self.info.default_sm_clock_mhz,
            )
        after = self.neighbours.others()
        listed = [found for found in (before, after) if isinstance(found, list)]
        others = sorted({pid for found in listed for pid in found}) if listed else before
        return dataclasses.replace(timing, shared_gpu=shared_why(timing, others))

    def _run_once(self, run: Callable[[], None]) -> None:
        """What `run` enqueues on the stream, run and waited for."""
        run()
        self.stream.sync()

    def _live(self, module: Module) -> LiveDevice:
        """This GPU as setup() asks it, occupancy by `module`, the build the case runs."""

        def max_blocks_per_sm(entry: str, threads: int, shmem_bytes: int) -> int:
            with self.gpu():
                occupancy = module.entry(entry).function.occupancy
                return int(occupancy.max_active_blocks_per_multiprocessor(threads, shmem_bytes))

        limits = {
            "cc": [self.info.cc.major, self.info.cc.minor],
            "sm_count": self.info.sm_count,
            "smem_optin_bytes": self.info.smem_optin_bytes,
            "l2_bytes": self.info.l2_bytes,
            "memory_bytes": self.info.memory_bytes,
        }
        return LiveDevice(limits, max_blocks_per_sm)

    def _verify_fresh(
        self,
        kernel: LoadedKernel,
        case: Case,
        module: Module,
        workspace: Workspace,
        verified: _Verified,
        fresh: HostWork,
        launches: int,
    ) -> None:
        """Run once more on fresh inputs (another seed, in the same buffers where the spec
        makes the same buffers and launches of it), the outputs poisoned with the second
        pattern, and check them against the fresh inputs' reference: raise KernelFailed when
        they are wrong now.

        A kernel that replays a result it remembered from earlier launches (keyed by its input
        pointer, say) gives the verified inputs' outputs again, and fails saying so. An element
        the reference expects as NaN, left unwritten, passed the first check (NaN is NaN) and
        fails this one.
        """
        if fresh.problem is None or fresh.expected is None:
            raise fresh.raised or SpecError(f"{kernel.classname}: setup() made no problem")
        expected = fresh.expected
        check_reference_fits(kernel.classname, fresh.problem.outputs, expected, case)
        with self.gpu():
            refilled = workspace.refill(fresh.problem)
        if refilled:
            self._check_fresh(
                kernel, case, workspace, verified, verified.guards, expected, launches
            )
            return
        # Another layout under another seed: buffers of its own, the verified ones' digests
        # still telling a replay apart
        with self.gpu():
            other = self.upload(kernel, module, fresh.problem)
        try:
            with self.gpu():
                guards = self.digests.of(other.guards)
            self._check_fresh(kernel, case, other, verified, guards, expected, launches)
        finally:
            with self.gpu():
                other.close()

    def _check_fresh(
        self,
        kernel: LoadedKernel,
        case: Case,
        workspace: Workspace,
        verified: _Verified,
        guards: Mapping[str, int],
        expected: Mapping[str, np.ndarray],
        launches: int,
    ) -> None:
        """The fresh run on `workspace`, refilled with the fresh problem; `expected`: its
        reference."""
        with self.gpu():
            workspace.poison_outputs(SECOND_POISON_BYTE)
            workspace.reset_scratch()
            workspace.run()
            self.stream.sync()
            again = self.digests.of(workspace.extents(expected))
            problems = self._guards_written(workspace, guards)
            self.staging.reset(HostStaging.bytes_for(expected.values()))
            outputs = {name: workspace.download(name, self.staging) for name in expected}
        for name, want in expected.items():  # on the host: a timing of another lane may go on
            if msg := compare(name, outputs[name], want, case.tolerance_of(name), self.cores):
                if again[name] == verified.digests.get(name):
                    msg = (
                        f"{name!r} holds, bit for bit, what the kernel wrote for the inputs it "
                        "was verified on: it replays a remembered result instead of computing "
                        f"this one ({msg})"
                    )
                problems.append(msg)
        if problems:
            seed = fresh_seed_of(kernel, case)
            raise KernelFailed(
                f"the output was right on the first launch and wrong after {launches} launches, "
                f"on fresh inputs (seed {seed}; outputs poisoned with 0x{SECOND_POISON_BYTE:02X} "
                f"bytes this time, not 0x{POISON_BYTE:02X}): {'; '.join(problems)}"
            )

    def _check(
        self,
        kernel: LoadedKernel,
        case: Case,
        module: Module,
        cell: Cell,
        host: HostWork,
        spent: _Spent,
    ) -> tuple[Workspace, _Verified]:
        """Run once and verify; sets the cell failed with the reasons. Returns the workspace,
        and the outputs with the reference they were checked against."""
        if host.problem is None:
            raise host.raised or SpecError(f"{kernel.classname}: setup() made no problem")
        with spent.on("upload"), self.gpu():
            workspace = self.upload(kernel, module, host.problem)
        problem = workspace.problem
        entry = next(step.entry for step in problem.launches if isinstance(step, Launch))
        cell.loaded_as = module.entry(entry).loaded_as
        if problem.accumulated:  # the one output check it was spared: said, in the cell
            names = ", ".join(repr(name) for name in problem.accumulated)
            cell.detail = (
                f"accumulated outputs {names}: zeroed before every run, not filled with poison, "
                "so an element the kernel never adds into is not caught unless the reference "
                "expects it non-zero"
            )
        with spent.on("verify"), self.gpu():
            inputs = self.digests.of(workspace.extents(problem.inputs))  # as uploaded
            guards = self.digests.of(workspace.guards)  # as filled
            workspace.reset_scratch()
            workspace.run()
            self.stream.sync()
            self.staging.reset(HostStaging.bytes_for(problem.outputs.values()))
            actual = workspace.outputs(self.staging)
            outputs = self.digests.of(workspace.extents(problem.outputs))
            after = self.digests.of(workspace.extents(problem.inputs))
            problems = [
                self._what_changed(workspace, name)
                for name, digest in inputs.items()
                if after[name] != digest
            ]
            problems += self._guards_written(workspace, guards)
        if host.raised is not None:  # the reference raised
            raise host.raised
        expected = host.expected
        if expected is None:
            raise SpecError(f"{kernel.classname}: reference() returned None, not its outputs")
        check_reference_fits(kernel.classname, problem.outputs, expected, case)
        with spent.on("verify"):
            for name in problem.outputs:  # on the host: a timing of another lane may go on
                got, want = actual[name], expected[name]
                if msg := compare(name, got, want, case.tolerance_of(name), self.cores):
                    problems.append(msg)
            if not problems and workspace.guarded:
                with self.gpu():
                    trials = _Trials(self, workspace, case, actual, expected)
                    problems += self._stray_reads(workspace, trials, outputs)
                    guards = self.digests.of(workspace.guards)  # as filled again
        if problems:
            cell.settle(KernelFailed("; ".join(problems)))
        return workspace, _Verified(outputs, expected, guards)

    def _stray_reads(
        self, workspace: Workspace, trials: _Trials, verified: Mapping[str, int]
    ) -> list[str]:
        """What the outputs depend on outside the buffers (harness.run.stray), as the cell says
        it; the guard zones and outputs as they were for the verified run afterwards. A fault
        on the way fails the case, saying what the run had changed."""
        try:
            found = stray_reads(trials, workspace.stray_sources(), verified)
            workspace.prime({})
        except Exception as error:  # the kernel's fault: the context is likely gone
            message, detail = describe_exception(error)
            raise CudaError(
                "right on the verified launch, it failed on a launch of the same inputs with "
                "the memory around its buffers changed (each guard zone, and each output before "
                "the run, filled with its dtype's largest, then smallest value; a kernel that "
                f"reads there and indexes or loops by what it read faults so): {message}",
                detail,
            ) from error
        return [said(dependence, workspace.kind_of) for dependence in found]

    def _guards_written(self, workspace: Workspace, filled: Mapping[str, int]) -> list[str]:
        """What the runs since `filled` (the guards' digests then) wrote into any guard zone."""
        now = self.digests.of(workspace.guards)
        return [
            workspace.guard_writes(name) for name, digest in filled.items() if now[name] != digest
        ]

    def _what_changed(self, workspace: Workspace, name: str) -> str:
        """What the kernel did to the input `name`, whose digest changed over the run."""
        before = workspace.problem.inputs[name]
        found = unchanged(name, before, workspace.download(name, self.staging), self.cores)
        return found or f"input {name!r} was written by the kernel (its digest changed)"


@dataclass(frozen=True)
class _Trials:
    """The runs of harness.run.stray over a workspace: its inputs as verified, the guard zones
    and outputs primed as each run asks."""

    runtime: GpuRuntime
    workspace: Workspace
    case: Case
    verified: Mapping[str, np.ndarray]  # the outputs of the verified run
    expected: Mapping[str, np.ndarray]

    def run(self, loud: Mapping[str, Extreme]) -> Mapping[str, int]:
        workspace = self.workspace
        workspace.prime(loud)
        workspace.reset_scratch()
        workspace.run()
        self.runtime.stream.sync()
        return self.runtime.digests.of(workspace.extents(workspace.problem.outputs))

    def changed(self, output: str) -> int:
        return changed_elements(self.verified[output], self.workspace.download(output))

    def wrong(self, output: str) -> int:
        got, want = self.workspace.download(output), self.expected[output]
        tolerance = self.case.tolerance_of(output)
        return mismatch_count(got, want, tolerance, self.runtime.cores)


class _Spent:
    """Seconds by stage of one case, for its cell's Stages."""

    def __init__(self, quiet: QuietLock, host_wait_s: float) -> None:
        self.seconds = {"upload": 0.0, "verify": 0.0, "timing": 0.0}
        self.quiet, self.host_wait_s = quiet, host_wait_s
        self.quiet_before = quiet.waited_s  # the process's waits for the GPU's lock so far

    @contextlib.contextmanager
    def on(self, stage: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[stage] += time.monotonic() - started

    def stages(self, host: HostWork) -> Stages:
        return Stages(
            setup_s=round(host.setup_s + self.seconds["upload"], 6),
            reference_s=round(host.reference_s, 6),
            verify_s=round(self.seconds["verify"], 6),
            timing_s=round(self.seconds["timing"], 6),
            host_wait_s=round(self.host_wait_s, 6),
            # the ahead threads' waits (module loads, occupancy) count too: they are few
            gpu_wait_s=round(self.quiet.waited_s - self.quiet_before, 6),
        )
