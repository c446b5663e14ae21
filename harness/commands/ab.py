"""`ab <target> --base REF`: the kernels whose code changed since REF, timed against REF's build
on this GPU (harness.pipeline.comparing), each case's A/B written into the target's report.
`ab <column> --base-column <column>`: the upgrade report, the same sources built by another
toolkit of the target as the base."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from harness.commands import environment
from harness.model.errors import Unavailable
from harness.model.matrix import Matrix, MatrixError, Target
from harness.model.provenance import runner_name
from harness.model.revision import BaseTree, extract, resolve_commit
from harness.pipeline.comparing import (
    Base,
    BaseColumn,
    compare_and_record,
    head_report,
    instructions_line,
    unmeasured_lines,
)
from harness.pipeline.context import RunOptions, open_run


def base_tree(args: argparse.Namespace, options: RunOptions) -> BaseTree | Unavailable:
    """The base's kernel trees: the folder given (`--base-tree`), or the commit `--base`
    names, written out of git under the cache's `ab/` folder."""
    if args.base_tree:
        if not args.base_tree.is_dir():
            return Unavailable(f"--base-tree {args.base_tree}: no such folder")
        return BaseTree(
            args.base_commit or str(args.base_tree), args.base_tree, environment.project_root()
        )
    commit = resolve_commit(environment.project_root(), args.base)
    if isinstance(commit, Unavailable) and not args.no_base_ok:
        raise environment.Unusable(
            f"--base: {commit.why}; name a commit, or pass --no-base-ok to judge every kernel NEW"
        )
    if isinstance(commit, Unavailable):
        return commit
    into = Path(options.cache_dir).parent / "ab"
    return extract(environment.project_root(), commit, list(map(Path, options.kernels_roots)), into)


def base_column(matrix: Matrix, name: str, target: Target) -> Target:
    """The column `name`, as the base of `target`'s upgrade report: one of the same target (the
    same code asked of nvcc) with another toolkit."""
    try:
        base = matrix.target(name)
    except MatrixError as error:
        raise environment.Unusable(f"ab: --base-column: {error}") from error
    if (base.sass, base.ptx) != (target.sass, target.ptx):
        raise environment.Unusable(
            f"ab: --base-column {base.name} emits {base.gencode}, {target.name} {target.gencode}: "
            "an upgrade report compares two toolkits of one target"
        )
    if base.toolkit == target.toolkit:
        raise environment.Unusable(
            f"ab: --base-column {base.name} is built by {target.name}'s own toolkit "
            f"({target.toolkit.version}): name a column of another toolkit"
        )
    return base


def main(args: argparse.Namespace) -> int:
    """`ab <target> --base REF`: the A/B of the changed kernels, written into the report."""
    if args.base is None and not args.base_tree and not args.base_column:
        raise environment.Unusable(
            "ab: name the base: --base REF, --base-tree DIR, or --base-column COLUMN"
        )
    if args.base_column and (args.base is not None or args.base_tree):
        raise environment.Unusable("ab: --base-column compares toolkits: give it alone")
    matrix, (target,) = environment.matrix_and_targets(args.matrix, [args.target])
    compared = base_column(matrix, args.base_column, target) if args.base_column else None
    options = environment.run_options(args, target)
    head = head_report(options)
    nvcc = environment.toolchain(target)
    gpus = environment.devices(matrix)
    context = open_run(matrix, options, nvcc, gpus)  # the kernels selected before a base is written
    base: Base
    if compared is not None:  # its own run: its toolkit's nvcc, the same kernels
        options_of_base = environment.run_options(args, compared)
        base = BaseColumn(open_run(matrix, options_of_base, environment.toolchain(compared), gpus))
    else:
        base = base_tree(args, options)
    if isinstance(base, BaseColumn):
        print(f"ab: {target.name} against the same sources built by {base.context.target.name}")
    elif isinstance(base, Unavailable):
        print(f"ab: no base to compare with ({base.why}): every kernel is judged NEW")
    else:
        print(f"ab: {target.name} against {base.commit} ({base.folder})")
    found = compare_and_record(context, head, base, args.all)
    counts = Counter(ab.judgement.value for ab in found.values())
    for line in unmeasured_lines(found):
        print(line)
    if said := instructions_line(found):
        print(f"ab: {said}")
    print(
        f"ab {target.name} on {runner_name(options.runner)}: "
        + ", ".join(f"{n} {j}" for j, n in sorted(counts.items()))
        + f"; written to {head.files.json}"
    )
    return 0
