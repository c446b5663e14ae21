"""scripts/stop_rule_replay.py: the timer's stopping rule replayed on a run's samples in their
order, and the spread of several runs' medians it is set against."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import statistics
import sys

import pytest

from harness.model.codec import report_json
from harness.model.matrix import load_matrix
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("replay", ROOT / "scripts" / "stop_rule_replay.py")
replay = importlib.util.module_from_spec(_spec)
sys.modules["replay"] = replay  # its dataclasses look their module up there
_spec.loader.exec_module(replay)

KEPT = ROOT / "tests" / "fixtures" / "h200" / "junit-sm_90a.json"


def _with_samples(report, samples_by_case):
    """`report` with the timed cells named in `samples_by_case` given those samples, and no
    other timed cell."""
    cells = []
    for cell in report.cells:
        if cell.timing is None or cell.case not in samples_by_case:
            cells.append(dataclasses.replace(cell, timing=None))
            continue
        samples = tuple(samples_by_case[cell.case])
        median = statistics.median(samples)
        timing = dataclasses.replace(cell.timing, samples_us=samples, median_us=median)
        cells.append(dataclasses.replace(cell, timing=timing))
    return dataclasses.replace(report, cells=cells)


def test_a_steady_median_stops_at_the_rules_least_count_and_a_split_one_runs_on(tmp_path):
    settings = load_matrix(ROOT / "matrix.yaml").timer
    report = replay.read_report(KEPT)
    timed = [c.case for c in report.cells if c.timing is not None][:2]
    steady = [10.0, 10.0, 10.0, 13.0] * 125  # noisy, but its median is 10 from the start
    split = [10.0, 12.0] * 250  # its median's interval spans both values at any count
    made = _with_samples(report, {timed[0]: steady, timed[1]: split})
    path = tmp_path / "junit-sm_90a.json.gz"
    path.write_bytes(gzip.compress(json.dumps(report_json(made)).encode()))
    found = {r.name[1]: r for r in replay.replay(replay.read_report(path), settings)}
    assert (found[timed[0]].kept, found[timed[0]].change_pct) == (settings.median_min_samples, 0)
    assert found[timed[1]].kept == 500
    assert replay.summary(list(found.values())) == [
        "below 20 us: 2 cells, 60.0% of their samples kept; the median moved 0.000 % (p50), "
        "0.000 % (p99), 0.000 % at most"  # (100 + 500) of 1000
    ]


def test_the_spread_is_each_runs_median_against_the_runs_median():
    report = replay.read_report(KEPT)
    case = next(c.case for c in report.cells if c.timing is not None)
    runs = [_with_samples(report, {case: [value] * 3}) for value in (100.0, 101.0, 99.0)]
    assert replay.spread(runs) == [
        "20 us and up: the runs' medians differ from their median by 1.000 % (p50), "
        "1.000 % (p90), 1.000 % (p99)"
    ]


def test_a_missing_or_broken_report_is_named_not_a_traceback(tmp_path):
    broken = tmp_path / "junit-sm_90a.json.gz"
    broken.write_bytes(b"not gzip")
    other = tmp_path / "other.json"
    other.write_text('{"schema_version": "0.1"}')
    for path, said in (
        (tmp_path / "gone.json", "not a readable report"),
        (broken, "not a readable report"),
        (other, ""),  # the codec's own message, which names the file
    ):
        with pytest.raises(SystemExit) as raised:
            replay.main([str(path)])
        assert f"stop_rule_replay: {path}" in str(raised.value) and said in str(raised.value)
