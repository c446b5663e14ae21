"""What a run over one target is, fixed once before its first cell: the matrix and options it
was asked for, the kernels it selected, what this machine has (nvcc, GPUs, compute-sanitizer),
where its cells say they ran, and what its specs' processes may touch.

Every stage reads the run from this one frozen RunContext, so nothing is threaded by hand
through the stages, and nothing about the run changes once a stage has begun.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compile.nvcc import Build
from harness.compile.toolchain import Toolchain
from harness.model.cell import Provenance
from harness.model.discovery import KernelFolder, kernel_folders
from harness.model.errors import KernelFailed, Skip, Unavailable, UsageError
from harness.model.matrix import Matrix, Target
from harness.model.outcome import SkipReason
from harness.model.provenance import runner_name
from harness.pipeline.cells import compile_cell_of
from harness.pipeline.sharding import ShardRequest, Times, default_sources, times_of
from harness.report.history import History, HistoryError
from harness.run.device import DeviceInfo
from harness.sandbox import Confinement, for_specs, unavailable

NO_SANITIZER = Unavailable("not looked for: this run uses no compute-sanitizer")


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
    history: Path | None = None  # test --history DB: the finished run is kept there too
    # test --carry-from DB: verdicts passed on from the history there (harness.pipeline.carrying)
    carry_from: Path | None = None


class NothingToRun(UsageError):
    """The kernel trees and -k select no kernel: an error, as pytest's "no tests collected"."""


class NotAFolder(UsageError):
    """--reports or --cache names a file, not a folder."""


@dataclass(frozen=True)
class RunContext:
    """One run over one target, as every stage reads it."""

    matrix: Matrix
    options: RunOptions
    folders: tuple[KernelFolder, ...]  # the kernels selected, in the order found
    toolchain: Toolchain | Unavailable
    devices: tuple[DeviceInfo, ...] | Unavailable  # every GPU the cases spread over, or why none
    provenance: Provenance  # where and with what the cells ran
    confinement: Confinement | None  # what a spec's processes may touch; None: not confined
    sanitizer: Path | Unavailable  # compute-sanitizer, for a run that uses it
    shard_times: Times | None  # what weighs the shards of a --shard run: read before it begins

    @property
    def target(self) -> Target:
        return self.options.target

    @property
    def device(self) -> DeviceInfo | Unavailable:
        """The GPU a single-GPU stage (sanitize, A/B) uses: the first."""
        return self.devices if isinstance(self.devices, Unavailable) else self.devices[0]

    @property
    def case_timeout_s(self) -> float:
        return self.matrix.timer.case_timeout_s

    def runnable_binary(self, build: Build, defines: tuple[str, ...] = ()) -> Path:
        """The binary a build's run cells load here; the CellError that settles them when they
        cannot run here. `defines`: the case macros the build is of, to name its compile cell."""
        target, device = self.target, self.device
        # A case that can never run because its kernel did not build fails, on any machine.
        if isinstance(build, Unavailable):
            raise KernelFailed(f"not compiled: {build.why}")
        if build.binary is None:
            compiled = compile_cell_of(defines).case
            raise KernelFailed(f"not compiled: nvcc failed (see {compiled}[{target.name}])")
        if isinstance(device, Unavailable):
            raise Skip(SkipReason.NO_DEVICE, f"no CUDA device visible ({device.why})")
        way = target.runs_on(device.cc)
        if way is None:
            how = f"CC {target.cc} exactly" if target.arch_specific else f"CC {target.cc.major}.x"
            if target.ptx:
                how += f" or, through PTX, CC >= {target.cc}"
            raise Skip(
                SkipReason.DEVICE_UNSUPPORTED,
                f"compiled and inspected, never run here: {target.name} binaries run on {how}; "
                f"{device.name} is CC {device.cc}",
            )
        if why := driver_refuses(self.toolchain, device, way):
            raise Skip(SkipReason.DRIVER_UNSUPPORTED, why)
        return build.binary


def driver_refuses(toolchain: Toolchain | Unavailable, device: DeviceInfo, way: str) -> str | None:
    """Why `device`'s driver cannot load what `toolchain` built, run `way` ("sass" or
    "ptx-jit"); None where it can, or where either version is unknown. A driver JITs the PTX of
    its own CUDA release or older only; it loads a binary of a newer minor release of its own
    major (minor-version compatibility), never one of a newer major."""
    if isinstance(toolchain, Unavailable):
        return None
    built, driver = _release(toolchain.release), _release(device.cuda_driver)
    if built is None or driver is None or built <= driver:
        return None
    said = f"driver {device.driver} (CUDA {device.cuda_driver})"
    if way == "ptx-jit":
        return (
            f"compiled, never run here: {said} cannot JIT the PTX of nvcc {toolchain.version}, "
            f"which needs a driver of CUDA {toolchain.release} or newer"
        )
    if built[0] > driver[0]:
        return (
            f"compiled, never run here: {said} cannot load a binary of nvcc "
            f"{toolchain.version}, a newer CUDA major"
        )
    return None


def _release(text: str) -> tuple[int, int] | None:
    """ "13.0" (or "13.0.88") as (13, 0); None where it is no such version."""
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def open_run(
    matrix: Matrix,
    options: RunOptions,
    toolchain: Toolchain | Unavailable,
    devices: Sequence[DeviceInfo] | Unavailable,
    sanitizer: Path | Unavailable = NO_SANITIZER,
) -> RunContext:
    """The run's context: its kernels selected and a --shard run's times read first (a usage
    error makes nothing: no report, no folder), then its cache and reports folders made and its
    specs' confinement decided."""
    folders = check_selection(options.kernels_roots, options.select)
    for option, folder in (("--reports", options.reports_dir), ("--cache", options.cache_dir)):
        if folder.exists() and not folder.is_dir():
            raise NotAFolder(f"{option} {folder}: not a folder")
    shard_times = None
    if options.shard is not None:
        target = options.target.name
        sources = options.shard.times or default_sources(options.reports_dir, target)
        shard_times = times_of(sources, target)
    if options.history is not None:  # last: it makes the database where there is none
        _check_history(options)
    gpus = devices if isinstance(devices, Unavailable) else tuple(devices)
    first = gpus if isinstance(gpus, Unavailable) else gpus[0]
    provenance = run_provenance(runner_name(options.runner), options.commit, toolchain, first)
    return RunContext(
        matrix=matrix,
        options=options,
        folders=tuple(folders),
        toolchain=toolchain,
        devices=gpus,
        provenance=provenance,
        confinement=spec_confinement(options),
        sanitizer=sanitizer,
        shard_times=shard_times,
    )


class HistoryUnusable(UsageError):
    """test --history names a database the run could not keep its report in."""


def _check_history(options: RunOptions) -> None:
    """That the run's report can be kept where --history says, under its commit, before the
    run begins."""
    assert options.history is not None
    if not options.commit:
        raise HistoryUnusable(
            f"--history {options.history}: the run's commit is unknown (no git checkout here, "
            "and no $MATRIX_COMMIT): a history keeps runs by commit"
        )
    try:
        History(options.history).close()
    except HistoryError as error:
        raise HistoryUnusable(f"--history {error}") from error


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


def report_stem(kind: str, target: Target, select: str, shard: ShardRequest | None = None) -> str:
    """`<kind>-<target>`, `<kind>-<target>-shard2of4` for a shard; a partial run's report is
    another file, never the full one."""
    stem = f"{kind}-{target.name}"
    if shard is not None:
        stem += f"-shard{shard.index}of{shard.count}"
    return f"partial-{stem}" if select else stem
