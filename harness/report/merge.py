"""Reads any number of per-target reports (JUnit XML + JSON) into one set of cells, and writes them
back as one JUnit file that keeps every cell distinct.

The JSON is the report (the result model's form); its XML must agree with it, cell for cell and
outcome for outcome, since CI dashboards read the XML. A report that cannot be read, or whose two
files disagree, is named in `problems` and left out; the rest are still merged. A target of
matrix.yaml with no report at all is listed in `missing_targets`, never counted as passed. A
report whose GPU another process used during the run is named in `remarks`, with what showed it,
and so is a report of a target matrix.yaml lacks (merged all the same). Two reports whose suite
names differ only in spaces are one run read twice: the second is named and left out.

A report is read once and not changed after: the history keeps the very JSON it was read from.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from harness.model.cell import Cell, Report
from harness.model.codec import report_from_json
from harness.model.errors import ReportError
from harness.model.files import Unreadable, open_regular, read_bounded
from harness.model.outcome import CellKind, Outcome
from harness.report import junit, store

REPORT_MOST_BYTES = 4 << 30  # a report's JSON: a bound far above any run's


@dataclass
class ReportSet:
    reports: list[Report] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)  # the XML file of each report
    # each report's XML and the SHA-256 its JSON names, where the XML has those bytes: None
    # where it was checked by parsing
    written: list[tuple[Path, str] | None] = field(default_factory=list)
    # each report's JSON as it was read, zlib-compressed: what the history keeps of the run
    compressed_json: list[bytes] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable input, named by file
    remarks: list[str] = field(default_factory=list)  # read, with something to say of it
    missing_targets: list[str] = field(default_factory=list)
    # shards of one run that do not make it whole: one missing, plans that differ, a cell in two
    shard_problems: list[str] = field(default_factory=list)

    @property
    def cells(self) -> list[Cell]:
        return [cell for report in self.reports for cell in report.cells]

    @property
    def targets(self) -> list[str]:
        return sorted({report.target for report in self.reports})

    def never_ran(self) -> list[str]:
        """Kernels none of whose run cells ran (passed or failed) on any target or runner."""
        ran: dict[str, bool] = {}
        for cell in self.cells:
            if cell.kind not in (CellKind.CASE, CellKind.SANITIZER):
                continue
            ran.setdefault(cell.classname, False)
            if cell.outcome in (Outcome.PASSED, Outcome.FAILED):
                ran[cell.classname] = True
        return sorted(kernel for kernel, did in ran.items() if not did)


def load_reports(
    xml_files: list[Path],
    expected_targets: list[str],
    artifact_targets: dict[Path, str] | None = None,
) -> ReportSet:
    """`artifact_targets`: the target each file's artifact is of; a report of another target in
    it (one CI job's upload carrying another's report) is left out and named."""
    merged = ReportSet()
    seen_files: set[Path] = set()
    seen_suites: dict[str, tuple[Path, str]] = {}  # by name, spaces collapsed: file, name
    for xml_file in xml_files:
        resolved = Path(xml_file).resolve()
        if resolved in seen_files:
            merged.remarks.append(f"{xml_file}: given twice; read once")
            continue
        seen_files.add(resolved)
        try:
            report, digest, text = _read_report(Path(xml_file))
        except ReportError as error:
            merged.problems.append(str(error))
            continue
        carried = (artifact_targets or {}).get(Path(xml_file))
        if carried is not None and report.target != carried:
            merged.problems.append(
                f"{xml_file}: a report of {report.target} in the artifact of {carried}; left "
                "out (a job may upload only its own target's report)"
            )
            continue
        suite = " ".join(report.suite.split())  # names that differ only in spaces are one
        if suite in seen_suites:
            first = seen_suites[suite]
            merged.problems.append(
                f"{xml_file}: suite {report.suite!r} was already read from {first[0]}"
                + ("" if report.suite == first[1] else f" (as {first[1]!r})")
                + "; skipped (the same run twice?)"
            )
            continue
        seen_suites[suite] = (Path(xml_file), report.suite)
        if expected_targets and report.target not in expected_targets:
            merged.remarks.append(
                f"{xml_file}: target {report.target!r} is not in matrix.yaml (its targets: "
                f"{', '.join(expected_targets)}); merged as a column of its own"
            )
        merged.reports.append(report)
        merged.sources.append(Path(xml_file))
        merged.written.append((Path(xml_file), digest) if digest else None)
        merged.compressed_json.append(zlib.compress(text, 1))  # 1: a million cells in 2 s
        if report.shared_gpu:
            merged.remarks.append(
                f"{xml_file} ({report.suite}): the GPU was shared during the run "
                f"({report.shared_gpu}): its times are not the kernels' alone"
            )
    present = set(merged.targets)
    merged.missing_targets = [t for t in expected_targets if t not in present]
    merged.shard_problems = shard_problems(merged.reports)
    return merged


def shard_problems(reports: list[Report]) -> list[str]:
    """What keeps the shards of each run (one kind of suite, target, runner and shard count)
    from being its whole column: a shard with no report, shards that planned their kernels
    differently, a cell that two shards ran."""
    runs: dict[tuple[str, str, str, int], list[Report]] = {}
    for report in reports:
        if report.shard is not None:
            kind = report.suite.split(".")[0]
            key = (kind, report.target, report.provenance.runner, report.shard.count)
            runs.setdefault(key, []).append(report)
    whole = {
        (report.suite.split(".")[0], report.target, report.provenance.runner)
        for report in reports
        if report.shard is None
    }
    found = []
    for (kind, target, runner, count), shards in runs.items():
        where = f"{target}@{runner}"
        if (kind, target, runner) in whole:
            found.append(
                f"{where}: a full report and {len(shards)} of its {count} shards: their cells "
                "are counted twice; publish the one or the shards"
            )
        indices = {report.shard.index for report in shards if report.shard}
        for index in range(1, count + 1):
            if index not in indices:
                found.append(
                    f"{where}: shard {index} of {count} has no report: the kernels it ran are "
                    "missing from this column"
                )
        plans = {report.shard.plan for report in shards if report.shard}
        if len(plans) > 1:
            weighed = sorted({report.shard.weights for report in shards if report.shard})
            found.append(
                f"{where}: its {count} shards planned their kernels differently (weighed by "
                f"{'; '.join(weighed)}): a kernel may be in none of them, or in two; give "
                "every shard the same --times"
            )
        seen: dict[tuple[str, str], int] = {}
        for report in shards:
            assert report.shard is not None
            for cell in report.cells:
                first = seen.setdefault((cell.classname, cell.name), report.shard.index)
                if first != report.shard.index:
                    found.append(
                        f"{where}: {cell.classname} {cell.name} is in shard {first} and in "
                        f"shard {report.shard.index}"
                    )
    return found


def read_report(xml_file: Path) -> Report:
    """The report of a JUnit file: its JSON beside it, checked against the XML."""
    return _read_report(xml_file)[0]


def _read_report(xml_file: Path) -> tuple[Report, str | None, bytes]:
    """read_report's report; the SHA-256 its JSON names for the XML where the XML has exactly
    those bytes: then it is what the harness rendered of this very JSON, and agrees with it
    without being parsed; and the JSON's bytes."""
    json_file = xml_file.with_suffix(".json")
    if not json_file.exists():
        raise ReportError(f"{xml_file}: its JSON {json_file.name} is missing")
    try:
        text = read_bounded(json_file, REPORT_MOST_BYTES)
        data = json.loads(text)
    except Unreadable as error:
        raise ReportError(str(error)) from error
    except ValueError as error:
        raise ReportError(f"{json_file}: not valid JSON ({error})") from error
    except RecursionError:
        raise ReportError(f"{json_file}: not a report (nested deeper than JSON is read)") from None
    report = report_from_json(data, json_file)
    named = data.get(store.XML_DIGEST)
    said = data.get(store.OUTCOMES_DIGEST)
    if (
        isinstance(named, str)
        and said == store.outcomes_digest(report.cells)  # the JSON is what was rendered
        and _sha256(xml_file) == named  # and so is the XML
    ):
        return report, named, text
    in_xml = _xml_outcomes(xml_file)
    in_json = _named_outcomes(report, junit.testcase_name)
    if set(in_json) != set(in_xml):  # an XML written before its names led with the kernel
        if set(earlier := _named_outcomes(report, lambda cell: cell.name)) == set(in_xml):
            in_json = earlier
    if set(in_json) != set(in_xml) or len(report.cells) != len(in_xml):
        only_xml = sorted(set(in_xml) - set(in_json))[:3]
        only_json = sorted(set(in_json) - set(in_xml))[:3]
        raise ReportError(
            f"{json_file}: does not match {xml_file.name} ({len(report.cells)} cells in JSON, "
            f"{len(in_xml)} in XML; only in XML: {only_xml}; only in JSON: {only_json})"
        )
    differ = [key for key, outcome in in_json.items() if in_xml[key] is not outcome]
    if differ:
        classname, name = differ[0]
        raise ReportError(
            f"{json_file}: disagrees with {xml_file.name} on {len(differ)} outcome(s); first "
            f"{classname} {name}: {in_json[differ[0]].value} in JSON, "
            f"{in_xml[differ[0]].value} in XML"
        )
    return report, None, text


