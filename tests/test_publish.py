"""Merging reports, the summary, history and baselines, and the bad inputs around them."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import cmarkgfm
import pytest
from lxml import etree

from harness.model.cell import ABComparison, Cell, Judgement, Provenance, Shard
from harness.model.codec import cell_json
from harness.model.errors import Unavailable
from harness.model.outcome import CellKind, Outcome
from harness.pipeline.context import HistoryUnusable, RunOptions
from harness.pipeline.stages import run_target
from harness.report import store
from harness.report.history import SCHEMA_VERSION, History, HistorySink, recent_reports
from harness.report.merge import load_reports, read_report, write_merged_xml
from harness.report.publish import PublishOptions, publish
from harness.report.summary import render_summary
from tests.conftest import ROOT, whole_corpus
from tests.h200_runs import H200, write_kept

KEPT = sorted(H200.glob("junit-*.xml"))
TARGETS = ["sm_80", "sm_90a", "sm_100a"]
SCHEMA = etree.XMLSchema(
    etree.parse(str(Path(__file__).parent / "schemas" / "junit-properties.xsd"))
)


def _shown(markdown: str) -> str:
    """The text a reader sees of `markdown`, rendered as GitHub renders it."""
    page = cmarkgfm.github_flavored_markdown_to_html(markdown)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _copy_kept(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for xml in KEPT:
        shutil.copy(xml, folder / xml.name)
        shutil.copy(xml.with_suffix(".json"), folder / xml.with_suffix(".json").name)
        copies.append(folder / xml.name)
    return copies


@pytest.fixture(scope="module")
def cpu_report(matrix, toolchain, compile_cache, tmp_path_factory):
    """A report made here, with no GPU: another runner of sm_90a beside the H200's."""
    folder = tmp_path_factory.mktemp("cpu")
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        folder / "reports",
        compile_cache,
        runner="ci-cpu",
    )
    with whole_corpus(compile_cache, "sm_90a"):
        return run_target(matrix, options, toolchain, Unavailable("no GPU on CI")).files.xml


@pytest.mark.corpus
def test_merging_keeps_every_cell_and_suite_distinct(cpu_report, tmp_path):
    files = [*KEPT, cpu_report]
    merged = load_reports(files, TARGETS)
    expected = sum(len(json.loads(f.with_suffix(".json").read_text())["cells"]) for f in files)
    assert len(merged.cells) == expected and merged.problems == []
    assert len({r.suite for r in merged.reports}) == 4  # two sm_90a suites, one per runner
    write_merged_xml(merged, tmp_path / "merged.xml")
    document = etree.parse(str(tmp_path / "merged.xml"))
    SCHEMA.assertValid(document)
    assert len(document.findall(".//testcase")) == expected
    assert len(document.findall("testsuite")) == 4


def test_bad_inputs_are_named_and_the_rest_still_merges(tmp_path):
    good, corrupt, mismatched = _copy_kept(tmp_path)
    corrupt.write_text(corrupt.read_text()[:500])  # truncated
    sidecar = json.loads(mismatched.with_suffix(".json").read_text())
    sidecar["cells"].pop()
    mismatched.with_suffix(".json").write_text(json.dumps(sidecar))
    merged = load_reports([good, corrupt, mismatched, good], TARGETS)
    problems = "\n".join(merged.problems)
    assert f"{corrupt}: not readable JUnit XML" in problems
    assert f"{mismatched.with_suffix('.json')}: does not match" in problems
    assert "given twice" not in problems  # read once: no failure
    assert merged.remarks == [f"{good}: given twice; read once"]
    assert merged.cells and {c.target for c in merged.cells} == {"sm_100a"}
    assert merged.missing_targets == ["sm_80", "sm_90a"]
    summary = render_summary(merged)
    assert "target `sm_80`: MISSING" in summary and "unreadable input" in summary


@pytest.mark.corpus
def test_a_kernel_that_never_ran_is_flagged(cpu_report):
    merged = load_reports([cpu_report], TARGETS)
    assert "async_hopper.sgemm_cp_async" in merged.never_ran()
    with_gpu = load_reports([*KEPT, cpu_report], TARGETS)
    assert "async_hopper.sgemm_cp_async" not in with_gpu.never_ran()


SGEMM = "m4096_n4096_k4096_stages3"  # a 3 ms case, its noise about 0.03 %


def _kept_with(folder: Path, factor: float = 1.0, binary: str | None = None) -> list[Path]:
    """Copies of the kept reports whose sm_90a SGEMM case took `factor` as long, every sample
    of it, and whose sgemm_cp_async build has the hash `binary`."""
    copies = _copy_kept(folder)
    xml = next(f for f in copies if f.name == "junit-sm_90a.xml")
    sidecar = json.loads(xml.with_suffix(".json").read_text())
    for cell in sidecar["cells"]:
        if cell["case"] == SGEMM:
            timing = cell["timing"]
            timing["samples_us"] = [v * factor for v in timing["samples_us"]]
            for key in ("median_us", "p10_us", "p90_us"):
                timing[key] *= factor
        if cell["kernel"] == "sgemm_cp_async" and cell["case"] == "compile":
            cell["compile"]["binary_sha256"] = binary  # the bytes and what they execute
            cell["compile"]["code_identity"] = binary
    xml.with_suffix(".json").write_text(json.dumps(sidecar))
    return copies


def _slowed(folder: Path, factor: float, binary: str | None = None) -> Path:
    return next(f for f in _kept_with(folder, factor, binary) if f.name == "junit-sm_90a.xml")


BASE = "f00dfeed" * 5  # the commit an A/B ran against


def _ab(judgement: Judgement, ratio: float | None = None, **fields) -> ABComparison:
    """An A/B of `judgement`; measured ones get `ratio` and an interval 0.5 % either side."""
    if ratio is not None:
        fields.update(ratio=ratio, low=ratio - 0.005, high=ratio + 0.005, threshold_pct=0.5)
        fields.update(rounds=15, base_median_us=3000.0, head_median_us=3000.0 * ratio)
    return ABComparison(BASE, judgement, **fields)


