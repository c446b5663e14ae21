"""`compile [targets]`: every kernel built for every target named (all by default), nothing run;
each target's compile cells go to `reports/compile-<target>.xml`."""

from __future__ import annotations

import argparse

from harness.commands import environment
from harness.commands.console import print_summary
from harness.commands.test import run_target
from harness.model.result import Unavailable


def main(args: argparse.Namespace) -> int:
    matrix, targets = environment.matrix_and_targets(args.matrix, args.targets)
    nvcc = environment.toolchain()
    ok = True
    for target in targets:
        options = environment.run_options(args, target)
        result = run_target(matrix, options, nvcc, Unavailable("compile only"), execute=False)
        print_summary(result)
        ok &= result.ok
    return 0 if ok else 1
