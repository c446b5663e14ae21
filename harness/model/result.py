"""The one result model: a cell of the matrix, and the report that holds one run's cells.

A Cell is (chapter, kernel, case, target, runner) of one kind (CellKind) with one outcome, the
typed metrics measured on the way (None where nothing was measured) and the provenance of its
run. `Report.to_json()` is the one serialized form, versioned by SCHEMA_VERSION; the JUnit XML
is rendered from the model (`harness.report.junit`), and the history database, the dashboard
and the sanitizer's case process carry this form as it is. Numbers stay numbers; only the JUnit
renderer formats them.

Failing is said one way. Where a value may be missing (no toolchain, no device, no build), the
value is `Unavailable` with why. Where a cell's work fails, the code that fails raises a CellError
of the class that decides the outcome (KernelFailed, Broken, SpecError, Skip), and whoever owns
the cell settles it from that error (`Cell.settle`), once.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

# MAJOR.MINOR: a reader refuses another major; a minor adds or renames fields, and reads the
# minors before it (2.4: `kind`, `loaded_as` for 2.3's `binary`, `no_device_why`; 2.5: a compile
# cell's `code_identity`; 2.6: a case cell's `ab`, a timing's `queued_us` and `shared_gpu`, a
# report's `shared_gpu`; 2.7: the file's `junit_sha256`, which harness.report.store adds; 2.8:
# the file's `outcomes_sha256`, the same's, of its cells' names and outcomes; 2.9: a report's
# `shard` and `sources`)
SCHEMA_VERSION = "2.9"


class Outcome(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # wrong output, compile error, kernel fault, timeout
    ERROR = "error"  # the harness or the spec broke
    SKIPPED = "skipped"


class SkipReason(enum.Enum):
    TARGET_UNSUPPORTED = "target-unsupported"  # the kernel needs more than the target offers
    DEVICE_UNSUPPORTED = "device-unsupported"  # this device cannot run the target's binary
    NO_DEVICE = "no-device"  # no CUDA device visible


class CellKind(enum.Enum):
    """What a cell is of, in the order reports list a kernel's rows."""

    SPEC = "spec"  # the kernel's spec could not be used: its one cell
    COMPILE = "compile"  # one build of the kernel for the target
    CASE = "case"  # one case run, verified and timed
    SANITIZER = "sanitizer"  # one case under one compute-sanitizer tool

    @property
    def rank(self) -> int:
        return list(CellKind).index(self)


@dataclass(frozen=True)
class Unavailable:
    """A value that is missing here, and why: no nvcc, no device, no compute-sanitizer, no build."""

    why: str


class CellError(Exception):
    """Raised where a cell's work fails; its class decides the cell's outcome (Cell.settle), its
    message is the cell's message, `detail` the long text (a traceback, a log)."""

    outcome: ClassVar[Outcome] = Outcome.FAILED
    skip_reason: SkipReason | None = None

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class KernelFailed(CellError):
    """The kernel failed: its build, its launch, its output, or the process running it."""


class Broken(CellError):
    """The harness could not judge the kernel: a tool it needs is missing or broke."""

    outcome = Outcome.ERROR


class SpecError(Broken):
    """The kernel's spec broke: it raised, or broke the spec API's contract."""


class Skip(CellError):
    """The cell cannot run here, for a machine-readable reason."""

    outcome = Outcome.SKIPPED

    def __init__(self, reason: SkipReason, why: str):
        super().__init__(f"{reason.value}: {why}")
        self.skip_reason = reason
        self.reason, self.why = reason, why

    def adding(self, more: str) -> Skip:
        """This skip, with `more` said after its why."""
        return Skip(self.reason, f"{self.why}; {more}")


# Characters no page or terminal may be sent as they are (C0 and C1 controls, DEL): none is
# valid HTML or XML 1.0, and ESC sequences restyle a terminal
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def shown_controls(text: str) -> str:
    """`text` with each control character written as \\xNN, visible; newlines and tabs kept."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def bounded(text: str, limit: int) -> str:
    """`text` kept whole up to `limit` characters; past that its start and its end, with the
    cut said between them: no log a kernel makes a tool print grows a report, a cache entry or
    the history without bound."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters left out ...]\n{text[-half:]}"


