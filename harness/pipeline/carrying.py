"""Carried verdicts: a case whose every input to its verdict is as it was in a passed run the
history keeps is not launched again; its cell passes on that run's verdict, saying from where.

A verdict depends on the code the GPU executes (its build's code identity), the spec (its
kernel's folder, and every file of its kernel tree outside any kernel's folder, which a spec may
import or read), the case, the toolkit, the target, the GPU model, its driver and its datasheet
peaks (matrix.yaml's devices), the matrix's settings a check reads, the packages a reference
computes with, and the harness's own checks (the sources of its model and run stages). Their
digest is the cell's verdict key, kept with each case cell a GPU ran. A later run carries a
passed verdict of the same key, one reached on a GPU (never one itself carried), kept within
`carry.max_age_days`, of a commit the project's repository has. What is carried is the
verdict: the cell has no timing, so no baseline or trend is ever made of it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.compile.nvcc import Build, Compiled
from harness.model.cell import CarriedFrom
from harness.model.discovery import Kernel
from harness.model.errors import Unavailable
from harness.model.outcome import CellKind
from harness.model.revision import VOUCHED, known_commits
from harness.pipeline.cells import PlannedCell, new_cell
from harness.pipeline.context import RunContext
from harness.pipeline.results import Results
from harness.pipeline.running import GpuJob
from harness.report.history import HistoryError, passed_verdicts

HARNESS = Path(__file__).resolve().parent.parent
# the harness's checks: what reads a spec, runs and verifies a case, and says its cell
CHECKS = ("model", "run", "spec.py")
# what a reference computes with and a case is launched through, by distribution name
PACKAGES = ("numpy", "ml-dtypes", "cuda-core", "cuda-bindings")


class NotCarried(Exception):
    """Why a run carries nothing: said in one line, and every case runs."""


@dataclass(frozen=True)
class VerdictBasis:
    """What the verdict of every case of one run depends on, alike for all its cases."""

    toolkit: str
    target: str
    device: str  # the GPU model, its compute capability and its datasheet peaks
    driver: str
    settings: str  # the matrix's timing settings: the case timeout, the samples a check takes
    packages: str
    checks: str  # the harness's checks, by their sources' digest

    @classmethod
    def of(cls, context: RunContext) -> VerdictBasis | Unavailable:
        devices, toolchain = context.devices, context.toolchain
        if isinstance(devices, Unavailable) or isinstance(toolchain, Unavailable):
            return Unavailable("no GPU or no toolkit: nothing runs")
        # the peaks too: a time beyond the datasheet's fails its cell
        models = {(d.name, str(d.cc), d.driver, repr(d.peaks)) for d in devices}
        if len(models) != 1:
            return Unavailable(f"GPUs of more than one model or driver: {sorted(models)}")
        ((name, cc, driver, peaks),) = models
        return cls(
            toolkit=toolchain.version,
            target=repr(context.target),
            device=f"{name} (CC {cc}), peaks {peaks}",
            driver=driver,
            settings=repr(context.matrix.timer),
            packages=json.dumps(_package_versions()),
            checks=checks_digest(),
        )

    def key(self, code_identity: str, spec: str, case: str) -> str:
        """The verdict key of one case: everything its verdict depends on, digested."""
        inputs = {**dataclasses.asdict(self), "code": code_identity, "spec": spec, "case": case}
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def checks_digest() -> str:
    """The harness's checks, as the digest of their sources."""
    digest = hashlib.sha256()
    for name in CHECKS:
        for path in _files(HARNESS / name, skip=frozenset()):
            digest.update(f"{path.relative_to(HARNESS)}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class SpecDigests:
    """Each kernel's spec digest: its folder's files, and the files of its kernel tree outside
    every kernel's folder (a chapter's module, a data file), by path and content."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self._roots = [root.resolve() for root in roots]
        self._shared: dict[Path, str] = {}  # by kernel tree
        self._digests: dict[Path, str] = {}  # by kernel folder: read once a run

    def of(self, folder: Path) -> str:
        folder = folder.resolve()
        if folder in self._digests:
            return self._digests[folder]
        root = next((r for r in self._roots if folder.is_relative_to(r)), folder)
        if root not in self._shared:
            kernels = frozenset(spec.parent for spec in root.glob("*/*/spec.py"))
            self._shared[root] = _digest_of(root, _files(root, kernels))
        own = _digest_of(root, _files(folder, frozenset()))
        digest = hashlib.sha256(f"{own}\0{self._shared[root]}".encode()).hexdigest()
        self._digests[folder] = digest
        return digest


class VerdictKeys:
    """The verdict key of each case of one run: None where its build's code identity is
    unknown, or what the run's cases depend on alike is (no GPU): such a cell is never
    carried."""

    def __init__(self, context: RunContext) -> None:
        self._basis = VerdictBasis.of(context)
        self._specs = SpecDigests(context.options.kernels_roots)

    def of(self, kernel: Kernel, case: str, build: Build) -> str | None:
        identity = build.code_identity if isinstance(build, Compiled) else None
        if isinstance(self._basis, Unavailable) or identity is None:
            return None
        return self._basis.key(identity, self._specs.of(kernel.folder), case)


def carry(context: RunContext, jobs: list[GpuJob], results: Results) -> list[GpuJob]:
    """The jobs left to run: each case whose verdict the history passes on is a passed cell
    now, saying from where, added to `results`. A line says how many, or why none."""
    source = context.options.carry_from
    if source is None or not jobs:
        return jobs
    try:
        found = _carriable(context, source, [j.verdict_key for j in jobs if j.verdict_key])
    except NotCarried as why:
        print(f"carry: nothing carried: {why}", flush=True)
        return jobs
    left, carried = [], []
    for job in jobs:
        origin = found.get(job.verdict_key) if job.verdict_key else None
        if origin is None:
            left.append(job)
            continue
        planned = PlannedCell(CellKind.CASE, job.case.name)
        cell = new_cell(job.kernel, planned, context.target, context.provenance)
        cell.message = cell.detail = f"carried from {origin}: {UNCHANGED}"
        cell.verdict_key, cell.carried_from = job.verdict_key, origin
        carried.append(cell)
    results.add(carried)
    print(
        f"carry: {len(carried)} of {len(jobs)} cases carried from {source}, {len(left)} to run",
        flush=True,
    )
    return left


UNCHANGED = (
    "its code, spec, case, toolkit, target, GPU model, driver and the harness's checks are as "
    "they were; not launched here"
)


def _carriable(context: RunContext, source: Path, keys: list[str]) -> dict[str, CarriedFrom]:
    """Each key's passed verdict in the history at `source`, from a commit of this project."""
    if not source.is_file():
        raise NotCarried(f"no history at {source}")
    oldest = datetime.now(UTC) - timedelta(days=context.matrix.carry.max_age_days)
    try:
        found = passed_verdicts(source, keys, oldest)
    except HistoryError as error:
        raise NotCarried(str(error)) from error
    if not found:
        return {}
    project = context.options.root
    if project is None:
        raise NotCarried("no project repository to tell the history's commits are its own")
    commits = {origin.commit for origin in found.values()}
    # in a container, which has no git, the host says which of the history's commits it has
    vouched = os.environ.get(VOUCHED)
    if vouched is not None:
        known: set[str] | Unavailable = commits & set(vouched.split(","))
    else:
        known = known_commits(project, commits)
    if isinstance(known, Unavailable):
        raise NotCarried(f"the history's commits cannot be looked up: {known.why}")
    if not known:
        raise NotCarried(
            f"{source}: none of its commits is in {project}'s repository (another project's "
            "history?)"
        )
    return {key: origin for key, origin in found.items() if origin.commit in known}


def _package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": sys.version}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _files(folder: Path, skip: frozenset[Path]) -> Iterator[Path]:
    """The files below `folder` (or `folder`, a file), in a stable order: none under a folder
    of `skip`, a `__pycache__` or a hidden folder."""
    if folder.is_file():
        yield folder
        return
    for top, dirs, names in os.walk(folder):
        here = Path(top)
        dirs[:] = sorted(
            d for d in dirs if d != "__pycache__" and not d.startswith(".") and here / d not in skip
        )
        yield from (here / name for name in sorted(names) if not name.endswith(".pyc"))


def _digest_of(root: Path, files: Iterator[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(root)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
