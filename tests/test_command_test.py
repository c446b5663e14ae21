"""One target end to end without a GPU: every cell reported once, with the right outcome."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from harness.compile.toolchain import find_toolchain
from harness.model.discovery import kernel_folders, load_kernel
from harness.model.errors import Unavailable
from harness.model.matrix import ComputeCapability, load_matrix
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import compile_target, run_target
from harness.run.device import DeviceInfo
from tests.conftest import CORPUS, ROOT, whole_corpus


def _options(target, kernels_root, tmp_path, cache):
    return RunOptions(
        target=target,
        kernels_roots=(kernels_root,),
        reports_dir=tmp_path / "reports",
        cache_dir=cache,
        runner="test",
    )


@pytest.mark.corpus
@pytest.mark.parametrize("target_name", list(load_matrix(ROOT / "matrix.yaml").targets))
def test_chapter_kernels_compile_for_every_target_and_toolkit(
    matrix, compile_cache, tmp_path, target_name
):
    """Every column: each target with each of its toolkits, compiled by that toolkit's nvcc."""
    target = matrix.targets[target_name]
    toolchain = find_toolchain(toolkit=target.toolkit)
    assert toolchain.release == target.toolkit.version
    no_gpu = Unavailable("test")
    options = _options(target, ROOT / "kernels", tmp_path, compile_cache)
    with whole_corpus(compile_cache, target_name):
        result = run_target(matrix, options, toolchain, no_gpu)
    assert result.ok
    kernels = {k.classname: k for k in map(load_kernel, kernel_folders(ROOT / "kernels"))}
    for cell in result.cells:
        if not target.expresses(kernels[cell.classname].spec.requires):
            assert cell.skip_reason is SkipReason.TARGET_UNSUPPORTED, cell
        elif cell.case == "compile":
            assert cell.kind is CellKind.COMPILE
            assert cell.outcome is Outcome.PASSED, cell.message
            if cell.classname in CORPUS:  # the book's kernels do not spill
                assert cell.compile.worst("spill_bytes") == 0, cell.classname
            for opcode in kernels[cell.classname].spec.sass_must_contain:
                assert cell.compile.sass_counts[opcode] > 0
        else:
            assert cell.kind is CellKind.CASE
            assert cell.skip_reason is SkipReason.NO_DEVICE, cell
            assert cell.provenance.device is None
    assert {c.classname for c in result.cells} == set(kernels)  # every kernel has its cells
    again = run_target(matrix, options, toolchain, no_gpu)
    assert again.compiled == 0 and again.cached == result.compiled + result.cached
    assert [c.name for c in again.cells] == [c.name for c in result.cells]


def test_each_planted_fault_marks_only_its_own_cells(
    matrix, toolchain, planted, compile_cache, tmp_path
):
    target = matrix.targets["sm_80"]
    options = _options(target, planted, tmp_path, compile_cache)
    result = run_target(matrix, options, toolchain, Unavailable("test"))
    outcome = {(c.classname.split(".")[1], c.name): c for c in result.cells}
    assert outcome["spec_raises", "spec[sm_80]"].outcome is Outcome.ERROR
    assert "spec_raises/spec.py" in outcome["spec_raises", "spec[sm_80]"].message
    compile_cell = outcome["compile_error", "compile[sm_80]"]
    assert compile_cell.outcome is Outcome.FAILED
    assert "compile_error.cu" in compile_cell.message and "undeclared_value" in compile_cell.message
    assert outcome["compile_error", "n32[sm_80]"].outcome is Outcome.FAILED
    assert outcome["needs_sm90", "compile[sm_80]"].skip_reason is SkipReason.TARGET_UNSUPPORTED
    assert outcome["needs_sm90", "blocks8[sm_80]"].skip_reason is SkipReason.TARGET_UNSUPPORTED
    assert outcome["add_one", "compile[sm_80]"].outcome is Outcome.PASSED
    assert outcome["add_one", "n1000[sm_80]"].skip_reason is SkipReason.NO_DEVICE
    # 7 good kernels x (compile + cases) + 1 broken spec: none lost, none doubled
    assert len(result.cells) == len(outcome) == 23
    assert not result.ok


