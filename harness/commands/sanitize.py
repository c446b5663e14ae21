"""`sanitize <target>`: compute-sanitizer's tools over each kernel's smallest case on this GPU
(harness.pipeline.stages, harness.pipeline.sanitizing); exit status 1 when a cell failed."""

from __future__ import annotations

import argparse

from harness.commands import environment
from harness.model.errors import Unavailable
from harness.pipeline.console import print_summary
from harness.pipeline.stages import sanitize_target


def main(args: argparse.Namespace) -> int:
    """`sanitize <target>`: compile the target, run compute-sanitizer over it on this GPU."""
    matrix, (target,) = environment.matrix_and_targets(args.matrix, [args.target])
    nvcc = environment.toolchain(target)
    gpus = environment.devices(matrix)
    sanitizer = environment.compute_sanitizer(nvcc, gpus)
    tools = ", ".join(tool.value for tool in matrix.sanitize.tools)
    print(f"sanitize: {tools} over each kernel's smallest case")
    device = gpus if isinstance(gpus, Unavailable) else gpus[0]
    options = environment.run_options(args, target)
    result = sanitize_target(matrix, options, nvcc, device, sanitizer)
    print_summary(result)
    return 0 if result.ok else 1