def column_of(target: str, runner: str) -> str:
    """Where a report shows a cell: its target and runner, `sm_90a@runner`."""
    return f"{target}@{runner}"


class ReportError(Exception):
    """A report that cannot be used; the message starts with its file name."""


@dataclass(frozen=True)
class Provenance:
    """Where and with what a cell ran: the same for every cell of one run."""

    runner: str
    commit: str | None = None  # the project's commit; None where git could not say
    toolkit: str | None = None  # nvcc's version, "13.0.88"; None: no usable nvcc
    device: str | None = None  # the GPU's name; None: no device
    cc: str | None = None  # the GPU's compute capability, "9.0"
    driver: str | None = None  # "580.159.04"


@dataclass(frozen=True)
class Shard:
    """Which part of a target's kernels a run ran: shard `index` of `count` (from 1), by the
    plan whose SHA-256 is `plan` (every shard's kernels, so the shards of one run can be told
    to agree), its kernels weighed by `weights` (where their expected times came from)."""

    index: int
    count: int
    plan: str
    weights: str = ""

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def stem(self) -> str:
        """How file and suite names say it: `shard1of4`."""
        return f"shard{self.index}of{self.count}"


@dataclass(frozen=True)
class Timing:
    """The kernel's time over its samples (cold L2), and what measuring it took."""

    median_us: float
    p10_us: float
    p90_us: float
    noise_pct: float  # relative standard deviation of the samples
    samples_us: tuple[float, ...]
    # The mean SM clock over the kept samples, probed on SM 0 around each; None: not probed
    sm_clock_mhz: int | None = None
    wall_s: float = 0.0  # host time spent measuring
    throttled_samples: int = 0  # discarded: the clock fell below 75 % of the default
    # The median, over the samples, of the host's wait for a sample beyond the GPU's own time
    # for it: some microseconds on a GPU of its own, milliseconds where another process's work
    # is scheduled in between; None: not measured
    queued_us: float | None = None
    # why these samples were taken on a GPU that another process was using; None: none seen
    shared_gpu: str | None = None

    @property
    def samples(self) -> int:
        return len(self.samples_us)


@dataclass(frozen=True)
class Stages:
    """Where a run cell's seconds went, by stage of the case."""

    setup_s: float = 0.0  # the spec's setup (inputs) and their upload
    reference_s: float = 0.0  # the spec's reference
    verify_s: float = 0.0  # the checked launch, downloads, comparisons, the check after timing
    timing_s: float = 0.0  # sampling, the vendor's included


@dataclass(frozen=True)
class Throughput:
    """Work over the median time, and its share of the binding roof of the device."""

    gbytes_per_s: float | None = None
    tflops: float | None = None
    roofline_pct: float | None = None  # None: the device has no peaks in matrix.yaml


@dataclass(frozen=True)
class Resources:
    """ptxas -v for one entry point."""

    registers: int
    smem_bytes: int
    spill_bytes: int  # spill stores + spill loads
    stack_bytes: int


@dataclass(frozen=True)
class CompileFacts:
    """A compile cell's build: what it embeds, whether the cache served it, what ptxas said."""

    embedded: str  # the -gencode value
    cached: bool | None = None  # None: nvcc never ran (no toolchain)
    resources: dict[str, Resources] = field(default_factory=dict)  # by entry point
    sass_counts: dict[str, int] = field(default_factory=dict)  # opcodes the spec demands
    binary_sha256: str | None = None  # of the binary the run cells load; None: none built
    # of what the GPU executes, the same wherever it was built (harness.compile.identity)
    code_identity: str | None = None

    def worst(self, resource: str) -> int | None:
        """The largest value of one resource over the entry points (registers, spill_bytes)."""
        values = [getattr(r, resource) for r in self.resources.values()]
        return max(values) if values else None


