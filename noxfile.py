"""The matrix's sessions. Each target of matrix.yaml gets `build-<session>`, `test-<session>`,
`sanitize-<session>` and `ab-<session>`, so a new target there is new sessions here with no edit.
They are the sessions every project that adopts cuda-matrix gets (harness/sessions.py); this
repository runs its own harness with them, and adds its test suite and lint.

    nox -s test-sm90      compile and run the sm_90a column (in its image if docker answers)
    nox -s sanitize-sm90  compile sm_90a, run compute-sanitizer over each kernel's smallest case
                          (in its image if docker answers)
    nox -s ab-sm90 -- --base REF
                          time the kernels whose code changed since REF against REF's build,
                          on this GPU, after test-sm90 (in its image if docker answers)
    nox -s build-sm90     build the sm_90a image
    nox -s compile        compile every target on this machine, run nothing
    nox -s check          compile every target, check every case's spec on the CPU
    nox -s base-image     make the Debian base image locally, where no registry serves one
    nox -s gha-matrix     the GitHub Actions job matrix, as JSON
    nox -s report         merge reports: merged.xml, summary.md, dashboard.html, history
    nox -s tests          the project's own test suite, in parallel, but for corpus's and e2e's
    nox -s corpus         the tests that take the book's whole corpus through the flow, per target
    nox -s e2e            the tests that build the images, install the wheel and drive the dashboard
    nox -s lint           ruff, mypy, the stages' import contract, actionlint, zizmor

On a machine without a registry (a GPU box with its own Python), `nox --no-venv -s test-sm90`
uses the current environment as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # nox loads this file by path; the harness sits beside it

from harness.sessions import add_sessions, install  # noqa: E402

# This checkout's harness, run from the checkout with its pinned dependencies.
PROJECT = add_sessions(
    nox, ROOT, install=("-r", "requirements.txt"), command=("python", "-m", "harness")
)

TEST_REQUIREMENTS = ("-r", "requirements.txt", "-r", "requirements-test.txt")
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]
# One pytest worker per core; worksteal: a worker that runs out takes waiting tests from one
# still busy with a long one
PARALLEL = ("-n", "auto", "--dist", "worksteal")


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own test suite but corpus's and e2e's, in parallel workers (compiles its
    fixtures for real; GPU tests skip without a GPU)."""
    install(session, *TEST_REQUIREMENTS, toolkits=PROJECT.toolkits())
    quick = ("-m", "not corpus and not e2e")
    session.run("python", "-m", "pytest", *PARALLEL, *quick, *session.posargs)


@nox.session
def corpus(session: nox.Session) -> None:
    """The tests that take the book's 26 kernels through the flow, cold, for each target: every
    one compiled and every case checked on the CPU (what `check` does), sharded, and run on
    fake GPUs. Minutes of nvcc and numpy on a small machine, so a session of their own (.ci/run
    runs it after `tests`)."""
    install(session, *TEST_REQUIREMENTS, toolkits=PROJECT.toolkits())
    session.run("python", "-m", "pytest", *PARALLEL, "-m", "corpus", *session.posargs)


@nox.session
def e2e(session: nox.Session) -> None:
    """The tests that build and run the container images, install the wheel into a fresh
    virtualenv from the package index, and drive the dashboard in Chromium: minutes of image
    builds and downloads, so a session of their own (.ci/run runs it after `tests`)."""
    install(session, *TEST_REQUIREMENTS, toolkits=PROJECT.toolkits())
    session.run("python", "-m", "pytest", "-m", "e2e", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, mypy over harness/, the stages' import contract, actionlint and zizmor."""
    install(session, *TEST_REQUIREMENTS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")  # [tool.mypy] in pyproject.toml: harness/, strictly typed
    session.run("lint-imports")  # [tool.importlinter]: each stage imports earlier ones only
    session.run("actionlint", external=True)
    session.run("zizmor", "--offline", ".github/workflows", external=True)
