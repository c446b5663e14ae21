"""Which nvcc compiles a column of the matrix, what version it is, and where its toolkit lies.

$NVCC, if set, is the nvcc (it must work). A toolkit installed at a path (matrix.yaml's
`toolkits.<version>.path`) is that path's bin/nvcc, or none. Otherwise, in order: the toolkit's
pinned wheels in a folder of their own beside this Python (<prefix>/cuda-toolkits/<version>,
where the sessions install each toolkit: two releases of one wheel cannot share site-packages;
$CUDA_MATRIX_TOOLKITS/<version> where that is set),
$CUDA_HOME/bin/nvcc, the CUDA wheels installed in this Python (nvidia/cu13/bin/nvcc), nvcc on
PATH. The first of them of the toolkit's release wins; where none is, the first that exists
(the compile stage refuses it, naming both releases). Versions are read from
`nvcc --version`, never assumed.

Its toolkit is the one nvcc reports (`nvcc --dryrun` prints its profile: TOP, INCLUDES,
LIBRARIES), not the folder above the nvcc named: on runners that is often a wrapper script that
execs the real nvcc elsewhere. cuobjdump, nvdisasm and the device libraries (cudadevrt) are
looked for in that toolkit, then in the pinned wheels of its release in this Python
(nvidia/cu13/bin and lib: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm, nvidia-cuda-runtime).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import string
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness import processes
from harness.model.matrix import Toolkit

TOOLKITS_FOLDER = "cuda-toolkits"  # under the Python's prefix: each toolkit's wheels, apart
TOOLKITS_VARIABLE = "CUDA_MATRIX_TOOLKITS"  # a folder of them elsewhere

# nvcc answers a dry run at once; one that takes longer is not a working nvcc (or a stand-in)
DRYRUN_TIMEOUT_S = 5.0


class ToolchainError(Exception):
    """No usable nvcc; the message lists where it looked."""


@dataclass(frozen=True)
class ToolkitLayout:
    """The toolkit nvcc compiles with, as it reports it: its root and the folders of its
    headers and libraries."""

    root: Path
    include_dirs: tuple[Path, ...] = ()
    library_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Toolchain:
    """The nvcc that compiles (perhaps a wrapper), and the toolkit it reports it runs from."""

    nvcc: Path
    version: str  # "13.0.88"
    origin: str  # which rule found it, for the report
    # what nvcc reported of its toolkit (find_toolchain asks it once); None where it did not
    # say: then the toolkit is the folder above nvcc's own file
    layout: ToolkitLayout | None = None
    wheels: tuple[Path, ...] = ()  # the pinned wheels of this release here (nvidia/cu13)

    @property
    def release(self) -> str:  # "13.0"
        return _release(self.version)

    @property
    def major(self) -> str:  # "13"
        return self.version.split(".")[0]

    @property
    def root(self) -> Path:
        """The toolkit's root: /usr/local/cuda-13.0, or a wheel's nvidia/cu13."""
        return self.layout.root if self.layout else self.nvcc.resolve().parent.parent

    @property
    def include_dirs(self) -> tuple[Path, ...]:
        """The toolkit's header folders, as nvcc passes them to the host compiler."""
        if self.layout and self.layout.include_dirs:
            return self.layout.include_dirs
        return (self.root / "include",)

    @property
    def tool_dirs(self) -> tuple[Path, ...]:
        """Where the toolkit's programs are looked for, in this order."""
        return _unique([self.root / "bin", *(wheel / "bin" for wheel in self.wheels)])

    @property
    def library_dirs(self) -> tuple[Path, ...]:
        """Where the toolkit's static libraries are looked for, in this order: the folders nvcc
        links from, lib/ (the wheels), lib64/ and targets/<triple>/lib/ (an installed
        toolkit), then the pinned wheels' lib/."""
        root = self.root
        return _unique(
            [
                *(self.layout.library_dirs if self.layout else ()),
                root / "lib",
                root / "lib64",
                *sorted(root.glob("targets/*/lib")),
                *(wheel / "lib" for wheel in self.wheels),
            ]
        )

    def tool(self, name: str) -> Path | None:
        """The toolkit's program `name` (cuobjdump, nvdisasm); None where absent."""
        return next((d / name for d in self.tool_dirs if _executable(d / name)), None)

    @property
    def cuobjdump(self) -> Path:
        """cuobjdump of the toolkit or the wheels (nvidia-cuda-cuobjdump); where neither has
        one, the toolkit's own path, which is absent."""
        return self.tool("cuobjdump") or self.root / "bin" / "cuobjdump"

    @property
    def nvdisasm(self) -> Path:
        """nvdisasm (cuobjdump -sass runs it), as cuobjdump is found."""
        return self.tool("nvdisasm") or self.root / "bin" / "nvdisasm"

    def library(self, name: str) -> Path | None:
        """The toolkit's static device library `lib<name>.a` (cudadevrt); None where absent."""
        found = (folder / f"lib{name}.a" for folder in self.library_dirs)
        return next((path for path in found if path.is_file()), None)

    def not_found(self, filename: str) -> str:
        """That `filename` (cuobjdump, libcudadevrt.a) is in none of the folders it is looked
        for in, naming them."""
        folders = self.library_dirs if filename.endswith(".a") else self.tool_dirs
        looked = ", ".join(map(str, folders))
        if not self.wheels:
            looked += f"; this Python has no CUDA {self.major} wheels"
        return f"no {filename} for {self.nvcc}: looked in {looked}"


