"""A GPU worker serves one kernel: bound by its first job, it refuses another's (no GPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.run.worker import OtherKernel, Prepare, _Worker


def _unbound() -> _Worker:
    """A worker before its first job, without the CUDA context its start would make."""
    worker = _Worker.__new__(_Worker)
    worker.kernels, worker.serves = {}, None
    return worker


def test_an_empty_prepare_binds_the_worker_to_no_kernel():
    worker = _unbound()
    assert worker.run(Prepare(())).result == 0
    assert worker.serves is None


def test_a_worker_bound_to_a_kernel_refuses_another_s_spec():
    worker = _unbound()
    ours, theirs = Path("ch/ours/spec.py"), Path("ch/theirs/spec.py")
    worker._bind(ours)
    worker._bind(ours)  # its own, again: served
    with pytest.raises(OtherKernel, match="this worker serves"):
        worker._bind(theirs)
    assert worker.serves == {ours}
