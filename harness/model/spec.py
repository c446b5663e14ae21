"""What a kernel's `spec.py` declares: its requirement, cases, problem setup, reference and work.

A spec module defines one module-level `SPEC = KernelSpec(...)`. Everything the harness needs to
compile, launch, verify and time the kernel comes from that object; the harness never reads a
kernel's folder for anything else but the `.cu` named in it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.model.errors import Skip
from harness.model.outcome import SkipReason

if TYPE_CHECKING:  # the noxfile reads matrix.yaml through this package, before numpy exists
    import numpy as np

Dim3 = tuple[int, int, int]
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# The most device memory a case may declare (device_bytes): 1 PiB, far past any GPU; more is a
# mistake (a count of elements where bytes were meant, an overflow), not a need
MOST_DEVICE_BYTES = 2**50


def ceil_div(a: int, b: int) -> int:
    """The number of b-sized pieces that cover a: blocks for n elements, tiles for a side."""
    return -(-a // b)


def grid_1d(n: int, per_block: int) -> Dim3:
    """Enough blocks along x for n items, per_block items to a block."""
    return (ceil_div(n, per_block), 1, 1)


def grid_2d(cols: int, rows: int, tile_cols: int, tile_rows: int) -> Dim3:
    """Blocks covering a rows x cols matrix with tile_rows x tile_cols tiles: x over columns,
    y over rows."""
    return (ceil_div(cols, tile_cols), ceil_div(rows, tile_rows), 1)


def int32_extent(name: str, value: int, *, low: int = 1, headroom: int = 0) -> int:
    """`value` as a size the kernel takes as a 32-bit int: low <= value <= INT32_MAX - headroom.

    `headroom` is what the kernel adds to it in int arithmetic (a tile past the end, a halo), so
    that no index it forms overflows. Raises ValueError naming the parameter otherwise.
    """
    return _extent(name, value, 32, low, headroom)


def int32_param(case: Case, name: str, *, low: int = 1, headroom: int = 0) -> int:
    """case.params[name], checked by int32_extent."""
    return int32_extent(name, case.params[name], low=low, headroom=headroom)


def int64_extent(name: str, value: int, *, low: int = 1, headroom: int = 0) -> int:
    """`value` as a size the kernel takes as a 64-bit integer (`int64_t`, `long long`, or a
    `size_t` it never takes past INT64_MAX): low <= value <= INT64_MAX - headroom, as
    int32_extent. Pass it as Scalar(np.int64(n)), or np.uint64 for a size_t."""
    return _extent(name, value, 64, low, headroom)


def int64_param(case: Case, name: str, *, low: int = 1, headroom: int = 0) -> int:
    """case.params[name], checked by int64_extent."""
    return int64_extent(name, case.params[name], low=low, headroom=headroom)


def _extent(name: str, value: int, bits: int, low: int, headroom: int) -> int:
    value = int(value)
    high = 2 ** (bits - 1) - 1 - headroom
    if not low <= value <= high:
        extra = f" with {headroom} to spare" if headroom else ""
        raise ValueError(
            f"{name}={value}: the kernel takes {name} as a {bits}-bit int (needs {low} <= "
            f"{name} <= {high}{extra})"
        )
    return value


@dataclass(frozen=True)
class RequireSm:
    """The smallest compute capability whose features the kernel uses: the book's require_sm()."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"require_sm({self.major}, {self.minor})"


@dataclass(frozen=True)
class RequireArch:
    """An arch-specific feature set (wgmma on sm_90a, tcgen05 on sm_100a): that target only."""

    arch: str

    def __str__(self) -> str:
        return f"require_arch({self.arch})"


@dataclass(frozen=True)
class RequireAny:
    """Any one of these: a kernel with a path for each arch-specific feature set (setmaxnreg on
    sm_90a or sm_100a), chosen in the source by `__CUDA_ARCH_FEAT_SM90_ALL` and the like."""

    options: tuple[RequireSm | RequireArch, ...]

    def __str__(self) -> str:
        return " or ".join(map(str, self.options))


