"""The device a CPU check stands in for, and each fact the check learns of it.

Where no GPU runs a target, its cases are checked against a stand-in: a GPU of the target's
family with public figures (A100, H100, B200), occupancy computed from the build's ptxas
resources as the occupancy calculator computes it (near the driver's answer, which a spec reads
only to size a grid). A check asks the stand-in questions: a field of DeviceLimits, the resident
blocks of an entry, whether the binary has an entry, whether a launch's shared memory fits, the
texture pitch, the largest CUDA array of a texture or surface, whether a case's declared memory
fits. Each question and its answer is a fact the
check used (FactLog); a check whose facts all hold on another target's stand-in answers the same
there (harness.run.check_cache).
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from harness.model.cell import Resources
from harness.model.matrix import Target
from harness.model.spec import DeviceLimits


@dataclass(frozen=True)
class StandIn:
    """A device of a family, as far as setup() reads one, and what occupancy is made of."""

    name: str
    sm_count: int
    smem_optin_bytes: int
    smem_per_sm_bytes: int
    l2_bytes: int
    memory_bytes: int
    registers_per_sm: int = 65536
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    texture_pitch_bytes: int = 32  # CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT
    # The largest CUDA array, x first, by what reads it and its dimensions: each a shape the
    # device takes (a 3-D texture has an alternate shape, deep and narrow). CC 5.0 and later.
    largest_arrays: tuple[tuple[str, int, tuple[tuple[int, ...], ...]], ...] = (
        ("texture", 1, ((131072,),)),
        ("texture", 2, ((131072, 65536),)),
        ("texture", 3, ((16384, 16384, 16384), (8192, 8192, 32768))),
        ("surface", 1, ((32768,),)),
        ("surface", 2, ((131072, 65536),)),
        ("surface", 3, ((16384, 16384, 16384),)),
    )

    def largest_array(self, kind: str, dims: int) -> list[list[int]]:
        """The shapes (x first) of the largest `dims`-D CUDA array a `kind` is made over."""
        return next(
            [list(shape) for shape in shapes]
            for each, count, shapes in self.largest_arrays
            if (each, count) == (kind, dims)
        )


KIB, MIB, GIB = 2**10, 2**20, 2**30
# By compute capability major: the family's first data-centre GPU's public figures
STAND_INS = {
    8: StandIn("a CC 8.x stand-in (A100 80GB)", 108, 163 * KIB, 164 * KIB, 40 * MIB, 80 * GIB),
    9: StandIn("a CC 9.x stand-in (H100 SXM)", 132, 227 * KIB, 228 * KIB, 50 * MIB, 80 * GIB),
    10: StandIn("a CC 10.x stand-in (B200)", 148, 227 * KIB, 228 * KIB, 126 * MIB, 180 * GIB),
}
# The DeviceLimits a spec may read, each a fact of its own
LIMITS = ("cc", "sm_count", "smem_optin_bytes", "l2_bytes", "memory_bytes")

Builds = Mapping[tuple[str, ...], Mapping[str, Resources] | None]


def stand_in_for(target: Target) -> StandIn:
    """The stand-in of the target's family; the nearest older one for a family not listed."""
    known = [major for major in STAND_INS if major <= target.cc.major] or [min(STAND_INS)]
    return STAND_INS[max(known)]


