"""What `test`, `compile` and `sanitize` share: their options, finding and compiling a target's
kernels, and deciding which builds can run here.

Every kernel found gets its cells from here or from the command, never none: a broken spec is an
error cell, a kernel the target cannot express has its compile and run cells skipped, and a run
cell that cannot run says why. This is where what failed becomes a cell: the stages raise a
CellError (or give Unavailable for a value they lack), and the cell is settled from it here.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.compile.nvcc import Compiled, Compiler, failure_line
from harness.compile.toolchain import Toolchain, gpu_codes
from harness.model import spec_children
from harness.model.cell import Cell, CompileFacts, DeviceRecord, Provenance, Report
from harness.model.declared import DeclaredCase
from harness.model.discovery import Kernel, KernelFolder, build_label, kernel_folders
from harness.model.errors import CellError, KernelFailed, Skip, SpecError, Unavailable, UsageError
from harness.model.matrix import Matrix, Target
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.model.provenance import runner_name
from harness.pipeline import sharding
from harness.pipeline.sharding import ShardRequest
from harness.report import store
from harness.report.store import ReportFiles
from harness.run.device import DeviceInfo
from harness.sandbox import Confinement, for_specs, unavailable

Build = Compiled | Unavailable  # Unavailable: nothing was compiled (no nvcc, refused), and why


@dataclass(frozen=True)
class RunOptions:
    """What one command runs over one target: which kernels, where reports and builds go."""

    target: Target
    kernels_roots: tuple[Path, ...]  # each holds <chapter>/<kernel>/spec.py folders
    reports_dir: Path
    cache_dir: Path
    select: str = ""  # keep kernels whose <chapter>.<kernel> contains this
    runner: str = ""  # names the report's suite; defaults to the host name
    commit: str | None = None  # the project's commit the run is of
    shard: ShardRequest | None = None  # test --shard i/N: this part of the kernels only
    root: Path | None = None  # the project: reports name kernel sources relative to it


def spec_confinement(options: RunOptions) -> Confinement | None:
    """What a spec's processes may touch: they never write the project, the kernel trees, the
    compile cache or the reports (harness.sandbox); None where this machine cannot confine a
    process (see sandbox_said). They may read the cache's MAC key: where they are confined they
    cannot write an entry to sign, and where they are not, nothing could hide it from them."""
    if unavailable() is not None:
        return None
    # Made now, as the run would make them: a folder not there yet would be kept as its nearest
    # existing one, and a scratch folder beside it with it. One that cannot be made stays so.
    for folder in (options.cache_dir, options.reports_dir):
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
    roots = (options.root,) if options.root else ()
    protected = (*roots, *options.kernels_roots, options.cache_dir, options.reports_dir)
    return for_specs(protected)


def sandbox_said(confinement: Confinement | None) -> str:
    """One line for the console: whether this run's specs run confined, and why not."""
    if confinement is not None:
        return "specs: confined (Landlock): they cannot write the cache, reports or project"
    return (
        f"specs: NOT confined ({unavailable()}): a spec's code could rewrite what the harness "
        "trusts"
    )


@dataclass(frozen=True)
class RunResult:
    report: Report
    files: ReportFiles
    compiled: int
    cached: int

    @property
    def cells(self) -> list[Cell]:
        return self.report.cells

    @property
    def ok(self) -> bool:
        return not any(c.outcome in (Outcome.FAILED, Outcome.ERROR) for c in self.cells)


@dataclass(frozen=True)
class PlannedCell:
    """A cell of a kernel to come (its spec, compile, case or sanitizer cell): its kind, its
    case, and the tool of a sanitizer cell. It becomes a Cell once it is settled."""

    kind: CellKind
    case: str
    tool: str | None = None


COMPILE_CELL = PlannedCell(CellKind.COMPILE, "compile")


def compile_cell_of(defines: tuple[str, ...]) -> PlannedCell:
    """The compile cell of a build: `compile`, or `compile(VEC=4)` for one of case macros."""
    label = build_label(defines)
    return PlannedCell(CellKind.COMPILE, f"compile({label})") if label else COMPILE_CELL


class NothingToRun(UsageError):
    """The kernel trees and -k select no kernel: an error, as pytest's "no tests collected"."""


def new_cell(kernel: KernelFolder, planned: PlannedCell, target: Target, where: Provenance) -> Cell:
    """The cell `planned` of `kernel`, passed until something says otherwise."""
    return Cell(
        planned.kind,
        kernel.chapter,
        kernel.name,
        planned.case,
        target.name,
        where,
        Outcome.PASSED,
        tool=planned.tool,
    )


def settled_cell(
    kernel: KernelFolder, planned: PlannedCell, target: Target, where: Provenance, error: CellError
) -> Cell:
    """The cell `planned` of `kernel`, settled by what kept it from passing."""
    cell = new_cell(kernel, planned, target, where)
    cell.settle(error)
    return cell


