"""`report [files]`: per-target reports merged into merged.xml, summary.md and dashboard.html,
recorded in the history and judged against a baseline (harness.report.publish)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.commands import environment
from harness.model.provenance import current_commit


def main(args: argparse.Namespace) -> int:
    try:
        from harness.report.publish import PublishOptions, publish
        from harness.report.summary import headline
    except ModuleNotFoundError as missing:  # a --no-venv environment without the report's needs
        raise environment.Unusable(
            f"report needs the Python package {missing.name!r}, which is not installed "
            "here: pip install -r requirements.txt (or run nox -s report)"
        ) from missing
    matrix, _ = environment.matrix_and_targets(args.matrix, [])
    if args.out.exists() and not args.out.is_dir():
        raise environment.Unusable(
            f"--out {args.out}: not a folder; nothing was read, recorded or written"
        )
    artifact_of: dict[Path, str] = {}
    if args.artifacts:  # every report in reports-<target>/ must be of that target
        for folder in sorted(args.artifacts.glob("reports-*")):
            for xml in sorted(folder.glob("*.xml")):
                # reports-<target>, or reports-<target>-shard2of4 for a shard's job
                artifact_of[xml] = re.sub(
                    r"-shard[0-9]+of[0-9]+$", "", folder.name[len("reports-") :]
                )
    if args.artifacts:  # an empty artifacts folder is no reason to read stale local reports
        files = args.files or list(artifact_of)
    else:
        files = args.files or default_reports(environment.project_root() / "reports")
    options = PublishOptions(
        reports=files,
        expected_targets=list(matrix.targets),
        out=args.out,
        database=args.db,
        commit=args.commit or current_commit(environment.project_root()) or "unknown",
        baseline=args.baseline,
        max_slowdown_pct=args.max_slowdown,
        strict=args.strict,
        artifact_targets=artifact_of,
        device_peaks=dict(matrix.devices),
    )
    published = publish(options)
    if published.status is not None:
        print(f"# CUDA matrix: {published.status.text}")
    for line in headline(published.report_set, published.verdicts):
        print(line)
    for path in published.files:
        print(f"wrote {path}")
    for remark in published.remarks:
        print(f"warning: {remark}", file=sys.stderr)
    for failure in published.failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if published.failures else 0


def default_reports(folder: Path) -> list[Path]:
    """The reports `report` reads when given none: every junit-*.xml (shards among them), and
    each compile-<target>.xml of a target with no junit report, as that target's compile
    column."""
    tests = sorted(folder.glob("junit-*.xml"))
    tested = {
        re.sub(r"-shard[0-9]+of[0-9]+$", "", path.stem.removeprefix("junit-")) for path in tests
    }
    compiled = [
        path
        for path in sorted(folder.glob("compile-*.xml"))
        if path.stem.removeprefix("compile-") not in tested
    ]
    return tests + compiled
