"""The compile stage: every loaded kernel built for the run's target, one compile cell per
build; a kernel the target cannot express has its compile cells and the cells its plan owes it
skipped target-unsupported, so that no cell of the report goes missing."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.compile.nvcc import Build, Compiled, Compiler, failure_line
from harness.compile.toolchain import gpu_codes
from harness.model.cell import SHORTEST_SECONDS, Cell, CompileFacts
from harness.model.declared import DeclaredCase
from harness.model.discovery import Kernel
from harness.model.errors import KernelFailed, Skip, Unavailable
from harness.model.outcome import SkipReason
from harness.pipeline.cells import PlannedCell, compile_cell_of, new_cell, settled_cell
from harness.pipeline.console import CountProgress
from harness.pipeline.context import RunContext

BuildKey = tuple[str, tuple[str, ...]]  # a kernel's classname, and the case macros of a build


@dataclass(frozen=True)
class TargetBuilds:
    """A target's kernels compiled: the stage's cells, and what running starts from."""

    cells: list[Cell]  # target-unsupported skips, compile cells
    kernels: list[Kernel]  # those the target expresses, in the order found
    builds: dict[BuildKey, Build]

    def build_of(self, kernel: Kernel, case: DeclaredCase) -> Build:
        """The build `case` runs: its kernel's, or that of its own macros."""
        return self.builds[kernel.classname, case.defines]

    @property
    def fresh(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and not b.cached)

    @property
    def cached(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and b.cached)


def compile_kernels(
    context: RunContext, kernels: list[Kernel], owed: Callable[[Kernel], list[PlannedCell]]
) -> TargetBuilds:
    """Every kernel of `kernels` compiled for the run's target; `owed` names the cells a
    kernel's plan gives it beyond its compile cells, skipped with them where the target cannot
    express the kernel."""
    target, provenance = context.target, context.provenance
    cells = []
    expressible = [k for k in kernels if target.expresses(k.declared.requires)]
    for kernel in kernels:
        if kernel not in expressible:
            started = time.perf_counter()  # its cells' time: the finding that the target cannot
            why = (
                f"{kernel.classname} needs {kernel.declared.requires}; target {target.name} emits "
                f"{target.sass}, which cannot express it"
            )
            unsupported = Skip(SkipReason.TARGET_UNSUPPORTED, why)
            planned = [*(compile_cell_of(defines) for defines in kernel.builds), *owed(kernel)]
            skipped = [settled_cell(kernel, p, target, provenance, unsupported) for p in planned]
            share = max((time.perf_counter() - started) / len(skipped), SHORTEST_SECONDS)
            for cell in skipped:
                cell.seconds = share
            cells += skipped
    pairs = [(kernel, defines) for kernel in expressible for defines in kernel.builds]
    builds = _compile(context, pairs)
    for kernel, defines in pairs:
        build = builds[kernel.classname, defines]
        cells.append(_compile_cell(context, kernel, defines, build))
    return TargetBuilds(cells, expressible, builds)


def _compile(
    context: RunContext, pairs: list[tuple[Kernel, tuple[str, ...]]]
) -> dict[BuildKey, Build]:
    """Builds by classname and case macros."""
    target, toolchain = context.target, context.toolchain
    keys = [(kernel.classname, defines) for kernel, defines in pairs]
    if isinstance(toolchain, Unavailable):
        return dict.fromkeys(keys, toolchain)
    if toolchain.release != target.toolkit.version:
        wrong = Unavailable(
            f"{target.name} pins CUDA {target.toolkit.version}, but {toolchain.nvcc} is "
            f"{toolchain.version}: {target.toolkit.version} is not installed here (its sessions "
            f"install it: nox -s test-{target.session}), or NVCC names another"
        )
        return dict.fromkeys(keys, wrong)
    known = gpu_codes(toolchain)
    if known is not None and re.sub(r"[af]$", "", target.sass) not in known:
        # The matrix is wrong, not the kernel: every compile cell says so in these words.
        unknown = Unavailable(
            f"matrix.yaml: target {target.name} emits {target.sass}, which nvcc "
            f"{toolchain.version} does not know (it knows {', '.join(known)})"
        )
        return dict.fromkeys(keys, unknown)
    variants = [(kernel.variant(defines), target) for kernel, defines in pairs]
    said = CountProgress(f"compile {target.name}", "builds", "nvcc running", len(variants))
    results = Compiler(toolchain, context.options.cache_dir).compile_all(variants, said)
    return dict(zip(keys, results, strict=True))


def _compile_cell(
    context: RunContext, kernel: Kernel, defines: tuple[str, ...], build: Build
) -> Cell:
    target = context.target
    cell = new_cell(kernel, compile_cell_of(defines), target, context.provenance)
    if isinstance(build, Unavailable):
        cell.compile = CompileFacts(embedded=target.gencode)
        cell.settle(KernelFailed(f"not compiled: {build.why}"))
        return cell
    cell.compile = CompileFacts(
        embedded=target.gencode,
        cached=build.cached,
        resources=dict(build.resources),
        sass_counts=dict(build.sass.counts) if build.sass else {},
        binary_sha256=build.sha256,
        code_identity=build.code_identity,
    )
    cell.detail = " ".join(build.command) + "\n" + build.log
    cell.seconds = build.seconds
    if build.binary is None:
        cell.settle(KernelFailed(f"nvcc failed for {kernel.source}: {failure_line(build.log)}"))
    elif build.sass and build.sass.error:
        wanted = ", ".join(build.sass.counts)
        cell.settle(KernelFailed(f"cannot check the SASS for {wanted}: {build.sass.error}"))
    elif build.sass and build.sass.missing:
        cell.settle(
            KernelFailed(
                f"the {target.name} SASS has no {', '.join(build.sass.missing)}: "
                f"{kernel.classname} compiled to a slower path than its spec demands"
            )
        )
    return cell
