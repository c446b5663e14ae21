"""The noxfile: one test session per matrix target, each described."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_sessions_follow_the_matrix(matrix):
    expected = [f"test-{t.session}" for t in matrix.targets.values()] + ["compile", "tests", "lint"]
    listed = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "--json", "-s", *expected],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert listed.returncode == 0, listed.stderr  # nox fails on a session it does not know
    sessions = {s["session"]: s for s in json.loads(listed.stdout)}
    assert set(sessions) == set(expected)
    for target in matrix.targets.values():
        described = sessions[f"test-{target.session}"]["description"]
        assert target.name in described
    for name in ("compile", "tests", "lint"):
        assert sessions[name]["description"]
