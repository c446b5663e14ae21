"""Loads a compiled binary and runs one Problem on the GPU through cuda.core.

cuda.bindings fills the gaps cuda.core leaves: the dynamic shared memory opt-in and host<->device
copies of numpy arrays.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cuda.core
import numpy as np
from cuda.bindings import driver
from cuda.core import (
    Buffer,
    Device,
    LaunchConfig,
    ObjectCode,
    Stream,
    TensorMapDescriptorOptions,
    launch,
)
from cuda.core.texture import OpaqueArrayOptions, ResourceDescriptor, TextureObjectOptions
from cuda.core.utils import StridedMemoryView

from harness.compile.nvcc import entries_of_binary, jit_inputs_of_binary, symbols_of_binary
from harness.model.matrix import Target
from harness.model.spec import (
    Arg,
    Buf,
    DeviceUnsupported,
    Launch,
    Memset,
    Problem,
    Scalar,
    Struct,
    Surface,
    TensorMap,
    Texture,
)
from harness.run.checked import check
from harness.run.device import DeviceInfo
from harness.run.packing import (
    array_beyond,
    bits_of,
    cuda_arrays,
    packed,
    scalar_problem,
    struct_problem,
    surface_problem,
    texture_problem,
)
from harness.run.staging import HostStaging
from harness.run.stray import CONTENTS, Extreme, extreme_fill

# cuda.core keeps its tensor-map enums private; the options' own default tells us the class.
_SWIZZLE = type(TensorMapDescriptorOptions(box_dim=(1,)).swizzle)
_SWIZZLE_BY_BYTES = {
    0: _SWIZZLE.NONE,
    32: _SWIZZLE.SWIZZLE_32B,
    64: _SWIZZLE.SWIZZLE_64B,
    128: _SWIZZLE.SWIZZLE_128B,
}
PORTABLE_CLUSTER_BLOCKS = 8  # larger clusters need an opt-in, and not every GPU has them
POISON_BYTE = 0xFF  # NaN in every float width, -1 in every integer width
# The second pattern, for verifying again: a finite number in every float width (fp16, bf16,
# fp32, fp64), so an element the reference expects to be NaN cannot pass unwritten both times.
SECOND_POISON_BYTE = 0x5A
# Guard zones: every buffer sits between two of these, inside its own allocation, so that a write
# past either end lands in a guard (not in the allocation's rounding, where it would pass). 256
# bytes keep each buffer at the allocation's 256-byte alignment, which TMA and vector loads need.
# A read of a guard is found by filling it with other values for a run (harness.run.stray).
# Under a sanitizer a workspace has none: each buffer is an allocation of exactly its size, so
# that the tool, which knows each allocation's size, sees an access past either end.
GUARD_BYTES = 256
GUARD_BYTE = 0xA5  # what a guard holds; any other byte there was written by the kernel
# The device attributes of the largest CUDA array, x first, by what reads it and its dims; a
# 3-D texture's alternate shape (deep and narrow) is a second one it takes
_LARGEST_ARRAY = {
    ("texture", 1): (("maximum_texture1d_width",),),
    ("texture", 2): (("maximum_texture2d_width", "maximum_texture2d_height"),),
    ("texture", 3): (
        ("maximum_texture3d_width", "maximum_texture3d_height", "maximum_texture3d_depth"),
        (
            "maximum_texture3d_width_alternate",
            "maximum_texture3d_height_alternate",
            "maximum_texture3d_depth_alternate",
        ),
    ),
    ("surface", 1): (("maximum_surface1d_width",),),
    ("surface", 2): (("maximum_surface2d_width", "maximum_surface2d_height"),),
    ("surface", 3): (
        ("maximum_surface3d_width", "maximum_surface3d_height", "maximum_surface3d_depth"),
    ),
}


@dataclass(frozen=True)
class LoadedEntry:
    """An entry point of a loaded binary: cuda.core's function, and how the driver loaded it."""

    function: cuda.core.Kernel
    loaded_as: str  # "sass" or "ptx-jit", read from the loaded function


