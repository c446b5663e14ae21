"""The CUDA context's limits a kernel asks for (KernelSpec.context), set before its module loads.

A worker serves one kernel, but `ab` and a restarted worker may load another: each kernel gets
the limits it asks for and the driver's defaults for the rest, read from the context the first
time, so what one kernel asked for never reaches another's cases.
"""

from __future__ import annotations

import dataclasses

from cuda.bindings import driver

from harness.model.spec import ContextLimits, DeviceUnsupported
from harness.run.checked import CudaError, check

LIMITS = {
    "stack_bytes": driver.CUlimit.CU_LIMIT_STACK_SIZE,
    "printf_fifo_bytes": driver.CUlimit.CU_LIMIT_PRINTF_FIFO_SIZE,
    "malloc_heap_bytes": driver.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE,
    "pending_launches": driver.CUlimit.CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT,
}


class ContextLimiter:
    """The current context's limits, set as each kernel asks; call it with the context current."""

    def __init__(self) -> None:
        self._defaults: dict[str, int] = {}
        self._asked = ContextLimits()

    def holds(self, limits: ContextLimits) -> bool:
        """Whether the context's limits are already as `limits` asks."""
        return limits == self._asked

    def allow(self, limits: ContextLimits) -> None:
        """The context's limits as `limits` asks, the driver's defaults for what it leaves None.
        DeviceUnsupported, with the figures, where the driver refuses a value or gives less."""
        if self.holds(limits):
            return
        if not self._defaults:
            self._defaults = {name: _get(limit) for name, limit in LIMITS.items()}
        for name, limit in LIMITS.items():
            asked = getattr(limits, name)
            wanted = self._defaults[name] if asked is None else asked
            if _get(limit) == wanted:
                continue
            try:
                check(driver.cuCtxSetLimit(limit, wanted))
            except CudaError as error:
                raise DeviceUnsupported(
                    f"the context cannot allow {name}={wanted} (cuCtxSetLimit: {error})"
                ) from error
            given = _get(limit)
            if asked is not None and given < asked:
                raise DeviceUnsupported(
                    f"the context allows {name}={given}, less than the {asked} its spec asks"
                )
        self._asked = dataclasses.replace(limits)


def _get(limit: driver.CUlimit) -> int:
    return int(check(driver.cuCtxGetLimit(limit)))
