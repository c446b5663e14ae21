"""The one result model: a cell of the matrix, and the report that holds one run's cells.

A Cell is (chapter, kernel, case, target, runner) of one kind (CellKind) with one outcome, the
typed metrics measured on the way (None where nothing was measured) and the provenance of its
run. Its serialized form is harness.model.codec's; the JUnit XML is rendered from the model
(`harness.report.junit`). Numbers stay numbers; only the JUnit renderer formats them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from harness.model.errors import CellError
from harness.model.outcome import CellKind, Outcome, SkipReason


def column_of(target: str, runner: str) -> str:
    """Where a report shows a cell: its target and runner, `sm_90a@runner`."""
    return f"{target}@{runner}"


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
class CarriedFrom:
    """The run a carried verdict was reached in: a case cell whose inputs to its verdict are all
    as they were then (harness.pipeline.carrying) passes on that run's word, never launched."""

    commit: str
    runner: str
    recorded: str  # when that run was kept in the history: ISO 8601, UTC
    suite: str

    def __str__(self) -> str:
        return f"{self.commit[:12]} ({self.suite}, {self.runner}, {self.recorded})"


@dataclass(frozen=True)
class Stages:
    """Where a run cell's seconds went, by stage of the case."""

    setup_s: float = 0.0  # the spec's setup (inputs) and their upload
    reference_s: float = 0.0  # the spec's reference
    verify_s: float = 0.0  # the checked launch, downloads, comparisons, the check after timing
    timing_s: float = 0.0  # sampling, the vendor's included
    # the run's wait for the case's answer: its time in its worker (the cell's seconds), the
    # pipe both ways and the worker's own bookkeeping; 0 where the run did not wait on a worker
    waited_s: float = 0.0
    # the worker's wait for the case's host work (setup and reference), made ahead or not
    host_wait_s: float = 0.0
    # within the stages above, the wait for the GPU's lock (harness.run.quiet): for another
    # lane's timing to end, or, to time, for its GPU work
    gpu_wait_s: float = 0.0


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


class Judgement(enum.Enum):
    """What a comparison of a case's times says of the tested code: against a base commit on
    the same GPU (an A/B, `python -m harness ab`), or against the history (a verdict,
    harness.report.verdict)."""

    SAME = "SAME"  # measured: the ratio's interval within the threshold
    FASTER = "FASTER"  # measured: the whole interval below it
    SLOWER = "SLOWER"  # measured: the whole interval above it
    AMBIGUOUS = "AMBIGUOUS"  # measured: the interval straddles the threshold
    GPU_SHARED = "GPU shared"  # verdict: another process used the GPU, the times say nothing
    IDENTICAL = "IDENTICAL"  # A/B: the base's code identity is the head's: nothing to measure
    NEW = "NEW"  # A/B: the base has no such kernel or case
    NOT_RUN = "NOT_RUN"  # A/B: could not be measured (the base fails to build, ...): `why`

    @property
    def measured(self) -> bool:
        return self in _MEASURED


# A cell's time however quick: JUnit keeps six decimals, and readers divide by it, so never 0
SHORTEST_SECONDS = 1e-6

_MEASURED = frozenset((Judgement.SAME, Judgement.FASTER, Judgement.SLOWER, Judgement.AMBIGUOUS))
# What an A/B can say, in the order it is counted (a verdict's are in harness.report.verdict)
AB_JUDGEMENTS = tuple(j for j in Judgement if j is not Judgement.GPU_SHARED)


@dataclass(frozen=True)
class ABComparison:
    """A case's A/B against the base commit; the numbers are None where nothing was measured."""

    base_commit: str
    judgement: Judgement
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
    # the two builds' instructions (their cubins' .text sections) are the same: a code identity
    # that differs in attributes only (another toolkit's); None where not compared
    same_sass: bool | None = None

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
    # a case cell's digest of all its verdict depends on (harness.pipeline.carrying); None:
    # not one a later run may carry
    verdict_key: str | None = None
    carried_from: CarriedFrom | None = None  # a verdict passed on, not reached in this run

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