class Module:
    """One fatbin loaded on the device; entry points are fetched by name on first use."""

    def __init__(self, binary: Path, target: Target, info: DeviceInfo):
        # a C++ entry is fetched by the name its spec wrote (`block_sum<128>`), mapped here to
        # its symbol, as bytes: cuda.core hands a mapped name to the driver as it is
        symbols = {name: symbol.encode() for name, symbol in symbols_of_binary(binary).items()}
        jit_inputs = jit_inputs_of_binary(binary)
        if jit_inputs and target.runs_on(info.cc) == "ptx-jit":
            # relocatable code linked for another GPU: its SASS cannot run here, and the
            # driver cannot link PTX inside a linked fatbin; it links the units' PTX itself
            linked = linked_for_this_device(jit_inputs)
            self.code = ObjectCode.from_cubin(linked, symbol_mapping=symbols)
        else:
            self.code = ObjectCode.from_fatbin(str(binary), symbol_mapping=symbols)
        self.binary = binary
        self.target = target
        self.info = info
        self._entries: dict[str, LoadedEntry] = {}

    def entry(self, name: str) -> LoadedEntry:
        if name not in self._entries:
            try:
                function = self.code.get_kernel(name)
            except Exception as error:  # cuda.core keeps its CUDAError private: by its text
                if "CUDA_ERROR_NOT_FOUND" not in str(error):
                    raise
                listed = ", ".join(sorted(entries_of_binary(self.binary))[:20]) or "none listed"
                raise Unlaunchable(
                    f"the binary has no entry {name!r} (its entries: {listed})"
                ) from error
            # The driver reports the SASS version it runs: if that is not the SASS we embedded,
            # the driver compiled our PTX for this device.
            ran = function.attributes[self.info.ordinal].binary_version
            embedded = self.target.cc.major * 10 + self.target.cc.minor
            loaded_as = "sass" if ran == embedded else "ptx-jit"
            self._entries[name] = LoadedEntry(function, loaded_as)
        return self._entries[name]


def linked_for_this_device(inputs: list[Path]) -> bytes:
    """A cubin for the current context's device, linked by the driver from fatbins (their PTX
    compiled for it) and static device libraries (cudadevrt), as CUDA links relocatable code
    at load time."""
    state = check(driver.cuLinkCreate(0, [], []))
    try:
        for path in inputs:
            kind = (
                driver.CUjitInputType.CU_JIT_INPUT_LIBRARY
                if path.suffix == ".a"
                else driver.CUjitInputType.CU_JIT_INPUT_FATBINARY
            )
            check(driver.cuLinkAddFile(state, kind, str(path).encode(), 0, [], []))
        cubin, size = check(driver.cuLinkComplete(state))
        return ctypes.string_at(int(cubin), int(size))  # the driver frees it with the state
    finally:
        check(driver.cuLinkDestroy(state))


def _layout(problem: Problem) -> list[tuple[str, str, tuple[int, ...], str]]:
    """Each buffer's group, name, shape and dtype: what a workspace's allocations are made of."""
    return [
        (group, name, array.shape, array.dtype.str)
        for group, arrays in (
            ("input", problem.inputs),
            ("output", problem.outputs),
            ("scratch", problem.scratch),
        )
        for name, array in arrays.items()
    ]


class Unlaunchable(ValueError):
    """What a problem asks that no launch can do (a buffer it does not have, a scalar of no C
    type, an entry the binary lacks): the spec's mistake, named."""


def check_fits(problem: Problem, info: DeviceInfo) -> None:
    """DeviceUnsupported, with the figures, when the problem's buffers (and the scratch's copy
    each run starts from) need more than the device's global memory: this GPU cannot run the
    case, a larger one can."""
    arrays = [*problem.inputs.values(), *problem.outputs.values(), *problem.scratch.values()]
    needed = sum(int(getattr(array, "nbytes", 0)) + 2 * GUARD_BYTES for array in arrays)
    scratch = sum(int(getattr(array, "nbytes", 0)) for array in problem.scratch.values())
    needed += scratch
    copy = " and the copy of the scratch each run starts from" if scratch else ""
    if info.memory_bytes is not None and needed > info.memory_bytes:
        raise DeviceUnsupported(
            f"its buffers (inputs, outputs, scratch{copy}) need {needed / 2**30:.2f} GiB of device "
            f"memory; {info.name} has {info.memory_bytes / 2**30:.2f} GiB"
        )


