"""The matrix's nox sessions, for this repository and for any project that adopts cuda-matrix:
its own `matrix.yaml` and `kernels/`, and a noxfile of a few lines:

    import nox
    from harness.sessions import add_sessions

    add_sessions(nox)

Each target of matrix.yaml gets `test-<session>`, `sanitize-<session>`, `ab-<session>` and
`build-<session>` (its image); the project gets `compile`, `check`, `report`, `base-image` and
`gha-matrix` (what the reusable workflow plans its jobs with). test, sanitize and ab run in the
target's image where a docker engine answers (`--backend docker|host|auto`, auto by default):
the image holds the toolchain, and the project and the harness that nox runs are mounted into
it. On the host, a session installs `install` (by default the cuda-matrix that nox runs, as it
was installed) into its virtualenv, and the pinned wheels of each toolkit its targets use into a
folder of that toolkit's there (nothing with `nox --no-venv`), and runs the harness there. A
target's columns are one per toolkit (matrix.yaml), each with its sessions.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from harness import images
from harness.compile.toolchain import toolkit_folder
from harness.model import revision
from harness.model.errors import Unavailable
from harness.model.matrix import Matrix, Target, Toolkit, load_matrix
from harness.model.provenance import current_commit, runner_name

BACKENDS = ("auto", "host", "docker")
KINDS = ("build-", "test-", "sanitize-", "ab-")
TOOLKIT_STAMP = ".pinned"  # in a toolkit's folder: the wheels installed there


@dataclass(frozen=True)
class Project:
    """A project's matrix, and how its sessions install and run the harness on the host."""

    root: Path
    matrix: Matrix
    install: tuple[str, ...]  # pip's arguments for the harness and its dependencies
    command: tuple[str, ...]  # the harness's command line in the session's environment

    def toolkits(self, target: Target | None = None, its_others: bool = False) -> list[Toolkit]:
        """The toolkit of `target` (`its_others`: and of every column of its target, which an
        upgrade report builds with), or of every target; each once."""
        chosen = [target] if target else list(self.matrix.targets.values())
        if target and its_others:
            chosen += [t for t in self.matrix.targets.values() if t.gencode == target.gencode]
        return list({t.toolkit.version: t.toolkit for t in chosen}.values())


def add_sessions(
    nox: Any,
    root: Path | None = None,
    install: Sequence[str] | None = None,
    command: Sequence[str] = ("cuda-matrix",),
) -> Project:
    """Register the sessions with `nox` (the module a noxfile imports); the project. `root`:
    the project (default: nox's working directory, the noxfile's folder). `install`: what a
    host session installs (default: `installed_requirement()`)."""
    folder = Path(root or Path.cwd())
    project = Project(
        folder,
        load_matrix(folder / "matrix.yaml"),
        tuple(install) if install is not None else (installed_requirement(),),
        tuple(command),
    )

    def define(
        name: str, run: Callable[[Any], None], doc: str, default: bool = True, venv: bool = True
    ) -> None:
        run.__doc__ = doc
        nox.session(name=name, default=default, **({} if venv else {"venv_backend": "none"}))(run)

    for target in project.matrix.targets.values():
        s, t = target.session, target.name
        define(
            f"test-{s}",
            _in_target(project, target, "test"),
            f"Compile {t} ({target.gencode}) and run it on this machine's GPU (in the image "
            "or on the host).",
        )
        define(
            f"sanitize-{s}",
            _in_target(project, target, "sanitize"),
            f"Run compute-sanitizer over {t} on this machine's GPU (in the image or on the host).",
        )
        define(
            f"ab-{s}",
            _in_target(project, target, "ab"),
            f"Time {t}'s changed kernels against a base commit (-- --base REF) on this GPU.",
            default=False,  # it needs -- --base REF: never part of a bare `nox`
        )
        define(
            f"build-{s}",
            _build(target),
            f"Build the {t} image ({target.image}, CUDA {target.toolkit.version}).",
            default=False,
            venv=False,
        )
    define(
        "compile",
        _on_host(project, project.toolkits(), "compile"),
        "Compile every kernel for every target on this machine; run nothing.",
    )
    define(
        "check",
        _on_host(project, project.toolkits(), "check"),
        "Compile every kernel for every target and check each case's spec on the CPU; no GPU.",
    )
    define(
        "report",
        _on_host(project, [], "report"),
        "Merge reports/junit-*.xml into merged.xml, summary.md and dashboard.html; keep history.",
    )
    define(
        "base-image",
        _base_image(project),
        "Make each toolkit's Debian base image locally (debootstrap + docker import).",
        default=False,
        venv=False,
    )
    define(
        "gha-matrix",
        _plan(project),
        "Print the GitHub Actions job matrix (one entry per target, one per shard of a target "
        "split in shards) as JSON; `-- images`: one entry per target, for its image.",
        default=False,
        venv=False,
    )
    if unknown := unknown_targets(project.matrix, sys.argv[1:]):
        listed = ", ".join(f"{t.name} (test-{t.session})" for t in project.matrix.targets.values())
        print(
            f"nox: {', '.join(unknown)}: no such target in matrix.yaml; its targets are {listed}",
            file=sys.stderr,
        )
    return project


