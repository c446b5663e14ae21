"""What another process's CUDA work, done outside the GPU's lock, does to a timing beside it
(docs/performance.md, "Workers' CUDA contexts, made and torn down under the GPU's lock").

One process times, with the harness's own sampler (gate, start probe, events, L2 flush), a 2 ms
spin kernel and a 4 GiB memset, one after the other, for as long as the schedule runs. Beside it
the script, on a schedule, has other processes do what a run's workers do: make a context (and
exit, or be killed, holding nothing or 2 GiB and 512 MiB of registered host memory; or reset it
first), register and unregister host memory, allocate and free device memory, ask NVML for the
GPU's processes; and nothing, as the control. Each thing's window is logged on CLOCK_MONOTONIC,
which all processes share. Then, for each kind of thing, the samples that overlap its windows:
how many started late (queued: after the gate opened, beyond the quickest of the recent 256, as
ClockProbe reckons it) and how many were slow (beyond the median of their kernel).

    python scripts/context_perturbation.py OUT [ROUNDS]      # on a GPU; ROUNDS: 8
    python scripts/context_perturbation.py --table OUT       # the table again, from OUT's files

OUT gets samples.json (name, host release ns, GPU start ns, GPU stop ns, us, MHz, queued us per
sample) and events.json ({"type", "window": [start ns, end ns]} per thing done).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 1 << 30
SPIN_CYCLES = 4_000_000  # 2 ms at an H200's 1980 MHz
QUEUE_WINDOW = 256  # as harness.run.timer's
BEFORE_NS = 2_000_000  # a sample that ends this soon before a window opens is beside it
AFTER_NS = 20_000_000  # and one that starts this soon after it closes
LATE_US = (50.0, 150.0)  # queued beyond these: late; 150 us is the witness's limit
SLOW_PCT = 3.0

# Waits on the cycle counter: as long on every SM whatever the memory does.
SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
LOOP:
  mov.u64 %rd3, %clock64;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.s64 %p1, %rd4, %rd1;
  @%p1 bra LOOP;
  ret;
}
"""


def _now() -> int:
    return time.monotonic_ns()


@dataclass(frozen=True)
class Sample:
    name: str  # the kernel: "spin" or "memset"
    released_ns: int  # when the host opened its gate
    started_ns: int  # when it began on the GPU, on the host's clock
    ended_ns: int
    us: float
    queued_us: float


def samples_of(rows: list[list[Any]]) -> list[Sample]:
    """samples.json's rows as samples, each queued as ClockProbe reckons it and placed on the
    host's clock by the least offset of its window."""
    offsets: deque[int] = deque(maxlen=QUEUE_WINDOW)
    found = []
    for name, released, gpu_start, gpu_stop, us, _mhz, _queued in rows:
        offsets.append(gpu_start - released)
        queued_ns = gpu_start - released - min(offsets)
        started = released + queued_ns
        found.append(
            Sample(name, released, started, started + gpu_stop - gpu_start, us, queued_ns / 1e3)
        )
    return found


@dataclass(frozen=True)
class Beside:
    """What the samples beside one kind of thing saw."""

    kind: str
    times: int
    window_ms: float  # the median window
    samples: int
    late: tuple[int, ...]  # queued beyond each of LATE_US
    most_queued_us: float
    slow: int  # beyond SLOW_PCT of their kernel's median
    slowest_pct: float


