"""Whether another process used the GPU while a case was timed.

Two witnesses, either enough. NVML's list of the processes that hold a context on the GPU, where
it can be believed: it must list this process itself (a container with a PID namespace of its
own, or a sandbox, shows other numbers or none), and then any process beyond this one, the run's
(which started it), its parent (the fork server it was forked from, or the run) and their other
children (the run's workers of other kernels, which wait on the GPU's quiet lock while this one
times: harness.run.quiet) is another's. And the samples
themselves, which need nothing: where another process's work is scheduled between ours, every
sample waits out a time slice of it before it runs (Timing.queued_us). Measured on an H200
beside a process running bf16 GEMMs: 0.3-2.5 ms a sample (median 2.4 ms), against 7-25 us
alone; the SM clock fell from 1980 to 1630-1740 MHz, and medians rose by up to 22 %.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

from harness.model.cell import Timing
from harness.model.errors import Unavailable

# A timed cell whose samples waited longer than this (median) was time-sliced with another
# process: between the 25 us seen alone and the 300 us and more seen shared.
QUEUED_LIMIT_US = 150.0


class Neighbours:
    """The other processes on one GPU, as NVML lists them, where its list can be believed."""

    def __init__(self, uuid: str | None, ordinal: int):
        self._nvml: Any = None
        self._handle: int | Unavailable
        try:
            from cuda.bindings import nvml

            nvml.init_v2()
            self._handle = (
                nvml.device_get_handle_by_uuid(nvml_uuid(uuid))
                if uuid
                else nvml.device_get_handle_by_index_v2(ordinal)
            )
            self._nvml = nvml
        except Exception as error:  # no NVML library, an old driver, a GPU it cannot see
            self._handle = Unavailable(f"NVML cannot be asked ({type(error).__name__}: {error})")
        self.ours = own_processes()

    def others(self) -> list[str] | Unavailable:
        """The other processes with a context on this GPU, each as `pid N (X GiB)`."""
        if isinstance(self._handle, Unavailable):
            return self._handle
        try:
            listed = self._nvml.device_get_compute_running_processes_v3(self._handle)
            found = {int(p.pid): int(p.used_gpu_memory or 0) for p in _items(listed)}
        except Exception as error:  # the query itself is not supported here
            return Unavailable(f"NVML lists no processes here ({type(error).__name__}: {error})")
        if os.getpid() not in found:
            return Unavailable("NVML does not list this process: its process IDs are not ours")
        named = []
        for pid, memory in sorted(found.items()):
            parent = parent_of(pid)
            # None: no process here by that number, as NVML shares this PID namespace: one gone
            # since, or an entry of a list read while it changed (a worker exiting), seen on an
            # H200 as "pid 909670445 (7409022433.8 GiB)"
            if parent is not None and pid not in self.ours and parent not in self.ours:
                named.append(f"pid {pid} ({memory / 2**30:.1f} GiB)")
        return named


def own_processes() -> set[int]:
    """This process, the run's (which started it) and its parent (the fork server it was forked
    from, or the run)."""
    starter = multiprocessing.parent_process()
    return {os.getpid(), os.getppid(), *([starter.pid] if starter and starter.pid else [])}


def parent_of(pid: int) -> int | None:
    """The parent process of `pid`, from /proc; None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone, or not Linux
        return None
    # `pid (name) state ppid ...`: the name may hold spaces and parentheses, so split after it
    fields = stat[stat.rfind(")") + 1 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def nvml_uuid(uuid: str) -> str:
    """The UUID as NVML spells it: the driver API's hex digits, behind `GPU-` (or `MIG-`)."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _items(listed: Any) -> list[Any]:
    """cuda.bindings' array of NVML structs as a list: it indexes, but does not iterate."""
    return [listed[index] for index in range(len(listed))]


def shared_why(timing: Timing, others: list[str] | Unavailable) -> str | None:
    """Why `timing` was taken on a shared GPU, or None where nothing says so; `others` is what
    NVML listed around it."""
    reasons = []
    if isinstance(others, list) and others:
        reasons.append(f"NVML lists another process on this GPU: {', '.join(others)}")
    if timing.queued_us is not None and timing.queued_us > QUEUED_LIMIT_US:
        reasons.append(
            f"its samples each waited {timing.queued_us:.0f} us (median) beyond their own GPU "
            "time, as when another process's work runs between them"
        )
    return "; ".join(reasons) or None
