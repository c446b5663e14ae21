"""`ab <target> --base REF`: the kernels whose code changed since REF, timed against REF's build
on this GPU (harness.pipeline.comparing), each case's A/B written into the target's report."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from harness.commands import environment
from harness.model.errors import Unavailable
from harness.model.provenance import runner_name
from harness.model.revision import BaseTree, extract, resolve_commit
from harness.pipeline.comparing import compare_and_record, head_report, unmeasured_lines
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


def main(args: argparse.Namespace) -> int:
    """`ab <target> --base REF`: the A/B of the changed kernels, written into the report."""
    if args.base is None and not args.base_tree:
        raise environment.Unusable("ab: name the base: --base REF, or --base-tree DIR")
    matrix, (target,) = environment.matrix_and_targets(args.matrix, [args.target])
    options = environment.run_options(args, target)
    head = head_report(options)
    nvcc = environment.toolchain(target)
    gpus = environment.devices(matrix)
    context = open_run(matrix, options, nvcc, gpus)  # the kernels selected before a base is written
    base = base_tree(args, options)
    if isinstance(base, Unavailable):
        print(f"ab: no base to compare with ({base.why}): every kernel is judged NEW")
    else:
        print(f"ab: {target.name} against {base.commit} ({base.folder})")
    found = compare_and_record(context, head, base, args.all)
    counts = Counter(ab.judgement.value for ab in found.values())
    for line in unmeasured_lines(found):
        print(line)
    print(
        f"ab {target.name} on {runner_name(options.runner)}: "
        + ", ".join(f"{n} {j}" for j, n in sorted(counts.items()))
        + f"; written to {head.files.json}"
    )
    return 0
