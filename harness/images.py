"""One container image per target: its tag from the content of its build inputs, its build, and
the `docker run` that tests a target inside it.

The tag is a hash of everything that goes into the image (Dockerfile, entry point, requirements,
the target's toolkit wheels and base image), so an unchanged image is found by its tag and never
rebuilt, and an image CI built and saved is the one a laptop looks for. A CA bundle for pip behind
a proxy changes how the image is fetched, not what it holds: it is no part of the tag.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness.model.matrix import ContainerLimits, Target

DOCKERFILE = Path("docker") / "Dockerfile"
CONTEXT_FILES = (DOCKERFILE, Path("docker") / "entrypoint.sh", Path("requirements.txt"))
CONTAINER_SOURCE = "/src"
CONTAINER_OUT = "/out"
# The harness that runs in the container: the one on the host, mounted, never baked in, so the
# image holds the toolchain alone and a project runs the cuda-matrix it pinned.
PACKAGE = Path(__file__).resolve().parent
CONTAINER_HARNESS = "/opt/cuda-matrix"


def build_files() -> Path:
    """Where the images' build files (CONTEXT_FILES) are: this checkout, or the copy a wheel of
    cuda-matrix carries inside its package (setup.py puts it there)."""
    checkout = PACKAGE.parent
    return checkout if (checkout / DOCKERFILE).is_file() else PACKAGE / "image"


class ImageError(Exception):
    """docker is missing or a build failed; the message says which and how to fix it."""


@dataclass(frozen=True)
class Image:
    target: Target
    tag: str  # <target.image>:<content hash>
    build_args: dict[str, str]
    files: Path  # where CONTEXT_FILES are

    @property
    def labels(self) -> dict[str, str]:
        return {
            "org.cuda-matrix.target": self.target.name,
            "org.cuda-matrix.toolkit": self.target.toolkit.version,
        }


# Where a CA bundle for pip may be named, in order: the matrix's own, then what the host's tools
# already trust (a TLS-inspecting proxy's CA is usually set there).
CA_BUNDLE_VARIABLES = ("MATRIX_CA_BUNDLE", "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")


def _extra_ca() -> bytes:
    """The CA bundle pip in the build should trust, or nothing: the first of
    CA_BUNDLE_VARIABLES that names a readable file."""
    for variable in CA_BUNDLE_VARIABLES:
        named = os.environ.get(variable, "")
        if named and Path(named).is_file():
            return Path(named).read_bytes()
    return b""


def image_for(target: Target, files: Path | None = None) -> Image:
    """The target's image, from the build files in `files` (default: build_files())."""
    files = files or build_files()
    build_args = {
        "BASE_IMAGE": target.toolkit.base_image,
        "TOOLKIT_WHEELS": " ".join(target.toolkit.wheels),
        "TARGET": target.name,
        "TOOLKIT": target.toolkit.version,
    }
    digest = hashlib.sha256()
    for relative in CONTEXT_FILES:
        digest.update(str(relative).encode() + b"\0" + (files / relative).read_bytes() + b"\0")
    for key, value in sorted(build_args.items()):
        digest.update(f"{key}={value}\0".encode())
    return Image(target, f"{target.image}:{digest.hexdigest()[:16]}", build_args, files)


def engine_problem() -> str | None:
    """None when a docker engine answers; else why not, in a few words."""
    if shutil.which("docker") is None:
        return "no docker command on PATH"
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"docker info failed: {error}"
    if result.returncode != 0:
        return (
            "no docker engine answers (" + (result.stderr.strip().splitlines() or ["?"])[-1] + ")"
        )
    return None


def exists(tag: str) -> bool:
    result = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    return result.returncode == 0


def build(image: Image, show: TextIO | None = None) -> bool:
    """Build unless an image with this content tag exists; True when it built. docker's output
    goes to `show` (stdout by default) as it comes; a failed build names its cause."""
    if exists(image.tag):
        return False
    show = show or sys.stdout
    with tempfile.TemporaryDirectory() as context:
        for relative in CONTEXT_FILES:
            shutil.copy(image.files / relative, Path(context) / relative.name)
        (Path(context) / "extra-ca.crt").write_bytes(_extra_ca())
        dockerfile = str(Path(context) / DOCKERFILE.name)
        command = ["docker", "build", "--tag", image.tag, "--file", dockerfile]
        for key, value in image.build_args.items():
            command += ["--build-arg", f"{key}={value}"]
        for key, value in image.labels.items():
            command += ["--label", f"{key}={value}"]
        print(f"building {image.tag} (a few minutes the first time)", file=show, flush=True)
        output: list[str] = []
        with subprocess.Popen(
            [*command, context],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as running:
            for line in running.stdout or ():
                output.append(line.rstrip("\n"))
                print(line, end="", file=show, flush=True)
    if running.returncode != 0:
        raise ImageError(
            f"docker build of {image.tag} failed (exit {running.returncode}): "
            + build_failure(output, image.build_args["BASE_IMAGE"])
        )
    return True


def build_failure(output: list[str], base: str) -> str:
    """The cause of a failed build, from docker's output: pip's error line, with a hint where the
    cause is known (a certificate pip cannot verify, a base image no registry serves)."""
    text = "\n".join(output)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "pip could not verify PyPI's TLS certificate. Behind a TLS-inspecting proxy, name its "
            "CA bundle: MATRIX_CA_BUNDLE=/path/to/ca.pem"
        )
    if base in text and any(
        marker in text for marker in ("pull access denied", "not found", "manifest unknown")
    ):
        return f"the base image {base} cannot be pulled here; make it locally: nox -s base-image"
    errors = [line.strip() for line in output if "ERROR" in line or "error:" in line.lower()]
    last = errors[-1] if errors else (output[-1].strip() if output else "no output")
    return last[:500]


