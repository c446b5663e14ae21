"""One target of the matrix, end to end: discover, compile, run, verify, time, report.

Every (kernel, case) gets exactly one cell. The report is rewritten after the compile stage and
after each kernel, so whatever was measured is on disk before the next kernel starts.
"""

from __future__ import annotations

import socket
import time
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
    stem = f"junit-{target.name}" if options.execute else f"compile-{target.name}"
    if options.select:  # a partial run must not overwrite the full report of its target
        stem = f"partial-{stem}"
    files = report.report_files(options.reports_dir, stem)
    context = _context(target, runner, toolchain, device)
    common = _common_properties(target, toolchain, device)
    found = [k for root in options.kernels_roots for k in discover(root)]
    kernels = [k for k in found if options.select in k.classname]
    cells: list[Cell] = []

    def save() -> None:
        report.write(files, f"cuda-matrix.{target.name}.{runner}", context, cells)

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
            for case in kernel.spec.cases:
                cells.append(skipped(kernel.classname, _name(case, target), reason, why, common))

    compiled, builds = _compile(expressible, target, toolchain, options.cache_dir)
    for kernel in expressible:
        cells.append(_compile_cell(kernel, target, builds.get(kernel.classname), compiled, common))
    save()

    if options.execute:
        with WorkerPool(worker.start, worker.serve, WorkerSetup(device, matrix.timing)) as pool:
            for kernel in expressible:
                build = builds.get(kernel.classname)
                skip = _why_not_run(target, device, build)
                for case in kernel.spec.cases:
                    if skip:
                        cells.append(_not_run_cell(kernel, case, target, skip, common))
                    else:
                        job = CaseJob(
                            kernel.folder / "spec.py", case.name, target, build.binary, common
                        )
                        started = time.monotonic()
                        result = pool.run(job, matrix.timing.case_timeout_s)
                        cell = _faulted(kernel, case, target, result, common)
                        # a faulted case costs what the parent waited, worker start included
                        cell.seconds = cell.seconds or time.monotonic() - started
                        cells.append(cell)
                    save()
    save()
    fresh = sum(1 for b in builds.values() if isinstance(b, Compiled) and not b.cached)
    cached = sum(1 for b in builds.values() if isinstance(b, Compiled) and b.cached)
    return RunResult(cells, files, fresh, cached)


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


def _context(target, runner, toolchain, device) -> dict:
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


def _common_properties(target, toolchain, device) -> dict[str, str]:
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
    """Returns (pairs handed to nvcc, builds by classname: Compiled or a reason string)."""
    if isinstance(toolchain, ToolchainError):
        return 0, {k.classname: str(toolchain) for k in kernels}
    if toolchain.release != target.toolkit.version:
        why = (
            f"{target.name} pins CUDA {target.toolkit.version}, but {toolchain.nvcc} is "
            f"{toolchain.version}"
        )
        return 0, {k.classname: why for k in kernels}
    results = Compiler(toolchain, cache_dir).compile_all([(k, target) for k in kernels])
    return len(kernels), {k.classname: r for k, r in zip(kernels, results, strict=True)}


def _compile_cell(kernel, target, build, compiled, common) -> Cell:
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
    if not build.ok:
        errors = [line for line in build.log.splitlines() if "error" in line.lower()]
        message = f"nvcc failed for {kernel.source}: " + (errors[0] if errors else build.log[-300:])
        return Cell(
            kernel.classname,
            name,
            Outcome.FAILED,
            message,
            None,
            detail,
            build.seconds,
            properties,
            resources=resources,
        )
    return Cell(
        kernel.classname,
        name,
        Outcome.PASSED,
        "",
        None,
        detail,
        build.seconds,
        properties,
        resources=resources,
    )


def _why_not_run(target, device, build) -> tuple[Outcome, SkipReason | None, str] | None:
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


def _not_run_cell(kernel, case, target, skip, common) -> Cell:
    outcome, reason, why = skip
    if outcome is Outcome.SKIPPED:
        return skipped(kernel.classname, _name(case, target), reason, why, common)
    return Cell(kernel.classname, _name(case, target), outcome, why, properties=dict(common))
