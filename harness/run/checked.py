"""cuda.bindings calls, checked: the one error type a failed driver call raises."""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver

from harness.model.errors import KernelFailed


class CudaError(KernelFailed):
    """A driver call failed (an illegal address or a trap leaves the context unusable); the
    message names the CUDA error."""


def check(result: tuple[Any, ...]) -> Any:
    """The values of a cuda.bindings call's result, after its error code; CudaError if not
    CUDA_SUCCESS."""
    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise CudaError(f"CUDA error: {name.decode()}: {text.decode()}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest
