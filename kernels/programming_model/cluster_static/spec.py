"""Cluster static: `__cluster_dims__(2, 2, 1)` compiled in; every block reports its cluster ids.

Teaches the first way to form thread block clusters (sm_90+): the shape is part of the kernel,
so the host launches a plain grid and the hardware cuts it into 2 x 2 groups of blocks. Each
block reads back, through cooperative groups, its rank inside the cluster (`block_rank()`,
linear with x fastest), its (x, y) position inside the cluster (`block_index()`), which cluster
it belongs to (`this_grid().cluster_index()` and `cluster_rank()`), the cluster shape
(`dim_blocks()`, `num_blocks()`) and the number of clusters; every thread writes its
`thread_rank()` within the cluster.

What is checked, exactly: ../cluster_ids.py's formulas with CX = CY = 2, shared with
cluster_dynamic_launch. The typical case writes 8 MiB so that its timing means something.
"""

from harness.spec import Case

from ..cluster_ids import cluster_ids_spec

CLUSTER = (2, 2)  # __cluster_dims__(2, 2, 1) in the .cu


def _case(gx: int, gy: int) -> Case:
    return Case(f"grid{gx}x{gy}", {"gx": gx, "gy": gy})


CASES = (
    # 8192 blocks (2048 clusters), 2 Mi threads: 8 MiB of thread ranks.
    _case(128, 64),
    # A small non-square grid: 4 x 3 clusters.
    _case(8, 6),
    # Edge: exactly one cluster.
    _case(2, 2),
)

SPEC = cluster_ids_spec("cluster_static", CASES, compiled_cluster=CLUSTER)
