"""The JUnit XML: schema-valid, one testcase per cell, properties and skip reasons readable."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from html import escape as html_escape
from pathlib import Path

import pytest
from junitparser import Attr, Error, Failure, JUnitXml, Skipped, TestCase
from lxml import etree

from harness.model.cell import (
    ABComparison,
    Cell,
    CompileFacts,
    Judgement,
    Provenance,
    Report,
    Resources,
    Throughput,
    Timing,
)
from harness.model.codec import SCHEMA_VERSION
from harness.model.errors import ReportError, Unavailable
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.results import Results
from harness.pipeline.stages import run_target
from harness.report import junit, merge, store
from harness.report.merge import load_reports, read_report, write_merged_xml
from tests.conftest import PLANTED, ROOT

SCHEMA = etree.XMLSchema(
    etree.parse(str(Path(__file__).parent / "schemas" / "junit-properties.xsd"))
)
WHERE = Provenance(runner="test", commit="abc123", toolkit="13.0.88")


def _cells():
    def cell(kind, chapter, kernel, case, outcome, **fields):
        return Cell(kind, chapter, kernel, case, "sm_90a", WHERE, outcome, **fields)

    resources = {"k": Resources(registers=40, smem_bytes=0, spill_bytes=0, stack_bytes=0)}
    return [
        cell(
            CellKind.COMPILE,
            "ch",
            "k",
            "compile",
            Outcome.PASSED,
            detail="nvcc ... <log> & more",
            seconds=1.5,
            compile=CompileFacts("arch=compute_90a,code=[sm_90a]", False, resources),
        ),
        cell(
            CellKind.CASE,
            "ch",
            "k",
            "big",
            Outcome.SKIPPED,
            skip_reason=SkipReason.NO_DEVICE,
            message="no-device: no CUDA device visible",
        ),
        cell(
            CellKind.CASE, "ch", "k", "edge", Outcome.FAILED, message="y: 3 of 10 elements differ"
        ),
        cell(CellKind.SPEC, "ch", "bad", "spec", Outcome.ERROR, message="spec.py: import failed"),
    ]


def _report(cells) -> Report:
    return Report("cuda-matrix.sm_90a.test", "sm_90a", WHERE, cells)


def test_xml_is_valid_and_keeps_every_cell(tmp_path):
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, _report(_cells()))
    document = etree.parse(str(files.xml))
    SCHEMA.assertValid(document)
    suite = document.getroot()[0]
    assert (
        suite.get("tests"),
        suite.get("failures"),
        suite.get("errors"),
        suite.get("skipped"),
    ) == ("4", "1", "1", "1")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("ch.k", "k::compile[sm_90a]"),
        ("ch.k", "k::big[sm_90a]"),
        ("ch.k", "k::edge[sm_90a]"),
        ("ch.bad", "bad::spec[sm_90a]"),
    ]
    skip = cases[1].find("skipped")
    assert skip.get("type") == "no-device" and skip.get("message").startswith("no-device: ")
    props = {p.get("name"): p.get("value") for p in cases[0].find("properties")}
    assert props["registers"] == "40" and props["target"] == "sm_90a"
    assert props["cached"] == "false" and props["commit"] == "abc123"
    assert props["device"] == "none" and props["binary"] == "none"
    assert cases[0].find("system-out").text == "nvcc ... <log> & more"


def test_a_junit_reader_of_the_field_reads_what_the_harness_writes(tmp_path):
    """junitparser, as dashboards and CI plugins read JUnit: every cell, its outcome and its
    time, in the file of one run and in the merged file of several."""
    kept = sorted((ROOT / "tests" / "fixtures" / "h200").glob("junit-*.xml"))
    merged = load_reports(kept, ["sm_80", "sm_90a", "sm_100a"])
    write_merged_xml(merged, tmp_path / "merged.xml")
    for xml, reports in [(kept[0], [merged.reports[0]]), (tmp_path / "merged.xml", merged.reports)]:
        suites = list(JUnitXml.fromfile(str(xml)))
        assert [s.name for s in suites] == [r.suite for r in reports]
        for suite, report in zip(suites, reports, strict=True):
            read = {
                (case.classname, case.name): (
                    _outcome_of(case), round(case.time, 3)
                )
                for case in suite
            }  # fmt: skip
            assert read == {
                (c.classname, junit.testcase_name(c)): (c.outcome, round(c.seconds, 3))
                for c in report.cells
            }
            assert suite.time == pytest.approx(report.wall_s)


def _outcome_of(case: TestCase) -> Outcome:
    kinds = {Skipped: Outcome.SKIPPED, Error: Outcome.ERROR, Failure: Outcome.FAILED}
    found = [kinds[type(result)] for result in case.result if type(result) in kinds]
    return found[-1] if found else Outcome.PASSED


def test_the_schema_rejects_what_jenkins_would(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="s"><testcase name="x"/></testsuite></testsuites>')
    with pytest.raises(etree.DocumentInvalid):
        SCHEMA.assertValid(etree.parse(str(bad)))  # tests/failures/errors are required


def test_a_timed_cell_shows_its_numbers_in_junit_and_keeps_them_as_numbers_in_json(tmp_path):
    timing = Timing(
        median_us=1433.04,
        p10_us=1430.5,
        p90_us=1440.25,
        noise_pct=0.31,
        samples_us=(1433.0, 1431.0, 1440.0),
        sm_clock_mhz=1980,
        wall_s=0.0214,
        throttled_samples=4,
    )
    timed = Cell(
        CellKind.CASE,
        "ch",
        "gemm",
        "m8192",
        "sm_90a",
        WHERE,
        Outcome.PASSED,
        loaded_as="sass",
        seed=7,
        timing=timing,
        throughput=Throughput(tflops=767.26, roofline_pct=77.55),
    )
    shown = junit.properties_of(timed)
    assert shown["time_median_us"] == "1433.040" and shown["samples"] == "3"
    assert shown["tflops"] == "767.26" and shown["roofline_pct"] == "77.5"
    assert shown["sm_clock_mhz"] == "1980" and shown["timing_wall_s"] == "0.021"
    assert shown["throttled_samples"] == "4" and shown["binary"] == "sass"
    assert "gbytes_per_s" not in shown and "vendor" not in shown
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, _report([timed]))
    record = json.loads(files.json.read_text())
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["cells"][0]["kind"] == "case" and record["cells"][0]["loaded_as"] == "sass"
    assert record["cells"][0]["timing"]["median_us"] == 1433.04
    assert record["cells"][0]["throughput"]["tflops"] == 767.26
    assert read_report(files.xml).cells == [timed]  # the JSON reads back as the same cell


def test_a_report_of_another_schema_is_refused_with_its_file_named(tmp_path):
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, _report(_cells()))
    old = json.loads(files.json.read_text())
    old["schema_version"] = 1
    files.json.write_text(json.dumps(old))
    with pytest.raises(ReportError) as refused:
        read_report(files.xml)
    assert str(refused.value).startswith(f"{files.json}: schema_version 1 is not 2.x")
    assert "older harness" in str(refused.value)


def test_writing_a_report_never_follows_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    for name in ("junit-sm_90a.xml.tmp", "junit-sm_90a.json.tmp"):  # the old scratch names
        (reports / name).symlink_to(victim)
    files = store.report_files(reports, "junit-sm_90a")
    store.write(files, _report(_cells()))
    assert victim.read_text() == "precious\n"
    assert read_report(files.xml).cells == _cells()
    assert not list(reports.glob(".junit-*"))  # no scratch file left behind


def test_runs_writing_one_report_at_once_never_break_each_other(tmp_path):
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[2])\n"
        "from tests.test_junit import _cells, _report\n"
        "from harness.report import store\n"
        "files = store.report_files(Path(sys.argv[1]), 'junit-sm_90a')\n"
        "for _ in range(20):\n"
        "    store.write(files, _report(_cells()))\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(ROOT)], cwd=ROOT)
        for _ in range(8)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0] * 8
    assert read_report(tmp_path / "junit-sm_90a.xml").cells == _cells()


def test_a_live_report_keeps_up_with_its_cells_and_is_whole_once_closed(tmp_path):
    files = store.report_files(tmp_path, "junit-sm_90a")
    results = Results(_report([]), [store.LiveReport(files)])
    cells = [
        Cell(CellKind.CASE, "ch", "k", f"n{i}", "sm_90a", WHERE, Outcome.PASSED) for i in range(50)
    ]
    for cell in cells:
        results.add([cell])
    results.end()
    assert [c.case for c in read_report(files.xml).cells] == [c.case for c in cells]


def test_a_live_report_is_on_disk_from_its_beginning(tmp_path):
    """Begun, a run's report replaces the last run's at once, unfinished: a run killed before
    its first cell leaves no stale report."""
    files = store.report_files(tmp_path, "junit-sm_90a")
    files.json.write_text('{"the last run": "complete"}')
    results = Results(_report([]), [store.LiveReport(files)])
    assert read_report(files.xml).finished is False and "the last run" not in files.json.read_text()
    results.end()


def test_a_live_report_is_on_disk_before_it_is_closed(tmp_path):
    files = store.report_files(tmp_path, "junit-sm_90a")
    results = Results(_report([]), [store.LiveReport(files, interval_s=0.05)])
    for case in ("n1", "n2"):
        results.add([Cell(CellKind.CASE, "ch", "k", case, "sm_90a", WHERE, Outcome.PASSED)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:  # the writer replaces the XML, then the JSON: a reader may catch it between
                if case in [c.case for c in read_report(files.xml).cells]:
                    break
            except ReportError:
                pass
            time.sleep(0.02)
        else:
            pytest.fail(f"cell {case} never reached the disk while the report was live")
    results.end()


def test_a_live_report_that_cannot_be_written_says_so_when_closed(tmp_path):
    reports = tmp_path / "reports"
    results = Results(_report([]), [store.LiveReport(store.report_files(reports, "junit-sm_90a"))])
    shutil.rmtree(reports)
    reports.write_text("a file where the folder should be")
    results.add([Cell(CellKind.CASE, "ch", "k", "n1", "sm_90a", WHERE, Outcome.PASSED)])
    with pytest.raises(OSError):
        results.end()


def test_every_sink_has_its_last_word_though_one_before_it_fails(tmp_path):
    """A report that cannot be written must not keep the console from closing its progress."""
    ended = []

    class Console:
        def begin(self, report):
            pass

        def expect(self, cells, seconds):
            pass

        def added(self, report, cells):
            pass

        def end(self, report):
            ended.append(report.finished)

    reports = tmp_path / "reports"
    files = store.report_files(reports, "junit-sm_90a")
    results = Results(_report([]), [store.LiveReport(files), Console()])
    shutil.rmtree(reports)
    reports.write_text("a file where the folder should be")
    with pytest.raises(OSError):
        results.end()
    assert ended == [False]


def test_a_suite_s_time_is_the_run_s_wall_time(tmp_path):
    """JUnit readers show a suite's time as how long it took: the run's wall, not the sum of its
    cells (which overlap, and sum to more)."""
    report = _report(_cells())
    report.wall_s = 0.25
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, report)
    (suite,) = etree.parse(str(files.xml)).getroot().iter("testsuite")
    assert sum(cell.seconds for cell in report.cells) != 0.25
    assert float(suite.get("time")) == 0.25


def _compared(case: str, ab: ABComparison, shared_gpu: str | None = None) -> Cell:
    timing = Timing(10.5, 10.2, 10.9, 1.0, (10.2, 10.5, 10.9), shared_gpu=shared_gpu)
    return Cell(
        CellKind.CASE, "ch", "k", case, "sm_90a", WHERE, Outcome.PASSED, timing=timing, ab=ab
    )


def test_a_case_s_a_b_and_a_shared_gpu_are_properties_and_round_trip_through_the_merge(tmp_path):
    measured = ABComparison(
        "f00dfeed" * 5, Judgement.SLOWER, why="12 rounds, one set of inputs", ratio=1.04567,
        low=1.0401, high=1.0523, threshold_pct=3.0, rounds=12, base_median_us=10.0,
        head_median_us=10.46, same_inputs=True, base_code_identity="c0de",
    )  # fmt: skip
    not_run = ABComparison("f00dfeed" * 5, Judgement.NOT_RUN, why="the base's build failed")
    cells = [
        _compared("n1", measured, shared_gpu="pid 4242 (python3) on GPU 0"),
        _compared("n2", not_run),
    ]
    shown = junit.properties_of(cells[0])
    assert {key: value for key, value in shown.items() if key.startswith("ab_")} == {
        "ab_judgement": "SLOWER",
        "ab_base": "f00dfeed" * 5,
        "ab_ratio": "1.046",
        "ab_low": "1.040",
        "ab_high": "1.052",
        "ab_threshold_pct": "3.00",
        "ab_rounds": "12",
        "ab_why": "12 rounds, one set of inputs",
    }
    assert shown["shared_gpu"] == "pid 4242 (python3) on GPU 0"
    unmeasured = junit.properties_of(cells[1])
    assert {key: value for key, value in unmeasured.items() if key.startswith("ab_")} == {
        "ab_judgement": "NOT_RUN",
        "ab_base": "f00dfeed" * 5,
        "ab_why": "the base's build failed",
    }
    assert "shared_gpu" not in unmeasured
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, _report(cells))
    SCHEMA.assertValid(etree.parse(str(files.xml)))
    merged = load_reports([files.xml], ["sm_90a"])  # the XML checked against the JSON
    assert merged.problems == [] and merged.cells == cells
    write_merged_xml(merged, tmp_path / "merged.xml")
    document = etree.parse(str(tmp_path / "merged.xml"))
    SCHEMA.assertValid(document)
    values = {p.get("name"): p.get("value") for p in document.iter("property")}
    assert values["ab_ratio"] == "1.046" and values["ab_why"] == "the base's build failed"


@pytest.mark.parametrize("control", ["\x07", "\x1b", "\x00", "\ufffe"])
def test_a_character_xml_cannot_hold_is_escaped_wherever_a_kernel_or_spec_put_it(tmp_path, control):
    """A BEL in a case name or an ESC in an nvcc warning must not make the file ill-formed and
    lose the target's every cell."""
    where = Provenance(runner=f"run{control}ner", commit="abc123")
    cell = Cell(
        CellKind.CASE,
        f"ch{control}",
        "k",
        f"case{control}",
        "sm_90a",
        where,
        Outcome.FAILED,
        message=f"spec raised {control}[31m",
        detail=f"nvcc: warning {control}",
        seed=1,
    )
    report = Report(f"cuda-matrix.sm_90a.run{control}", "sm_90a", where, [cell, *_cells()])
    files = store.report_files(tmp_path, "junit-sm_90a")
    store.write(files, report)

    document = etree.parse(str(files.xml))  # well-formed: it parses
    SCHEMA.assertValid(document)
    escaped = ascii(control)[1:-1]
    case = document.getroot()[0].findall("testcase")[0]
    assert (
        case.get("name") == f"k::case{escaped}[sm_90a]"
        and case.get("classname") == f"ch{escaped}.k"
    )
    assert case.find("failure").get("message") == f"spec raised {escaped}[31m"
    assert case.find("system-out").text == f"nvcc: warning {escaped}"
    read = read_report(files.xml)  # the JSON keeps the text as it was, and agrees with the XML
    assert read.cells[0].case == f"case{control}"
    assert len(read.cells) == 5


