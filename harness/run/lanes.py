"""The cases in flight on one GPU at once, one per lane (harness.pipeline.running runs a kernel
per lane, each in its worker process), and what they may hold together.

Timing is exclusive on the GPU (harness.run.quiet), so what lanes buy is overlap: one lane's
case is checked on the host, or set up, while another's is timed. Two things they must not do
to each other:

- Run the GPU out of memory. Each case in flight reserves the bytes its spec's work() says it
  moves, out of half the GPU's memory; a case whose size is unknown, or larger than that half,
  reserves all of it and so runs alone.
- Time each other out. A case that hangs holds the GPU's lock, and a case of another lane that
  waits on it for the rest of its own timeout is killed too, for nothing. So a case that timed
  out while a case of another lane timed out is run once more, alone on the GPU
  (flight_again()): the one that hangs times out again, the one that waited passes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Flight:
    """One case in flight on one lane: from when to when, and whether it timed out."""

    lane: int
    started: float
    ended: float | None = None
    timed_out: bool = False

    def overlaps(self, other: Flight) -> bool:
        mine_end = self.ended if self.ended is not None else time.monotonic()
        theirs_end = other.ended if other.ended is not None else time.monotonic()
        return self.started < theirs_end and other.started < mine_end


class Lanes:
    """The flights of one GPU's lanes, and the memory they reserve together."""

    def __init__(self, memory_bytes: int | None):
        """`memory_bytes`: the GPU's; None where the driver did not say (nothing reserves)."""
        self.budget = None if memory_bytes is None else max(1, memory_bytes // 2)
        self._reserved = 0
        self._tickets, self._serving = 0, 0  # flights start in the order they asked
        self._in_flight: dict[int, Flight] = {}
        self._alone: Flight | None = None  # a flight that no other may overlap
        self._timeouts: list[Flight] = []  # flights that ended timed out
        self._changed = threading.Condition()

    def weight(self, moves_bytes: int | None) -> int:
        """What a case reserves: the bytes it moves, or all of the budget where that is unknown
        or more."""
        if self.budget is None:
            return 0
        return self.budget if moves_bytes is None else max(0, min(moves_bytes, self.budget))

    @contextlib.contextmanager
    def flight(self, lane: int, moves_bytes: int | None, alone: bool = False) -> Iterator[Flight]:
        """A case of `lane` in flight, once what it reserves is free and the flights that asked
        before it have started (a large case is not passed over for ever); `alone`: once no
        other is in flight, and none starts until it ends. Set `timed_out` on the flight before
        it ends where the case timed out."""
        weight = self.weight(moves_bytes)

        def may_start() -> bool:
            if self._serving != ticket or self._alone is not None:
                return False
            fits = self.budget is None or self._reserved + weight <= self.budget
            return fits and not (alone and self._in_flight)

        with self._changed:
            ticket, self._tickets = self._tickets, self._tickets + 1
            self._changed.wait_for(may_start)
            self._serving += 1
            self._reserved += weight
            flight = Flight(lane, time.monotonic())
            self._in_flight[lane] = flight
            self._alone = flight if alone else None
            self._changed.notify_all()
        try:
            yield flight
        finally:
            with self._changed:
                flight.ended = time.monotonic()
                del self._in_flight[lane]
                self._reserved -= weight
                if self._alone is flight:
                    self._alone = None
                if flight.timed_out:
                    self._timeouts.append(flight)
                self._changed.notify_all()

    def flight_again(self, flight: Flight) -> bool:
        """Whether a case that timed out in `flight` may have waited on another lane's hang, and
        so is run once more, alone: once the other lanes' cases in flight now have ended,
        whether any case of another lane that overlapped it timed out."""
        with self._changed:
            others = [f for lane, f in self._in_flight.items() if lane != flight.lane]
            self._changed.wait_for(lambda: all(f.ended is not None for f in others))
            return any(
                other.lane != flight.lane and other.overlaps(flight) for other in self._timeouts
            )
