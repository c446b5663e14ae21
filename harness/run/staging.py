"""Host memory that a check's outputs are downloaded into, kept from case to case.

Where a download lands decides what it costs (an H200 machine, 256 MiB): 86 ms into fresh
pageable memory, which faults in every page first; 17.6 ms into pageable memory already touched;
4.9 ms into page-locked memory. Page-locked memory the driver allocates costs 90-157 ms per
256 MiB to get (it faults in, zeroes and locks every page, and maps it for the GPU), and a check
got it under the GPU's shared hold, where another lane's timing waited it out: the first large
case of every kernel's worker paid it. Memory touched first (35 ms per 256 MiB, host work, no
GPU) and then locked by registering it with the driver costs 10 ms under the hold.

So a check asks for its downloads' memory before it takes the hold (`reserve`, host work only),
and the memory is locked under the hold when the first array is handed out of it. Locking maps
it for the GPU, as every other change to what the GPU sees (allocations, module loads) is made
only where no timing can run.
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
    """Page-aligned host memory, every page touched, locked once `lock_with` has been asked."""

    def __init__(self, size: int) -> None:
        page = mmap.PAGESIZE
        self.size = -(-size // page) * page
        self._memory = np.empty(self.size + page, np.uint8)
        skip = -self._memory.ctypes.data % page
        self._pages = self._memory[skip : skip + self.size]
        self._pages[::page] = 0  # every page faulted in now, not inside a download
        self.address = int(self._pages.ctypes.data)
        self.locked: bool | None = None  # None: not yet asked; False: refused
        self._locker: PageLocker | None = None

    def lock_with(self, locker: PageLocker) -> None:
        if self.locked is None:
            try:
                locker.lock(self.address, self.size)
                self.locked, self._locker = True, locker
            except Exception:  # refused: downloads land here all the same, at pageable speed
                self.locked = False

    def free(self) -> None:
        if self._locker is not None:
            self._locker.unlock(self.address)
            self._locker = None
        self._pages = self._memory = np.empty(0, np.uint8)


class HostStaging:
    """Memory that outputs are downloaded into: `reserve` it for a check's downloads before the
    GPU's hold, `reset` and take `array`s of it under the hold.

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

    def reserve(self, nbytes: int) -> None:
        """Before a check takes the GPU's hold: memory for `nbytes` of downloads (bytes_for)
        made and touched now, host work only, so that the hold pays only for locking it. The
        arrays handed out before stay valid until the next reset(), which keeps only this."""
        if nbytes and (not self._blocks or self._blocks[-1].size < nbytes):
            self._blocks.append(_Block(nbytes))
            self._used = 0

    def array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array of it, valid until the next reset(). Under the GPU's hold:
        the memory is locked the first time an array is handed out of it."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        size = -(-nbytes // ALIGN) * ALIGN
        if not self._blocks or self._used + size > self._blocks[-1].size:
            # unreserved: big enough for everything handed out since the reset, so that the
            # same check next time fits
            self._blocks.append(_Block(self._taken + size))
            self._used = 0
        block = self._blocks[-1]
        block.lock_with(self._locker)
        at = block.address + self._used
        self._used += size
        self._taken += size
        memory = memoryview((ctypes.c_char * nbytes).from_address(at)).cast("B")
        return np.frombuffer(memory, dtype).reshape(shape)

    @property
    def held_bytes(self) -> int:
        """The host memory it holds."""
        return sum(block.size for block in self._blocks)

    @property
    def locked_bytes(self) -> int:
        """The part of it that is page-locked."""
        return sum(block.size for block in self._blocks if block.locked)

    def reset(self) -> None:
        """Every array handed out so far is given up; the next start over in the largest block.
        Under the GPU's hold: unlocking the others changes what the GPU maps."""
        for old in self._blocks[:-1]:
            old.free()
        del self._blocks[:-1]
        self._used = self._taken = 0

    def close(self) -> None:
        for block in self._blocks:
            block.free()
        self._blocks.clear()
