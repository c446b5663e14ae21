"""Vendor baselines a spec can declare: the library call that solves the same problem.

PyTorch is the one imported here, and only inside prepare(), in the GPU worker: a machine
without it still runs every kernel, and its cells say the baseline is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from harness.spec import Case, StreamRef, Vendor, Work

if TYPE_CHECKING:  # specs import this module; cuda-python stays out of their import
    from harness.timing import Timing


def measure_vendor(
    vendor: Vendor,
    case: Case,
    inputs: Mapping[str, np.ndarray],
    stream: StreamRef,
    measure: Callable[[Callable[[], None]], Timing],
    kernel: Timing,
    work: Work,
) -> dict[str, str]:
    """The vendor library's time for the same case, by the protocol that timed the kernel.

    vendor_ratio = vendor time / kernel time: above 1, the kernel is the faster. A library that
    is not installed is said so; any other error is the spec's and propagates.
    """
    try:
        run = vendor.prepare(case, inputs, stream)
    except ImportError as error:
        return {"vendor": vendor.library, "vendor_unavailable": str(error)}
    timing = measure(run)
    shown = {
        "vendor": vendor.library,
        "vendor_time_median_us": f"{timing.median_us:.3f}",
        "vendor_noise_pct": f"{timing.noise_pct:.3f}",
        "vendor_ratio": f"{timing.median_us / kernel.median_us:.3f}",
    }
    if work.flops:
        shown["vendor_tflops"] = f"{work.flops / timing.median_us / 1e6:.2f}"
    return shown


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

    return Vendor(library="torch.matmul (cuBLAS)", prepare=prepare)


def _to_torch(torch, array: np.ndarray, device):
    if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: same bits, a dtype torch lacks
        bits = torch.from_numpy(np.ascontiguousarray(array).view(np.uint16))
        return bits.to(device).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)