def _without_timestamps(text: str) -> str:
    return re.sub(r' timestamp="[^"]*"', "", text)


def test_a_json_that_names_its_xml_s_bytes_is_trusted_without_parsing_them(tmp_path, monkeypatch):
    """The JSON names the SHA-256 of the XML written beside it: a reader finding those bytes
    does not parse them, and merged.xml copies their suite; bytes changed since are parsed and
    checked as before, and their suite is rendered anew."""
    first, second = (
        store.report_files(tmp_path / "a", "junit-sm_90a"),
        store.report_files(tmp_path / "b", "junit-sm_80"),
    )
    store.write(first, _report(_cells()))
    store.write(second, Report("cuda-matrix.sm_80.test", "sm_80", WHERE, []))
    digest = json.loads(first.json.read_text())[store.XML_DIGEST]
    assert digest == hashlib.sha256(first.xml.read_bytes()).hexdigest()

    parsed = []
    real = merge._xml_outcomes
    monkeypatch.setattr(merge, "_xml_outcomes", lambda path: parsed.append(path) or real(path))
    report_set = load_reports([first.xml, second.xml], ["sm_90a", "sm_80"])
    assert parsed == [] and report_set.written[0] == (first.xml, digest)
    copied = tmp_path / "copied.xml"
    write_merged_xml(report_set, copied)
    rendered = _without_timestamps(junit.render(report_set.reports, name="cuda-matrix"))
    assert _without_timestamps(copied.read_text()) == rendered

    # an XML edited after the JSON named it: parsed, and a disagreement found
    edited = re.sub(
        r"<skipped( [^>]*)>(.*?)</skipped>",
        r"<failure\1>\2</failure>",
        first.xml.read_text(),
        count=1,
        flags=re.S,
    )
    first.xml.write_text(edited)
    changed = load_reports([first.xml], ["sm_90a"])
    assert parsed == [first.xml] and changed.reports == []
    assert "disagrees with junit-sm_90a.xml on 1 outcome(s)" in changed.problems[0]

    # a JSON edited after it named its XML (a cell dropped, an outcome changed): parsed, caught
    for edit in ("drop", "outcome"):
        store.write(first, _report(_cells()))
        sidecar = json.loads(first.json.read_text())
        if edit == "drop":
            sidecar["cells"].pop()
        else:
            sidecar["cells"][0]["outcome"] = (
                "failed" if sidecar["cells"][0]["outcome"] != "failed" else "passed"
            )
        first.json.write_text(json.dumps(sidecar))
        parsed.clear()
        edited = load_reports([first.xml], ["sm_90a"])
        assert parsed == [first.xml] and edited.reports == [], edit
        assert "junit-sm_90a.json: d" in edited.problems[0], edited.problems

    # an XML changed between reading and merging: its suite is rendered, not copied
    store.write(first, _report(_cells()))
    report_set = load_reports([first.xml], ["sm_90a"])
    first.xml.write_text(first.xml.read_text().replace("big[sm_90a]", "other[sm_90a]"))
    write_merged_xml(report_set, copied)
    assert "big[sm_90a]" in copied.read_text() and "other[sm_90a]" not in copied.read_text()


