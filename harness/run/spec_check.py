"""A kernel's cases checked where no GPU runs them: CPU CI, a target this GPU cannot run.

For every case, on each stand-in device of the target's family: setup() is called with that
device's limits, its Problem checked as a launch would use it (buffers are arrays with names the
arguments find, every entry is in the binary, grids and blocks are launchable, every scalar is one
cuda.core can pass), the reference called and held to the outputs, and work() held to counts.
What would break the case on a GPU is the spec's error, found here, before an image is built and
a GPU queued for. A spec runs in a child of its own (model.spec_children.in_spec_children), as it is
for its declaration, so what it does reaches no other kernel's cells. The device is a stand-in of
the target's family (harness.run.stand_in), and each thing the check asks of it is noted. A check
that found nothing is kept in the compile cache folder, and served on later runs, this target's
or another's, while nothing it read has changed and each thing it asked of the device has the
same answer (harness.run.check_cache).
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
from harness.model.spec_children import in_spec_children
from harness.run.check_cache import CheckCache, ReadRecorder, Reads, entry_key
from harness.run.packing import (
    array_beyond,
    cuda_arrays,
    scalar_problem,
    struct_problem,
    surface_problem,
    texture_problem,
)
from harness.run.stand_in import DeviceFacts, FactLog, StandIn, stand_in_for
from harness.run.verify import (
    check_declared_bytes,
    check_reference_fits,
    checked_work,
    declared_bytes,
)
from harness.sandbox import Confinement

MAX_BLOCK_THREADS = 1024
SWIZZLES = (0, 32, 64, 128)
CHECKED = "its spec was checked here (setup, launches, entries, arguments, reference, work)"


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
    has changed and what it asked of the device is answered alike (None: every kernel is
    checked)."""
    stand_in = stand_in_for(target)
    budget_s = timeout_s * max((len(k.declared.cases) for k in kernels), default=1)
    # confined alike, less the run's own folders (its reports, its cache) it may not write in:
    # a check that wrote anything is never kept, so where it may write changes no kept answer
    confined = dataclasses.replace(confinement, read_only=()).to_json() if confinement else None
    served: dict[str, dict[str, CaseCheck]] = {}
    jobs: list[tuple[Path, dict[str, Any]]] = []
    keys: dict[str, str] = {}
    for kernel in kernels:
        spec_file, facts = kernel.folder / "spec.py", _device(kernel, resources, target, stand_in)
        if cache is not None:
            started = time.perf_counter()
            keys[kernel.classname] = key = entry_key(spec_file, confined)
            names = kernel.case_names
            notes = cache.served(kernel.classname, key, names, budget_s, facts.hold)
            if notes is not None:
                # each case's time is its share of the look-up: > 0, as readers divide by it
                share = max((time.perf_counter() - started) / len(names), SHORTEST_SECONDS)
                served[kernel.classname] = {
                    name: CaseCheck(None, share, True, notes[name]) for name in names
                }
                continue
        jobs.append((spec_file, facts.to_plan()))
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


def _device(
    kernel: Kernel,
    resources: Mapping[tuple[str, tuple[str, ...]], Mapping[str, Resources] | None],
    target: Target,
    stand_in: StandIn,
) -> DeviceFacts:
    """The device a kernel's check asks of: the target's, its stand-in, each build's entries."""
    builds = {defines: resources.get((kernel.classname, defines)) for defines in kernel.builds}
    return DeviceFacts((target.cc.major, target.cc.minor), stand_in, builds)


def _keep(
    cache: CheckCache, kernel: Kernel, key: str, checks: Mapping[str, CaseCheck], answer: Any
) -> None:
    """A check that found nothing, kept with what its child read (its spec.py whatever the
    child says) and what it asked of the device; not where the child did not say them all."""
    try:
        reads = Reads.from_json(answer.get("reads"))
    except ValueError:
        return
    facts = answer.get("facts")
    if not isinstance(facts, list):  # it asked something it could not say
        return
    files = tuple(dict.fromkeys([*reads.files, str(kernel.folder / "spec.py")]))
    seconds = {name: check.seconds for name, check in checks.items()}
    notes = {name: check.note for name, check in checks.items()}
    kept_reads = dataclasses.replace(reads, files=files)
    cache.keep(kernel.classname, key, seconds, notes, kept_reads, facts)


@dataclass(frozen=True)
class CaseCheck:
    """What the CPU found of a case (None: it would launch as its spec says), how long the
    check took (the case cell's time, where it did not run), and, where the stand-in device
    would skip the case, how far it was checked and why (None: it was checked through).
    `cached`: the answer of an earlier check, served as nothing it read has changed (its time
    is the look-up's)."""

    finding: str | None
    seconds: float
    cached: bool = False
    note: str | None = None


def _case_check(answer: Any) -> CaseCheck:
    """A child's answer for one case, [finding, seconds, note], read as a spec's child may send
    anything."""
    parts = answer if isinstance(answer, list) and len(answer) == 3 else [answer, 0.0, None]
    finding, seconds, note = parts
    text = finding if isinstance(finding, str) or finding is None else repr(finding)
    valid = isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0
    said = note if isinstance(note, str) else None
    return CaseCheck(text, float(seconds) if valid else 0.0, note=said)


