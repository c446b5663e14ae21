"""The bad inputs and build faults a user meets, as one table: what was tried, what the run says.

Each row makes one fault in a private copy of the planted kernels or of matrix.yaml, runs the
harness as a user would (no GPU needed), and checks the outcome and that the message names the
file, line or kernel. The other cells of the run must still report.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PLANTED, ROOT

SPEC = "planted/add_one/spec.py"
SOURCE = "planted/add_one/add_one.cu"


def _fake_nvcc(folder: Path, version: str, body: str) -> Path:
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "release x, V{version}"; exit 0; fi\n' + body
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# (fault, how to make it in `work` (a folder with kernels/ and matrix.yaml; it may return
#  environment variables for the run), expected exit status, fragments the output must hold)
TABLE = [
    (
        "matrix.yaml is not YAML",
        lambda work: (work / "matrix.yaml").write_text("targets:\n  sm_80: [unclosed\n"),
        2,
        ["matrix.yaml:2: not valid YAML"],
    ),
    (
        "matrix.yaml has an unknown key",
        lambda work: _edit(
            work / "matrix.yaml", "    sass: sm_90a", "    sass: sm_90a\n    gpu: h200"
        ),
        2,
        ["matrix.yaml:", "unknown key 'gpu'"],
    ),
    (
        "matrix.yaml names a bad arch",
        lambda work: _edit(work / "matrix.yaml", "sass: sm_90a", "sass: hopper"),
        2,
        ["'hopper' is not an arch like sm_80 or sm_90a"],
    ),
    (
        "a spec raises while importing",
        lambda work: (work / "kernels" / SPEC).write_text("import numpy\nraise ValueError('x')\n"),
        1,
        ["ERROR    planted.add_one::spec[sm_90a]", "add_one/spec.py: import failed at line 2"],
    ),
    (
        "a spec defines no SPEC",
        lambda work: (work / "kernels" / SPEC).write_text("CASES = ()\n"),
        1,
        ["add_one/spec.py: defines no SPEC = KernelSpec(...)"],
    ),
    (
        "a spec names a missing .cu",
        lambda work: (work / "kernels" / SOURCE).unlink(),
        1,
        ["add_one/spec.py: source 'add_one.cu' is not a file beside it"],
    ),
    (
        "a .cu does not compile",
        lambda work: (work / "kernels" / SOURCE).write_text('extern "C" __global__ void f( {\n'),
        1,
        ["FAILED   planted.add_one::compile[sm_90a]", "nvcc failed for", "add_one.cu"],
    ),
    (
        "NVCC names a file that is not there",
        lambda work: {"NVCC": str(work / "nowhere" / "nvcc")},
        1,
        ["$NVCC is", "nowhere/nvcc, which is not an executable file", "FAILED   planted.add_one"],
    ),
    (
        "nvcc is of another toolkit than the target pins",
        lambda work: {"NVCC": str(_fake_nvcc(work, "12.8.93", "exit 1\n"))},
        1,
        ["sm_90a pins CUDA 13.0, but", "is 12.8.93"],
    ),
    (
        "nvcc crashes",
        lambda work: {
            "NVCC": str(_fake_nvcc(work, "13.0.88", "echo 'Segmentation fault' >&2; exit 139\n"))
        },
        1,
        ["FAILED   planted.add_one::compile[sm_90a]", "Segmentation fault"],
    ),
]


@pytest.mark.parametrize(("fault", "make", "status", "expected"), TABLE, ids=[r[0] for r in TABLE])
def test_each_bad_input_is_reported_where_it_is(fault, make, status, expected, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(PLANTED, work / "kernels")
    shutil.copy(ROOT / "matrix.yaml", work / "matrix.yaml")
    for kept in ("spec_raises", "compile_error", "wrong_answer", "bad_reference_shape"):
        shutil.rmtree(work / "kernels" / "planted" / kept)  # only this row's fault is in play
    environment = {k: v for k, v in os.environ.items() if k != "NVCC"}
    made = make(work)
    if isinstance(made, dict):  # a row may name an nvcc; it never leaks out of its run
        environment.update(made)
    environment["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "test",
            "sm_90a",
            "--matrix",
            str(work / "matrix.yaml"),
            "--kernels",
            str(work / "kernels"),
            "--reports",
            str(work / "reports"),
            "--cache",
            str(work / "cache"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
    )
    output = run.stdout + run.stderr
    assert run.returncode == status, output
    for fragment in expected:
        assert fragment in output, f"{fault}: {fragment!r} missing from:\n{output}"
    if status == 1:  # the run went on: the other kernels still have their cells
        assert "planted.needs_sm90::compile[sm_90a]" in output
