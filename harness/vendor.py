"""Vendor baselines a spec can declare: the library call that solves the same problem.
(harness.run.vendor_timing times them.)

PyTorch is the one imported here, and only inside prepare(), in the GPU worker: a machine
without it still runs every kernel, and its cells say the baseline is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from harness.model.spec import Case, StreamRef, Vendor


def torch_matmul(a: str, b: str, *, b_is_n_by_k: bool = False) -> Vendor:
    """C = A @ B through torch.matmul, which calls cuBLAS. `b_is_n_by_k`: B is stored N x K
    (column-major K x N), and cuBLAS reads it transposed in place, as the kernel does.

    TF32 stays off, so an fp32 GEMM is compared with fp32 cuBLAS, not with tensor cores.
    """

    def prepare(
        case: Case, inputs: Mapping[str, np.ndarray], stream: StreamRef
    ) -> Callable[[], None]:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        device = torch.device("cuda", stream.device)
        left = _to_torch(torch, inputs[a], device)
        right = _to_torch(torch, inputs[b], device)
        if b_is_n_by_k:
            right = right.t()
        out = torch.empty((left.shape[0], right.shape[1]), dtype=left.dtype, device=device)
        torch.cuda.synchronize(device)  # the uploads ran on torch's stream, not the harness's
        on_stream = torch.cuda.ExternalStream(stream.handle, device=device)

        def run() -> None:
            with torch.cuda.stream(on_stream):
                torch.matmul(left, right, out=out)

        return run

    return Vendor(library="torch.matmul (cuBLAS)", prepare=prepare, preload=("torch",))


def _to_torch(torch: Any, array: np.ndarray, device: Any) -> Any:
    if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: same bits, a dtype torch lacks
        bits = torch.from_numpy(np.ascontiguousarray(array).view(np.uint16))
        return bits.to(device).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)