def check_declared_fits(declared: int | None, info: DeviceInfo) -> None:
    """DeviceUnsupported, with the figures, when a case declares more device memory than the
    device has (KernelSpec.device_bytes): said before setup() builds a byte of it."""
    if declared is not None and info.memory_bytes is not None and declared > info.memory_bytes:
        raise DeviceUnsupported(
            f"its case declares {declared / 2**30:.2f} GiB of device memory (device_bytes); "
            f"{info.name} has {info.memory_bytes / 2**30:.2f} GiB: skipped before setup()"
        )


class Workspace:
    """The device buffers and launch arguments of one Problem, ready to run again and again.

    `guarded`: each buffer between two guard zones (GUARD_BYTES of GUARD_BYTE) inside its
    allocation; else each buffer an allocation of exactly its size, for a sanitizer to watch.
    """

    def __init__(
        self,
        device: Device,
        stream: Stream,
        module: Module,
        problem: Problem,
        guarded: bool = True,
    ):
        self.device, self.stream, self.problem = device, stream, problem
        self.guarded = guarded
        self._allocations: dict[str, Buffer] = {}  # each buffer with its guards, owned
        self.buffers: dict[str, Buffer] = {}  # what the kernel gets, between its guards
        self.guards: dict[str, tuple[Buffer, int]] = {}  # "<name>:before", "<name>:after"
        self._textures: dict[Texture, object] = {}  # cuda.core's TextureObject, by spec
        self._surfaces: dict[Surface, object] = {}  # cuda.core's SurfaceObject, by spec
        self._arrays: dict[str, Any] = {}  # cuda.core's OpaqueArray, by the buffer it holds
        # each scratch buffer's contents as setup() gave them, on the device: a run's reset is a
        # copy the stream runs, with no wait for the host (an upload from pageable memory waits)
        self._scratch_given: dict[str, Buffer] = {}
        self._array_kinds = dict(cuda_arrays(problem))  # "texture" or "surface", by buffer
        try:
            self._make(module, problem)
        except BaseException:  # a launch it cannot make, a device it does not fit: freed now
            with contextlib.suppress(Exception):  # (a broken context: the error said is above)
                self.close()
            raise

    def _make(self, module: Module, problem: Problem) -> None:
        """The buffers (each between its guards, where guarded), the inputs uploaded, the
        constants written, the outputs poisoned, and the steps of a run."""
        device, stream = self.device, self.stream
        textured = _textured(problem)
        for name, array in {**problem.inputs, **problem.outputs, **problem.scratch}.items():
            if name in self.buffers:
                raise Unlaunchable(f"buffer name {name!r} is used twice")
            # a texture's memory starts at the device's texture alignment (512 bytes on an
            # H200), more than an allocation promises: its guard before grows to reach it
            align = device.properties.texture_alignment if name in textured else 1
            if not self.guarded:
                self._allocate_exactly(name, array.nbytes, align)
                continue
            whole = device.allocate(array.nbytes + 2 * GUARD_BYTES + align - 1, stream=stream)
            start = int(whole.handle)
            before = GUARD_BYTES + (-(start + GUARD_BYTES) % align)
            self._allocations[name] = whole
            self.buffers[name] = Buffer.from_handle(
                start + before, max(array.nbytes, 1), owner=whole
            )
            for side, at, size in (
                ("before", start, before),
                ("after", start + before + array.nbytes, GUARD_BYTES),
            ):
                guard = Buffer.from_handle(at, size, owner=whole)
                guard.fill(GUARD_BYTE, stream=stream)
                self.guards[f"{name}:{side}"] = (guard, size)
        for name, array in problem.inputs.items():
            self._upload(name, array)
        self._keep_scratch(problem)
        self.module = module
        self._write_constants(problem)
        self.poison_outputs()
        self.reset_accumulated()
        self.steps = [self._step(module, one) for one in problem.launches]
        stream.sync()

    def _allocate_exactly(self, name: str, nbytes: int, align: int) -> None:
        """The buffer `name` as an allocation of its own size (one byte if empty); a texture's,
        where the allocation does not start at the texture alignment, with the bytes before
        that start (a texture is read through its object, which never reaches past the end)."""
        whole = self.device.allocate(max(nbytes, 1), stream=self.stream)
        start = int(whole.handle)
        if start % align:
            whole.close(self.stream)
            whole = self.device.allocate(nbytes + align - 1, stream=self.stream)
            start = int(whole.handle) + (-int(whole.handle) % align)
        self._allocations[name] = whole
        self.buffers[name] = Buffer.from_handle(start, max(nbytes, 1), owner=whole)

    def _keep_scratch(self, problem: Problem) -> None:
        """The problem's scratch as given, copied into device memory of its own."""
        for name, array in problem.scratch.items():
            if not array.nbytes:
                continue
            if name not in self._scratch_given:
                self._scratch_given[name] = self.device.allocate(array.nbytes, stream=self.stream)
            self._copy_in(self._scratch_given[name], array)

    def refill(self, problem: Problem) -> bool:
        """Take `problem`'s inputs and scratch into these very buffers (the kernel sees the same
        addresses, new data) and poison the outputs again; False, changing nothing, when its
        buffers or launches are not this problem's."""
        if problem.launches != self.problem.launches or _layout(problem) != _layout(self.problem):
            return False
        self.problem = problem
        for name, array in problem.inputs.items():
            self._upload(name, array)
        self._keep_scratch(problem)
        for name in self._arrays:  # a texture or surface over a CUDA array reads its copy
            self._fill_array(name)
        self._write_constants(problem)
        return True

    def _write_constants(self, problem: Problem) -> None:
        """Each `__constant__` or `__device__` symbol the problem names, written with its
        array; a name the binary lacks, or an array of another size, is the spec's mistake."""
        for name, array in problem.constants.items():
            data = np.ascontiguousarray(array)
            error, pointer, size = driver.cuLibraryGetGlobal(self.module.code.handle, name.encode())
            if error != driver.CUresult.CUDA_SUCCESS:
                raise Unlaunchable(
                    f"constant {name!r}: the binary has no such symbol ({error.name})"
                )
            if size != data.nbytes:
                raise Unlaunchable(
                    f"constant {name!r} is {size} bytes in the binary, the problem gives "
                    f"{data.nbytes} ({data.dtype}{list(data.shape)})"
                )
            check(driver.cuMemcpyHtoDAsync(pointer, data.ctypes.data, size, self.stream.handle))
        self.stream.sync()  # the host array may go once this returns

    def _upload(self, name: str, array: np.ndarray) -> None:
        self._copy_in(self.buffers[name], array)

    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array)
        check(
            driver.cuMemcpyHtoDAsync(
                int(buffer.handle), data.ctypes.data, data.nbytes, self.stream.handle
            )
        )
        self.stream.sync()  # `data` may be a temporary: finish before it is freed

    def _download(self, name: str, template: np.ndarray, staging: HostStaging | None) -> np.ndarray:
        self._drain((name,))
        shape, dtype = template.shape, template.dtype
        out = staging.array(shape, dtype) if staging else np.empty(shape, dtype)
        check(
            driver.cuMemcpyDtoHAsync(
                out.ctypes.data, int(self.buffers[name].handle), out.nbytes, self.stream.handle
            )
        )
        self.stream.sync()
        return out

    def _array(self, name: str) -> np.ndarray:
        for group in (self.problem.inputs, self.problem.outputs, self.problem.scratch):
            if name in group:
                return group[name]
        raise Unlaunchable(
            f"launch argument names buffer {name!r}, which the problem does not have"
        )

    def _argument(self, arg: Arg) -> object:
        if isinstance(arg, Buf):
            self._array(arg.name)
            return self.buffers[arg.name]
        if isinstance(arg, Scalar):
            if why := scalar_problem(arg.value):
                raise Unlaunchable(why)
            return bits_of(arg.value)
        if isinstance(arg, TensorMap):
            array = self._array(arg.name)
            view = StridedMemoryView.from_buffer(
                self.buffers[arg.name], shape=array.shape, dtype=array.dtype
            )
            return view.as_tensor_map(box_dim=arg.box, swizzle=_SWIZZLE_BY_BYTES[arg.swizzle_bytes])
        if isinstance(arg, Texture):
            return np.uint64(self._texture(arg).handle)
        if isinstance(arg, Surface):
            return np.uint64(self._surface(arg).handle)
        if isinstance(arg, Struct):
            everything = {**self.problem.inputs, **self.problem.outputs, **self.problem.scratch}
            if why := struct_problem(arg, everything):
                raise Unlaunchable(why)
            return _StructBytes(packed(arg, lambda name: int(self.buffers[name].handle)))
        raise Unlaunchable(f"{arg!r} is not a Buf, Scalar, TensorMap, Struct, Texture or Surface")

    def _texture(self, texture: Texture) -> Any:
        """The texture object `texture` asks for, made once per workspace."""
        if texture in self._textures:
            return self._textures[texture]
        pitch_alignment = self.device.properties.texture_pitch_alignment
        if why := texture_problem(texture, self.problem.inputs, pitch_alignment):
            raise Unlaunchable(why)
        array = self.problem.inputs[texture.name]
        buffer = self.buffers[texture.name]
        if texture.array:
            resource = ResourceDescriptor.from_opaque_array(self._cuda_array(texture.name))
            options = TextureObjectOptions(
                address_mode=texture.address,
                filter_mode=texture.filter,
                normalized_coords=texture.normalized,
            )
        elif texture.dims == 1:
            resource = ResourceDescriptor.from_linear(
                buffer, format=array.dtype, num_channels=1, size_bytes=array.nbytes
            )
            options = None
        else:
            rows, cols = array.shape
            pitch = cols * array.dtype.itemsize  # a multiple of the alignment: checked above
            resource = ResourceDescriptor.from_pitch2d(
                buffer,
                format=array.dtype,
                num_channels=1,
                width=cols,
                height=rows,
                pitch_bytes=pitch,
            )
            options = TextureObjectOptions(
                address_mode=texture.address,
                filter_mode=texture.filter,
                normalized_coords=texture.normalized,
            )
        made = self.device.create_texture_object(resource=resource, options=options)
        self._textures[texture] = made
        return made

    def _surface(self, surface: Surface) -> Any:
        """The surface object `surface` asks for, made once per workspace."""
        if surface not in self._surfaces:
            if why := surface_problem(surface, {**self.problem.inputs, **self.problem.outputs}):
                raise Unlaunchable(why)
            resource = ResourceDescriptor.from_opaque_array(self._cuda_array(surface.name))
            self._surfaces[surface] = self.device.create_surface_object(resource=resource)
        return self._surfaces[surface]

    def _cuda_array(self, name: str) -> Any:
        """The CUDA array holding the buffer `name` (x along its last axis), made once per
        workspace and filled from its device buffer; DeviceUnsupported where it is larger than
        this device makes."""
        if name not in self._arrays:
            array, kind = self._array(name), self._array_kinds[name]
            largest = largest_array(self.device, kind, array.ndim)
            if why := array_beyond(kind, name, array.shape, largest):
                raise DeviceUnsupported(why)
            options = OpaqueArrayOptions(
                shape=tuple(reversed(array.shape)),
                format=array.dtype,
                num_channels=1,
                is_surface_load_store=kind == "surface",
            )
            self._arrays[name] = self.device.create_opaque_array(options)
            self._fill_array(name)
        return self._arrays[name]

    def _fill_array(self, name: str) -> None:
        """The CUDA array of buffer `name` copied from its device buffer, as it holds now."""
        self._arrays[name].copy_from(self.buffers[name], stream=self.stream)

    def _fill_output_arrays(self) -> None:
        """Each output's CUDA array as its buffer is now (poisoned, zeroed, primed): what a
        surface writes, the checked run's outputs, starts as the buffer does."""
        for name in self._arrays:
            if name in self.problem.outputs:
                self._fill_array(name)

    def _drain(self, names: Iterable[str]) -> None:
        """Each named buffer a surface may write, as its CUDA array holds it now: the arrays are
        copied back before a buffer is read, never inside a timed run."""
        for name in names:
            if name in self._arrays and self._array_kinds[name] == "surface":
                self._arrays[name].copy_to(self.buffers[name], stream=self.stream)

    def _step(self, module: Module, one: Launch | Memset) -> Callable[[Stream], None]:
        """One step of a run, enqueued on the stream it is given."""
        if isinstance(one, Memset):
            buffer, byte = self.buffers[self._named(one.name)], one.byte
            if not isinstance(byte, int) or not 0 <= byte <= 255:
                raise Unlaunchable(f"Memset({one.name!r}, {byte!r}): a byte is 0 to 255")
            return lambda stream: buffer.fill(byte, stream=stream)
        function, config, args = self._launch_of(module, one)
        if any(isinstance(arg, _StructBytes) for arg in args):
            return _driver_launch(function, one, args)
        return lambda stream: launch(stream, config, function, *args)

    def _named(self, name: str) -> str:
        self._array(name)  # a KeyError naming it where the problem has no such buffer
        return name

    def _launch_of(
        self, module: Module, one: Launch
    ) -> tuple[cuda.core.Kernel, LaunchConfig, tuple[object, ...]]:
        loaded = module.entry(one.entry)
        if one.shmem_bytes > 48 * 1024:
            # Above 48 KB a block gets dynamic shared memory only after this opt-in.
            check(
                driver.cuKernelSetAttribute(
                    driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    one.shmem_bytes,
                    loaded.function.handle,
                    module.info.ordinal,
                )
            )
        if one.cluster:
            # cuda.core counts clusters in `grid` when a cluster is given; specs count blocks.
            if any(g % c for g, c in zip(one.grid, one.cluster, strict=True)):
                raise Unlaunchable(f"grid {one.grid} is not a multiple of cluster {one.cluster}")
            grid = tuple(g // c for g, c in zip(one.grid, one.cluster, strict=True))
            config = LaunchConfig(
                grid=grid, cluster=one.cluster, block=one.block, shmem_size=one.shmem_bytes
            )
            self._allow_cluster(loaded.function, config, one)
        else:
            config = LaunchConfig(
                grid=one.grid,
                block=one.block,
                shmem_size=one.shmem_bytes,
                is_cooperative=one.cooperative,
            )
            if one.cooperative:
                self._check_co_resident(loaded.function, one, module.info.sm_count)
        args = tuple(self._argument(arg) for arg in one.args)
        return loaded.function, config, args

    def _check_co_resident(self, function: cuda.core.Kernel, one: Launch, sm_count: int) -> None:
        """A cooperative grid must run all at once: DeviceUnsupported where it cannot here."""
        threads = one.block[0] * one.block[1] * one.block[2]
        per_sm = function.occupancy.max_active_blocks_per_multiprocessor(threads, one.shmem_bytes)
        blocks = one.grid[0] * one.grid[1] * one.grid[2]
        if blocks > per_sm * sm_count:
            raise DeviceUnsupported(
                f"{one.entry}: a cooperative grid of {blocks} blocks, but this device runs at "
                f"most {per_sm * sm_count} of them at once ({per_sm} per SM x {sm_count} SMs)"
            )

    def _allow_cluster(self, function: cuda.core.Kernel, config: LaunchConfig, one: Launch) -> None:
        """Clusters above 8 blocks are non-portable: opt in, then ask whether this GPU has them."""
        if one.cluster is None:
            return
        blocks = one.cluster[0] * one.cluster[1] * one.cluster[2]
        if blocks <= PORTABLE_CLUSTER_BLOCKS:
            return
        check(
            driver.cuKernelSetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
                function.handle,
                int(self.device),
            )
        )
        most = function.occupancy.max_potential_cluster_size(config, stream=self.stream)
        if most < blocks:
            raise DeviceUnsupported(
                f"{one.entry}: a cluster of {blocks} blocks is beyond this device's limit of {most}"
            )

    def poison_outputs(self, byte: int = POISON_BYTE) -> None:
        """Fill every output with `byte`, so an element the next run does not write fails; an
        accumulated output is zeroed before each run instead (reset_accumulated)."""
        for name in self._poisoned():
            self.buffers[name].fill(byte, stream=self.stream)
        self._fill_output_arrays()

    def _poisoned(self) -> list[str]:
        """The outputs filled with poison before a run: not the accumulated (zeroed), nor the
        empty (an empty output's one byte of view is its after-guard's first)."""
        return [
            name
            for name, array in self.problem.outputs.items()
            if name not in self.problem.accumulated and array.nbytes
        ]

    def stray_sources(self) -> list[str]:
        """What no output may depend on: each guard zone ("x:after") and each poisoned output's
        bytes before the run ("y:contents")."""
        return [*self.guards, *(f"{name}:{CONTENTS}" for name in self._poisoned())]

    def prime(self, loud: Mapping[str, Extreme]) -> None:
        """Before a run: every guard zone filled with GUARD_BYTE and every output poisoned, as
        for the verified run, but for the sources in `loud` (stray_sources' names), each element
        of those its buffer dtype's extreme."""
        for key, (guard, _) in self.guards.items():
            name = key.rsplit(":", 1)[0]
            _fill(guard, loud.get(key), self._array(name).dtype, GUARD_BYTE, self.stream)
        for name in self._poisoned():
            extreme = loud.get(f"{name}:{CONTENTS}")
            dtype = self.problem.outputs[name].dtype
            _fill(self.buffers[name], extreme, dtype, POISON_BYTE, self.stream)
        self._fill_output_arrays()

    def kind_of(self, name: str) -> str:
        """The group of the buffer `name`: "input", "output" or "scratch"."""
        return next(
            kind
            for kind, group in (
                ("input", self.problem.inputs),
                ("output", self.problem.outputs),
                ("scratch", self.problem.scratch),
            )
            if name in group
        )

    def reset_scratch(self) -> None:
        """Before every run: the scratch as given, the accumulated outputs zero. Only enqueued:
        the timer calls it before every sample."""
        for name, given in self._scratch_given.items():
            into = int(self.buffers[name].handle)
            check(driver.cuMemcpyDtoDAsync(into, int(given.handle), given.size, self.stream.handle))
        self.reset_accumulated()

    def reset_accumulated(self) -> None:
        for name in self.problem.accumulated:
            if self.problem.outputs[name].nbytes:
                self.buffers[name].fill(0, stream=self.stream)
        self._fill_output_arrays()

    def run(self, stream: Stream | None = None) -> None:
        """Enqueue every step of the problem on the stream (or on `stream`, another timer's),
        without waiting."""
        for step in self.steps:
            step(stream or self.stream)

    def runner_of(self, module: Module) -> Callable[[], None]:
        """What `run` does, with another build's entry points over these very buffers: two
        builds of one problem timed on the same addresses."""
        steps = [self._step(module, one) for one in self.problem.launches]

        def run() -> None:
            for step in steps:
                step(self.stream)

        return run

    def outputs(self, staging: HostStaging | None = None) -> dict[str, np.ndarray]:
        """Every output as it is on the device now (in `staging`'s memory, when given)."""
        return {name: self._download(name, t, staging) for name, t in self.problem.outputs.items()}

    def download(self, name: str, staging: HostStaging | None = None) -> np.ndarray:
        """The buffer `name` as it is on the device now (in `staging`'s memory, when given)."""
        return self._download(name, self._array(name), staging)

    def extents(self, names: Iterable[str]) -> dict[str, tuple[Buffer, int]]:
        """Each named buffer and how many of its bytes the problem uses (a buffer is never
        empty, an array may be); one a surface writes as its CUDA array holds it now."""
        names = list(names)
        self._drain(names)
        return {name: (self.buffers[name], self._array(name).nbytes) for name in names}

    def guard_writes(self, name_side: str) -> str:
        """What the kernel wrote into the guard `name_side` ("y:after"), as a cell says it:
        "wrote 4 bytes past the end of output 'y' (at byte 0..3 after it)"."""
        name, side = name_side.rsplit(":", 1)
        guard, size = self.guards[name_side]
        found = np.empty(size, np.uint8)
        check(
            driver.cuMemcpyDtoHAsync(found.ctypes.data, int(guard.handle), size, self.stream.handle)
        )
        self.stream.sync()
        written = np.flatnonzero(found != GUARD_BYTE)
        kind = self.kind_of(name)
        if written.size == 0:  # rewritten with the guard's own byte: the digest still saw it
            return f"wrote into the guard {side} {kind} {name!r}"
        if side == "after":
            first, last = int(written[0]), int(written[-1])
            return (
                f"wrote {written.size} bytes past the end of {kind} {name!r} "
                f"(at byte {first}..{last} after it)"
            )
        first, last = size - int(written[-1]), size - int(written[0])
        return (
            f"wrote {written.size} bytes before the start of {kind} {name!r} "
            f"(at byte {first}..{last} before it)"
        )

    def close(self) -> None:
        self.stream.sync()
        for made in (*self._textures.values(), *self._surfaces.values()):
            made.close()  # type: ignore[attr-defined]
        self._textures.clear()
        self._surfaces.clear()
        for cuda_array in self._arrays.values():  # after the objects over them
            cuda_array.close()
        self._arrays.clear()
        self.buffers.clear()
        self.guards.clear()
        for whole in (*self._allocations.values(), *self._scratch_given.values()):
            whole.close(self.stream)
        self._allocations.clear()
        self._scratch_given.clear()


