"""`ab <target> --base REF`: each case whose code changed since the base commit, timed against
the base's build on this GPU, interleaved; the verdicts go into the target's report.
`ab <column> --base-column <column>` is the upgrade report: the same sources built by another
toolkit of the same target (`sm_90a` for `sm_90a-cuda13.5`), compared the same way, the base
named by its toolkit (`cuda13.0`) where a commit would be.

The report is the one `test` wrote for the target (its cells are the head's). The base's kernel
trees come from git (`--base REF`), or from a folder laid out as the project is
(`--base-tree DIR --base-commit SHA`: what a container without git is given). Both sides are
compiled by this toolchain into the same cache. A kernel whose code identity equals the base's
is IDENTICAL and not timed (`--all` times it anyway: an A/A of unchanged code); one whose
code identity either side lacks (no cuobjdump ran) is timed, and `ab` counts them; one the base
lacks is NEW; one the base cannot build, set up, verify or run is NOT_RUN, saying why. Nothing
of the report's own cells changes but their `ab`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compile.identity import IdentityError, sass_identity
from harness.compile.nvcc import Build, Compiled, failure_line
from harness.model.cell import ABComparison, Cell, Judgement, Report
from harness.model.codec import report_from_json
from harness.model.discovery import Kernel, KernelFolder, kernel_folders
from harness.model.errors import CellError, ReportError, Unavailable, UsageError
from harness.model.outcome import CellKind, Outcome
from harness.model.revision import BaseTree
from harness.pipeline.compiling import TargetBuilds, compile_kernels
from harness.pipeline.context import RunContext, RunOptions, report_stem
from harness.pipeline.loading import Loaded, load_kernels
from harness.report import store
from harness.report.verdict import ab_threshold_pct, judge_paired
from harness.run import worker
from harness.run.device import DeviceInfo
from harness.run.paired import PairTiming
from harness.run.pool import WorkerFault
from harness.run.worker import PairJob, WorkerSetup


@dataclass(frozen=True)
class BaseColumn:
    """The base of an upgrade report: the head's own kernel trees, built for another column of
    the same target (its toolkit's nvcc) by that column's run context."""

    context: RunContext

    @property
    def commit(self) -> str:  # what names the base in each A/B: its toolkit
        return "cuda" + self.context.target.toolkit.version


Base = BaseTree | BaseColumn | Unavailable


@dataclass(frozen=True)
class _Base:
    """The base commit's side of one kernel: its loaded spec and build, or why there is none
    to time (`missing`: NEW; `broken`: NOT_RUN)."""

    kernel: Kernel | None = None
    builds: dict[tuple[str, ...], Build] | None = None  # by case macros
    missing: str = ""
    broken: str = ""


def compare_target(
    context: RunContext, report: Report, base: Base, everything: bool = False
) -> dict[tuple[str, str], ABComparison]:
    """The A/B of every passed case cell of `report` against `base`, by (classname, case)."""
    head = _compiled(context, context.folders)
    bases = _base_kernels(context, base, head.kernels)
    commit = "none" if isinstance(base, Unavailable) else base.commit
    runs_base = base.context if isinstance(base, BaseColumn) else context
    passed = {
        (cell.classname, cell.case)
        for cell in report.cells
        if cell.kind is CellKind.CASE and cell.outcome is Outcome.PASSED
    }
    found: dict[tuple[str, str], ABComparison] = {}
    jobs: list[tuple[tuple[str, str], PairJob]] = []
    base_codes: dict[tuple[str, str], str | None] = {}  # the base build's code identity
    same_sass: dict[tuple[str, str], bool | None] = {}  # whether the instructions are the same
    read: dict[Path, str | None] = {}  # each binary's instructions' identity, read once
    unknown: set[str] = set()  # kernels whose code identity either side lacks
    for kernel in head.builds.kernels:
        cases = [c for c in kernel.declared.cases if (kernel.classname, c.name) in passed]
        for case in cases:
            key = (kernel.classname, case.name)
            head_build = head.builds.build_of(kernel, case)
            plan = _plan(head_build, bases[kernel.classname], case.name, commit)
            if isinstance(plan, ABComparison):
                found[key] = plan
                continue
            if plan.unknown:
                unknown.add(kernel.classname)
            if plan.identical and not everything:
                found[key] = ABComparison(
                    commit,
                    Judgement.IDENTICAL,
                    "the base's code identity is the head's",
                    base_code_identity=plan.code,
                    same_sass=True,
                )
            else:
                same_sass[key] = _same_sass(context, plan.build, head_build, read)
                try:
                    base_binary = runs_base.runnable_binary(plan.build)
                    head_binary = context.runnable_binary(head_build, case.defines)
                except CellError as cannot:  # the base's code is known all the same
                    found[key] = ABComparison(
                        commit,
                        Judgement.NOT_RUN,
                        str(cannot),
                        base_code_identity=plan.code,
                        same_sass=same_sass[key],
                    )
                    continue
                job = PairJob(
                    plan.kernel.spec_file,
                    kernel.spec_file,
                    case.name,
                    context.target,
                    base_binary,
                    head_binary,
                    context.matrix.ab,
                )
                jobs.append((key, job))
                base_codes[key] = plan.code
    if unknown:
        print(f"ab: {identity_unknown_line(sorted(unknown))}", flush=True)
    if jobs:  # runnable_binary found a device for each
        timed = _time_pairs(context, jobs, commit, base_codes)
        found.update(
            {k: dataclasses.replace(ab, same_sass=same_sass[k]) for k, ab in timed.items()}
        )
    return found


def _same_sass(
    context: RunContext, base: Compiled, head: Build, read: dict[Path, str | None]
) -> bool | None:
    """Whether the two builds' instructions are the same (identity.sass_identity); None where
    either cannot be read."""
    toolchain = context.toolchain
    if isinstance(toolchain, Unavailable) or not isinstance(head, Compiled):
        return None
    identities = []
    for binary in (base.binary, head.binary):
        if binary is None:
            return None
        if binary not in read:
            try:
                read[binary] = sass_identity(toolchain.cuobjdump, binary)
            except IdentityError:
                read[binary] = None
        identities.append(read[binary])
    return None if None in identities else identities[0] == identities[1]


@dataclass(frozen=True)
class _Side:
    """One tree's kernels, loaded and compiled for the target."""

    loaded: Loaded
    builds: TargetBuilds

    @property
    def kernels(self) -> list[Kernel]:
        return self.loaded.kernels


def _compiled(context: RunContext, folders: Sequence[KernelFolder]) -> _Side:
    """The load and compile stages over `folders`, no cell owed beyond the compile cells."""
    loaded = load_kernels(context, tuple(folders))
    return _Side(loaded, compile_kernels(context, loaded.kernels, lambda kernel: []))


@dataclass(frozen=True)
class _Plan:
    """A kernel both sides have and build: the base's kernel and build, and whether its code is
    the head's."""

    kernel: Kernel
    build: Compiled
    identical: bool
    code: str | None  # the base's code identity
    unknown: bool  # the base's or the head's code identity is not known: never IDENTICAL


def _plan(head_build: Build, base: _Base, case: str, commit: str) -> _Plan | ABComparison:
    """How a case is compared: timed against the base's build of it, or, where there is none
    to time, what it gets (NEW, NOT_RUN) and why."""
    if base.missing:
        return ABComparison(commit, Judgement.NEW, base.missing)
    if base.broken or base.kernel is None or base.builds is None:
        return ABComparison(commit, Judgement.NOT_RUN, base.broken or "no base build")
    base_case = next((c for c in base.kernel.declared.cases if c.name == case), None)
    if base_case is None:
        return ABComparison(commit, Judgement.NEW, "the base has no such case")
    build = base.builds[base_case.defines]
    if isinstance(build, Unavailable):
        return ABComparison(commit, Judgement.NOT_RUN, f"the base was not compiled: {build.why}")
    if build.binary is None:
        line = failure_line(build.log)
        return ABComparison(commit, Judgement.NOT_RUN, f"the base's build failed: {line}")
    head_code = head_build.code_identity if isinstance(head_build, Compiled) else None
    identical = head_code is not None and head_code == build.code_identity
    unknown = head_code is None or build.code_identity is None
    return _Plan(base.kernel, build, identical, build.code_identity, unknown)


def identity_unknown_line(kernels: Sequence[str]) -> str:
    """What `ab` says of kernels whose code identity it does not know (a cuobjdump it could not
    run): it cannot tell their code unchanged, so it times them rather than carrying them over
    as IDENTICAL."""
    count = f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"
    return f"code identity unknown for {count}: they are timed, not carried ({', '.join(kernels)})"


def _base_kernels(context: RunContext, base: Base, head_kernels: list[Kernel]) -> dict[str, _Base]:
    """The base side of each head kernel, by classname."""
    if isinstance(base, Unavailable):
        return {k.classname: _Base(missing=f"no base: {base.why}") for k in head_kernels}
    if isinstance(base, BaseColumn):  # the same sources: each kernel is there
        return _sides(_compiled(base.context, context.folders), head_kernels, {}, base.commit)
    options = context.options
    folders = []
    outside = {}
    for root in options.kernels_roots:
        base_root = base.root_of(Path(root))
        if isinstance(base_root, Unavailable):
            outside.update({f.classname: base_root.why for f in kernel_folders(Path(root))})
        elif base_root.is_dir():
            folders += kernel_folders(base_root, options.select)
    return _sides(_compiled(context, folders), head_kernels, outside, base.commit)


def _sides(
    side: _Side, head_kernels: list[Kernel], outside: dict[str, str], commit: str
) -> dict[str, _Base]:
    """Each head kernel's base in `side`, by classname; `outside`: kernels of trees the base
    does not have, and why."""
    broken = {cell.classname: cell.message for cell in side.loaded.cells}
    by_name = {k.classname: k for k in side.kernels}
    sides = {}
    for kernel in head_kernels:
        name = kernel.classname
        if name in outside:
            sides[name] = _Base(missing=f"no base: {outside[name]}")
        elif name in broken:
            sides[name] = _Base(broken=f"the base's spec cannot be used: {broken[name]}")
        elif name not in by_name:
            sides[name] = _Base(missing=f"no {name} at {commit[:12]}")
        elif by_name[name] not in side.builds.kernels:
            needs = by_name[name].declared.requires
            sides[name] = _Base(broken=f"the base's kernel needs {needs}, beyond this target")
        else:
            base_kernel = by_name[name]
            builds = {d: side.builds.builds[name, d] for d in base_kernel.builds}
            sides[name] = _Base(base_kernel, builds)
    return sides


def _time_pairs(
    context: RunContext,
    jobs: list[tuple[tuple[str, str], PairJob]],
    commit: str,
    base_codes: dict[tuple[str, str], str | None],
) -> dict[tuple[str, str], ABComparison]:
    """Each job timed in a GPU worker of its kernel's own (a fault costs its own case and a
    fresh worker; the next kernel's worker starts while this one's cases are timed), judged."""
    device, matrix = context.device, context.matrix
    assert isinstance(device, DeviceInfo)  # a job's binaries were found runnable on it
    found = {}
    timeout_s = context.case_timeout_s + matrix.ab.budget_s
    by_kernel: dict[str, list[tuple[tuple[str, str], PairJob]]] = {}
    for key, job in jobs:
        by_kernel.setdefault(key[0], []).append((key, job))
    groups = list(by_kernel.values())
    with contextlib.ExitStack() as up:
        quiet = up.enter_context(tempfile.TemporaryDirectory(prefix="cuda-matrix-")) + "/gpu.lock"
        setup = WorkerSetup(
            device, matrix.timer, quiet_lock=Path(quiet), confinement=context.confinement
        )
        pools = [worker.gpu_pool(setup) for _ in groups]
        for pool in pools:
            up.callback(pool.close)
        for index, group in enumerate(groups):
            if index + 1 < len(pools):
                pools[index + 1].start()
            for key, job in group:
                try:
                    timing = PairTiming.from_json(pools[index].run(job, timeout_s))
                except (WorkerFault, ValueError) as fault:
                    timing = PairTiming(why=f"the A/B's worker failed: {fault}")
                found[key] = _judged(timing, commit, base_codes[key])
                print(_line(key, found[key]), flush=True)
            pools[index].close()
    return found


def _judged(timing: PairTiming, commit: str, base_code: str | None) -> ABComparison:
    if timing.why or not timing.ratios:
        return ABComparison(
            commit, Judgement.NOT_RUN, timing.why or "no rounds", base_code_identity=base_code
        )
    assert timing.base_median_us is not None and timing.head_median_us is not None
    threshold = ab_threshold_pct(min(timing.base_median_us, timing.head_median_us))
    ratio, low, high, judgement = judge_paired(timing.ratios, threshold)
    return ABComparison(
        base_commit=commit,
        judgement=judgement,
        why="" if timing.same_inputs else "the specs make different problems: each on its own",
        ratio=ratio,
        low=low,
        high=high,
        threshold_pct=threshold,
        rounds=len(timing.ratios),
        base_median_us=timing.base_median_us,
        head_median_us=timing.head_median_us,
        same_inputs=timing.same_inputs,
        base_code_identity=base_code,
    )


def _line(key: tuple[str, str], ab: ABComparison) -> str:
    name = f"{key[0]}::{key[1]}"
    if ab.ratio is not None:
        return (
            f"  {ab.judgement.value:9} {name}  {ab.ratio:.4f} ({ab.low:.4f}-{ab.high:.4f}), "
            f"threshold {ab.threshold_pct:.2f} %, {ab.rounds} rounds, "
            f"{ab.base_median_us:.2f} -> {ab.head_median_us:.2f} us"
        )
    return f"  {ab.judgement.value:9} {name}  -- {ab.why}"


def instructions_line(found: dict[tuple[str, str], ABComparison]) -> str | None:
    """Which kernels' instructions changed, of those whose builds were compared (a code
    identity may change in attributes alone: another toolkit's); None where none was."""
    same: dict[str, bool] = {}
    for (kernel, _), ab in found.items():
        if ab.same_sass is not None:
            same[kernel] = same.get(kernel, True) and ab.same_sass
    if not same:
        return None
    changed = sorted(kernel for kernel, alike in same.items() if not alike)
    named = f": {', '.join(changed)}" if changed else ""
    return f"instructions changed in {len(changed)} of {len(same)} kernels compared{named}"


def unmeasured_lines(found: dict[tuple[str, str], ABComparison]) -> list[str]:
    """One line for each kernel whose cases were not timed alike (NEW, NOT_RUN), saying why;
    a kernel's cases that differ in that get a line each. IDENTICAL goes without saying."""
    by_kernel: dict[tuple[str, Judgement, str], list[str]] = {}
    for (kernel, case), ab in sorted(found.items()):
        if not ab.judgement.measured and ab.judgement is not Judgement.IDENTICAL:
            by_kernel.setdefault((kernel, ab.judgement, ab.why), []).append(case)
    lines = []
    for (kernel, judgement, why), cases in by_kernel.items():
        which = cases[0] if len(cases) == 1 else f"{len(cases)} cases"
        lines.append(f"  {judgement.value:9} {kernel} ({which})  -- {why}")
    return lines


@dataclass(frozen=True)
class HeadReport:
    """The `test` run's report of the target, which the A/B is written into, and its files."""

    report: Report
    files: store.ReportFiles


def head_report(options: RunOptions) -> HeadReport:
    """The target's `test` report; UsageError, naming the file, where there is none to read."""
    stem = report_stem("junit", options.target, options.select, options.shard)
    files = store.report_files(options.reports_dir, stem)
    try:
        report = report_from_json(json.loads(files.json.read_text()), files.json)
    except FileNotFoundError:
        raise UsageError(
            f"{files.json}: no report to add the A/B to: run `test` for this target first"
        ) from None
    except (OSError, ValueError, ReportError) as error:
        raise UsageError(f"{files.json}: cannot be read: {error}") from error
    return HeadReport(report, files)


def compare_and_record(
    context: RunContext, head: HeadReport, base: Base, everything: bool = False
) -> dict[tuple[str, str], ABComparison]:
    """compare_target, each case's A/B then written into the head report on disk."""
    found = compare_target(context, head.report, base, everything)
    _record(head.report, found)
    store.write(head.files, head.report)
    return found


def _record(report: Report, found: dict[tuple[str, str], ABComparison]) -> None:
    cells: list[Cell] = [c for c in report.cells if c.kind is CellKind.CASE]
    for cell in cells:
        cell.ab = found.get((cell.classname, cell.case), cell.ab)