def test_a_build_without_the_opcode_its_spec_demands_fails_compile(
    matrix, toolchain, planted, compile_cache, tmp_path
):
    spec = planted / "planted" / "add_one" / "spec.py"
    demand = '    work=lambda case: Work(bytes=8 * case.params["n"]),\n'
    text = spec.read_text()
    assert demand in text
    spec.write_text(text.replace(demand, demand + '    sass_must_contain=("HGMMA",),\n'))
    target = matrix.targets["sm_90a"]
    result = run_target(
        matrix, _options(target, planted, tmp_path, compile_cache), toolchain, Unavailable("test")
    )
    (cell,) = [c for c in result.cells if c.classname == "planted.add_one" and "compile" in c.name]
    assert cell.outcome is Outcome.FAILED and cell.compile.sass_counts == {"HGMMA": 0}
    assert "the sm_90a SASS has no HGMMA" in cell.message


def test_a_device_that_cannot_run_the_target_skips_it(
    matrix, toolchain, planted, compile_cache, tmp_path
):
    h200 = DeviceInfo(0, "NVIDIA H200", ComputeCapability(9, 0), "580", "13.0", 132, 1, 1, None)
    target = matrix.targets["sm_100a"]
    options = _options(target, planted, tmp_path, compile_cache)
    result = run_target(matrix, options, toolchain, [h200])
    add_one = [c for c in result.cells if c.classname == "planted.add_one"]
    assert [c.outcome for c in add_one] == [Outcome.PASSED, Outcome.SKIPPED, Outcome.SKIPPED]
    assert add_one[1].skip_reason is SkipReason.DEVICE_UNSUPPORTED
    assert "CC 10.0 exactly" in add_one[1].message and "NVIDIA H200 is CC 9.0" in add_one[1].message
    assert "compiled and inspected, never run here" in add_one[1].message


def test_reports_are_written_with_every_cell(matrix, toolchain, planted, compile_cache, tmp_path):
    target = matrix.targets["sm_90a"]
    result = run_target(
        matrix, _options(target, planted, tmp_path, compile_cache), toolchain, Unavailable("test")
    )
    assert result.files.xml.name == "junit-sm_90a.xml"
    sidecar = json.loads(result.files.json.read_text())
    assert len(sidecar["cells"]) == len(result.cells)
    assert sidecar["target"] == "sm_90a" and sidecar["no_device_why"] == "test"
    counts = Counter(c["outcome"] for c in sidecar["cells"])
    assert counts == Counter(c.outcome.value for c in result.cells)


def test_compile_only_writes_compile_cells(matrix, toolchain, planted, compile_cache, tmp_path):
    target = matrix.targets["sm_90a"]
    options = _options(target, planted, tmp_path, compile_cache)
    result = compile_target(matrix, options, toolchain)
    assert result.files.xml.name == "compile-sm_90a.xml"
    assert {c.name for c in result.cells} == {"compile[sm_90a]", "spec[sm_90a]"}


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the harness, from any working directory
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_cli_second_run_compiles_nothing_and_says_so(planted, tmp_path):
    for kernel in (planted / "planted").iterdir():
        if kernel.name not in ("add_one", "needs_sm90"):
            kernel.rename(tmp_path / kernel.name)
    args = ("--kernels", str(planted), "--reports", str(tmp_path / "r"), "--cache")
    first = _cli("test", "sm90", *args, str(tmp_path / "c"), cwd=ROOT)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "compile: 2 compiled, 0 cached" in first.stdout
    second = _cli("test", "sm90", *args, str(tmp_path / "c"), cwd=ROOT)
    assert "compile: nothing to do, 2 binaries cached" in second.stdout
    assert (tmp_path / "r" / "junit-sm_90a.xml").is_file()


def test_cli_exit_codes_for_failures_and_bad_matrix(planted, tmp_path):
    failing = _cli("compile", "--kernels", str(planted), "--reports", str(tmp_path), cwd=ROOT)
    assert failing.returncode == 1
    bad = tmp_path / "matrix.yaml"
    bad.write_text("targets: {}\n")
    broken = _cli("compile", "--matrix", str(bad), cwd=ROOT)
    assert broken.returncode == 2
    assert f"{bad}:1: matrix: missing devices, sanitize, timing, toolkits" in broken.stderr


