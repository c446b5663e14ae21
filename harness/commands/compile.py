"""`compile [targets]`: every kernel built for every target named (all by default), nothing run;
each target's compile cells go to `reports/compile-<target>.xml`."""

from __future__ import annotations

import argparse

from harness.commands import environment
from harness.model.errors import Unavailable
from harness.pipeline.console import print_summary
from harness.pipeline.testing import run_target


def main(args: argparse.Namespace) -> int:
    return each_target(args, Unavailable("compile only"), execute=False)


def each_target(
    args: argparse.Namespace, no_gpu: Unavailable, *, execute: bool, kind: str = ""
) -> int:
    """Every target the arguments name (all by default) run with no GPU (`no_gpu` says why),
    each one's cells printed; exit status 1 when a cell of any failed."""
    matrix, targets = environment.matrix_and_targets(args.matrix, args.targets)
    nvcc = environment.toolchain()
    ok = True
    for target in targets:
        options = environment.run_options(args, target)
        result = run_target(matrix, options, nvcc, no_gpu, execute=execute, kind=kind)
        print_summary(result)
        ok &= result.ok
    return 0 if ok else 1
