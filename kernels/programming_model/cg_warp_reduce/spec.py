"""CG warp reduce: per-group sums with `cg::tiled_partition<32>` and `cg::reduce` (exercise 2).

Teaches the cooperative-groups form of a warp reduction: the block from
`cg::this_thread_block()`, cut into 32-thread tiles by `cg::tiled_partition<32>`, each tile
summing one float per thread with `cg::reduce(tile, v, cg::plus<float>())`. The tile object
carries the member mask that the raw `__shfl_xor_sync` version spells out by hand.

Output: sums[g] = sum(x[32g : min(32g + 32, n)]) (float32), one per 32-element group, i.e. one
warp-wide reduce's worth; the tile index comes from `meta_group_rank()` / `meta_group_size()`.
Partial last group: every lane of the tile calls the collective reduce, lanes past n
contribute 0.

Why a tile sums GROUPS = 8 consecutive groups rather than one: with one 4-byte load per thread an
SM has only 8 KB of loads in flight, too few to cover DRAM latency (Little's law wants ~30 KB at
4.3 TB/s), and the kernel ran at ~30% of the roofline. Each tile therefore issues its 8 coalesced
loads first (64 KB in flight per full SM), then runs one `cg::reduce` per group; lane k keeps
group k's sum and lanes 0..7 store the 8 sums at once. The sums and their meaning are unchanged.
Bandwidth is reported (x read once, one float per 32 written), but the point is the CG API.

The problem, its cases and its check: ../warp_sums.py, shared with warp_allreduce_xor.
"""

from ..warp_sums import warp_sums_spec

SPEC = warp_sums_spec("cg_warp_reduce", "sums", every_lane=False)
