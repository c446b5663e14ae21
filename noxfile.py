"""The matrix's sessions. Each target of matrix.yaml gets `build-<session>`, `test-<session>` and
`sanitize-<session>`, so a new target there is new sessions here with no edit.

    nox -s test-sm90      compile and run the sm_90a column (in its image if docker answers)
    nox -s sanitize-sm90  compile sm_90a, run compute-sanitizer over each kernel's smallest case
                          (in its image if docker answers)
    nox -s ab-sm90 -- --base REF
                          time the kernels whose code changed since REF against REF's build,
                          on this GPU, after test-sm90 (in its image if docker answers)
    nox -s build-sm90     build the sm_90a image
    nox -s compile        compile every target on this machine, run nothing
    nox -s base-image     make the Debian base image locally, where no registry serves one
    nox -s gha-matrix     the GitHub Actions job matrix, as JSON
    nox -s report         merge reports: merged.xml, summary.md, dashboard.html, history
    nox -s tests          the project's own test suite
    nox -s lint           ruff, mypy, the stages' import contract, actionlint, zizmor

On a machine without a registry (a GPU box with its own Python), `nox --no-venv -s test-sm90`
uses the current environment as it is.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nox
from nox.virtualenv import PassthroughEnv

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))  # nox loads this file by path; the harness sits beside it

from harness import images  # noqa: E402
from harness.model import revision  # noqa: E402
from harness.model.matrix import Target, load_matrix  # noqa: E402
from harness.model.provenance import current_commit, runner_name  # noqa: E402
from harness.model.result import Unavailable  # noqa: E402

MATRIX = load_matrix(ROOT / "matrix.yaml")
BACKENDS = ("auto", "host", "docker")

nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session, *requirements: str) -> None:
    """Install into the session's venv; with --no-venv, trust the environment as it is. Said
    before and after: the first install of the nvcc wheels takes tens of seconds, in silence."""
    if isinstance(session.virtualenv, PassthroughEnv):
        return
    toolkit = [r for r in requirements if r.startswith("nvidia-")]
    what = (
        f"the requirements and {len(toolkit)} toolkit wheels (the first time: some 300 MB)"
        if toolkit
        else "the requirements"
    )
    session.log(f"installing {what} ...")
    started = time.monotonic()
    session.install(*requirements)
    session.log(f"installed in {time.monotonic() - started:.1f} s")


def _toolkit_wheels() -> list[str]:
    return sorted({wheel for t in MATRIX.targets.values() for wheel in t.toolkit.wheels})


def _backend(session: nox.Session, target: Target) -> tuple[str, list[str]]:
    """`--backend host|docker|auto` from the session's arguments; the rest go to the harness.

    auto is docker only where docker can work: an engine answers and the target's image is there
    or builds. Otherwise it says why, and runs on the host.
    """
    args, backend = list(session.posargs), "auto"
    if "--backend" in args:
        at = args.index("--backend")
        backend = args[at + 1] if at + 1 < len(args) else ""
        del args[at : at + 2]
    if backend not in BACKENDS:
        session.error(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        problem = images.engine_problem() or _image_problem(target)
        backend = "host" if problem else "docker"
        why = f"docker unavailable: {problem}" if problem else "a docker engine answers"
    else:
        why = "forced by --backend"
    session.log(f"backend: {backend} ({why})")
    return backend, args


def _image_problem(target: Target) -> str | None:
    """None when the target's image is present or builds now; else why not."""
    try:
        images.build(images.image_for(target, ROOT), ROOT)
    except images.ImageError as error:
        return str(error)
    return None


def _in_image(session: nox.Session, target: Target, harness_args: list[str]) -> None:
    """The harness in the target's image, on the host's reports/ and compile cache."""
    image = images.image_for(target, ROOT)
    try:
        images.build(image, ROOT)
    except images.ImageError as error:
        session.error(str(error))
    mounts = images.Mounts.for_project(ROOT)
    gpu = images.host_has_gpu()
    session.log(f"running in {image.tag}" + (" with --gpus all" if gpu else ""))
    passed = {
        "MATRIX_COMMIT": current_commit(ROOT) or "",  # the container has no git
        "MATRIX_RUNNER": runner_name(),  # the host's name, not the container's
    }
    command = images.harness_command(image, mounts, harness_args, gpu, MATRIX.container, passed)
    with mounts.lent():
        session.run(*command, external=True)


def _build_session(target: Target):
    def session(session: nox.Session) -> None:
        image = images.image_for(target, ROOT)
        try:
            built = images.build(image, ROOT)
        except images.ImageError as error:
            session.error(str(error))
        session.log(f"{image.tag}: {'built' if built else 'up to date, nothing to build'}")

    session.__doc__ = (
        f"Build the {target.name} image ({target.image}, CUDA {target.toolkit.version})."
    )
    return session


def _test_session(target: Target):
    def session(session: nox.Session) -> None:
        backend, args = _backend(session, target)
        if backend == "docker":
            _in_image(session, target, ["test", target.name, *args])
            return
        _install(session, "-r", "requirements.txt", *target.toolkit.wheels)
        session.run("python", "-m", "harness", "test", target.name, *args)

    session.__doc__ = f"Compile {target.name} ({target.gencode}) and run it on this machine's GPU."
    return session


def _sanitize_session(target: Target):
    def session(session: nox.Session) -> None:
        backend, args = _backend(session, target)
        if backend == "docker":
            _in_image(session, target, ["sanitize", target.name, *args])
            return
        _install(session, "-r", "requirements.txt", *target.toolkit.wheels)
        session.run("python", "-m", "harness", "sanitize", target.name, *args)

    session.__doc__ = (
        f"Run compute-sanitizer over {target.name} on this machine's GPU (its wheel, in the image "
        "or on the host)."
    )
    return session


