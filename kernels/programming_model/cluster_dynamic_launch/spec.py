"""Cluster dynamic launch: the cluster shape is a launch attribute, not part of the kernel.

Teaches the second way to form thread block clusters (sm_90+): the kernel has no
`__cluster_dims__`, and the host passes the shape at launch (`cudaLaunchKernelEx` with
`cudaLaunchAttributeClusterDimension`; here `Launch.cluster`), so one binary runs with clusters
of 2x1, 4x1, 2x2, 1x4 or 8x1 blocks. Clusters above 8 blocks are non-portable: the 4x4 case
needs the opt-in the harness makes and is skipped `device-unsupported` where the GPU cannot
place 16 blocks in one GPC (H100/H200 can).

Each block reports the same values as cluster_static, read from the hardware through
cooperative groups; what is checked, exactly, for a cluster (CX, CY, 1): ../cluster_ids.py.
"""

from harness.spec import Case

from ..cluster_ids import cluster_ids_spec


def _case(gx: int, gy: int, cx: int, cy: int) -> Case:
    return Case(f"grid{gx}x{gy}_cluster{cx}x{cy}", {"gx": gx, "gy": gy, "cx": cx, "cy": cy})


CASES = (
    # 8192 blocks, 2 Mi threads (8 MiB of thread ranks) cut into clusters of different shapes.
    _case(128, 64, 2, 1),
    _case(128, 64, 4, 1),
    _case(128, 64, 2, 2),
    # A column cluster: with CX = 1 the rank runs along y.
    _case(128, 64, 1, 4),
    # 16 blocks: non-portable, opted in by the harness; 256 clusters.
    _case(64, 64, 4, 4),
    # Edges: one cluster of the largest portable size, and one cluster of two blocks.
    _case(8, 1, 8, 1),
    _case(2, 1, 2, 1),
)

SPEC = cluster_ids_spec("cluster_dynamic_launch", CASES)
