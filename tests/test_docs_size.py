"""docs/ stays small: the latest reports are kept there, older ones in git history and every CI
run's as its artifacts (docs/reports/h200/README.md); the tests read tests/fixtures/h200."""

from __future__ import annotations

from tests.conftest import ROOT

DOCS_MOST_BYTES = 5 * 2**20


def test_docs_hold_at_most_5_mib():
    sizes = {
        path.relative_to(ROOT).as_posix(): path.stat().st_size
        for path in (ROOT / "docs").rglob("*")
        if path.is_file()
    }
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert sum(sizes.values()) <= DOCS_MOST_BYTES, (
        f"docs/ holds {sum(sizes.values()) / 2**20:.1f} MiB, more than 5 MiB; the largest: "
        + ", ".join(f"{name} ({sizes[name] >> 10} KiB)" for name in largest)
    )
