"""`init [DIR]`: a new project of cuda-matrix in DIR (default: here): a `matrix.yaml` with this
package's targets, one example kernel with its spec (`kernels/example/saxpy/`, the README's),
and the `.gitignore` lines for what a run writes. Nothing that exists is overwritten: a file
init would write that is there already is a usage error naming it, before anything is
written; an existing `.gitignore` gets only the lines it lacks."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.environment import CHECKOUT, Unusable

STARTER = Path(__file__).resolve().parents[1] / "starter"  # package data: what init copies
EXAMPLE = Path("kernels") / "example" / "saxpy"


def starter_matrix() -> Path:
    """The matrix a new project starts from: the wheel's copy of this repository's, or, run
    from a checkout, the checkout's own."""
    packaged = STARTER / "matrix.yaml"
    return packaged if packaged.is_file() else CHECKOUT / "matrix.yaml"


def main(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    if folder.exists() and not folder.is_dir():
        raise Unusable(f"init {folder}: not a folder")
    sources = {
        Path("matrix.yaml"): starter_matrix(),
        EXAMPLE / "saxpy.cu": STARTER / EXAMPLE / "saxpy.cu",
        EXAMPLE / "spec.py": STARTER / EXAMPLE / "spec.py",
    }
    there = [folder / path for path in sources if (folder / path).exists()]
    if there:
        raise Unusable(f"init {folder}: {there[0]} exists already: init never overwrites")
    for path, source in sources.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(source.read_bytes())
        print(f"wrote {folder / path}")
    ignore = folder / ".gitignore"
    kept = ignore.read_text().splitlines() if ignore.is_file() else []
    lines = (STARTER / "gitignore").read_text().splitlines()
    missing = [line for line in lines if line not in kept]
    if any(line and not line.startswith("#") for line in missing):
        start = "\n" if kept and kept[-1] else ""
        with ignore.open("a") as file:
            file.write(start + "\n".join(missing) + "\n")
        print(f"{'added to' if kept else 'wrote'} {ignore}")
    print(
        f"next: cd {folder} && cuda-matrix check (every target, on the CPU), then "
        "cuda-matrix test sm_90a on a GPU (docs/writing-specs.md: what a spec can say)"
    )
    return 0
