"""JUnit XML rendered from the result model.

The XML follows the Jenkins xunit JUnit schema plus `<properties>` inside `<testcase>`: each
metric of a cell is one property, formatted here and nowhere else, under the names dashboards
already read (`time_median_us`, `registers`, ...). The report's files are harness.report.store's.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import datetime, timezone

from harness.model.result import ABComparison, Cell, Outcome, Report


def render(reports: Iterable[Report], name: str | None = None) -> str:
    """One `<testsuites>` with a `<testsuite>` per report: suites are appended, never merged."""
    root = ET.Element("testsuites", {"name": name} if name else {})
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for report in reports:
        suite = _suite(root, report)
        for key in ("tests", "failures", "errors"):
            totals[key] += int(suite.get(key, "0"))
        totals["time"] += float(suite.get("time", "0"))
    if name:  # the merged file: totals over its suites (the schema has no `skipped` here)
        root.set("tests", str(totals["tests"]))
        root.set("failures", str(totals["failures"]))
        root.set("errors", str(totals["errors"]))
        root.set("time", f"{totals['time']:.3f}")
    for element in root.iter():  # every text a kernel, a spec or a tool put there
        element.text = xml_text(element.text) if element.text else element.text
        for key, value in element.attrib.items():
            element.attrib[key] = xml_text(value)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


# What XML 1.0 cannot hold, even escaped: C0 controls but tab, newline and return; lone
# surrogates; U+FFFE and U+FFFF. One such character in a case name or an nvcc warning would make
# the whole file ill-formed and lose every cell of the target.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` with each character XML cannot hold written as its escape, `\\x07`: valid, inert,
    and still saying what was there."""
    return _NOT_XML.sub(lambda found: ascii(found.group())[1:-1], text)


