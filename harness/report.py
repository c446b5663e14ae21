"""JUnit XML and its JSON sidecar for one (target, runner).

The XML follows the Jenkins xunit JUnit schema plus `<properties>` inside `<testcase>`; the
JSON carries the same cells with raw samples and per-entry resources, for machines.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.cells import Cell, Outcome

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ReportFiles:
    xml: Path
    json: Path


def report_files(reports_dir: Path, stem: str) -> ReportFiles:
    return ReportFiles(reports_dir / f"{stem}.xml", reports_dir / f"{stem}.json")


def write(files: ReportFiles, suite: str, context: dict[str, str], cells: list[Cell]) -> None:
    """Write both files atomically, so a crash mid-run leaves the last complete report."""
    files.xml.parent.mkdir(parents=True, exist_ok=True)
    _replace(files.xml, junit_xml(suite, cells))
    _replace(files.json, json.dumps(sidecar(suite, context, cells), indent=1) + "\n")


def _replace(path: Path, text: str) -> None:
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(text)
    os.replace(scratch, path)


def junit_xml(suite: str, cells: list[Cell]) -> str:
    count = {outcome: 0 for outcome in Outcome}
    for cell in cells:
        count[cell.outcome] += 1
    root = ET.Element("testsuites")
    testsuite = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cells)),
        failures=str(count[Outcome.FAILED]),
        errors=str(count[Outcome.ERROR]),
        skipped=str(count[Outcome.SKIPPED]),
        time=f"{sum(cell.seconds for cell in cells):.3f}",
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    for cell in cells:
        case = ET.SubElement(
            testsuite,
            "testcase",
            classname=cell.classname,
            name=cell.name,
            time=f"{cell.seconds:.3f}",
        )
        properties = ET.SubElement(case, "properties")
        for key, value in cell.properties.items():
            ET.SubElement(properties, "property", name=key, value=str(value))
        if cell.outcome is Outcome.SKIPPED:
            ET.SubElement(case, "skipped", type=cell.skip_reason.value, message=cell.message)
        elif cell.outcome is Outcome.FAILED:
            ET.SubElement(case, "failure", type="failure", message=cell.message).text = cell.message
        elif cell.outcome is Outcome.ERROR:
            ET.SubElement(case, "error", type="error", message=cell.message).text = cell.message
        if cell.detail:
            ET.SubElement(case, "system-out").text = cell.detail
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def sidecar(suite: str, context: dict[str, str], cells: list[Cell]) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": suite,
        **context,
        "cells": [
            {
                "classname": cell.classname,
                "name": cell.name,
                "outcome": cell.outcome.value,
                "skip_reason": cell.skip_reason.value if cell.skip_reason else None,
                "message": cell.message,
                "seconds": round(cell.seconds, 6),
                "properties": cell.properties,
                "samples_us": list(cell.samples_us),
                "resources": cell.resources,
            }
            for cell in cells
        ],
    }
