"""Where the toolkit lies: what nvcc reports of itself, not the folder of the nvcc named, so a
wrapper script on PATH that execs the real nvcc still finds cuobjdump, nvdisasm and cudadevrt."""

from __future__ import annotations

import stat
import time
from pathlib import Path

from harness.compile.nvcc import Compiler
from harness.compile.toolchain import (
    Toolchain,
    ToolkitLayout,
    find_toolchain,
    parse_layout,
    reported_layout,
)
from harness.model.discovery import kernel_folders, load_kernel

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
