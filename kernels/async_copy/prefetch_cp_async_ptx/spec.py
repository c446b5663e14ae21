"""Prefetch with raw PTX cp.async: prefetch_pipeline's num_stages-deep prefetch loop (num_stages =
2, 3, 4) written with inline-asm cp.async.cg, commit_group and wait_group; out = 2 * in + 1
(int32).

Teaches what cuda::pipeline compiles to, from the chapter's table: cp.async.cg.shared.global [dst],
[src], 16 (a 16-byte global -> shared copy that bypasses L1; .cg only exists for 16 bytes, hence
one int4 per thread per batch and 16-byte alignment), cp.async.commit_group (producer_commit), and
cp.async.wait_group N with N an immediate (pipeline_consumer_wait_prior<N>). It also shows the
details the library hides: shared-window and global addresses for the operands, "memory" clobbers
so the compiler keeps the shared-memory read between the wait and the next copy, and empty groups
committed at the tail so group i is always batch i.

What it computes, the cases and the check: ../prefetch.py, shared by the two prefetch kernels.
"""

from ..prefetch import prefetch_spec

SPEC = prefetch_spec("prefetch_cp_async_ptx")