def largest_array(device: Device, kind: str, dims: int) -> list[list[int]]:
    """The shapes (x first) of the largest `dims`-D CUDA array `device` makes for a `kind`
    ("texture" or "surface"), as the stand-ins say theirs."""
    return [
        [getattr(device.properties, attribute) for attribute in shape]
        for shape in _LARGEST_ARRAY[kind, dims]
    ]


def _fill(
    buffer: Buffer, extreme: Extreme | None, dtype: np.dtype, usual: int, stream: Stream
) -> None:
    """`buffer` filled with the byte `usual`, or with `dtype`'s `extreme` where one is given
    (its most significant byte repeated, where the buffer's start or size does not fit the
    extreme's word)."""
    if extreme is None:
        buffer.fill(usual, stream=stream)
        return
    word = extreme_fill(dtype, extreme)
    if int(buffer.handle) % len(word) or buffer.size % len(word):
        word = word[-1:]
    buffer.fill(word[0] if len(word) == 1 else word, stream=stream)


def _textured(problem: Problem) -> set[str]:
    """The buffers a launch of `problem` reads through a texture object."""
    return {
        arg.name
        for step in problem.launches
        if isinstance(step, Launch)
        for arg in step.args
        if isinstance(arg, Texture)
    }


@dataclass(frozen=True)
class _StructBytes:
    """A struct argument packed (packing.packed): cuda.core packs no struct, so a launch that
    passes one goes to the driver with every argument as bytes."""

    data: bytes


