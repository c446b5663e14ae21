"""`report [files]`: per-target reports merged into merged.xml, summary.md and dashboard.html,
recorded in the history and judged against a baseline (harness.report.publish)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import environment
from harness.model.provenance import current_commit


def main(args: argparse.Namespace) -> int:
    try:
        from harness.report.publish import PublishOptions, publish
        from harness.report.summary import headline
    except ModuleNotFoundError as missing:  # a --no-venv environment without the report's needs
        print(
            f"error: report needs the Python package {missing.name!r}, which is not installed "
            "here: pip install -r requirements.txt (or run nox -s report)",
            file=sys.stderr,
        )
        return 2
    matrix, _ = environment.matrix_and_targets(args.matrix, [])
    if args.out.exists() and not args.out.is_dir():
        raise environment.Unusable(
            f"--out {args.out}: not a folder; nothing was read, recorded or written"
        )
    artifact_of: dict[Path, str] = {}
    if args.artifacts:  # every report in reports-<target>/ must be of that target
        for folder in sorted(args.artifacts.glob("reports-*")):
            for xml in sorted(folder.glob("*.xml")):
                artifact_of[xml] = folder.name.removeprefix("reports-")
    if args.artifacts:  # an empty artifacts folder is no reason to read stale local reports
        files = args.files or list(artifact_of)
    else:
        files = args.files or sorted((environment.ROOT / "reports").glob("junit-*.xml"))
    options = PublishOptions(
        reports=files,
        expected_targets=list(matrix.targets),
        out=args.out,
        database=args.db,
        commit=args.commit or current_commit(environment.ROOT) or "unknown",
        baseline=args.baseline,
        max_slowdown_pct=args.max_slowdown,
        strict=args.strict,
        artifact_targets=artifact_of,
        device_peaks=dict(matrix.devices),
    )
    published = publish(options)
    for line in headline(published.report_set, published.verdicts):
        print(line)
    for path in published.files:
        print(f"wrote {path}")
    for remark in published.remarks:
        print(f"warning: {remark}", file=sys.stderr)
    for failure in published.failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if published.failures else 0
