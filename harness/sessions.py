"""The matrix's nox sessions for a project that adopts cuda-matrix: its own `matrix.yaml` and
`kernels/`, and a noxfile of a few lines:

    import nox
    from harness.sessions import add_sessions

    add_sessions(nox)  # or add_sessions(nox, install=["cuda-matrix @ git+https://..."])

Each target of its matrix.yaml gets `test-<session>`, `ab-<session>` and `sanitize-<session>`,
and the project gets `compile`, `check`, `report` and `gha-matrix` (what the reusable workflow
plans its jobs with): each installs `install` and the target's pinned nvcc wheels
into its virtualenv (nothing with `nox --no-venv`) and runs the `cuda-matrix` command there. They
run on the host; the container backend is this repository's own noxfile's, for now.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.model.matrix import load_matrix


def add_sessions(
    nox: Any, root: Path | None = None, install: Sequence[str] = ("cuda-matrix",)
) -> list[str]:
    """Register the sessions with `nox` (the module a noxfile imports); their names. `root`:
    the project (default: the noxfile's folder, nox's working directory)."""
    project = Path(root or Path.cwd())
    matrix = load_matrix(project / "matrix.yaml")
    every_wheel = sorted({w for t in matrix.targets.values() for w in t.toolkit.wheels})
    names = []

    def define(
        name: str, doc: str, wheels: Sequence[str], *command: str, default: bool = True
    ) -> None:
        def session(session: Any) -> None:
            from nox.virtualenv import PassthroughEnv  # nox is there when a session runs

            args = _host_only(session, list(session.posargs))
            if not isinstance(session.virtualenv, PassthroughEnv):
                session.install(*install, *wheels)
            session.run("cuda-matrix", *command, *args)

        session.__doc__ = doc
        nox.session(name=name, default=default)(session)
        names.append(name)

    for target in matrix.targets.values():
        define(
            f"test-{target.session}",
            f"Compile {target.name} ({target.gencode}) and run it on this machine's GPU.",
            target.toolkit.wheels,
            "test",
            target.name,
        )
        define(
            f"ab-{target.session}",
            f"Time {target.name}'s changed kernels against a base commit (-- --base REF).",
            target.toolkit.wheels,
            "ab",
            target.name,
            default=False,  # it needs -- --base REF: never part of a bare `nox`
        )
        define(
            f"sanitize-{target.session}",
            f"Run compute-sanitizer over {target.name} on this machine's GPU.",
            target.toolkit.wheels,
            "sanitize",
            target.name,
        )
    define("compile", "Compile every target, run nothing.", every_wheel, "compile")
    define("check", "Compile every target, check every case on the CPU.", every_wheel, "check")
    define("report", "Merge reports/junit-*.xml into summary.md and dashboard.html.", (), "report")

    def plan(session: Any) -> None:
        jobs = matrix.github_images() if session.posargs == ["images"] else matrix.github_jobs()
        print(json.dumps({"include": jobs}))

    plan.__doc__ = "Print the GitHub Actions job matrix (-- images: one entry per target)."
    nox.session(name="gha-matrix", venv_backend="none", default=False)(plan)
    names.append("gha-matrix")
    return names


def _host_only(session: Any, args: list[str]) -> list[str]:
    """`args` without `--backend host`, which the reusable workflow passes where a project has
    no images; `--backend docker` is refused, saying so."""
    if "--backend" not in args:
        return args
    at = args.index("--backend")
    backend = args[at + 1] if at + 1 < len(args) else ""
    if backend != "host":
        session.error(
            f"--backend {backend}: this project's sessions run on the host (the images are "
            "cuda-matrix's own repository's); call the workflow with containers: false"
        )
    return args[:at] + args[at + 2 :]
