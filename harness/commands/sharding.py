"""`test --shard i/N`: a target's kernels split across N runs (GPU jobs), each kernel whole in
one of them (its compile cells and cases share its build and worker), balanced by expected time.

Every shard plans all N alone, so every shard must weigh the kernels alike: by the times of a
report given with `--times` (a report's JSON of an earlier run, or a JSON object of seconds by
`chapter.kernel` or `chapter.kernel::case`), else of this target's last full report in the
reports folder, else by each case's size (its spec's work()). Each shard's report records the
SHA-256 of the whole plan, and `report` names shards of one run that planned differently, a
shard missing and a cell run twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.model.discovery import Kernel
from harness.model.result import CellKind, Report, ReportError, Shard
from harness.run.schedule import estimate, shard


class ShardError(ValueError):
    """A --shard or --times that cannot be used; the message names it."""


@dataclass(frozen=True)
class ShardRequest:
    """`--shard i/N`, and where the kernels' times come from."""

    index: int
    count: int
    times: Path | None = None  # --times; None: the last full report, else case sizes

    @classmethod
    def parse(cls, text: str, times: Path | None = None) -> ShardRequest:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise ShardError(f"--shard {text!r}: expected i/N with 1 <= i <= N, like 2/4")
        return cls(int(match.group(1)), int(match.group(2)), times)


def times_of(path: Path) -> dict[str, float]:
    """Seconds by `chapter.kernel` and by `chapter.kernel::case`, from a report's JSON or a
    JSON object of them; ShardError naming the file when it is neither."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ShardError(f"--times {path}: cannot be read as JSON ({error})") from error
    if isinstance(data, dict) and "cells" in data and "schema_version" in data:
        try:
            report = Report.from_json(data, path)
        except ReportError as error:
            raise ShardError(f"--times {path}: {error}") from error
        # a case's turn on the GPU and its host work (setup, reference): a shard's machine
        # does both, and balancing the turns alone left one shard of two 60 % longer on an H200
        return {
            f"{cell.classname}::{cell.case}": cell.seconds
            + (cell.stages.setup_s + cell.stages.reference_s if cell.stages else 0.0)
            for cell in report.cells
            if cell.kind is CellKind.CASE
        }
    if isinstance(data, dict) and all(
        isinstance(key, str) and isinstance(value, int | float) and not isinstance(value, bool)
        for key, value in data.items()
    ):
        return {key: float(value) for key, value in data.items()}
    raise ShardError(
        f"--times {path}: neither a report's JSON nor an object of seconds by "
        '"chapter.kernel" or "chapter.kernel::case"'
    )


def weights_of(
    kernels: list[Kernel], broken: list[str], times: Mapping[str, float]
) -> dict[str, float]:
    """Each kernel's expected seconds, by classname: its own time where `times` has it, else
    the sum of its cases' (each from `times`, else from its size); a kernel whose spec did not
    load (`broken`) weighs nothing."""
    weights = dict.fromkeys(broken, 0.0)
    for kernel in kernels:
        if kernel.classname in times:
            weights[kernel.classname] = times[kernel.classname]
            continue
        total = 0.0
        for case in kernel.declared.cases:
            seen = times.get(f"{kernel.classname}::{case.name}")
            guess = estimate(case.work)
            total += seen if seen is not None else guess.host_s + guess.turn_s
        weights[kernel.classname] = total
    return weights


@dataclass(frozen=True)
class Plan:
    """Every shard's kernels, by classname, and this run's shard of them."""

    shards: list[list[str]]
    shard: Shard

    def has(self, classname: str) -> bool:
        return classname in self.shards[self.shard.index - 1]

    def load(self, weights: Mapping[str, float]) -> list[float]:
        """Each shard's expected seconds."""
        return [sum(weights[name] for name in names) for names in self.shards]


def plan(request: ShardRequest, weights: Mapping[str, float], source: str) -> Plan:
    """The kernels of `weights` in request.count shards, longest first onto the least loaded
    (ties by name, then to the lower shard): the same plan from the same weights anywhere."""
    shards = shard(sorted(weights), weights.__getitem__, request.count)
    digest = hashlib.sha256(json.dumps(shards).encode()).hexdigest()
    return Plan(shards, Shard(request.index, request.count, digest, source))
