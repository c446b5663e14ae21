"""`test <target>`: one target of the matrix, end to end, on this machine's GPUs
(harness.pipeline.stages); its cells printed, exit status 1 when one failed."""

from __future__ import annotations

import argparse

from harness.commands import environment
from harness.pipeline.console import print_summary
from harness.pipeline.stages import run_target


def main(args: argparse.Namespace) -> int:
    """`test <target>`: compile the target and run it on this machine's GPUs."""
    matrix, (target,) = environment.matrix_and_targets(args.matrix, [args.target])
    nvcc = environment.toolchain(target)
    gpus = environment.devices(matrix)
    result = run_target(matrix, environment.run_options(args, target), nvcc, gpus)
    print_summary(result)
    return 0 if result.ok else 1
