"""Digests of device buffers, computed on the device: whether a kernel left a buffer as it found
it (an input after the run; an output between two runs) without copying hundreds of MB to the
host to find out.

Each 32-bit word is mixed with its position (splitmix64's finalizer over position << 32 ^ word)
and the mixed words are summed modulo 2^64. A sum, so the order in which threads add does not
matter and a buffer has one digest; mixed, so that a change leaves the sum as it was only by
chance (about 2^-64), a swap of two words included. Bytes past the last whole word are mixed one
by one, at the positions that follow the words; so is all of a buffer that does not start on a
word boundary (the guard zone after a buffer of an odd size). PTX, so the driver builds it for
whatever GPU this is, with no compiler at hand.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import numpy as np
from cuda.bindings import driver
from cuda.core import Buffer, Device, LaunchConfig, ObjectCode, Stream, launch

from harness.run.checked import check

THREADS = 256
BLOCKS_PER_SM = 4  # enough loads in flight to stream a buffer at a good part of DRAM speed

# digest(data, count, width, first, out): out += sum over i < count of mix(first + i, data[i]),
# data[i] being a word (width 4) or a byte (width 1).
_DIGEST_PTX = """
.version 7.0
.target sm_70
.address_size 64
.visible .entry digest(
    .param .u64 data, .param .u64 count, .param .u32 width, .param .u64 first, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [count];
    ld.param.u32 %r1, [width];
    ld.param.u64 %rd11, [first];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r4;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r5, %r3;
    mov.u64 %rd7, 0;
    setp.eq.u32 %p2, %r1, 4;
LOOP:
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DONE;
    @%p2 bra WORD;
    add.u64 %rd8, %rd1, %rd4;
    ld.global.u8 %r6, [%rd8];
    bra MIX;
WORD:
    shl.b64 %rd8, %rd4, 2;
    add.u64 %rd8, %rd1, %rd8;
    ld.global.u32 %r6, [%rd8];
MIX:
    cvt.u64.u32 %rd9, %r6;
    add.u64 %rd12, %rd11, %rd4;
    shl.b64 %rd10, %rd12, 32;
    xor.b64 %rd9, %rd9, %rd10;
    add.u64 %rd9, %rd9, 0x9E3779B97F4A7C15;
    shr.u64 %rd10, %rd9, 30;
    xor.b64 %rd9, %rd9, %rd10;
    mul.lo.u64 %rd9, %rd9, 0xBF58476D1CE4E5B9;
    shr.u64 %rd10, %rd9, 27;
    xor.b64 %rd9, %rd9, %rd10;
    mul.lo.u64 %rd9, %rd9, 0x94D049BB133111EB;
    shr.u64 %rd10, %rd9, 31;
    xor.b64 %rd9, %rd9, %rd10;
    add.u64 %rd7, %rd7, %rd9;
    add.u64 %rd4, %rd4, %rd6;
    bra LOOP;
DONE:
    atom.global.add.u64 %rd13, [%rd3], %rd7;
    ret;
}
"""


class Digests:
    """Digests of a few device buffers at a time, into slots of a small device array."""

    def __init__(self, device: Device, stream: Stream, sm_count: int):
        # bytes: a str would name a file
        self._kernel = ObjectCode.from_ptx(_DIGEST_PTX.encode()).get_kernel("digest")
        self._device, self._stream = device, stream
        self._most_blocks = max(BLOCKS_PER_SM * sm_count, 1)
        self._slots: Buffer | None = None
        # With lazy loading a kernel's first launch waits for the context's streams: load it now,
        # while nothing else runs.
        warm = device.allocate(8, stream=stream)
        warm.fill(0, stream=stream)
        self.of({"warm": (warm, 8)})
        warm.close(stream)

    def _allocate(self, count: int) -> Buffer:
        if self._slots is None or self._slots.size < 8 * count:
            self._slots = self._device.allocate(8 * max(count, 8), stream=self._stream)
        return self._slots

    def of(self, buffers: Mapping[str, tuple[Buffer, int]]) -> dict[str, int]:
        """{name: digest} of each (buffer, its first `nbytes` bytes), enqueued on the stream and
        waited for."""
        slots = self._allocate(len(buffers))
        slots.fill(0, stream=self._stream)
        for index, (buffer, nbytes) in enumerate(buffers.values()):
            out = ctypes.c_uint64(int(slots.handle) + 8 * index)
            start = int(buffer.handle)
            # Words where the start is word-aligned (every allocation); byte by byte where it is
            # not (the guard zone after a buffer of an odd size), which a word load would fault on.
            words, tail = divmod(nbytes, 4) if start % 4 == 0 else (0, nbytes)
            if words:
                self._launch(start, words, 4, 0, out)
            if tail:
                self._launch(start + 4 * words, tail, 1, words, out)
        found = np.zeros(len(buffers), np.uint64)
        if buffers:
            check(
                driver.cuMemcpyDtoHAsync(
                    found.ctypes.data, int(slots.handle), found.nbytes, self._stream.handle
                )
            )
        self._stream.sync()
        return {name: int(value) for name, value in zip(buffers, found, strict=True)}

    def _launch(self, start: int, count: int, width: int, first: int, out: Buffer) -> None:
        blocks = min(-(-count // THREADS), self._most_blocks)
        config = LaunchConfig(grid=blocks, block=THREADS)
        launch(
            self._stream,
            config,
            self._kernel,
            ctypes.c_uint64(start),
            ctypes.c_uint64(count),
            ctypes.c_uint32(width),
            ctypes.c_uint64(first),
            out,
        )
