"""The check stage: the case cells of kernels this machine cannot run (no GPU, or not this one),
each case checked on the CPU (harness.run.spec_check): an error where its spec would break it
on a GPU, else skipped with why it did not run and that it was checked (by an earlier run, the
check cache's answer, where nothing the check reads has changed since)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.compile.nvcc import Compiled
from harness.model.cell import Cell
from harness.model.discovery import Kernel
from harness.model.errors import Skip, SpecError
from harness.model.outcome import CellKind
from harness.pipeline.cells import PlannedCell, settled_cell
from harness.pipeline.compiling import TargetBuilds
from harness.pipeline.console import CountProgress
from harness.pipeline.context import RunContext
from harness.run.check_cache import CheckCache
from harness.run.spec_check import CHECKED, check_kernels

FROM_CACHE = "answered from the check cache: nothing the check reads has changed"


@dataclass(frozen=True)
class NotRunHere:
    """A kernel's cases this machine cannot run, and why (the first case's reason)."""

    kernel: Kernel
    why: Skip
    cases: list[str]


def check_on_cpu(
    context: RunContext, not_run: list[NotRunHere], builds: TargetBuilds
) -> list[Cell]:
    """A cell for each case of `not_run`, checked on this machine's CPU."""
    kernels = [each.kernel for each in not_run]
    said = CountProgress(
        f"check {context.target.name}", "kernels", "their cases checked on the CPU", len(kernels)
    )
    findings = check_kernels(
        kernels,
        {
            key: build.resources if isinstance(build, Compiled) else None
            for key, build in builds.builds.items()
        },
        context.target,
        context.case_timeout_s,
        context.confinement,
        said,
        CheckCache(context.options.cache_dir),
    )
    cells = []
    for each in not_run:
        for name in each.cases:
            found = findings[each.kernel.classname][name]
            checked = found.note or CHECKED
            checked = f"{checked}; {FROM_CACHE}" if found.cached else checked
            settled = SpecError(found.finding) if found.finding else each.why.adding(checked)
            planned = PlannedCell(CellKind.CASE, name)
            cell = settled_cell(each.kernel, planned, context.target, context.provenance, settled)
            cell.seconds = found.seconds  # its time here: the check of it
            cells.append(cell)
    return cells