Requirement = RequireSm | RequireArch | RequireAny


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class Case:
    """One problem size or variant; its name is the JUnit test name before `[target]`."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    # None: docs/CONTRACT.md's default for each output's dtype; a Tolerance: every output's; a
    # mapping: by output name, an output it does not name at its dtype's default
    tolerance: Tolerance | Mapping[str, Tolerance] | None = None
    # macros of this case's build, over the kernel's own (BuildOptions.defines): the kernel is
    # built once per distinct set, and each case runs the build of its own set
    defines: Mapping[str, str | int] = field(default_factory=dict)

    def tolerance_of(self, output: str) -> Tolerance | None:
        """The tolerance the case sets for `output`; None: its dtype's default."""
        if isinstance(self.tolerance, Mapping):
            return self.tolerance.get(output)
        return self.tolerance


# Kernel arguments, in the order of the `extern "C"` entry's parameters.
@dataclass(frozen=True)
class Buf:
    """A pointer to one of the problem's inputs, outputs or scratch buffers, by name."""

    name: str


@dataclass(frozen=True)
class Scalar:
    """A value passed by value; its numpy type fixes its C type (np.int32 -> int). A bf16 or
    fp8 scalar (ml_dtypes) is passed as its bits, as `__nv_bfloat16` and `__nv_fp8_*` hold."""

    value: np.generic


@dataclass(frozen=True)
class TensorMap:
    """A TMA descriptor over a 2-D row-major buffer, passed as a `__grid_constant__` CUtensorMap.

    `box` is the tile one copy moves, (rows, cols) in elements. Out-of-bounds reads fill zeros.
    """

    name: str
    box: tuple[int, int]
    swizzle_bytes: int = 0  # 0, 32, 64 or 128


@dataclass(frozen=True)
class Struct:
    """A C struct passed by value, its fields in declaration order: numpy scalars (as Scalar
    takes them), Bufs (a pointer inside the struct) and Structs. Packed as the C compiler lays
    it out: each field at a multiple of its alignment, the size a multiple of the largest.
    The names are the members', for messages; the order alone fixes the layout."""

    fields: tuple[tuple[str, np.generic | Buf | Struct], ...]


@dataclass(frozen=True)
class Texture:
    """A texture object over an input, passed as a `cudaTextureObject_t`.

    Over the input's own memory: dims=1, a linear texture over the whole input, read with
    `tex1Dfetch<T>(t, i)` (filtering and addressing do not apply to linear textures); dims=2,
    over a 2-D row-major input, read with `tex2D<T>(t, x, y)`, x along a row, a row's bytes a
    multiple of the device's texture pitch alignment (32 bytes on current GPUs).
    array=True: the input copied into a CUDA array of its shape (dims 1, 2 or 3, the input's
    ndim), read with `tex1D`, `tex2D` or `tex3D<T>(t, x, y, z)`, x along the last axis, with
    filtering, addressing and normalized coordinates in every dimension. Linear filtering
    needs a float16 or float32 input; wrap and mirror addressing need normalized coordinates.
    Element types: 8-, 16- and 32-bit integers, float16, float32.
    """

    name: str
    dims: int = 1
    filter: str = "point"  # point or linear (2-D, or an array)
    address: str = "clamp"  # clamp, wrap, mirror or border (2-D, or an array)
    normalized: bool = False  # coordinates in [0, 1] (2-D, or an array)
    array: bool = False  # a CUDA array holds the input: tex1D/tex2D/tex3D


@dataclass(frozen=True)
class Surface:
    """A surface object over an input or an output, passed as a `cudaSurfaceObject_t`: the
    buffer held in a CUDA array of its shape (1-, 2- or 3-D: its ndim, x along the last axis),
    read and written with `surf1Dread`/`surf2Dwrite<T>(v, s, x * sizeof(T), y)`/`surf3D...`,
    x in bytes. An output's array is filled with the poison before each checked run and copied
    back after it, outside the timed runs; an input's holds each run's inputs. Element types
    as a Texture's."""

    name: str


