"""The noxfile: one test and one sanitize session per matrix target, each described."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

KINDS = ("test", "sanitize", "ab")


def test_sessions_follow_the_matrix(matrix):
    per_target = [f"{kind}-{t.session}" for t in matrix.targets.values() for kind in KINDS]
    expected = [*per_target, "compile", "check", "tests", "lint"]
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
    for name in ("compile", "check", "tests", "lint"):
        assert sessions[name]["description"]


@pytest.fixture(scope="module")
def noxfile():
    """The noxfile as a module, loaded once: loading registers its sessions with nox."""
    import importlib.util

    loader = importlib.util.spec_from_file_location("matrix_noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


class _Session:
    def __init__(self):
        self.said = []

    def log(self, line):
        self.said.append(line)


def test_ab_in_a_container_gets_the_base_written_out_of_git_on_the_host(noxfile):
    session = _Session()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.strip()

    args = noxfile._base_tree_args(session, ["--base", "HEAD", "-k", "scale_bias"])

    assert args == [
        "-k",
        "scale_bias",
        "--base-tree",
        f"/src/.cache/ab/{head}",
        "--base-commit",
        head,
    ]
    written = ROOT / ".cache" / "ab" / head / "kernels" / "programming_model" / "scale_bias"
    assert (written / "spec.py").is_file()  # where the container's /src/.cache/ab/<sha> is


def test_ab_in_a_container_with_a_base_that_names_no_commit_says_so(noxfile):
    session = _Session()
    args = noxfile._base_tree_args(session, ["--base", "no-such-ref-anywhere"])
    assert args[args.index("--base-commit") + 1] == "no-such-ref-anywhere"
    assert "every kernel is judged NEW" in session.said[0]


@pytest.mark.parametrize("asked", [["-s", "test-sm89"], ["--session=sanitize-sm89,lint"]])
def test_a_session_of_no_target_lists_the_targets(asked):
    done = subprocess.run(
        [sys.executable, "-m", "nox", "-l", *asked], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode != 0
    assert "-sm89: no such target in matrix.yaml; its targets are sm_80 (test-sm80), " in (
        done.stderr
    )
    assert "sm_90a (test-sm90), sm_100a (test-sm100)" in done.stderr
