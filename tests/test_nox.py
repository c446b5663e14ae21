"""The noxfile: one test and one sanitize session per matrix target, each described."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

KINDS = ("test", "sanitize")


def test_sessions_follow_the_matrix(matrix):
    per_target = [f"{kind}-{t.session}" for t in matrix.targets.values() for kind in KINDS]
    expected = [*per_target, "compile", "tests", "lint"]
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
        for kind in KINDS:
            assert target.name in sessions[f"{kind}-{target.session}"]["description"]
        assert (
            "in the image or on the host" in sessions[f"sanitize-{target.session}"]["description"]
        )
    for name in ("compile", "tests", "lint"):
        assert sessions[name]["description"]
