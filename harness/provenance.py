"""Where a run happened and of what code: its runner's name and the project's commit."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path


def runner_name(given: str = "") -> str:
    return given or socket.gethostname()


def current_commit(root: Path, env: dict[str, str] | None = None) -> str | None:
    """$GITHUB_SHA in Actions, else `git rev-parse HEAD` of `root`; None where neither says."""
    env = os.environ if env is None else env
    if env.get("GITHUB_SHA"):
        return env["GITHUB_SHA"]
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None
