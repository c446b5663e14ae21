"""`check [targets]`: every kernel built for every target named (all by default) and each case
checked on the CPU, no GPU used (harness.run.spec_check): a spec that would break its cases on a
GPU is an error cell, found on a machine without one. Each target's cells go to
`reports/check-<target>.xml`; `test` does the same check wherever it has no GPU for a kernel."""

from __future__ import annotations

import argparse

from harness.commands.targets import each_target
from harness.pipeline.stages import check_target


def main(args: argparse.Namespace) -> int:
    return each_target(args, check_target)
