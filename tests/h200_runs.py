"""The H200 runs the tests read, frozen under tests/fixtures/h200 (its README.md): the latest
reports as written, and older runs (fleet/ and reruns/ of 9336b2d:docs/reports/h200) kept compact
in runs.npz and runs.json, made into reports here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from harness.model.cell import Report
from harness.model.codec import SCHEMA_VERSION, report_from_json
from harness.report import store

H200 = Path(__file__).resolve().parent / "fixtures" / "h200"
_HEADERS = H200 / "runs.json"
_ARRAYS = H200 / "runs.npz"
# The columns of a run's `times`, NaN where the cell has no such time (no stages, not timed)
_TIMES = ("seconds", "setup_s", "reference_s", "median_us", "p10_us", "p90_us", "noise_pct")


def kept_runs() -> list[str]:
    """The compact runs, each named by its report's path under 9336b2d:docs/reports/h200 less
    `.json`: `fleet/GPU-0409ee10/junit-sm_90a`, `reruns/r1/junit-sm_90a`, ..."""
    return sorted(json.loads(_HEADERS.read_text())["runs"])


def kept_report(run: str) -> Report:
    """One compact run as the harness reads a report: every cell with its kind, names, outcome,
    seconds, setup and reference seconds, and a timed cell's median, p10, p90, noise, samples
    (ascending: only their order statistics are judged) and shared-GPU finding."""
    header = json.loads(_HEADERS.read_text())["runs"][run]
    with np.load(_ARRAYS) as arrays:
        names, outcomes, times, counts, samples_ms, shared = (
            arrays[f"{run}:{field}"]
            for field in ("names", "outcomes", "times", "counts", "samples_ms", "shared_gpu")
        )
    # float32 milliseconds, as the GPU's events gave them: the reports' microseconds exactly
    samples_us = np.split(samples_ms.astype(np.float64) * 1000.0, np.cumsum(counts)[:-1])
    cells = []
    for name, (outcome, skip), row, samples, why in zip(
        names.tolist(), outcomes.tolist(), times.tolist(), samples_us, shared.tolist(), strict=True
    ):
        kind, chapter, kernel, case, tool = name
        time = dict(zip(_TIMES, row, strict=True))
        cells.append(
            {
                "kind": kind,
                "chapter": chapter,
                "kernel": kernel,
                "case": case,
                "tool": tool or None,
                "outcome": outcome,
                "skip_reason": skip or None,
                "seconds": time["seconds"],
                "stages": None
                if math.isnan(time["setup_s"])
                else {"setup_s": time["setup_s"], "reference_s": time["reference_s"]},
                "timing": None
                if math.isnan(time["median_us"])
                else {
                    **{key: time[key] for key in ("median_us", "p10_us", "p90_us", "noise_pct")},
                    "samples_us": samples.tolist(),
                    "shared_gpu": why or None,
                },
            }
        )
    data = {"schema_version": SCHEMA_VERSION, **header, "cells": cells}
    return report_from_json(data, _ARRAYS / run)


def write_kept(run: str, root: Path) -> Path:
    """`run` written under `root` at its old path, as the harness writes a report (its XML and
    JSON): root/fleet/GPU-0409ee10/junit-sm_90a.xml, ...; the XML's path."""
    files = store.report_files((root / run).parent, Path(run).name)
    store.write(files, kept_report(run))
    return files.xml