def _parameter_bytes(arg: object) -> bytes:
    """One kernel parameter's bytes, as the driver copies them into the parameter space."""
    if isinstance(arg, _StructBytes):
        return arg.data
    if isinstance(arg, Buffer):
        return int(arg.handle).to_bytes(8, "little")
    if isinstance(arg, np.generic):
        return arg.tobytes()
    raise Unlaunchable(
        "a launch that passes a Struct takes Buf, Scalar, Texture, Surface and Struct arguments, "
        f"not {type(arg).__name__} (a TensorMap goes in a launch of its own kind)"
    )


def _driver_launch(
    function: cuda.core.Kernel, one: Launch, args: tuple[object, ...]
) -> Callable[[Stream], None]:
    """A launch through cuLaunchKernelEx, each parameter from bytes of our own: a struct by
    value, which cuda.core cannot pass. Grid in blocks, a cluster and a cooperative launch as
    launch attributes, as cuda.core would set them."""
    parameters = [_parameter_bytes(arg) for arg in args]
    storage = [ctypes.create_string_buffer(data, max(1, len(data))) for data in parameters]
    pointers = (ctypes.c_void_p * max(1, len(storage)))(*map(ctypes.addressof, storage))
    attributes = []
    if one.cluster:
        cluster = driver.CUlaunchAttribute()
        cluster.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dims = cluster.value.clusterDim
        dims.x, dims.y, dims.z = one.cluster
        attributes.append(cluster)
    if one.cooperative:
        cooperative = driver.CUlaunchAttribute()
        cooperative.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        cooperative.value.cooperative = 1
        attributes.append(cooperative)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = one.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = one.block
    config.sharedMemBytes = one.shmem_bytes
    config.attrs = attributes
    config.numAttrs = len(attributes)
    handle = driver.CUfunction(int(function.handle))
    held = (storage, pointers)  # the parameters live as long as the launch does

    def run(stream: Stream) -> None:
        config.hStream = driver.CUstream(int(stream.handle))
        check(driver.cuLaunchKernelEx(config, handle, ctypes.addressof(held[1]), 0))

    return run
