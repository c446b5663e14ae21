"""The result model: a cell's kind and its JSON form, older minors read, and a cell settled from
what failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.model.cell import Cell, DeviceRecord, Provenance, Report
from harness.model.codec import (
    SCHEMA_VERSION,
    cell_from_json,
    cell_json,
    report_from_json,
    report_json,
)
from harness.model.errors import Broken, KernelFailed, Skip, SpecError
from harness.model.outcome import CellKind, Outcome, SkipReason
from tests.conftest import ROOT

WHERE = Provenance(runner="test")
# An H200 report of schema 2.3 (9336b2d:docs/reports/h200/reruns/r1): its header, and the cells
# of its first and last kernels
KEPT_2_3 = ROOT / "tests" / "fixtures" / "h200" / "schema2.3" / "junit-sm_90a.json"


def _cell(kind: CellKind, case: str, tool: str | None = None) -> Cell:
    return Cell(kind, "ch", "k", case, "sm_90a", WHERE, Outcome.PASSED, tool=tool)


@pytest.mark.parametrize(
    "cell",
    [
        _cell(CellKind.SPEC, "spec"),
        _cell(CellKind.COMPILE, "compile"),
        _cell(CellKind.CASE, "n1"),
        _cell(CellKind.SANITIZER, "n1", "memcheck"),
    ],
    ids=lambda cell: cell.kind.value,
)
def test_a_cell_s_kind_and_how_it_ran_survive_its_json_form(cell):
    cell.loaded_as = "ptx-jit"
    back = cell_from_json(json.loads(json.dumps(cell_json(cell))), "sm_90a", WHERE)
    assert back.kind is cell.kind and back.loaded_as == "ptx-jit"
    assert back.name == cell.name and back.row == cell.row


def test_a_report_of_schema_2_3_is_read_with_kinds_from_its_cases_and_tools():
    """2.3 had no `kind`, called `loaded_as` `binary` and `no_device_why` `no_device_reason`."""
    data = json.loads(KEPT_2_3.read_text())
    assert data["schema_version"] == "2.3"
    report = report_from_json(data, KEPT_2_3)
    by_case = {cell.case: cell.kind for cell in report.cells}
    assert by_case["compile"] is CellKind.COMPILE
    assert {k for case, k in by_case.items() if case != "compile"} == {CellKind.CASE}
    assert {cell.loaded_as for cell in report.cells if cell.timing} == {"sass"}
    sanitizer = {**data["cells"][-1], "tool": "memcheck"}
    assert cell_from_json(sanitizer, "sm_90a", WHERE).kind is CellKind.SANITIZER
    spec = {**data["cells"][0], "case": "spec"}
    assert cell_from_json(spec, "sm_90a", WHERE).kind is CellKind.SPEC
    old_header = {**data, "cells": [], "no_device_reason": "no GPU"}
    assert report_from_json(old_header, KEPT_2_3).no_device_why == "no GPU"


def test_this_harness_writes_its_own_schema_and_refuses_another_major():
    report = Report("suite", "sm_90a", WHERE)
    assert report_json(report)["schema_version"] == SCHEMA_VERSION
    major = int(SCHEMA_VERSION.split(".")[0])
    with pytest.raises(Exception, match=f"is not {major}.x"):
        report_from_json(
            {**report_json(report), "schema_version": f"{major + 1}.0"}, Path("r.json")
        )


@pytest.mark.parametrize(
    ("error", "outcome", "reason", "message"),
    [
        (KernelFailed("y: 3 of 3 differ"), Outcome.FAILED, None, "y: 3 of 3 differ"),
        (SpecError("spec.py: no SPEC"), Outcome.ERROR, None, "spec.py: no SPEC"),
        (Broken("no compute-sanitizer"), Outcome.ERROR, None, "no compute-sanitizer"),
        (
            Skip(SkipReason.NO_DEVICE, "no GPU"),
            Outcome.SKIPPED,
            SkipReason.NO_DEVICE,
            "no-device: no GPU",
        ),
    ],
)
def test_a_cell_is_settled_by_the_class_of_what_failed(error, outcome, reason, message):
    cell = _cell(CellKind.CASE, "n1")
    cell.settle(error)
    assert (cell.outcome, cell.skip_reason, cell.message) == (outcome, reason, message)


def test_settling_keeps_the_long_text_of_what_failed():
    cell = _cell(CellKind.COMPILE, "compile")
    cell.settle(KernelFailed("nvcc failed", "the whole log"))
    assert cell.detail == "the whole log"


def test_a_report_says_which_gpu_of_its_model_ran_it():
    record = DeviceRecord("NVIDIA H200", "9.0", "580.159.04", "13.0", 132, 52428800, "GPU-1234")
    report = Report("suite", "sm_90a", WHERE, device=record)
    back = report_from_json(json.loads(json.dumps(report_json(report))), Path("r.json"))
    assert back.device is not None and back.device.uuid == "GPU-1234"
    older = json.loads(KEPT_2_3.read_text())  # before reports said it
    assert report_from_json(older, KEPT_2_3).device.uuid is None


def test_only_cell_settle_writes_an_outcome():
    """A cell's outcome has one writer, Cell.settle (from the CellError that kept it from
    passing): any other assignment to `.outcome` in the harness is a second way to settle."""
    import ast

    writers = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                for name in names:
                    if isinstance(name, ast.Attribute) and name.attr == "outcome":
                        writers.append((path.relative_to(ROOT).as_posix(), node.lineno))
    source = (ROOT / "harness" / "model" / "cell.py").read_text()
    (settle,) = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and node.name == "settle"
    ]
    assert len(writers) == 1, writers
    ((path, line),) = writers
    assert path == "harness/model/cell.py" and settle.lineno <= line <= settle.end_lineno
