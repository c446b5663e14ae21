"""JUnit XML rendered from the result model.

The XML follows the Jenkins xunit JUnit schema plus `<properties>` inside `<testcase>`: each
metric of a cell is one property, formatted here and nowhere else, under the names dashboards
already read (`time_median_us`, `registers`, ...). The report's files are harness.report.store's.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from harness.model.cell import ABComparison, Cell, Report
from harness.model.outcome import Outcome


def render(reports: Iterable[Report], name: str | None = None) -> str:
    """One `<testsuites>` with a `<testsuite>` per report: suites are appended, never merged."""
    return "".join(chunks(list(reports), name))


# What render() writes around the one suite of a report's own file (no name, so no totals)
SINGLE_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
SINGLE_TAIL = "</testsuites>"


def chunks(
    reports: Sequence[Report],
    name: str | None = None,
    written: Sequence[tuple[Path, str] | None] = (),
) -> Iterator[str]:
    """The XML of render(), a suite at a time: what a file of a million cells is written from
    without ever being whole in memory. `written[i]`, where given, is a file render() wrote of
    `reports[i]` alone, with the SHA-256 its JSON names: while it still has those bytes, its
    suite is copied from there, not rendered again."""
    head = {"name": name} if name else {}
    if name:  # the merged file: totals over its suites (the schema has no `skipped` here)
        counts = Counter(cell.outcome for report in reports for cell in report.cells)
        head["tests"] = str(sum(len(report.cells) for report in reports))
        head["failures"] = str(counts[Outcome.FAILED])
        head["errors"] = str(counts[Outcome.ERROR])
        head["time"] = f"{sum(round(_suite_seconds(r), 3) for r in reports):.3f}"
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    if not reports:
        yield f"<testsuites{_attributes(head)} />"
        return
    yield f"<testsuites{_attributes(head)}>\n"
    for index, report in enumerate(reports):
        source = written[index] if index < len(written) else None
        copied = _copied_suite(*source) if source else None
        yield from _suite(report) if copied is None else (copied,)
    yield "</testsuites>"


def _copied_suite(path: Path, digest: str) -> str | None:
    """The suite of the file render() wrote of one report, if it still has the bytes of
    `digest`; None if it changed since, or cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    text = data.decode("utf-8")
    if not (text.startswith(SINGLE_HEAD) and text.endswith(SINGLE_TAIL)):
        return None
    return text[len(SINGLE_HEAD) : len(text) - len(SINGLE_TAIL)]


# What XML 1.0 cannot hold, even escaped: C0 controls but tab, newline and return; lone
# surrogates; U+FFFE and U+FFFF. One such character in a case name or an nvcc warning would make
# the whole file ill-formed and lose every cell of the target.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# What text and attribute values cannot hold as they are: markup, and what XML cannot hold
_ESCAPED_IN_TEXT = re.compile(f"[&<>]|{_NOT_XML.pattern}")
_ESCAPED_IN_ATTRIBUTES = re.compile(f'[&<>"\n\r\t]|{_NOT_XML.pattern}')


def xml_text(text: str) -> str:
    """`text` with each character XML cannot hold written as its escape, `\\x07`: valid, inert,
    and still saying what was there."""
    return _NOT_XML.sub(lambda found: ascii(found.group())[1:-1], text)