def beside_each(samples: list[Sample], events: list[dict[str, Any]]) -> list[Beside]:
    """For each kind of thing done, in the order first done, what the samples beside it saw."""
    medians = {
        name: statistics.median(s.us for s in samples if s.name == name)
        for name in {s.name for s in samples}
    }
    windows: dict[str, list[tuple[int, int]]] = {}
    for event in events:
        start, end = event["window"]
        windows.setdefault(event["type"], []).append((start, end))
    table = []
    for kind, spans in windows.items():
        near = [
            s
            for start, end in spans
            for s in samples
            if s.started_ns < end + AFTER_NS and s.ended_ns > start - BEFORE_NS
        ]
        slow = [100.0 * (s.us / medians[s.name] - 1.0) for s in near]
        table.append(
            Beside(
                kind,
                len(spans),
                statistics.median(end - start for start, end in spans) / 1e6,
                len(near),
                tuple(sum(s.queued_us > limit for s in near) for limit in LATE_US),
                max((s.queued_us for s in near), default=0.0),
                sum(pct > SLOW_PCT for pct in slow),
                max(slow, default=0.0),
            )
        )
    return table


def table(rows: list[Beside]) -> str:
    lines = [
        "| beside | times | window (median) | samples beside | queued > 50 us | > 150 us "
        "| most queued | slower > 3 % | slowest |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.kind} | {row.times} | {row.window_ms:.1f} ms | {row.samples} "
            f"| {row.late[0]} | {row.late[1]} | {row.most_queued_us:.0f} us | {row.slow} "
            f"| {row.slowest_pct:+.1f} % |"
        )
    return "\n".join(lines)


# What runs on the GPU machine: each in a process of its own (spawned: none forks CUDA).


def _sampler(stop: str, out: str, ready: Any) -> None:
    import ctypes

    from cuda.core import Device, LaunchConfig, ObjectCode, launch

    from harness.run.timer import ClockProbe, ColdSampler, StreamGate

    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    sms = device.properties.multiprocessor_count
    flush = device.allocate(2 * device.properties.l2_cache_size, stream=stream)
    gate, probe = StreamGate(), ClockProbe(sms)
    probe.warm(stream)
    big = device.allocate(4 * GIB, stream=stream)
    kernel = ObjectCode.from_ptx(SPIN_PTX).get_kernel("spin")
    config = LaunchConfig(grid=2 * sms, block=256)
    launch(stream, config, kernel, ctypes.c_uint64(1000))  # loaded before the first gate
    stream.sync()
    sampler = ColdSampler(stream, flush, gate, probe)
    kinds: list[tuple[str, Callable[[], None]]] = [
        ("spin", lambda: launch(stream, config, kernel, ctypes.c_uint64(SPIN_CYCLES))),
        ("memset", lambda: big.fill(7, stream=stream)),
    ]
    rows = []
    ready.set()
    while not os.path.exists(stop):
        name, run = kinds[len(rows) % 2]
        us = sampler.sample(run, lambda: None)
        start, stop = int(probe._words[0]), int(probe._words[2])
        released = start - probe._offsets[-1]
        rows.append((name, released, start, stop, us, probe.mhz(), sampler.queued_us))
    Path(out).write_text(json.dumps(rows))


def _context(big: bool) -> tuple[list[Any], dict[str, tuple[int, int]]]:
    """A context made here, holding 2 GiB of device memory and 512 MiB of registered host
    memory where `big`; what it holds, and when it was made and filled."""
    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device

    made_from = _now()
    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    made = _now()
    held: list[Any] = [device, stream]
    if big:
        held += [device.allocate(2 * GIB, stream=stream), device.allocate(100 << 20, stream=stream)]
        host = np.empty(512 << 20, np.uint8)
        host[::4096] = 0
        driver.cuMemHostRegister(host.ctypes.data, host.nbytes, 0)
        held.append(host)
        stream.sync()
    return held, {"create": (made_from, made), "alloc": (made, _now())}


def _made_then(conn: Any, big: bool, how: str) -> None:
    """A context made, then: "kill" waits to be killed; "reset" resets it and leaves at once;
    "exit" leaves as a Python program does."""
    held, times = _context(big)
    if how == "kill":
        conn.send(times)
        time.sleep(60)
    elif how == "reset":
        from cuda.bindings import driver

        started = _now()
        del held[2:]
        driver.cuDevicePrimaryCtxReset(0)
        times["reset"] = (started, _now())
        conn.send(times)
        conn.close()
        os._exit(0)
    else:
        times["exit_from"] = (_now(), 0)
        conn.send(times)
        conn.close()
        sys.exit(0)