# The Dockerfile's unprivileged user: who runs the kernels when the invoker is root.
IMAGE_USER = (10001, 10001)


@dataclass(frozen=True)
class Mounts:
    """Where a container's read-only sources and writable reports and cache live on the host, and
    who the container runs as.

    The container runs as the invoking user (`owner`), so what it writes is theirs and no folder
    needs opening to others. Root is never lent to a kernel: for a root invoker the container
    runs as the image's user, the writable folders are handed to it for the run and handed back
    after (`lent`), and nothing is ever made world-writable.
    """

    source: Path
    reports: Path
    cache: Path
    owner: tuple[int, int]  # the invoker's uid and gid
    harness: Path = PACKAGE  # the harness package the container runs

    @classmethod
    def for_project(cls, root: Path) -> Mounts:
        """The host's own reports/ and compile cache: the cache's keys hash nvcc's version, its
        headers, the host compiler's version and the sources, never a path, so a build made on
        the host serves the container and back wherever the toolchains are the same."""
        cache = root / ".cache" / "compile"
        return cls(root, root / "reports", cache, (os.getuid(), os.getgid()))

    @property
    def user(self) -> tuple[int, int]:
        """Who the container runs as: the invoker, or the image's user in place of root."""
        return IMAGE_USER if self.owner[0] == 0 else self.owner

    @contextlib.contextmanager
    def lent(self) -> Iterator[None]:
        """The writable folders, made and owned by the container's user while it runs."""
        for folder in (self.reports, self.cache):
            folder.mkdir(parents=True, exist_ok=True)
        if self.user == self.owner:
            yield
            return
        _chown_tree((self.reports, self.cache), self.user)
        try:
            yield
        finally:
            _chown_tree((self.reports, self.cache), self.owner)


def _chown_tree(folders: tuple[Path, ...], owner: tuple[int, int]) -> None:
    """Every entry under `folders` (links themselves, never what they point to) to `owner`."""
    for folder in folders:
        os.chown(folder, *owner, follow_symlinks=False)
        for parent, names, files in os.walk(folder):
            for name in names + files:
                os.chown(os.path.join(parent, name), *owner, follow_symlinks=False)


def container_flags(mounts: Mounts, gpu: bool, limits: ContainerLimits) -> list[str]:
    """`docker run` and its flags: sources and the harness read-only, no network, reports and
    cache writable, and nothing else: no capabilities, no privilege gained through setuid, a
    read-only root filesystem (scratch in a /tmp of memory), and bounded processes and memory."""
    flags = [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--user",
        "{}:{}".format(*mounts.user),
        "--read-only",
        "--tmpfs",
        "/tmp:rw,exec,size=8g",  # nvcc writes its intermediate files there
        "--env",
        "HOME=/tmp",
        "--env",
        "CUDA_CACHE_PATH=/tmp/cuda-cache",  # the driver's JIT cache, off the read-only root
        "--pids-limit",
        str(limits.pids),
        "--memory",
        limits.memory,
        "--volume",
        f"{mounts.source}:{CONTAINER_SOURCE}:ro",
        "--volume",
        f"{mounts.harness}:{CONTAINER_HARNESS}/harness:ro",
        "--volume",
        f"{mounts.reports}:{CONTAINER_OUT}/reports",
        "--volume",
        f"{mounts.cache}:{CONTAINER_OUT}/cache",
    ]
    return [*flags, "--gpus", "all"] if gpu else flags


def harness_command(
    image: Image,
    mounts: Mounts,
    harness_args: list[str],
    gpu: bool,
    limits: ContainerLimits,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The harness in the image, writing its reports to the host through the mounts; `env`
    reaches it (the commit, which the container cannot read from git)."""
    passed = [item for key, value in (env or {}).items() for item in ("--env", f"{key}={value}")]
    return [
        *container_flags(mounts, gpu, limits),
        *passed,
        image.tag,
        *harness_args,
        "--reports",
        f"{CONTAINER_OUT}/reports",
        "--cache",
        f"{CONTAINER_OUT}/cache",
    ]


def host_has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def make_base(name: str, mirror: str = "http://deb.debian.org/debian") -> bool:
    """Make `debian:<suite>[-slim]` locally from a debootstrap root filesystem; True if made.

    For machines that reach Debian's package archive but no image registry. The image gets the
    name users would pull, so the Dockerfile stays the same everywhere.
    """
    if exists(name):
        return False
    repository, _, version = name.partition(":")
    suite = version.removesuffix("-slim")
    if repository != "debian" or not suite.isalpha():
        raise ImageError(f"can only make debian:<suite>[-slim] locally, not {name!r}")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is not installed (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory() as scratch:
        rootfs = Path(scratch) / "rootfs"
        debootstrap = ["debootstrap", "--variant=minbase", suite, str(rootfs), mirror]
        if subprocess.run(debootstrap, capture_output=True).returncode != 0:
            raise ImageError(f"debootstrap {suite} from {mirror} failed")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", name], stdin=tar.stdout)
        tar.wait()
    if imported.returncode != 0 or tar.returncode != 0:
        raise ImageError(f"docker import of the {suite} root filesystem as {name} failed")
    return True
