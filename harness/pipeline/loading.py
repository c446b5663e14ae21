"""The load stage: each selected kernel's spec read in a child process of its own (confined, as
the run says), a kernel for each that loads and an error cell for each that does not; under
`--shard`, only this shard's kernels kept."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.model import spec_children
from harness.model.cell import Cell, Shard
from harness.model.discovery import Kernel, KernelFolder
from harness.model.errors import SpecError
from harness.pipeline import sharding
from harness.pipeline.cells import SPEC_CELL, settled_cell
from harness.pipeline.context import RunContext


@dataclass(frozen=True)
class Loaded:
    """Kernel folders made kernels: those whose spec loaded, and an error cell for each that
    did not; `shard`: the plan of a --shard run, which kept only its own of both."""

    kernels: list[Kernel]
    cells: list[Cell]
    shard: Shard | None = None


def load_kernels(context: RunContext, folders: tuple[KernelFolder, ...]) -> Loaded:
    """The kernels of `folders` whose specs load, and an error cell for each that does not.

    Each spec is read in a child process of its own (harness.model.declared): a spec that
    raises, exits or hangs at import is its own error cell, and never reaches this process. Two
    folders with one classname (<chapter>.<kernel>, across trees, or `ch.1/k` beside `ch/1.k`)
    would share builds and cells: they get one error cell naming both folders.
    """
    read = spec_children.read_all(
        [f.spec_file for f in folders], context.case_timeout_s, context.confinement
    )
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
            cells.append(
                settled_cell(same[0], SPEC_CELL, context.target, context.provenance, error)
            )
    return Loaded(kernels, cells)


def this_shard(context: RunContext, loaded: Loaded) -> Loaded:
    """What a --shard run keeps of every kernel found: its own kernels and spec cells, by the
    shard plan every shard of the run makes alike; all of them where the run is no shard."""
    request, times = context.options.shard, context.shard_times
    if request is None or times is None:
        return loaded
    broken = sorted({cell.classname for cell in loaded.cells})
    weights = sharding.weights_of(loaded.kernels, broken, times.seconds)
    planned = sharding.plan(request, weights, sharding.weighed_by(times, loaded.kernels))
    return Loaded(
        [kernel for kernel in loaded.kernels if planned.has(kernel.classname)],
        [cell for cell in loaded.cells if planned.has(cell.classname)],
        planned.shard,
    )


def sources_of(context: RunContext, loaded: Loaded) -> dict[str, str]:
    """Each kernel's source, and the spec of each whose spec did not load, by classname,
    relative to the project where it is inside it."""
    root = context.options.root

    def shown(path: Path) -> str:
        if root is not None and path.resolve().is_relative_to(root.resolve()):
            return str(path.resolve().relative_to(root.resolve()))
        return str(path)

    found = {kernel.classname: shown(kernel.source) for kernel in loaded.kernels}
    broken = {cell.classname for cell in loaded.cells}
    for folder in context.folders:
        if folder.classname in broken:
            found.setdefault(folder.classname, shown(folder.spec_file))
    return found
