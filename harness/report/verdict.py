"""Whether a timed cell changed against a baseline run: SAME, FASTER, SLOWER or AMBIGUOUS, or
GPU shared when either run's samples were taken while another process used the GPU.

The two runs' samples, not their summaries, decide: an interval of the ratio of their medians
(from each median's distribution-free interval) is set against what an unchanged binary moves
between two runs: a relative threshold, or an absolute floor where that is larger.
SLOWER and FASTER need the whole interval beyond it, SAME needs it within, and anything between
is AMBIGUOUS: too noisy to tell. A SLOWER cell whose code is the baseline's (the same code
identity: what the GPU executes, wherever it was built) is the environment's doing (another
machine, a throttling GPU), not the code's. Two runs on two machines never prove a code change
slower: only the same-GPU A/B of the cell (`Cell.ab`) does, and a cross-run SLOWER without one is
unconfirmed (`unconfirmed`).
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.model.cell import Cell, CompileFacts, Judgement, Timing
from harness.model.median import median_interval

# What an unchanged binary moves from one H200 to another, measured on the reports of six
# machines (docs/reports/h200's top level then, GPU-e114c679's, and fleet/GPU-0409ee10,
# GPU-44755d34, GPU-c4b374a1, GPU-819f1207: the same kernels; at 9336b2d:docs/reports/h200/fleet),
# every pair of machines, sm_90a and sm_80 (tests/test_verdict.py judges all 13 machines' runs
# again, from tests/fixtures/h200). Cases below 20 us moved by 1.09 us at most
# (tma_add_one 1000x1000, 6.30 -> 7.39 us: 17 % of a launch-bound case; tma_add_one 37x1028
# 4.35 -> 5.31 us, 22 %); cases of 20 us or more by 4.8 % at most (dynamic_smem_optin
# max_optin, 81.9 -> 85.8 us; its ratio's interval 1.045-1.050), 3.6 % at most from 100 us up
# (wgmma_ws_gemm 8192^3 at a power-limited clock). SLOWER or FASTER needs both: a change beyond
# RELATIVE_PCT and beyond FLOOR_US.
RELATIVE_PCT = 6.0
FLOOR_US = 1.5
# A/B on one GPU (harness ab): what the paired ratio of identical code shows, by time scale:
# (cases below this many us, threshold %), and an absolute floor a change must also exceed.
# Calibrated on the H200 by 11,149 A/A comparisons (docs/reports/h200/aa): below 20 us no
# interval's lower end passed 1.014 (3 % holds); of 272 at 20-50 us one reached 1.0051
# (cg_warp_reduce n33554432, 42.7 us: SLOWER at 0.5 %, 0.37 % of that band), hence 1 % there;
# from 50 us none of 2,156 passed 1.0008, and a planted 2 % slowdown at 59 us was SLOWER at
# 0.5 % in 200 of 200 comparisons (lowest lower end 1.0072), so 0.5 % stays.
AB_THRESHOLDS_PCT = ((20.0, 3.0), (50.0, 1.0), (float("inf"), 0.5))
AB_FLOOR_US = 0.1


# What a verdict against the history can say (an A/B says more: harness.model.cell.Judgement)
VERDICT_JUDGEMENTS = (
    Judgement.SAME,
    Judgement.FASTER,
    Judgement.SLOWER,
    Judgement.AMBIGUOUS,
    Judgement.GPU_SHARED,
)


@dataclass(frozen=True)
class Verdict:
    cell: Cell
    baseline_us: float
    ratio: float  # current / baseline median: above 1 is slower
    low: float  # the ratio's confidence interval
    high: float
    threshold_pct: float
    judgement: Judgement
    same_code: bool | None  # the baseline's code (same_code); None: cannot tell
    shared_gpu: str | None = None  # why the judgement is GPU_SHARED: whose GPU, and what showed it

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)


def threshold_pct(median_us: float) -> float:
    """What a cross-run change must exceed at this time scale: the relative threshold, or the
    absolute floor where that is larger (a 5 us case may move by 0.9 us from one machine to
    another)."""
    return max(RELATIVE_PCT, 100.0 * FLOOR_US / median_us)


def ratio_interval(current: Sequence[float], baseline: Sequence[float]) -> tuple[float, float]:
    """An interval of median(current) / median(baseline) from the two medians' intervals."""
    now_low, now_high = median_interval(current)
    base_low, base_high = median_interval(baseline)
    return now_low / base_high, now_high / base_low


@dataclass(frozen=True)
class BuildIdentity:
    """What tells two builds' code apart: its code identity, else (a build from before
    identities) its binary's digest; a history keeps these of each compile cell."""

    code_identity: str | None
    binary_sha256: str | None

    @classmethod
    def of(cls, facts: CompileFacts | None) -> BuildIdentity | None:
        return None if facts is None else cls(facts.code_identity, facts.binary_sha256)