@pytest.fixture(scope="module")
def cpu_run(matrix, toolchain, compile_cache, tmp_path_factory):
    """The planted kernels' sm_90a report made on this machine (no GPU: every case skipped)."""
    reports = tmp_path_factory.mktemp("cpu-run")
    options = RunOptions(
        matrix.targets["sm_90a"],
        (PLANTED,),
        reports,
        compile_cache,
        select="planted.add_one",
        runner="ci",
        root=ROOT,
    )
    run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    return reports / "partial-junit-sm_90a.xml"


def test_each_testcase_names_its_kernel_s_source_and_a_skip_says_why_as_text(cpu_run):
    """junitparser, with a `file` attribute declared as its docs show: every testcase of a
    kernel names its .cu relative to the project (GitHub's readers annotate that file), and a
    skip's reason is its element's text as well as its message."""
    TestCase.file = Attr("file")  # junitparser's way to read an attribute it does not know
    try:
        cases = [case for suite in JUnitXml.fromfile(str(cpu_run)) for case in suite]
        assert cases and {case.file for case in cases} == {
            "tests/fixtures/kernels/planted/add_one/add_one.cu"
        }
    finally:
        del TestCase.file
    skips = [r for case in cases for r in case.result if isinstance(r, Skipped)]
    assert skips and all(s.text and s.text == s.message for s in skips)
    assert all("no-device" == s.type for s in skips)


