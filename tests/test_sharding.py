"""`test --shard i/N`: a target's kernels across N runs, each kernel whole in one, balanced by
expected time; `report` puts the shards of one run back in one column, every cell once, and
names a shard that is missing, plans that differ and a cell run twice."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from harness.model.errors import Unavailable
from harness.pipeline.context import RunOptions
from harness.pipeline.sharding import (
    HISTORY_RUNS,
    ShardError,
    ShardRequest,
    default_sources,
    times_of,
)
from harness.pipeline.stages import run_target
from harness.report.history import History
from harness.report.merge import load_reports, read_report, shard_problems
from tests.conftest import ROOT, whole_corpus
from tests.h200_runs import H200, kept_runs, write_kept

KEPT = H200 / "junit-sm_90a.json"  # an H200 run's times
PASSED_CASE = "async_copy.prefetch_cp_async_ptx::n67108864_stages2"  # one of its timed cases


@pytest.fixture(scope="module")
def four_shards(matrix, toolchain, compile_cache, tmp_path_factory):
    """The corpus's sm_90a in 4 shards, no GPU, weighed by the kept H200 report's times."""
    reports = tmp_path_factory.mktemp("shards")
    with whole_corpus(compile_cache, "sm_90a"):
        for index in range(1, 5):
            options = RunOptions(
                matrix.targets["sm_90a"],
                (ROOT / "kernels",),
                reports,
                compile_cache,
                runner="box",
                shard=ShardRequest(index, 4, (KEPT,)),
            )
            run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    return reports


@pytest.mark.corpus
def test_four_shards_hold_every_cell_of_the_target_once_and_are_balanced(four_shards):
    files = sorted(four_shards.glob("junit-sm_90a-shard*of4.xml"))
    assert [f.name for f in files] == [f"junit-sm_90a-shard{i}of4.xml" for i in range(1, 5)]
    merged = load_reports(files, ["sm_90a"])
    assert merged.problems == [] and merged.shard_problems == []
    keys = Counter((cell.classname, cell.name) for cell in merged.cells)
    whole = json.loads(KEPT.read_text())["cells"]
    expected = {(f"{c['chapter']}.{c['kernel']}", f"{c['case']}[sm_90a]") for c in whole}
    assert set(keys) == expected and set(keys.values()) == {1}
    assert {cell.column for cell in merged.cells} == {"sm_90a@box"}
    times = times_of([KEPT], "sm_90a").seconds
    loads = [
        sum(times.get(f"{cell.classname}::{cell.case}", 0.0) for cell in report.cells)
        for report in merged.reports
    ]
    assert max(loads) <= 1.2 * min(loads), loads
    shards = [report.shard for report in merged.reports]
    assert [(s.index, s.count) for s in shards if s] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert len({s.plan for s in shards if s}) == 1
    assert all(s and s.weights == f"times of {KEPT}" for s in shards)


def _report(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "harness", "report", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


@pytest.mark.corpus
def test_a_missing_shard_is_named_and_the_report_says_not_ok_and_fails(four_shards, tmp_path):
    kept = [
        f for f in sorted(four_shards.glob("junit-sm_90a-shard*of4.*")) if "shard2" not in f.name
    ]
    for path in kept:
        shutil.copy(path, tmp_path / path.name)
    given = sorted(tmp_path.glob("*.xml"))
    merged = load_reports(given, ["sm_90a"])
    assert merged.shard_problems == [
        "sm_90a@box: shard 2 of 4 has no report: the kernels it ran are missing from this column"
    ]
    out = tmp_path / "out"
    done = _report(*given, "--out", out, "--db", tmp_path / "h.sqlite", cwd=ROOT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "shard 2 of 4 has no report" in done.stderr
    first = (out / "summary.md").read_text().splitlines()[0]
    assert first.startswith("# CUDA matrix: NOT OK: ") and "1 shard problem(s)" in first
    assert done.stdout.splitlines()[0] == first


@pytest.mark.corpus
def test_shards_planned_apart_and_a_cell_in_two_shards_are_named(four_shards):
    files = sorted(four_shards.glob("junit-sm_90a-shard*of4.xml"))
    first, second, *rest = [read_report(path) for path in files]
    assert second.shard is not None
    astray = dataclasses.replace(
        second,
        shard=dataclasses.replace(second.shard, plan="0" * 64, weights="case sizes"),
        cells=[*second.cells, first.cells[0]],
    )
    said = "\n".join(shard_problems([first, astray, *rest]))
    assert "its 4 shards planned their kernels differently (weighed by case sizes; times of" in said
    cell = first.cells[0]
    assert f"sm_90a@box: {cell.classname} {cell.name} is in shard 1 and in shard 2" in said


@pytest.mark.parametrize("text", ["0/4", "5/4", "a/b", "2", "1/0"])
def test_a_shard_that_is_no_i_of_n_is_refused(text):
    with pytest.raises(ShardError, match=rf"--shard '{text}': expected i/N with 1 <= i <= N"):
        ShardRequest.parse(text)


def test_times_come_from_a_report_or_an_object_of_seconds_and_nothing_else(tmp_path):
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"ch.k": 2.5, "ch.k2::n1": 1}))
    assert times_of([flat], "sm_90a").seconds == {"ch.k": 2.5, "ch.k2::n1": 1.0}
    assert times_of([KEPT], "sm_90a").seconds[PASSED_CASE] > 0
    assert times_of([], "sm_90a").said == "case sizes"
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ShardError, match=r"list.json: neither a report's JSON, a history"):
        times_of([listed], "sm_90a")
    with pytest.raises(ShardError, match=r"missing.json: cannot be read \(No such file"):
        times_of([tmp_path / "missing.json"], "sm_90a")


def test_a_case_weighs_the_median_of_its_runs_not_one_run_s_outlier(tmp_path):
    """One run's host work under a whole target's contention was 4x a kernel's usual on an
    H200 (cluster_reduce: 9.0 s against 2.3 and 2.2): the median of three runs is not moved."""
    runs = []
    for index, seconds in enumerate((2.3, 9.0, 2.2)):
        runs.append(tmp_path / f"run{index}.json")
        runs[-1].write_text(json.dumps({"ch.cluster_reduce": seconds, f"ch.only{index}": 1.0}))
    times = times_of(runs, "sm_90a")
    assert times.seconds["ch.cluster_reduce"] == 2.3
    assert times.seconds["ch.only1"] == 1.0  # a key one run has is that run's
    assert times.said.startswith("median of 3 runs: ")


FLEET = [run for run in kept_runs() if run.startswith("fleet/") and run.endswith("/junit-sm_90a")]


def test_a_history_weighs_by_the_median_of_its_last_runs_of_the_target(tmp_path):
    """A history (the aggregate's, handed to every shard) is read without a change: each of its
    newest runs of the target is a run, as its report would be."""
    fleet = [write_kept(run, tmp_path) for run in FLEET]  # 13 H200s' sm_90a reports
    history_path = tmp_path / "history.sqlite"
    history = History(history_path)
    for index, path in enumerate(fleet):
        history.record(load_reports([path], ["sm_90a"]), f"{index:040x}")
    history.close()
    before = history_path.read_bytes()
    from_history = times_of([history_path], "sm_90a")
    newest = [path.with_suffix(".json") for path in fleet[-HISTORY_RUNS:]]
    assert len(fleet) > HISTORY_RUNS  # the older runs weigh nothing
    assert from_history.seconds == times_of(newest, "sm_90a").seconds
    assert from_history.said == f"median of {HISTORY_RUNS} runs: {history_path}"
    assert history_path.read_bytes() == before
    assert times_of([history_path], "sm_80").said == "case sizes"  # it keeps no sm_80 run
    # in the reports folder, the history weighs before the last report
    shutil.copy(KEPT, tmp_path / "junit-sm_90a.json")
    assert default_sources(tmp_path, "sm_90a") == (history_path,)
    assert default_sources(tmp_path, "sm_80") == ()
    history_path.unlink()
    assert default_sources(tmp_path, "sm_90a") == (tmp_path / "junit-sm_90a.json",)


def test_a_history_that_cannot_weigh_is_named_not_a_traceback(tmp_path):
    """A database with no runs table, and one whose kept report is not a report: each named."""
    import sqlite3

    empty = tmp_path / "other.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ShardError, match=r"--times .*other.sqlite: not a history this harness"):
        times_of([empty], "sm_90a")
    broken = tmp_path / "broken.sqlite"
    db = sqlite3.connect(broken)
    db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, target TEXT, report BLOB)")
    db.execute("INSERT INTO runs (target, report) VALUES ('sm_90a', x'00ff00')")
    db.commit()
    with pytest.raises(ShardError, match=r"broken.sqlite: a run's report cannot be read"):
        times_of([broken], "sm_90a")


def test_times_without_a_shard_are_refused_naming_both(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness", "test", "sm_90a", "--times", str(KEPT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "--times balances shards: it needs --shard i/N" in done.stderr


@pytest.mark.parametrize(
    "bad_times",
    ["truncated", "a folder", "missing"],
)
def test_a_bad_times_file_leaves_the_shard_s_last_report_as_it_was(
    four_shards, matrix, toolchain, compile_cache, tmp_path, bad_times
):
    """The times are read before the run begins: a usage error writes no report, so it never
    replaces a finished one with an empty, unfinished one."""
    shard = four_shards / "junit-sm_90a-shard2of4.json"
    reports = tmp_path / "reports"
    reports.mkdir()
    kept = reports / shard.name
    kept.write_bytes(shard.read_bytes())
    times = tmp_path / "times.json"
    if bad_times == "truncated":
        times.write_text(KEPT.read_text()[:1000])
    elif bad_times == "a folder":
        times.mkdir()
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        reports,
        compile_cache,
        runner="box",
        shard=ShardRequest(2, 4, (times,)),
    )
    with pytest.raises(ShardError, match=str(times)):
        run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    assert kept.read_bytes() == shard.read_bytes()
    assert sorted(p.name for p in reports.iterdir()) == [shard.name]


def test_times_of_another_project_are_said_to_weigh_nothing(
    matrix, toolchain, compile_cache, tmp_path
):
    """None of its keys names a kernel here, so case sizes weighed the plan: the report says
    so, not "times of other.json"."""
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"elsewhere.kernel": 3.0, "elsewhere.kernel::n1": 1.0}))
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        tmp_path / "reports",
        compile_cache,
        select="scale_bias",
        shard=ShardRequest(1, 2, (other,)),
    )
    report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    assert report.shard is not None
    assert report.shard.weights == f"case sizes (times of {other} names none of these kernels)"