def _check(spec_file: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """In the spec's child: each case's finding and the seconds its check took, what the
    check read (its spec, the modules and files it opened), and what it asked of the device
    (None where a question could not be noted)."""
    recorder = ReadRecorder()
    recorder.start()
    kernel = load_kernel(KernelFolder.of(spec_file))
    log = FactLog(DeviceFacts.of_plan(plan))
    found = {}
    for case in kernel.spec.cases:
        started = time.monotonic()
        finding, note = _case_finding(kernel, case, log)
        found[case.name] = [finding, time.monotonic() - started, note]
    facts = log.noted() if log.complete else None
    return {"cases": found, "reads": recorder.finish().to_json(), "facts": facts}


def _case_finding(
    kernel: LoadedKernel, case: Any, log: FactLog[DeviceFacts]
) -> tuple[str | None, str | None]:
    """What is wrong with the case (None: nothing), and, where the stand-in device would skip
    it, how far it was checked and why (None: all of it, and it would run)."""
    spec, where = kernel.spec, f"{kernel.classname} case {case.name!r} on {log.facts.device.name}"
    defines = define_flags(case.defines)
    try:
        declared = declared_bytes(kernel.classname, spec, case)
    except SpecError as error:
        return f"{where}: {error}", None
    if declared is not None and not log.ask("memory_fits", declared):
        # skipped before setup(), as on a GPU: its figure is the stand-in's, so not said here
        return None, (
            f"its spec was checked as far as device_bytes(): the case declares {declared} "
            "bytes, more than the stand-in device has, so it is skipped before setup() as on "
            "a GPU that small"
        )
    try:
        problem = spec.setup(case, np.random.default_rng(0), log.limits(defines))
    except DeviceUnsupported as unsupported:
        return None, (
            "its spec was checked as far as setup(), which says the stand-in device cannot run "
            f"it: {unsupported.why}"
        )
    except Exception as error:
        return f"{where}: setup() raised {type(error).__name__}: {error}", None
    if not isinstance(problem, Problem):
        return f"{where}: setup() returned {type(problem).__name__}, not a Problem", None
    why = problem_finding(problem, log, defines)
    if why:
        return f"{where}: {why}", None
    try:
        check_declared_bytes(kernel.classname, problem, declared)
    except SpecError as error:
        return f"{where}: {error}", None
    seen = problem.case_seen_by(case)
    try:
        expected = spec.reference(seen, problem.inputs)
        check_reference_fits(kernel.classname, problem.outputs, expected, case)
        checked_work(kernel.classname, spec.work(seen))
    except SpecError as error:
        return f"{where}: {error}", None
    except Exception as error:
        return f"{where}: reference() or work() raised {type(error).__name__}: {error}", None
    beyond = _arrays_beyond(problem, log)
    return None, beyond and f"{CHECKED}, and the stand-in device would skip it: {beyond}"


def _arrays_beyond(problem: Problem, log: FactLog[DeviceFacts]) -> str | None:
    """Why a CUDA array the problem's textures or surfaces read is larger than the device
    makes (a GPU skips the case device-unsupported at its upload); None when none is."""
    buffers = {**problem.inputs, **problem.outputs}
    for name, kind in cuda_arrays(problem):
        shape = buffers[name].shape
        if why := array_beyond(kind, name, shape, log.ask("largest_array", kind, len(shape))):
            return why
    return None


def problem_finding(
    problem: Problem, log: FactLog[DeviceFacts], defines: tuple[str, ...]
) -> str | None:
    """What about `problem` no launch of the build `defines` could take on `log`'s device;
    None when nothing."""
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
        elif why := _launch_finding(step, buffers, problem, log, defines):
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
    problem: Problem,
    log: FactLog[DeviceFacts],
    defines: tuple[str, ...],
) -> str | None:
    if not isinstance(launch.entry, str):
        return f"the entry {launch.entry!r} is not a name"
    if log.ask("has_entry", list(defines), launch.entry) is False:
        entries = log.facts.builds.get(defines) or {}
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
    if not log.ask("shmem_fits", shmem):
        beyond = log.facts.device.smem_optin_bytes
        return f"{shmem} bytes of dynamic shared memory, beyond {beyond}"
    for position, arg in enumerate(launch.args):
        if why := _argument_finding(arg, buffers, problem, log):
            return f"argument {position}: {why}"
    kinds = {type(arg) for arg in launch.args}
    if Struct in kinds and TensorMap in kinds:
        return (
            "a launch that passes a Struct takes Buf, Scalar, Texture, Surface and Struct "
            "arguments, not TensorMap (a TensorMap goes in a launch of its own kind)"
        )
    return None


def _argument_finding(
    arg: object,
    buffers: Mapping[str, np.ndarray],
    problem: Problem,
    log: FactLog[DeviceFacts],
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
        return texture_problem(arg, problem.inputs, log.ask("texture_pitch"))
    if isinstance(arg, Surface):
        return surface_problem(arg, {**problem.inputs, **problem.outputs})
    return f"{arg!r} is not a Buf, Scalar, TensorMap, Struct, Texture or Surface"


def _dim3(dims: object) -> bool:
    return (
        isinstance(dims, tuple)
        and len(dims) == 3
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims)
    )
