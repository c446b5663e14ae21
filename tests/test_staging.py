"""Where outputs are downloaded to: page-locked memory when the machine gives it, pageable
memory when it will not (tests/test_on_gpu.py checks the page-locked side on a GPU)."""

from __future__ import annotations

import numpy as np

from harness.run.launch import HostStaging


class _NoLockedMemory:
    """A machine that refuses page-locked memory, as a container's limit would."""

    def __init__(self) -> None:
        self.asked = 0

    def allocate(self, size: int):
        self.asked += 1
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")


def test_without_page_locked_memory_downloads_land_in_pageable_memory():
    refused = _NoLockedMemory()
    staging = HostStaging(refused)
    first = staging.array((1000, 3), np.dtype(np.float32))
    second = staging.array((7,), np.dtype(np.int64))
    first[:] = 1.5
    second[:] = 7
    assert first.shape == (1000, 3) and first.dtype == np.float32 and (first == 1.5).all()
    assert (second == 7).all() and not np.shares_memory(first, second)
    assert refused.asked == 2 and staging.held_bytes == 0  # asked each time, holds nothing
    staging.reset()
    staging.close()