def kernel_identity(builds: Mapping[str, BuildIdentity | None]) -> BuildIdentity | None:
    """What tells a kernel's code apart, from its compile cells' identities by cell name: its
    one build's, or, for a kernel built once per set of case macros, a digest of them all (a
    case is then judged as changed when any build of its kernel changed)."""
    if len(builds) <= 1:
        return next(iter(builds.values()), None)
    ordered = sorted(builds.items())
    if any(identity is None for _, identity in ordered):
        return None

    def joined(field: str) -> str | None:
        values = [(name, getattr(identity, field)) for name, identity in ordered]
        if any(value is None for _, value in values):
            return None
        return hashlib.sha256(repr(values).encode()).hexdigest()

    return BuildIdentity(joined("code_identity"), joined("binary_sha256"))


def same_code(now: BuildIdentity | None, base: BuildIdentity | None) -> bool | None:
    """Whether two builds make the GPU execute the same: by code identity, else (a build from
    before identities) by the binary's bytes; None when neither side can say."""
    if now is None or base is None:
        return None
    if now.code_identity and base.code_identity:
        return now.code_identity == base.code_identity
    if now.binary_sha256 and base.binary_sha256:
        return now.binary_sha256 == base.binary_sha256
    return None


@dataclass(frozen=True)
class BaseTiming:
    """What judging needs of the baseline's timing of a cell: its median and samples, and
    whether they were taken on a shared GPU (a history keeps these apart from the cell)."""

    median_us: float
    samples_us: tuple[float, ...]
    shared_gpu: str | None = None

    @classmethod
    def of(cls, timing: Timing) -> BaseTiming:
        return cls(timing.median_us, timing.samples_us, timing.shared_gpu)


def judge(cell: Cell, baseline: BaseTiming, same: bool | None = None) -> Verdict:
    """`cell`, which must be timed, against the same cell's timing in the baseline run."""
    timed = cell.timing
    if timed is None:
        raise ValueError(f"{cell.classname} {cell.name}: only a timed cell can be judged")
    now, base = timed.samples_us, baseline.samples_us
    ratio = timed.median_us / baseline.median_us
    low, high = ratio_interval(now, base) if now and base else (ratio, ratio)
    threshold = threshold_pct(min(timed.median_us, baseline.median_us))
    shared = _shared_gpu(timed.shared_gpu, baseline.shared_gpu)
    judgement = Judgement.GPU_SHARED if shared else _classify(low, high, threshold)
    return Verdict(cell, baseline.median_us, ratio, low, high, threshold, judgement, same, shared)


def _shared_gpu(now: str | None, base: str | None) -> str | None:
    """Why either run's samples of the cell are not its own GPU's alone; None: neither's."""
    if not now and not base:  # nearly every cell: a million are judged at once
        return None
    said = [f"{run}: {why}" for run, why in (("this run", now), ("the baseline", base)) if why]
    return "; ".join(said) or None


def unconfirmed(verdict: Verdict) -> str | None:
    """Why a cross-run SLOWER of changed code (or code that cannot be told apart) stands without
    a same-GPU A/B to confirm or refute it; None when it is not such a verdict, or has one."""
    if verdict.judgement is not Judgement.SLOWER or verdict.same_code:
        return None
    ab = verdict.cell.ab
    if ab is None:
        return "no A/B was run for it"
    if ab.judgement.measured:
        return None
    said = f"its A/B against {ab.base_commit[:10]} is {ab.judgement.value}"
    return f"{said}: {ab.why}" if ab.why else said


def ab_threshold_pct(median_us: float) -> float:
    """What a paired A/B change must exceed at this time scale: the relative threshold, or the
    absolute floor where that is larger (a 3 us case moves by a whole 0.1 us step)."""
    relative = next(pct for below_us, pct in AB_THRESHOLDS_PCT if median_us < below_us)
    return max(relative, 100.0 * AB_FLOOR_US / median_us)


def judge_paired(
    ratios: Sequence[float], threshold: float
) -> tuple[float, float, float, Judgement]:
    """From the head/base ratio of each A/B round: the median ratio, its distribution-free
    interval, and the judgement against `threshold` (%), by the rule `judge` follows."""
    values = [float(r) for r in ratios]
    if not values:
        raise ValueError("no A/B rounds to judge")
    ratio = statistics.median(values)
    low, high = median_interval(values)
    return ratio, low, high, _classify(low, high, threshold)


def _classify(low: float, high: float, threshold: float) -> Judgement:
    band = threshold / 100.0
    if low > 1.0 + band:
        return Judgement.SLOWER
    if high < 1.0 - band:
        return Judgement.FASTER
    if low >= 1.0 - band and high <= 1.0 + band:
        return Judgement.SAME
    return Judgement.AMBIGUOUS
