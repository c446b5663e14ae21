"""`ab` without a GPU: the base's trees out of git, and what each case of the head is judged
when there is nothing to time (IDENTICAL, NEW, NOT_RUN with why); the timing itself is
tests/test_on_gpu.py's."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.compile.toolchain import Toolchain, find_toolchain
from harness.model import revision
from harness.model.cell import Judgement, Report
from harness.model.codec import report_from_json
from harness.model.errors import Unavailable
from harness.model.matrix import MatrixError, load_matrix
from harness.model.outcome import CellKind, Outcome
from harness.model.revision import BaseTree, extract, resolve_commit
from harness.pipeline.comparing import compare_target
from harness.pipeline.context import RunOptions, open_run
from harness.pipeline.stages import run_target
from harness.report import store
from tests.conftest import PLANTED, ROOT

KERNELS = ("add_one", "needs_sm90", "big_smem", "cluster_at_launch")


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def _tree(into: Path) -> Path:
    """A kernels tree of four planted kernels, chapter `planted`."""
    for name in KERNELS:
        shutil.copytree(PLANTED / "planted" / name, into / "planted" / name)
    return into


def _head_report(matrix, toolchain, cache, kernels: Path, reports: Path) -> Report:
    """The head's report as `test` leaves it, with every case passed (as on a GPU)."""
    options = RunOptions(matrix.targets["sm_90a"], (kernels,), reports, cache, runner="t")
    result = run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    report = result.report
    for cell in report.cells:
        if cell.kind is CellKind.CASE:
            cell.outcome, cell.skip_reason, cell.message = Outcome.PASSED, None, ""
    store.write(result.files, report)
    return report


@pytest.mark.parametrize("python", ["with tarfile's data filter", "3.11.2, without it"])
def test_the_base_is_written_out_of_git_and_a_ref_that_names_nothing_says_so(
    tmp_path, monkeypatch, python
):
    if python.startswith("3.11.2"):  # Debian 12's Python: extractall has no filter=
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    project = tmp_path / "project"
    _tree(project / "kernels")
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "base")
    base = _git(project, "rev-parse", "HEAD")
    source = project / "kernels" / "planted" / "add_one" / "add_one.cu"
    source.write_text(source.read_text().replace("+ 1.0f", "+ 2.0f"))
    _git(project, "commit", "-qam", "head")

    assert resolve_commit(project, "HEAD~1") == base
    tree = extract(project, base, [project / "kernels", tmp_path / "elsewhere"], tmp_path / "ab")
    assert tree.commit == base
    assert (
        "+ 1.0f" in (tree.root_of(project / "kernels") / "planted/add_one/add_one.cu").read_text()
    )
    outside = tree.root_of(tmp_path / "elsewhere")
    assert isinstance(outside, Unavailable) and "outside the project" in outside.why
    missing = resolve_commit(project, "no-such-branch")
    assert isinstance(missing, Unavailable) and "'no-such-branch' is not a commit" in missing.why


