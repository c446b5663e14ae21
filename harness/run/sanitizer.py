"""NVIDIA's compute-sanitizer: where it is, how it is called, and what its log says.

Order: $COMPUTE_SANITIZER (if set, it must work), then in the toolchain's real toolkit (behind a
wrapper nvcc too) and its wheels, then $CUDA_HOME's and /usr/local/cuda's, then PATH. The log is
read by its summary line, never by the exit status alone: `ERROR SUMMARY: N errors` (memcheck,
synccheck, initcheck), and racecheck's `RACECHECK SUMMARY: N hazards displayed (E errors, W
warnings)`; `diagnose` makes a run's outcome of it, beside the case's own cell
(harness.run.sanitized_case prints it). A run that left no summary line, or whose case process
printed no cell, judged nothing: an error cell that names the tool, never a pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.compile.toolchain import Toolchain
from harness.model.cell import Cell, Provenance, SanitizerFindings
from harness.model.codec import cell_from_json
from harness.model.errors import Broken, CellError, KernelFailed, Skip, Unavailable
from harness.model.matrix import Tool
from harness.model.outcome import Outcome, SkipReason
from harness.model.text import bounded
from harness.processes import Finished, describe_exit

_EXE = "compute-sanitizer"
STANDARD = Path("/usr/local/cuda")  # where the toolkit's installers put it
ERROR_EXIT = 86  # what compute-sanitizer exits with when it found errors
# memcheck's room after each allocation that belongs to none: without it, an access just past
# one buffer may land at the start of the next allocation, which is in bounds to the tool.
PADDING_BYTES = 4096
PRINT_LIMIT = 10  # findings printed in full; the summary still counts every one
LOG_CHARS = 20_000  # of a log kept in the cell: the findings lead it, the summary ends it

# Anchored at the line's end: with more errors than the print limit, a second line
# A tool that cannot watch what the kernel does says so as a warning it counts as an error
_TOOL_CANNOT = re.compile(r"^=+ Warning: (.+ is not supported by the selected tool)\s*$", re.M)
# `ERROR SUMMARY: N errors were not printed. ...` follows and is not the total.
_ERROR_SUMMARY = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?\s*$", re.MULTILINE)
_RACECHECK_SUMMARY = re.compile(
    r"^=+ RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)",
    re.MULTILINE,
)
# A finding starts at the prefix and one space; its details (at, by thread, backtrace) are
# indented further.
_FINDING = re.compile(r"^=+ (\S.*?)\s*$", re.MULTILINE)


class SanitizerMissing(Exception):
    """No usable compute-sanitizer; the message lists where it looked."""


@dataclass(frozen=True)
class Summary:
    errors: int
    warnings: int = 0  # racecheck's hazards below error level; they fail nothing


def find_compute_sanitizer(
    toolchain: Toolchain | Unavailable, env: Mapping[str, str] | None = None
) -> Path:
    env = os.environ if env is None else env
    if env.get("COMPUTE_SANITIZER"):  # named explicitly: use it or say why not
        named = Path(env["COMPUTE_SANITIZER"])
        if not _executable(named):
            raise SanitizerMissing(
                f"$COMPUTE_SANITIZER is {named}, which is not an executable file"
            )
        return named
    candidates = []
    if isinstance(toolchain, Toolchain):  # its real toolkit and wheels, not a wrapper's folder
        candidates += [folder / _EXE for folder in toolchain.tool_dirs]
        candidates.append(toolchain.root / "compute-sanitizer" / _EXE)
    if env.get("CUDA_HOME"):
        candidates.append(Path(env["CUDA_HOME"]) / "compute-sanitizer" / _EXE)
    candidates.append(STANDARD / "compute-sanitizer" / _EXE)
    for path in candidates:
        if _executable(path):
            return path
    on_path = shutil.which(_EXE, path=env.get("PATH"))
    if on_path:
        return Path(on_path)
    tried = [str(path) for path in candidates] + ["PATH"]
    raise SanitizerMissing(
        "no compute-sanitizer found (tried: " + "; ".join(tried) + "). Install a CUDA toolkit "
        "that has it or set COMPUTE_SANITIZER=/path/to/compute-sanitizer"
    )


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def command(sanitizer: Path, tool: Tool, log_file: Path, program: list[str]) -> list[str]:
    options = [
        str(sanitizer),
        "--tool",
        tool.value,
        "--error-exitcode",
        str(ERROR_EXIT),
        "--print-limit",
        str(PRINT_LIMIT),
        # cuda-python probes the driver (cuGetProcAddress for entry points it may lack) and
        # takes the errors in its stride; reported, they would fail every clean kernel. A
        # kernel's own fault is still reported, as the device error it is.
        "--report-api-errors",
        "no",
        # The host side of a backtrace is the Python interpreter's frames: noise here.
        "--show-backtrace",
        "device",
        # A Python process importing numpy and cuda takes a while to reach its first CUDA call,
        # longer under load; the run's own timeout bounds the wait instead.
        "--launch-timeout",
        "0",
        "--log-file",
        str(log_file),
    ]
    if tool is Tool.RACECHECK:
        # One report per race between two accesses (the default), not one per hazard.
        options += ["--racecheck-report", "analysis"]
    if tool is Tool.MEMCHECK:
        options += ["--padding", str(PADDING_BYTES)]
    return options + program


def summary(tool: Tool, log: str) -> Summary | None:
    """The tool's summary line, read; None when it printed none (it never finished)."""
    if tool is Tool.RACECHECK:
        found = _RACECHECK_SUMMARY.search(log)
        return Summary(int(found.group(2)), int(found.group(3))) if found else None
    found = _ERROR_SUMMARY.search(log)
    return Summary(int(found.group(1))) if found else None


