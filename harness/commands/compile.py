"""`compile [targets]`: every kernel built for every target named (all by default), nothing run;
each target's compile cells go to `reports/compile-<target>.xml`."""

from __future__ import annotations

import argparse

from harness.commands.targets import each_target
from harness.pipeline.stages import compile_target


def main(args: argparse.Namespace) -> int:
    return each_target(args, compile_target)