@pytest.mark.parametrize(
    ("name", "link"), [("k/evil.h", "../../../etc/passwd"), ("k/abs.h", "/etc/passwd")]
)
def test_a_base_archive_with_a_link_out_of_its_folder_is_refused_without_the_filter(
    tmp_path, monkeypatch, name, link
):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo(name)
        member.type, member.linkname = tarfile.SYMTYPE, link
        tar.addfile(member)
    archive.seek(0)
    with tarfile.open(fileobj=archive) as tar, pytest.raises(ValueError, match="points out"):
        revision._extract_inside(tar, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_each_case_is_identical_new_or_not_run_with_why(matrix, toolchain, compile_cache, tmp_path):
    project = tmp_path / "project"
    head = _tree(project / "kernels")
    base = tmp_path / "base"
    _tree(base / "kernels")
    shutil.rmtree(base / "kernels" / "planted" / "big_smem")  # new in the head
    unchanged = head / "planted" / "add_one" / "add_one.cu"  # a comment changes no code
    unchanged.write_text(unchanged.read_text() + "\n// a comment\n")
    broken = base / "kernels" / "planted" / "cluster_at_launch" / "cluster_at_launch.cu"
    broken.write_text(broken.read_text() + "\nthis is not C++;\n")
    spec = base / "kernels" / "planted" / "add_one" / "spec.py"  # the base lacks case n1
    spec.write_text(spec.read_text().replace(', Case("n1", {"n": 1})', ","))
    different = head / "planted" / "needs_sm90" / "needs_sm90.cu"
    different.write_text(different.read_text().replace("threadIdx.x == 0", "threadIdx.x == 1"))
    report = _head_report(matrix, toolchain, compile_cache, head, tmp_path / "reports")
    options = RunOptions(matrix.targets["sm_90a"], (head,), tmp_path / "r", compile_cache)
    tree = BaseTree("b" * 40, base, project)
    no_gpu = Unavailable("no GPU in this test")

    found = compare_target(open_run(matrix, options, toolchain, no_gpu), report, tree)

    judged = {(k.split(".")[1], case): ab for (k, case), ab in found.items()}
    assert judged["add_one", "n1000"].judgement is Judgement.IDENTICAL, judged[
        "add_one", "n1000"
    ].why
    assert judged["add_one", "n1000"].base_code_identity
    assert judged["add_one", "n1"].judgement is Judgement.NEW
    assert judged["add_one", "n1"].why == "the base has no such case"
    assert judged["big_smem", "blocks4"].judgement is Judgement.NEW
    assert "no planted.big_smem at bbbbbbbbbbbb" in judged["big_smem", "blocks4"].why
    failed = judged["cluster_at_launch", "blocks2_cluster2"]
    assert failed.judgement is Judgement.NOT_RUN
    assert failed.why.startswith("the base's build failed: "), failed.why
    timed = judged["needs_sm90", "blocks8"]  # its code changed: it would be timed, but no GPU
    assert timed.judgement is Judgement.NOT_RUN and "no-device" in timed.why, timed
    assert {ab.base_commit for ab in found.values()} == {"b" * 40}
    # Every passed case of the report is judged, none twice.
    passed = {(c.classname, c.case) for c in report.cells if c.kind is CellKind.CASE}
    assert set(found) == passed

    everything = compare_target(
        open_run(matrix, options, toolchain, no_gpu), report, tree, everything=True
    )
    assert everything["planted.add_one", "n1000"].judgement is Judgement.NOT_RUN  # timed too


def test_kernels_whose_code_identity_is_unknown_are_timed_and_counted(
    matrix, toolchain, tmp_path, monkeypatch, capsys
):
    """Without a cuobjdump (a wrapper nvcc once hid it) no build has a code identity: an
    unchanged kernel cannot be IDENTICAL, and ab says how many it could not tell."""
    monkeypatch.setattr(Toolchain, "cuobjdump", property(lambda self: tmp_path / "no-cuobjdump"))
    head = tmp_path / "project" / "kernels"
    base = tmp_path / "base" / "kernels"
    for tree in (head, base):
        shutil.copytree(PLANTED / "planted" / "add_one", tree / "planted" / "add_one")
    cache = tmp_path / "cache"  # builds without an identity: no other test's
    report = _head_report(matrix, toolchain, cache, head, tmp_path / "reports")
    options = RunOptions(matrix.targets["sm_90a"], (head,), tmp_path / "r", cache)
    tree = BaseTree("b" * 40, base.parent, head.parent)
    capsys.readouterr()

    found = compare_target(
        open_run(matrix, options, toolchain, Unavailable("no GPU")), report, tree
    )

    said = capsys.readouterr().out.splitlines()
    assert (
        "ab: code identity unknown for 1 kernel: they are timed, not carried (planted.add_one)"
        in said
    )
    assert {ab.judgement for ab in found.values()} == {Judgement.NOT_RUN}  # timed: no GPU


def test_a_base_that_names_no_commit_is_refused_or_with_no_base_ok_judges_every_kernel_new(
    matrix, toolchain, compile_cache, tmp_path, capsys
):
    head = _tree(tmp_path / "kernels")
    reports = tmp_path / "reports"
    before = _head_report(matrix, toolchain, compile_cache, head, reports)
    args = ["ab", "sm_90a", "--base", "no-such-ref-anywhere", "--kernels", str(head)]
    args += ["--reports", str(reports), "--cache", str(compile_cache), "--runner", "t"]
    kept = (reports / "junit-sm_90a.json").read_bytes()

    assert main(args) == 2  # a typo in the base must not turn the A/B gate off
    refused = capsys.readouterr().err
    assert "--base: 'no-such-ref-anywhere' is not a commit" in refused and "--no-base-ok" in refused
    assert (reports / "junit-sm_90a.json").read_bytes() == kept

    empty = ["ab", "sm_90a", "--base", "", *args[4:]]  # a first commit's parent, as CI says it
    assert main(empty) == 2 and "--no-base-ok" in capsys.readouterr().err
    assert main([*empty, "--no-base-ok"]) == 0
    capsys.readouterr()
    assert main([*args, "--no-base-ok"]) == 0

    said = capsys.readouterr().out
    assert "no base to compare with" in said and "every kernel is judged NEW" in said
    new_lines = [line for line in said.splitlines() if line.lstrip().startswith("NEW")]
    assert len(new_lines) == len(KERNELS), said  # one line a kernel, not one a case
    assert "planted.add_one (2 cases)  -- no base: " in said
    after = report_from_json(json.loads((reports / "junit-sm_90a.json").read_text()), reports)
    assert [c.name for c in after.cells] == [c.name for c in before.cells]
    assert [c.outcome for c in after.cells] == [c.outcome for c in before.cells]
    cases = [c for c in after.cells if c.kind is CellKind.CASE]
    assert cases and all(c.ab and c.ab.judgement is Judgement.NEW for c in cases)
    assert "'no-such-ref-anywhere' is not a commit" in cases[0].ab.why


def test_ab_without_a_report_asks_for_test_first(tmp_path, capsys):
    args = ["ab", "sm_90a", "--base", "HEAD", "--reports", str(tmp_path)]
    assert main(args) == 2
    assert "run `test` for this target first" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["rounds: 5", "samples: 0", "budget_s: 0"])