def run_provenance(
    runner: str,
    commit: str | None,
    toolchain: Toolchain | Unavailable,
    device: DeviceInfo | Unavailable,
) -> Provenance:
    """Where and with what this run's cells ran."""
    toolkit = toolchain.version if isinstance(toolchain, Toolchain) else None
    if isinstance(device, Unavailable):
        return Provenance(runner=runner, commit=commit, toolkit=toolkit)
    return Provenance(
        runner=runner,
        commit=commit,
        toolkit=toolkit,
        device=device.name,
        cc=str(device.cc),
        driver=device.driver,
    )


def new_report(
    suite: str,
    target: Target,
    where: Provenance,
    toolchain: Toolchain | Unavailable,
    device: DeviceInfo | Unavailable,
) -> Report:
    """An empty report of this run, its header filled in."""
    return Report(
        suite=suite,
        target=target.name,
        provenance=where,
        device=None
        if isinstance(device, Unavailable)
        else DeviceRecord(
            name=device.name,
            cc=str(device.cc),
            driver=device.driver,
            cuda_driver=device.cuda_driver,
            sm_count=device.sm_count,
            l2_bytes=device.l2_bytes,
            uuid=device.uuid,
        ),
        no_device_why=device.why if isinstance(device, Unavailable) else None,
        nvcc=str(toolchain.nvcc) if isinstance(toolchain, Toolchain) else None,
    )


def report_stem(kind: str, target: Target, select: str, shard: ShardRequest | None = None) -> str:
    """`<kind>-<target>`, `<kind>-<target>-shard2of4` for a shard; a partial run's report is
    another file, never the full one."""
    stem = f"{kind}-{target.name}"
    if shard is not None:
        stem += f"-shard{shard.index}of{shard.count}"
    return f"partial-{stem}" if select else stem


def check_selection(roots: tuple[Path, ...], select: str) -> list[KernelFolder]:
    """The kernel folders under `roots` whose classname contains `select`, in the order found;
    NothingToRun when there are none (before any report is written: a run that selects nothing
    writes none)."""
    for root in roots:
        if not Path(root).is_dir():
            raise NothingToRun(f"--kernels {root}: no such directory")
    found = [folder for root in roots for folder in kernel_folders(root)]
    if not found:
        trees = ", ".join(str(root) for root in roots)
        raise NothingToRun(f"no kernels under {trees} (a kernel is <chapter>/<kernel>/spec.py)")
    chosen = [folder for folder in found if select in folder.classname]
    if not chosen:
        raise NothingToRun(f"-k {select!r} selects none of the {len(found)} kernels found")
    return chosen


def load_kernels(
    folders: list[KernelFolder],
    import_timeout_s: float,
    target: Target,
    where: Provenance,
    confinement: Confinement | None,
) -> tuple[list[Kernel], list[Cell]]:
    """The kernels of `folders` whose specs load, and an error cell for each that does not.

    Each spec is read in a child process of its own (harness.model.declared): a spec that
    raises, exits or hangs at import is its own error cell, and never reaches this process. Two
    folders with one classname (<chapter>.<kernel>,
    across trees, or `ch.1/k` beside `ch/1.k`) would share builds and cells: they get one error
    cell naming both folders.
    """
    spec_cell = PlannedCell(CellKind.SPEC, "spec")
    read = spec_children.read_all([f.spec_file for f in folders], import_timeout_s, confinement)
    by_classname: dict[str, list[KernelFolder]] = {}
    for folder in folders:
        by_classname.setdefault(folder.classname, []).append(folder)
    kernels: list[Kernel] = []
    cells: list[Cell] = []
    for classname, same in by_classname.items():
        try:
            if len(same) > 1:
                named = " and ".join(str(f.folder) for f in same)
                raise SpecError(
                    f"{classname} is the name of {len(same)} kernel folders: {named}; kernels "
                    "are told apart by <chapter>.<kernel>, so rename one"
                )
            (folder,) = same
            declaration = read[folder.spec_file]
            if isinstance(declaration, SpecError):
                raise declaration
            kernels.append(Kernel(folder.chapter, folder.name, folder.folder, declaration))
        except SpecError as error:
            cells.append(settled_cell(same[0], spec_cell, target, where, error))
    return kernels, cells


@dataclass(frozen=True)
class CompileStage:
    """A target's kernels compiled: the stage's cells, and what running starts from."""

    cells: list[Cell]  # target-unsupported skips, compile cells
    kernels: list[Kernel]  # those the target expresses, in the order found
    builds: dict[tuple[str, tuple[str, ...]], Build]  # by classname and case macros

    def build_of(self, kernel: Kernel, case: DeclaredCase) -> Build:
        """The build `case` runs: its kernel's, or that of its own macros."""
        return self.builds[kernel.classname, case.defines]

    @property
    def fresh(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and not b.cached)

    @property
    def cached(self) -> int:
        return sum(1 for b in self.builds.values() if isinstance(b, Compiled) and b.cached)


