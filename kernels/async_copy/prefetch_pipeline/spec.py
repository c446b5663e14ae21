"""Prefetch with cuda::pipeline: each thread streams batches global -> shared through a num_stages-
deep thread-scope pipeline (num_stages = 2, 3, 4), out = 2 * in + 1 (int32).

Teaches the chapter's prefetching pattern: cuda::make_pipeline() (thread scope), a prologue that
acquires, copies and commits num_stages batches, then per batch
pipeline_consumer_wait_prior<num_stages - 1>() (block until only the num_stages - 1 newest batches
are still in flight), compute, consumer_release(), and a refill of the freed stage with the batch
num_stages ahead, committing even when nothing is left to fetch so the group count stays balanced.
memcpy_async with aligned_size_t<16> makes each copy one 16-byte LDGSTS with L1 bypass (int4 per
thread per batch). Each thread only reads the stage it filled itself, so the chapter's
__syncthreads() (needed when threads share staged data) is left out.

What it computes, the cases and the check: ../prefetch.py, shared by the two prefetch kernels.
"""

from ..prefetch import prefetch_spec

SPEC = prefetch_spec("prefetch_pipeline")
