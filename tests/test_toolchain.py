"""Where the toolkit lies: what nvcc reports of itself, not the folder of the nvcc named, so a
wrapper script on PATH that execs the real nvcc still finds cuobjdump, nvdisasm and cudadevrt."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.compile.nvcc import Compiler
from harness.compile.toolchain import (
    TOOLKITS_VARIABLE,
    Toolchain,
    ToolchainError,
    ToolkitLayout,
    find_toolchain,
    parse_layout,
    reported_layout,
)
from harness.model.discovery import kernel_folders, load_kernel
from harness.model.matrix import Toolkit
from tests.conftest import ROOT

# What `nvcc --dryrun -c -x cu /dev/null` printed first: nvcc 13.0.88 of an installed toolkit
# (reached through a wrapper script), and of the PyPI wheel, under roots that exist nowhere.
CUDA = "/opt/no-such-cuda-13.0/bin/.."
INSTALLED = f"""\
#$ _NVVM_BRANCH_=nvvm
#$ _HERE_=/opt/no-such-cuda-13.0/bin
#$ _TARGET_DIR_=
#$ _TARGET_DIR_=targets/x86_64-linux
#$ TOP={CUDA}
#$ CICC_PATH={CUDA}/nvvm/bin
#$ INCLUDES="-I{CUDA}/targets/x86_64-linux/include"
#$ SYSTEM_INCLUDES="-isystem" "{CUDA}/targets/x86_64-linux/include/cccl"
#$ LIBRARIES=  "-L{CUDA}/targets/x86_64-linux/lib/stubs" "-L{CUDA}/targets/x86_64-linux/lib"
#$ CUDAFE_FLAGS=
#$ gcc -D__CUDA_ARCH_LIST__=750 -E -x c++ -D__CUDACC__ "-I/elsewhere/include" "/dev/null"
"""
WHEEL = """\
#$ _HERE_=/opt/venv/nvidia/cu13/bin
#$ TOP=/opt/venv/nvidia/cu13/bin/..
#$ INCLUDES="-I/opt/venv/nvidia/cu13/bin/..//include"
#$ SYSTEM_INCLUDES="-isystem" "/opt/venv/nvidia/cu13/bin/..//include/cccl"
#$ LIBRARIES=  "-L/opt/venv/nvidia/cu13/bin/..//lib64/stubs" "-L/opt/venv/nvidia/cu13/bin/..//lib64"
"""

RELOCATABLE = 'BuildOptions(relocatable=True, sources=("helper.cu",), libraries=("cudadevrt",))'


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _wrapper(folder: Path, real: Path) -> Path:
    """What runners put on PATH: a script beside no toolkit that execs the real nvcc."""
    return _script(folder / "bin" / "nvcc", f'exec {real} "$@"\n')


def test_the_toolkit_is_the_one_nvcc_reports():
    installed = parse_layout(INSTALLED)
    assert installed == ToolkitLayout(
        root=Path("/opt/no-such-cuda-13.0"),
        include_dirs=(
            Path("/opt/no-such-cuda-13.0/targets/x86_64-linux/include"),
            Path("/opt/no-such-cuda-13.0/targets/x86_64-linux/include/cccl"),
        ),
        library_dirs=(Path("/opt/no-such-cuda-13.0/targets/x86_64-linux/lib"),),  # no stubs
    )
    wheel = parse_layout(WHEEL)
    assert wheel is not None and wheel.root == Path("/opt/venv/nvidia/cu13")
    assert wheel.include_dirs[0] == Path("/opt/venv/nvidia/cu13/include")
    assert parse_layout("nvcc fatal   : Failed to preprocess host compiler properties.\n") is None


def test_a_wrapper_nvcc_finds_the_real_toolkit_s_tools_and_libraries(toolchain, tmp_path):
    wrapped = find_toolchain({"NVCC": str(_wrapper(tmp_path / "wrapper", toolchain.nvcc))})
    assert wrapped.nvcc == tmp_path / "wrapper" / "bin" / "nvcc"  # compiles through the wrapper
    assert wrapped.version == toolchain.version
    assert wrapped.root == toolchain.root and wrapped.layout == toolchain.layout
    assert wrapped.layout is not None and tmp_path not in wrapped.root.parents
    assert wrapped.cuobjdump == toolchain.cuobjdump and wrapped.cuobjdump.is_file()
    assert wrapped.nvdisasm == toolchain.nvdisasm and wrapped.nvdisasm.is_file()
    cudadevrt = wrapped.library("cudadevrt")
    assert cudadevrt is not None and cudadevrt == toolchain.library("cudadevrt")
    assert all(tmp_path not in path.parents for path in (wrapped.cuobjdump, cudadevrt))


def test_a_compile_through_a_wrapper_nvcc_links_cudadevrt_reads_its_sass_and_has_an_identity(
    matrix, toolchain, planted, tmp_path
):
    """Each of the three failed behind a wrapper: "has no libcudadevrt.a", "cannot run
    .../cuobjdump", and a code identity silently null."""
    folder = planted / "planted" / "add_one"
    (folder / "add_one.cu").write_text(
        'extern __device__ float plus_one(float v);\nextern "C" __global__ void '
        "add_one(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = plus_one(x[i]);\n}\n"
    )
    (folder / "helper.cu").write_text("__device__ float plus_one(float v) { return v + 1.0f; }\n")
    spec = folder / "spec.py"
    text = spec.read_text().replace(
        "from harness.spec import ", "from harness.spec import BuildOptions, "
    )
    spec.write_text(
        text.replace(
            "SPEC = KernelSpec(",
            f'SPEC = KernelSpec(build={RELOCATABLE}, sass_must_contain=("FADD",), ',
        )
    )
    (kernel_folder,) = [f for f in kernel_folders(planted) if f.name == "add_one"]
    kernel = load_kernel(kernel_folder)
    wrapped = find_toolchain({"NVCC": str(_wrapper(tmp_path / "wrapper", toolchain.nvcc))})

    built = Compiler(wrapped, tmp_path / "cache").compile(kernel, matrix.targets["sm_90a"])

    assert built.binary is not None, built.log
    assert "-dlink" in built.command and str(wrapped.library("cudadevrt")) in built.command
    assert built.sass is not None and built.sass.error is None and built.sass.counts["FADD"] >= 1
    assert built.code_identity is not None, built.log


