"""The stand-in device of a CPU check: each thing a check asks of it is noted with its answer, and
a kept check's facts hold on another target's stand-in only where each is answered alike."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from harness.model.cell import Resources
from harness.run.stand_in import LIMITS, STAND_INS, DeviceFacts, FactLog

ADD_ONE = {"add_one": Resources(registers=32, smem_bytes=0, spill_bytes=0, stack_bytes=0)}
A100, H100, B200 = (
    DeviceFacts(cc, STAND_INS[cc[0]], {(): ADD_ONE}) for cc in [(8, 0), (9, 0), (10, 0)]
)


def _questions(log: FactLog) -> list[list[object]]:
    return [question for question, _ in log.noted()]


def test_each_field_read_and_occupancy_asked_is_noted_with_its_answer():
    log = FactLog(H100)
    limits = log.limits(())
    assert log.noted() == []  # made, not read
    assert limits.sm_count == 132
    assert limits.max_blocks_per_sm("add_one", np.int64(256), 40000) == 5
    assert log.noted() == [
        [["blocks_per_sm", [], "add_one", 256, 40000], 5],
        [["limit", "sm_count"], 132],
    ]
    assert log.complete


@pytest.mark.parametrize(
    "read_all",
    [vars, dataclasses.asdict, repr, copy.copy, lambda limits: dataclasses.replace(limits)],
    ids=["vars", "asdict", "repr", "copy", "replace"],
)
def test_reading_every_field_at_once_notes_every_field(read_all):
    log = FactLog(B200)
    read_all(log.limits(()))
    assert {tuple(q) for q in _questions(log)} >= {("limit", name) for name in LIMITS}


def test_an_occupancy_asked_with_what_json_cannot_say_leaves_the_facts_incomplete():
    log = FactLog(H100)
    assert log.limits(()).max_blocks_per_sm("add_one", 256.0, 0) == 8  # answered all the same
    assert not log.complete


def test_facts_hold_where_each_is_answered_alike():
    log = FactLog(H100)
    limits = log.limits(())
    _ = limits.max_blocks_per_sm("add_one", 256, 0)  # 8 on each stand-in
    assert log.ask("has_entry", [], "add_one") is True
    assert log.ask("shmem_fits", 200 * 1024) is True
    assert log.ask("largest_array", "surface", 2) == [[131072, 65536]]  # as the JSON says it
    assert log.ask("largest_array", "texture", 3) == [[16384] * 3, [8192, 8192, 32768]]
    facts = log.noted()
    assert H100.hold(facts) and B200.hold(facts)
    assert not A100.hold(facts)  # 200 KiB is beyond the A100's opt-in
    _ = limits.cc
    assert not B200.hold(log.noted())
    heavier = {(): {"add_one": dataclasses.replace(ADD_ONE["add_one"], registers=255)}}
    assert not dataclasses.replace(H100, builds=heavier).hold(facts)
    assert dataclasses.replace(H100, builds={(): None}).hold([]) is True


@pytest.mark.parametrize(
    "facts",
    [
        None,
        "facts",
        [["limit", "sm_count"]],
        [[["limit", "clock"], 1]],
        [[["blocks_per_sm", [], "add_one", "256", 0], 8]],
        [[["has_entry", [1], "add_one"], True]],
        [[[], 1]],
        [[["texture_pitch", 1], 32]],
        [[["largest_array", "surface", 4], [[1, 1, 1, 1]]]],
        [[["largest_array", "texture", True], [[131072]]]],
        [[["largest_array", "mipmap", 1], [[131072]]]],
    ],
    ids=[
        "none",
        "a string",
        "a fact without its answer",
        "an unknown limit",
        "a count as text",
        "macros not strings",
        "an empty question",
        "a question with too much",
        "an array of four dimensions",
        "dims as a bool",
        "an array of no kind a spec has",
    ],
)
def test_facts_a_kept_entry_may_say_anything_and_never_hold_when_malformed(facts):
    assert H100.hold(facts) is False


def test_the_plan_a_child_is_sent_gives_the_same_device_back():
    assert DeviceFacts.of_plan(H100.to_plan()) == H100
    unbuilt = DeviceFacts((8, 0), STAND_INS[8], {("-DTILE=64",): None})
    assert DeviceFacts.of_plan(unbuilt.to_plan()) == unbuilt
