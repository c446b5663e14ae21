"""Which nvcc compiles the matrix, and what version it is.

Order: $NVCC (if set, it must work), then $CUDA_HOME/bin/nvcc, then the pinned PyPI wheels
installed in this Python (nvidia/cu13/bin/nvcc), then nvcc on PATH. The first that exists wins;
its version is read from `nvcc --version`, never assumed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class ToolchainError(Exception):
    """No usable nvcc; the message lists where it looked."""


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    version: str  # "13.0.88"
    origin: str  # which rule found it, for the report

    @property
    def release(self) -> str:  # "13.0"
        return ".".join(self.version.split(".")[:2])

    @property
    def cuobjdump(self) -> Path:
        """Beside nvcc in a toolkit and in the wheels (nvidia-cuda-cuobjdump); may be absent."""
        return self.nvcc.parent / "cuobjdump"

    def library(self, name: str) -> Path | None:
        """The toolkit's static device library `lib<name>.a` (cudadevrt): in lib/ in the
        wheels, lib64/ or targets/<triple>/lib/ in an installed toolkit; None where absent."""
        root = self.nvcc.parent.parent
        for folder in ("lib", "lib64", *sorted(str(p) for p in root.glob("targets/*/lib"))):
            found = root / folder / f"lib{name}.a"
            if found.is_file():
                return found
        return None


def _wheel_nvcc() -> Path | None:
    if importlib.util.find_spec("nvidia") is None:
        return None
    import nvidia  # type: ignore[import-not-found]  # a namespace package of the wheels

    for root in nvidia.__path__:
        for candidate in sorted(Path(root).glob("cu*/bin/nvcc")):
            return candidate
    return None


def find_toolchain(env: Mapping[str, str] | None = None) -> Toolchain:
    env = os.environ if env is None else env
    if env.get("NVCC"):  # named explicitly: use it or say why not, never fall back silently
        named = Path(env["NVCC"])
        if not (named.is_file() and os.access(named, os.X_OK)):
            raise ToolchainError(f"$NVCC is {named}, which is not an executable file")
        return Toolchain(nvcc=named, version=nvcc_version(named), origin="$NVCC")
    tried = []
    candidates = []
    if env.get("CUDA_HOME"):
        candidates.append((Path(env["CUDA_HOME"]) / "bin" / "nvcc", "$CUDA_HOME"))
    wheel = _wheel_nvcc()
    if wheel:
        candidates.append((wheel, "PyPI wheel"))
    on_path = shutil.which("nvcc", path=env.get("PATH"))
    if on_path:
        candidates.append((Path(on_path), "PATH"))
    for path, origin in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return Toolchain(nvcc=path, version=nvcc_version(path), origin=origin)
        tried.append(f"{origin} -> {path}")
    if not candidates:
        tried.append("$CUDA_HOME unset, no nvidia-cuda-nvcc wheel, no nvcc on PATH")
    raise ToolchainError(
        "no nvcc found (tried: " + "; ".join(tried) + "). Install the pinned wheels "
        "(nox does) or set NVCC=/path/to/nvcc"
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
