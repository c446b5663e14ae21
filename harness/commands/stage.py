"""What `test` and `sanitize` share: find and compile a target's kernels, decide which builds can
run here, and keep the report of the run on disk as its cells come in.

Every kernel found gets its cells from here or from the command, never none: a broken spec is an
error cell, a kernel the target cannot express has its compile and run cells skipped, and a run
cell that cannot run says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.build.compile import Compiled, Compiler, failure_line
from harness.build.kernels import BrokenKernel, Kernel, classname_of, discover, spec_files
from harness.build.matrix import Target
from harness.build.toolchain import Toolchain, ToolchainError, gpu_codes
from harness.report import junit
from harness.result import (
    Cell,
    CompileFacts,
    DeviceRecord,
    Outcome,
    Provenance,
    Report,
    SkipReason,
)
from harness.run.device import DeviceInfo, NoDevice


@dataclass(frozen=True)
class RunResult:
    report: Report
    files: junit.ReportFiles
    compiled: int
    cached: int

    @property
    def cells(self) -> list[Cell]:
        return self.report.cells

    @property
    def ok(self) -> bool:
        return not any(c.outcome in (Outcome.FAILED, Outcome.ERROR) for c in self.cells)


def provenance(
    runner: str, commit: str | None, toolchain: Toolchain | ToolchainError, device
) -> Provenance:
    on_gpu = isinstance(device, DeviceInfo)
    return Provenance(
        runner=runner,
        commit=commit,
        toolkit=toolchain.version if isinstance(toolchain, Toolchain) else None,
        device=device.name if on_gpu else None,
        cc=str(device.cc) if on_gpu else None,
        driver=device.driver if on_gpu else None,
    )


def new_report(
    suite: str,
    target: Target,
    where: Provenance,
    toolchain: Toolchain | ToolchainError,
    device: DeviceInfo | NoDevice,
) -> Report:
    """An empty report of this run, its header filled in."""
    return Report(
        suite=suite,
        target=target.name,
        provenance=where,
        device=None
        if isinstance(device, NoDevice)
        else DeviceRecord(
            name=device.name,
            cc=str(device.cc),
            driver=device.driver,
            cuda_driver=device.cuda_driver,
            sm_count=device.sm_count,
            l2_bytes=device.l2_bytes,
        ),
        no_device_reason=device.reason if isinstance(device, NoDevice) else None,
        nvcc=str(toolchain.nvcc) if isinstance(toolchain, Toolchain) else None,
    )


def report_stem(kind: str, target: Target, select: str) -> str:
    """`<kind>-<target>`; a partial run's report is another file, never the full one."""
    stem = f"{kind}-{target.name}"
    return f"partial-{stem}" if select else stem


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


@dataclass(frozen=True)
class RunCell:
    """A run cell to come: its case, and the sanitizer tool for a sanitize cell."""

    case: str
    tool: str | None = None


class NothingToRun(Exception):
    """The kernel trees and -k select no kernel: an error, as pytest's "no tests collected"."""


def find_kernels(
    roots: tuple[Path, ...], select: str, import_timeout_s: float
) -> list[Kernel | BrokenKernel]:
    """Every kernel under `roots` whose classname contains `select`, in the order found.

    Specs are imported in a child process first (a spec that exits or hangs at import is an
    error cell, not the end of the run). Two folders with one classname (<chapter>.<kernel>,
    across trees, or `ch.1/k` beside `ch/1.k`) would share builds and cells: they become one
    broken kernel naming both folders.
    """
    for root in roots:
        if not Path(root).is_dir():
            raise NothingToRun(f"--kernels {root}: no such directory")
    found = [spec for root in roots for spec in spec_files(root)]
    if not found:
        trees = ", ".join(str(root) for root in roots)
        raise NothingToRun(f"no kernels under {trees} (a kernel is <chapter>/<kernel>/spec.py)")
    if not any(select in classname_of(spec) for spec in found):
        raise NothingToRun(f"-k {select!r} selects none of the {len(found)} kernels found")
    kernels = [k for root in roots for k in discover(root, select, import_timeout_s)]
    by_classname: dict[str, list[Kernel | BrokenKernel]] = {}
    for kernel in kernels:
        by_classname.setdefault(kernel.classname, []).append(kernel)
    unique = []
    for classname, same in by_classname.items():
        if len(same) == 1:
            unique.append(same[0])
            continue
        folders = " and ".join(str(k.folder) for k in same)
        reason = (
            f"{classname} is the name of {len(same)} kernel folders: {folders}; kernels are told "
            "apart by <chapter>.<kernel>, so rename one"
        )
        unique.append(BrokenKernel(same[0].chapter, same[0].name, same[0].folder, reason))
    return unique


