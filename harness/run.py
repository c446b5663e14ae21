"""One target of the matrix, end to end: discover, compile, run, verify, time, report.

Every (kernel, case) gets exactly one cell. The report is rewritten after the compile stage and
after each kernel, so whatever was measured is on disk before the next kernel starts.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import report, worker
from harness.cells import Cell, Outcome, SkipReason, skipped
from harness.compile import Compiled, Compiler
from harness.device import DeviceInfo, NoDevice
from harness.isolation import WorkerPool
from harness.kernels import BrokenKernel, Kernel, discover
from harness.matrix import Matrix, Target
from harness.spec import Case
from harness.toolchain import Toolchain, ToolchainError
from harness.worker import CaseJob, WorkerSetup


@dataclass(frozen=True)
class RunOptions:
    target: Target
    kernels_roots: tuple[Path, ...]  # each holds <chapter>/<kernel>/spec.py folders
    reports_dir: Path
    cache_dir: Path
    execute: bool  # False: compile cells only
    select: str = ""  # keep kernels whose <chapter>.<kernel> contains this
    runner: str = ""  # names the report's suite; defaults to the host name


@dataclass(frozen=True)
class RunResult:
    cells: list[Cell]
    files: report.ReportFiles
    compiled: int
    cached: int

    @property
    def ok(self) -> bool:
        return not any(c.outcome in (Outcome.FAILED, Outcome.ERROR) for c in self.cells)


def run_target(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | ToolchainError,
    device: DeviceInfo | NoDevice,
) -> RunResult:
    target = options.target
    runner = options.runner or socket.gethostname()
    kind = "junit" if options.execute else "compile"
    files = report.report_files(options.reports_dir, report_stem(kind, target, options.select))
    run_context = context(target, runner, toolchain, device)
    common = common_properties(target, toolchain, device)
    stage = compile_stage(
        target=target,
        roots=options.kernels_roots,
        select=options.select,
        toolchain=toolchain,
        cache_dir=options.cache_dir,
        common=common,
        run_names=lambda kernel: [_name(case, target) for case in kernel.spec.cases],
    )
    cells = list(stage.cells)

    def save() -> None:
        report.write(files, f"cuda-matrix.{target.name}.{runner}", run_context, cells)

    save()
    if options.execute:
        with WorkerPool(worker.start, worker.serve, WorkerSetup(device, matrix.timing)) as pool:
            for kernel in stage.kernels:
                build = stage.builds.get(kernel.classname)
                skip = why_not_run(target, device, build)
                for case in kernel.spec.cases:
                    if skip:
                        name = _name(case, target)
                        cells.append(not_run_cell(kernel.classname, name, skip, common))
                    else:
                        job = CaseJob(
                            kernel.folder / "spec.py", case.name, target, build.binary, common
                        )
                        started = time.monotonic()
                        result = pool.run(job, matrix.timing.case_timeout_s)
                        cell = _faulted(kernel, case, target, result, common)
                        # a faulted case costs what the parent waited, worker start included
                        cell.seconds = cell.seconds or time.monotonic() - started
                        if pool.start_s:  # the first case, or the one after a fault
                            cell.properties["worker_start_s"] = f"{pool.start_s:.2f}"
                        cells.append(cell)
                    save()
    save()
    return RunResult(cells, files, stage.fresh, stage.cached)


@dataclass(frozen=True)
class CompileStage:
    """A target's kernels found and compiled: the stage's cells, and what running starts from."""

    cells: list[Cell]  # spec errors, target-unsupported skips, compile cells
    kernels: list[Kernel]  # those the target expresses, in the order found
    builds: dict[str, Compiled | str]  # by classname: the build, or why there is none

    @property
    def fresh(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and not b.cached)

    @property
    def cached(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and b.cached)


def compile_stage(
    *,
    target: Target,
    roots: tuple[Path, ...],
    select: str,
    toolchain: Toolchain | ToolchainError,
    cache_dir: Path,
    common: dict[str, str],
    run_names: Callable[[Kernel], list[str]],
) -> CompileStage:
    """Every kernel under `roots` whose classname contains `select`, compiled for `target`.

    A kernel the target cannot express is skipped, its compile cell and the run cells that
    `run_names` gives it alike, so that no cell of the report goes missing.
    """
    found = [k for root in roots for k in discover(root)]
    kernels = [k for k in found if select in k.classname]
    cells = []
    for broken in (k for k in kernels if isinstance(k, BrokenKernel)):
        cell = Cell(broken.classname, f"spec[{target.name}]", Outcome.ERROR, broken.reason)
        cell.properties.update(common)
        cells.append(cell)
    good = [k for k in kernels if isinstance(k, Kernel)]
    expressible = [k for k in good if target.expresses(k.spec.requires)]
    for kernel in good:
        if kernel not in expressible:
            why = (
                f"{kernel.classname} needs {kernel.spec.requires}; {target.name} cannot express it"
            )
            reason = SkipReason.TARGET_UNSUPPORTED
            cells.append(skipped(kernel.classname, f"compile[{target.name}]", reason, why, common))
            for name in run_names(kernel):
                cells.append(skipped(kernel.classname, name, reason, why, common))
    builds = _compile(expressible, target, toolchain, cache_dir)
    for kernel in expressible:
        cells.append(_compile_cell(kernel, target, builds.get(kernel.classname), common))
    return CompileStage(cells, expressible, builds)


def report_stem(kind: str, target: Target, select: str) -> str:
    """`<kind>-<target>`; a partial run's report is another file, never the full one."""
    stem = f"{kind}-{target.name}"
    return f"partial-{stem}" if select else stem


