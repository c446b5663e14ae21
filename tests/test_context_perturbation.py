"""scripts/context_perturbation.py's reading of its samples and events, which needs no GPU; the
measurement itself is the H200's (docs/performance.md)."""

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "perturbation", ROOT / "scripts" / "context_perturbation.py"
)
perturbation = importlib.util.module_from_spec(_spec)
sys.modules["perturbation"] = perturbation  # its dataclasses look their module up there
_spec.loader.exec_module(perturbation)

MS = 1_000_000


def _rows(late_at: dict[int, int], slow_at: dict[int, float]) -> list[list]:
    """A sample every 3 ms for 3 s, alternately spin (2000 us) and memset (900 us), the GPU's
    clock 5 s ahead of the host's; sample i started late_at[i] ns late and took slow_at[i] times
    its kernel's time."""
    rows = []
    for i in range(1000):
        released = 10_000 * MS + i * 3 * MS
        name, us = ("spin", 2000.0) if i % 2 == 0 else ("memset", 900.0)
        us *= slow_at.get(i, 1.0)
        start = released + 5_000 * MS + 7_000 + late_at.get(i, 0)
        rows.append([name, released, start, start + int(us * 1000), us, 1980.0, None])
    return rows


def test_a_sample_is_late_by_what_it_waited_beyond_the_quickest_of_its_window():
    samples = perturbation.samples_of(_rows({500: 300_000}, {}))
    assert samples[500].queued_us == 300.0
    assert {s.queued_us for s in samples[:500] + samples[501:]} == {0.0}
    assert samples[500].started_ns == samples[500].released_ns + 300_000  # on the host's clock


def test_what_falls_beside_each_thing_is_counted_and_what_falls_apart_is_not():
    late, slow = {i: 400_000 for i in range(100, 110)}, {601: 1.2, 603: 1.02, 900: 1.5}
    samples = perturbation.samples_of(_rows(late, slow))
    t = samples[0].released_ns
    events = [
        {"type": "create", "window": (t + 300 * MS, t + 330 * MS)},  # samples 100-109
        {"type": "teardown", "window": (t + 1800 * MS, t + 1812 * MS)},  # 600-604
        {"type": "idle", "window": (t + 2400 * MS, t + 2430 * MS)},
    ]
    create, teardown, idle = perturbation.beside_each(samples, events)
    assert create.kind == "create" and create.times == 1 and create.window_ms == 30.0
    assert create.late == (10, 10) and create.most_queued_us == 400.0
    assert create.slow == 0
    assert teardown.late == (0, 0) and teardown.slow == 1  # 603's 2 % is within 3 %
    assert round(teardown.slowest_pct, 6) == 20.0
    assert idle.late == (0, 0) and idle.slow == 0  # sample 900 is far from every window
    assert "| create | 1 | 30.0 ms |" in perturbation.table([create, teardown, idle])
