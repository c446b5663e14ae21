"""The matrix's sessions. One `test-<target>` per target of matrix.yaml, so a new target there is
a new session here with no edit.

    nox -s test-sm90      compile and run the sm_90a column on this machine's GPU
    nox -s compile        compile every target, run nothing
    nox -s tests          the project's own test suite
    nox -s lint           ruff

On a machine without a registry (a GPU box with its own Python), `nox --no-venv -s test-sm90`
uses the current environment as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox
from nox.virtualenv import PassthroughEnv

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # nox loads this file by path; the harness sits beside it

from harness.matrix import Target, load_matrix  # noqa: E402

MATRIX = load_matrix(ROOT / "matrix.yaml")

nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session, *requirements: str) -> None:
    """Install into the session's venv; with --no-venv, trust the environment as it is."""
    if isinstance(session.virtualenv, PassthroughEnv):
        return
    session.install(*requirements)


def _toolkit_wheels() -> list[str]:
    return sorted({wheel for t in MATRIX.targets.values() for wheel in t.toolkit.wheels})


def _test_session(target: Target):
    def session(session: nox.Session) -> None:
        _install(session, "-r", "requirements.txt", *target.toolkit.wheels)
        session.run("python", "-m", "harness", "test", target.name, *session.posargs)

    session.__doc__ = f"Compile {target.name} ({target.gencode}) and run it on this machine's GPU."
    return session


for _target in MATRIX.targets.values():
    nox.session(name=f"test-{_target.session}")(_test_session(_target))


@nox.session(name="compile")
def compile_all(session: nox.Session) -> None:
    """Compile every kernel for every target; run nothing."""
    _install(session, "-r", "requirements.txt", *_toolkit_wheels())
    session.run("python", "-m", "harness", "compile", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own test suite (compiles for real; GPU tests skip without a GPU)."""
    _install(session, "-r", "requirements.txt", "-r", "requirements-test.txt", *_toolkit_wheels())
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    _install(session, "-r", "requirements-test.txt")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
