"""The confinement of specs' processes (harness/sandbox.py): what a confined process can still do,
and a hostile spec in a real run, which rewrites nothing the harness trusts."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import sandbox
from harness.compile.nvcc import mac_key_file
from harness.model.errors import Unavailable
from harness.model.outcome import Outcome
from harness.pipeline.context import RunOptions, spec_confinement
from harness.pipeline.stages import run_target
from tests.conftest import PLANTED, ROOT, plant_forger

WHY = sandbox.unavailable()
needs_landlock = pytest.mark.skipif(WHY is not None, reason=f"no-landlock: {WHY}")

# A program that tries each access and prints one word for each: ok or denied.
PROBE = """
import os, sys, threading
from pathlib import Path
def attempt(name, act):
    try:
        act()
        print(name, "ok")
    except OSError:
        print(name, "denied")
base = Path(sys.argv[1])
attempt("read-kept", lambda: (base / "cache" / "entry").read_bytes())
attempt("write-kept", lambda: (base / "cache" / "entry").write_bytes(b"forged"))
attempt("new-in-kept", lambda: (base / "cache" / "new").write_bytes(b"forged"))
attempt("remove-kept", lambda: os.unlink(base / "cache" / "entry"))
attempt("rename-into-kept", lambda: os.replace(base / "scratch" / "made", base / "cache" / "entry"))
attempt("write-scratch", lambda: (base / "scratch" / "more").write_bytes(b"mine"))
attempt("read-elsewhere", lambda: Path(sys.executable).read_bytes()[:4])
# the CUDA driver names its threads so; its own /proc entry is no way around the confinement
thread = f"/proc/self/task/{threading.get_native_id()}/comm"
attempt("name-own-thread", lambda: Path(thread).write_text("probe"))
attempt("write-kept-via-proc", lambda: Path(f"/proc/self/root{base}/cache/entry").write_bytes(b"x"))
"""


def _probe(tmp_path: Path, confinement: sandbox.Confinement) -> dict[str, str]:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "entry").write_bytes(b"built")
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "made").write_bytes(b"forged")
    argv = sandbox.confined(confinement, [sys.executable, "-c", PROBE, str(tmp_path)])
    ran = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return dict(line.split() for line in ran.stdout.splitlines())


@needs_landlock
def test_a_confined_process_reads_and_writes_only_what_it_is_given(tmp_path):
    confinement = sandbox.Confinement(
        readable=None,
        writable=(tmp_path,),
        read_only=(tmp_path / "cache",),
    )
    said = _probe(tmp_path, confinement)
    assert said == {
        "read-kept": "ok",
        "write-kept": "denied",
        "new-in-kept": "denied",
        "remove-kept": "denied",
        "rename-into-kept": "denied",
        "write-scratch": "ok",
        "read-elsewhere": "ok",
        "name-own-thread": "ok",
        "write-kept-via-proc": "denied",
    }
    assert (tmp_path / "cache" / "entry").read_bytes() == b"built"


@needs_landlock
def test_a_folder_of_its_own_inside_a_kept_tree_is_writable_and_nothing_beside_it(tmp_path):
    (tmp_path / "cache" / "own").mkdir(parents=True)
    confinement = sandbox.Confinement(
        readable=None,
        writable=(tmp_path,),
        read_only=(tmp_path / "cache",),
        own=(tmp_path / "cache" / "own",),
    )
    probe = "import sys; from pathlib import Path\n" + "".join(
        f"try:\n    Path(sys.argv[1], {name!r}).write_bytes(b'x'); print({name!r}, 'ok')\n"
        f"except OSError:\n    print({name!r}, 'denied')\n"
        for name in ("cache/own/offer", "cache/entry", "cache/other")
    )
    argv = sandbox.confined(confinement, [sys.executable, "-c", probe, str(tmp_path)])
    ran = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    said = dict(line.split() for line in ran.stdout.splitlines())
    assert said == {"cache/own/offer": "ok", "cache/entry": "denied", "cache/other": "denied"}


def test_an_unconfined_probe_can_do_all_of_it(tmp_path):
    """The probe itself can see each access: without the confinement every one succeeds."""
    argv = [sys.executable, "-c", PROBE, str(tmp_path)]
    for folder, name, data in (("cache", "entry", b"built"), ("scratch", "made", b"x")):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_bytes(data)
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    said = dict(line.split() for line in ran.stdout.splitlines())
    assert set(said.values()) == {"ok"}, said


def test_a_carved_tree_is_granted_around_by_its_ancestors_entries(tmp_path):
    for name in ("a/kept/x", "a/b", "c"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "a" / "file").write_text("f")
    (tmp_path / "link").symlink_to(tmp_path / "a" / "kept")
    granted = set(sandbox.grants(tmp_path, [(tmp_path / "a" / "kept").resolve()]))
    base = tmp_path.resolve()
    assert granted == {base / "a" / "b", base / "a" / "file", base / "c"}
    assert set(sandbox.grants(tmp_path, [])) == {base}
    assert not set(sandbox.grants(tmp_path / "a" / "kept", [(tmp_path / "a").resolve()]))


def test_a_confinement_travels_as_json():
    confinement = sandbox.for_specs([Path("/p/cache")])
    assert sandbox.Confinement.from_json(confinement.to_json()) == confinement
    own = dataclasses.replace(confinement, own=(Path("/p/cache/host/offers/1"),))
    assert sandbox.Confinement.from_json(own.to_json()) == own
    assert confinement.readable is None and Path("/tmp") in confinement.writable


@needs_landlock
def test_a_hostile_spec_rewrites_nothing_the_harness_trusts(matrix, toolchain, tmp_path):
    """A spec that, at import, writes every file of the compile cache, the reports and the
    kernel trees, and reads the cache's key: each attempt is denied, and the other kernel's
    build and cells stay its own."""
    kernels = tmp_path / "kernels"
    shutil.copytree(PLANTED / "planted" / "add_one", kernels / "planted" / "add_one")
    options = RunOptions(
        matrix.targets["sm_90a"], (kernels,), tmp_path / "reports", tmp_path / "cache"
    )
    first = run_target(matrix, options, toolchain, Unavailable("test"))
    built = {p: p.read_bytes() for p in sorted((tmp_path / "cache").rglob("*")) if p.is_file()}
    assert built and mac_key_file(tmp_path / "cache") in built
    log = plant_forger(kernels, tmp_path)
    second = run_target(matrix, options, toolchain, Unavailable("test"))
    attempts = log.read_text().splitlines()
    assert attempts, "the hostile spec was never imported"
    landed = [line for line in attempts if not line.startswith("denied ")]
    assert not landed, landed
    assert {p: p.read_bytes() for p in built} == built  # every cached file as it was built
    before = {(c.kernel, c.case): c for c in first.cells}
    after = {(c.kernel, c.case): c for c in second.cells if c.kernel == "add_one"}
    assert after.keys() == before.keys()
    for key, cell in after.items():
        assert cell.outcome == before[key].outcome, cell.message
    compiled = after["add_one", "compile"]
    assert compiled.outcome is Outcome.PASSED and compiled.compile.cached
    assert compiled.compile.binary_sha256 == before["add_one", "compile"].compile.binary_sha256
    forger = {c.case: c for c in second.cells if c.kernel == "forger"}
    assert forger["compile"].outcome is Outcome.PASSED  # it loaded, confined


def test_a_run_confines_its_specs_away_from_the_cache_reports_and_trees(matrix, tmp_path):
    options = RunOptions(
        matrix.targets["sm_90a"], (tmp_path / "k",), tmp_path / "reports", tmp_path / "cache"
    )
    confinement = spec_confinement(options)
    if WHY is not None:
        assert confinement is None
        return
    assert confinement is not None
    assert set(confinement.read_only) == {tmp_path / "k", tmp_path / "reports", tmp_path / "cache"}


@needs_landlock
def test_a_first_run_keeps_its_cache_not_the_folder_around_it(matrix, tmp_path):
    """Before a first run neither the cache nor the reports exist: they are made before the
    specs are confined, so a scratch folder beside them stays writable to a spec."""
    (tmp_path / "k").mkdir()
    (tmp_path / "scratch").mkdir()
    options = RunOptions(
        matrix.targets["sm_90a"], (tmp_path / "k",), tmp_path / "reports", tmp_path / "cache"
    )
    confinement = spec_confinement(options)
    assert confinement is not None
    assert (tmp_path / "cache").is_dir() and (tmp_path / "reports").is_dir()
    writes = "import sys; open(sys.argv[1], 'w').write('mine')"
    for place, allowed in (("scratch", True), ("cache", False), ("reports", False)):
        target = tmp_path / place / "file"
        argv = sandbox.confined(confinement, [sys.executable, "-c", writes, str(target)])
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert (ran.returncode == 0) is allowed, (place, ran.stderr)


@needs_landlock
def test_a_confined_process_reads_what_is_made_after_it(matrix, tmp_path):
    """A GPU worker confines itself before the compile: the builds made later, in folders new
    to the cache, are still its to read (seen failing on the H200 when reads were carved)."""
    kept = tmp_path / "cache"
    kept.mkdir()
    waits = (
        "import sys; print('confined', flush=True); sys.stdin.readline(); "
        "print(open(sys.argv[1]).read())"
    )
    made = kept / "chapter.kernel" / "sm_90a-key.fatbin"
    options = RunOptions(matrix.targets["sm_90a"], (tmp_path / "k",), tmp_path / "reports", kept)
    confinement = spec_confinement(options)
    assert confinement is not None
    argv = sandbox.confined(confinement, [sys.executable, "-c", waits, str(made)])
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdout.readline() == "confined\n"
        made.parent.mkdir()
        made.write_text("built after")
        out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    assert out.strip() == "built after"
