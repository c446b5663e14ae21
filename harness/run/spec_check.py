"""A kernel's cases checked where no GPU runs them: CPU CI, a target this GPU cannot run.

For every case, on each stand-in device of the target's family: setup() is called with that
device's limits, its Problem checked as a launch would use it (buffers are arrays with names the
arguments find, every entry is in the binary, grids and blocks are launchable, every scalar is one
cuda.core can pass), the reference called and held to the outputs, and work() held to counts.
What would break the case on a GPU is the spec's error, found here, before an image is built and
a GPU queued for. A spec runs in a child of its own (model.spec_children.in_spec_children), as it is
for its declaration, so what it does reaches no other kernel's cells. A check that found nothing
is kept in the compile cache folder, and served on later runs while nothing it read has changed
(harness.run.check_cache).

The stand-ins are a GPU of each family with public figures (A100, H100, B200); occupancy comes
from the build's ptxas resources, as the occupancy calculator computes it: near the driver's
answer, which a spec reads only to size a grid.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.model.build_options import define_flags
from harness.model.cell import SHORTEST_SECONDS, Resources
from harness.model.discovery import Kernel, KernelFolder, LoadedKernel, load_kernel
from harness.model.errors import SpecError
from harness.model.matrix import Target
from harness.model.spec import (
    Buf,
    DeviceLimits,
    DeviceUnsupported,
    Launch,
    Memset,
    Problem,
    Scalar,
    Struct,
    TensorMap,
    Texture,
)
from harness.model.spec_children import in_spec_children
from harness.run.check_cache import CheckCache, ReadRecorder, Reads, entry_key
from harness.run.packing import scalar_problem, struct_problem, texture_problem
from harness.run.verify import check_reference_fits, checked_work
from harness.sandbox import Confinement

MAX_BLOCK_THREADS = 1024
SWIZZLES = (0, 32, 64, 128)


@dataclass(frozen=True)
class StandIn:
    """A device of a family, as far as setup() reads one, and what occupancy is made of."""

    name: str
    sm_count: int
    smem_optin_bytes: int
    smem_per_sm_bytes: int
    l2_bytes: int
    memory_bytes: int
    registers_per_sm: int = 65536
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    texture_pitch_bytes: int = 32  # CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT


KIB, MIB, GIB = 2**10, 2**20, 2**30
# By compute capability major: the family's first data-centre GPU's public figures
STAND_INS = {
    8: StandIn("a CC 8.x stand-in (A100 80GB)", 108, 163 * KIB, 164 * KIB, 40 * MIB, 80 * GIB),
    9: StandIn("a CC 9.x stand-in (H100 SXM)", 132, 227 * KIB, 228 * KIB, 50 * MIB, 80 * GIB),
    10: StandIn("a CC 10.x stand-in (B200)", 148, 227 * KIB, 228 * KIB, 126 * MIB, 180 * GIB),
}


def stand_in_for(target: Target) -> StandIn:
    """The stand-in of the target's family; the nearest older one for a family not listed."""
    known = [major for major in STAND_INS if major <= target.cc.major] or [min(STAND_INS)]
    return STAND_INS[max(known)]


