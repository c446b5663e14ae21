"""Two builds of one case, base and head, timed against each other on one GPU: the A/B of
`python -m harness ab`.

Across machines an unchanged case moves by up to a few percent, so a change of 1 % can only be
seen on one GPU, in one process, with both builds interleaved. Each round times the builds in
the order base, head, head, base (a steady drift of the clock or the temperature cancels), each
place the median of a few cold samples taken as `test` takes them. Where both specs make the
same problem, the two builds run over the same two sets of buffers and swap them between the
round's halves: on small cases one set of buffers can be a few percent faster than another,
and this way it favours both builds alike. A round's ratio is the geometric mean of its two
halves' head/base ratios; the report stage judges the rounds' ratios (report.verdict).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import waiting
from harness.model.discovery import LoadedKernel
from harness.model.errors import CellError
from harness.model.matrix import ABSettings
from harness.model.spec import Case, Problem
from harness.run.case import GpuRuntime, describe_exception
from harness.run.launch import Module, Workspace
from harness.run.timer import ColdSampler
from harness.run.verify import compare

MIN_ROUNDS = 6  # fewer give the rounds' median no distribution-free interval


@dataclass(frozen=True)
class PairTiming:
    """What the A/B of one case measured, or why it could not (`why` non-empty)."""

    ratios: tuple[float, ...] = ()  # head / base, one per round
    base_median_us: float | None = None
    head_median_us: float | None = None
    same_inputs: bool | None = None
    why: str = ""

    @classmethod
    def from_json(cls, record: Any) -> PairTiming:
        """The timing a worker sent (dataclasses.asdict's form); ValueError when it is not."""
        try:
            ratios = tuple(_number(r) for r in record["ratios"])
            base, head = record["base_median_us"], record["head_median_us"]
            same = record["same_inputs"]
            if not isinstance(same, bool | None) or not isinstance(record["why"], str):
                raise TypeError("same_inputs or why")
            return cls(
                ratios,
                None if base is None else _number(base),
                None if head is None else _number(head),
                same,
                record["why"],
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a pair's timing: {type(error).__name__}: {error}") from None


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{value!r} is not a finite number")
    return float(value)


@dataclass(frozen=True)
class Side:
    """One build of the case: its kernel (spec), the case as its spec names it, its binary."""

    kernel: LoadedKernel
    case: Case
    module: Module


class CannotCompare(Exception):
    """The pair cannot be timed: the message says which side failed, and how."""


def time_pair(
    runtime: GpuRuntime, base: Side, head: Side, settings: ABSettings
) -> tuple[PairTiming, bool]:
    """The A/B of one case, and whether the worker's CUDA context is still fit for more."""
    try:
        with ready_pair(runtime, base, head) as pair:
            return pair.timed(settings), True
    except CannotCompare as cannot:
        return PairTiming(why=str(cannot)), True
    except CellError as error:  # a spec that raised, a CUDA error: the context may be gone
        return PairTiming(why=str(error)), False
    except Exception as error:  # a driver or launch error from cuda.core
        return PairTiming(why=f"A/B failed: {describe_exception(error)[0]}"), False


@dataclass(frozen=True)
class ReadyPair:
    """Both builds of a case on the device, each checked: what a round runs in each place."""

    runtime: GpuRuntime
    base_runs: tuple[Callable[[], None], Callable[[], None]]
    head_runs: tuple[Callable[[], None], Callable[[], None]]
    resets: tuple[tuple[Callable[[], None], Callable[[], None]], ...]
    same_inputs: bool

    def timed(self, settings: ABSettings) -> PairTiming:
        """The rounds of one A/B (scripts/aa_calibration.py times one pair many times over)."""
        timing = _rounds(self.runtime, self.base_runs, self.head_runs, self.resets, settings)
        return dataclasses.replace(timing, same_inputs=self.same_inputs)


@contextlib.contextmanager
def ready_pair(runtime: GpuRuntime, base: Side, head: Side) -> Iterator[ReadyPair]:
    """Both sides' problems set up and uploaded (one problem twice where both specs make the
    same), each build checked against its own spec's reference; CannotCompare saying which
    side failed where either cannot be. The workspaces are freed on the way out."""
    workspaces: list[Workspace] = []
    try:
        base_ready = runtime.beside(_host_work, runtime, base, "base")  # both at once
        head_host = _host_work(runtime, head, "head")
        base_host = waiting.result(base_ready)
        same = _same_problem(base_host.problem, head_host.problem)
        if same:
            first = runtime.upload(head.kernel, head.module, head_host.problem)
            workspaces.append(first)
            second = runtime.upload(head.kernel, head.module, head_host.problem)
            workspaces.append(second)
            base_runs = (first.runner_of(base.module), second.runner_of(base.module))
            head_runs = (second.run, first.run)  # a round's halves swap the buffers
            resets = (
                (first.reset_scratch, second.reset_scratch),
                (second.reset_scratch, first.reset_scratch),
            )
        else:
            own_base = runtime.upload(base.kernel, base.module, base_host.problem)
            workspaces.append(own_base)
            own_head = runtime.upload(head.kernel, head.module, head_host.problem)
            workspaces.append(own_head)
            base_runs, head_runs = (own_base.run,) * 2, (own_head.run,) * 2
            resets = ((own_base.reset_scratch,) * 2, (own_head.reset_scratch,) * 2)
        _check(runtime, workspaces[0], base_runs[0], base_host, base, "base")
        head_workspace = workspaces[0] if same else workspaces[1]
        head_check = head_runs[1] if same else head_runs[0]
        _check(runtime, head_workspace, head_check, head_host, head, "head")
        yield ReadyPair(runtime, base_runs, head_runs, resets, same)
    finally:
        for workspace in workspaces:
            try:
                workspace.close()
            except Exception:  # a sticky fault: this worker is replaced after the reply
                pass


@dataclass(frozen=True)
class _Prepared:
    """One side's problem and its spec's reference for it."""

    problem: Problem
    expected: Mapping[str, np.ndarray]


def _host_work(runtime: GpuRuntime, side: Side, name: str) -> _Prepared:
    host = runtime.host_work(side.kernel, side.case, side.module)
    if host.raised is not None or host.problem is None or host.expected is None:
        why = str(host.raised) if host.raised else "setup() made no problem"
        raise CannotCompare(f"the {name}'s spec cannot set the case up: {why}")
    return _Prepared(host.problem, host.expected)


def _same_problem(base: Problem, head: Problem) -> bool:
    """Whether both specs made the same buffers, data and launches: then both builds can run
    over one set of buffers."""
    if base.launches != head.launches:
        return False
    groups = (
        (base.inputs, head.inputs),
        (base.outputs, head.outputs),
        (base.scratch, head.scratch),
    )
    for mine, theirs in groups:
        if mine.keys() != theirs.keys():
            return False
        for name, array in mine.items():
            other = theirs[name]
            if array.shape != other.shape or array.dtype != other.dtype:
                return False
    return all(
        _same_bits(array, head_group[name])
        for base_group, head_group in ((base.inputs, head.inputs), (base.scratch, head.scratch))
        for name, array in base_group.items()
    )


def _same_bits(one: np.ndarray, other: np.ndarray) -> bool:
    """Bit for bit: a NaN is the same as itself (scratch filled with NaN to show a miss is)."""

    def bits(array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)

    return np.array_equal(bits(one), bits(other))


def _check(
    runtime: GpuRuntime,
    workspace: Workspace,
    run: Callable[[], None],
    host: _Prepared,
    side: Side,
    name: str,
) -> None:
    """One build's run over `workspace`, checked against its own spec's reference: a build that
    is wrong here has no time worth comparing."""
    workspace.poison_outputs()
    workspace.reset_scratch()
    run()
    runtime.stream.sync()
    problems = []
    for output, expected in host.expected.items():
        got = workspace.download(output)
        if msg := compare(output, got, expected, side.case.tolerance_of(output), runtime.cores):
            problems.append(msg)
    if problems:
        raise CannotCompare(
            f"the {name}'s build fails its check on this case: {'; '.join(problems)}"
        )


def _rounds(
    runtime: GpuRuntime,
    base_runs: tuple[Callable[[], None], Callable[[], None]],
    head_runs: tuple[Callable[[], None], Callable[[], None]],
    resets: tuple[tuple[Callable[[], None], Callable[[], None]], ...],
    settings: ABSettings,
) -> PairTiming:
    """Rounds of base, head, head, base until `settings.rounds` or its budget; each place the
    median of `settings.samples` cold samples."""
    base_resets, head_resets = resets
    pairs = (*zip(base_runs, base_resets, strict=True), *zip(head_runs, head_resets, strict=True))
    for run, reset in pairs:
        for _ in range(runtime.timer.warmup_runs):
            reset()
            run()
    runtime.stream.sync()
    sampler = ColdSampler(runtime.stream, runtime.flush, runtime.gate)
    started = time.monotonic()
    ratios: list[float] = []
    base_samples: list[float] = []
    head_samples: list[float] = []

    def place(run: Callable[[], None], reset: Callable[[], None], into: list[float]) -> float:
        taken = [sampler.sample(run, reset) for _ in range(settings.samples)]
        into.extend(taken)
        return statistics.median(taken)

    with runtime.quiet():
        while len(ratios) < settings.rounds:
            base_first = place(base_runs[0], base_resets[0], base_samples)
            head_first = place(head_runs[0], head_resets[0], head_samples)
            head_second = place(head_runs[1], head_resets[1], head_samples)
            base_second = place(base_runs[1], base_resets[1], base_samples)
            ratios.append(math.sqrt(head_first * head_second / (base_first * base_second)))
            spent = time.monotonic() - started
            if spent > settings.budget_s and len(ratios) >= MIN_ROUNDS:
                break
    return PairTiming(
        ratios=tuple(ratios),
        base_median_us=statistics.median(base_samples),
        head_median_us=statistics.median(head_samples),
    )