def test_a_selected_run_keeps_the_full_report(matrix, toolchain, planted, compile_cache, tmp_path):
    target = matrix.targets["sm_90a"]
    full = run_target(
        matrix, _options(target, planted, tmp_path, compile_cache), toolchain, Unavailable("test")
    )
    kept = full.files.xml.read_text()
    options = RunOptions(target, (planted,), tmp_path / "reports", compile_cache, select="add")
    partial = run_target(matrix, options, toolchain, Unavailable("test"))
    assert partial.files.xml.name == "partial-junit-sm_90a.xml"
    assert {c.classname for c in partial.cells} == {"planted.add_one"}
    assert full.files.xml.read_text() == kept


def test_kernel_trees_may_be_named_relative_to_the_working_directory(planted, tmp_path):
    relative = planted.relative_to(tmp_path)
    compiled = _cli(
        "compile",
        "sm_90a",
        "-k",
        "add_one",
        "--kernels",
        str(relative),
        "--reports",
        "r",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        cwd=tmp_path,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert "PASSED   planted.add_one::compile[sm_90a]" in compiled.stdout


@pytest.mark.corpus
def test_a_toolkit_installed_at_a_path_builds_as_its_wheels_do(matrix, tmp_path):
    """`path:` in place of `wheels` (a runner's /usr/local/cuda-12.9, an image's toolkit) is the
    same code: here the 13.5 wheels' folder, linked as /usr/local/cuda is to a release's, named
    as an installed toolkit, compiles a kernel with its bin/nvcc into the binary the wheels'
    column makes."""
    wheels = matrix.targets["sm_90a-cuda13.5"]
    installed = tmp_path / "cuda-13.5"
    installed.symlink_to(find_toolchain(toolkit=wheels.toolkit).nvcc.resolve().parent.parent)
    text = (ROOT / "matrix.yaml").read_text()
    start = text.index('  "13.5":\n')
    end = text.index("    base_image:", start)
    (tmp_path / "matrix.yaml").write_text(
        text[:start] + f'  "13.5":\n    path: {installed}\n' + text[end:]
    )
    at_path = load_matrix(tmp_path / "matrix.yaml").targets["sm_90a-cuda13.5"]
    assert at_path.toolkit.path is not None and not at_path.toolkit.wheels
    identities = []
    for target in (wheels, at_path):
        toolchain = find_toolchain(toolkit=target.toolkit)
        assert toolchain.release == "13.5"
        run = tmp_path / f"run-{len(identities)}"  # a cache of its own: nvcc runs for each
        options = dataclasses.replace(
            _options(target, ROOT / "kernels", run, run / "cache"), select="block_reduce"
        )
        result = compile_target(matrix, options, toolchain)
        (cell,) = [c for c in result.cells if c.kind is CellKind.COMPILE]
        assert cell.outcome is Outcome.PASSED and not cell.compile.cached, cell.message
        assert cell.detail.startswith(f"{toolchain.nvcc} "), cell.detail[:200]
        identities.append(cell.compile.code_identity)
    assert identities[0] == identities[1]


def test_a_command_that_forks_starts_the_fork_server_before_it_imports_the_pipeline(tmp_path):
    """The server's imports (~1 s on an H200 machine) overlap the command's own (~0.8 s): it
    is asked for before harness.pipeline is imported; a command that never forks never asks."""
    probe = (
        "import sys\n"
        "from harness import processes\n"
        "asked = []\n"
        "processes.fork_server = lambda: asked.append('harness.pipeline' in sys.modules)\n"
        "from harness.__main__ import main\n"
        "for words in (['check', 'no_such_target'], ['report', '--help']):\n"
        "    try:\n"
        "        main(words)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(asked)\n"
    )
    said = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert said.stdout.strip().splitlines()[-1] == "[False]", said.stdout + said.stderr
