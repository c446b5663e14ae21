"""scripts/column_benchmark.py's pieces that need no GPU: the matrix it runs with (only
timing.lanes changed) and its table; the runs themselves are the H200's (docs/reports/h200)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness.model.codec import report_from_json
from harness.model.matrix import load_matrix
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("column", ROOT / "scripts" / "column_benchmark.py")
column = importlib.util.module_from_spec(_spec)
sys.modules["column"] = column  # its dataclasses look their module up there
_spec.loader.exec_module(column)


def test_the_matrix_of_a_run_changes_timing_lanes_only(tmp_path):
    text = (ROOT / "matrix.yaml").read_text()
    for lanes in (1, 3):
        (tmp_path / "m.yaml").write_text(column.with_lanes(text, lanes))
        changed, original = load_matrix(tmp_path / "m.yaml"), load_matrix(ROOT / "matrix.yaml")
        assert changed.timer.lanes == lanes
        assert changed.targets == original.targets and changed.ab == original.ab
    without = "\n".join(line for line in text.splitlines() if not line.startswith("  lanes:"))
    (tmp_path / "m.yaml").write_text(column.with_lanes(without + "\n", 1))
    assert load_matrix(tmp_path / "m.yaml").timer.lanes == 1


def test_the_table_names_cold_and_warm_runs_and_each_settings_warm_median():
    runs = [
        column.ColumnRun(
            2, 0, 30.0, 28.0, {"passed": 151, "skipped": 4}, "time: wall 28.0 s", 24700, 4.26
        ),
        column.ColumnRun(1, 1, 27.0, 25.0, {"passed": 151}, "time: wall 25.0 s", 1, 0.1),
        column.ColumnRun(2, 1, 17.0, 15.0, {"passed": 151}, "time: wall 15.0 s", 1, 0.1),
        column.ColumnRun(2, 2, 19.0, 16.0, {"passed": 151}, "time: wall 16.0 s", 1, 0.1),
    ]
    lines = column.table(runs)
    assert lines[2] == (
        "| 2 | cold | 30.0 s | 28.0 s | 151 passed, 4 skipped | 24,700 | 4.26 s | wall 28.0 s |"
    )
    assert "lanes 2: warm nox wall median 18.0 s" in "\n".join(lines)
    assert "lanes 1: warm nox wall median 27.0 s" in "\n".join(lines)


def test_a_session_no_target_has_is_named_before_anything_runs(tmp_path):
    import pytest

    with pytest.raises(
        SystemExit, match=r"no target's session is 'sm99' \(sm100, sm100-cuda13.5, sm80,"
    ):
        column.main(["sm99", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())


def test_each_run_replaces_the_last_one_s_reports_as_the_readme_s_command_does(
    tmp_path, monkeypatch
):
    """A warm run orders its cases by the report it replaces: every run writes into one folder,
    and each run's reports are copied beside its matrix."""
    kept = ROOT / "tests" / "fixtures" / "h200"
    asked = []

    def nox(command, **_):
        reports = Path(command[command.index("--reports") + 1])
        asked.append((reports, (reports / "junit-sm_90a.json").exists()))
        reports.mkdir(parents=True, exist_ok=True)
        for name in ("junit-sm_90a.json", "junit-sm_90a.xml"):
            shutil.copyfile(kept / name, reports / name)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(column.subprocess, "run", nox)
    first = column.one_run("sm90", "sm_90a", 2, 0, tmp_path)
    column.one_run("sm90", "sm_90a", 3, 1, tmp_path)
    assert asked == [(tmp_path / "reports", False), (tmp_path / "reports", True)]
    assert (tmp_path / "3-1" / "junit-sm_90a.xml").read_bytes() == (
        kept / "junit-sm_90a.xml"
    ).read_bytes()
    assert first.outcomes["passed"] > 0
    timed = [
        c.timing
        for c in report_from_json(json.loads((kept / "junit-sm_90a.json").read_text()), kept).cells
        if c.timing
    ]
    assert first.samples == sum(len(t.samples_us) for t in timed) > 0
    assert first.timing_loops_s == round(sum(t.wall_s for t in timed), 3) > 0
