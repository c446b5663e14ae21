"""Host memory that a check's outputs are downloaded into, kept from case to case.

Where a download lands decides what it costs (an H200 machine, 256 MiB): 86 ms into fresh
pageable memory, which faults in every page first; 17.6 ms into pageable memory already touched;
4.9 ms into page-locked memory. Page-locked memory the driver allocates costs 90-157 ms per
256 MiB to get (it faults in, zeroes and locks every page, and maps it for the GPU), under the
GPU's shared hold, where another lane's timing waits it out: the first large case of every
kernel's worker paid it. Memory touched (35 ms per 256 MiB) and then locked by registering it
with the driver (10 ms) costs half of that or less.

Both are done under the hold, as the allocation was: what a check's downloads need, host work
that faults in hundreds of MB and a change to what the GPU maps, never runs beside a timing.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterable
from typing import Protocol

import numpy as np
from cuda.bindings import driver

from harness.run.checked import check

ALIGN = 256  # each array handed out starts on a 256-byte boundary, as a device allocation does


class PageLocker(Protocol):
    """What locks host memory for fast copies: the driver, or a machine that refuses (a
    container's limit on locked memory)."""

    def lock(self, address: int, size: int) -> None: ...

    def unlock(self, address: int) -> None: ...


class DriverPageLocker:
    """Locks by registering the memory with the CUDA driver (cuMemHostRegister)."""

    def lock(self, address: int, size: int) -> None:
        check(driver.cuMemHostRegister(address, size, 0))

    def unlock(self, address: int) -> None:
        check(driver.cuMemHostUnregister(address))


class _Block:
    """Page-aligned host memory, every page touched, and locked where the locker will."""

    def __init__(self, size: int, locker: PageLocker) -> None:
        page = mmap.PAGESIZE
        self.size = -(-size // page) * page
        self._memory = np.empty(self.size + page, np.uint8)
        skip = -self._memory.ctypes.data % page
        self._pages = self._memory[skip : skip + self.size]
        self._pages[::page] = 0  # every page faulted in now, not inside a download
        self.address = int(self._pages.ctypes.data)
        self._locker: PageLocker | None = None
        try:
            locker.lock(self.address, self.size)
            self._locker = locker
        except Exception:  # refused: downloads land here all the same, at pageable speed
            pass

    @property
    def locked(self) -> bool:
        return self._locker is not None

    def free(self) -> None:
        if self._locker is not None:
            self._locker.unlock(self.address)
            self._locker = None
        self._pages = self._memory = np.empty(0, np.uint8)


class HostStaging:
    """Memory that outputs are downloaded into: `reset` it for a check's downloads and take
    `array`s of it, both under the GPU's hold.

    The arrays handed out stay valid until the next `reset()`: each check of a case resets it
    before its downloads, so a check's arrays never outlive it. It grows to the largest check's
    downloads and stays that size. Where the machine will not lock that much memory, the
    downloads land in it unlocked: slower, never a failed cell.
    """

    def __init__(self, locker: PageLocker | None = None) -> None:
        self._locker = locker or DriverPageLocker()
        self._blocks: list[_Block] = []  # the last is the one handed out from; the others
        self._used = 0  # were, since the last reset, and may still be read
        self._taken = 0  # bytes handed out since the last reset, in all blocks

    @staticmethod
    def bytes_for(arrays: Iterable[np.ndarray]) -> int:
        """What downloads of arrays shaped as these take of it."""
        return sum(-(-int(array.nbytes) // ALIGN) * ALIGN for array in arrays)

    def reset(self, nbytes: int = 0) -> None:
        """Every array handed out so far is given up; the next start over in the largest block,
        made and locked now where it holds less than `nbytes` (bytes_for the check's
        downloads)."""
        last = self._blocks[-1] if self._blocks else None
        kept = last if last is not None and last.size >= nbytes else None
        for block in self._blocks:
            if block is not kept:
                block.free()
        self._blocks = [kept] if kept is not None else []
        self._used = self._taken = 0
        if kept is None and nbytes:
            self._grow(nbytes)

    def array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array of it, valid until the next reset()."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        size = -(-nbytes // ALIGN) * ALIGN
        if not self._blocks or self._used + size > self._blocks[-1].size:
            # more than reset() was told: big enough for everything handed out since, so that
            # the same check next time fits
            self._grow(self._taken + size)
        at = self._blocks[-1].address + self._used
        self._used += size
        self._taken += size
        memory = memoryview((ctypes.c_char * nbytes).from_address(at)).cast("B")
        return np.frombuffer(memory, dtype).reshape(shape)

    def _grow(self, nbytes: int) -> None:
        """A block of `nbytes` to hand out from; the arrays of the others stay valid."""
        self._blocks.append(_Block(nbytes, self._locker))
        self._used = 0

    @property
    def held_bytes(self) -> int:
        """The host memory it holds."""
        return sum(block.size for block in self._blocks)

    @property
    def locked_bytes(self) -> int:
        """The part of it that is page-locked."""
        return sum(block.size for block in self._blocks if block.locked)

    def close(self) -> None:
        for block in self._blocks:
            block.free()
        self._blocks.clear()