def _suite(root: ET.Element, report: Report) -> ET.Element:
    count = {outcome: 0 for outcome in Outcome}
    for cell in report.cells:
        count[cell.outcome] += 1
    testsuite = ET.SubElement(
        root,
        "testsuite",
        name=report.suite,
        tests=str(len(report.cells)),
        failures=str(count[Outcome.FAILED]),
        errors=str(count[Outcome.ERROR]),
        skipped=str(count[Outcome.SKIPPED]),
        # the run's wall time, as JUnit readers show it; a run still going: its cells' sum so far
        time=f"{_suite_seconds(report):.3f}",
        timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    suite_properties = ET.SubElement(testsuite, "properties")
    for key, value in (
        ("target", report.target),
        ("runner", report.provenance.runner),
        ("commit", report.provenance.commit or "unknown"),
        ("finished", "true" if report.finished else "false"),
    ):
        ET.SubElement(suite_properties, "property", name=key, value=value)
    for cell in report.cells:
        case = ET.SubElement(
            testsuite,
            "testcase",
            classname=cell.classname,
            name=cell.name,
            time=f"{cell.seconds:.3f}",
        )
        properties = ET.SubElement(case, "properties")
        for key, value in properties_of(cell).items():
            ET.SubElement(properties, "property", name=key, value=value)
        if cell.outcome is Outcome.SKIPPED:
            reason = cell.skip_reason.value if cell.skip_reason else "skipped"
            ET.SubElement(case, "skipped", type=reason, message=cell.message)
        elif cell.outcome is Outcome.FAILED:
            ET.SubElement(case, "failure", type="failure", message=cell.message).text = cell.message
        elif cell.outcome is Outcome.ERROR:
            ET.SubElement(case, "error", type="error", message=cell.message).text = cell.message
        if cell.detail:
            ET.SubElement(case, "system-out").text = cell.detail
    return testsuite


def properties_of(cell: Cell) -> dict[str, str]:
    """A cell's JUnit properties: what it ran on, then each metric it has, as text."""
    where = cell.provenance
    shown = {
        "target": cell.target,
        "device": where.device or "none",
        "cc": where.cc or "none",
        "driver": where.driver or "none",
        "toolkit": where.toolkit or "none",
        "commit": where.commit or "unknown",
        "binary": cell.loaded_as or "none",  # CONTRACT.md's name for it
    }
    if cell.seed is not None:
        shown["seed"] = str(cell.seed)
    if facts := cell.compile:
        shown["embedded"] = facts.embedded
        for resource in ("registers", "smem_bytes", "spill_bytes"):
            if (worst := facts.worst(resource)) is not None:
                shown[resource] = str(worst)
        if facts.cached is not None:
            shown["cached"] = "true" if facts.cached else "false"
        for opcode, count in facts.sass_counts.items():
            shown[f"sass_{opcode}"] = str(count)
        if facts.binary_sha256:
            shown["binary_sha256"] = facts.binary_sha256
        if facts.code_identity:
            shown["code_identity"] = facts.code_identity
    if timing := cell.timing:
        shown["time_median_us"] = f"{timing.median_us:.3f}"
        shown["time_p10_us"] = f"{timing.p10_us:.3f}"
        shown["time_p90_us"] = f"{timing.p90_us:.3f}"
        shown["noise_pct"] = f"{timing.noise_pct:.3f}"
        shown["samples"] = str(timing.samples)
        shown["sm_clock_mhz"] = str(timing.sm_clock_mhz) if timing.sm_clock_mhz else "unknown"
        shown["throttled_samples"] = str(timing.throttled_samples)
        if timing.shared_gpu:
            shown["shared_gpu"] = timing.shared_gpu
    if rate := cell.throughput:
        if rate.gbytes_per_s is not None:
            shown["gbytes_per_s"] = f"{rate.gbytes_per_s:.1f}"
        if rate.tflops is not None:
            shown["tflops"] = f"{rate.tflops:.2f}"
        if rate.roofline_pct is not None:
            shown["roofline_pct"] = f"{rate.roofline_pct:.1f}"
    if timing:
        shown["timing_wall_s"] = f"{timing.wall_s:.3f}"
    if vendor := cell.vendor:
        shown["vendor"] = vendor.library
        if vendor.unavailable is not None:
            shown["vendor_unavailable"] = vendor.unavailable
        for key, value, digits in (
            ("vendor_time_median_us", vendor.median_us, 3),
            ("vendor_noise_pct", vendor.noise_pct, 3),
            ("vendor_ratio", vendor.ratio, 3),
            ("vendor_tflops", vendor.tflops, 2),
        ):
            if value is not None:
                shown[key] = f"{value:.{digits}f}"
    if ab := cell.ab:
        shown.update(_ab_properties(ab))
    if cell.worker_start_s is not None:
        shown["worker_start_s"] = f"{cell.worker_start_s:.2f}"
    if cell.gpu is not None:
        shown["gpu"] = str(cell.gpu)
    if stages := cell.stages:
        for stage in ("setup", "reference", "verify", "timing"):
            shown[f"{stage}_s"] = f"{getattr(stages, f'{stage}_s'):.3f}"
    if cell.tool:
        shown["tool"] = cell.tool
    if found := cell.sanitizer:
        shown["errors"] = "unknown" if found.errors is None else str(found.errors)
        if found.warnings is not None:
            shown["warnings"] = str(found.warnings)
        shown["case_outcome"] = found.case_outcome.value if found.case_outcome else "none"
        shown["exit_status"] = "killed" if found.exit_status is None else str(found.exit_status)
        if found.case_message:
            shown["case_message"] = found.case_message
    return shown


def _ab_properties(ab: ABComparison) -> dict[str, str]:
    """A case's A/B against its base commit: the judgement and base, the numbers where it was
    measured, and why where the A/B says."""
    shown = {"ab_judgement": ab.judgement.value, "ab_base": ab.base_commit}
    if ab.judgement.measured:
        for key, value, digits in (
            ("ab_ratio", ab.ratio, 3),
            ("ab_low", ab.low, 3),
            ("ab_high", ab.high, 3),
            ("ab_threshold_pct", ab.threshold_pct, 2),
        ):
            if value is not None:
                shown[key] = f"{value:.{digits}f}"
        shown["ab_rounds"] = str(ab.rounds)
    if ab.why:
        shown["ab_why"] = ab.why
    return shown


def _suite_seconds(report: Report) -> float:
    if report.wall_s is not None:
        return report.wall_s
    return sum(cell.seconds for cell in report.cells)
