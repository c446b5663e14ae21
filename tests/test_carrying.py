"""Carried verdicts: a case whose code, spec, toolkit, target, GPU model, driver and the harness's
checks are all as in a passed run of the history is not launched again, and says from where;
any one of them changed, and it runs. The GPUs are fake_workers.fake_gpu processes."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import subprocess

import pytest
from junitparser import JUnitXml

from harness.model.matrix import ComputeCapability, DevicePeaks
from harness.model.outcome import CellKind, Outcome
from harness.model.revision import VOUCHED
from harness.pipeline import carrying
from harness.pipeline.context import RunOptions
from harness.pipeline.running import Workers, expected_of_last_run
from harness.pipeline.sharding import times_of
from harness.pipeline.stages import run_target
from harness.run.device import DeviceInfo
from harness.sessions import vouched_commits
from tests import fake_workers
from tests.conftest import PLANTED

FAKES = Workers(fake_workers.fake_gpu, fake_workers.serve_case)
KERNELS = ("add_one", "big_smem")


def _gpu(name: str = "Fake GPU", driver: str = "580.1", peaks=None) -> list[DeviceInfo]:
    return [
        DeviceInfo(
            0, name, ComputeCapability(9, 0), driver, "13.0", 132, 50 << 20, 227 << 10, peaks
        )
    ]


def _git(project, *args) -> str:
    done = subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(project, message: str) -> str:
    _git(project, "add", "-A")
    _git(
        project,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "--allow-empty",
        "-qm",
        message,
    )
    return _git(project, "rev-parse", "HEAD")


@pytest.fixture
def project(tmp_path):
    """A repository of two planted kernels and a module beside them, one commit."""
    root = tmp_path / "project"
    for name in KERNELS:
        shutil.copytree(PLANTED / "planted" / name, root / "kernels" / "planted" / name)
    (root / "kernels" / "planted" / "shared.py").write_text("SCALE = 1\n")
    _git(root, "init", "-q")
    _commit(root, "first")
    return root


def _run(matrix, toolchain, project, tmp_path, gpus=None, carry=True, source=None):
    """A fake-GPU run of the project at its HEAD, kept in the history, carrying from it (or
    from `source`)."""
    history = tmp_path / "history.sqlite"
    options = RunOptions(
        matrix.targets["sm_90a"],
        (project / "kernels",),
        tmp_path / "reports",
        tmp_path / "cache",
        commit=_git(project, "rev-parse", "HEAD"),
        root=project,
        history=history,
        carry_from=(source or history) if carry else None,
    )
    result = run_target(matrix, options, toolchain, gpus or _gpu(), FAKES)
    return {(c.kernel, c.case): c for c in result.cells if c.kind is CellKind.CASE}


def _carried(cells) -> set[str]:
    return {kernel for (kernel, _), cell in cells.items() if cell.carried_from is not None}


def test_an_unchanged_case_is_carried_saying_from_where_and_readers_count_it_passed(
    matrix, toolchain, project, tmp_path, capsys
):
    first = _run(matrix, toolchain, project, tmp_path)
    assert _carried(first) == set()
    assert all(cell.verdict_key for cell in first.values())
    origin = _git(project, "rev-parse", "HEAD")
    _commit(project, "nothing a verdict reads")  # a new commit, the same files
    again = _run(matrix, toolchain, project, tmp_path)
    assert _carried(again) == set(KERNELS)
    for key, cell in again.items():
        assert cell.outcome is Outcome.PASSED and cell.timing is None
        assert cell.carried_from.commit == origin and cell.verdict_key == first[key].verdict_key
        assert cell.message.startswith(f"carried from {origin[:12]} (cuda-matrix.sm_90a.")
    assert f"carry: {len(again)} of {len(again)} cases carried from" in capsys.readouterr().out
    xml = JUnitXml.fromfile(str(tmp_path / "reports" / "junit-sm_90a.xml"))
    (suite,) = list(xml)
    assert (suite.failures, suite.errors, suite.skipped) == (0, 0, 0)  # carried cells: passed
    cases = [case for case in suite if "::compile" not in case.name]
    assert cases and all(case.is_passed for case in cases)
    assert all(case.system_out.startswith("carried from ") for case in cases)
    # a carried cell took no time: the next run's order and shards never weigh it by its report
    kept = tmp_path / "reports" / "junit-sm_90a.json"
    assert expected_of_last_run(kept) == {}
    assert times_of([kept], "sm_90a").seconds == {}


@pytest.mark.parametrize(
    "change",
    [
        "kernel code",
        "spec",
        "module beside the specs",
        "toolkit",
        "GPU model",
        "driver",
        "datasheet peaks",
        "checks",
    ],
)
def test_a_change_to_anything_a_verdict_reads_runs_the_case_again(
    matrix, toolchain, project, tmp_path, monkeypatch, change
):
    _run(matrix, toolchain, project, tmp_path)
    gpus, used = _gpu(), toolchain
    folder = project / "kernels" / "planted" / "add_one"
    if change == "kernel code":
        source = folder / "add_one.cu"
        source.write_text(source.read_text().replace("x[i] + 1.0f", "x[i] + 2.0f"))
    elif change == "spec":
        (folder / "spec.py").write_text((folder / "spec.py").read_text() + "\n# edited\n")
    elif change == "module beside the specs":
        (project / "kernels" / "planted" / "shared.py").write_text("SCALE = 2\n")
    elif change == "toolkit":
        used = dataclasses.replace(toolchain, version="13.5.37")
    elif change == "GPU model":
        gpus = _gpu(name="Other GPU")
    elif change == "driver":
        gpus = _gpu(driver="590.2")
    elif change == "datasheet peaks":  # a time beyond them fails a cell
        gpus = _gpu(peaks=DevicePeaks(4800.0, 66.9, 989.4))
    else:
        monkeypatch.setattr(carrying, "checks_digest", lambda: "another version of the checks")
    _commit(project, change)
    again = _run(matrix, toolchain if used is toolchain else used, project, tmp_path, gpus)
    everything = change not in ("kernel code", "spec")
    assert _carried(again) == (set() if everything else {"big_smem"})


def test_a_verdict_older_than_the_matrix_allows_runs_again(matrix, toolchain, project, tmp_path):
    _run(matrix, toolchain, project, tmp_path)
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        db.execute("UPDATE runs SET recorded = '2020-01-01T00:00:00+00:00'")
    assert _carried(_run(matrix, toolchain, project, tmp_path)) == set()


@pytest.mark.parametrize("history", ["missing", "corrupt", "another project's", "--no-carry"])
def test_a_history_that_cannot_vouch_carries_nothing_and_says_why(
    matrix, toolchain, project, tmp_path, capsys, history
):
    _run(matrix, toolchain, project, tmp_path)
    path = tmp_path / "history.sqlite"
    said = ""
    if history == "missing":
        path = tmp_path / "elsewhere.sqlite"
        said = f"carry: nothing carried: no history at {path}"
    elif history == "corrupt":
        path = tmp_path / "corrupt.sqlite"
        path.write_bytes(b"not a database" * 100)
        said = "carry: nothing carried: "
    elif history == "another project's":
        with sqlite3.connect(path) as db:
            db.execute("UPDATE runs SET commit_id = ?", ("f" * 40,))
        said = "none of its commits is in"
    capsys.readouterr()
    again = _run(matrix, toolchain, project, tmp_path, carry=history != "--no-carry", source=path)
    assert _carried(again) == set()
    assert all(cell.outcome is Outcome.PASSED for cell in again.values())  # every case ran
    assert said in capsys.readouterr().out


def test_a_worker_cannot_say_its_cell_was_carried_or_name_its_key(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    """The worker runs the spec: what it says of carrying is the parent's to say."""
    monkeypatch.setenv("FAKE_GPU_FORGE", "1")
    cells = _run(matrix, toolchain, project, tmp_path, carry=False)
    assert _carried(cells) == set()
    assert all(cell.verdict_key and len(cell.verdict_key) == 64 for cell in cells.values())


def test_in_a_container_the_host_says_which_of_the_history_s_commits_it_has(
    matrix, toolchain, project, tmp_path, monkeypatch
):
    """The image has no git: the session reads the history's commits, asks the host's git, and
    hands the harness the answer (MATRIX_KNOWN_COMMITS); the harness goes by it."""
    _run(matrix, toolchain, project, tmp_path)
    history = tmp_path / "history.sqlite"
    origin = _git(project, "rev-parse", "HEAD")
    assert vouched_commits(project, ["test", "--carry-from", str(history)]) == {VOUCHED: origin}
    assert vouched_commits(project, ["test", "sm_90a"]) == {}  # no carrying: nothing to say
    with sqlite3.connect(history) as db:  # commits this repository lacks
        db.execute("UPDATE runs SET commit_id = ?", ("f" * 40,))
    assert vouched_commits(project, ["--carry-from", str(history)]) == {VOUCHED: ""}
    monkeypatch.setenv(VOUCHED, "f" * 40)  # as a host that has them would say
    assert _carried(_run(matrix, toolchain, project, tmp_path)) == set(KERNELS)
    monkeypatch.setenv(VOUCHED, "")
    assert _carried(_run(matrix, toolchain, project, tmp_path)) == set()