def _helper(conn: Any) -> None:
    """A process with a context that does one thing at a time, as asked."""
    import numpy as np
    from cuda.bindings import driver, nvml
    from cuda.core import Device

    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    nvml.init_v2()
    handle = nvml.device_get_handle_by_index_v2(0)
    host = np.empty(512 << 20, np.uint8)
    host[::4096] = 0
    buffer = None
    conn.send("ready")
    while (asked := conn.recv()) != "quit":
        started = _now()
        if asked == "register":
            driver.cuMemHostRegister(host.ctypes.data, host.nbytes, 0)
        elif asked == "unregister":
            driver.cuMemHostUnregister(host.ctypes.data)
        elif asked == "alloc":
            buffer = device.allocate(2 * GIB, stream=stream)
            stream.sync()
        elif asked == "free" and buffer is not None:
            buffer.close(stream)
            stream.sync()
        elif asked == "nvml":
            for _ in range(5):
                nvml.device_get_compute_running_processes_v3(handle)
        conn.send((started, _now()))


def measure(out: Path, rounds: int) -> None:
    spawn = multiprocessing.get_context("spawn")
    out.mkdir(parents=True, exist_ok=True)
    stop = out / "stop"
    stop.unlink(missing_ok=True)
    ready = spawn.Event()
    sampler = spawn.Process(target=_sampler, args=(str(stop), str(out / "samples.json"), ready))
    sampler.start()
    helper_end, its_end = spawn.Pipe()
    helper = spawn.Process(target=_helper, args=(its_end,))
    helper.start()
    assert helper_end.recv() == "ready"
    ready.wait()
    time.sleep(2.0)
    events: list[dict[str, Any]] = []

    def ask(what: str) -> None:
        helper_end.send(what)
        events.append({"type": what, "window": helper_end.recv()})

    def made_then(big: bool, how: str) -> None:
        mine, theirs = spawn.Pipe()
        child = spawn.Process(target=_made_then, args=(theirs, big, how))
        child.start()
        times = mine.recv()
        if how == "kill":
            time.sleep(0.3)
            killed = _now()
            child.kill()
            child.join()
            times["teardown"] = (killed, _now())
        else:
            child.join()
            times["teardown"] = ((times.get("exit_from") or times["reset"])[0], _now())
        for phase in ("create", "alloc", "reset", "teardown"):
            if phase in times:
                kind = f"{'big' if big else 'small'}_{how}:{phase}"
                events.append({"type": kind, "window": times[phase]})

    def idle() -> None:
        events.append({"type": "idle", "window": (_now(), _now() + 300_000_000)})
        time.sleep(0.3)

    schedule: list[Callable[[], None]] = [
        idle,
        lambda: made_then(False, "exit"),
        lambda: made_then(True, "kill"),
        lambda: made_then(True, "exit"),
        lambda: made_then(True, "reset"),
        lambda: made_then(False, "kill"),
        lambda: (ask("register"), time.sleep(0.4), ask("unregister")),
        lambda: (ask("alloc"), time.sleep(0.4), ask("free")),
        lambda: ask("nvml"),
    ]
    for _ in range(rounds):
        for thing in schedule:
            thing()
            time.sleep(0.7)
    helper_end.send("quit")
    helper.join()
    stop.touch()
    sampler.join()
    (out / "events.json").write_text(json.dumps(events))


def report(out: Path) -> str:
    samples = samples_of(json.loads((out / "samples.json").read_text()))
    events = json.loads((out / "events.json").read_text())
    counts = {name: sum(s.name == name for s in samples) for name in ("spin", "memset")}
    return f"{len(samples)} samples {counts}\n\n" + table(beside_each(samples, events))


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        print(report(Path(sys.argv[2])))
    else:
        measure(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8)
        print(report(Path(sys.argv[1])))
