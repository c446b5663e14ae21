"""Stencil, per-thread cuda::memcpy_async: the radius-8 stencil of stencil_sync, the tile and halos
copied in 8-byte pieces, each by one thread's memcpy_async, completing on a cuda::barrier (float32).

Teaches the chapter's version 1: memcpy_async bound to a block-scope cuda::barrier (init with one
expected arrival per thread; each copy adds a pending completion to the current phase;
arrive_and_wait() returns once every thread has arrived and every copy has landed), and
cuda::aligned_size_t<N>, the alignment promise that decides which instruction a copy becomes.
Pieces at the array ends that are not whole inside [0, n) are filled with plain stores before
the arrival.

Why aligned_size_t<8> and 8-byte pieces rather than 16-byte chunks: on sm_90+ libcu++ turns a
16-byte-aligned global->shared memcpy_async on a shared-memory block barrier into cp.async.bulk
(a 1-D TMA copy), whose operands must be warp-uniform, so a per-thread copy is issued one lane at
a time (an ELECT / UBLKCP loop in SASS): ~516 serialised 16-byte TMA copies per block, measured
on the H200 at 1.55 TB/s (32% of the roofline). An 8-byte promise is below the bulk copy's
minimum and keeps the sm_80 path on every target: each copy is one LDGSTS.64 (cp.async.ca) for
all 32 lanes at once, consecutive lanes on consecutive pieces. The collective form
(stencil_memcpy_async_block) is where the bulk copy pays off: one TMA copy per piece of the tile.

What it computes, the cases and the check: ../stencil.py, shared by the three stencils.
"""

from harness.spec import RequireSm

from ..stencil import stencil_spec

SPEC = stencil_spec("stencil_memcpy_async_thread", requires=RequireSm(8, 0))