@dataclass(frozen=True)
class VendorTiming:
    """The vendor library on the same case, timed by the same protocol as the kernel."""

    library: str  # "torch.matmul (cuBLAS)"
    median_us: float | None = None
    noise_pct: float | None = None
    tflops: float | None = None
    ratio: float | None = None  # vendor time / kernel time: above 1, the kernel is faster
    unavailable: str | None = None  # why the library could not run here (not installed)


class ABJudgement(enum.Enum):
    """A case of the tested (head) code against the same case of a base commit, timed on one
    GPU in interleaved rounds (`python -m harness ab`)."""

    SAME = "SAME"  # measured: the paired ratio's interval within the threshold
    FASTER = "FASTER"  # measured: the whole interval below it
    SLOWER = "SLOWER"  # measured: the whole interval above it
    AMBIGUOUS = "AMBIGUOUS"  # measured: the interval straddles the threshold
    IDENTICAL = "IDENTICAL"  # the base's code identity is the head's: nothing to measure
    NEW = "NEW"  # the base has no such kernel or case
    NOT_RUN = "NOT_RUN"  # could not be measured (the base fails to build, faults, ...): `why`

    @property
    def measured(self) -> bool:
        return self in _MEASURED


_MEASURED = frozenset(
    (ABJudgement.SAME, ABJudgement.FASTER, ABJudgement.SLOWER, ABJudgement.AMBIGUOUS)
)


@dataclass(frozen=True)
class ABComparison:
    """A case's A/B against the base commit; the numbers are None where nothing was measured."""

    base_commit: str
    judgement: ABJudgement
    why: str = ""  # what NOT_RUN, NEW or IDENTICAL rests on; for a measured one, how
    ratio: float | None = None  # head / base, the median over rounds: above 1 is slower
    low: float | None = None  # the ratio's confidence interval
    high: float | None = None
    threshold_pct: float | None = None  # what a change must exceed to be SLOWER or FASTER
    rounds: int = 0
    base_median_us: float | None = None
    head_median_us: float | None = None
    same_inputs: bool | None = None  # both specs made the same problem: one set of buffers
    base_code_identity: str | None = None

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)


@dataclass(frozen=True)
class SanitizerFindings:
    """One compute-sanitizer tool's run over a case."""

    errors: int | None  # None: the tool printed no summary
    warnings: int | None = None  # racecheck's hazards below error level
    exit_status: int | None = None  # None: killed at its timeout
    case_outcome: Outcome | None = None  # the case's own verdict; None: it reported nothing
    case_message: str = ""


