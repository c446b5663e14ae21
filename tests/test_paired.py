"""What decides that base and head make one problem, so both builds run over the same buffers
and swap them (without a GPU; the timing is tests/test_on_gpu.py's)."""

from __future__ import annotations

import numpy as np

from harness.run.paired import _same_problem
from harness.spec import Buf, Launch, Problem, Scalar


def _problem(x: np.ndarray, scratch: np.ndarray, n: int = 4) -> Problem:
    launch = Launch("k", (1, 1, 1), (32, 1, 1), (Buf("x"), Buf("s"), Scalar(np.int32(n))))
    return Problem({"x": x}, {"y": np.empty(4, np.float32)}, (launch,), {"s": scratch})


def test_the_same_inputs_and_a_scratch_of_nan_are_one_problem():
    x = np.arange(4, dtype=np.float32)
    nan = np.full(3, np.nan, np.float32)  # NaN != NaN, but the bits are the same
    assert _same_problem(_problem(x, nan), _problem(x.copy(), nan.copy()))


def test_other_data_launches_or_buffers_are_another_problem():
    x, scratch = np.arange(4, dtype=np.float32), np.zeros(3, np.float32)
    base = _problem(x, scratch)
    assert not _same_problem(base, _problem(x + 1, scratch))
    assert not _same_problem(base, _problem(x, scratch, n=5))
    assert not _same_problem(base, _problem(x.astype(np.float64), scratch))
    assert not _same_problem(base, _problem(x, np.zeros(4, np.float32)))
    negative_zero = np.array([-0.0, 0.0, 0.0], np.float32)  # equal as numbers, not as bits
    assert not _same_problem(base, _problem(x, negative_zero))