def test_junit2html_shows_each_skip_s_reason_and_the_target(cpu_run, tmp_path):
    """A JUnit-to-HTML tool of PyPI (junit2html) over the report: the skip reasons and the
    target in each test's name reach the page."""
    page = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "junit2htmlreport", str(cpu_run), str(page)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    message = JUnitXml.fromfile(str(cpu_run))
    reasons = {r.message for s in message for c in s for r in c.result if isinstance(r, Skipped)}
    assert reasons and all(html_escape(reason) in html for reason in reasons)
    assert "add_one::n1000[sm_90a]" in html and "add_one::compile[sm_90a]" in html


def test_a_run_that_compiled_nothing_and_ran_nothing_still_has_real_times(
    matrix, toolchain, compile_cache, tmp_path
):
    """Cached builds and cases checked on the CPU took time, and say how much: junit2html's
    matrix divides by a class's time, and a report of nothing but 0.000 crashed it."""
    options = RunOptions(
        matrix.targets["sm_90a"], (PLANTED,), tmp_path, compile_cache, select="planted.add_one"
    )
    for _ in range(2):  # the second run finds every build in the cache
        report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    assert all(c.compile and c.compile.cached for c in report.cells if c.kind is CellKind.COMPILE)
    assert all(c.outcome is not Outcome.PASSED for c in report.cells if c.kind is CellKind.CASE)
    assert all(cell.seconds > 0 for cell in report.cells), [
        (c.name, c.seconds) for c in report.cells
    ]
    page = tmp_path / "matrix.html"
    done = subprocess.run(
        [
            sys.executable, "-m", "junit2htmlreport", "--report-matrix", str(page),
            str(tmp_path / "partial-junit-sm_90a.xml"),
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "add_one" in page.read_text()


def test_cells_of_a_kernel_the_target_cannot_express_say_the_time_that_found_it(
    matrix, toolchain, compile_cache, tmp_path
):
    options = RunOptions(
        matrix.targets["sm_80"], (PLANTED,), tmp_path, compile_cache, select="planted.needs_sm90"
    )
    report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    assert report.cells and all(
        c.skip_reason is SkipReason.TARGET_UNSUPPORTED and c.seconds > 0 for c in report.cells
    ), [(c.name, c.skip_reason, c.seconds) for c in report.cells]


def test_a_reader_that_shows_names_alone_still_tells_every_cell_apart(cpu_run, tmp_path):
    """xunit-viewer's console lists testcase names without their classname: across kernels
    and targets no two of them may read the same, and each says its kernel and target."""
    written = [cpu_run]
    for kept in sorted((ROOT / "tests" / "fixtures" / "h200").glob("junit-*.xml")):
        written.append(tmp_path / kept.name)  # the kept H200 reports, as this harness writes
        written[-1].write_text(junit.render([read_report(kept)]))
    names = [
        case.name for path in written for suite in JUnitXml.fromfile(str(path)) for case in suite
    ]
    assert len(names) == len(set(names)) > 400
    assert "tcgen05_gemm::compile[sm_100a]" in names
