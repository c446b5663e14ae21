"""Imports specs in a child process first, to find the ones that would take the run down with
them: a spec that calls os._exit(), crashes the interpreter or never finishes importing.

The child imports the specs one after another and says when it starts and ends each, on a pipe
of its own: what the specs print goes nowhere, so no spec can say another's marker. If it dies or
goes quiet past the timeout while one is importing, that spec is the culprit; the child is
killed and started again on the specs after it. Once it has imported them all it says so and
exits at once, so a thread a spec left running cannot hold it (and blame a spec that did
nothing). A spec whose import leaves a thread running is named too: in the run's own process
that thread would outlive the run. Specs that raise are no concern here: loading them in the
run's own process turns their exception into an error cell already.

    python -m harness.model.import_probe <marker fd> <spec.py> ...
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import processes
from harness.model.result import SpecError

ROOT = Path(__file__).resolve().parents[2]  # where the child imports the harness from


def unsafe_imports(spec_files: list[Path], timeout_s: float) -> dict[Path, str]:
    """Each spec whose import ends or hangs the process it runs in, or leaves a thread running
    in it, with what happened."""
    culprits: dict[Path, str] = {}
    pending = list(spec_files)
    while pending:
        stopped = _probe(pending, timeout_s, culprits)
        if stopped is None:
            break
        culprit, why = stopped
        culprits[culprit] = why
        pending = pending[pending.index(culprit) + 1 :]
    return culprits


def _probe(
    spec_files: list[Path], timeout_s: float, threaded: dict[Path, str]
) -> tuple[Path, str] | None:
    """Import `spec_files` in one child: the spec it stopped on and why; None when it imported
    them all. Each spec whose import left a thread running goes into `threaded`, with why."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    markers, marker_end = os.pipe()
    try:
        child = processes.start(
            [sys.executable, "-m", "harness.model.import_probe", str(marker_end)]
            + [str(spec) for spec in spec_files],
            env={**os.environ, "PYTHONPATH": path},
            stdout="discard",
            stderr="discard",
            text=False,
            pass_fds=(marker_end,),
        )
    finally:
        os.close(marker_end)  # the child's now: the pipe ends when the child does
    try:
        return _watch(child, markers, spec_files, timeout_s, threaded)
    finally:
        os.close(markers)


def _watch(
    child: subprocess.Popen,
    markers: int,
    spec_files: list[Path],
    timeout_s: float,
    threaded: dict[Path, str],
) -> tuple[Path, str] | None:
    importing: Path | None = None
    last: Path | None = None  # the last spec whose import finished
    buffered = b""
    with selectors.DefaultSelector() as selector:
        selector.register(markers, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while True:
            if not selector.select(timeout=max(deadline - time.monotonic(), 0.0)):
                processes.kill_group(child)
                child.wait()
                if importing is not None:
                    return importing, f"importing it did not finish within {timeout_s:g} s"
                culprit = last or spec_files[0]
                return culprit, (
                    f"its import finished, but the process it ran in went on no further within "
                    f"{timeout_s:g} s (a thread it started holds it?)"
                )
            chunk = os.read(markers, 65536)
            if not chunk:  # the child is gone
                status = child.wait()
                if importing is None and status == 0:
                    return None  # it said it was finished, and exited
                how = processes.describe_exit(status)
                if importing is None:
                    culprit = last or spec_files[0]
                    return culprit, f"after its import the process ended ({how})"
                return importing, f"importing it ended the process ({how})"
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                what, _, spec = line.decode(errors="replace").partition(" ")
                if what == "start":
                    importing, deadline = Path(spec), time.monotonic() + timeout_s
                elif what == "done":
                    importing, last = None, Path(spec)
                    deadline = time.monotonic() + timeout_s
                elif what == "threads" and importing is not None:
                    threaded[importing] = (
                        f"importing it left threads running ({spec}): a spec may not start "
                        "work that outlives its import in the harness's processes"
                    )


def _child(marker_fd: int, spec_files: list[str]) -> None:
    from harness.model.discovery import KernelFolder, load_kernel

    markers = os.fdopen(marker_fd, "w", buffering=1)  # a line at a time
    for spec_file in spec_files:
        markers.write(f"start {spec_file}\n")
        before = set(threading.enumerate())
        with contextlib.suppress(SpecError):  # the run's to report when it loads it, not ours
            load_kernel(KernelFolder.of(Path(spec_file)))
        left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
        if left:
            markers.write(f"threads {', '.join(left)}\n")
        markers.write(f"done {spec_file}\n")
    markers.flush()
    os._exit(0)  # now: no thread a spec left running may hold the process


if __name__ == "__main__":
    _child(int(sys.argv[1]), sys.argv[2:])
