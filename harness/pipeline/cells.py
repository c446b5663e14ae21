"""Where a cell is made and settled: a stage names the cell it owes (a PlannedCell), and the cell
is made passed here and settled by the CellError that kept it from passing (Cell.settle, the one
writer of an outcome). A case's own cell is made the same way in its worker (harness.run.case)
and read back whole."""

from __future__ import annotations

from dataclasses import dataclass

from harness.model.cell import Cell, Provenance
from harness.model.discovery import KernelFolder, build_label
from harness.model.errors import CellError
from harness.model.matrix import Target
from harness.model.outcome import CellKind, Outcome


@dataclass(frozen=True)
class PlannedCell:
    """A cell of a kernel to come (its spec, compile, case or sanitizer cell): its kind, its
    case, and the tool of a sanitizer cell. It becomes a Cell once it is settled."""

    kind: CellKind
    case: str
    tool: str | None = None


SPEC_CELL = PlannedCell(CellKind.SPEC, "spec")
COMPILE_CELL = PlannedCell(CellKind.COMPILE, "compile")


def compile_cell_of(defines: tuple[str, ...]) -> PlannedCell:
    """The compile cell of a build: `compile`, or `compile(VEC=4)` for one of case macros."""
    label = build_label(defines)
    return PlannedCell(CellKind.COMPILE, f"compile({label})") if label else COMPILE_CELL


def new_cell(
    kernel: KernelFolder, planned: PlannedCell, target: Target, provenance: Provenance
) -> Cell:
    """The cell `planned` of `kernel`, passed until something says otherwise."""
    return Cell(
        planned.kind,
        kernel.chapter,
        kernel.name,
        planned.case,
        target.name,
        provenance,
        Outcome.PASSED,
        tool=planned.tool,
    )


def settled_cell(
    kernel: KernelFolder,
    planned: PlannedCell,
    target: Target,
    provenance: Provenance,
    error: CellError,
) -> Cell:
    """The cell `planned` of `kernel`, settled by what kept it from passing."""
    cell = new_cell(kernel, planned, target, provenance)
    cell.settle(error)
    return cell