def _unique(folders: Iterable[Path]) -> tuple[Path, ...]:
    """Each folder once, by where it leads (an installed toolkit's lib64 is a link to lib)."""
    return tuple(dict.fromkeys(folder.resolve() for folder in folders))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _wheel_roots() -> list[Path]:
    """The folders of the nvidia wheels installed in this Python (site-packages/nvidia: a
    namespace package, which may span several)."""
    found = importlib.util.find_spec("nvidia")
    return [Path(root) for root in (found and found.submodule_search_locations) or ()]


def _wheel_nvcc(roots: Iterable[Path]) -> Path | None:
    for root in roots:
        for candidate in sorted(root.glob("cu*/bin/nvcc")):
            return candidate
    return None


def wheel_folders(major: str, roots: Iterable[Path] | None = None) -> tuple[Path, ...]:
    """The pinned wheels' folder of CUDA `major` under `roots` (default: this Python's):
    nvidia/cu13 holds bin/ and lib/ of every CUDA 13 wheel (nvcc, cuobjdump, nvdisasm, the
    runtime's libcudadevrt.a)."""
    found = _wheel_roots() if roots is None else roots
    return tuple(root / f"cu{major}" for root in found if (root / f"cu{major}").is_dir())


def toolkit_folder(version: str, prefix: Path | None = None) -> Path:
    """Where the sessions install toolkit `version`'s wheels (pip --target): beside the Python
    at `prefix` (default: this one's)."""
    return Path(sys.prefix if prefix is None else prefix) / TOOLKITS_FOLDER / version


def _own_folder(toolkit: Toolkit, env: Mapping[str, str]) -> Path:
    """Where `toolkit`'s wheels are looked for: in $CUDA_MATRIX_TOOLKITS/<version> where it is
    set (toolkits installed once for several Pythons), else beside this Python."""
    shared = env.get(TOOLKITS_VARIABLE)
    return Path(shared) / toolkit.version if shared else toolkit_folder(toolkit.version)


def find_toolchain(
    env: Mapping[str, str] | None = None, toolkit: Toolkit | None = None
) -> Toolchain:
    """The nvcc of `toolkit` (where None: the first found), as the module's docstring orders."""
    env = os.environ if env is None else env
    if env.get("NVCC"):  # named explicitly: use it or say why not, never fall back silently
        named = Path(env["NVCC"])
        if not _executable(named):
            raise ToolchainError(f"$NVCC is {named}, which is not an executable file")
        return _toolchain(named, "$NVCC")
    if toolkit is not None and toolkit.path is not None:
        return _installed(toolkit, toolkit.path, env)
    candidates: list[tuple[Path, str, tuple[Path, ...]]] = []
    if toolkit is not None:
        own = _own_folder(toolkit, env) / "nvidia"
        if nvcc := _wheel_nvcc([own]):
            candidates.append((nvcc, f"its wheels in {TOOLKITS_FOLDER}/", (own,)))
    if env.get("CUDA_HOME"):
        candidates.append((Path(env["CUDA_HOME"]) / "bin" / "nvcc", "$CUDA_HOME", ()))
    if wheel := _wheel_nvcc(_wheel_roots()):
        candidates.append((wheel, "PyPI wheel", ()))
    if on_path := shutil.which("nvcc", path=env.get("PATH")):
        candidates.append((Path(on_path), "PATH", ()))
    found = [(path, origin, roots) for path, origin, roots in candidates if _executable(path)]
    if not found:
        tried = [f"{origin} -> {path}" for path, origin, _ in candidates] or [
            "$CUDA_HOME unset, no nvidia-cuda-nvcc wheel, no nvcc on PATH"
        ]
        raise ToolchainError(
            "no nvcc found (tried: " + "; ".join(tried) + "). Install the pinned wheels "
            "(nox does) or set NVCC=/path/to/nvcc"
        )
    if toolkit is not None:
        for path, origin, roots in found:
            try:
                version = nvcc_version(path)
            except ToolchainError:  # a broken one is said of below, where it comes first
                continue
            if _release(version) == toolkit.version:
                return _toolchain(path, origin, roots, version)
    return _toolchain(*found[0])


