"""`sanitize` without a GPU: the log parser on real-shaped logs, the smallest case, the runs
through a stand-in compute-sanitizer, and the no-device report."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lxml import etree

from harness.compile.toolchain import Toolchain
from harness.model.cell import Cell, Provenance, SanitizerFindings
from harness.model.codec import cell_json
from harness.model.declared import Declared
from harness.model.errors import Unavailable
from harness.model.matrix import ComputeCapability
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.sanitizing import smallest_case
from harness.pipeline.stages import run_target, sanitize_target
from harness.processes import Finished
from harness.report.publish import PublishOptions, publish
from harness.run import sanitizer as compute_sanitizer
from harness.run.device import DeviceInfo
from harness.run.sanitizer import (
    SanitizerMissing,
    Summary,
    Tool,
    diagnose,
    find_compute_sanitizer,
    first_finding,
    read_case_cell,
    summary,
)
from harness.spec import Case, KernelSpec, Work
from tests.conftest import PLANTED, ROOT

SCHEMA = etree.XMLSchema(
    etree.parse(str(Path(__file__).parent / "schemas" / "junit-properties.xsd"))
)
H200 = DeviceInfo(0, "NVIDIA H200", ComputeCapability(9, 0), "580", "13.0", 132, 1, 1, None)

# Logs as compute-sanitizer 2025.x writes them with --log-file, trimmed to a few findings.
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write+0x90 in oob_write.cu:5
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a40000200 is out of bounds
=========     and is 1073737728 bytes after the nearest allocation at 0x7f3a00000200 of \
size 4096 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at oob_write+0x90 in oob_write.cu:5
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f3a40000204 is out of bounds
=========
========= ERROR SUMMARY: 1024 errors
========= ERROR SUMMARY: 1014 errors were not printed. Use --print-limit option to adjust the \
number of printed errors
"""
RACECHECK_RACE = """\
========= COMPUTE-SANITIZER
========= Warning: Race reported between Read access at reduce(float const *, float *)+0x1c0 \
in reduce.cu:14
=========     and Write access at reduce(float const *, float *)+0x210 in reduce.cu:16 [12 hazards]
=========
========= Error: Race reported between Write access at reduce(float const *, float *)+0x130 \
in reduce.cu:9
=========     and Read access at reduce(float const *, float *)+0x1c0 in reduce.cu:14 [34 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
RACECHECK_WARNINGS = """\
========= COMPUTE-SANITIZER
========= Warning: Race reported between Read access at k+0x1c0 in k.cu:14
=========     and Write access at k+0x210 in k.cu:16 [2 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
"""
RACECHECK_CLEAN = (
    "========= COMPUTE-SANITIZER\n"
    "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
)
SYNCCHECK_BARRIER = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at broken_sync(float *, unsigned long)+0xb0 in kernel.cu:12
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
INITCHECK_READ = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at vector_add(float const *, float const *, float *, unsigned long)+0x130 in \
kernel.cu:8
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 257 errors
========= ERROR SUMMARY: 247 errors were not printed. Use --print-limit option to adjust the \
number of printed errors
"""
# What it wrote on a machine with no GPU: the case process never reached CUDA.
NEVER_STARTED = """\
========= COMPUTE-SANITIZER
========= Error: Target application terminated before first instrumented API call
========= Error: couldn't find exit code.
"""


@pytest.mark.parametrize(
    ("tool", "log", "expected", "headline"),
    [
        (Tool.MEMCHECK, CLEAN, Summary(0), None),
        (Tool.MEMCHECK, MEMCHECK_OOB, Summary(1024), "Invalid __global__ write of size 4 bytes"),
        (
            Tool.RACECHECK,
            RACECHECK_RACE,
            Summary(1, 1),
            "Error: Race reported between Write access at reduce(float const *, float *)+0x130 "
            "in reduce.cu:9",
        ),
        (Tool.RACECHECK, RACECHECK_CLEAN, Summary(0, 0), None),
        (Tool.SYNCCHECK, SYNCCHECK_BARRIER, Summary(1), "Barrier error detected. Divergent thread"),
        (Tool.INITCHECK, INITCHECK_READ, Summary(257), "Uninitialized __global__ memory read"),
        (Tool.MEMCHECK, NEVER_STARTED, None, "Error: Target application terminated before"),
        (Tool.RACECHECK, CLEAN, None, None),  # racecheck is judged by its own summary only
    ],
)
def test_the_log_gives_the_count_and_the_first_finding(tool, log, expected, headline):
    assert summary(tool, log) == expected
    found = first_finding(log)
    assert (found or "").startswith(headline or ""), found
    assert (found is None) is (headline is None)


def test_memcheck_pads_every_allocation_so_an_access_past_one_lands_in_none():
    """Each buffer is an allocation of exactly its size under the tool (no guard zones); the
    padding keeps the next allocation from starting where one ends."""
    program = ["python", "-m", "harness.run.sanitized_case"]
    log = Path("log")
    memcheck = compute_sanitizer.command(Path("cs"), Tool.MEMCHECK, log, program)
    at = memcheck.index("--padding")
    assert int(memcheck[at + 1]) == compute_sanitizer.PADDING_BYTES >= 256
    assert memcheck[-3:] == program and memcheck[:3] == ["cs", "--tool", "memcheck"]
    for tool in (Tool.RACECHECK, Tool.SYNCCHECK, Tool.INITCHECK):  # a memcheck option only
        assert "--padding" not in compute_sanitizer.command(Path("cs"), tool, log, program)


CASE_WHERE = Provenance(runner="case-process")


def _report(outcome="passed", message="", skip_reason=None) -> str:
    """The line a case process prints: its cell in the result model's JSON form."""
    cell = Cell(
        CellKind.CASE,
        "planted",
        "k",
        "n1",
        "sm_90a",
        CASE_WHERE,
        Outcome(outcome),
        SkipReason(skip_reason) if skip_reason else None,
        message,
        loaded_as="sass",
        seed=7,
    )
    return json.dumps(cell_json(cell)) + "\n"


@pytest.mark.parametrize(
    ("tool", "log", "finished", "outcome", "message"),
    [
        (
            Tool.MEMCHECK,
            MEMCHECK_OOB,
            Finished(86, _report("failed", "CUDA error: CUDA_ERROR_LAUNCH_FAILED"), ""),
            Outcome.FAILED,
            "memcheck: 1024 errors: Invalid __global__ write of size 4 bytes",
        ),
        # A wrong value is the test run's business: clean under the tool is a pass.
        (
            Tool.INITCHECK,
            CLEAN,
            Finished(0, _report("failed", "y: 3 of 3 elements differ"), ""),
            Outcome.PASSED,
            "",
        ),
        (Tool.RACECHECK, RACECHECK_WARNINGS, Finished(0, _report(), ""), Outcome.PASSED, ""),
        (
            Tool.RACECHECK,
            RACECHECK_RACE,
            Finished(86, _report(), ""),
            Outcome.FAILED,
            "racecheck: 1 error: Error: Race reported between Write access",
        ),
        (
            Tool.MEMCHECK,
            NEVER_STARTED,
            Finished(255, "", "no CUDA device: RuntimeError\n"),
            Outcome.ERROR,
            "memcheck could not judge the case: compute-sanitizer printed no ERROR SUMMARY line "
            "(exited with status 255): "
            "Error: Target application terminated before first instrumented API call",
        ),
        (
            Tool.SYNCCHECK,
            CLEAN,
            Finished(1, "", "Traceback ...\nImportError: no cuda\n"),
            Outcome.ERROR,
            "synccheck could not judge the case: the case process reported nothing: "
            "ImportError: no cuda",
        ),
        (
            Tool.SYNCCHECK,
            CLEAN,
            Finished(
                0,
                _report("skipped", "device-unsupported: 16-block clusters", "device-unsupported"),
                "",
            ),
            Outcome.SKIPPED,
            "device-unsupported: 16-block clusters",
        ),
        (
            Tool.MEMCHECK,
            CLEAN,
            Finished(0, _report("error", "planted.k spec setup() raised KeyError: 'n'"), ""),
            Outcome.ERROR,
            "the case broke: planted.k spec setup() raised KeyError: 'n'",
        ),
        (
            Tool.MEMCHECK,
            "",
            Finished(None, "", ""),
            Outcome.FAILED,
            "timeout: no verdict after 9 s",
        ),
        # What compute-sanitizer 2025.3 says of a flag it does not take: no log file at all.
        (
            Tool.RACECHECK,
            "",
            Finished(1, "", "the argument for option '--racecheck-report' is invalid\n"),
            Outcome.ERROR,
            "racecheck could not judge the case: compute-sanitizer printed no RACECHECK SUMMARY "
            "line (exited with status 1): the argument for option '--racecheck-report' is invalid",
        ),
    ],
)
def test_the_verdict_is_the_tools_and_the_case_outcome_a_property(
    tool, log, finished, outcome, message
):
    case = read_case_cell(finished.stdout, "sm_90a", CASE_WHERE)
    diagnosis = diagnose(tool, log, finished, 9, case)
    assert diagnosis.outcome is outcome
    assert diagnosis.message.startswith(message), diagnosis.message
    assert (message == "") is (diagnosis.message == "")
    assert diagnosis.findings.case_outcome is (case.outcome if case else None)
    assert diagnosis.findings.exit_status == finished.status
    if outcome is Outcome.SKIPPED:
        assert diagnosis.skip_reason is SkipReason.DEVICE_UNSUPPORTED


# What compute-sanitizer 2025 says of a kernel that launches kernels, under synccheck or initcheck
CANNOT_WATCH_CDP = """\
========= COMPUTE-SANITIZER
========= Warning: CUDA Dynamic Parallelism is not supported by the selected tool
=========\x20
========= ERROR SUMMARY: {errors} error{s}
"""


@pytest.mark.parametrize("tool", [Tool.SYNCCHECK, Tool.INITCHECK])
def test_a_tool_that_cannot_watch_the_kernel_skips_its_cell_and_fails_nothing(tool):
    log = CANNOT_WATCH_CDP.format(errors=1, s="")
    diagnosis = diagnose(tool, log, Finished(0, _report(), ""), 9, None)
    assert diagnosis.outcome is Outcome.SKIPPED
    assert diagnosis.skip_reason is SkipReason.TOOL_UNSUPPORTED
    assert diagnosis.message == (
        f"tool-unsupported: {tool.value} cannot watch this kernel: CUDA Dynamic Parallelism is "
        "not supported by the selected tool"
    )
    # an error of its own beside it is the kernel's, as ever
    more = CANNOT_WATCH_CDP.format(errors=2, s="s").replace(
        "=========\x20\n", "========= Barrier error detected. Divergent thread(s) in block\n"
    )
    assert diagnose(tool, more, Finished(0, _report(), ""), 9, None).outcome is Outcome.FAILED


def _spec(cases, work) -> Declared:
    """What a spec of `cases` and `work` declares, as the run reads it from the spec's child."""
    spec = KernelSpec("k.cu", cases=tuple(cases), setup=None, reference=None, work=work)
    return Declared.from_json(json.loads(json.dumps(Declared.of(spec).to_json())))


def test_the_smallest_case_is_the_least_work_and_unknown_work_goes_last():
    def work(case):
        return Work(bytes=case.params["n"] * 4, flops=case.params.get("flops", 0))

    derived = Case("derived", {})  # its n comes from setup(): work() raises here
    cases = [derived, Case("big", {"n": 1000}), Case("small", {"n": 10}), Case("tie", {"n": 10})]
    assert smallest_case(_spec(cases, work)).name == "small"
    flops = [Case("few_bytes_many_flops", {"n": 1, "flops": 100}), Case("n20", {"n": 20})]
    assert smallest_case(_spec(flops, work)).name == "n20"
    assert smallest_case(_spec([derived, Case("other", {})], work)).name == "derived"


def test_compute_sanitizer_is_found_where_the_toolkit_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(compute_sanitizer, "STANDARD", tmp_path / "usr-local-cuda")

    def tool(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    toolkit = tmp_path / "cuda"
    nvcc = Toolchain(tool(toolkit / "bin" / "nvcc"), "13.0.88", "test")
    home = {"CUDA_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "path")}
    with pytest.raises(SanitizerMissing) as missing:
        find_compute_sanitizer(nvcc, home)
    for place in ("cuda/bin/compute-sanitizer", "cuda/compute-sanitizer/compute-sanitizer"):
        assert place in str(missing.value)
    assert "home/compute-sanitizer/compute-sanitizer" in str(missing.value)
    assert "COMPUTE_SANITIZER=" in str(missing.value)
    on_path = tool(tmp_path / "path" / "compute-sanitizer")
    assert find_compute_sanitizer(nvcc, home) == on_path
    standard = tool(tmp_path / "usr-local-cuda" / "compute-sanitizer" / "compute-sanitizer")
    assert find_compute_sanitizer(nvcc, home) == standard
    in_home = tool(tmp_path / "home" / "compute-sanitizer" / "compute-sanitizer")
    assert find_compute_sanitizer(nvcc, home) == in_home
    in_toolkit = tool(toolkit / "compute-sanitizer" / "compute-sanitizer")
    assert find_compute_sanitizer(nvcc, home) == in_toolkit
    beside = tool(toolkit / "bin" / "compute-sanitizer")  # the pip wheel's layout
    assert find_compute_sanitizer(nvcc, home) == beside
    named = {**home, "COMPUTE_SANITIZER": str(on_path)}
    assert find_compute_sanitizer(nvcc, named) == on_path
    with pytest.raises(SanitizerMissing, match=r"\$COMPUTE_SANITIZER is /nowhere/cs, which is not"):
        find_compute_sanitizer(nvcc, {**home, "COMPUTE_SANITIZER": "/nowhere/cs"})


# A stand-in for compute-sanitizer: one behaviour per tool, and a record of how it was called.
FAKE = """\
#!{python}
import json, subprocess, sys
argv = sys.argv[1:]
tool, log = argv[argv.index("--tool") + 1], argv[argv.index("--log-file") + 1]
with open({calls!r}, "a") as calls:
    calls.write(json.dumps(argv) + "\\n")
case = {{"kind": "case", "chapter": "planted", "kernel": "add_one", "case": "n1",
        "message": "", "skip_reason": None, "loaded_as": "sass", "seed": 1}}
if tool == "memcheck":
    open(log, "w").write({oob!r})
    print(json.dumps({{**case, "outcome": "failed", "message": "CUDA error: launch failed"}}))
    sys.exit(86)
if tool == "racecheck":
    open(log, "w").write({race_clean!r})
    print(json.dumps({{**case, "outcome": "passed"}}))
    sys.exit(0)
if tool == "synccheck":
    sleeper = subprocess.Popen(["sleep", "60"])
    open({sleeper!r}, "w").write(str(sleeper.pid))
    sleeper.wait()
open(log, "w").write({never!r})
sys.exit(255)
"""


def _gone(pid: int, within_s: float = 5) -> bool:
    """Whether the process has ended (a zombie nobody reaped counts as ended)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def add_one_only(planted, tmp_path) -> Path:
    for kernel in (planted / "planted").iterdir():
        if kernel.name != "add_one":
            shutil.rmtree(kernel)
    return planted


def test_each_tool_run_becomes_its_cell(matrix, toolchain, add_one_only, compile_cache, tmp_path):
    calls, sleeper = tmp_path / "calls.jsonl", tmp_path / "sleeper.pid"
    fake = tmp_path / "fake-compute-sanitizer"
    fake.write_text(
        FAKE.format(
            python=sys.executable,
            calls=str(calls),
            sleeper=str(sleeper),
            oob=MEMCHECK_OOB,
            race_clean=RACECHECK_CLEAN,
            never=NEVER_STARTED,
        )
    )
    fake.chmod(0o755)
    sanitizer = find_compute_sanitizer(toolchain, {"COMPUTE_SANITIZER": str(fake)})
    quick = dataclasses.replace(matrix, sanitize=dataclasses.replace(matrix.sanitize, timeout_s=3))
    target = matrix.targets["sm_90a"]
    options = RunOptions(target, (add_one_only,), tmp_path / "r", compile_cache, "", "test")
    started = time.monotonic()
    result = sanitize_target(quick, options, toolchain, H200, sanitizer)
    assert time.monotonic() - started < 30  # the runs overlap; the sleeper cost one timeout

    cells = {c.name: c for c in result.cells}
    assert list(cells) == [
        "compile[sm_90a]",
        "n1[sm_90a]:memcheck",
        "n1[sm_90a]:racecheck",
        "n1[sm_90a]:synccheck",
        "n1[sm_90a]:initcheck",
    ]
    memcheck = cells["n1[sm_90a]:memcheck"]
    assert memcheck.outcome is Outcome.FAILED
    assert memcheck.message == "memcheck: 1024 errors: Invalid __global__ write of size 4 bytes"
    assert memcheck.sanitizer == SanitizerFindings(
        errors=1024,
        exit_status=86,
        case_outcome=Outcome.FAILED,
        case_message="CUDA error: launch failed",
    )
    assert memcheck.loaded_as == "sass" and memcheck.seed == 1 and memcheck.tool == "memcheck"
    assert memcheck.kind is CellKind.SANITIZER
    assert memcheck.provenance.device == "NVIDIA H200"
    assert "by thread (1,0,0) in block (0,0,0)" in memcheck.detail
    racecheck = cells["n1[sm_90a]:racecheck"]
    assert racecheck.outcome is Outcome.PASSED, racecheck.message
    assert racecheck.sanitizer.warnings == 0 and racecheck.tool == "racecheck"
    hung = cells["n1[sm_90a]:synccheck"]
    assert hung.outcome is Outcome.FAILED and hung.message.startswith("timeout: "), hung.message
    assert hung.seconds >= 3
    assert _gone(int(sleeper.read_text()))  # the whole process group went
    never = cells["n1[sm_90a]:initcheck"]  # a tool that cannot run: an error, named
    assert never.outcome is Outcome.ERROR
    assert never.message.startswith("initcheck could not judge the case: compute-sanitizer ")
    assert "no ERROR SUMMARY line (exited with status 255)" in never.message
    assert not result.ok

    # Each run is the case process under the tool, naming what it runs.
    runs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert sorted(run[run.index("--tool") + 1] for run in runs) == [
        "initcheck",
        "memcheck",
        "racecheck",
        "synccheck",
    ]
    for run in runs:
        case_process = run[run.index(sys.executable) :]
        spec = str(add_one_only.resolve() / "planted" / "add_one" / "spec.py")
        assert case_process[1:6] == ["-m", "harness.run.sanitized_case", spec, "n1", "sm_90a"]
        assert Path(case_process[6]).is_file()  # the build

    document = etree.parse(str(result.files.xml))
    SCHEMA.assertValid(document)
    assert result.files.xml.name == "sanitize-sm_90a.xml"
    cases = {case.get("name"): case for case in document.iter("testcase")}
    failure = cases["add_one::n1[sm_90a]:memcheck"].find("failure")
    assert failure.get("message").startswith("memcheck: 1024 errors")
    assert (
        "Invalid __global__ write" in cases["add_one::n1[sm_90a]:memcheck"].find("system-out").text
    )
    assert cases["add_one::n1[sm_90a]:racecheck"].find("failure") is None
    unjudged = cases["add_one::n1[sm_90a]:initcheck"]
    assert unjudged.find("failure") is None
    assert unjudged.find("error").get("message").startswith("initcheck could not judge")
    for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):  # JUnit names each tool
        properties = cases[f"add_one::n1[sm_90a]:{tool}"].iter("property")
        assert {p.get("name"): p.get("value") for p in properties}["tool"] == tool
    shown = {
        p.get("name"): p.get("value")
        for p in cases["add_one::n1[sm_90a]:memcheck"].iter("property")
    }
    assert (shown["tool"], shown["errors"], shown["case_outcome"]) == ("memcheck", "1024", "failed")
    assert (shown["exit_status"], shown["binary"], shown["seed"]) == ("86", "sass", "1")
    sidecar = json.loads(result.files.json.read_text())
    assert sidecar["compute_sanitizer"] == str(fake)
    assert sidecar["suite"] == "cuda-matrix-sanitize.sm_90a.test"


def test_without_compute_sanitizer_every_run_cell_is_an_error(
    matrix, toolchain, add_one_only, compile_cache, tmp_path
):
    missing = Unavailable("no compute-sanitizer found (tried: here; there; PATH)")
    options = RunOptions(matrix.targets["sm_90a"], (add_one_only,), tmp_path, compile_cache)
    result = sanitize_target(matrix, options, toolchain, H200, missing)
    runs = [c for c in result.cells if ":" in c.name]
    assert len(runs) == len(matrix.sanitize.tools)
    for cell in runs:
        assert cell.outcome is Outcome.ERROR and cell.message == missing.why


def test_without_a_device_the_planted_kernels_are_compiled_and_their_runs_skipped(
    matrix, toolchain, compile_cache, tmp_path
):
    target = matrix.targets["sm_90a"]
    options = RunOptions(target, (PLANTED,), tmp_path / "r", compile_cache, "", "test")
    missing = Unavailable("none here")
    result = sanitize_target(matrix, options, toolchain, Unavailable("test"), missing)
    cells = {(c.classname.split(".")[1], c.name): c for c in result.cells}
    tools = [tool.value for tool in matrix.sanitize.tools]
    assert cells["spec_raises", "spec[sm_90a]"].outcome is Outcome.ERROR
    assert cells["compile_error", "compile[sm_90a]"].outcome is Outcome.FAILED
    for tool in tools:
        cell = cells["compile_error", f"n32[sm_90a]:{tool}"]
        assert cell.outcome is Outcome.FAILED and cell.message.startswith("not compiled")
    assert cells["add_one", "compile[sm_90a]"].outcome is Outcome.PASSED
    assert cells["add_one", "compile[sm_90a]"].compile.worst("registers") > 0
    kernels = {kernel for kernel, _ in cells} - {"spec_raises", "compile_error"}
    for kernel in kernels:
        runs = [cell for (k, name), cell in cells.items() if k == kernel and ":" in name]
        assert [cell.name.rsplit(":", 1)[1] for cell in runs] == tools, kernel
        for cell in runs:
            assert cell.skip_reason is SkipReason.NO_DEVICE, cell
    assert cells["add_one", "n1[sm_90a]:memcheck"].message.startswith("no-device: ")
    # 7 good kernels x (compile + one cell per tool) + 1 broken spec: none lost, none doubled
    assert len(result.cells) == len(cells) == 7 * (1 + len(tools)) + 1


def test_a_kernel_the_target_cannot_express_skips_its_tool_cells(
    matrix, toolchain, planted, compile_cache, tmp_path
):
    target = matrix.targets["sm_80"]
    options = RunOptions(target, (planted,), tmp_path, compile_cache, "needs_sm90")
    result = sanitize_target(matrix, options, toolchain, H200, Unavailable("none"))
    assert [c.name for c in result.cells] == ["compile[sm_80]"] + [
        f"blocks8[sm_80]:{tool.value}" for tool in matrix.sanitize.tools
    ]
    assert {c.skip_reason for c in result.cells} == {SkipReason.TARGET_UNSUPPORTED}
    assert result.files.xml.name == "partial-sanitize-sm_80.xml"


def test_a_sanitize_report_merges_beside_the_test_report(
    matrix, toolchain, planted, compile_cache, tmp_path
):
    target = matrix.targets["sm_90a"]
    reports, cache = tmp_path / "reports", compile_cache
    options = RunOptions(target, (planted,), reports, cache, runner="test")
    tested = run_target(matrix, options, toolchain, Unavailable("test"))
    sanitized = sanitize_target(
        matrix, options, toolchain, Unavailable("test"), Unavailable("none")
    )
    published = publish(
        PublishOptions(
            reports=[tested.files.xml, sanitized.files.xml],
            expected_targets=["sm_90a"],
            out=tmp_path / "out",
            database=tmp_path / "history.sqlite",
            commit="test",
        )
    )
    merged = published.report_set
    # the planted faulty kernels fail their cells, as the verdict says: nothing else fails
    broken = [c for c in merged.cells if c.outcome.value in ("failed", "error")]
    assert broken and published.failures == [
        f"{len(broken)} cell(s) failed or errored (summary.md lists them)"
    ]
    suites = [report.suite for report in merged.reports]
    assert suites == ["cuda-matrix.sm_90a.test", "cuda-matrix-sanitize.sm_90a.test"]
    assert len(merged.cells) == len(tested.cells) + len(sanitized.cells)
    assert "`planted.compile_error` `n32[sm_90a]:memcheck`" in published.files[1].read_text()


def test_the_case_process_says_why_it_cannot_run_without_a_device(tmp_path):
    spec = PLANTED / "planted" / "add_one" / "spec.py"
    matrix = str(ROOT / "matrix.yaml")
    args = [str(spec), "n1", "sm_90a", str(tmp_path / "none.fatbin"), "--matrix", matrix]
    done = subprocess.run(
        [sys.executable, "-m", "harness.run.sanitized_case", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("no CUDA device: "), done.stderr


def test_the_cli_reports_every_cell_and_fails_when_one_failed(planted, compile_cache, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}  # no device
    env.pop("COMPUTE_SANITIZER", None)
    args = ["sanitize", "sm90", "--kernels", str(planted), "--reports", str(tmp_path / "r")]
    args += ["--cache", str(compile_cache)]

    def cli(*more):
        command = [sys.executable, "-m", "harness", *args, *more]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)

    everything = cli()
    assert everything.returncode == 1, everything.stdout + everything.stderr  # compile_error
    assert "FAILED   planted.compile_error::n32[sm_90a]:initcheck  -- not compiled" in (
        everything.stdout
    )
    assert "SKIPPED  planted.add_one::n1[sm_90a]:memcheck  -- no-device: " in everything.stdout
    assert "sanitize-sm_90a.xml: 6 passed, 5 failed, 1 error, 24 skipped" in everything.stdout
    selected = cli("-k", "add_one")
    assert selected.returncode == 0, selected.stdout + selected.stderr
    assert "partial-sanitize-sm_90a.xml: 1 passed, 0 failed, 0 error, 4 skipped" in selected.stdout
    assert (tmp_path / "r" / "sanitize-sm_90a.json").is_file()
