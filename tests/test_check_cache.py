"""The CPU check's cache: a kernel whose check found nothing is not checked again, for its
target or another, while nothing its check reads has changed (its spec, the modules it imports,
the files it opens, the variables it looks up) and what it asked of the device is answered alike;
anything else about an entry is a miss, never a crash."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import textwrap

import pytest

from harness import sandbox
from harness.model import spec_children
from harness.model.cell import Resources
from harness.model.discovery import Kernel, kernel_folders
from harness.model.outcome import Outcome
from harness.pipeline.checking import CHECKED, FROM_CACHE
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import check_target
from harness.run import check_cache, spec_check
from harness.run.check_cache import CheckCache
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "spec_checks"
VARIABLE = "CHECK_CACHE_TEST_SCALE"
# A spec whose check opens a data file beside it and looks up an environment variable
READS = f"""
    Path(__file__).with_name("scale.txt").read_text()
    os.environ.get({VARIABLE!r})
"""


def _spec(body: str) -> str:
    """A spec of the planted add_one whose setup() first does `body`."""
    return textwrap.dedent(
        """\
        import dataclasses, os, random
        from pathlib import Path

        import numpy as np

        from ..add_problem import spec

        _BASE = spec("")  # its source: <folder>.cu


        def _setup(case, rng, device):
        {body}
            return _BASE.setup(case, rng, device)


        SPEC = dataclasses.replace(_BASE, setup=_setup)
        """
    ).format(body=textwrap.indent(textwrap.dedent(body).strip(), "    "))


@pytest.fixture
def tree(tmp_path):
    """The planted spec checks, with `planted.reads_data` (READS) beside them, and two that
    size their problem by the device: `planted.sm_sized` by its SM count, `planted.occupancy_sized`
    by how many blocks of add_one an SM holds."""
    tree = tmp_path / "kernels"
    shutil.copytree(FIXTURES, tree)
    _plant(tree, "reads_data", READS)
    (tree / "planted" / "reads_data" / "scale.txt").write_text("1.0\n")
    _plant(tree, "sm_sized", "assert device.sm_count > 0")
    _plant(tree, "occupancy_sized", "assert device.max_blocks_per_sm('add_one', 256, 40000) > 0")
    return tree


def _plant(tree, name, body):
    folder = tree / "planted" / name
    folder.mkdir()
    shutil.copy(tree / "planted" / "sound" / "sound.cu", folder / f"{name}.cu")
    (folder / "spec.py").write_text(_spec(body))


def _kernels(tree, names):
    folders = [f for f in kernel_folders(tree) if f.name in names]
    read = spec_children.read_all([f.spec_file for f in folders], timeout_s=30)
    return [Kernel(f.chapter, f.name, f.folder, read[f.spec_file]) for f in folders]


def _check(
    monkeypatch, matrix, kernels, cache_dir, target="sm_90a", resources=None, confinement=None
):
    """A run's check of `kernels` with the cache in `cache_dir`: what it found, and the kernels
    whose spec a child was started for."""
    started = []

    def counted(jobs, *rest):
        started.extend(spec.parent.name for spec, _ in jobs)
        return spec_children.in_spec_children(jobs, *rest)

    monkeypatch.setattr(spec_check, "in_spec_children", counted)
    cache = CheckCache(cache_dir)
    found = spec_check.check_kernels(
        kernels, resources or {}, matrix.targets[target], 30, confinement, cache=cache
    )
    return found, sorted(started)


def _findings(found):
    return {k: {case: check.finding for case, check in cases.items()} for k, cases in found.items()}


def test_a_second_check_of_unchanged_kernels_starts_no_child(tree, tmp_path, matrix, monkeypatch):
    kernels = _kernels(tree, ["sound", "reads_data", "missing_entry"])
    first, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert started == ["missing_entry", "reads_data", "sound"]
    assert not any(check.cached for cases in first.values() for check in cases.values())
    again, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert started == []
    assert _findings(again) == _findings(first)
    served = [check for cases in again.values() for check in cases.values()]
    assert all(check.cached and check.seconds > 0 for check in served)


def test_a_check_that_found_something_is_checked_every_time(tree, tmp_path, matrix, monkeypatch):
    kernels = _kernels(tree, ["setup_raises"])
    first, _ = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    again, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert started == ["setup_raises"]
    assert _findings(again) == _findings(first)
    assert "setup() raised" in str(again["planted.setup_raises"]["n1000"].finding)


REGISTERS_32 = {"add_one": Resources(registers=32, smem_bytes=0, spill_bytes=0, stack_bytes=0)}
REGISTERS_64 = {"add_one": Resources(registers=64, smem_bytes=0, spill_bytes=0, stack_bytes=0)}


@pytest.mark.parametrize(
    ("change", "checked_again"),
    [
        ("its spec.py", ["reads_data"]),
        # all four import add_problem.py
        ("a module its spec imports", ["occupancy_sized", "reads_data", "sm_sized", "sound"]),
        ("a file it opens", ["reads_data"]),
        ("a file it opens, gone", ["reads_data"]),
        ("a variable it looks up", ["reads_data"]),
        # the occupancy it asked for is another; what the others asked (has the build add_one?)
        # is answered alike
        ("its build's resources", ["occupancy_sized"]),
        # sm_80's stand-in has fewer SMs, and less shared memory for blocks of add_one
        ("the target", ["occupancy_sized", "sm_sized"]),
    ],
)
def test_a_change_to_what_a_check_reads_checks_it_again(
    tree, tmp_path, matrix, monkeypatch, change, checked_again
):
    monkeypatch.delenv(VARIABLE, raising=False)
    kernels = _kernels(tree, ["sound", "reads_data", "sm_sized", "occupancy_sized"])
    built = {
        (f"planted.{name}", ()): REGISTERS_32
        for name in ("sound", "reads_data", "sm_sized", "occupancy_sized")
    }
    _check(monkeypatch, matrix, kernels, tmp_path / "cache", resources=built)
    _, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache", resources=built)
    assert started == []
    folder, target = tree / "planted" / "reads_data", "sm_90a"
    if change == "its spec.py":
        (folder / "spec.py").write_text((folder / "spec.py").read_text() + "# edited\n")
    elif change == "a module its spec imports":
        helper = tree / "planted" / "add_problem.py"
        helper.write_text(helper.read_text() + "# edited\n")
    elif change == "a file it opens":
        (folder / "scale.txt").write_text("2.0\n")
    elif change == "a file it opens, gone":
        (folder / "scale.txt").unlink()
    elif change == "a variable it looks up":
        monkeypatch.setenv(VARIABLE, "2.0")
    elif change == "its build's resources":
        built = {key: REGISTERS_64 for key in built}
    else:
        target = "sm_80"
    found, started = _check(
        monkeypatch, matrix, kernels, tmp_path / "cache", target=target, resources=built
    )
    assert started == checked_again
    opened_none = change == "a file it opens, gone"
    assert (found["planted.reads_data"]["n1"].finding is not None) == opened_none


@pytest.mark.parametrize(
    "draw",
    [
        "np.random.default_rng().random()",  # numpy's unseeded generator
        "np.random.rand()",  # numpy's global one
        "random.random()",
        "random.Random().random()",
        "os.urandom(4)",
        "open('/dev/urandom', 'rb').read(4)",  # a device: no later read reads the same
    ],
)
def test_a_check_that_draws_fresh_entropy_is_never_kept(tmp_path, matrix, monkeypatch, draw):
    """The check hands setup() a generator of a fixed seed; a spec that draws on another may
    check differently each time, so its answer is not carried."""
    tree = tmp_path / "kernels"
    shutil.copytree(FIXTURES, tree)
    _plant(tree, "draws", draw)
    kernels = _kernels(tree, ["draws"])
    first, _ = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert first["planted.draws"]["n1"].finding is None
    _, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert started == ["draws"]


def test_a_check_that_writes_a_file_is_never_kept(tmp_path, matrix, monkeypatch):
    """Where it may write differs from run to run (each protects its own reports), so what a
    writing check answers may too."""
    tree = tmp_path / "kernels"
    shutil.copytree(FIXTURES, tree)
    _plant(tree, "writes", f"open({str(tmp_path / 'note.txt')!r}, 'w').write('1')")
    kernels = _kernels(tree, ["writes"])
    first, _ = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert first["planted.writes"]["n1"].finding is None
    _, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache")
    assert started == ["writes"]


@pytest.mark.skipif(sandbox.unavailable() is not None, reason=f"{sandbox.unavailable()}")
def test_runs_that_protect_other_reports_folders_are_served_the_same_answers(
    tree, tmp_path, matrix, monkeypatch
):
    """A run's specs may not write its reports or cache; another run's reports folder is
    another folder, and its check answers the same."""
    kernels = _kernels(tree, ["sound", "reads_data"])
    first = sandbox.for_specs((tmp_path / "reports",))
    _, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache", confinement=first)
    assert started == ["reads_data", "sound"]
    other = sandbox.for_specs((tmp_path / "warm",))
    found, started = _check(monkeypatch, matrix, kernels, tmp_path / "cache", confinement=other)
    assert started == []
    assert all(check.cached for cases in found.values() for check in cases.values())


@pytest.mark.parametrize(
    "path", ["/tmp/a\0b", "/dev/zero"], ids=["a NUL in a path", "a device that never ends"]
)
def test_what_a_child_says_it_read_cannot_break_the_run(tmp_path, path):
    """A spec's child sends its reads as it likes: one no file can be, or one that reads
    forever, is no entry, and no crash or hang."""
    cache = CheckCache(tmp_path / "cache")
    reads = check_cache.Reads((path,), (), {}, False, False)
    cache.keep("planted.sound", "k", {"n1": 0.1}, {"n1": None}, reads, [])
    assert cache.served("planted.sound", "k", ["n1"], 60, lambda facts: True) is None
    reads = check_cache.Reads((), (path,), {path: None}, False, False)
    cache.keep("planted.sound", "k", {"n1": 0.1}, {"n1": None}, reads, [])
    served = cache.served("planted.sound", "k", ["n1"], 60, lambda facts: True)
    assert served == (
        None if "\0" in path else {"n1": None}
    )  # /dev/zero as a package's file: only its stat is read


def _entry(cache_dir, kernel):
    (entry,) = (cache_dir / check_cache.FOLDER / f"planted.{kernel}").glob("*.json")
    return entry


def _signed(record, key, entry):
    fields = {name: value for name, value in record.items() if name != "mac"}
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (
        check_cache.MAC_DOMAIN,
        f"{entry.parent.name}/{entry.stem}".encode(),
        json.dumps(fields, sort_keys=True).encode(),
    ):
        mac.update(len(part).to_bytes(8, "little") + part)
    return {**record, "mac": mac.hexdigest()}


@pytest.mark.parametrize(
    "tamper",
    [
        "not JSON",
        "not an object",
        "a field changed, its MAC kept",
        "signed with another key",
        "no MAC",
        "another kernel's entry",
        "a case's time not a number, signed",
        "a case's note not text, signed",
        "the cache's key broken",
    ],
)
def test_an_entry_not_as_the_harness_wrote_it_is_a_miss(
    tree, tmp_path, matrix, monkeypatch, tamper
):
    """As a compile cache entry (issue #36): a spec's child that could write the cache could
    otherwise make any kernel's check pass, its own later one among them."""
    cache = tmp_path / "cache"
    kernels = _kernels(tree, ["sound", "reads_data"])
    _check(monkeypatch, matrix, kernels, cache)
    entry = _entry(cache, "reads_data")
    record = json.loads(entry.read_text())
    if tamper == "not JSON":
        entry.write_text("{not json")
    elif tamper == "not an object":
        entry.write_text("[]")
    elif tamper == "a field changed, its MAC kept":
        record["files"] = {}
        entry.write_text(json.dumps(record))
    elif tamper == "signed with another key":
        record["files"] = {}
        entry.write_text(json.dumps(_signed(record, b"k" * 32, entry)))
    elif tamper == "no MAC":
        del record["mac"]
        entry.write_text(json.dumps(record))
    elif tamper == "another kernel's entry":
        shutil.copy(_entry(cache, "sound"), entry)
    elif tamper == "a case's time not a number, signed":
        record["cases"]["n1"] = "fast"
        key = (cache / ".mac-key").read_bytes()
        entry.write_text(json.dumps(_signed(record, key, entry)))
    elif tamper == "a case's note not text, signed":
        record["notes"]["n1"] = 5
        key = (cache / ".mac-key").read_bytes()
        entry.write_text(json.dumps(_signed(record, key, entry)))
    else:
        (cache / ".mac-key").write_bytes(b"short")
    found, started = _check(monkeypatch, matrix, kernels, cache)
    assert "reads_data" in started
    checks = found["planted.reads_data"].values()
    assert all(check.finding is None and not check.cached for check in checks)
    if tamper != "the cache's key broken":  # the entry is written anew, and served next
        _, started = _check(monkeypatch, matrix, kernels, cache)
        assert started == []


def test_a_case_served_from_the_cache_is_a_cell_checked_on_the_cpu(
    tree, tmp_path, matrix, toolchain, compile_cache
):
    """Its outcome and message as the check said them, that the cache answered, and its time:
    the look-up's, never 0."""
    options = RunOptions(
        matrix.targets["sm_90a"], (tree,), tmp_path / "reports", compile_cache, select="sound"
    )
    first = [c for c in check_target(matrix, options, toolchain).cells if c.kind.value == "case"]
    again = [c for c in check_target(matrix, options, toolchain).cells if c.kind.value == "case"]
    assert [c.case for c in again] == [c.case for c in first] == ["n1000", "n1"]
    for cell, before in zip(again, first, strict=True):
        assert cell.outcome is before.outcome is Outcome.SKIPPED
        assert before.message.endswith(CHECKED)
        assert cell.message == f"{before.message}; {FROM_CACHE}"
        assert 0 < cell.seconds < 1