def _with_ab(xml: Path, case: str, ab: ABComparison) -> Path:
    """The report with `ab` as its `case` cell's A/B, in the JSON form `harness ab` writes."""
    sidecar = json.loads(xml.with_suffix(".json").read_text())
    (cell,) = [c for c in sidecar["cells"] if c["case"] == case]
    cell["ab"] = {**dataclasses.asdict(ab), "judgement": ab.judgement.value}
    xml.with_suffix(".json").write_text(json.dumps(sidecar))
    return xml


@pytest.mark.parametrize(
    ("factor", "judgement"),
    [
        (1.10, Judgement.SLOWER),
        (1.002, Judgement.SAME),  # within what one H200 shows against another
        (0.90, Judgement.FASTER),
        (1.06, Judgement.AMBIGUOUS),  # right at the threshold: the interval straddles it
    ],
)
def test_a_change_is_judged_from_both_runs_samples(tmp_path, factor, judgement):
    history = History(tmp_path / "history.sqlite")
    history.record(load_reports(KEPT, TARGETS), "base")
    current = load_reports([_slowed(tmp_path / "now", factor)], TARGETS)
    verdicts = {v.cell.name: v for v in history.compare(current, "base").verdicts}
    sgemm = verdicts[f"{SGEMM}[sm_90a]"]
    assert sgemm.judgement is judgement
    assert sgemm.ratio == pytest.approx(factor, rel=1e-4)
    assert sgemm.low <= factor <= sgemm.high and sgemm.threshold_pct == 6.0
    others = [v.judgement for name, v in verdicts.items() if SGEMM not in name]
    assert set(others) == {Judgement.SAME}


def _target_of(xml: Path) -> str | None:
    try:
        return json.loads(xml.with_suffix(".json").read_text()).get("target")
    except (OSError, ValueError, AttributeError):
        return None