def _installed(toolkit: Toolkit, path: str, env: Mapping[str, str]) -> Toolchain:
    """The nvcc of a toolkit installed at `path` ($VARIABLES from `env`), or why there is none."""
    named = f"toolkit {toolkit.version} (matrix.yaml: path {path})"
    try:
        root = Path(string.Template(path).substitute(env))
    except KeyError as error:
        raise ToolchainError(f"{named}: ${error.args[0]} is not set") from error
    except ValueError as error:  # a $ not followed by a name
        raise ToolchainError(f"{named}: {error}") from error
    nvcc = root / "bin" / "nvcc"
    if not _executable(nvcc):
        raise ToolchainError(f"{named}: {root} has no bin/nvcc")
    return _toolchain(nvcc, f"toolkits.{toolkit.version}.path")


def _release(version: str) -> str:  # "13.0.88" -> "13.0"
    return ".".join(version.split(".")[:2])


def _toolchain(
    nvcc: Path, origin: str, roots: tuple[Path, ...] = (), version: str | None = None
) -> Toolchain:
    """`nvcc`'s toolchain; the CUDA wheels under `roots` (a toolkit's own folder) come before
    this Python's where its tools and libraries are looked for."""
    version = version or nvcc_version(nvcc)
    major = version.split(".")[0]
    return Toolchain(
        nvcc=nvcc,
        version=version,
        origin=origin,
        layout=reported_layout(nvcc),
        wheels=_unique([*wheel_folders(major, roots), *wheel_folders(major)]),
    )


def nvcc_version(nvcc: Path) -> str:
    try:
        result = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ToolchainError(f"{nvcc} --version failed: {error}") from error
    match = re.search(r"V(\d+\.\d+\.\d+)", result.stdout)
    if not match:
        raise ToolchainError(f"{nvcc} --version printed no version: {result.stdout!r}")
    return match.group(1)


def reported_layout(nvcc: Path, timeout_s: float = DRYRUN_TIMEOUT_S) -> ToolkitLayout | None:
    """The toolkit `nvcc` runs from, as it says: a dry run prints the variables of the profile
    beside the real nvcc (`#$ TOP=...`) before the steps it would take, and runs none of them.
    None where it says nothing (a host compiler it cannot run stops it first)."""
    try:
        process = processes.start(
            [str(nvcc), "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
            stderr="stdout",
        )
    except OSError:
        return None
    return parse_layout(processes.finish(process, timeout_s).stdout)


def parse_layout(dryrun: str) -> ToolkitLayout | None:
    """The layout in `nvcc --dryrun`'s output; None without its TOP."""
    profile: dict[str, str] = {}
    for line in dryrun.splitlines():
        if found := re.match(r"#\$ (\w+)=(.*)$", line):
            profile[found.group(1)] = found.group(2).strip()  # the last one holds, as in sh
    if not profile.get("TOP"):
        return None
    includes = _folders(profile.get("INCLUDES", "") + " " + profile.get("SYSTEM_INCLUDES", ""))
    libraries = [
        folder
        for folder in _folders(profile.get("LIBRARIES", ""))
        if folder.name != "stubs"  # the driver's link stubs: never a device library
    ]
    return ToolkitLayout(
        root=Path(profile["TOP"]).resolve(),
        include_dirs=_unique(includes),
        library_dirs=_unique(libraries),
    )


def _folders(flags: str) -> list[Path]:
    """The folders of -I, -isystem and -L flags, resolved (nvcc writes bin/../include)."""
    try:
        words = shlex.split(flags)
    except ValueError:  # an unbalanced quote: a profile nvcc itself could not use
        return []
    found = []
    for flag, following in zip(words, [*words[1:], ""], strict=True):
        if flag == "-isystem" and following:
            found.append(following)
        elif flag[:2] in ("-I", "-L") and len(flag) > 2:
            found.append(flag[2:])
    return [Path(folder).resolve() for folder in found]


def gpu_codes(toolchain: Toolchain, timeout_s: float = 10) -> tuple[str, ...] | None:
    """The real architectures this nvcc can emit (`nvcc --list-gpu-code`: sm_80, sm_90, ...);
    None when it cannot say."""
    try:
        result = subprocess.run(
            [str(toolchain.nvcc), "--list-gpu-code"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    codes = tuple(re.findall(r"\bsm_\d+\b", result.stdout))
    return codes if result.returncode == 0 and codes else None
