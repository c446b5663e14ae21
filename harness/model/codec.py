"""The one serialized form of a result: a report and its cells as JSON, versioned by
SCHEMA_VERSION. The history database, the dashboard, the GPU workers' replies and the sanitizer's
case process carry this form as it is; a reader takes the minor versions before its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from harness.model.cell import (
    ABComparison,
    CarriedFrom,
    Cell,
    CompileFacts,
    DeviceRecord,
    Judgement,
    Provenance,
    Report,
    Resources,
    SanitizerFindings,
    Shard,
    Stages,
    Throughput,
    Timing,
    VendorTiming,
)
from harness.model.errors import ReportError
from harness.model.outcome import CellKind, Outcome, SkipReason

# MAJOR.MINOR: a reader refuses another major; a minor adds or renames fields, and reads the
# minors before it (2.4: `kind`, `loaded_as` for 2.3's `binary`, `no_device_why`; 2.5: a compile
# cell's `code_identity`; 2.6: a case cell's `ab`, a timing's `queued_us` and `shared_gpu`, a
# report's `shared_gpu`; 2.7: the file's `junit_sha256`, which harness.report.store adds; 2.8:
# the file's `outcomes_sha256`, the same's, of its cells' names and outcomes; 2.9: a report's
# `shard` and `sources`; 2.10: a case cell's `verdict_key` and `carried_from`, its stages'
# `waited_s`; 2.11: its stages' `host_wait_s` and `gpu_wait_s`; 2.12: an A/B's `same_sass`)
SCHEMA_VERSION = "2.12"


def cell_json(cell: Cell) -> dict[str, Any]:
    """The cell without its target and provenance, which its report holds once."""
    return {
        "kind": cell.kind.value,
        "chapter": cell.chapter,
        "kernel": cell.kernel,
        "case": cell.case,
        "tool": cell.tool,
        "outcome": cell.outcome.value,
        "skip_reason": cell.skip_reason.value if cell.skip_reason else None,
        "message": cell.message,
        "detail": cell.detail,
        "seconds": round(cell.seconds, 6),
        "loaded_as": cell.loaded_as,
        "seed": cell.seed,
        "worker_start_s": cell.worker_start_s,
        "gpu": cell.gpu,
        "stages": _plain(cell.stages),
        "compile": _compile_json(cell.compile),
        "timing": _plain(cell.timing),
        "throughput": _plain(cell.throughput),
        "vendor": _plain(cell.vendor),
        "sanitizer": _sanitizer_json(cell.sanitizer),
        "ab": _ab_json(cell.ab),
        "verdict_key": cell.verdict_key,
        "carried_from": _plain(cell.carried_from),
    }


def cell_from_json(record: dict[str, Any], target: str, provenance: Provenance) -> Cell:
    """A cell read back; KeyError, TypeError or ValueError when the record is malformed."""
    timing = record.get("timing")
    return Cell(
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
        seconds=_duration("seconds", record.get("seconds", 0.0)),
        tool=record.get("tool"),
        loaded_as=record.get("loaded_as", record.get("binary")),
        seed=record.get("seed"),
        worker_start_s=_duration_or_none("worker_start_s", record.get("worker_start_s")),
        gpu=record.get("gpu"),
        stages=_known(Stages, record["stages"]) if record.get("stages") else None,
        compile=_compile_from(record.get("compile")),
        timing=_timing_from(timing) if timing else None,
        throughput=(_known(Throughput, record["throughput"]) if record.get("throughput") else None),
        vendor=_known(VendorTiming, record["vendor"]) if record.get("vendor") else None,
        sanitizer=_sanitizer_from(record.get("sanitizer")),
        ab=_ab_from(record.get("ab")),
        verdict_key=_text_or_none("verdict_key", record.get("verdict_key")),
        carried_from=(
            _known(CarriedFrom, record["carried_from"]) if record.get("carried_from") else None
        ),
    )


def report_json(report: Report) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": report.suite,
        "target": report.target,
        "provenance": _plain(report.provenance),
        "device": _plain(report.device),
        "no_device_why": report.no_device_why,
        "nvcc": report.nvcc,
        "compute_sanitizer": report.compute_sanitizer,
        "finished": report.finished,
        "wall_s": report.wall_s,
        "shared_gpu": report.shared_gpu,
        "shard": _plain(report.shard),
        "sources": dict(report.sources),
        "cells": [cell_json(cell) for cell in report.cells],
    }


def report_from_json(data: Any, source: Path) -> Report:
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
        return Report(
            suite=data["suite"],
            target=target,
            provenance=provenance,
            cells=[_cell_of(c, target, provenance) for c in _list_of("cells", data["cells"])],
            device=_known(DeviceRecord, device) if device else None,
            no_device_why=data.get("no_device_why", data.get("no_device_reason")),
            nvcc=data.get("nvcc"),
            compute_sanitizer=data.get("compute_sanitizer"),
            finished=bool(data.get("finished", True)),  # 2.0 does not say: as it was read
            wall_s=_duration_or_none("wall_s", data.get("wall_s")),
            shared_gpu=data.get("shared_gpu"),
            shard=_shard_of(data.get("shard")),
            sources=_sources_of(data.get("sources", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
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


def _list_of(what: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is {type(value).__name__}, not a list")
    return value


def _cell_of(record: Any, target: str, provenance: Provenance) -> Cell:
    """A report's cell read back; a ValueError of its names the cell."""
    if not isinstance(record, dict):
        raise TypeError(f"a cell is {type(record).__name__}, not an object")
    try:
        return cell_from_json(record, target, provenance)
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


def _duration(what: str, value: Any) -> float:
    """A span of wall time read back (a cell's seconds, a run's wall): a finite number, 0 or
    more; ValueError naming it otherwise."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        raise ValueError(f"impossible time: {what} is {value!r}")
    return float(value)


def _duration_or_none(what: str, value: Any) -> float | None:
    return None if value is None else _duration(what, value)


def _positive_time(what: str, value: Any) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        raise ValueError(f"impossible time: {what} is {value!r}")


K = TypeVar("K")


def _known(kind: type[K], record: Any) -> K:
    """`kind` made of the fields of `record` it has: a later minor version of the schema adds
    fields, and this harness reads it as the version it knows (docs/reports.md). A field it
    needs and `record` lacks is a TypeError, as is a record that is not a mapping."""
    if not isinstance(record, Mapping):
        raise TypeError(f"{kind.__name__} is {type(record).__name__}, not an object")
    names = kind.__dataclass_fields__  # type: ignore[attr-defined]
    if record.keys() <= names.keys():  # as this harness wrote it: as it is
        return kind(**record)
    return kind(**{name: value for name, value in record.items() if name in names})


def _text_or_none(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{name} is {type(value).__name__}, not text")


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
    return _known(ABComparison, {**record, "judgement": Judgement(record["judgement"])})