def check_kernels(
    kernels: list[Kernel],
    resources: Mapping[tuple[str, tuple[str, ...]], Mapping[str, Resources] | None],
    target: Target,
    timeout_s: float,
    confinement: Confinement | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache: CheckCache | None = None,
) -> dict[str, dict[str, CaseCheck]]:
    """Each kernel's cases, by classname and case name: None where the case would launch as
    its spec says, else what is wrong, naming the case and device. A kernel whose child failed
    (its spec hung, exited, or raised outside a case) has that as every case's finding.
    `resources`: the entry points of each build, by classname and case macros (None: no build
    to hold the entries to); `progress(done, total)` is told as each kernel's check ends;
    `cache`: where a check that found nothing is kept, and served from while nothing it read
    has changed (None: every kernel is checked)."""
    stand_in = stand_in_for(target)
    budget_s = timeout_s * max((len(k.declared.cases) for k in kernels), default=1)
    # confined alike, less the run's own folders (its reports, its cache) it may not write in:
    # a check that wrote anything is never kept, so where it may write changes no kept answer
    confined = dataclasses.replace(confinement, read_only=()).to_json() if confinement else None
    served: dict[str, dict[str, CaseCheck]] = {}
    jobs: list[tuple[Path, dict[str, Any]]] = []
    keys: dict[str, str] = {}
    for kernel in kernels:
        spec_file, plan = kernel.folder / "spec.py", _plan(kernel, resources, target, stand_in)
        if cache is not None:
            started = time.perf_counter()
            keys[kernel.classname] = key = entry_key(spec_file, plan, confined)
            names = kernel.case_names
            if cache.served(kernel.classname, key, names, budget_s):
                # each case's time is its share of the look-up: > 0, as readers divide by it
                share = max((time.perf_counter() - started) / len(names), SHORTEST_SECONDS)
                served[kernel.classname] = dict.fromkeys(names, CaseCheck(None, share, True))
                continue
        jobs.append((spec_file, plan))
    if progress is not None and served:
        progress(len(served), len(kernels))

    def checked(done: int, _: int) -> None:
        if progress is not None:
            progress(len(served) + done, len(kernels))

    answers = in_spec_children(jobs, _check, budget_s, "checking its cases", confinement, checked)
    found: dict[str, dict[str, CaseCheck]] = {}
    for kernel in kernels:
        names = kernel.case_names
        answer = answers.get(kernel.folder / "spec.py")
        cases = answer.get("cases") if isinstance(answer, dict) else None
        if kernel.classname in served:
            found[kernel.classname] = served[kernel.classname]
        elif isinstance(cases, dict) and set(cases) == set(names):
            found[kernel.classname] = {name: _case_check(cases[name]) for name in names}
            if cache is not None and not any(c.finding for c in found[kernel.classname].values()):
                _keep(cache, kernel, keys[kernel.classname], found[kernel.classname], answer)
        else:
            why = str(answer) if isinstance(answer, SpecError) else "its check sent no answer"
            found[kernel.classname] = dict.fromkeys(names, CaseCheck(why, 0.0))
    return found


def _plan(
    kernel: Kernel,
    resources: Mapping[tuple[str, tuple[str, ...]], Mapping[str, Resources] | None],
    target: Target,
    stand_in: StandIn,
) -> dict[str, Any]:
    """What a kernel's child is sent: the target, the stand-in, and each build's entries."""
    builds = []
    for defines in kernel.builds:
        built = resources.get((kernel.classname, defines))
        entries = None if built is None else {e: vars(r) for e, r in built.items()}
        builds.append([list(defines), entries])
    return {
        "cc": [target.cc.major, target.cc.minor],
        "device": dataclasses.asdict(stand_in),
        "builds": builds,
    }


def _keep(
    cache: CheckCache, kernel: Kernel, key: str, checks: Mapping[str, CaseCheck], answer: Any
) -> None:
    """A check that found nothing, kept with what its child read (its spec.py whatever the
    child says); not where the child did not say."""
    try:
        reads = Reads.from_json(answer.get("reads"))
    except ValueError:
        return
    files = tuple(dict.fromkeys([*reads.files, str(kernel.folder / "spec.py")]))
    seconds = {name: check.seconds for name, check in checks.items()}
    cache.keep(kernel.classname, key, seconds, dataclasses.replace(reads, files=files))


@dataclass(frozen=True)
class CaseCheck:
    """What the CPU found of a case (None: it would launch as its spec says), and how long the
    check took: the case cell's time, where it did not run. `cached`: the answer of an earlier
    check, served as nothing it read has changed (its time is the look-up's)."""

    finding: str | None
    seconds: float
    cached: bool = False


def _case_check(answer: Any) -> CaseCheck:
    """A child's answer for one case, read as a spec's child may send anything."""
    finding, seconds = answer if isinstance(answer, list) and len(answer) == 2 else (answer, 0.0)
    text = finding if isinstance(finding, str) or finding is None else repr(finding)
    valid = isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0
    return CaseCheck(text, float(seconds) if valid else 0.0)