def compile_stage(
    *,
    target: Target,
    kernels: list[Kernel],
    toolchain: Toolchain | Unavailable,
    cache_dir: Path,
    where: Provenance,
    run_cells: Callable[[Kernel], list[PlannedCell]],
) -> CompileStage:
    """Every kernel of `kernels` compiled for `target`.

    A kernel the target cannot express is skipped, its compile cell and the run cells that
    `run_cells` gives it alike, so that no cell of the report goes missing.
    """
    cells = []
    expressible = [k for k in kernels if target.expresses(k.declared.requires)]
    for kernel in kernels:
        if kernel not in expressible:
            why = (
                f"{kernel.classname} needs {kernel.declared.requires}; target {target.name} emits "
                f"{target.sass}, which cannot express it"
            )
            unsupported = Skip(SkipReason.TARGET_UNSUPPORTED, why)
            compiles = [compile_cell_of(defines) for defines in kernel.builds]
            for run in [*compiles, *run_cells(kernel)]:
                cells.append(settled_cell(kernel, run, target, where, unsupported))
    pairs = [(kernel, defines) for kernel in expressible for defines in kernel.builds]
    builds = _compile(pairs, target, toolchain, cache_dir)
    for kernel, defines in pairs:
        build = builds[kernel.classname, defines]
        cells.append(_compile_cell(kernel, defines, target, build, where))
    return CompileStage(cells, expressible, builds)


