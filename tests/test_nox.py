"""The noxfile: the sessions of harness/sessions.py, a test, sanitize, A/B and image build per
matrix target, each described; and this repository's own tests and lint."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

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
    assert "sm_90a (test-sm90), sm_90a-cuda13.5 (test-sm90-cuda13.5), sm_100a" in done.stderr


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


class _InstallingSession(_Session):
    """A session whose pip is a record of its calls; `fails`: pip exits non-zero."""

    def __init__(self, venv, fails=False):
        super().__init__()
        self.virtualenv = type("Env", (), {"location": str(venv)})()
        self.ran, self.fails = [], fails

    def run_install(self, *command):  # what nox runs under --install-only too
        self.ran.append(command)
        if self.fails:
            raise RuntimeError("Command python -m pip install ... failed with exit code 1")
        folder = Path(command[command.index("--target") + 1])
        (folder / "nvidia" / "cu13" / "bin").mkdir(parents=True)
        (folder / "nvidia" / "cu13" / "bin" / "nvcc").touch()


def test_each_toolkit_is_installed_in_its_own_folder_once(tmp_path, matrix):
    """Two releases of one wheel cannot share a venv: each toolkit's pins go, exactly, to
    <venv>/cuda-toolkits/<version>, where the harness looks; pinned again only when changed."""
    session = _InstallingSession(tmp_path)
    for toolkit in sessions.Project(ROOT, matrix, (), ()).toolkits():
        sessions._install_toolkit(session, toolkit)
        sessions._install_toolkit(session, toolkit)  # the second time: nothing
    assert [c[c.index("--target") + 1] for c in session.ran] == [
        str(tmp_path / "cuda-toolkits" / "13.0"),
        str(tmp_path / "cuda-toolkits" / "13.5"),
    ]
    assert all("--no-deps" in command for command in session.ran)
    assert session.ran[1][-len(matrix.targets["sm_90a-cuda13.5"].toolkit.wheels) :] == (
        matrix.targets["sm_90a-cuda13.5"].toolkit.wheels
    )
    moved = dataclasses.replace(
        matrix.targets["sm_90a"].toolkit, wheels=("nvidia-cuda-nvcc==13.0.48",)
    )
    sessions._install_toolkit(session, moved)  # another pin set: the folder is made again
    assert len(session.ran) == 3 and session.ran[-1][-1] == "nvidia-cuda-nvcc==13.0.48"
    lost = tmp_path / "cuda-toolkits" / "13.5" / "nvidia" / "cu13" / "bin" / "nvcc"
    lost.unlink()  # the pins' stamp is there, the nvcc is not: installed again
    sessions._install_toolkit(session, matrix.targets["sm_90a-cuda13.5"].toolkit)
    assert len(session.ran) == 4 and lost.exists()


def test_wheels_pip_cannot_install_stop_the_session_naming_the_toolkit(tmp_path, matrix):
    unreleased = dataclasses.replace(
        matrix.targets["sm_90a"].toolkit, version="13.9", wheels=("nvidia-cuda-nvcc==13.9.1",)
    )
    with pytest.raises(_Stopped, match=r"^toolkit 13.9: pip could not install matrix.yaml's "):
        sessions._install_toolkit(_InstallingSession(tmp_path, fails=True), unreleased)
    assert not (tmp_path / "cuda-toolkits" / "13.9" / ".pinned").exists()


def test_an_ab_session_installs_every_toolkit_of_its_target_for_the_upgrade_report(matrix):
    project = sessions.Project(ROOT, matrix, (), ())
    newer = matrix.targets["sm_90a-cuda13.5"]
    assert [t.version for t in project.toolkits(newer)] == ["13.5"]
    assert [t.version for t in project.toolkits(newer, its_others=True)] == ["13.5", "13.0"]
    assert [t.version for t in project.toolkits()] == ["13.0", "13.5"]
