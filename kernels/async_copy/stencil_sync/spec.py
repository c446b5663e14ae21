"""Stencil, synchronous staging: a radius-8 1-D stencil, tile and halos loaded into shared memory
with plain loads (float32).

Teaches the baseline that the async-copy chapter improves on: staging a tile plus its halos in
shared memory with ordinary loads (global -> register -> shared) and __syncthreads(), and why
branchy halo loads hurt: the compiler may emit load, wait, store per branch instead of putting
every load in flight first. Compare with stencil_memcpy_async_thread and
stencil_memcpy_async_block, which copy the same layout asynchronously.

What it computes, the cases and the check: ../stencil.py, shared by the three stencils.

Memory bound, like the other two. This is the chapter's synchronous contrast case. With 16-byte
loads and up to eight resident blocks per SM it may still come close to the DRAM roofline on the
large case; the async versions mainly save registers and load latency.
"""

from ..stencil import stencil_spec

SPEC = stencil_spec("stencil_sync")