Arg = Buf | Scalar | TensorMap | Struct | Texture | Surface


@dataclass(frozen=True)
class Launch:
    """One kernel launch. `grid` counts blocks, also when `cluster` is set."""

    entry: str
    grid: Dim3
    block: Dim3
    args: tuple[Arg, ...]
    cluster: Dim3 | None = None
    shmem_bytes: int = 0
    # a grid-synchronizing kernel (cooperative_groups' grid.sync()): launched cooperatively,
    # its grid held to what the device runs at once (a device-unsupported skip where it cannot)
    cooperative: bool = False


@dataclass(frozen=True)
class Memset:
    """A step between launches: every byte of the buffer `name` set to `byte`."""

    name: str
    byte: int = 0


@dataclass(frozen=True)
class Problem:
    """The buffers and launches of one case.

    inputs: uploaded as given and checked unchanged after the run.
    outputs: only shape and dtype matter; the device copy is pre-filled with NaN (floats) or
        0xFF bytes (integers) so that an element the kernel forgets to write cannot pass.
    scratch: uploaded as given before every launch sequence and never checked (counters,
        workspaces).
    launches: the launches of one run, and Memset steps between them.
    derived_params: what setup() decided from the device (a size read from DeviceLimits, say);
        reference() and work() find them in case.params, beside the case's own.
    """

    inputs: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    launches: tuple[Launch | Memset, ...]  # the steps of one run, in order
    scratch: Mapping[str, np.ndarray] = field(default_factory=dict)
    derived_params: Mapping[str, Any] = field(default_factory=dict)
    # `__constant__` and `__device__` symbols of the binary, by name, written before the runs
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)
    # outputs the kernel adds into (atomics): zeroed before every run instead of poisoned
    accumulated: tuple[str, ...] = ()

    def case_seen_by(self, case: Case) -> Case:
        """The case as reference() and work() see it: its params plus the derived ones."""
        if not self.derived_params:
            return case
        return Case(case.name, {**case.params, **self.derived_params}, case.tolerance, case.defines)


class Math(enum.Enum):
    """Which units the flops run on, hence which of the device's peaks bounds them."""

    FP32 = "fp32"  # CUDA cores, fp32 fused multiply-add
    BF16_TENSOR = "bf16_tensor"  # tensor cores, bf16 inputs, fp32 accumulation, dense


@dataclass(frozen=True)
class Work:
    """What one run of the case does, for GB/s, TFLOPS and roofline %. Zero means not counted."""

    bytes: int = 0
    flops: int = 0
    math: Math = Math.FP32


@dataclass(frozen=True)
class DeviceLimits:
    """What a spec's setup() may read of the GPU it is about to run on, instead of hard-coding."""

    cc: tuple[int, int]
    sm_count: int
    smem_optin_bytes: int  # the most dynamic shared memory one block can opt in to
    l2_bytes: int
    # (entry, threads per block, dynamic shared memory bytes) -> resident blocks per SM
    max_blocks_per_sm: Callable[[str, int, int], int]
    # the device's global memory: a case whose buffers need more is skipped device-unsupported
    # before anything is allocated; None: the driver did not say
    memory_bytes: int | None = None


class DeviceUnsupported(Skip):
    """Raised by setup() when this device cannot run the case (a cluster size it does not
    allow, say): the cell is skipped `device-unsupported` with this message."""

    def __init__(self, why: str):
        super().__init__(SkipReason.DEVICE_UNSUPPORTED, why)


@dataclass(frozen=True)
class StreamRef:
    """The CUDA stream the harness times on, for a library that must enqueue its work there."""

    handle: int
    device: int  # ordinal


