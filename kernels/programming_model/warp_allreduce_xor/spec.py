"""Warp all-reduce: butterfly `__shfl_xor_sync`, every lane ends with its warp's sum (float32).

Teaches the xor-shuffle butterfly (offsets 16, 8, 4, 2, 1): after five register exchanges all
32 lanes hold the warp's total, not just lane 0. The kernel writes every lane's value,
out[i] = sum(x[32w : min(32w + 32, n)]) for w = i // 32, so the check proves that all lanes
hold the sum. Partial last warp: lanes past n contribute 0 and still take part in the
full-mask shuffles (a shrunken mask would leave some in-range lanes' xor partners outside it).

Each warp reduces 8 consecutive groups of 32, loading all 8 before the first shuffle, so that
enough loads are in flight to keep HBM busy (the .cu says why). Bandwidth is reported (x read
once, out written once), but the point is the butterfly.

The problem, its cases and its check: ../warp_sums.py, shared with cg_warp_reduce.
"""

from ..warp_sums import warp_sums_spec

SPEC = warp_sums_spec("warp_allreduce_xor", "out", every_lane=True)
