"""Where outputs are downloaded to: memory touched and locked when a check resets it for its
downloads, or left pageable where the machine will not lock it (tests/test_on_gpu.py checks the
driver's locking on a GPU)."""

from __future__ import annotations

import mmap

import numpy as np

from harness.run.staging import ALIGN, HostStaging


class _Refusing:
    """A machine that refuses to lock memory, as a container's limit would."""

    def __init__(self) -> None:
        self.asked = 0

    def lock(self, address: int, size: int) -> None:
        self.asked += 1
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory")

    def unlock(self, address: int) -> None:
        raise AssertionError("nothing was locked")


class _Recording:
    """A locker that says what it was asked, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def lock(self, address: int, size: int) -> None:
        assert address % mmap.PAGESIZE == 0 and size % mmap.PAGESIZE == 0  # whole pages
        self.calls.append(("lock", size))

    def unlock(self, address: int) -> None:
        self.calls.append(("unlock", address))


def test_where_memory_cannot_be_locked_downloads_land_in_it_unlocked():
    refused = _Refusing()
    staging = HostStaging(refused)
    first = staging.array((1000, 3), np.dtype(np.float32))
    second = staging.array((7,), np.dtype(np.int64))
    first[:] = 1.5
    second[:] = 7
    assert first.shape == (1000, 3) and first.dtype == np.float32 and (first == 1.5).all()
    assert (second == 7).all() and not np.shares_memory(first, second)
    assert refused.asked == 1  # asked once for the block, not for every array
    assert staging.held_bytes > 0 and staging.locked_bytes == 0
    staging.reset()
    staging.close()
    assert staging.held_bytes == 0


def test_a_check_s_memory_is_made_and_locked_once_as_it_resets_and_kept_across_checks():
    locker = _Recording()
    staging = HostStaging(locker)
    outputs = [np.empty((1000, 3), np.float32), np.empty((5,), np.float64)]
    wanted = HostStaging.bytes_for(outputs)
    assert wanted == 12032 + ALIGN  # each array on its own 256-byte boundary
    staging.reset(wanted)
    assert staging.held_bytes >= wanted and [call for call, _ in locker.calls] == ["lock"]
    assert staging.locked_bytes == staging.held_bytes
    landed = [staging.array(a.shape, a.dtype) for a in outputs]
    assert len(locker.calls) == 1  # handed out of the block made for them
    assert all(a.ctypes.data % ALIGN == 0 for a in landed)
    landed[0][:] = 2.0
    landed[1][:] = 3.0
    assert (landed[0] == 2.0).all() and (landed[1] == 3.0).all()
    # the next check of the same size: nothing made, nothing locked again
    held = staging.held_bytes
    staging.reset(wanted)
    for a in outputs:
        staging.array(a.shape, a.dtype)
    assert staging.held_bytes == held and len(locker.calls) == 1


def test_a_larger_check_gets_a_larger_block_and_the_smaller_is_unlocked():
    locker = _Recording()
    staging = HostStaging(locker)
    staging.reset(4096)
    small = staging.array((1024,), np.dtype(np.float32))
    small[:] = 1.0
    staging.reset(1 << 20)
    assert [call for call, _ in locker.calls] == ["lock", "unlock", "lock"]
    big = staging.array((1 << 18,), np.dtype(np.float32))
    assert big.nbytes == 1 << 20 and staging.held_bytes == 1 << 20
    staging.reset(4096)  # a smaller check keeps the larger block
    assert staging.held_bytes == 1 << 20 and len(locker.calls) == 3


def test_downloads_beyond_what_reset_was_told_grow_it_to_fit_the_whole_check_next_time():
    staging = HostStaging(_Recording())
    staging.array((1000,), np.dtype(np.float32))
    staging.array((100_000,), np.dtype(np.float32))  # beyond the first block
    staging.reset()
    held = staging.held_bytes
    assert held >= HostStaging.bytes_for(
        [np.empty(1000, np.float32), np.empty(100_000, np.float32)]
    )
    staging.array((1000,), np.dtype(np.float32))
    staging.array((100_000,), np.dtype(np.float32))
    assert staging.held_bytes == held  # fits the block kept


def test_empty_downloads_take_no_memory():
    staging = HostStaging(_Recording())
    empty = staging.array((0, 4), np.dtype(np.int8))
    assert empty.shape == (0, 4) and staging.held_bytes == 0
    staging.reset(HostStaging.bytes_for([empty]))
    assert staging.held_bytes == 0