def _suite(report: Report) -> Iterator[str]:
    count = Counter(cell.outcome for cell in report.cells)
    suite = {
        "name": report.suite,
        "tests": str(len(report.cells)),
        "failures": str(count[Outcome.FAILED]),
        "errors": str(count[Outcome.ERROR]),
        "skipped": str(count[Outcome.SKIPPED]),
        # the run's wall time, as JUnit readers show it; a run still going: its cells' sum so far
        "time": f"{_suite_seconds(report):.3f}",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    yield f"  <testsuite{_attributes(suite)}>\n    <properties>\n"
    for key, value in (
        ("target", report.target),
        ("runner", report.provenance.runner),
        ("commit", report.provenance.commit or "unknown"),
        ("finished", "true" if report.finished else "false"),
        *((("shard", str(report.shard)),) if report.shard else ()),
    ):
        yield f"      <property{_attributes({'name': key, 'value': value})} />\n"
    yield "    </properties>\n"
    for cell in report.cells:
        yield _case(cell, report.sources.get(cell.classname))
    yield "  </testsuite>\n"


def testcase_name(cell: Cell) -> str:
    """`kernel::case[target]`: the kernel leads, since readers that show a testcase's name alone
    (xunit-viewer's console) would otherwise list every kernel's `compile[sm_100a]` alike, and
    the target stays, for readers that show no suite."""
    return f"{cell.kernel}::{cell.name}"


def _case(cell: Cell, source: str | None = None) -> str:
    # Six places: a cached build's or a CPU check's time is real, if small, and a reader that
    # divides by a class's time (junit2html's matrix) must not find every one 0.000.
    case = {"classname": cell.classname, "name": testcase_name(cell), "time": f"{cell.seconds:.6f}"}
    if source:  # readers (GitHub's annotations among them) attach the testcase to this file
        case["file"] = source
    lines = [f"    <testcase{_attributes(case)}>", "      <properties>"]
    lines += [  # the names are the harness's own: only the values need escaping
        f'        <property name="{key}" value="{_attribute(value)}" />'
        for key, value in properties_of(cell).items()
    ]
    lines.append("      </properties>")
    if cell.outcome is Outcome.SKIPPED:
        reason = cell.skip_reason.value if cell.skip_reason else "skipped"
        said = _attributes({"type": reason, "message": cell.message})
        # the reason as text too: some readers show a skip's text and never its attributes
        lines.append(f"      <skipped{said}>{_text(cell.message)}</skipped>")
    elif cell.outcome in (Outcome.FAILED, Outcome.ERROR):
        tag = "failure" if cell.outcome is Outcome.FAILED else "error"
        said = _attributes({"type": tag, "message": cell.message})
        lines.append(f"      <{tag}{said}>{_text(cell.message)}</{tag}>")
    if cell.detail:
        lines.append(f"      <system-out>{_text(cell.detail)}</system-out>")
    lines.append("    </testcase>\n")
    return "\n".join(lines)


def _attributes(values: Mapping[str, str]) -> str:
    """` name="value"` for each, escaped as XML attributes (and every text a kernel, a spec or a
    tool put there made valid XML)."""
    return "".join(f' {key}="{_attribute(value)}"' for key, value in values.items())


def _attribute(value: str) -> str:
    if not _ESCAPED_IN_ATTRIBUTES.search(value):  # most are numbers and names: as they are
        return value
    value = _text(value).replace('"', "&quot;")
    return value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#09;")


def _text(value: str) -> str:
    if not _ESCAPED_IN_TEXT.search(value):
        return value
    return xml_text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def properties_of(cell: Cell) -> dict[str, str]:
    """A cell's JUnit properties: what it ran on, then each metric it has, as text."""
    provenance = cell.provenance
    shown = {
        "target": cell.target,
        "device": provenance.device or "none",
        "cc": provenance.cc or "none",
        "driver": provenance.driver or "none",
        "toolkit": provenance.toolkit or "none",
        "commit": provenance.commit or "unknown",
        "binary": cell.loaded_as or "none",  # docs/CONTRACT.md's name for it
    }
    if cell.seed is not None:
        shown["seed"] = str(cell.seed)
    if cell.verdict_key:
        shown["verdict_key"] = cell.verdict_key
    if origin := cell.carried_from:  # passed, on another run's word: where that run is
        shown["carried_from_commit"] = origin.commit
        shown["carried_from_suite"] = origin.suite
        shown["carried_from_runner"] = origin.runner
        shown["carried_from_recorded"] = origin.recorded
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
    if ab.same_sass is not None:
        shown["ab_same_sass"] = str(ab.same_sass).lower()
    return shown


def _suite_seconds(report: Report) -> float:
    if report.wall_s is not None:
        return report.wall_s
    return sum(cell.seconds for cell in report.cells)
