"""Command line: `python -m harness test sm_90a`, `python -m harness compile`,
`python -m harness check sm_90a`,
`python -m harness sanitize sm_90a`, `python -m harness ab sm_90a --base main`,
`python -m harness report`: the arguments parsed here, each command run by its module of
harness.commands.

Exit status: 0 when no cell failed or errored, 1 when one did, 2 when the matrix itself is
unusable (the message names the file and line) or the kernel trees and -k select no kernel.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from harness import processes
from harness.model.errors import UsageError

# The commands that load specs, each in a child of the fork server (harness.processes), and run
# workers forked from it
FORKING = ("compile", "check", "test", "sanitize", "ab")


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] and words[0] in FORKING:
        # first: the server's imports (~1 s on an H200 machine) overlap the commands' (~0.8 s)
        processes.fork_server()
    from harness.commands.environment import project_root

    root = project_root()  # the project: from the working directory up, its matrix.yaml
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--matrix", type=Path, default=root / "matrix.yaml")
    common.add_argument(
        "--kernels",
        type=Path,
        action="append",
        help="a kernels tree (repeatable; default: the project's kernels/)",
    )
    common.add_argument("--reports", type=Path, default=root / "reports")
    common.add_argument("--cache", type=Path, default=root / ".cache" / "compile")
    common.add_argument("-k", dest="select", default="", help="only kernels whose name has this")
    common.add_argument("--runner", default="", help="runner name for the report's suite")
    parser = argparse.ArgumentParser(prog="cuda-matrix", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    test = commands.add_parser("test", parents=[common], help="compile and run one target")
    test.add_argument("target", help="a target name (sm_90a) or its session name (sm90)")
    test.add_argument(
        "--shard", help="run shard i of N of the target's kernels (2/4), balanced by time"
    )
    test.add_argument(
        "--times",
        type=Path,
        action="append",
        help="what balances the shards (repeatable: the median of them): a report's JSON, a "
        "history database (its last runs of the target), or seconds by chapter.kernel[::case]",
    )
    test.add_argument(
        "--history",
        type=Path,
        help="also keep the finished run in this history database, under its commit, as "
        "`report` keeps it (a GPU box's trend without a `report` step)",
    )
    test.add_argument(
        "--carry-from",
        type=Path,
        help="a history database: a case whose code, spec, toolkit, target, GPU model, driver "
        "and the harness's checks are as in a passed run it keeps is not launched, its verdict "
        "carried (matrix.yaml's carry: says how old a verdict may be)",
    )
    test.add_argument(
        "--no-carry", action="store_true", help="run every case, whatever --carry-from says"
    )
    sanitize = commands.add_parser(
        "sanitize", parents=[common], help="compile one target, run compute-sanitizer over it"
    )
    sanitize.add_argument("target", help="a target name (sm_90a) or its session name (sm90)")
    ab = commands.add_parser(
        "ab",
        parents=[common],
        help="time the changed kernels against a base commit's build on this GPU",
    )
    ab.add_argument("target", help="a target name (sm_90a) or its session name (sm90)")
    ab.add_argument("--shard", help="the A/B of this shard's report (2/4), as test ran it")
    ab.add_argument("--base", help="the base: a git ref of this repository")
    ab.add_argument("--base-tree", type=Path, help="the base's files, laid out as the project")
    ab.add_argument("--base-commit", default="", help="the commit --base-tree holds")
    ab.add_argument(
        "--base-column",
        help="the upgrade report: the same sources built by another toolkit's column of the "
        "target (ab sm_90a-cuda13.5 --base-column sm_90a)",
    )
    ab.add_argument(
        "--no-base-ok",
        action="store_true",
        help="a --base that names no commit judges every kernel NEW (a first commit has no "
        "parent), rather than being an error",
    )
    ab.add_argument(
        "--all", action="store_true", help="time unchanged kernels too (an A/A of the same code)"
    )
    build = commands.add_parser("compile", parents=[common], help="compile, run nothing")
    build.add_argument("targets", nargs="*", help="default: every target")
    check = commands.add_parser(
        "check", parents=[common], help="compile, and check every case on the CPU, no GPU used"
    )
    check.add_argument("targets", nargs="*", help="default: every target")
    init = commands.add_parser(
        "init", help="a new project: matrix.yaml, an example kernel, .gitignore lines"
    )
    init.add_argument(
        "folder", nargs="?", type=Path, default=Path("."), help="where (default: here)"
    )
    report = commands.add_parser("report", help="merge reports; summary, dashboard, history")
    report.add_argument("files", nargs="*", type=Path, help="default: reports/junit-*.xml")
    report.add_argument("--matrix", type=Path, default=root / "matrix.yaml")
    report.add_argument("--out", type=Path, default=root / "reports")
    report.add_argument("--db", type=Path, default=root / "reports" / "history.sqlite")
    report.add_argument("--commit", default="", help="default: git rev-parse HEAD")
    report.add_argument("--baseline", help="a stored commit to compare medians with")
    report.add_argument("--max-slowdown", type=float, help="fail when SLOWER by more (%%)")
    report.add_argument("--strict", action="store_true", help="fail when a kernel never ran")
    report.add_argument(
        "--artifacts",
        type=Path,
        help="a folder of reports-<target>/ folders (CI's artifacts), each of its target only",
    )
    args = parser.parse_args(argv)
    try:
        # imported as it runs: `ab` alone loads cuda.core (a second), and no command pays for it
        command = importlib.import_module(f"harness.commands.{args.command}")
        return int(command.main(args))
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code


def cli() -> None:
    """`cuda-matrix ...` (the package's command) and `python -m harness ...` alike."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback; the reports say how far
        print("interrupted: the reports hold the cells finished so far", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    cli()