def _ab_session(target: Target):
    def session(session: nox.Session) -> None:
        backend, args = _backend(session, target)
        if backend == "docker":
            # The container has no git: the base's kernel trees are written out here, under the
            # project it mounts, and named to it.
            args = _base_tree_args(session, args)
            _in_image(session, target, ["ab", target.name, *args])
            return
        _install(session, "-r", "requirements.txt", *target.toolkit.wheels)
        session.run("python", "-m", "harness", "ab", target.name, *args)

    session.__doc__ = (
        f"Time {target.name}'s changed kernels against a base commit (-- --base REF) on this GPU."
    )
    return session


def _base_tree_args(session: nox.Session, args: list[str]) -> list[str]:
    """`--base REF` in `args` replaced by the folder its kernel trees were written to, inside
    the project, and the commit it resolved to."""
    if "--base" not in args:
        return args
    at = args.index("--base")
    ref = args[at + 1] if at + 1 < len(args) else ""
    rest = args[:at] + args[at + 2 :]
    commit = revision.resolve_commit(ROOT, ref)
    if isinstance(commit, Unavailable):
        session.log(f"ab: {commit.why}: every kernel is judged NEW")
        return [*rest, "--base-tree", str(ROOT / ".cache" / "ab" / "none"), "--base-commit", ref]
    roots = _kernel_roots(rest)
    tree = revision.extract(ROOT, commit, roots, ROOT / ".cache" / "ab")
    mounted = Path(images.CONTAINER_SOURCE) / tree.folder.relative_to(ROOT)
    return [*rest, "--base-tree", str(mounted), "--base-commit", commit]


def _kernel_roots(args: list[str]) -> list[Path]:
    roots = [ROOT / args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--kernels"]
    return roots or [ROOT / "kernels"]


for _target in MATRIX.targets.values():
    nox.session(name=f"build-{_target.session}", venv_backend="none")(_build_session(_target))
    nox.session(name=f"test-{_target.session}")(_test_session(_target))
    nox.session(name=f"sanitize-{_target.session}")(_sanitize_session(_target))
    nox.session(name=f"ab-{_target.session}")(_ab_session(_target))


def _unknown_targets(argv: list[str]) -> list[str]:
    """The sessions asked for (-s, --session, -e) that are a target's kind but name no target
    of matrix.yaml: nox would answer only "Sessions not found"."""
    asked, taking = [], False
    for arg in argv:
        if arg == "--":
            break
        if arg in ("-s", "-e", "--session", "--sessions"):
            taking = True
            continue
        if arg.startswith("-"):
            taking = False
            if arg.startswith(("--session=", "--sessions=")):
                asked += arg.split("=", 1)[1].split(",")
            continue
        if taking:
            asked.append(arg)
    known = {t.session for t in MATRIX.targets.values()}
    kinds = ("build-", "test-", "sanitize-", "ab-")
    return [name for name in asked if name.startswith(kinds) and name.split("-", 1)[1] not in known]


if _unknown := _unknown_targets(sys.argv[1:]):
    _listed = ", ".join(f"{t.name} (test-{t.session})" for t in MATRIX.targets.values())
    print(
        f"nox: {', '.join(_unknown)}: no such target in matrix.yaml; its targets are {_listed}",
        file=sys.stderr,
    )


@nox.session(name="compile")
def compile_all(session: nox.Session) -> None:
    """Compile every kernel for every target on this machine; run nothing."""
    _install(session, "-r", "requirements.txt", *_toolkit_wheels())
    session.run("python", "-m", "harness", "compile", *session.posargs)


@nox.session(name="check")
def check_all(session: nox.Session) -> None:
    """Compile every kernel for every target and check each case's spec on the CPU; no GPU."""
    _install(session, "-r", "requirements.txt", *_toolkit_wheels())
    session.run("python", "-m", "harness", "check", *session.posargs)


@nox.session(name="base-image", venv_backend="none")
def base_image(session: nox.Session) -> None:
    """Make each toolkit's Debian base image locally (debootstrap + docker import)."""
    for base in sorted({t.toolkit.base_image for t in MATRIX.targets.values()}):
        try:
            made = images.make_base(base)
        except images.ImageError as error:
            session.error(str(error))
        session.log(f"{base}: {'made from a debootstrap root filesystem' if made else 'present'}")


@nox.session(name="gha-matrix", venv_backend="none")
def gha_matrix(session: nox.Session) -> None:
    """Print the GitHub Actions job matrix (one entry per target of matrix.yaml, one per shard
    of a target split in shards) as JSON; `-- images`: one entry per target, for its image."""
    jobs = MATRIX.github_images() if session.posargs == ["images"] else MATRIX.github_jobs()
    print(json.dumps({"include": jobs}))


@nox.session
def report(session: nox.Session) -> None:
    """Merge reports/junit-*.xml into merged.xml, summary.md and dashboard.html; keep history."""
    _install(session, "-r", "requirements.txt")
    session.run("python", "-m", "harness", "report", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The project's own test suite (compiles for real; GPU tests skip without a GPU)."""
    _install(session, "-r", "requirements.txt", "-r", "requirements-test.txt", *_toolkit_wheels())
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, mypy over harness/, the stages' import contract, actionlint and zizmor."""
    _install(session, "-r", "requirements.txt", "-r", "requirements-test.txt")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")  # [tool.mypy] in pyproject.toml: harness/, strictly typed
    session.run("lint-imports")  # [tool.importlinter]: each stage imports earlier ones only
    session.run("actionlint", external=True)
    session.run("zizmor", "--offline", ".github/workflows", external=True)