def test_matrix_ab_settings_are_checked(tmp_path, bad):
    block = "  rounds: 30\n  samples: 5\n  budget_s: 10\n"
    text = (ROOT / "matrix.yaml").read_text()
    assert block in text
    key = bad.split(":")[0]
    lines = [f"  {bad}" if line.startswith(f"  {key}:") else line for line in block.splitlines()]
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace(block, "\n".join(lines) + "\n"))
    with pytest.raises(MatrixError, match=r"matrix.yaml:\d+: ab"):  # the file, line and key
        load_matrix(path)


def test_a_base_tree_that_is_no_folder_judges_every_kernel_new_saying_so(
    matrix, toolchain, compile_cache, tmp_path, capsys
):
    head = _tree(tmp_path / "kernels")
    reports = tmp_path / "reports"
    _head_report(matrix, toolchain, compile_cache, head, reports)
    args = ["ab", "sm_90a", "--base-tree", str(tmp_path / "nowhere"), "--kernels", str(head)]
    args += ["--reports", str(reports), "--cache", str(compile_cache), "--runner", "t"]

    assert main(args) == 0

    said = capsys.readouterr().out
    assert f"--base-tree {tmp_path / 'nowhere'}: no such folder" in said
    after = report_from_json(json.loads((reports / "junit-sm_90a.json").read_text()), reports)
    cases = [c for c in after.cells if c.kind is CellKind.CASE]
    assert cases and all(c.ab.judgement is Judgement.NEW for c in cases)


