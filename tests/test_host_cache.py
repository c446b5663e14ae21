"""The host cache: a case's problem and reference made once, served again while every file its
host work read is as it was and the GPU answers its questions alike; offered by a worker in a
folder of its own, moved and signed by the run's process, so that no spec can forge another
kernel's entries."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from harness import sandbox
from harness.model.discovery import kernel_folders, load_kernel
from harness.model.spec import Buf, Launch, Problem, Scalar
from harness.run import host_cache
from harness.run.case import seed_of
from harness.run.host_cache import HostCache, Keeping, Kept, LiveDevice, Offer, adopt
from harness.run.stand_in import FactLog
from tests.conftest import ROOT

KERNEL = "chapter.kernel"
LIMITS = {"cc": [9, 0], "sm_count": 132, "smem_optin_bytes": 232448, "l2_bytes": 1 << 25}


def _device(sm_count=132, blocks=4):
    return LiveDevice({**LIMITS, "sm_count": sm_count, "memory_bytes": 1 << 37}, lambda *_: blocks)


@pytest.fixture
def places(tmp_path):
    cache, offers = tmp_path / "cache", tmp_path / "offers"
    offers.mkdir()
    data = tmp_path / "spec_data.txt"
    data.write_text("3.0\n")
    return cache, offers, data


def _worker(places):
    cache, offers, _ = places
    worker = HostCache(cache, offers, None)
    worker.start()
    return worker


def _host_work(worker, data, device, also=lambda: None, made_s=(0.5, 0.25), case="n"):
    """As a worker makes a case's host work: setup() reads a data file beside its spec and the
    device's SM count and occupancy; reference() scales the input. `made_s`: the seconds
    setup() and reference() are said to have taken."""
    log = FactLog(device)
    with worker.recording() as read:
        scale = np.float32(data.read_text())
        limits = log.limits(())
        n = limits.sm_count * limits.max_blocks_per_sm("scale", 256, 0) * 256
        x = np.random.default_rng(7).standard_normal(n, dtype=np.float32)
        also()
        problem = Problem(
            inputs={"x": x},
            outputs={"y": np.empty((n // 4, 4), np.float32, order="F")},
            launches=(Launch("scale", (n // 256, 1, 1), (256, 1, 1), (Buf("x"), Scalar(scale))),),
        )
        expected = {"y": x * scale}
    key = worker.key(Path("/kernels/chapter/kernel"), case, 7)
    worker.offer(key, Kept(problem, expected, *made_s), read[0], log.noted())
    return key, problem, expected


def _kept(places, offered, max_bytes=1 << 40):
    cache, offers, _ = places
    with Keeping(cache, max_bytes) as keeping:
        keeping.take(KERNEL, offers, offered)


def test_host_work_made_once_is_served_as_made_until_a_file_it_read_changes(places):
    _, offers, data = places
    worker = _worker(places)
    key, problem, expected = _host_work(worker, data, _device())
    said = worker.offers()
    assert [Offer.from_json(each).key for each in said] == [key]
    _kept(places, said)
    assert list(offers.iterdir()) == []  # what was offered is gone once kept
    served = _worker(places).served(KERNEL, key, _device())
    assert served is not None
    assert served.problem.launches == problem.launches
    [(name, output)] = served.problem.outputs.items()  # only its shape and type were kept
    assert (name, output.shape, output.dtype) == ("y", (33792, 4), np.float32)
    assert output.flags.f_contiguous
    assert np.array_equal(served.problem.inputs["x"], problem.inputs["x"])
    assert np.array_equal(served.expected["y"], expected["y"])
    assert (served.setup_s, served.reference_s) == (0.5, 0.25)
    served.problem.inputs["x"][:] = 0  # copy on write: the entry stays as made
    again = _worker(places).served(KERNEL, key, _device())
    assert again is not None and np.array_equal(again.problem.inputs["x"], problem.inputs["x"])
    data.write_text("4.0\n")
    assert _worker(places).served(KERNEL, key, _device()) is None


def test_a_device_that_answers_otherwise_is_a_miss(places):
    _, _, data = places
    worker = _worker(places)
    key, _, _ = _host_work(worker, data, _device())
    _kept(places, worker.offers())
    assert _worker(places).served(KERNEL, key, _device()) is not None
    assert _worker(places).served(KERNEL, key, _device(sm_count=114)) is None
    assert _worker(places).served(KERNEL, key, _device(blocks=3)) is None


@pytest.mark.parametrize(
    "fresh",
    [
        lambda: os.urandom(4),
        lambda: np.random.default_rng().random(),
        lambda: tempfile.TemporaryFile().close(),  # writes
    ],
    ids=["urandom", "unseeded-generator", "writes-a-file"],
)
def test_host_work_that_draws_entropy_or_writes_is_never_offered(places, fresh):
    _, _, data = places
    worker = _worker(places)
    _host_work(worker, data, _device(), also=fresh)
    assert worker.offers() == []


def test_each_recording_hears_its_own_thread_and_the_threads_nobody_owns(tmp_path):
    worker = HostCache(tmp_path, tmp_path, None)
    worker.start()
    files = {name: tmp_path / name for name in ("a", "b", "stray", "harness")}
    for path in files.values():
        path.write_text(path.name)
    both_open, heard = threading.Barrier(3), {}

    def record(name):
        with worker.recording() as read:
            files[name].read_text()
            both_open.wait()  # the other recording is open too
            both_open.wait()  # the stray and the harness's threads have read
        heard[name] = set(read[0].reads().files)

    def quietly():
        worker.recorder.quiet()
        files["harness"].read_text()

    threads = [threading.Thread(target=record, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    both_open.wait()
    for target in (lambda: files["stray"].read_text(), quietly):
        other = threading.Thread(target=target)
        other.start()
        other.join()
    both_open.wait()
    for thread in threads:
        thread.join()
    for name, other in (("a", "b"), ("b", "a")):
        assert str(files[name]) in heard[name]
        assert str(files["stray"]) in heard[name]  # a thread the recorded code may have started
        assert str(files[other]) not in heard[name]
        assert str(files["harness"]) not in heard[name]


def test_what_the_spec_read_on_import_is_read_by_every_case(places):
    _, _, data = places
    module_data = data.with_name("module_data.txt")
    module_data.write_text("x")
    worker = _worker(places)
    with worker.recording() as read:
        module_data.read_text()
    worker.imported(read[0])
    key, _, _ = _host_work(worker, data, _device())
    _kept(places, worker.offers())
    assert _worker(places).served(KERNEL, key, _device()) is not None
    module_data.write_text("y")
    assert _worker(places).served(KERNEL, key, _device()) is None


@pytest.mark.parametrize("how", ["resized", "linked", "a-link"])
def test_an_offer_whose_file_is_not_as_said_is_not_kept(places, how):
    cache, offers, data = places
    worker = _worker(places)
    key, _, _ = _host_work(worker, data, _device())
    [said] = worker.offers()
    offered = offers / said["file"]
    if how == "resized":
        with open(offered, "ab") as grown:
            grown.write(b"\0")
    elif how == "linked":  # a second name: whoever holds it could change the kept entry
        os.link(offered, offers.parent / "second-name")
    else:
        offered.rename(offers.parent / "elsewhere.bin")
        offered.symlink_to(offers.parent / "elsewhere.bin")
    assert adopt(cache, offers, KERNEL, Offer.from_json(said)) is None
    assert not offered.exists() and not offered.is_symlink()
    assert _worker(places).served(KERNEL, key, _device()) is None
    assert list((cache / host_cache.FOLDER / KERNEL).glob("*.bin")) == []


def test_each_worker_offers_in_a_folder_of_its_own_removed_as_the_run_ends(tmp_path):
    offers = tmp_path / "cache" / host_cache.OFFERS
    killed, live = offers / "tmp-killed", offers / "tmp-live"  # a killed run's, another run's
    for folder in (killed, live):
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "offer.bin").write_bytes(b"x")
    long_ago = time.time() - host_cache.STALE_OFFERS_S - 60
    os.utime(killed, (long_ago, long_ago))
    with Keeping(tmp_path / "cache", 1 << 30) as keeping:
        first, second = keeping.folder(), keeping.folder()
        assert first != second and first.parent == second.parent
        assert first.is_dir() and second.is_dir()
        assert first.is_relative_to(tmp_path / "cache" / host_cache.OFFERS)
    assert not first.exists() and not first.parent.exists()
    assert not killed.exists() and (live / "1" / "offer.bin").exists()


@pytest.mark.parametrize("name", ["../outside.bin", "/etc/passwd", ".hidden.bin", "a/b.bin"])
def test_an_offer_of_a_file_outside_its_folder_is_refused(places, name):
    cache, offers, _ = places
    outside = offers.parent / "outside.bin"
    outside.write_bytes(b"x" * 64)
    said = {"key": "0" * 40, "file": name, "size": 64, "record": {}}
    with pytest.raises(ValueError):
        Offer.from_json(said)
    _kept(places, [said])
    assert outside.exists()
    assert not (cache / host_cache.FOLDER).exists()


def test_an_entry_moved_to_another_kernel_or_changed_is_a_miss(places):
    cache, _, data = places
    worker = _worker(places)
    key, _, _ = _host_work(worker, data, _device())
    _kept(places, worker.offers())
    folder = cache / host_cache.FOLDER / KERNEL
    other = cache / host_cache.FOLDER / "chapter.other"
    shutil.copytree(folder, other)
    assert _worker(places).served("chapter.other", key, _device()) is None
    [record] = folder.glob("*.json")
    kept = json.loads(record.read_text())
    record.write_text(json.dumps({**kept, "setup_s": 0.0}))
    assert _worker(places).served(KERNEL, key, _device()) is None
    record.write_text(json.dumps(kept))
    assert _worker(places).served(KERNEL, key, _device()) is not None
    [bin_file] = folder.glob("*.bin")
    with open(bin_file, "ab") as grown:
        grown.write(b"\0")
    assert _worker(places).served(KERNEL, key, _device()) is None


def test_a_case_keeps_its_newest_entries_and_only_the_data_they_name(places):
    cache, _, data = places
    key = None
    for sm_count in range(100, 100 + host_cache.MOST_FACT_SETS + 2):
        worker = _worker(places)
        key, _, _ = _host_work(worker, data, _device(sm_count=sm_count))
        _kept(places, worker.offers())
    folder = cache / host_cache.FOLDER / KERNEL
    records = list(folder.glob(f"{key}-*.json"))
    assert len(records) == host_cache.MOST_FACT_SETS
    named = {json.loads(r.read_text())["data"] for r in records}
    assert {p.name for p in folder.glob("*.bin")} == named
    newest = 100 + host_cache.MOST_FACT_SETS + 1
    assert _worker(places).served(KERNEL, key, _device(sm_count=newest)) is not None
    assert _worker(places).served(KERNEL, key, _device(sm_count=100)) is None


@pytest.mark.parametrize(
    ("made_s", "min_s_per_gib", "offered"),
    [
        ((0.05, 0.04), 0.0, False),  # made faster than an entry is looked up
        ((0.5, 0.25), 0.0, True),
        ((0.5, 0.25), 1000.0, False),  # ~1 MiB made in 0.75 s: 750 s a GiB
        ((0.5, 0.25), 500.0, True),
    ],
)
def test_only_host_work_worth_keeping_is_offered(places, made_s, min_s_per_gib, offered):
    cache, offers, data = places
    worker = HostCache(cache, offers, None, min_s_per_gib)
    worker.start()
    _host_work(worker, data, _device(), made_s=made_s)
    assert bool(worker.offers()) is offered


def test_a_full_cache_keeps_what_saves_the_most_host_time_for_its_size(places):
    cache, _, data = places
    worth = {"slow": (4.0, 4.0), "slower": (9.0, 9.0), "quick": (0.2, 0.2)}
    keys, sizes = {}, {}
    for case, made_s in worth.items():
        worker = _worker(places)
        keys[case], _, _ = _host_work(worker, data, _device(), made_s=made_s, case=case)
        said = worker.offers()
        sizes[case] = said[0]["size"]
        _kept(places, said, max_bytes=2 * sizes[case] + 100)
    # slow and slower fit, then quick found no entry worth less
    assert _worker(places).served(KERNEL, keys["quick"], _device()) is None
    assert _worker(places).served(KERNEL, keys["slow"], _device()) is not None
    worker = _worker(places)
    keys["slowest"], _, _ = _host_work(worker, data, _device(), made_s=(20.0, 20.0), case="slowest")
    _kept(places, worker.offers(), max_bytes=2 * sizes["slow"] + 100)
    assert _worker(places).served(KERNEL, keys["slow"], _device()) is None  # worth the least
    for case in ("slower", "slowest"):
        assert _worker(places).served(KERNEL, keys[case], _device()) is not None
    assert len(list((cache / host_cache.FOLDER / KERNEL).glob("*.bin"))) == 2


def test_each_gpu_worker_may_write_its_own_offer_folder_and_no_other(tmp_path):
    from harness.pipeline.running import _offering
    from harness.run.worker import WorkerSetup

    confined = sandbox.for_specs([tmp_path / "cache"])
    setup = WorkerSetup(None, None, confinement=confined, host_cache=tmp_path / "cache")  # type: ignore[arg-type]
    with Keeping(tmp_path / "cache", 1 << 30) as keeping:
        one, other = _offering(setup, keeping), _offering(setup, keeping)
        assert one.offers is not None and other.offers is not None and one.offers != other.offers
        assert one.confinement is not None and one.confinement.own == (one.offers,)
        assert one.confinement.read_only == confined.read_only
        unkept = dataclasses.replace(setup, host_cache=None)
        assert _offering(unkept, keeping) == unkept


def _corpus():
    return [
        folder for root in ("kernels", "examples/kernels") for folder in kernel_folders(ROOT / root)
    ]


@pytest.mark.corpus
@pytest.mark.parametrize("folder", _corpus(), ids=lambda folder: folder.classname)
def test_each_kernel_s_smallest_case_comes_back_from_the_cache_as_it_was_made(tmp_path, folder):
    """Whatever a spec puts in its problem (structs, textures, constants, scratch, derived
    parameters, library kernels' as the book's) is served as setup() and reference() made it."""
    kernel = load_kernel(folder)

    def size(case):
        try:
            return kernel.spec.work(case).bytes
        except Exception:  # a size derived by setup(): after the sized ones
            return 1 << 62

    case = min(kernel.spec.cases, key=size)
    device, cache = _device(), tmp_path / "cache"
    with Keeping(cache, 1 << 40) as keeping:
        offers = keeping.folder()
        worker = HostCache(cache, offers, None)
        worker.start()
        log = FactLog(device)
        with worker.recording() as heard:
            rng = np.random.default_rng(seed_of(kernel, case))
            problem = kernel.spec.setup(case, rng, log.limits(()))
            expected = kernel.spec.reference(problem.case_seen_by(case), problem.inputs)
        key = worker.key(kernel.folder, case.name, seed_of(kernel, case))
        worker.offer(key, Kept(problem, expected, 1.0, 1.0), heard[0], log.noted())
        said = worker.offers()
        assert said, "the host work was not offered"
        keeping.take(kernel.classname, offers, said)
    served = _worker((cache, tmp_path, None)).served(kernel.classname, key, device)
    assert served is not None
    got = served.problem
    assert (got.launches, got.derived_params, got.accumulated) == (
        problem.launches,
        problem.derived_params,
        problem.accumulated,
    )
    for kept, made in (
        (got.inputs, problem.inputs),
        (got.scratch, problem.scratch),
        (got.constants, problem.constants),
        (served.expected, expected),
    ):
        assert kept.keys() == made.keys()
        for name, array in made.items():
            assert kept[name].dtype == array.dtype
            assert np.array_equal(kept[name], array, equal_nan=array.dtype.kind in "fc")
    shapes = {name: (array.shape, array.dtype) for name, array in problem.outputs.items()}
    assert {name: (a.shape, a.dtype) for name, a in got.outputs.items()} == shapes


def test_a_problem_that_does_not_pickle_is_never_offered_and_a_broken_entry_is_a_miss(places):
    cache, _, data = places
    worker = _worker(places)
    key, problem, expected = _host_work(worker, data, _device())
    _kept(places, worker.offers())
    [kept] = (cache / host_cache.FOLDER / KERNEL).glob("*.bin")
    kept.write_bytes(b"\0" * kept.stat().st_size)  # the same size, not a pickle
    assert _worker(places).served(KERNEL, key, _device()) is None
    odd = dataclasses.replace(problem, derived_params={"pick": lambda x: x})  # a spec's lambda
    heard = _worker(places)
    with heard.recording() as read:
        pass
    heard.offer(key, Kept(odd, expected, 1.0, 1.0), read[0], [])
    assert heard.offers() == []