@dataclass(frozen=True)
class Vendor:
    """A vendor library's answer to the same problem, timed beside the kernel in the same run.

    prepare(case, inputs, stream) gets the case as reference() sees it and the host inputs,
    uploads what the library needs, and returns a function that enqueues one run of the library
    call on `stream`. The harness times that function exactly as it times the kernel. An
    ImportError from prepare means the library is not installed here: the cell records that and
    is otherwise unaffected.
    """

    library: str  # as the report names it: "torch.matmul (cuBLAS)"
    prepare: Callable[[Case, Mapping[str, np.ndarray], StreamRef], Callable[[], None]]
    # What prepare() imports: the kernel's worker imports them while it waits for its turn
    preload: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildOptions:
    """How nvcc builds the kernel beyond the harness's own flags (-O3, -lineinfo, ptxas -v and
    the target's gencode): the C++ standard, macros, and flags that change code generation
    only (harness.model.build_options lists them); all of it in the compile cache key and the
    compile cell."""

    std: str = "c++17"  # c++17 or c++20
    defines: Mapping[str, str | int] = field(default_factory=dict)  # -DNAME=VALUE
    flags: tuple[str, ...] = ()  # -use_fast_math, --expt-relaxed-constexpr, -maxrregcount=64
    # more .cu files of the kernel's folder, each compiled on its own and device-linked with
    # the kernel's source: they need relocatable=True
    sources: tuple[str, ...] = ()
    # -rdc=true and a device link: extern __device__ functions across files, and dynamic
    # parallelism (a kernel launching kernels), which also links cudadevrt
    relocatable: bool = False
    libraries: tuple[str, ...] = ()  # device libraries the link takes: "cudadevrt"


@dataclass(frozen=True)
class ContextLimits:
    """What the kernel's CUDA context must allow beyond the driver's defaults (cuCtxSetLimit), set
    before its module is loaded; None keeps the default. A value the driver refuses, or gives
    less of, skips the case device-unsupported with the figures."""

    stack_bytes: int | None = None  # each thread's stack: deep recursion, large local arrays
    printf_fifo_bytes: int | None = None  # device printf's buffer, emptied at each synchronization
    malloc_heap_bytes: int | None = None  # what device malloc() and new draw from
    pending_launches: int | None = None  # child grids queued at once (dynamic parallelism)


# The most a ContextLimits field may ask: past these, a mistake (a count where bytes were meant)
CONTEXT_LIMITS_MOST = {
    "stack_bytes": 2**30,
    "printf_fifo_bytes": 2**40,
    "malloc_heap_bytes": 2**50,
    "pending_launches": 2**31 - 1,
}


@dataclass(frozen=True)
class KernelSpec:
    """Everything but `source` is given by keyword. `source` defaults to `<folder>.cu`."""

    source: str = ""  # the .cu file beside spec.py; "" means <folder name>.cu
    cases: tuple[Case, ...] = field(kw_only=True)
    setup: Callable[[Case, np.random.Generator, DeviceLimits], Problem] = field(kw_only=True)
    reference: Callable[[Case, Mapping[str, np.ndarray]], Mapping[str, np.ndarray]] = field(
        kw_only=True
    )
    work: Callable[[Case], Work] = field(kw_only=True)
    requires: Requirement | None = None  # None: any target
    vendor: Vendor | None = None
    # SASS opcodes the binary must contain (HGMMA for a wgmma kernel): a build without them
    # compiled to a slower path, and its compile cell fails.
    sass_must_contain: tuple[str, ...] = ()
    build: BuildOptions = field(default_factory=BuildOptions)
    # The device memory a case needs, in bytes, said from the case alone: a case needing more
    # than the device has is skipped device-unsupported before setup() builds its host arrays
    # (None: known only after setup(), from its buffers). setup()'s buffers may not need more.
    device_bytes: Callable[[Case], int] | None = None
    context: ContextLimits = field(default_factory=ContextLimits)
    # C++ entries the launches name as their authors write them (`block_sum<128>`,
    # `ns::scale<float, 4>`): the build instantiates each and maps it to its symbol. An
    # `extern "C"` entry's name is its symbol, and needs no listing.
    entries: tuple[str, ...] = ()
