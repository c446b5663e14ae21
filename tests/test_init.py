"""`init`: a new project that `check` passes at once, written without overwriting anything; the
README's example is the kernel it writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

STARTER = ROOT / "harness" / "starter"


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
    )


def test_init_writes_a_project_that_check_passes_at_once(tmp_path, matrix):
    project = tmp_path / "new"
    done = _harness("init", str(project), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (project / "matrix.yaml").read_bytes() == (ROOT / "matrix.yaml").read_bytes()
    assert (project / ".gitignore").read_text().splitlines()[1:] == [
        ".cache/",
        "/reports/",
        ".nox/",
    ]
    checked = subprocess.run(
        [sys.executable, "-m", "harness", "check"],
        capture_output=True,
        text=True,
        cwd=project,
        env={k: v for k, v in os.environ.items() if k != "NVCC"} | {"PYTHONPATH": str(ROOT)},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for target in matrix.targets:  # each toolkit's column, compiled by its own nvcc
        assert f"check-{target}.xml: 1 passed, 0 failed, 0 error, 2 skipped" in checked.stdout
    # each toolkit's nvcc, found once for its three columns
    assert checked.stdout.count("nvcc 13.5.37") == checked.stdout.count("nvcc 13.0.88") == 1


def test_init_overwrites_nothing_and_adds_only_missing_ignore_lines(tmp_path):
    project = tmp_path / "old"
    spec = project / "kernels" / "example" / "saxpy" / "spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text("# mine\n")
    (project / ".gitignore").write_text(".cache/\nbuild/")
    refused = _harness("init", str(project), cwd=tmp_path)
    assert refused.returncode == 2
    assert f"{spec} exists already: init never overwrites" in refused.stderr
    assert spec.read_text() == "# mine\n" and not (project / "matrix.yaml").exists()
    spec.unlink()
    assert _harness("init", str(project), cwd=tmp_path).returncode == 0
    lines = (project / ".gitignore").read_text().splitlines()
    assert lines[:2] == [".cache/", "build/"] and lines.count(".cache/") == 1
    assert "/reports/" in lines and ".nox/" in lines


def test_the_readme_shows_the_kernel_init_writes():
    readme = (ROOT / "README.md").read_text()
    spec = (STARTER / "kernels" / "example" / "saxpy" / "spec.py").read_text()
    shown = "\n".join(f"    {line}" if line else "" for line in spec.rstrip().splitlines())
    assert shown in readme


def test_init_into_a_file_is_refused_naming_it(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    refused = _harness("init", str(afile), cwd=tmp_path)
    assert refused.returncode == 2 and f"init {afile}: not a folder" in refused.stderr
    assert afile.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [afile]