@dataclass
class Cell:
    """A cell of the matrix. `case` is a case name (CASE, SANITIZER), or the kind's own name
    (SPEC, COMPILE); `tool` names the sanitizer tool of a SANITIZER cell."""

    kind: CellKind
    chapter: str
    kernel: str
    case: str
    target: str
    provenance: Provenance
    outcome: Outcome
    skip_reason: SkipReason | None = None
    message: str = ""
    detail: str = ""  # long text for system-out: the nvcc log, a traceback, a tool's log
    seconds: float = 0.0
    tool: str | None = None
    loaded_as: str | None = None  # how the device ran the binary: "sass" or "ptx-jit"
    seed: int | None = None  # of the case's inputs
    worker_start_s: float | None = None  # a fresh worker's start, paid by this cell
    gpu: int | None = None  # the CUDA ordinal of the GPU that ran it, as this run numbered them
    stages: Stages | None = None
    compile: CompileFacts | None = None
    timing: Timing | None = None
    throughput: Throughput | None = None
    vendor: VendorTiming | None = None
    sanitizer: SanitizerFindings | None = None
    ab: ABComparison | None = None  # a case cell's A/B against a base commit

    def settle(self, error: CellError) -> None:
        """The cell's outcome, reason and message from what failed."""
        self.outcome, self.skip_reason, self.message = error.outcome, error.skip_reason, str(error)
        if error.detail:
            self.detail = error.detail

    @property
    def classname(self) -> str:  # JUnit's classname
        return f"{self.chapter}.{self.kernel}"

    @property
    def name(self) -> str:  # under its kernel: compile[sm_90a], n1[sm_90a], n1[sm_90a]:memcheck
        return f"{self.case}[{self.target}]" + (f":{self.tool}" if self.tool else "")

    @property
    def row(self) -> str:
        """The cell's row, the same in every column: `n1`, `compile`, `n1:memcheck`."""
        return self.case + (f":{self.tool}" if self.tool else "")

    @property
    def runner(self) -> str:
        return self.provenance.runner

    @property
    def column(self) -> str:
        """Where a report shows it: target and runner."""
        return column_of(self.target, self.runner)

    @property
    def median_us(self) -> float | None:
        return self.timing.median_us if self.timing else None

    def to_json(self) -> dict[str, Any]:
        """The cell without its target and provenance, which its report holds once."""
        return {
            "kind": self.kind.value,
            "chapter": self.chapter,
            "kernel": self.kernel,
            "case": self.case,
            "tool": self.tool,
            "outcome": self.outcome.value,
            "skip_reason": self.skip_reason.value if self.skip_reason else None,
            "message": self.message,
            "detail": self.detail,
            "seconds": round(self.seconds, 6),
            "loaded_as": self.loaded_as,
            "seed": self.seed,
            "worker_start_s": self.worker_start_s,
            "gpu": self.gpu,
            "stages": _plain(self.stages),
            "compile": _compile_json(self.compile),
            "timing": _plain(self.timing),
            "throughput": _plain(self.throughput),
            "vendor": _plain(self.vendor),
            "sanitizer": _sanitizer_json(self.sanitizer),
            "ab": _ab_json(self.ab),
        }

    @classmethod
    def from_json(cls, record: dict[str, Any], target: str, provenance: Provenance) -> Cell:
        """A cell read back; KeyError, TypeError or ValueError when the record is malformed."""
        timing = record.get("timing")
        return cls(
            kind=CellKind(record["kind"]) if "kind" in record else _kind_before_2_4(record),
            chapter=record["chapter"],
            kernel=record["kernel"],
            case=record["case"],
            target=target,
            provenance=provenance,
            outcome=Outcome(record["outcome"]),
            skip_reason=SkipReason(record["skip_reason"]) if record.get("skip_reason") else None,
            message=record.get("message", ""),
            detail=record.get("detail", ""),
            seconds=float(record.get("seconds", 0.0)),
            tool=record.get("tool"),
            loaded_as=record.get("loaded_as", record.get("binary")),
            seed=record.get("seed"),
            worker_start_s=record.get("worker_start_s"),
            gpu=record.get("gpu"),
            stages=_known(Stages, record["stages"]) if record.get("stages") else None,
            compile=_compile_from(record.get("compile")),
            timing=_timing_from(timing) if timing else None,
            throughput=(
                _known(Throughput, record["throughput"]) if record.get("throughput") else None
            ),
            vendor=_known(VendorTiming, record["vendor"]) if record.get("vendor") else None,
            sanitizer=_sanitizer_from(record.get("sanitizer")),
            ab=_ab_from(record.get("ab")),
        )


@dataclass(frozen=True)
class DeviceRecord:
    """The GPU a run saw, as the report's header keeps it."""

    name: str
    cc: str
    driver: str
    cuda_driver: str
    sm_count: int
    l2_bytes: int
    uuid: str | None = None  # which GPU of a fleet of one model; None: unknown (before 2.5)


