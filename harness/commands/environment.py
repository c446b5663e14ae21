"""What a command finds on this machine before it starts: the matrix, nvcc, the GPUs and
compute-sanitizer. Each is said on its line; one that is missing is Unavailable, with why, and
the cells that need it say so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.compile.toolchain import Toolchain, ToolchainError, find_toolchain
from harness.model.errors import Unavailable, UsageError
from harness.model.matrix import Matrix, MatrixError, Target, load_matrix
from harness.model.provenance import current_commit
from harness.pipeline.console import print_devices
from harness.pipeline.context import RunOptions
from harness.pipeline.sharding import ShardRequest
from harness.run.device import DeviceInfo, DeviceMissing, probe_all
from harness.run.sanitizer import SanitizerMissing, find_compute_sanitizer

# Where this package sits in a checkout of cuda-matrix itself, beside its matrix.yaml
CHECKOUT = Path(__file__).resolve().parents[2]


def project_root(start: Path | None = None) -> Path:
    """The project the commands work in (its matrix.yaml, kernels/, reports/): the nearest
    folder with a matrix.yaml from the working directory up; else the checkout of cuda-matrix
    the harness runs from; else the working directory, whose missing matrix.yaml is named."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "matrix.yaml").is_file():
            return folder
    if (CHECKOUT / "matrix.yaml").is_file():
        return CHECKOUT
    return here


class Unusable(UsageError):
    """The command cannot start: a matrix, an option or a report it needs cannot be used."""


def matrix_and_targets(path: Path, names: list[str]) -> tuple[Matrix, list[Target]]:
    """The matrix, and the targets named (every one when none is); Unusable naming the file
    and line when the matrix cannot be used."""
    if not Path(path).exists():
        raise Unusable(
            f"{path}: no such file: a project of cuda-matrix has a matrix.yaml in the folder it "
            "runs in or one above it (docs/install.md), or names one with --matrix"
        )
    try:
        matrix = load_matrix(path)
        return matrix, [matrix.target(n) for n in names] or list(matrix.targets.values())
    except MatrixError as error:
        raise Unusable(str(error)) from error


def toolchain(target: Target) -> Toolchain | Unavailable:
    """The nvcc of `target`'s toolkit, said on its line; where none is found, Unavailable and
    why (each compile cell says it). A toolkit installed at a path without an nvcc is the
    matrix's error, for this machine: Unusable."""
    try:
        found = find_toolchain(toolkit=target.toolkit)
    except ToolchainError as error:
        if target.toolkit.path is not None:
            raise Unusable(f"target {target.name}: {error}") from error
        print(f"error: {error}", file=sys.stderr)
        return Unavailable(str(error))
    print(f"nvcc {found.version} ({found.origin}: {found.nvcc})")
    return found


def devices(matrix: Matrix) -> list[DeviceInfo] | Unavailable:
    try:
        found: list[DeviceInfo] | Unavailable = probe_all(matrix)
    except DeviceMissing as missing:
        found = Unavailable(str(missing))
    print_devices(found)
    return found


def compute_sanitizer(
    nvcc: Toolchain | Unavailable, gpus: list[DeviceInfo] | Unavailable
) -> Path | Unavailable:
    try:
        found = find_compute_sanitizer(nvcc)
    except SanitizerMissing as error:
        if isinstance(gpus, Unavailable):  # nothing would run under it anyway
            print(f"compute-sanitizer: none ({error})")
        else:
            print(f"error: {error}", file=sys.stderr)
        return Unavailable(str(error))
    print(f"compute-sanitizer: {found}")
    return found


def run_options(args: argparse.Namespace, target: Target) -> RunOptions:
    """A command's options for one target, from the arguments every run command takes."""
    return RunOptions(
        target=target,
        kernels_roots=tuple(args.kernels or [project_root() / "kernels"]),
        reports_dir=args.reports,
        cache_dir=args.cache,
        select=args.select,
        runner=args.runner,
        commit=current_commit(project_root()),
        shard=_shard(args),
        root=project_root(),
        history=getattr(args, "history", None),
        carry_from=None if getattr(args, "no_carry", False) else getattr(args, "carry_from", None),
    )


def _shard(args: argparse.Namespace) -> ShardRequest | None:
    """--shard i/N (with --times) where given; a target's shards of matrix.yaml are jobs, each
    of which names its own shard."""
    text = getattr(args, "shard", None)
    times = getattr(args, "times", None)
    if text is None:
        if times is not None:
            raise Unusable("--times balances shards: it needs --shard i/N")
        return None
    return ShardRequest.parse(text, tuple(times or ()))
