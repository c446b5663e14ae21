"""Reads any number of per-target reports (JUnit XML + JSON sidecar) into one set of cells, and
writes them back as one JUnit file that keeps every cell distinct.

A report that cannot be read is named in `problems` and skipped; the rest are still merged. A
target of matrix.yaml with no report at all is listed in `missing_targets`, never counted as
passed.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from junitparser import JUnitXml, TestSuite
from junitparser.junitparser import JUnitXmlError


@dataclass(frozen=True)
class MergedCell:
    """One cell of one report: the JSON sidecar's record plus where it came from."""

    suite: str  # the report's suite: cuda-matrix.<target>.<runner>
    target: str
    runner: str
    device: str  # GPU name, or "none"
    classname: str  # <chapter>.<kernel>
    name: str  # <case>[<target>], compile[<target>], or <case>[<target>]:<tool> (sanitize)
    outcome: str  # passed, failed, error, skipped
    skip_reason: str | None
    message: str
    properties: dict[str, str]
    samples_us: tuple[float, ...]
    detail: str = ""  # the nvcc log or traceback, from the XML's system-out

    @property
    def chapter(self) -> str:
        return self.classname.split(".")[0]

    @property
    def kernel(self) -> str:
        return self.classname.split(".", 1)[-1]

    @property
    def case(self) -> str:
        """The name without its target, the same in every column: `n1`, `n1:memcheck`."""
        return re.sub(r"\[[^\]]*\]", "", self.name, count=1)

    @property
    def column(self) -> str:
        """The dashboard column: target and runner (and toolkit, where runs differ by it)."""
        return f"{self.target}@{self.runner}"

    @property
    def median_us(self) -> float | None:
        value = self.properties.get("time_median_us")
        return float(value) if value else None


@dataclass
class ReportSet:
    cells: list[MergedCell] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)  # one per report read
    sources: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable input, named by file
    missing_targets: list[str] = field(default_factory=list)

    @property
    def targets(self) -> list[str]:
        return sorted({cell.target for cell in self.cells})

    def never_ran(self) -> list[str]:
        """Kernels none of whose run cells ran (passed or failed) on any target or runner."""
        ran: dict[str, bool] = {}
        for cell in self.cells:
            if cell.name.startswith(("compile[", "spec[")):
                continue
            ran.setdefault(cell.classname, False)
            if cell.outcome in ("passed", "failed"):
                ran[cell.classname] = True
        return sorted(kernel for kernel, did in ran.items() if not did)


def load_reports(xml_files: list[Path], expected_targets: list[str]) -> ReportSet:
    merged = ReportSet()
    seen_files: set[Path] = set()
    seen_suites: dict[str, Path] = {}
    for xml_file in xml_files:
        resolved = Path(xml_file).resolve()
        if resolved in seen_files:
            merged.problems.append(f"{xml_file}: given twice; read once")
            continue
        seen_files.add(resolved)
        try:
            suite, cells = _read_pair(Path(xml_file))
        except ReportError as error:
            merged.problems.append(str(error))
            continue
        if suite in seen_suites:
            merged.problems.append(
                f"{xml_file}: suite {suite!r} was already read from {seen_suites[suite]}; "
                "skipped (the same run twice?)"
            )
            continue
        seen_suites[suite] = Path(xml_file)
        merged.suites.append(suite)
        merged.sources.append(Path(xml_file))
        merged.cells.extend(cells)
    present = set(merged.targets)
    merged.missing_targets = [t for t in expected_targets if t not in present]
    return merged


class ReportError(Exception):
    """A report that cannot be used; the message starts with its file name."""


def _read_pair(xml_file: Path) -> tuple[str, list[MergedCell]]:
    json_file = xml_file.with_suffix(".json")
    try:
        root = ET.parse(xml_file).getroot()
    except (OSError, ET.ParseError) as error:
        raise ReportError(f"{xml_file}: not readable JUnit XML ({error})") from error
    try:
        sidecar = json.loads(json_file.read_text())
    except OSError as error:
        raise ReportError(f"{xml_file}: its JSON sidecar {json_file.name} is missing") from error
    except ValueError as error:
        raise ReportError(f"{json_file}: not valid JSON ({error})") from error
    suites = root.findall("testsuite") if root.tag == "testsuites" else [root]
    if len(suites) != 1:
        raise ReportError(f"{xml_file}: expected one testsuite, found {len(suites)}")
    in_xml = {
        (case.get("classname"), case.get("name")): case for case in suites[0].iter("testcase")
    }
    records = sidecar.get("cells", [])
    in_json = {(c["classname"], c["name"]) for c in records}
    if in_json != set(in_xml) or len(records) != len(in_xml):
        only_xml = sorted(set(in_xml) - in_json)[:3]
        only_json = sorted(in_json - set(in_xml))[:3]
        raise ReportError(
            f"{json_file}: does not match {xml_file.name} ({len(records)} cells in JSON, "
            f"{len(in_xml)} in XML; only in XML: {only_xml}; only in JSON: {only_json})"
        )
    device = (sidecar.get("device") or {}).get("name", "none")
    cells = []
    for record in records:
        case = in_xml[(record["classname"], record["name"])]
        system_out = case.find("system-out")
        cells.append(
            MergedCell(
                suite=sidecar["suite"],
                target=sidecar["target"],
                runner=sidecar["runner"],
                device=device,
                classname=record["classname"],
                name=record["name"],
                outcome=record["outcome"],
                skip_reason=record.get("skip_reason"),
                message=record.get("message", ""),
                properties=dict(record.get("properties", {})),
                samples_us=tuple(record.get("samples_us", ())),
                detail=system_out.text or "" if system_out is not None else "",
            )
        )
    return sidecar["suite"], cells


def write_merged_xml(report_set: ReportSet, path: Path) -> None:
    """One JUnit file with one suite per report read: suites are appended, never merged."""
    merged = JUnitXml(name="cuda-matrix")
    for source in report_set.sources:
        try:
            for suite in JUnitXml.fromfile(str(source)):
                merged.add_testsuite(TestSuite.fromelem(suite._elem))
        except JUnitXmlError as error:  # already validated above; keep going regardless
            report_set.problems.append(f"{source}: {error}")
    merged.update_statistics()
    # The Jenkins/GitLab schema has no `skipped` on <testsuites> (each suite keeps its own).
    merged._elem.attrib.pop("skipped", None)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged.write(str(path), pretty=True)