def _check(spec_file: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """In the spec's child: each case's finding and the seconds its check took, and what the
    check read (its spec, the modules and files it opened)."""
    recorder = ReadRecorder()
    recorder.start()
    kernel = load_kernel(KernelFolder.of(spec_file))
    device = StandIn(**plan["device"])
    builds: dict[tuple[str, ...], dict[str, Resources] | None] = {
        tuple(defines): None if entries is None else {e: Resources(**r) for e, r in entries.items()}
        for defines, entries in plan["builds"]
    }
    found = {}
    for case in kernel.spec.cases:
        built = builds.get(define_flags(case.defines))
        limits = DeviceLimits(
            cc=(plan["cc"][0], plan["cc"][1]),
            sm_count=device.sm_count,
            smem_optin_bytes=device.smem_optin_bytes,
            l2_bytes=device.l2_bytes,
            max_blocks_per_sm=_occupancy(device, built or {}),
            memory_bytes=device.memory_bytes,
        )
        started = time.monotonic()
        finding = _case_finding(kernel, case, limits, device, built)
        found[case.name] = [finding, time.monotonic() - started]
    return {"cases": found, "reads": recorder.finish().to_json()}


def _occupancy(device: StandIn, built: Mapping[str, Resources]) -> Callable[[str, int, int], int]:
    """DeviceLimits.max_blocks_per_sm of a stand-in, from a build's resources."""
    return lambda entry, threads, shmem: blocks_per_sm(device, built.get(entry), threads, shmem)


def _case_finding(
    kernel: LoadedKernel,
    case: Any,
    limits: DeviceLimits,
    device: StandIn,
    entries: Mapping[str, Resources] | None,
) -> str | None:
    spec, where = kernel.spec, f"{kernel.classname} case {case.name!r} on {device.name}"
    try:
        problem = spec.setup(case, np.random.default_rng(0), limits)
    except DeviceUnsupported:
        return None  # this device cannot run it, as the spec says: no error
    except Exception as error:
        return f"{where}: setup() raised {type(error).__name__}: {error}"
    if not isinstance(problem, Problem):
        return f"{where}: setup() returned {type(problem).__name__}, not a Problem"
    why = problem_finding(problem, entries, device)
    if why:
        return f"{where}: {why}"
    seen = problem.case_seen_by(case)
    try:
        expected = spec.reference(seen, problem.inputs)
        check_reference_fits(kernel.classname, problem.outputs, expected, case)
        checked_work(kernel.classname, spec.work(seen))
    except SpecError as error:
        return f"{where}: {error}"
    except Exception as error:
        return f"{where}: reference() or work() raised {type(error).__name__}: {error}"
    return None


def problem_finding(
    problem: Problem, entries: Mapping[str, Resources] | None, device: StandIn
) -> str | None:
    """What about `problem` no launch could take; None when nothing."""
    buffers: dict[str, Any] = {}
    for group in ("inputs", "outputs", "scratch"):
        named = getattr(problem, group)
        if not isinstance(named, Mapping):
            return f"{group} is a {type(named).__name__}, not a mapping of names to arrays"
        for name, array in named.items():
            if not isinstance(array, np.ndarray):
                return f"{group[:-1] if group != 'scratch' else group} {name!r} is a " + (
                    f"{type(array).__name__}, not a numpy array"
                )
            if name in buffers:
                return f"buffer name {name!r} is used twice"
            buffers[name] = array
    launches = problem.launches
    if not isinstance(launches, tuple | list) or not any(isinstance(s, Launch) for s in launches):
        return "the problem launches nothing"
    for index, step in enumerate(launches):
        if isinstance(step, Memset):
            if step.name not in buffers:
                return f"step {index}: Memset of {step.name!r}, which the problem does not have"
            if not isinstance(step.byte, int) or not 0 <= step.byte <= 255:
                return f"step {index}: Memset({step.name!r}, {step.byte!r}): a byte is 0 to 255"
        elif not isinstance(step, Launch):
            return f"step {index} is {type(step).__name__}, not a Launch or a Memset"
        elif why := _launch_finding(step, buffers, problem.inputs, entries, device):
            return f"launch {index} ({step.entry}): {why}"
    accumulated = [name for name in problem.accumulated if name not in problem.outputs]
    if accumulated:
        return f"accumulated names {accumulated}, which are not outputs ({sorted(problem.outputs)})"
    for name, value in problem.constants.items():
        if not isinstance(name, str) or not name.isidentifier():
            return f"constant {name!r} is not a symbol's name"
        if not isinstance(value, np.ndarray | np.generic):
            return f"constant {name!r} is a {type(value).__name__}, not a numpy array"
    return None


def _launch_finding(
    launch: Launch,
    buffers: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    entries: Mapping[str, Resources] | None,
    device: StandIn,
) -> str | None:
    if entries is not None and launch.entry not in entries:
        listed = ", ".join(sorted(entries)[:20]) or "none"
        return f"the binary has no entry {launch.entry!r} (its entries: {listed})"
    for what, dims in (("grid", launch.grid), ("block", launch.block), ("cluster", launch.cluster)):
        if dims is None and what == "cluster":
            continue
        if not _dim3(dims):
            return f"{what} {dims!r} is not three whole numbers, 1 or more"
    threads = math.prod(launch.block)
    if threads > MAX_BLOCK_THREADS:
        return f"block {launch.block} is {threads} threads, more than {MAX_BLOCK_THREADS}"
    if launch.cluster and any(g % c for g, c in zip(launch.grid, launch.cluster, strict=True)):
        return f"grid {launch.grid} is not a multiple of cluster {launch.cluster}"
    shmem = launch.shmem_bytes
    if not isinstance(shmem, int) or isinstance(shmem, bool) or shmem < 0:
        return f"shmem_bytes {shmem!r} is not a byte count"
    if shmem > device.smem_optin_bytes:
        return f"{shmem} bytes of dynamic shared memory, beyond {device.smem_optin_bytes}"
    for position, arg in enumerate(launch.args):
        if why := _argument_finding(arg, buffers, inputs, device):
            return f"argument {position}: {why}"
    kinds = {type(arg) for arg in launch.args}
    if Struct in kinds and TensorMap in kinds:
        return (
            "a launch that passes a Struct takes Buf, Scalar, Texture and Struct arguments, "
            "not TensorMap (a TensorMap goes in a launch of its own kind)"
        )
    return None


def _argument_finding(
    arg: object,
    buffers: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    device: StandIn,
) -> str | None:
    if isinstance(arg, Buf | TensorMap) and arg.name not in buffers:
        return f"names buffer {arg.name!r}, which the problem does not have ({sorted(buffers)})"
    if isinstance(arg, TensorMap):
        if buffers[arg.name].ndim != 2:
            return f"a TensorMap over {arg.name!r}, which is not 2-D"
        if arg.swizzle_bytes not in SWIZZLES:
            return f"swizzle_bytes {arg.swizzle_bytes!r} is not one of {SWIZZLES}"
        return None
    if isinstance(arg, Scalar):
        return scalar_problem(arg.value)  # as the launch will say it on a GPU
    if isinstance(arg, Buf):
        return None
    if isinstance(arg, Struct):
        return struct_problem(arg, buffers)
    if isinstance(arg, Texture):
        return texture_problem(arg, inputs, device.texture_pitch_bytes)
    return f"{arg!r} is not a Buf, Scalar, TensorMap, Struct or Texture"


def _dim3(dims: object) -> bool:
    return (
        isinstance(dims, tuple)
        and len(dims) == 3
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)
    )


def blocks_per_sm(
    device: StandIn, resources: Resources | None, threads: int, shmem_bytes: int
) -> int:
    """Resident blocks per SM, as the occupancy calculator has them: the least of what threads,
    registers (a warp's in 256-register steps) and shared memory (1 KiB reserved per block)
    allow, and the SM's block limit. 0 where one block does not fit."""
    if threads <= 0:
        return 0
    warps = -(-threads // 32)
    by_threads = device.threads_per_sm // (warps * 32)
    registers = resources.registers if resources else 32
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = device.registers_per_sm // (per_warp * warps) if per_warp else by_threads
    smem = (resources.smem_bytes if resources else 0) + shmem_bytes + KIB
    by_smem = device.smem_per_sm_bytes // smem
    return max(0, min(device.blocks_per_sm, by_threads, by_registers, by_smem))