def compile_stage(
    *,
    target: Target,
    kernels: list[Kernel | BrokenKernel],
    toolchain: Toolchain | ToolchainError,
    cache_dir: Path,
    where: Provenance,
    run_cells: Callable[[Kernel], list[RunCell]],
) -> CompileStage:
    """Every kernel of `kernels` compiled for `target`.

    A kernel the target cannot express is skipped, its compile cell and the run cells that
    `run_cells` gives it alike, so that no cell of the report goes missing.
    """
    cells = []
    for broken in (k for k in kernels if isinstance(k, BrokenKernel)):
        cells.append(
            Cell(
                broken.chapter,
                broken.name,
                "spec",
                target.name,
                where,
                Outcome.ERROR,
                message=broken.reason,
            )
        )
    good = [k for k in kernels if isinstance(k, Kernel)]
    expressible = [k for k in good if target.expresses(k.spec.requires)]
    for kernel in good:
        if kernel not in expressible:
            why = (
                f"{kernel.classname} needs {kernel.spec.requires}; target {target.name} emits "
                f"{target.sass}, which cannot express it"
            )
            reason = SkipReason.TARGET_UNSUPPORTED
            for run in [RunCell("compile"), *run_cells(kernel)]:
                cells.append(skipped(kernel, run, target, where, reason, why))
    builds = _compile(expressible, target, toolchain, cache_dir)
    for kernel in expressible:
        cells.append(_compile_cell(kernel, target, builds.get(kernel.classname), where))
    return CompileStage(cells, expressible, builds)


def skipped(
    kernel: Kernel, run: RunCell, target: Target, where: Provenance, reason: SkipReason, why: str
) -> Cell:
    return Cell(
        kernel.chapter,
        kernel.name,
        run.case,
        target.name,
        where,
        Outcome.SKIPPED,
        skip_reason=reason,
        message=f"{reason.value}: {why}",
        tool=run.tool,
    )


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
    known = gpu_codes(toolchain)
    if known is not None and re.sub(r"[af]$", "", target.sass) not in known:
        # The matrix is wrong, not the kernel: every compile cell says so in these words.
        why = (
            f"matrix.yaml: target {target.name} emits {target.sass}, which nvcc "
            f"{toolchain.version} does not know (it knows {', '.join(known)})"
        )
        return {k.classname: why for k in kernels}
    results = Compiler(toolchain, cache_dir).compile_all([(k, target) for k in kernels])
    return {k.classname: r for k, r in zip(kernels, results, strict=True)}


def _compile_cell(kernel: Kernel, target: Target, build, where: Provenance) -> Cell:
    cell = Cell(kernel.chapter, kernel.name, "compile", target.name, where, Outcome.PASSED)
    if isinstance(build, str):
        cell.outcome, cell.message = Outcome.FAILED, build
        cell.compile = CompileFacts(embedded=target.gencode)
        return cell
    cell.compile = CompileFacts(
        embedded=target.gencode,
        cached=build.cached,
        resources=dict(build.resources),
        sass_counts=dict(build.sass.counts) if build.sass else {},
        binary_sha256=build.sha256,
    )
    cell.detail = " ".join(build.command) + "\n" + build.log
    cell.seconds = build.seconds
    if not build.ok:
        cell.outcome = Outcome.FAILED
        if build.command:
            cell.message = f"nvcc failed for {kernel.source}: {failure_line(build.log)}"
        else:  # refused before nvcc ran
            cell.message = f"not compiled: {build.log}"
    elif build.sass and build.sass.error:
        cell.outcome = Outcome.FAILED
        wanted = ", ".join(build.sass.counts)
        cell.message = f"cannot check the SASS for {wanted}: {build.sass.error}"
    elif build.sass and build.sass.missing:
        cell.outcome = Outcome.FAILED
        cell.message = (
            f"the {target.name} SASS has no {', '.join(build.sass.missing)}: "
            f"{kernel.classname} compiled to a slower path than its spec demands"
        )
    return cell


@dataclass(frozen=True)
class NotRun:
    """Why a build's run cells do not run here, and the outcome that gives them."""

    outcome: Outcome
    reason: SkipReason | None
    why: str


def why_not_run(target: Target, device, build) -> NotRun | None:
    """None when the build can run here; else the outcome of its run cells, and why."""
    # A case that can never run because its kernel did not build fails, on any machine.
    if not isinstance(build, Compiled):
        return NotRun(Outcome.FAILED, None, f"not compiled: {build}")
    if not build.ok:
        return NotRun(
            Outcome.FAILED, None, f"not compiled: nvcc failed (see compile[{target.name}])"
        )
    if isinstance(device, NoDevice):
        return NotRun(
            Outcome.SKIPPED, SkipReason.NO_DEVICE, f"no CUDA device visible ({device.reason})"
        )
    if target.runs_on(device.cc) is None:
        how = f"CC {target.cc} exactly" if target.arch_specific else f"CC {target.cc.major}.x"
        if target.ptx:
            how += f" or, through PTX, CC >= {target.cc}"
        why = (
            f"compiled and inspected, never run here: {target.name} binaries run on {how}; "
            f"{device.name} is CC {device.cc}"
        )
        return NotRun(Outcome.SKIPPED, SkipReason.DEVICE_UNSUPPORTED, why)
    return None


def not_run_cell(
    kernel: Kernel, run: RunCell, target: Target, where: Provenance, not_run: NotRun
) -> Cell:
    """The run cell `run`, given why_not_run's reason not to run it."""
    if not_run.outcome is Outcome.SKIPPED:
        return skipped(kernel, run, target, where, not_run.reason, not_run.why)
    return Cell(
        kernel.chapter,
        kernel.name,
        run.case,
        target.name,
        where,
        not_run.outcome,
        message=not_run.why,
        tool=run.tool,
    )
