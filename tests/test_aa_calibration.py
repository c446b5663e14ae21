"""scripts/aa_calibration.py's summary: A/A comparisons by duration bucket, the false SLOWER rate
and the threshold a bucket would need; its GPU side (`run`) is exercised on the H200 only."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("aa", ROOT / "scripts" / "aa_calibration.py")
aa = importlib.util.module_from_spec(_spec)
sys.modules["aa"] = aa  # its dataclasses look their module up there
_spec.loader.exec_module(aa)


def _comparison(median_us, ratio, low, judgement="SAME", run=0):
    return aa.Comparison(
        run, "ch.k", "n1", median_us, ratio, low, ratio + 0.001, 1.0, judgement, 30
    )


def test_buckets_count_false_slower_and_the_threshold_that_would_hold_them_to_the_goal():
    quick = [_comparison(5.0, 1.0, 0.999 + i / 100_000) for i in range(1999)]
    quick.append(_comparison(8.0, 1.02, 1.015, "SLOWER"))
    long = [_comparison(300.0, 1.0, 0.998), _comparison(300.0, 0.97, 0.96, "FASTER")]
    found = aa.buckets(quick + long)
    assert [b.below_us for b in found] == [10.0, 1000.0]  # empty buckets are left out
    first, last = found
    assert (first.count, first.slower, first.false_slower) == (2000, 1, 0.0005)
    # the 99.9 % quantile of the lower ends: 1.0190, so 1.9 % holds identical code to 0.1 %
    assert first.needed_pct == pytest.approx(
        100 * (aa.quantile(sorted(c.low for c in quick), 0.999) - 1)
    )
    assert 1.85 < first.needed_pct < 1.95
    assert (last.count, last.faster, last.needed_pct) == (2, 1, 0.0)
    lines = aa.summary_lines(found, 2002, {"ab --all": 3, "in-process": 2})
    assert lines[0].startswith("2002 A/A comparisons from 3 `ab --all` runs and 2 in-process runs")
    assert "| 0-10 µs | 2000 | 1 (0.05 %) |" in lines[4]


def test_summarize_writes_the_table_the_plot_and_the_numbers(tmp_path):
    lines = [
        json.dumps(vars(_comparison(20.0, 1.0 + i / 10_000, 0.999, run=i % 2))) for i in range(50)
    ]
    # a line kept before comparisons said how they were made reads as `ab --all`'s
    lines[0] = json.dumps({k: v for k, v in json.loads(lines[0]).items() if k != "how"})
    (tmp_path / "aa-sm_90a.jsonl").write_text("\n".join(lines) + "\n")
    aa.summarize([tmp_path / "aa-sm_90a.jsonl"], [], tmp_path / "out")
    assert (
        "50 A/A comparisons from 2 `ab --all` runs"
        in (tmp_path / "out" / "aa-summary.md").read_text()
    )
    assert (tmp_path / "out" / "aa-ratios.svg").read_text().startswith("<svg")
    summary = json.loads((tmp_path / "out" / "aa-summary.json").read_text())
    (bucket,) = summary["buckets"]
    assert bucket["count"] == 50 and bucket["false_slower"] == 0.0 and summary["planted"] is None


def test_a_planted_slowdown_is_counted_found_at_the_default_and_at_the_needed_threshold(tmp_path):
    same = [_comparison(60.0, 1.0, 0.996 + i / 1_000_000) for i in range(1000)]
    same[-2:] = [_comparison(60.0, 1.012, 1.011)] * 2  # the A/A's worst: 1.1 % is needed there
    slower = [_comparison(57.0, 1.02, 1.015, "SLOWER") for _ in range(9)]
    slower.append(_comparison(57.0, 1.012, 1.009, "SLOWER"))  # found, not at 1.1 %
    found = aa.planted(slower, aa.buckets(same))
    assert (found.count, found.slower, found.slower_at_needed) == (10, 10, 9)
    assert found.needed_pct == pytest.approx(1.1) and found.lowest_low == 1.009
    assert found.base_median_us == (57.0, 57.0)
    (tmp_path / "aa.jsonl").write_text("".join(json.dumps(vars(c)) + "\n" for c in same))
    (tmp_path / "planted.jsonl").write_text("".join(json.dumps(vars(c)) + "\n" for c in slower))
    aa.summarize([tmp_path / "aa.jsonl"], [tmp_path / "planted.jsonl"], tmp_path / "out")
    text = (tmp_path / "out" / "aa-summary.md").read_text()
    assert "timed against its base 10 times: SLOWER 10 times at the default threshold" in text


def test_kept_comparisons_read_gzipped_and_are_judged_again_at_todays_thresholds(tmp_path):
    import gzip

    # 42.7 us, lower end 1.0051: SLOWER at the 0.5 % it was judged by, not at today's 1 %
    outlier = _comparison(42.7, 1.0157, 1.0051, "SLOWER")
    plain = _comparison(42.7, 1.0, 0.999)
    kept = tmp_path / "aa.jsonl.gz"
    kept.write_bytes(
        gzip.compress("".join(json.dumps(vars(c)) + "\n" for c in (outlier, plain)).encode())
    )
    (bucket,) = aa.buckets(aa.read([kept]))
    assert (bucket.below_us, bucket.count, bucket.slower, bucket.slower_now) == (50.0, 2, 1, 0)
    assert bucket.largest_low == 1.0051


def test_a_target_the_matrix_lacks_is_named_before_any_gpu_is_asked(tmp_path):
    with pytest.raises(
        SystemExit, match=r"aa: no target 'sm_99' in matrix.yaml \(sm_80, sm_80-cuda13.5, sm_90a"
    ):
        aa.main(["repeat", "sm_99", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())