def summary_line(tool: Tool) -> str:
    return "RACECHECK SUMMARY" if tool is Tool.RACECHECK else "ERROR SUMMARY"


def first_finding(log: str) -> str | None:
    """The first thing the tool reported, errors before warnings, as its headline says it:
    `Invalid __global__ write of size 4 bytes`, `Error: Race reported between ...`."""
    findings = [
        line
        for line in _FINDING.findall(log)
        if line != "COMPUTE-SANITIZER" and "SUMMARY:" not in line
    ]
    errors = [line for line in findings if not line.startswith("Warning")]
    return str((errors or findings)[0]) if findings else None


def read_case_cell(stdout: str, target: str, provenance: Provenance) -> Cell | None:
    """The case process's cell, its last JSON line; None if it died before printing one."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        return cell_from_json(json.loads(lines[-1]), target, provenance)
    except (IndexError, KeyError, TypeError, ValueError):  # a line cut short by a crash
        return None


@dataclass(frozen=True)
class Diagnosis:
    """What one run under a tool found: what settles its cell (None: it passed), and the
    figures."""

    error: CellError | None
    findings: SanitizerFindings

    @property
    def outcome(self) -> Outcome:
        return self.error.outcome if self.error is not None else Outcome.PASSED

    @property
    def message(self) -> str:
        return str(self.error) if self.error is not None else ""

    @property
    def skip_reason(self) -> SkipReason | None:
        return self.error.skip_reason if self.error is not None else None


def diagnose(
    tool: Tool, log: str, finished: Finished, timeout_s: float, case: Cell | None
) -> Diagnosis:
    """One run's outcome from what it left: the tool's log, the case's own cell, the exit."""
    found = summary(tool, log)
    findings = SanitizerFindings(
        errors=found.errors if found else None,
        warnings=found.warnings if found and tool is Tool.RACECHECK else None,
        exit_status=finished.status,
        case_outcome=case.outcome if case else None,
        case_message=case.message if case else "",
    )

    def failed(message: str) -> Diagnosis:
        return Diagnosis(KernelFailed(message), findings)

    def unjudged(message: str) -> Diagnosis:  # the tool or the case process broke: no verdict
        return Diagnosis(Broken(f"{tool.value} could not judge the case: {message}"), findings)

    headline = first_finding(log)
    # The tool's complaints about its own command line, and the case process's traceback.
    complaint = (finished.stderr.strip().splitlines() or [""])[-1]
    if finished.status is None:
        return failed(f"timeout: no verdict after {timeout_s:g} s; killed")
    cannot = _TOOL_CANNOT.findall(log)
    if found and cannot and found.errors == len(cannot):  # its only errors: what it cannot do
        why = f"{tool.value} cannot watch this kernel: {cannot[0]}"
        return Diagnosis(Skip(SkipReason.TOOL_UNSUPPORTED, why), findings)
    if found and found.errors:
        plural = "s" if found.errors > 1 else ""
        said = f": {headline}" if headline else ""
        return failed(f"{tool.value}: {found.errors} error{plural}{said}")
    if found is None:
        how = describe_exit(finished.status)
        if finished.status == ERROR_EXIT:
            how += ", its code for errors found"
        said = f": {headline or complaint}" if headline or complaint else ""
        return unjudged(f"compute-sanitizer printed no {summary_line(tool)} line ({how}){said}")
    if case is None:
        why = complaint or describe_exit(finished.status)
        return unjudged(f"the case process reported nothing: {why}")
    if case.outcome is Outcome.SKIPPED and case.skip_reason is not None:
        return Diagnosis(Skip.as_said(case.skip_reason, case.message), findings)
    if case.outcome is Outcome.ERROR:  # the spec broke: a clean log of half a case proves nothing
        return Diagnosis(Broken(f"the case broke: {case.message}"), findings)
    return Diagnosis(None, findings)


def detail(log: str, finished: Finished) -> str:
    text = log.strip()
    for stream, output in (("stdout", finished.stdout), ("stderr", finished.stderr)):
        if output.strip():
            text += f"\n--- {stream} of compute-sanitizer and the case process ---\n"
            text += output.strip()
    return bounded(text, LOG_CHARS)
