"""The package: a wheel built from the repository installs into a fresh virtualenv, its
`cuda-matrix` command runs a project that has only its own matrix.yaml and kernels/, and that
project's noxfile gets the matrix's sessions from the package in a few lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import images
from harness.compile.toolchain import TOOLKITS_FOLDER
from harness.model.matrix import load_matrix
from tests.conftest import ROOT, needs_docker

CONSUMER = ROOT / "tests" / "fixtures" / "consumer"
# Each test installs the wheel into a fresh virtualenv, its dependencies from the package index:
# end to end, as a user's `pip install` is (`nox -s e2e`)
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel built from this checkout (and nox, its extra)."""
    where = tmp_path_factory.mktemp("package")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(where), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = where.glob("cuda_matrix-*.whl")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[nox]"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return venv


def _in(venv: Path, project: Path, toolchain, *command: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        # the pinned toolkits, installed once for the suite (nox -s tests)
        "CUDA_MATRIX_TOOLKITS": str(Path(sys.prefix) / TOOLKITS_FOLDER),
        "CUDA_VISIBLE_DEVICES": "",
    }
    environment.pop("PYTHONPATH", None)  # the venv's own harness, never this checkout's
    environment.pop("VIRTUAL_ENV", None)
    return subprocess.run(command, capture_output=True, text=True, cwd=project, env=environment)


def test_a_project_with_its_own_matrix_and_kernels_runs_the_installed_command(
    installed, toolchain, tmp_path
):
    project = tmp_path / "project"
    shutil.copytree(CONSUMER, project)
    where = _in(
        installed, project, toolchain, "python", "-c", "import harness; print(harness.__file__)"
    )
    assert str(installed) in where.stdout, where.stdout + where.stderr
    done = _in(installed, project, toolchain, "cuda-matrix", "test", "sm_90a")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((project / "reports" / "junit-sm_90a.json").read_text())
    outcomes = {(c["kernel"], c["case"]): c["outcome"] for c in report["cells"]}
    assert outcomes == {
        ("scale", "compile"): "passed",
        ("scale", "n1000000"): "skipped",
        ("scale", "n1"): "skipped",
    }
    assert report["sources"] == {"demo.scale": "kernels/demo/scale/scale.cu"}
    assert (project / "reports" / "junit-sm_90a.xml").is_file()
    merged = _in(installed, project, toolchain, "cuda-matrix", "report")
    assert merged.returncode == 1  # sm_80 has no report: NOT OK, and said first
    assert merged.stdout.startswith("# CUDA matrix: NOT OK: 1 target(s) missing")
    assert (project / "reports" / "dashboard.html").is_file()


def test_a_project_s_noxfile_gets_the_sessions_from_the_package(installed, toolchain, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(CONSUMER, project)
    every = [
        "test-sm80", "test-sm90", "ab-sm80", "ab-sm90", "sanitize-sm80", "sanitize-sm90",
        "build-sm80", "build-sm90", "compile", "check", "report", "base-image", "gha-matrix",
    ]  # fmt: skip
    listed = _in(installed, project, toolchain, "nox", "-l", "--json", "-s", *every)
    assert listed.returncode == 0, listed.stderr  # nox fails on a session it does not know
    assert {s["session"] for s in json.loads(listed.stdout)} == set(every)
    default = _in(installed, project, toolchain, "nox", "-l", "--json")
    # a bare `nox` runs neither the A/B (it needs -- --base), nor docker's builds, nor the
    # workflow's planner
    assert {s["session"] for s in json.loads(default.stdout)} == set(every) - {
        "ab-sm80", "ab-sm90", "build-sm80", "build-sm90", "base-image", "gha-matrix",
    }  # fmt: skip
    # as the reusable workflow runs it where a project has no images (containers: false)
    ran = _in(
        installed, project, toolchain, "nox", "--no-venv", "-s", "test-sm90", "--",
        "--backend", "host", "--kernels", "kernels",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (project / "reports" / "junit-sm_90a.xml").is_file()
    planned = _in(installed, project, toolchain, "nox", "-s", "gha-matrix")
    jobs = json.loads(planned.stdout)["include"]
    assert [(job["target"], job["report"]) for job in jobs] == [
        ("sm_80", "junit-sm_80"),
        ("sm_90a", "junit-sm_90a"),
    ]


def test_a_folder_with_no_matrix_is_told_what_a_project_needs(installed, toolchain, tmp_path):
    done = _in(installed, tmp_path, toolchain, "cuda-matrix", "test", "sm_90a")
    assert done.returncode == 2
    assert (
        f"{tmp_path.resolve() / 'matrix.yaml'}: no such file: a project of cuda-matrix has a"
        in (done.stderr)
    )
    assert not (tmp_path / "reports").exists()  # nothing written where nothing could run


def test_a_host_session_installs_the_cuda_matrix_that_nox_runs(installed, toolchain, tmp_path):
    """Not a package of that name from an index: the wheel it was installed from."""
    said = _in(
        installed, tmp_path, toolchain, "python", "-c",
        "from harness.sessions import installed_requirement; print(installed_requirement())",
    )  # fmt: skip
    requirement = said.stdout.strip()
    assert requirement.startswith("cuda-matrix @ file://"), said.stdout + said.stderr
    assert requirement.endswith(".whl")


def test_init_from_the_wheel_writes_a_project_its_check_passes(installed, toolchain, tmp_path):
    done = _in(installed, tmp_path, toolchain, "cuda-matrix", "init", "new")
    assert done.returncode == 0, done.stdout + done.stderr
    project = tmp_path / "new"
    assert (project / "matrix.yaml").read_bytes() == (ROOT / "matrix.yaml").read_bytes()
    checked = _in(installed, project, toolchain, "cuda-matrix", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "check-sm_90a.xml: 1 passed, 0 failed, 0 error, 2 skipped" in checked.stdout


def test_the_wheel_carries_the_images_build_files(installed):
    (package,) = installed.glob("lib/python*/site-packages/harness")
    for relative in images.CONTEXT_FILES:
        assert (package / "image" / relative).read_bytes() == (ROOT / relative).read_bytes()


@needs_docker
def test_a_project_s_test_session_runs_in_the_image_with_the_installed_harness(
    installed, toolchain, tmp_path
):
    """`nox -s test-sm90` with an engine: the image built from the wheel's own build files (the
    same tag as this repository's), the project and the installed harness mounted, and the same
    cells as on the host."""
    project = tmp_path / "project"
    shutil.copytree(CONSUMER, project)
    ran = _in(
        installed, project, toolchain, "nox", "--no-venv", "-s", "test-sm90", "--",
        "--backend", "docker",
    )  # fmt: skip
    said = ran.stdout + ran.stderr
    assert ran.returncode == 0, said[-3000:]
    matrix = load_matrix(project / "matrix.yaml")
    assert f"running in {images.image_for(matrix.targets['sm_90a'], ROOT).tag}" in said, said
    report = json.loads((project / "reports" / "junit-sm_90a.json").read_text())
    outcomes = {(c["kernel"], c["case"]): (c["outcome"], c["skip_reason"]) for c in report["cells"]}
    assert outcomes == {
        ("scale", "compile"): ("passed", None),
        ("scale", "n1000000"): ("skipped", "no-device"),
        ("scale", "n1"): ("skipped", "no-device"),
    }
    assert report["sources"] == {"demo.scale": "kernels/demo/scale/scale.cu"}
