"""Another commit's kernel trees, as files: what `ab` builds its base from; and which commits the
project's repository has: where a carried verdict may come from.

`git archive` writes the commit's files under the kernel trees' paths into a folder of their
own, laid out as the project is, so the base's headers and chapter modules sit where its specs
and sources look for them. Nothing of the working tree is touched.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.model.errors import Unavailable


@dataclass(frozen=True)
class BaseTree:
    """The base commit's files of the kernel trees, under `folder` as under `project`."""

    commit: str
    folder: Path
    project: Path

    def root_of(self, head_root: Path) -> Path | Unavailable:
        """Where the base keeps the kernel tree the head has at `head_root`."""
        try:
            relative = head_root.resolve().relative_to(self.project.resolve())
        except ValueError:
            return Unavailable(f"{head_root} is outside the project, so no commit holds it")
        return self.folder / relative


def resolve_commit(project: Path, ref: str) -> str | Unavailable:
    """The full SHA `ref` names in the project's repository, or why it names none."""
    found = _git(project, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if isinstance(found, Unavailable):
        return Unavailable(f"{ref!r} is not a commit of {project}: {found.why}")
    return found.decode().strip()


# Where a container (which has no git) is told which commits the host's repository has
VOUCHED = "MATRIX_KNOWN_COMMITS"


def known_commits(project: Path, commits: set[str]) -> set[str] | Unavailable:
    """Which of `commits` (full SHAs) the project's repository has, or why it cannot say."""
    listed = "".join(f"{commit}^{{commit}}\n" for commit in sorted(commits))
    try:
        done = subprocess.run(
            ["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"],
            input=listed.encode(),
            capture_output=True,
            cwd=project,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return Unavailable(f"git could not run ({error})")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return Unavailable(said[-1] if said else f"git cat-file exited {done.returncode}")
    found = {
        line.split()[0] for line in done.stdout.decode().splitlines() if line.endswith(" commit")
    }
    return commits & found


def extract(project: Path, commit: str, kernel_roots: list[Path], into: Path) -> BaseTree:
    """The commit's files under each of `kernel_roots` (those inside the project), written
    below `into/<commit>`; a root the commit does not have is simply absent there."""
    folder = into / commit
    paths = []
    for root in kernel_roots:
        try:
            paths.append(root.resolve().relative_to(project.resolve()).as_posix())
        except ValueError:
            continue  # outside the project: BaseTree.root_of says so
    for path in paths:
        archive = _git(project, "archive", "--format=tar", commit, "--", path)
        if isinstance(archive, Unavailable):  # the commit has no such folder
            continue
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            _extract_inside(tar, folder)
    folder.mkdir(parents=True, exist_ok=True)
    return BaseTree(commit, folder, project)


def _git(project: Path, *args: str) -> bytes | Unavailable:
    try:
        done = subprocess.run(["git", *args], capture_output=True, cwd=project, timeout=120)
    except (OSError, subprocess.SubprocessError) as error:
        return Unavailable(f"git could not run ({error})")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return Unavailable(said[-1] if said else f"git {args[0]} exited {done.returncode}")
    return done.stdout


def _extract_inside(tar: tarfile.TarFile, folder: Path) -> None:
    """The archive's files and folders, and its links that stay inside it, written below
    `folder`: no absolute path, no `..`, no link out, no device. Python's own "data" filter
    where it has one (3.12, and 3.11 from 3.11.4); the same rules by hand on an older one
    (Debian 12's Python is 3.11.2)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(folder, filter="data")
        return
    kept = []
    for member in tar.getmembers():
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts:
            raise ValueError(f"the archive's {member.name!r} leaves its folder")
        if member.issym() or member.islnk():
            target = PurePosixPath(member.linkname)
            inside = name.parent / target if member.issym() else target
            if target.is_absolute() or ".." in PurePosixPath(os.path.normpath(inside)).parts:
                raise ValueError(f"the archive's link {member.name!r} points out of its folder")
        elif not (member.isfile() or member.isdir()):
            continue  # a device or a FIFO: nothing a kernel tree holds
        kept.append(member)
    tar.extractall(folder, members=kept)  # every member was checked above