def test_an_nvcc_that_reports_nothing_is_taken_to_sit_in_its_toolkit(toolchain, tmp_path):
    """A stand-in that hangs on the dry run costs its timeout, not the run."""
    hung = _script(tmp_path / "toolkit" / "bin" / "nvcc", "sleep 60\n")
    started = time.monotonic()
    assert reported_layout(hung, timeout_s=0.5) is None
    assert time.monotonic() - started < 10
    bare = Toolchain(nvcc=hung, version=toolchain.version, origin="test")
    assert bare.root == (tmp_path / "toolkit").resolve()
    assert bare.include_dirs == ((tmp_path / "toolkit" / "include").resolve(),)
    assert bare.cuobjdump == (tmp_path / "toolkit" / "bin" / "cuobjdump").resolve()
    assert bare.library("cudadevrt") is None


def test_a_missing_tool_names_every_folder_it_was_looked_for_in(toolchain, tmp_path):
    root = (tmp_path / "toolkit").resolve()
    wheel = (tmp_path / "site-packages" / "nvidia" / "cu13").resolve()
    nvcc = root / "bin" / "nvcc"
    bare = Toolchain(nvcc, "13.0.88", "test", layout=ToolkitLayout(root), wheels=(wheel,))
    assert bare.tool("cuobjdump") is None
    assert bare.not_found("cuobjdump") == (
        f"no cuobjdump for {nvcc}: looked in {root}/bin, {wheel}/bin"
    )
    assert bare.not_found("libcudadevrt.a") == (
        f"no libcudadevrt.a for {nvcc}: looked in {root}/lib, {root}/lib64, {wheel}/lib"
    )
    alone = Toolchain(nvcc, "13.0.88", "test", layout=ToolkitLayout(root))
    assert alone.not_found("nvdisasm") == (
        f"no nvdisasm for {nvcc}: looked in {root}/bin; this Python has no CUDA 13 wheels"
    )
    _script(wheel / "bin" / "nvdisasm", "exit 0\n")
    assert (
        bare.nvdisasm == wheel / "bin" / "nvdisasm"
    )  # the pinned wheels' when the toolkit lacks it