def installed_requirement() -> str:
    """The cuda-matrix that runs now, as pip would install it again: from where it was
    installed (a git commit, a wheel or a folder, as pip recorded it), else by its version."""
    try:
        found = metadata.distribution("cuda-matrix")
    except metadata.PackageNotFoundError:
        return "cuda-matrix"
    try:
        recorded = json.loads(found.read_text("direct_url.json") or "null")
    except ValueError:  # a record pip did not write: the version still names it
        recorded = None
    if not isinstance(recorded, dict) or "url" not in recorded:
        return f"cuda-matrix=={found.version}"
    vcs = recorded.get("vcs_info")
    if isinstance(vcs, dict) and "commit_id" in vcs:
        return f"cuda-matrix @ {vcs['vcs']}+{recorded['url']}@{vcs['commit_id']}"
    return f"cuda-matrix @ {recorded['url']}"


def install(session: Any, *requirements: str, toolkits: Sequence[Toolkit] = ()) -> None:
    """Install into the session's venv, and each of `toolkits` pinned wheels in a folder of its
    own there (harness.compile.toolchain finds them); with --no-venv, trust the environment as
    it is. Said before and after: the first install of a toolkit takes tens of seconds."""
    from nox.virtualenv import PassthroughEnv  # nox is there when a session runs

    if isinstance(session.virtualenv, PassthroughEnv):
        return
    session.log("installing the harness ...")
    started = time.monotonic()
    session.install(*requirements)
    session.log(f"installed in {time.monotonic() - started:.1f} s")
    for toolkit in toolkits:
        if toolkit.wheels:
            _install_toolkit(session, toolkit)


def _install_toolkit(session: Any, toolkit: Toolkit) -> None:
    """`toolkit`'s wheels, exactly as pinned (no dependencies of their own), into its folder
    of the venv; nothing where the folder holds them already, its nvcc among them."""
    folder = toolkit_folder(toolkit.version, Path(session.virtualenv.location))
    stamp, pinned = folder / TOOLKIT_STAMP, "\n".join(toolkit.wheels)
    whole = any(folder.glob("nvidia/cu*/bin/nvcc"))  # not a folder emptied by hand since
    if stamp.is_file() and stamp.read_text() == pinned and whole:
        return
    shutil.rmtree(folder, ignore_errors=True)  # another pin set's, or a broken install
    session.log(
        f"installing CUDA {toolkit.version}: {len(toolkit.wheels)} wheels (13.x: 120-160 MB)"
    )
    started = time.monotonic()
    try:  # run_install: also under `nox --install-only`, which prepares venvs for later runs
        session.run_install(
            "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(folder),
            *toolkit.wheels,
        )
    except Exception as error:  # nox's CommandFailed: pip said why above
        session.error(
            f"toolkit {toolkit.version}: pip could not install matrix.yaml's "
            f"toolkits.{toolkit.version}.wheels ({error}): is each a released version?"
        )
    stamp.write_text(pinned)
    session.log(f"CUDA {toolkit.version} installed in {time.monotonic() - started:.1f} s")


def _on_host(project: Project, toolkits: list[Toolkit], *command: str) -> Callable[[Any], None]:
    def session(session: Any) -> None:
        install(session, *project.install, toolkits=toolkits)
        session.run(*project.command, *command, *session.posargs)

    return session


def _in_target(project: Project, target: Target, command: str) -> Callable[[Any], None]:
    def session(session: Any) -> None:
        backend, args = _backend(session, project, target)
        if backend == "docker":
            if command == "ab":
                args = base_tree_args(session, project.root, args)
            _in_image(session, project, target, [command, target.name, *args])
            return
        toolkits = project.toolkits(target, its_others=command == "ab")
        install(session, *project.install, toolkits=toolkits)
        session.run(*project.command, command, target.name, *args)

    return session