@dataclass
class Report:
    """One run's cells for one target on one runner: what a JUnit file and its JSON hold."""

    suite: str  # cuda-matrix.<target>.<runner>, cuda-matrix-sanitize.<target>.<runner>
    target: str
    provenance: Provenance
    cells: list[Cell] = field(default_factory=list)
    device: DeviceRecord | None = None
    no_device_why: str | None = None
    nvcc: str | None = None
    compute_sanitizer: str | None = None  # sanitize runs: the tool that ran
    finished: bool = False  # False while the run goes on, and for ever if it was killed
    wall_s: float | None = None  # the whole run, start to finish; None while unfinished
    # what showed that another process used the GPU during the run; None: nothing did
    shared_gpu: str | None = None
    shard: Shard | None = None  # the part of the target's kernels it ran; None: all of them
    # each kernel's source (its spec where the spec did not load), by classname, relative to
    # the project: what JUnit readers attach a testcase's annotations to
    sources: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "suite": self.suite,
            "target": self.target,
            "provenance": _plain(self.provenance),
            "device": _plain(self.device),
            "no_device_why": self.no_device_why,
            "nvcc": self.nvcc,
            "compute_sanitizer": self.compute_sanitizer,
            "finished": self.finished,
            "wall_s": self.wall_s,
            "shared_gpu": self.shared_gpu,
            "shard": _plain(self.shard),
            "sources": dict(self.sources),
            "cells": [cell.to_json() for cell in self.cells],
        }

    @classmethod
    def from_json(cls, data: Any, source: Path) -> Report:
        """A report read back; ReportError naming `source` when it is of another schema or
        malformed."""
        if not isinstance(data, dict):
            raise ReportError(f"{source}: not a report (a JSON object with schema_version)")
        version = str(data.get("schema_version", "none"))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise ReportError(
                f"{source}: schema_version {version} is not {SCHEMA_VERSION.split('.')[0]}.x, "
                f"the one this harness reads ({SCHEMA_VERSION}): it was written by "
                f"{'an older' if _older(version) else 'another'} harness; run the matrix again "
                "to make it anew"
            )
        try:
            provenance = _known(Provenance, data["provenance"])
            target = data["target"]
            device = data.get("device")
            return cls(
                suite=data["suite"],
                target=target,
                provenance=provenance,
                cells=[_cell_of(c, target, provenance) for c in data["cells"]],
                device=_known(DeviceRecord, device) if device else None,
                no_device_why=data.get("no_device_why", data.get("no_device_reason")),
                nvcc=data.get("nvcc"),
                compute_sanitizer=data.get("compute_sanitizer"),
                finished=bool(data.get("finished", True)),  # 2.0 does not say: as it was read
                wall_s=data.get("wall_s"),
                shared_gpu=data.get("shared_gpu"),
                shard=_shard_of(data.get("shard")),
                sources=_sources_of(data.get("sources", {})),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReportError(
                f"{source}: malformed report ({type(error).__name__}: {error})"
            ) from error


def _sources_of(record: Any) -> dict[str, str]:
    if not isinstance(record, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in record.items()
    ):
        raise ValueError(f"sources {record!r} is not an object of paths by classname")
    return dict(record)


def _shard_of(record: Any) -> Shard | None:
    if record is None:
        return None
    shard = _known(Shard, record)
    if not (
        all(isinstance(n, int) and not isinstance(n, bool) for n in (shard.index, shard.count))
        and 1 <= shard.index <= shard.count
        and isinstance(shard.plan, str)
    ):
        raise ValueError(f"shard {record!r} is not an index 1..count of count, with its plan")
    return shard


def _cell_of(record: Any, target: str, provenance: Provenance) -> Cell:
    """A report's cell read back; a ValueError of its names the cell."""
    try:
        return Cell.from_json(record, target, provenance)
    except ValueError as error:
        where = f"{record.get('chapter')}.{record.get('kernel')} {record.get('case')}"
        raise ValueError(f"cell {where}: {error}") from error


def _timing_from(record: dict[str, Any]) -> Timing:
    """A cell's timing read back; ValueError when a time in it is not a finite positive number
    (NaN, infinite, zero, negative, a string): no such time may judge or be judged."""
    samples = record["samples_us"]
    keys = ("median_us", "p10_us", "p90_us")
    if not possible_times([*map(record.get, keys), *samples]):  # then say which
        for key in keys:
            _positive_time(key, record.get(key))
        for sample in samples:
            _positive_time("a sample", sample)
    return _known(Timing, {**record, "samples_us": tuple(samples)})


_NUMBER_TYPES = frozenset((int, float))


def possible_times(values: Sequence[Any]) -> bool:
    """Whether every value is a time a GPU can take: a number (not a bool) finite and above
    zero. Tested in C first: a history judges a million timings of 500 samples."""
    try:
        if (
            set(map(type, values)) <= _NUMBER_TYPES
            and min(values, default=1) > 0
            and math.isfinite(math.fsum(values))
        ):
            return True
    except OverflowError:  # finite times whose sum is not: each is looked at below
        pass
    return all(type(v) in _NUMBER_TYPES and 0 < v < math.inf for v in values)


def _positive_time(what: str, value: Any) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        raise ValueError(f"impossible time: {what} is {value!r}")


K = TypeVar("K")


def _known(kind: type[K], record: Any) -> K:
    """`kind` made of the fields of `record` it has: a later minor version of the schema adds
    fields, and this harness reads it as the version it knows (README: Results). A field it
    needs and `record` lacks is a TypeError, as is a record that is not a mapping."""
    if not isinstance(record, Mapping):
        raise TypeError(f"{kind.__name__} is {type(record).__name__}, not an object")
    names = kind.__dataclass_fields__  # type: ignore[attr-defined]
    if record.keys() <= names.keys():  # as this harness wrote it: as it is
        return kind(**record)
    return kind(**{name: value for name, value in record.items() if name in names})


def _kind_before_2_4(record: dict[str, Any]) -> CellKind:
    """A 2.3 cell's kind, from what its case and tool said then."""
    if record.get("tool"):
        return CellKind.SANITIZER
    return {"spec": CellKind.SPEC, "compile": CellKind.COMPILE}.get(record["case"], CellKind.CASE)


def _older(version: str) -> bool:
    try:
        return int(version.split(".")[0]) < int(SCHEMA_VERSION.split(".")[0])
    except ValueError:
        return False


def _plain(record: Any) -> dict[str, Any] | None:
    if record is None:
        return None
    values = dict(vars(record))
    for key, value in values.items():
        if isinstance(value, tuple):
            values[key] = list(value)
    return values


def _compile_json(facts: CompileFacts | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    return {
        "embedded": facts.embedded,
        "cached": facts.cached,
        "resources": {entry: vars(r) for entry, r in facts.resources.items()},
        "sass_counts": dict(facts.sass_counts),
        "binary_sha256": facts.binary_sha256,
        "code_identity": facts.code_identity,
    }


def _compile_from(record: dict[str, Any] | None) -> CompileFacts | None:
    if record is None:
        return None
    return CompileFacts(
        embedded=record["embedded"],
        cached=record.get("cached"),
        resources={e: _known(Resources, r) for e, r in record.get("resources", {}).items()},
        sass_counts={op: int(n) for op, n in record.get("sass_counts", {}).items()},
        binary_sha256=record.get("binary_sha256"),
        code_identity=record.get("code_identity"),
    )


def _sanitizer_json(findings: SanitizerFindings | None) -> dict[str, Any] | None:
    if findings is None:
        return None
    values = vars(findings).copy()
    values["case_outcome"] = findings.case_outcome.value if findings.case_outcome else None
    return values


def _sanitizer_from(record: dict[str, Any] | None) -> SanitizerFindings | None:
    if record is None:
        return None
    outcome = record.get("case_outcome")
    return _known(
        SanitizerFindings, {**record, "case_outcome": Outcome(outcome) if outcome else None}
    )


def _ab_json(ab: ABComparison | None) -> dict[str, Any] | None:
    if ab is None:
        return None
    values = dict(vars(ab))
    values["judgement"] = ab.judgement.value
    return values


def _ab_from(record: dict[str, Any] | None) -> ABComparison | None:
    if record is None:
        return None
    return _known(ABComparison, {**record, "judgement": ABJudgement(record["judgement"])})