def _nvcc_of(folder: Path, version: str) -> Path:
    """An nvcc under `folder`/bin that says it is `version` and dry-runs nothing."""
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    release = ".".join(version.split(".")[:2])
    nvcc.write_text(
        f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "release {release}, V{version}"; fi\n'
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


def _toolkit(version: str, path: str | None = None) -> Toolkit:
    wheels = () if path else (f"nvidia-cuda-nvcc=={version}.0",)
    return Toolkit(version, wheels, "debian:bookworm-slim", path)


def test_a_toolkit_s_nvcc_is_the_first_of_its_release(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.compile.toolchain._wheel_roots", lambda: [])
    home = _nvcc_of(tmp_path / "home", "13.0.88")
    on_path = _nvcc_of(tmp_path / "path", "13.5.37")
    shared = tmp_path / "toolkits"  # none there yet, whatever this Python has beside it
    env = {
        "CUDA_HOME": str(tmp_path / "home"),
        "PATH": str(on_path.parent),
        TOOLKITS_VARIABLE: str(shared),
    }
    assert find_toolchain(env, _toolkit("13.5")).nvcc == on_path  # past $CUDA_HOME's 13.0
    assert find_toolchain(env, _toolkit("13.0")).nvcc == home
    # the toolkit's own folder of wheels comes first, and lends its tools to the toolchain
    own = _nvcc_of(shared / "13.5" / "nvidia" / "cu13", "13.5.37")
    found = find_toolchain(env, _toolkit("13.5"))
    assert found.nvcc == own and found.wheels == (own.parent.parent.resolve(),)
    assert found.origin == "its wheels in cuda-toolkits/"
    # none of its release: the first found, which the compile stage refuses, naming both
    assert find_toolchain(env, _toolkit("12.9")).nvcc == home


def test_an_installed_toolkit_is_its_path_or_a_line_saying_why_not(tmp_path):
    installed = _nvcc_of(tmp_path / "cuda-12.9", "12.9.86")
    variable = _toolkit("12.9", path="$MY_CUDA")
    found = find_toolchain({"MY_CUDA": str(tmp_path / "cuda-12.9")}, variable)
    assert found.nvcc == installed and found.origin == "toolkits.12.9.path"
    with pytest.raises(ToolchainError, match=r"^toolkit 12.9 \(matrix.yaml: path \$MY_CUDA\): "):
        find_toolchain({}, variable)
    with pytest.raises(ToolchainError, match=r"\$MY_CUDA is not set"):
        find_toolchain({}, variable)
    empty = _toolkit("12.9", path=str(tmp_path / "empty"))
    with pytest.raises(ToolchainError, match=rf"{tmp_path / 'empty'} has no bin/nvcc$"):
        find_toolchain({}, empty)


def test_a_toolkit_path_without_nvcc_stops_the_command_and_keeps_the_reports(tmp_path):
    """Exit 2 and one line naming the column and its toolkit; the last run's report stays."""
    text = (ROOT / "matrix.yaml").read_text()
    installed = f'  "12.9":\n    path: {tmp_path / "cuda-12.9"}\n    base_image: cuda:12.9\n'
    text = text.replace("targets:\n", installed + "targets:\n", 1)
    text = text.replace(
        'toolkits: ["13.0", "13.5"]\n    session: sm90',
        'toolkits: ["13.0", "12.9"]\n    session: sm90',
        1,
    )
    (tmp_path / "matrix.yaml").write_text(text)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "check-sm_90a-cuda12.9.xml").write_text("<testsuites/>")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "check",
            "sm_90a-cuda12.9",
            "--matrix",
            str(tmp_path / "matrix.yaml"),
            "--reports",
            str(reports),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "NVCC"},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    root = tmp_path / "cuda-12.9"
    assert done.stderr.strip() == (
        f"error: target sm_90a-cuda12.9: toolkit 12.9 (matrix.yaml: path {root}): "
        f"{root} has no bin/nvcc"
    )
    assert (reports / "check-sm_90a-cuda12.9.xml").read_text() == "<testsuites/>"
    assert sorted(p.name for p in reports.iterdir()) == ["check-sm_90a-cuda12.9.xml"]