def _backend(session: Any, project: Project, target: Target) -> tuple[str, list[str]]:
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
        images.build(images.image_for(target))
    except images.ImageError as error:
        return str(error)
    return None


def _in_image(session: Any, project: Project, target: Target, harness_args: list[str]) -> None:
    """The harness in the target's image, on the project's reports/ and compile cache."""
    image = images.image_for(target)
    try:
        images.build(image)
    except images.ImageError as error:
        session.error(str(error))
    mounts = images.Mounts.for_project(project.root)
    gpu = images.host_has_gpu()
    session.log(f"running in {image.tag}" + (" with --gpus all" if gpu else ""))
    passed = {
        "MATRIX_COMMIT": current_commit(project.root) or "",  # the container has no git
        "MATRIX_RUNNER": runner_name(),  # the host's name, not the container's
        **vouched_commits(project.root, harness_args),
    }
    limits = project.matrix.container
    command = images.harness_command(image, mounts, harness_args, gpu, limits, passed)
    with mounts.lent():
        session.run(*command, external=True)


def vouched_commits(root: Path, args: list[str]) -> dict[str, str]:
    """For `--carry-from DB` in `args`: which of that history's commits the project's
    repository has, as the host's git says (the container has none), for the harness there."""
    if "--carry-from" not in args or args.index("--carry-from") + 1 >= len(args):
        return {}
    from harness.report.history import history_commits  # only for a run that carries

    history = root / args[args.index("--carry-from") + 1]
    known = revision.known_commits(root, history_commits(history))
    return {} if isinstance(known, Unavailable) else {revision.VOUCHED: ",".join(sorted(known))}


def base_tree_args(session: Any, root: Path, args: list[str]) -> list[str]:
    """`--base REF` (or `--base=REF`) in `args` replaced by the folder its kernel trees were
    written to, inside the project (the container has no git), and the commit it resolved to.
    A REF that names no commit stops the session, unless `--no-base-ok` is given."""
    args = [part for arg in args for part in _split_base(arg)]
    if "--base" not in args:
        return args
    at = args.index("--base")
    ref = args[at + 1] if at + 1 < len(args) else ""
    rest = args[:at] + args[at + 2 :]
    commit = revision.resolve_commit(root, ref)
    if isinstance(commit, Unavailable):
        if "--no-base-ok" not in rest:
            session.error(f"ab: --base {ref!r}: {commit.why}; pass --no-base-ok to judge NEW")
        session.log(f"ab: {commit.why}: every kernel is judged NEW")
        return [*rest, "--base-tree", str(root / ".cache" / "ab" / "none"), "--base-commit", ref]
    folders = [root / args[i + 1] for i, arg in enumerate(rest[:-1]) if arg == "--kernels"]
    tree = revision.extract(root, commit, folders or [root / "kernels"], root / ".cache" / "ab")
    mounted = Path(images.CONTAINER_SOURCE) / tree.folder.relative_to(root)
    return [*rest, "--base-tree", str(mounted), "--base-commit", commit]


def _split_base(arg: str) -> list[str]:
    """`--base=REF` as the two arguments `--base REF`, as argparse reads it."""
    if arg.startswith("--base="):
        return ["--base", arg.removeprefix("--base=")]
    return [arg]


def _build(target: Target) -> Callable[[Any], None]:
    def session(session: Any) -> None:
        image = images.image_for(target)
        try:
            built = images.build(image)
        except images.ImageError as error:
            session.error(str(error))
        session.log(f"{image.tag}: {'built' if built else 'up to date, nothing to build'}")

    return session


def _base_image(project: Project) -> Callable[[Any], None]:
    def session(session: Any) -> None:
        for base in sorted({t.toolkit.base_image for t in project.matrix.targets.values()}):
            try:
                made = images.make_base(base)
            except images.ImageError as error:
                session.error(str(error))
            said = "made from a debootstrap root filesystem" if made else "present"
            session.log(f"{base}: {said}")

    return session


def _plan(project: Project) -> Callable[[Any], None]:
    def session(session: Any) -> None:
        matrix = project.matrix
        jobs = matrix.github_images() if session.posargs == ["images"] else matrix.github_jobs()
        print(json.dumps({"include": jobs}))

    return session


def unknown_targets(matrix: Matrix, argv: list[str]) -> list[str]:
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
    known = {t.session for t in matrix.targets.values()}
    return [name for name in asked if name.startswith(KINDS) and name.split("-", 1)[1] not in known]
