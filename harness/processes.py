"""Child processes the harness starts and may have to end: how one ended, and ending one whole.

nvcc, compute-sanitizer and the spec import probe each run in a process group of their own, so
that ending them ends whatever they started too (cc1plus, the tool's helpers, a spec's children).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL to the process group of `process`, started with start_new_session=True."""
    with contextlib.suppress(ProcessLookupError):  # it ended in between
        os.killpg(process.pid, signal.SIGKILL)
