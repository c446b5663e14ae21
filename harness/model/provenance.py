"""Where a run happened and of what code: its runner's name and the project's commit."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path


def runner_name(given: str = "") -> str:
    """The runner a report is of: `given`, else $MATRIX_RUNNER (what a container is told: the
    host's name, not its own random one), else this host's name."""
    return given or os.environ.get("MATRIX_RUNNER") or socket.gethostname()


def current_commit(root: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The commit of the code that runs: $MATRIX_COMMIT where the caller knows it better (a
    container, whose mount has no git), else the HEAD of the checkout whose top level is `root`
    itself (in a dispatched run, not $GITHUB_SHA's; a copy of the project inside another
    repository is not that repository's commit), else $GITHUB_SHA; None where none says."""
    env = os.environ if env is None else env
    if env.get("MATRIX_COMMIT"):
        return env["MATRIX_COMMIT"]
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is not None and Path(top).resolve() == Path(root).resolve():
        head = _git(root, "rev-parse", "HEAD")
        if head:
            return head
    return env.get("GITHUB_SHA") or None


def _git(root: Path, *args: str) -> str | None:
    """What `git <args>` prints in `root`; None where git is missing or says no."""
    try:
        result = subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=root, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None  # no git here: the environment may still say
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None