def _faulted(kernel, case, target, result, common) -> Cell:
    """The worker's cell, or a failed cell saying how the worker died on this case."""
    if isinstance(result, Cell):
        return result
    return Cell(
        kernel.classname,
        _name(case, target),
        Outcome.FAILED,
        result.message,
        properties=dict(common),
    )


def _name(case: Case, target: Target) -> str:
    return f"{case.name}[{target.name}]"


def context(target, runner, toolchain, device) -> dict:
    """The report's record of where it ran: the JSON sidecar's header."""
    return {
        "target": target.name,
        "runner": runner,
        "toolkit": toolchain.version if isinstance(toolchain, Toolchain) else None,
        "nvcc": str(toolchain.nvcc) if isinstance(toolchain, Toolchain) else None,
        "device": None
        if isinstance(device, NoDevice)
        else {
            "name": device.name,
            "cc": str(device.cc),
            "driver": device.driver,
            "cuda_driver": device.cuda_driver,
            "sm_count": device.sm_count,
            "l2_bytes": device.l2_bytes,
        },
        "no_device_reason": device.reason if isinstance(device, NoDevice) else None,
    }


def common_properties(target, toolchain, device) -> dict[str, str]:
    """What every cell of a run carries: the target, and what it ran on and with."""
    on_gpu = isinstance(device, DeviceInfo)
    return {
        "target": target.name,
        "device": device.name if on_gpu else "none",
        "cc": str(device.cc) if on_gpu else "none",
        "driver": device.driver if on_gpu else "none",
        "toolkit": toolchain.version if isinstance(toolchain, Toolchain) else "none",
        "binary": "none",
    }


def _compile(kernels, target, toolchain, cache_dir):
    """Builds by classname: Compiled, or the reason nothing was compiled."""
    if isinstance(toolchain, ToolchainError):
        return {k.classname: str(toolchain) for k in kernels}
    if toolchain.release != target.toolkit.version:
        why = (
            f"{target.name} pins CUDA {target.toolkit.version}, but {toolchain.nvcc} is "
            f"{toolchain.version}"
        )
        return {k.classname: why for k in kernels}
    results = Compiler(toolchain, cache_dir).compile_all([(k, target) for k in kernels])
    return {k.classname: r for k, r in zip(kernels, results, strict=True)}


def _compile_cell(kernel, target, build, common) -> Cell:
    name = f"compile[{target.name}]"
    properties = dict(common)
    properties["embedded"] = target.gencode
    if isinstance(build, str):
        return Cell(kernel.classname, name, Outcome.FAILED, build, properties=properties)
    if build.resources:
        worst = list(build.resources.values())
        properties["registers"] = str(max(r.registers for r in worst))
        properties["smem_bytes"] = str(max(r.smem_bytes for r in worst))
        properties["spill_bytes"] = str(max(r.spill_bytes for r in worst))
    properties["cached"] = "true" if build.cached else "false"
    detail = " ".join(build.command) + "\n" + build.log
    resources = {entry: vars(r) for entry, r in build.resources.items()}
    outcome, message = Outcome.PASSED, ""
    if not build.ok:
        errors = [line for line in build.log.splitlines() if "error" in line.lower()]
        outcome = Outcome.FAILED
        message = f"nvcc failed for {kernel.source}: " + (errors[0] if errors else build.log[-300:])
    elif build.sass:
        for opcode, count in build.sass.counts.items():
            properties[f"sass_{opcode}"] = str(count)
        if build.sass.error:
            outcome = Outcome.FAILED
            wanted = ", ".join(build.sass.counts)
            message = f"cannot check the SASS for {wanted}: {build.sass.error}"
        elif build.sass.missing:
            outcome = Outcome.FAILED
            message = (
                f"the {target.name} SASS has no {', '.join(build.sass.missing)}: "
                f"{kernel.classname} compiled to a slower path than its spec demands"
            )
    return Cell(
        kernel.classname,
        name,
        outcome,
        message,
        None,
        detail,
        build.seconds,
        properties,
        resources=resources,
    )


def why_not_run(target, device, build) -> tuple[Outcome, SkipReason | None, str] | None:
    """None when the build can run here; else the outcome of its run cells, and why."""
    # A case that can never run because its kernel did not build fails, on any machine.
    if not isinstance(build, Compiled):
        return Outcome.FAILED, None, f"not compiled: {build}"
    if not build.ok:
        return Outcome.FAILED, None, f"not compiled: nvcc failed (see compile[{target.name}])"
    if isinstance(device, NoDevice):
        return Outcome.SKIPPED, SkipReason.NO_DEVICE, f"no CUDA device visible ({device.reason})"
    if target.runs_on(device.cc) is None:
        how = f"CC {target.cc} exactly" if target.arch_specific else f"CC {target.cc.major}.x"
        if target.ptx:
            how += f" or, through PTX, CC >= {target.cc}"
        why = f"{target.name} binaries run on {how}; {device.name} is CC {device.cc}"
        return Outcome.SKIPPED, SkipReason.DEVICE_UNSUPPORTED, why
    return None


def not_run_cell(classname: str, name: str, skip, common) -> Cell:
    """The run cell `name`, given why_not_run's reason not to run it."""
    outcome, reason, why = skip
    if outcome is Outcome.SKIPPED:
        return skipped(classname, name, reason, why, common)
    return Cell(classname, name, outcome, why, properties=dict(common))
