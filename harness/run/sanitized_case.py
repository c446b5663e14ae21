"""The case process compute-sanitizer watches: one case run once, untimed, with each buffer an
allocation of exactly its size (no guard zones), its cell printed as one JSON line (the result
model's form) for the sanitize command to read back.

    python -m harness.run.sanitized_case <spec.py> <case> <target> <binary> --matrix M
        [--confine '<confinement JSON>']
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.model.cell import Provenance
from harness.model.codec import cell_json
from harness.model.discovery import KernelFolder, load_kernel
from harness.model.errors import SpecError
from harness.model.matrix import load_matrix
from harness.run.device import DeviceMissing, probe
from harness.sandbox import Confinement, confine


def main(argv: list[str] | None = None) -> int:
    """The case process: the case once, untimed, under whatever tool started this process."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.run.sanitized_case", description=__doc__
    )
    parser.add_argument("spec", type=Path, help="the kernel's spec.py")
    parser.add_argument("case", help="one of its case names")
    parser.add_argument("target", help="a target of the matrix")
    parser.add_argument("binary", type=Path, help="the kernel's build for that target")
    parser.add_argument("--matrix", type=Path, required=True)
    parser.add_argument("--device", type=int, default=0, help="the device ordinal")
    parser.add_argument(
        "--confine", type=Confinement.from_json, help="what the spec may touch (harness.sandbox)"
    )
    args = parser.parse_args(argv)
    if args.confine is not None:  # before the spec's code runs, as the test's workers do
        confine(args.confine)
    matrix = load_matrix(args.matrix)
    try:
        device = probe(matrix, args.device)
    except DeviceMissing as missing:
        print(f"no CUDA device: {missing}", file=sys.stderr)
        return 2
    try:
        kernel = load_kernel(KernelFolder.of(args.spec.resolve()))
    except SpecError as error:  # the parent loaded it fine; it changed since
        print(error, file=sys.stderr)
        return 2
    (case,) = [c for c in kernel.spec.cases if c.name == args.case]
    from harness.run.case import GpuRuntime  # cuda-python, where a device is known to exist

    # no guard zones: each buffer an allocation of exactly its size, so that the tool sees an
    # access one byte past either end (inside a guard zone, it would be in bounds)
    runtime = GpuRuntime(device, matrix.timer, guarded=False)
    target = matrix.target(args.target)
    provenance = Provenance(runner="case-process")  # the parent's provenance replaces it
    cell, _ = runtime.run_case(kernel, case, target, args.binary, provenance, timed=False)
    print(json.dumps(cell_json(cell)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
