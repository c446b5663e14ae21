"""Stencil, collective cuda::memcpy_async: the radius-8 stencil of stencil_sync, tile and halos
copied by memcpy_async(block, ...) on a cooperative_groups::thread_block, completing on a
cuda::barrier.

Teaches the chapter's version 2: the collective form, called by every thread with the same
arguments (left halo, center and right halo as three calls) while the library splits the work, and
what it becomes per target: a strided loop of 16-byte cp.async (LDGSTS.128) on sm_80, a single
cp.async.bulk (1-D TMA) issued by one thread on sm_90+, either completing on the barrier. A
collective call takes one contiguous, 16-byte aligned range, so each piece is clipped to whole
chunks inside [0, n) and the first and last block fill the rest (padding, partial last chunk) with
plain stores.

What it computes, the cases and the check: ../stencil.py, shared by the three stencils. On the
H200 each block's tile arrives as three bulk copies (32 B + 8 KiB + 32 B).
"""

from harness.spec import RequireSm

from ..stencil import stencil_spec

SPEC = stencil_spec("stencil_memcpy_async_block", requires=RequireSm(8, 0))
