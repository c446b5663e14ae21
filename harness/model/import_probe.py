"""Imports specs in a child process first, to find the ones that would take the run down with
them: a spec that calls os._exit(), crashes the interpreter or never finishes importing.

The child imports the specs one after another and says when it starts and ends each. If it dies
or goes quiet past the timeout while one is importing, that spec is the culprit; the child is
killed and started again on the specs after it. Specs that raise are no concern here: loading
them in the run's own process turns their exception into an error cell already.

    python -m harness.model.import_probe <spec.py> ...
"""

from __future__ import annotations

import contextlib
import os
import selectors
import sys
import time
from pathlib import Path

from harness import processes
from harness.model.result import SpecError

ROOT = Path(__file__).resolve().parents[2]  # where the child imports the harness from


def unsafe_imports(spec_files: list[Path], timeout_s: float) -> dict[Path, str]:
    """Each spec whose import ends or hangs the process it runs in, with what happened."""
    culprits: dict[Path, str] = {}
    pending = list(spec_files)
    while pending:
        stopped = _probe(pending, timeout_s)
        if stopped is None:
            break
        culprit, why = stopped
        culprits[culprit] = why
        pending = pending[pending.index(culprit) + 1 :]
    return culprits


def _probe(spec_files: list[Path], timeout_s: float) -> tuple[Path, str] | None:
    """Import `spec_files` in one child: the spec it stopped on and why; None when it imported
    them all."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child = processes.start(
        [sys.executable, "-m", "harness.model.import_probe", *map(str, spec_files)],
        env={**os.environ, "PYTHONPATH": path},
        stderr="discard",
        text=False,
    )
    assert child.stdout is not None
    importing: Path | None = None
    buffered = b""
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while True:
            if not selector.select(timeout=max(deadline - time.monotonic(), 0.0)):
                processes.kill_group(child)
                child.wait()
                culprit = importing or spec_files[0]
                return culprit, f"importing it did not finish within {timeout_s:g} s"
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:  # the child is gone
                status = child.wait()
                if importing is None:
                    return None
                how = processes.describe_exit(status)
                return importing, f"importing it ended the process ({how})"
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                what, _, spec = line.decode(errors="replace").partition(" ")
                if what == "start":
                    importing, deadline = Path(spec), time.monotonic() + timeout_s
                elif what == "done":
                    importing = None


def _child(spec_files: list[str]) -> int:
    from harness.model.discovery import KernelFolder, load_kernel

    for spec_file in spec_files:
        # On a line of their own, whatever the spec printed before them.
        print(f"\nstart {spec_file}", flush=True)
        with contextlib.suppress(SpecError):  # the run's to report when it loads it, not ours
            load_kernel(KernelFolder.of(Path(spec_file)))
        print(f"\ndone {spec_file}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