def blocks_per_sm(
    device: StandIn, resources: Resources | None, threads: int, shmem_bytes: int
) -> int:
    """Resident blocks per SM, as the occupancy calculator has them: the least of what threads,
    registers (a warp's in 256-register steps) and shared memory (1 KiB reserved per block)
    allow, and the SM's block limit. 0 where one block does not fit."""
    if threads <= 0:
        return 0
    warps = -(-threads // 32)
    by_threads = device.threads_per_sm // (warps * 32)
    registers = resources.registers if resources else 32
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = device.registers_per_sm // (per_warp * warps) if per_warp else by_threads
    smem = (resources.smem_bytes if resources else 0) + shmem_bytes + KIB
    by_smem = device.smem_per_sm_bytes // smem
    return max(0, min(device.blocks_per_sm, by_threads, by_registers, by_smem))


@dataclass(frozen=True)
class DeviceFacts:
    """The device of one target's check: its compute capability, its stand-in, and each build's
    entries with their resources (by the build's case macros; None: no build to hold them to).
    It answers the questions a check asks, as plain JSON, so that a kept check's facts can be
    asked again of another target's device."""

    cc: tuple[int, int]
    device: StandIn
    builds: Builds

    def to_plan(self) -> dict[str, Any]:
        """As a spec's child is sent it."""
        return {
            "cc": list(self.cc),
            "device": dataclasses.asdict(self.device),
            "builds": [
                [list(defines), None if built is None else {e: vars(r) for e, r in built.items()}]
                for defines, built in self.builds.items()
            ],
        }

    @classmethod
    def of_plan(cls, plan: Mapping[str, Any]) -> DeviceFacts:
        builds = {
            tuple(defines): None if built is None else {e: Resources(**r) for e, r in built.items()}
            for defines, built in plan["builds"]
        }
        major, minor = plan["cc"]
        device = dict(plan["device"])
        device["largest_arrays"] = tuple(  # JSON has lists: tuples again, as the fields say
            (kind, dims, tuple(tuple(shape) for shape in shapes))
            for kind, dims, shapes in device["largest_arrays"]
        )
        return cls((major, minor), StandIn(**device), builds)

    def answer(self, question: Any) -> Any:
        """The answer to a question a check asked (as FactLog notes it); ValueError where it is
        not one: a kept entry may say anything."""
        if not isinstance(question, list | tuple) or not question:
            raise ValueError(f"not a question: {question!r}")
        kind, *args = question
        if kind == "limit" and len(args) == 1 and args[0] in LIMITS:
            return list(self.cc) if args[0] == "cc" else getattr(self.device, args[0])
        if kind == "blocks_per_sm" and len(args) == 4:
            defines, entry, threads, shmem = args
            resources = (self.builds.get(_defines(defines)) or {}).get(_text(entry))
            return blocks_per_sm(self.device, resources, _int(threads), _int(shmem))
        if kind == "has_entry" and len(args) == 2:
            entries = self.builds.get(_defines(args[0]))
            return None if entries is None else _text(args[1]) in entries
        if kind == "shmem_fits" and len(args) == 1:
            return _int(args[0]) <= self.device.smem_optin_bytes
        if kind == "memory_fits" and len(args) == 1:
            return _int(args[0]) <= self.device.memory_bytes
        if kind == "texture_pitch" and not args:
            return self.device.texture_pitch_bytes
        if kind == "largest_array" and len(args) == 2 and args[0] in ("texture", "surface"):
            if args[1] in (1, 2, 3) and not isinstance(args[1], bool):
                return self.device.largest_array(args[0], args[1])
        raise ValueError(f"not a question a check asks: {question!r}")

    def blocks_per_sm_unnoted(
        self, defines: tuple[str, ...], entry: Any, threads: Any, shmem_bytes: Any
    ) -> int:
        """An occupancy asked with what no fact can note (FactLog.limits)."""
        built = self.builds.get(defines) or {}
        return blocks_per_sm(self.device, built.get(entry), threads, shmem_bytes)

    def hold(self, facts: Any) -> bool:
        """Whether every fact of a kept check, [question, answer] each, holds here."""
        return facts_hold(self, facts)


class Answers(Protocol):
    """A device as a spec's setup() asks it (DeviceFacts, or the GPU a worker runs on)."""

    def answer(self, question: Any) -> Any: ...

    def blocks_per_sm_unnoted(
        self, defines: tuple[str, ...], entry: Any, threads: Any, shmem_bytes: Any
    ) -> int: ...


def facts_hold(device: Answers, facts: Any) -> bool:
    """Whether every fact kept, [question, answer] each, is answered alike by `device`."""
    if not isinstance(facts, list):
        return False
    try:
        return all(
            isinstance(fact, list) and len(fact) == 2 and device.answer(fact[0]) == fact[1]
            for fact in facts
        )
    except (ValueError, TypeError):
        return False


A = TypeVar("A", bound=Answers)


class FactLog(Generic[A]):
    """Where a spec's code runs: the questions it asks of the device, and their answers. A
    question it cannot note as JSON (a spec passing odd types to max_blocks_per_sm) is still
    answered, and the code is marked as one whose facts are not all known."""

    def __init__(self, facts: A) -> None:
        self.facts = facts
        self._noted: dict[str, tuple[list[Any], Any]] = {}
        self.complete = True

    def ask(self, *question: Any) -> Any:
        answer = self.facts.answer(question)
        said = list(question)
        self._noted.setdefault(json.dumps(said), (said, answer))
        return answer

    def noted(self) -> list[list[Any]]:
        """Each fact as [question, answer], in a stable order."""
        return [[question, answer] for _, (question, answer) in sorted(self._noted.items())]

    def limits(self, defines: tuple[str, ...]) -> DeviceLimits:
        """The DeviceLimits setup() is given for a case of the build `defines`: each field it
        reads, and each occupancy it asks, noted as it is read."""
        log, device = self, self.facts

        def max_blocks_per_sm(entry: str, threads: int, shmem_bytes: int) -> int:
            try:
                asked = (
                    list(defines),
                    _text(entry),
                    operator.index(threads),
                    operator.index(shmem_bytes),
                )
            except (TypeError, ValueError):
                log.complete = False
                return device.blocks_per_sm_unnoted(defines, entry, threads, shmem_bytes)
            return int(log.ask("blocks_per_sm", *asked))

        class Watched(DeviceLimits):
            """Each field read is a fact; reading them all at once (vars, copy) is all of them."""

            def __getattribute__(self, name: str) -> Any:
                if name in LIMITS:
                    log.ask("limit", name)
                elif name == "__dict__":
                    for limit in LIMITS:
                        log.ask("limit", limit)
                return super().__getattribute__(name)

        def limit(name: str) -> Any:  # not a fact yet: the spec has not read it
            return device.answer(("limit", name))

        return Watched(
            cc=tuple(limit("cc")),
            sm_count=limit("sm_count"),
            smem_optin_bytes=limit("smem_optin_bytes"),
            l2_bytes=limit("l2_bytes"),
            max_blocks_per_sm=max_blocks_per_sm,
            memory_bytes=limit("memory_bytes"),
        )


def _defines(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(d, str) for d in value):
        raise ValueError(f"not a build's macros: {value!r}")
    return tuple(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a name: {value!r}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"not a whole number: {value!r}")
    return value