def _report(*args, cwd=ROOT, every_target=True):
    """`report` over `args`; with `every_target`, the kept report of each target the reports
    given lack is added (unchanged), so that a test of the gate is not one of a missing target,
    which fails the report on its own."""
    given = [Path(a) for a in args if str(a).endswith(".xml")]
    if every_target and given:
        named = {_target_of(f) for f in given}
        args = (*(f for f in KEPT if _target_of(f) not in named), *args)
    if "--matrix" not in map(str, args):  # the matrix the kept reports ran under
        args = (*args, "--matrix", H200 / "matrix.yaml")
    return subprocess.run(
        [sys.executable, "-m", "harness", "report", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_the_report_command_writes_everything_and_a_cross_run_slower_never_fails(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    first = _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111")
    assert first.returncode == 0, first.stderr
    assert {p.name for p in out.iterdir()} >= {"merged.xml", "summary.md", "dashboard.html"}
    kept = [c for f in KEPT for c in json.loads(f.with_suffix(".json").read_text())["cells"]]
    passed = sum(c["outcome"] == "passed" for c in kept)
    skipped = sum(c["outcome"] == "skipped" for c in kept)
    runner = json.loads(KEPT[0].with_suffix(".json").read_text())["provenance"]["runner"]
    # the verdict first, as summary.md and the dashboard say it (tcgen05_gemm runs nowhere)
    said = first.stdout.splitlines()
    assert said[0] == "# CUDA matrix: NO FAILURES, but kernels never ran"
    assert said[1].startswith(f"{passed} passed, 0 failed, 0 error, {skipped} skipped")
    assert (out / "summary.md").read_text().startswith(f"{said[0]}\n")
    slowed = _slowed(tmp_path / "now", 1.10)
    args = ("--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa")
    judged = _report(slowed, *args)
    assert judged.returncode == 0, judged.stderr  # no threshold: reported, not failing
    assert "1 SLOWER" in judged.stdout  # the headline; the rest is in summary.md
    assert "Slower than the baseline" in (out / "summary.md").read_text()
    gated = _report(slowed, *args, "--max-slowdown", "5")
    assert gated.returncode == 0, gated.stderr  # two runs, maybe two machines: no proof
    said = f"unconfirmed: async_hopper.sgemm_cp_async {SGEMM}[sm_90a] on {runner}: SLOWER"
    assert f"warning: {said}" in gated.stderr and "no A/B was run for it" in gated.stderr
    summary = _shown((out / "summary.md").read_text())
    assert said in summary and "unconfirmed: no A/B was run for it" in summary
    unknown = _report(slowed, "--out", out, "--db", db, "--baseline", "cccc")
    assert unknown.returncode == 0, unknown.stderr  # nothing to judge against is no failure
    assert "baseline 'cccc' is not in" in unknown.stderr
    assert "nothing was judged against it" in (out / "summary.md").read_text()


def test_the_same_code_slower_is_the_environment_and_never_fails(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    base = _kept_with(tmp_path / "base", binary="ab12")
    assert _report(*base, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
    slowed = _slowed(tmp_path / "now", 1.10, binary="ab12")
    args = ("--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa")
    judged = _report(slowed, *args, "--max-slowdown", "5")
    assert judged.returncode == 0, judged.stderr
    assert "1 SLOWER" in judged.stdout
    summary = (out / "summary.md").read_text()
    assert "the environment, not the code" in summary and "unconfirmed" not in summary
    rebuilt = _slowed(tmp_path / "rebuilt", 1.10, binary="cd34")
    changed = _report(rebuilt, *args, "--max-slowdown", "5")
    assert changed.returncode == 0, changed.stderr  # the code changed, but nothing confirms it
    assert "unconfirmed:" in changed.stderr


def test_a_corrupt_history_is_kept_aside_and_a_fresh_one_started(tmp_path):
    db = tmp_path / "history.sqlite"
    db.write_bytes(b"not a database" * 100)
    done = _report(*KEPT, "--out", tmp_path / "out", "--db", db, "--commit", "aaaa1111")
    assert done.returncode == 0, done.stderr
    (kept,) = tmp_path.glob("history.sqlite.unreadable-*")
    assert kept.read_bytes() == b"not a database" * 100  # nothing overwritten
    assert f"{db}: not a readable history" in done.stderr and str(kept) in done.stderr
    assert History(db).commits() == ["aaaa1111"]


@pytest.mark.parametrize("kind", ["folder", "pipe", "link", "device"])
def test_a_db_that_is_no_history_file_is_left_as_it_is_and_the_rest_is_published(tmp_path, kind):
    """--db naming /dev/null once had it moved aside and replaced; nothing but a history file is
    ever moved or written."""
    db = tmp_path / "history.sqlite"
    if kind == "folder":
        db.mkdir()
    elif kind == "pipe":
        os.mkfifo(db)
    elif kind == "device":  # a replica of /dev/null (1, 3): the very case once replaced
        try:
            os.mknod(db, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs CAP_MKNOD, which this runner lacks")
    else:
        (tmp_path / "elsewhere.sqlite").write_bytes(b"")
        db.symlink_to(tmp_path / "elsewhere.sqlite")
    before = db.lstat()
    done = _report(*KEPT, "--out", tmp_path / "out", "--db", db, "--commit", "aaaa1111")
    assert done.returncode == 0, done.stderr
    assert f"{db}: not a history file but a" in done.stderr
    assert "nothing was judged or recorded" in done.stderr
    assert db.lstat().st_ino == before.st_ino and db.lstat().st_mode == before.st_mode
    assert not list(tmp_path.glob("history.sqlite.unreadable-*"))
    assert (tmp_path / "out" / "dashboard.html").is_file()


def test_an_out_that_is_a_file_is_refused_before_anything_is_recorded(tmp_path):
    out, db = tmp_path / "out", tmp_path / "h.sqlite"
    out.write_text("mine")
    done = _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111")
    assert done.returncode == 2
    assert f"--out {out}: not a folder; nothing was read, recorded or written" in done.stderr
    assert out.read_text() == "mine" and not db.exists()


@pytest.mark.corpus
def test_strict_fails_when_a_kernel_never_ran(cpu_report, tmp_path):
    lenient = _report(cpu_report, "--out", tmp_path, "--db", tmp_path / "h.sqlite")
    assert lenient.returncode == 0
    strict = _report(cpu_report, "--out", tmp_path, "--db", tmp_path / "h.sqlite", "--strict")
    assert strict.returncode == 1
    assert "async_hopper.tma_add_one never ran on any target" in strict.stderr


def test_strict_passes_a_kernel_no_runner_could_run_and_the_summary_says_it_never_ran(tmp_path):
    """On the H200s, tcgen05_gemm (sm_100a only) never runs: its sm_100a column is compiled and
    inspected only. Strict fails kernels a runner could have run, not that one."""
    kept = _copy_kept(tmp_path / "in")
    strict = _report(*kept, "--out", tmp_path, "--db", tmp_path / "h.sqlite", "--strict")
    assert strict.returncode == 0, strict.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "- ⏭️ 1 kernel never ran on any runner" in summary
    assert "`async_hopper.tcgen05_gemm`" in summary
    assert "`sm_100a@vm`: compiled and inspected only" in summary


@pytest.mark.parametrize(
    ("kind", "case", "tool", "name", "row"),
    [
        (
            CellKind.CASE,
            "m4096_n4096_k4096",
            None,
            "m4096_n4096_k4096[sm_90a]",
            "m4096_n4096_k4096",
        ),
        (CellKind.COMPILE, "compile", None, "compile[sm_90a]", "compile"),
        (CellKind.SANITIZER, "n1", "memcheck", "n1[sm_90a]:memcheck", "n1:memcheck"),  # its tool
    ],
)
def test_a_cell_reads_as_the_same_row_in_every_column(kind, case, tool, name, row):
    where = Provenance(runner="h200", device="NVIDIA H200")
    cell = Cell(kind, "ch", "k", case, "sm_90a", where, Outcome.PASSED, tool=tool)
    assert (cell.name, cell.row, cell.column) == (name, row, "sm_90a@h200")


def test_a_report_of_the_first_schema_is_named_as_older_and_left_out(tmp_path):
    """tests/fixtures/reports/schema1: the kept sm_100a report as the harness wrote it before
    the result model (every number a string)."""
    old = ROOT / "tests" / "fixtures" / "reports" / "schema1" / "junit-sm_100a.xml"
    done = _report(old, *KEPT[:1], "--out", tmp_path, "--db", tmp_path / "h.sqlite")
    assert done.returncode == 1
    assert f"{old.with_suffix('.json')}: schema_version 1 is not 2.x" in done.stderr
    assert "written by an older harness; run the matrix again" in done.stderr
    assert "unreadable input" in (tmp_path / "summary.md").read_text()


def test_a_json_that_disagrees_with_its_xml_is_an_error_naming_the_file(tmp_path):
    """What concurrent runs writing one report name can leave: an XML of failures beside a JSON
    of passes. Trusting either would be wrong."""
    xml = next(f for f in _copy_kept(tmp_path) if f.name == "junit-sm_90a.xml")
    text = xml.read_text()
    for _ in range(3):  # three passed run cells now fail in the XML alone
        text = text.replace(
            "</properties>\n    </testcase>",
            '</properties>\n      <failure type="failure" message="wrong">wrong</failure>\n'
            "    </testcase>",
            1,
        )
    xml.write_text(text)
    merged = load_reports([xml], ["sm_90a"])
    assert merged.cells == [] and merged.missing_targets == ["sm_90a"]
    (problem,) = merged.problems
    assert problem.startswith(f"{xml.with_suffix('.json')}: disagrees with junit-sm_90a.xml on 3")
    assert "passed in JSON, failed in XML" in problem


def test_a_report_given_twice_is_read_once_and_does_not_fail(tmp_path):
    out = ["--out", tmp_path / "out", "--db", tmp_path / "h.sqlite"]
    done = _report(*KEPT, KEPT[0], *out)
    assert done.returncode == 0, done.stderr
    assert f"warning: {KEPT[0]}: given twice; read once" in done.stderr


def test_a_damaged_history_is_kept_aside_and_a_fresh_one_started(tmp_path):
    db = tmp_path / "history.sqlite"
    assert _report(*KEPT, "--out", tmp_path / "a", "--db", db, "--commit", "a1").returncode == 0
    pages = bytearray(db.read_bytes())
    pages[4096:4196] = b"\xa5" * 100  # page 2's b-tree header overwritten
    db.write_bytes(bytes(pages))
    damaged = _report(*KEPT, "--out", tmp_path / "b", "--db", db, "--commit", "b2")
    assert damaged.returncode == 0, damaged.stderr
    assert f"{db}:" in damaged.stderr and "kept it as" in damaged.stderr
    assert (tmp_path / "b" / "summary.md").is_file()
    assert History(db).commits() == ["b2"]


def test_a_history_that_cannot_be_moved_aside_judges_nothing_and_the_rest_is_published(
    tmp_path, monkeypatch
):
    db = tmp_path / "history.sqlite"
    db.write_bytes(b"garbage" * 100)

    rename = os.replace  # `harness.report.history.os` is the os module: every rename comes here

    def read_only_folder(source, destination):
        if Path(source) != db:  # the published files are still written (renamed into place)
            return rename(source, destination)
        raise PermissionError(13, "Permission denied", str(source))

    monkeypatch.setattr("harness.report.history.os.replace", read_only_folder)
    options = PublishOptions(KEPT, TARGETS, tmp_path / "out", db, "c3", baseline="a1")
    published = publish(options)
    assert published.failures == [] and published.verdicts == []
    (remark,) = published.remarks
    assert remark.startswith(f"{db}: not a readable history")
    assert "cannot be moved aside: Permission denied: nothing was judged or recorded" in remark
    assert db.read_bytes() == b"garbage" * 100  # untouched
    assert (tmp_path / "out" / "dashboard.html").is_file()


def test_the_summary_gives_each_timed_cell_its_clock_and_throttled_samples(tmp_path):
    copies = _copy_kept(tmp_path)
    xml = next(f for f in copies if f.name == "junit-sm_90a.xml")
    sidecar = json.loads(xml.with_suffix(".json").read_text())
    timed = next(c for c in sidecar["cells"] if c["case"] == SGEMM)
    timed["timing"].update(sm_clock_mhz=1400, throttled_samples=3)
    xml.with_suffix(".json").write_text(json.dumps(sidecar))
    summary = render_summary(load_reports([xml], TARGETS))
    (row,) = re.findall(rf"<tr><td>sgemm_cp_async</td><td>{SGEMM}</td>.*?</tr>", summary)
    assert "@1400 MHz (3 throttled)" in row


RERUNS = [f"reruns/{run}/junit-sm_90a" for run in ("r1", "r2", "r3")]  # kept compact


@pytest.mark.parametrize(("base", "now"), [(0, 1), (0, 2), (1, 2)])
def test_kept_reruns_of_one_commit_judged_pairwise_give_no_failing_verdict(tmp_path, base, now):
    """Three H200 runs of one commit: the thresholds hold at the time scales reruns show."""
    history = History(tmp_path / "history.sqlite")
    history.record(load_reports([write_kept(RERUNS[base], tmp_path)], ["sm_90a"]), "rerun-base")
    current = load_reports([write_kept(RERUNS[now], tmp_path)], ["sm_90a"])
    verdicts = history.compare(current, "rerun-base").verdicts
    assert len(verdicts) == sum(1 for c in current.cells if c.median_us is not None) > 100
    failing = [v for v in verdicts if v.judgement in (Judgement.SLOWER, Judgement.FASTER)]
    assert failing == []


def test_the_kept_planted_slowdown_fails_the_gate_only_through_its_a_b(tmp_path):
    """A 5 % heavier scale_bias (tests/fixtures/slowdown) judged against the chapter kernel: two
    runs cannot tell 5 % from what two H200s differ by; its same-GPU A/B can."""
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    base = H200 / "regression" / "baseline" / "partial-junit-sm_90a.xml"
    kept = H200 / "regression" / "slower" / "junit-sm_90a.xml"
    slower = tmp_path / "slower" / kept.name
    slower.parent.mkdir()
    shutil.copy(kept, slower)
    shutil.copy(kept.with_suffix(".json"), slower.with_suffix(".json"))
    assert _report(base, "--out", out, "--db", db, "--commit", "base1234").returncode == 0
    args = ("--out", out, "--db", db, "--commit", "slow5678", "--baseline", "base1234")
    judged = _report(slower, *args, "--max-slowdown", "3.5")
    assert judged.returncode == 0, judged.stderr
    assert "0 SLOWER" in judged.stdout  # 1.050 is inside the cross-run threshold
    _with_ab(slower, "n67108864_vec4", _ab(Judgement.SLOWER, 1.050))
    confirmed = _report(slower, *args, "--max-slowdown", "3.5")
    assert confirmed.returncode == 1, confirmed.stderr
    assert (
        "programming_model.scale_bias n67108864_vec4[sm_90a] on vm: 5.0 % slower in the A/B "
        "against f00dfeedf0 on one GPU: SLOWER, ratio 1.050 (95 % interval 1.045-1.055"
    ) in confirmed.stderr
    assert "(limit 3.5 %)" in confirmed.stderr


@pytest.mark.parametrize("with_history", [False, True])
def test_an_a_b_slower_beyond_the_limit_fails_with_or_without_a_baseline(tmp_path, with_history):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    args: list = ["--out", out, "--db", db, "--commit", "bbbb2222", "--max-slowdown", "5"]
    if with_history:
        assert _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
        args += ["--baseline", "aaaa1111"]
    slowed = _with_ab(_slowed(tmp_path / "now", 1.10), SGEMM, _ab(Judgement.SLOWER, 1.10))
    done = _report(slowed, *args)
    assert done.returncode == 1
    (failure,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert failure == (
        f"error: async_hopper.sgemm_cp_async {SGEMM}[sm_90a] on vm: 10.0 % slower in the A/B "
        "against f00dfeedf0 on one GPU: SLOWER, ratio 1.100 (95 % interval 1.095-1.105, "
        "threshold 0.5 %, 15 rounds), 3000.0 → 3300.0 µs (limit 5 %)"
    )
    assert "unconfirmed" not in done.stderr  # the A/B measured it
    summary = (out / "summary.md").read_text()
    assert "- A/B against f00dfeedf0: 0 SAME, 0 FASTER, 1 SLOWER, 0 AMBIGUOUS" in summary


@pytest.mark.parametrize(
    ("ab", "said"),
    [
        (_ab(Judgement.SLOWER, 1.03), "SLOWER, ratio 1.030"),  # beyond its threshold, not 5 %
        (_ab(Judgement.AMBIGUOUS, 1.10), "AMBIGUOUS, ratio 1.100"),
        (
            _ab(Judgement.NOT_RUN, why="the base's build failed: nvcc exited 1"),
            "NOT_RUN: the base's build failed: nvcc exited 1",
        ),
    ],
)
def test_an_a_b_that_is_not_slower_beyond_the_limit_never_fails(tmp_path, ab, said):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    slowed = _with_ab(_slowed(tmp_path / "now", 1.10), SGEMM, ab)
    done = _report(slowed, "--out", out, "--db", db, "--max-slowdown", "5")
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.md").read_text()
    assert f"`{SGEMM}[sm_90a]` on vm: {said}" in summary  # listed under the A/B's heading


def test_a_cross_run_slower_whose_a_b_did_not_run_says_why_it_is_unconfirmed(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    assert _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
    not_run = _ab(Judgement.NOT_RUN, why="the base commit faulted on this case")
    slowed = _with_ab(_slowed(tmp_path / "now", 1.10, binary="cd34"), SGEMM, not_run)
    args = ("--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa1111")
    done = _report(slowed, *args, "--max-slowdown", "5")
    assert done.returncode == 0, done.stderr
    why = "its A/B against f00dfeedf0 is NOT_RUN: the base commit faulted on this case"
    assert f"and {why}; a cross-run verdict never fails the gate" in done.stderr
    summary = (out / "summary.md").read_text()
    assert f"the code changed; unconfirmed: {why})" in summary  # its line under Slower


def test_an_a_b_slower_of_the_base_s_own_code_is_the_machine_and_never_fails(tmp_path):
    """What the A/B would call IDENTICAL: the base's code identity is the head's."""
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    same = _ab(Judgement.SLOWER, 1.10, base_code_identity="ab12")
    slowed = _with_ab(_slowed(tmp_path / "now", 1.0, binary="ab12"), SGEMM, same)
    done = _report(slowed, "--out", out, "--db", db, "--max-slowdown", "5")
    assert done.returncode == 0, done.stderr
    assert "its code identity is the base's: the machine, not the code" in done.stderr
    rebuilt = _with_ab(
        _slowed(tmp_path / "rebuilt", 1.0, binary="cd34"), SGEMM, same
    )  # the head's code is not the base's: the A/B stands
    assert _report(rebuilt, "--out", out, "--db", db, "--max-slowdown", "5").returncode == 1


def test_a_shared_gpu_is_judged_so_named_and_never_fails(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    assert _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
    shared = _slowed(tmp_path / "now", 1.10, binary="cd34")
    sidecar = json.loads(shared.with_suffix(".json").read_text())
    sidecar["shared_gpu"] = "pid 4242 (python3) used GPU 0 during the run"
    (cell,) = [c for c in sidecar["cells"] if c["case"] == SGEMM]
    cell["timing"]["shared_gpu"] = "pid 4242 (python3) while sampling"
    shared.with_suffix(".json").write_text(json.dumps(sidecar))
    args = ("--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa1111")
    done = _report(shared, *args, "--max-slowdown", "5")
    assert done.returncode == 0, done.stderr
    assert ", 0 SLOWER, 0 AMBIGUOUS, 1 GPU shared" in done.stdout
    assert "unconfirmed" not in done.stderr  # not a SLOWER at all
    remark = (
        f"{shared} (cuda-matrix.sm_90a.vm): the GPU was shared during the run (pid 4242 "
        "(python3) used GPU 0 during the run)"
    )
    assert f"warning: {remark}" in done.stderr
    summary = (out / "summary.md").read_text()
    assert "1 GPU shared" in summary and "GPU shared 1.100" in summary


def test_after_two_report_runs_every_timed_cell_has_a_trend_of_two(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    for commit in ("aaaa1111", "bbbb2222"):
        assert _report(*KEPT, "--out", out, "--db", db, "--commit", commit).returncode == 0
    page = (out / "dashboard.html").read_text()
    blob = re.search(r'id="cells-data">(.*?)</script>', page, re.S).group(1)
    records = json.loads(blob)
    timed = [r for r in records if r["timing"]]
    assert timed and all([run for run, _ in r["trend"]] == ["aaaa1111", "bbbb2222"] for r in timed)


def test_report_without_jinja2_says_what_to_install_and_writes_nothing(tmp_path):
    code = (
        "import sys; sys.modules['jinja2'] = None; from harness.__main__ import main; "
        f"sys.exit(main(['report', {str(KEPT[0])!r}, '--out', {str(tmp_path / 'out')!r}, "
        f"'--db', {str(tmp_path / 'h.sqlite')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "report needs the Python package 'jinja2'" in done.stderr
    assert "pip install -r requirements.txt" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("median", [float("nan"), float("inf"), 0.0, -3.0, "fast"])
def test_a_report_with_an_impossible_time_is_named_and_never_enters_the_history(tmp_path, median):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    copies = _copy_kept(tmp_path / "bad")
    bad = next(f for f in copies if f.name == "junit-sm_90a.xml")
    sidecar = json.loads(bad.with_suffix(".json").read_text())
    timed = next(c for c in sidecar["cells"] if c["timing"])
    timed["timing"]["median_us"] = median
    bad.with_suffix(".json").write_text(json.dumps(sidecar))
    done = _report(*copies, "--out", out, "--db", db, "--commit", "bad1")
    assert done.returncode == 1
    assert f"{bad.with_suffix('.json')}: malformed report" in done.stderr
    assert f"cell {timed['chapter']}.{timed['kernel']} {timed['case']}: impossible time" in (
        done.stderr
    )
    history = History(db)
    stored = {row[0] for row in history.db.execute("SELECT target FROM runs")}
    history.close()
    assert stored == {"sm_80", "sm_100a"}  # the other reports are recorded, that one is not


def test_a_stored_baseline_with_a_zero_median_judges_nothing_and_says_so(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    assert _report(*KEPT, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
    with sqlite3.connect(db) as history:  # as a history written before they were refused
        history.execute("UPDATE cells SET median_us = 0 WHERE name = ?", (f"{SGEMM}[sm_90a]",))
    judged = _report(*KEPT, "--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa")
    assert judged.returncode == 0, judged.stderr
    assert "1 cell(s) of the baseline aaaa1111 have impossible times" in judged.stderr
    timed = sum(
        1
        for f in KEPT
        for c in json.loads(f.with_suffix(".json").read_text())["cells"]
        if c["timing"]
    )
    assert f"{timed - 1} SAME, 0 FASTER, 0 SLOWER, 0 AMBIGUOUS" in judged.stdout


def test_a_baseline_of_another_gpu_model_or_driver_is_named_not_judged(tmp_path):
    out, db = tmp_path / "out", tmp_path / "history.sqlite"
    h100 = _copy_kept(tmp_path / "h100")
    for xml in h100:
        sidecar = json.loads(xml.with_suffix(".json").read_text())
        sidecar["provenance"]["device"] = "NVIDIA H100 80GB HBM3"
        xml.with_suffix(".json").write_text(json.dumps(sidecar))
    assert _report(*h100, "--out", out, "--db", db, "--commit", "aaaa1111").returncode == 0
    args = ("--out", out, "--db", db, "--commit", "bbbb2222", "--baseline", "aaaa")
    judged = _report(*_kept_with(tmp_path / "now", 1.10), *args, "--max-slowdown", "5")
    assert judged.returncode == 0, judged.stderr  # nothing alike to judge against
    said = "the baseline aaaa1111 ran on NVIDIA H100 80GB HBM3 (driver "
    assert f"sm_90a: {said}" in judged.stderr and "this run on NVIDIA H200 (driver" in judged.stderr
    assert said in (out / "summary.md").read_text()
    assert "against the baseline" not in judged.stdout  # no verdict, and it says why
    newer = _copy_kept(tmp_path / "newer-driver")
    for xml in newer:
        sidecar = json.loads(xml.with_suffix(".json").read_text())
        sidecar["provenance"]["driver"] = "590.10.01"
        xml.with_suffix(".json").write_text(json.dumps(sidecar))
    args = ("--out", out, "--db", db, "--commit", "cccc3333")
    assert _report(*newer, *args).returncode == 0
    again = _report(*KEPT, "--out", out, "--db", db, "--commit", "dddd", "--baseline", "cccc")
    assert "(driver 590.10.01, nvcc" in again.stderr and "not judged" in again.stderr


def test_a_history_of_the_schema_before_is_brought_up_to_date_with_nothing_lost(tmp_path):
    db = tmp_path / "history.sqlite"
    with sqlite3.connect(db) as old:  # schema 2: runs had no driver or toolkit
        old.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, commit_id TEXT NOT NULL, suite TEXT NOT "
            "NULL, target TEXT NOT NULL, runner TEXT NOT NULL, device TEXT NOT NULL, "
            "UNIQUE (commit_id, suite));"
            "CREATE TABLE cells (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
            "classname TEXT NOT NULL, name TEXT NOT NULL, outcome TEXT NOT NULL, median_us REAL, "
            "noise_pct REAL, cell TEXT NOT NULL, PRIMARY KEY (run_id, classname, name));"
            "INSERT INTO runs VALUES (1, 'aaaa1111', 's', 'sm_90a', 'vm', 'NVIDIA H200');"
            "PRAGMA user_version = 2;"
        )
    history = History(db)
    rows = history.db.execute("SELECT commit_id, device, driver, toolkit FROM runs").fetchall()
    (version,) = history.db.execute("PRAGMA user_version").fetchone()
    history.close()
    assert rows == [("aaaa1111", "NVIDIA H200", None, None)] and version == SCHEMA_VERSION
    assert not list(tmp_path.glob("history.sqlite.unreadable-*"))  # not moved aside


SCHEMA_4 = (
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, commit_id TEXT NOT NULL, suite TEXT NOT NULL, "
    "target TEXT NOT NULL, runner TEXT NOT NULL, device TEXT NOT NULL, driver TEXT, toolkit TEXT, "
    "UNIQUE (commit_id, suite));"
    "CREATE TABLE cells (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
    "classname TEXT NOT NULL, name TEXT NOT NULL, outcome TEXT NOT NULL, median_us REAL, "
    "noise_pct REAL, cell TEXT NOT NULL, samples_us TEXT, shared_gpu TEXT, "
    "PRIMARY KEY (run_id, classname, name));"
    "PRAGMA user_version = 4;"
)


def _stored_as_schema_4(db: Path, reports: list[Path], commit: str) -> None:
    """A history as schema 4 wrote it: each cell's JSON in its row, samples as JSON text."""
    with sqlite3.connect(db) as old:
        old.executescript(SCHEMA_4)
        for run_id, report in enumerate(load_reports(reports, TARGETS).reports):
            where = report.provenance
            old.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, commit, report.suite, report.target, where.runner, where.device,
                 where.driver, where.toolkit),
            )  # fmt: skip
            old.executemany(
                "INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (run_id, c.classname, c.name, c.outcome.value, c.median_us,
                     c.timing.noise_pct if c.timing else None, json.dumps(cell_json(c)),
                     json.dumps(c.timing.samples_us) if c.timing else None, None)
                    for c in report.cells
                ],
            )  # fmt: skip


def test_cells_stored_before_schema_5_are_judged_from_their_json_as_from_columns(tmp_path):
    """A history of schema 4 kept each cell's JSON in its row: brought up to date, its cells
    are read from that JSON, and judge as the columns of schema 5 do; an impossible time in
    that JSON is left out and said."""
    current = load_reports([_slowed(tmp_path / "now", 1.10)], TARGETS)

    def verdicts(history: History) -> list[tuple]:
        found = history.compare(current, "base").verdicts
        return sorted(
            (v.cell.classname, v.cell.name, v.judgement, v.low, v.high, v.same_code) for v in found
        )

    recorded = History(tmp_path / "now.sqlite")
    recorded.record(load_reports(KEPT, TARGETS), "base")
    from_columns = verdicts(recorded)
    recorded.close()
    _stored_as_schema_4(tmp_path / "before.sqlite", KEPT, "base")
    history = History(tmp_path / "before.sqlite")
    (version,) = history.db.execute("PRAGMA user_version").fetchone()
    assert version == SCHEMA_VERSION and verdicts(history) == from_columns
    assert len(from_columns) > 100
    assert sum(v[5] is True for v in from_columns) > 100  # each build's identity read back too
    with history.db:
        (row, cell_json) = history.db.execute(
            "SELECT c.rowid, cell FROM cells c JOIN runs r ON c.run_id = r.id "
            "WHERE c.median_us IS NOT NULL AND r.target = 'sm_90a' LIMIT 1"
        ).fetchone()
        cell = json.loads(cell_json)
        cell["timing"]["median_us"] = 0.0
        history.db.execute("UPDATE cells SET cell = ? WHERE rowid = ?", (json.dumps(cell), row))
    comparison = history.compare(current, "base")
    history.close()
    assert len(comparison.verdicts) == len(from_columns) - 1
    impossible = "1 cell(s) of the baseline base have impossible times"
    assert any(impossible in remark for remark in comparison.remarks)


@pytest.mark.parametrize(
    "samples",
    [
        "x''",  # no sample at all
        "x'00'",  # not whole doubles
        "'[1.0, 2.0]'",  # text, not packed doubles
        "x'0000000000000000'",  # 0.0
        "x'000000000000f0bf'",  # -1.0
        "x'000000000000f87f'",  # NaN
        "x'000000000000f07f'",  # infinity
    ],
)
def test_a_stored_cell_whose_samples_cannot_be_times_judges_nothing_and_is_said(tmp_path, samples):
    history = History(tmp_path / "history.sqlite")
    history.record(load_reports(KEPT, TARGETS), "base")
    current = load_reports([_slowed(tmp_path / "now", 1.10)], TARGETS)
    judged = len(history.compare(current, "base").verdicts)
    with history.db:
        history.db.execute(
            f"UPDATE cells SET samples_us = {samples} WHERE rowid = (SELECT min(c.rowid) FROM "
            "cells c JOIN runs r ON c.run_id = r.id WHERE c.median_us IS NOT NULL AND "
            "r.target = 'sm_90a')"
        )
    comparison = history.compare(current, "base")
    history.close()
    assert len(comparison.verdicts) == judged - 1
    impossible = "1 cell(s) of the baseline base have impossible times"
    assert any(impossible in remark for remark in comparison.remarks)


def test_the_history_keeps_each_run_s_report_as_it_was_read(tmp_path):
    history = History(tmp_path / "history.sqlite")
    history.record(load_reports(KEPT, TARGETS), "base")
    kept = dict(history.db.execute("SELECT target, report FROM runs"))
    history.close()
    for xml in KEPT:
        data = json.loads(xml.with_suffix(".json").read_bytes())
        assert json.loads(zlib.decompress(kept[data["target"]])) == data


def test_a_later_minor_schema_is_read_with_its_new_fields_ignored(tmp_path):
    kept = H200 / "junit-sm_90a.xml"
    data = json.loads(kept.with_suffix(".json").read_text())
    data["schema_version"] = "2.9"
    data["queue_depth"] = 3  # fields a later harness adds, at every level
    data["device"]["memory_clock_mhz"] = 3201
    data["provenance"]["image_digest"] = "sha256:0"
    for cell in data["cells"]:
        cell["energy_j"] = 1.5
        for part in ("timing", "stages", "throughput", "compile"):
            if cell.get(part):
                cell[part]["added_in_2_9"] = True
    xml = tmp_path / kept.name
    shutil.copy(kept, xml)
    xml.with_suffix(".json").write_text(json.dumps(data))
    merged = load_reports([xml], TARGETS)
    assert merged.problems == [] and len(merged.cells) == len(data["cells"])
    timed = [c for c in merged.cells if c.timing]
    assert timed and all(c.timing.median_us > 0 for c in timed)


def test_a_target_matrix_yaml_lacks_is_merged_and_named():
    kept = H200 / "junit-sm_90a.xml"
    merged = load_reports([kept], ["sm_80", "sm_100a"])
    assert merged.targets == ["sm_90a"] and merged.problems == []
    (said,) = [r for r in merged.remarks if "not in matrix.yaml" in r]
    assert said == (
        f"{kept}: target 'sm_90a' is not in matrix.yaml (its targets: sm_80, sm_100a); merged "
        "as a column of its own"
    )


def test_two_reports_whose_suites_differ_only_in_spaces_are_one_run_read_twice(tmp_path):
    kept = H200 / "junit-sm_80.xml"
    twin = tmp_path / "twin" / kept.name
    twin.parent.mkdir()
    data = json.loads(kept.with_suffix(".json").read_text())
    suite = data["suite"]
    data["suite"] = suite + " "
    twin.with_suffix(".json").write_text(json.dumps(data))
    twin.write_text(kept.read_text().replace(f'name="{suite}"', f'name="{suite} "'))
    merged = load_reports([kept, twin], TARGETS)
    assert len(merged.reports) == 1 and len(merged.cells) == len(data["cells"])
    assert merged.problems == [
        f"{twin}: suite '{suite} ' was already read from {kept} (as '{suite}'); skipped (the "
        "same run twice?)"
    ]


def test_no_report_at_all_is_a_failure(tmp_path):
    empty = tmp_path / "artifacts"
    empty.mkdir()
    done = _report("--artifacts", empty, "--out", tmp_path / "out", "--db", tmp_path / "h.sqlite")
    assert done.returncode == 1, done.stderr
    assert "error: no report to publish: no files were given, and none was found" in done.stderr


def test_report_reads_compile_only_reports_as_their_target_s_column_where_no_test_ran(tmp_path):
    """`nox -s compile` then `nox -s report`: the compile reports count as their targets'
    columns (never MISSING), and a target that was also tested keeps its test report only."""
    from harness.commands.report import default_reports

    for name in ("junit-sm_90a", "junit-sm_90a-shard1of2", "compile-sm_90a", "compile-sm_80"):
        (tmp_path / f"{name}.xml").write_text("")
    assert [p.name for p in default_reports(tmp_path)] == [
        "junit-sm_90a-shard1of2.xml",
        "junit-sm_90a.xml",
        "compile-sm_80.xml",
    ]


def _nested(sidecar: dict) -> str:
    return "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    ("fault", "edit", "said"),
    [
        ("cells a string", lambda s: {**s, "cells": "x"}, "cells is str, not a list"),
        ("cells of numbers", lambda s: {**s, "cells": [1, 2]}, "a cell is int, not an object"),
        ("a NaN cell time", lambda s: _first_cell(s, seconds=float("nan")), "seconds is nan"),
        ("a negative cell time", lambda s: _first_cell(s, seconds=-1e308), "seconds is -1e+308"),
        ("an infinite wall", lambda s: {**s, "wall_s": float("inf")}, "wall_s is inf"),
        ("200k nested brackets", _nested, "nested deeper than JSON is read"),
    ],
)
def test_a_malformed_report_is_named_and_left_out_while_the_rest_merge(tmp_path, fault, edit, said):
    copies = _copy_kept(tmp_path)
    bad = next(f for f in copies if f.name == "junit-sm_90a.xml")
    edited = edit(json.loads(bad.with_suffix(".json").read_text()))
    text = edited if isinstance(edited, str) else json.dumps(edited)
    bad.with_suffix(".json").write_text(text)
    merged = load_reports(copies, TARGETS)
    (problem,) = merged.problems
    assert problem.startswith(str(bad.with_suffix(".json"))) and said in problem, problem
    assert {c.target for c in merged.cells} == {"sm_80", "sm_100a"}
    assert merged.missing_targets == ["sm_90a"]


def _first_cell(sidecar: dict, **changed: object) -> dict:
    sidecar["cells"][0].update(changed)
    return sidecar


def test_a_full_report_beside_a_shard_of_its_column_is_named(tmp_path):
    """Both hold the column's cells: merged, each would count twice."""
    copies = _copy_kept(tmp_path)
    full = next(f for f in copies if f.name == "junit-sm_90a.xml")
    shard = tmp_path / "shard" / "junit-sm_90a-shard1of2.xml"
    shard.parent.mkdir()
    report = read_report(full)
    report.suite += ".shard1of2"
    report.shard = Shard(1, 2, "p" * 64, "case sizes")
    report.cells = report.cells[: len(report.cells) // 2]
    store.write(store.ReportFiles(shard, shard.with_suffix(".json")), report)
    merged = load_reports([*copies, shard], TARGETS)
    runner = report.provenance.runner
    twice = f"sm_90a@{runner}: a full report and 1 of its 2 shards: their cells are counted twice"
    assert any(p.startswith(twice) for p in merged.shard_problems), merged.shard_problems


def test_a_run_with_history_keeps_its_finished_report_there_as_report_would(
    matrix, toolchain, compile_cache, tmp_path
):
    db = tmp_path / "history.sqlite"
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        tmp_path / "reports",
        compile_cache,
        select="scale_bias",
        commit="abc1234",
        history=db,
    )
    for _ in range(2):  # the same commit's run again replaces it
        report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    history = History(db)
    runs = history.db.execute("SELECT commit_id, suite, target FROM runs").fetchall()
    cells = history.db.execute("SELECT count(*) FROM cells").fetchone()[0]
    history.close()
    assert runs == [("abc1234", report.suite, "sm_90a")]
    assert cells == len(report.cells) > 0
    (kept,) = recent_reports(db, "sm_90a", 5)
    assert json.loads(zlib.decompress(kept))["suite"] == report.suite


def test_history_without_a_commit_is_refused_before_anything_is_written(
    matrix, toolchain, compile_cache, tmp_path
):
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        tmp_path / "reports",
        compile_cache,
        history=tmp_path / "history.sqlite",
    )
    with pytest.raises(HistoryUnusable, match="the run's commit is unknown"):
        run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    assert list(tmp_path.iterdir()) == []


def test_history_that_cannot_be_kept_is_refused_naming_it_before_anything_is_written(
    matrix, toolchain, compile_cache, tmp_path
):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        tmp_path / "reports",
        compile_cache,
        commit="abc1234",
        history=folder,
    )
    with pytest.raises(HistoryUnusable, match=f"--history {folder}: "):
        run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"]
    assert list(folder.iterdir()) == []


def test_an_unfinished_run_is_not_kept_in_the_history(tmp_path):
    report = read_report(KEPT[0])
    report.finished = False
    HistorySink(tmp_path / "history.sqlite", "abc1234").end(report)
    assert not (tmp_path / "history.sqlite").exists()


def test_a_history_of_schema_5_keeps_its_cells_and_has_no_verdict_to_carry(tmp_path):
    path = tmp_path / "history.sqlite"
    history = History(path)
    history.record(load_reports(KEPT, TARGETS), "base")
    cells = history.db.execute("SELECT count(*) FROM cells").fetchone()
    history.close()
    with sqlite3.connect(path) as db:  # as schema 5 had it: no run's time, no verdict key
        db.executescript(
            "DROP INDEX cells_by_verdict_key; ALTER TABLE cells DROP COLUMN verdict_key; "
            "ALTER TABLE cells DROP COLUMN carried; ALTER TABLE runs DROP COLUMN recorded; "
            "PRAGMA user_version = 5;"
        )
    history = History(path)
    assert history.db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert history.db.execute("SELECT count(*) FROM cells").fetchone() == cells
    keys = history.db.execute("SELECT DISTINCT verdict_key, carried FROM cells").fetchall()
    history.close()
    assert keys == [(None, None)]
