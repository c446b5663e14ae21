"""The noxfile: the sessions of harness/sessions.py, a test, sanitize, A/B and image build per
matrix target, each described; and this repository's own tests and lint."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness import sessions
from tests.conftest import ROOT

KINDS = ("test", "sanitize", "ab", "build")


def test_sessions_follow_the_matrix(matrix):
    per_target = [f"{kind}-{t.session}" for t in matrix.targets.values() for kind in KINDS]
    expected = [*per_target, "compile", "check", "report", "base-image", "gha-matrix"]
    expected += ["tests", "corpus", "e2e", "lint"]
    listed = subprocess.run(
        [sys.executable, "-m", "nox", "-l", "--json", "-s", *expected],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert listed.returncode == 0, listed.stderr  # nox fails on a session it does not know
    described = {s["session"]: s["description"] for s in json.loads(listed.stdout)}
    assert set(described) == set(expected)
    for target in matrix.targets.values():
        for kind in KINDS:
            assert target.name in described[f"{kind}-{target.session}"]
        for kind in ("test", "sanitize"):
            assert "in the image or on the host" in described[f"{kind}-{target.session}"]
    for name in ("compile", "check", "tests", "corpus", "e2e", "lint"):
        assert described[name]


class _Session:
    def __init__(self):
        self.said = []

    def log(self, line):
        self.said.append(line)

    def error(self, line):  # as nox's: the session stops, failed
        raise _Stopped(line)


class _Stopped(Exception):
    pass


def _head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.strip()


@pytest.mark.parametrize("base", [["--base", "HEAD"], ["--base=HEAD"]])
def test_ab_in_a_container_gets_the_base_written_out_of_git_on_the_host(base):
    session = _Session()
    head = _head()

    args = sessions.base_tree_args(session, ROOT, [*base, "-k", "scale_bias"])

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


def test_ab_in_a_container_with_a_base_that_names_no_commit_stops_unless_told_it_may():
    with pytest.raises(_Stopped, match="'no-such-ref-anywhere' is not a commit"):
        sessions.base_tree_args(_Session(), ROOT, ["--base=no-such-ref-anywhere"])
    session = _Session()
    asked = ["--base", "no-such-ref-anywhere", "--no-base-ok"]
    args = sessions.base_tree_args(session, ROOT, asked)
    assert args[args.index("--base-commit") + 1] == "no-such-ref-anywhere"
    assert "--no-base-ok" in args  # the container's harness is told so too
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


class _Installed:
    version = "0.1.0"

    def __init__(self, record):
        self.record = record

    def read_text(self, name):
        return self.record if name == "direct_url.json" else None


@pytest.mark.parametrize(
    ("record", "requirement"),
    [
        ('{"url": "https://github.com/o/cuda-matrix", "vcs_info": {"vcs": "git", '
         '"commit_id": "abc"}}', "cuda-matrix @ git+https://github.com/o/cuda-matrix@abc"),
        ('{"url": "file:///w/cuda_matrix-0.1.0-py3-none-any.whl"}',
         "cuda-matrix @ file:///w/cuda_matrix-0.1.0-py3-none-any.whl"),
        (None, "cuda-matrix==0.1.0"),  # from an index: its version
        ("{not json", "cuda-matrix==0.1.0"),  # a record pip did not write
    ],
)  # fmt: skip
def test_a_host_session_installs_cuda_matrix_from_where_it_was_installed(
    monkeypatch, record, requirement
):
    monkeypatch.setattr(sessions.metadata, "distribution", lambda name: _Installed(record))
    assert sessions.installed_requirement() == requirement