def _named_outcomes(report: Report, name: Callable[[Cell], str]) -> dict[tuple[str, str], Outcome]:
    """Each cell's outcome by (classname, name) as the XML holds them: named by `name`, with the
    characters XML cannot hold escaped."""
    return {(junit.xml_text(c.classname), junit.xml_text(name(c))): c.outcome for c in report.cells}


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except OSError:  # parsing it says why
        return None
    return digest.hexdigest()


# A testcase's outcome by the result element in it (the last, where there are several)
_RESULTS = {"skipped": Outcome.SKIPPED, "error": Outcome.ERROR, "failure": Outcome.FAILED}


def _xml_outcomes(xml_file: Path) -> dict[tuple[str, str], Outcome]:
    """Each testcase's (classname, name) and outcome, read as the file streams past: nothing is
    kept but these, so a file of a million cells costs only them. expat never fetches an
    external entity a hostile file names, and refuses one that expands without bound."""
    outcomes: dict[tuple[str, str], Outcome] = {}
    last: list[tuple[str, str]] = []  # the testcase a result element belongs to
    suites = 0

    # Start tags only (a million cells are 20 million elements): JUnit has result elements only
    # inside a testcase, and one anywhere else would be charged to the case before it, which
    # the JSON would then contradict, leaving the report out with why.
    def start(tag: str, attributes: dict[str, str]) -> None:
        nonlocal suites
        if tag == "testcase":
            case = (attributes.get("classname", ""), attributes.get("name", ""))
            outcomes[case] = Outcome.PASSED
            last[:] = [case]
        elif tag in _RESULTS and last:
            outcomes[last[0]] = _RESULTS[tag]
        elif tag == "testsuite":
            suites += 1

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    try:
        with open_regular(xml_file) as stream:
            parser.ParseFile(stream)
    except Unreadable as error:
        raise ReportError(str(error)) from error
    except (OSError, expat.ExpatError) as error:
        raise ReportError(f"{xml_file}: not readable JUnit XML ({error})") from error
    if suites != 1:
        raise ReportError(f"{xml_file}: expected one testsuite, found {suites}")
    return outcomes


def write_merged_xml(report_set: ReportSet, path: Path) -> None:
    """One JUnit file with one suite per report read: suites are appended, never merged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    store.replace(
        path, junit.chunks(report_set.reports, name="cuda-matrix", written=report_set.written)
    )
