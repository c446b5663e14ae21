"""Shared fixtures: the real matrix, the planted-kernel tree, the compile cache, the book's list of
chapter kernels, and whether a GPU and a docker engine are here."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness import images
from harness.compile.toolchain import find_toolchain
from harness.model.matrix import load_matrix
from harness.run.device import DeviceInfo, DeviceMissing, probe
from harness.spec import DeviceLimits

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).resolve().parent / "fixtures" / "kernels"
FAULTS = Path(__file__).resolve().parent / "fixtures" / "faults"  # kernels that break the GPU
# A chapter kernel changed to do 5 % more work, under the chapter kernel's name: for verdicts.
SLOWDOWN = Path(__file__).resolve().parent / "fixtures" / "slowdown"
# A spec that, at import, tries to rewrite what the harness trusts (plant_forger)
HOSTILE = Path(__file__).resolve().parent / "fixtures" / "hostile"
CORPUS = yaml.safe_load((ROOT / "kernels" / "KERNELS.yaml").read_text())  # classname -> facts

# The container tests are skipped only where no engine answers; CI starts one (.ci/run).
ENGINE = images.engine_problem()
if ENGINE and os.environ.get("MATRIX_REQUIRE_DOCKER"):  # CI: an engine must be there
    raise RuntimeError(f"MATRIX_REQUIRE_DOCKER is set, but {ENGINE}")


def needs_docker(test):
    """A test that builds or runs a container image for real: `nox -s e2e` runs it, not `tests`,
    and without an engine it is skipped."""
    return pytest.mark.e2e(
        pytest.mark.skipif(ENGINE is not None, reason=f"no-docker: {ENGINE}")(test)
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives a real browser (the `browser` fixture) is e2e's, as docker's are."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def matrix():
    return load_matrix(ROOT / "matrix.yaml")


@pytest.fixture(scope="session")
def toolchain(matrix):
    """The nvcc of the project's sm_90a column (its first toolkit's)."""
    return find_toolchain(toolkit=matrix.targets["sm_90a"].toolkit)


@pytest.fixture(scope="session")
def gpu(matrix) -> DeviceInfo:
    try:
        return probe(matrix)
    except DeviceMissing as error:
        pytest.skip(f"no-device: {error}")


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> Path:
    """One compile cache for the whole suite, shared by pytest-xdist's workers: keyed by content
    and written whole or not at all, it serves every test that compiles what another test, in
    any worker, compiled already."""
    run_folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's folder lies in the run's
        run_folder = run_folder.parent
    cache = run_folder / "compile-cache"
    cache.mkdir(exist_ok=True)
    return cache


@contextlib.contextmanager
def whole_corpus(compile_cache: Path, target: str) -> Iterator[None]:
    """Held while a test compiles (and checks on the CPU) every chapter kernel for `target`:
    another xdist worker about to do the same waits, then finds each build and check in the
    shared caches, rather than doing them all again at the same time."""
    with open(compile_cache.parent / f"whole-corpus-{target}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture
def planted(tmp_path) -> Path:
    """A private copy of the planted kernels, so tests may edit them."""
    copy = tmp_path / "kernels"
    shutil.copytree(PLANTED, copy)
    return copy


def limits_for_cpu_tests() -> DeviceLimits:
    """H200-like limits for calling setup() where no GPU is: 2 blocks of any kernel per SM."""
    return DeviceLimits(
        cc=(9, 0),
        sm_count=132,
        smem_optin_bytes=227 * 1024,
        l2_bytes=60 * 1024 * 1024,
        max_blocks_per_sm=lambda entry, threads, shmem: 2,
    )


def plant_forger(kernels: Path, work: Path) -> Path:
    """HOSTILE's forging spec added to `kernels`, ordered to rewrite every file of `work`'s cache
    and reports and of the planted kernels beside it; returns the log its attempts go to (in a
    scratch folder, where a confined spec may write)."""
    shutil.copytree(HOSTILE / "hostile" / "forger", kernels / "hostile" / "forger")
    log = work / "scratch" / "log"
    log.parent.mkdir()
    orders = {
        "targets": [str(work / "cache"), str(work / "reports"), str(kernels / "planted")],
        "log": str(log),
    }
    (kernels / "hostile" / "forger" / "orders.json").write_text(json.dumps(orders))
    return log
