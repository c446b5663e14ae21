"""What `compile` and `check` share: their pipeline over every target named, no GPU used."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from harness.commands import environment
from harness.compile.toolchain import Toolchain
from harness.model.errors import Unavailable
from harness.model.matrix import Matrix, Toolkit
from harness.pipeline.console import print_summary
from harness.pipeline.context import RunOptions
from harness.pipeline.results import RunResult

TargetRun = Callable[[Matrix, RunOptions, Toolchain | Unavailable], RunResult]


def each_target(args: argparse.Namespace, run: TargetRun) -> int:
    """`run` over every target the arguments name (all by default), each one's cells printed;
    exit status 1 when a cell of any failed."""
    matrix, targets = environment.matrix_and_targets(args.matrix, args.targets)
    nvccs: dict[Toolkit, Toolchain | Unavailable] = {}
    for target in targets:  # each toolkit's nvcc, found and said once
        if target.toolkit not in nvccs:
            nvccs[target.toolkit] = environment.toolchain(target)
    ok = True
    for target in targets:
        result = run(matrix, environment.run_options(args, target), nvccs[target.toolkit])
        print_summary(result)
        ok &= result.ok
    return 0 if ok else 1