def _compile(
    pairs: list[tuple[Kernel, tuple[str, ...]]],
    target: Target,
    toolchain: Toolchain | Unavailable,
    cache_dir: Path,
) -> dict[tuple[str, tuple[str, ...]], Build]:
    """Builds by classname and case macros."""
    keys = [(kernel.classname, defines) for kernel, defines in pairs]
    if isinstance(toolchain, Unavailable):
        return dict.fromkeys(keys, toolchain)
    if toolchain.release != target.toolkit.version:
        wrong = Unavailable(
            f"{target.name} pins CUDA {target.toolkit.version}, but {toolchain.nvcc} is "
            f"{toolchain.version}"
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
    results = Compiler(toolchain, cache_dir).compile_all(
        variants, _CompileProgress(target, len(variants))
    )
    return dict(zip(keys, results, strict=True))


class _CompileProgress:
    """A line while nvcc works, on a terminal and in CI alike: builds done of all, and the time
    so far, at most one a second and always the last (a cold build takes tens of seconds)."""

    EVERY_S = 1.0

    def __init__(self, target: Target, total: int) -> None:
        self.target = target
        self.started = time.monotonic()
        self.said = self.started
        if total:
            print(f"compile {target.name}: {total} builds, nvcc running ...", flush=True)

    def __call__(self, finished: int, total: int) -> None:
        now = time.monotonic()
        if finished < total and now - self.said < self.EVERY_S:
            return
        self.said = now
        print(
            f"compile {self.target.name}: {finished}/{total} builds, {now - self.started:.1f} s",
            flush=True,
        )


def _compile_cell(
    kernel: Kernel, defines: tuple[str, ...], target: Target, build: Build, where: Provenance
) -> Cell:
    cell = new_cell(kernel, compile_cell_of(defines), target, where)
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


def runnable_binary(
    target: Target,
    device: DeviceInfo | Unavailable,
    build: Build,
    defines: tuple[str, ...] = (),
) -> Path:
    """The binary a build's run cells load here; the CellError that settles them when they
    cannot run here. `defines`: the case macros the build is of, to name its compile cell."""
    # A case that can never run because its kernel did not build fails, on any machine.
    if isinstance(build, Unavailable):
        raise KernelFailed(f"not compiled: {build.why}")
    if build.binary is None:
        compiled = compile_cell_of(defines).case
        raise KernelFailed(f"not compiled: nvcc failed (see {compiled}[{target.name}])")
    if isinstance(device, Unavailable):
        raise Skip(SkipReason.NO_DEVICE, f"no CUDA device visible ({device.why})")
    if target.runs_on(device.cc) is None:
        how = f"CC {target.cc} exactly" if target.arch_specific else f"CC {target.cc.major}.x"
        if target.ptx:
            how += f" or, through PTX, CC >= {target.cc}"
        raise Skip(
            SkipReason.DEVICE_UNSUPPORTED,
            f"compiled and inspected, never run here: {target.name} binaries run on {how}; "
            f"{device.name} is CC {device.cc}",
        )
    return build.binary


@dataclass(frozen=True)
class Found:
    """Kernel folders made kernels: those whose spec loaded, an error cell for each that did
    not, and the loaded ones compiled for the target."""

    loaded: list[Kernel]
    spec_cells: list[Cell]
    stage: CompileStage


def load_and_compile(
    folders: list[KernelFolder],
    matrix: Matrix,
    target: Target,
    toolchain: Toolchain | Unavailable,
    cache_dir: Path,
    where: Provenance,
    run_cells: Callable[[Kernel], list[PlannedCell]],
    confinement: Confinement | None,
) -> Found:
    """The specs of `folders` loaded (load_kernels) and their kernels compiled (compile_stage)."""
    timeout_s = matrix.timer.case_timeout_s
    loaded, spec_cells = load_kernels(folders, timeout_s, target, where, confinement)
    stage = compile_stage(
        target=target,
        kernels=loaded,
        toolchain=toolchain,
        cache_dir=cache_dir,
        where=where,
        run_cells=run_cells,
    )
    return Found(loaded, spec_cells, stage)


@dataclass(frozen=True)
class StartedRun:
    """A run past its first steps: its report (on disk, unfinished), where it runs, and the
    target's kernels compiled."""

    report: Report
    where: Provenance
    stage: CompileStage
    confinement: Confinement | None  # what the specs' processes of this run may touch


def start_run(
    matrix: Matrix,
    options: RunOptions,
    files: ReportFiles,
    suite: str,
    toolchain: Toolchain | Unavailable,
    device: DeviceInfo | Unavailable,
    run_cells: Callable[[Kernel], list[PlannedCell]],
    compute_sanitizer: Path | None = None,
) -> StartedRun:
    """What every command does first: select the kernels (NothingToRun before any report is
    written), write the report empty and unfinished (a run killed now leaves no stale one),
    load the specs, compile, and put their cells in the report and on disk. `suite` is the
    report's kind of suite, `cuda-matrix` or `cuda-matrix-sanitize`."""
    target = options.target
    folders = check_selection(options.kernels_roots, options.select)
    runner = runner_name(options.runner)
    where = run_provenance(runner, options.commit, toolchain, device)
    name = f"{suite}.{target.name}.{runner}"
    if options.shard is not None:
        name += f".shard{options.shard.index}of{options.shard.count}"
    report = new_report(name, target, where, toolchain, device)
    report.compute_sanitizer = str(compute_sanitizer) if compute_sanitizer else None
    store.write(files, report)
    confinement = spec_confinement(options)
    print(sandbox_said(confinement), flush=True)
    timeout_s = matrix.timer.case_timeout_s
    loaded, spec_cells = load_kernels(folders, timeout_s, target, where, confinement)
    if options.shard is not None:
        planned = _planned(options, loaded, spec_cells)
        report.shard = planned.shard
        loaded = [kernel for kernel in loaded if planned.has(kernel.classname)]
        spec_cells = [cell for cell in spec_cells if planned.has(cell.classname)]
    stage = compile_stage(
        target=target,
        kernels=loaded,
        toolchain=toolchain,
        cache_dir=options.cache_dir,
        where=where,
        run_cells=run_cells,
    )
    report.cells.extend([*spec_cells, *stage.cells])
    report.sources = _sources(options.root, loaded, spec_cells, folders)
    store.write(files, report)
    return StartedRun(report, where, stage, confinement)


def _sources(
    root: Path | None, loaded: list[Kernel], spec_cells: list[Cell], folders: list[KernelFolder]
) -> dict[str, str]:
    """Each kernel's source, and the spec of each whose spec did not load, by classname,
    relative to `root` where it is inside it."""

    def shown(path: Path) -> str:
        if root is not None and path.resolve().is_relative_to(root.resolve()):
            return str(path.resolve().relative_to(root.resolve()))
        return str(path)

    found = {kernel.classname: shown(kernel.source) for kernel in loaded}
    broken = {cell.classname for cell in spec_cells}
    for folder in folders:
        if folder.classname in broken:
            found.setdefault(folder.classname, shown(folder.spec_file))
    return found


def _planned(options: RunOptions, loaded: list[Kernel], spec_cells: list[Cell]) -> sharding.Plan:
    """The shard plan of every kernel found, weighed by --times, else by the target's runs in
    the reports folder (its history, else its last full report), else by case sizes."""
    assert options.shard is not None
    request = options.shard
    target = options.target.name
    sources = request.times or sharding.default_sources(options.reports_dir, target)
    times = sharding.times_of(sources, target)
    broken = sorted({cell.classname for cell in spec_cells})
    weights = sharding.weights_of(loaded, broken, times.seconds)
    return sharding.plan(request, weights, times.said)
