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
    container, whose mount has no git), else `git rev-parse HEAD` of `root` (the checkout: in a
    dispatched run, not $GITHUB_SHA's), else $GITHUB_SHA; None where none says."""
    env = os.environ if env is None else env
    if env.get("MATRIX_COMMIT"):
        return env["MATRIX_COMMIT"]
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, timeout=30
        )
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass  # no git here: the environment may still say
    return env.get("GITHUB_SHA") or None