def test_the_upgrade_report_compares_each_kernel_built_by_two_toolkits(
    matrix, compile_cache, tmp_path, capsys
):
    """`ab sm_90a-cuda13.5 --base-column sm_90a`: the same sources, the base built by 13.0's
    nvcc; a kernel whose code identity the new toolkit kept is IDENTICAL (as for commits), one
    whose code changed would be timed (here, no GPU: NOT_RUN saying so); the base is named by
    its toolkit. (13.5 changes every kernel's cubin here, if only its attributes.)"""
    kernels = _tree(tmp_path / "kernels")
    shutil.copytree(
        ROOT / "kernels" / "programming_model" / "block_reduce", kernels / "pm" / "block_reduce"
    )
    head_column, base_column = matrix.targets["sm_90a-cuda13.5"], matrix.targets["sm_90a"]
    reports = tmp_path / "reports"
    head_nvcc = find_toolchain(toolkit=head_column.toolkit)
    options = RunOptions(head_column, (kernels,), reports, compile_cache, runner="t")
    result = run_target(matrix, options, head_nvcc, Unavailable("no GPU in this test"))
    for cell in result.report.cells:
        if cell.kind is CellKind.CASE:
            cell.outcome, cell.skip_reason, cell.message = Outcome.PASSED, None, ""
    store.write(result.files, result.report)
    heads = {
        c.classname: c.compile.code_identity
        for c in result.report.cells
        if c.kind is CellKind.COMPILE and c.compile
    }
    base_nvcc = find_toolchain(toolkit=base_column.toolkit)
    base_options = RunOptions(base_column, (kernels,), tmp_path / "base-r", compile_cache)
    base_builds = run_target(matrix, base_options, base_nvcc, Unavailable("no GPU")).report
    bases = {
        c.classname: c.compile.code_identity
        for c in base_builds.cells
        if c.kind is CellKind.COMPILE and c.compile
    }
    assert {k for k in heads if heads[k] != bases[k]}  # 13.5 changed the code of some

    args = ["ab", "sm_90a-cuda13.5", "--base-column", "sm_90a", "--kernels", str(kernels)]
    args += ["--reports", str(reports), "--cache", str(compile_cache), "--runner", "t"]
    assert main(args) == 0

    said = capsys.readouterr().out
    assert "ab: sm_90a-cuda13.5 against the same sources built by sm_90a" in said
    after = report_from_json(
        json.loads((reports / "junit-sm_90a-cuda13.5.json").read_text()), reports
    )
    judged = [c for c in after.cells if c.kind is CellKind.CASE and c.ab is not None]
    assert judged and {c.ab.base_commit for c in judged} == {"cuda13.0"}
    # 13.5 keeps add_one's instructions (only its cubin's attributes change), not every kernel's
    assert {c.ab.same_sass for c in judged if c.classname == "planted.add_one"} == {True}
    changed = sorted({c.classname for c in judged if c.ab.same_sass is False})
    compared = {c.classname for c in judged}
    assert f"ab: instructions changed in {len(changed)} of {len(compared)} kernels compared" in said
    for cell in judged:
        assert cell.ab.base_code_identity == bases[cell.classname]
        if heads[cell.classname] == bases[cell.classname]:
            assert cell.ab.judgement is Judgement.IDENTICAL, cell.ab
        else:  # the new toolkit's SASS differs: timed on a GPU; here none
            assert cell.ab.judgement is Judgement.NOT_RUN and "no-device" in cell.ab.why, cell.ab


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (
            ["--base-column", "sm_80"],
            "ab: --base-column sm_80 emits arch=compute_80,code=[sm_80,compute_80], "
            "sm_90a-cuda13.5 arch=compute_90a,code=[sm_90a]: an upgrade report compares two "
            "toolkits of one target",
        ),
        (
            ["--base-column", "sm90-cuda13.5"],
            "ab: --base-column sm_90a-cuda13.5 is built by sm_90a-cuda13.5's own toolkit "
            "(13.5): name a column of another toolkit",
        ),
        (["--base-column", "sm_75"], "ab: --base-column: "),
        (
            ["--base-column", "sm_90a", "--base", "HEAD"],
            "ab: --base-column compares toolkits: give it alone",
        ),
    ],
)
def test_an_upgrade_report_of_no_such_pair_of_toolkits_is_refused(tmp_path, capsys, asked, said):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "junit-sm_90a-cuda13.5.json").write_text("{}")  # never read: refused before
    assert main(["ab", "sm_90a-cuda13.5", *asked, "--reports", str(reports)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}"), err
    assert (reports / "junit-sm_90a-cuda13.5.json").read_text() == "{}"
