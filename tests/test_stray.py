"""Reads outside a buffer, without a GPU: the extremes the loud runs fill memory with, how the
runs decide what an output depends on (kernels modelled in numpy), and how a cell says it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import ml_dtypes
import numpy as np
import pytest

from harness.run.stray import Dependence, Extreme, extreme_fill, said, stray_reads
from harness.run.verify import changed_elements, mismatch_count

LARGEST, SMALLEST = Extreme.LARGEST, Extreme.SMALLEST


@pytest.mark.parametrize(
    ("dtype", "largest", "smallest"),
    [
        (np.float32, 3.4028235e38, -3.4028235e38),
        (ml_dtypes.bfloat16, 3.38953e38, -3.38953e38),
        (np.float16, 65504, -65504),
        (np.int32, 2**31 - 1, -(2**31)),
        (np.uint8, 255, 0),
        (np.int8, 127, -128),
        (ml_dtypes.float8_e4m3fn, 448, -448),
        # 8 bytes: the high word of the extreme, twice: within a part in 2^20 of it
        (np.float64, 1.7976927e308, -1.7976927e308),
        (np.int64, 0x7FFFFFFF7FFFFFFF, -0x7FFFFFFF80000000),
        (np.uint64, 2**64 - 1, 0),
    ],
)
def test_each_element_is_its_dtypes_largest_then_smallest_value(dtype, largest, smallest):
    dtype = np.dtype(dtype)
    for extreme, value in ((LARGEST, largest), (SMALLEST, smallest)):
        word = extreme_fill(dtype, extreme)
        assert len(word) in (1, 2, 4)
        element = np.frombuffer(word * (dtype.itemsize // len(word)), dtype)[0]
        if dtype.kind in "iu":
            assert int(element) == value
        else:
            assert float(element) == pytest.approx(value, rel=1e-6), (dtype, extreme)
            assert np.isfinite(float(element))  # finite: a zero mask times it stays zero


def test_a_bool_a_complex_number_and_a_structure_get_loud_values_too():
    assert extreme_fill(np.dtype(np.bool_), LARGEST) == b"\x01"
    assert extreme_fill(np.dtype(np.bool_), SMALLEST) == b"\x00"
    part = extreme_fill(np.dtype(np.complex64), SMALLEST)
    number = np.frombuffer(part * 2, np.complex64)[0]
    assert number.real == number.imag == np.finfo(np.float32).min
    pair = np.dtype([("key", "<i4"), ("value", "<f4")])
    assert extreme_fill(pair, LARGEST) == b"\x7f" and extreme_fill(pair, SMALLEST) == b"\x80"


GUARD = float(np.frombuffer(b"\xa5" * 4, np.float32)[0])  # what a guard zone holds: -2.9e-16
POISON = np.float32(np.nan)
SOURCES = ["x:before", "x:after", "y:before", "y:after", "y:contents"]


class Model:
    """A kernel in numpy, run as the runs of stray_reads would run it on a GPU: `kernel` maps
    what each source holds (a float32 value, one for all its elements) and the run's index to
    the outputs."""

    def __init__(
        self,
        kernel: Callable[[Mapping[str, float], int], dict[str, np.ndarray]],
        expected: Mapping[str, np.ndarray] | None = None,
    ):
        self.kernel, self.runs = kernel, 0
        self.verified = kernel(self._held({}), 0)
        self.expected = expected or self.verified
        self.last = self.verified

    @staticmethod
    def _held(loud: Mapping[str, Extreme]) -> dict[str, float]:
        held = {source: GUARD for source in SOURCES}
        held["y:contents"] = POISON
        for source, extreme in loud.items():
            word = extreme_fill(np.dtype(np.float32), extreme)
            held[source] = float(np.frombuffer(word, np.float32)[0])
        return held

    def digests(self, outputs: Mapping[str, np.ndarray]) -> dict[str, int]:
        return {name: hash(hashlib.sha256(a.tobytes()).digest()) for name, a in outputs.items()}

    def run(self, loud: Mapping[str, Extreme]) -> Mapping[str, int]:
        self.runs += 1
        self.last = self.kernel(self._held(loud), self.runs)
        return self.digests(self.last)

    def changed(self, output: str) -> int:
        return changed_elements(self.verified[output], self.last[output])

    def wrong(self, output: str) -> int:
        return mismatch_count(self.last[output], self.expected[output], None)

    def found(self) -> list[Dependence]:
        return stray_reads(self, SOURCES, self.digests(self.verified))


X = np.random.default_rng(1).standard_normal(100).astype(np.float32)
SUMS = (X + np.append(X[1:], np.float32(0))).astype(np.float32)


def test_a_kernel_that_depends_on_nothing_outside_costs_two_runs():
    model = Model(lambda held, run: {"y": X + np.float32(1)})
    assert model.found() == [] and model.runs == 2


def test_a_sum_that_reads_one_past_the_end_depends_on_the_bytes_after_x():
    def stencil(held, run):
        y = SUMS.copy()
        y[-1] = X[-1] + np.float32(held["x:after"])
        return {"y": y}

    assert Model(stencil).found() == [Dependence("y", "x:after", 1)]


def test_a_read_thrown_away_passes():
    def ignores(held, run):
        right = np.append(X[1:], np.float32(held["x:after"]))  # x[n] read for the last
        return {"y": X + np.where(np.arange(X.size) + 1 < X.size, right, np.float32(0))}

    model = Model(ignores)
    assert model.found() == [] and model.runs == 2


def test_a_zero_mask_times_a_stray_value_is_no_dependence():
    """0 x -2.9e-16 is -0, 0 x 3.4e38 is +0: other bits, the same value."""

    def masked(held, run):
        right = np.append(X[1:], np.float32(held["x:after"]))
        return {"y": right * (np.arange(X.size) + 1 < X.size).astype(np.float32)}

    assert Model(masked).found() == []


@pytest.mark.parametrize(
    ("op", "side"), [(np.fmax, "x:after"), (np.fmin, "x:after"), (np.fmax, "x:before")]
)
def test_a_max_or_a_min_that_hides_most_values_still_shows_one_extreme(op, side):
    """fmax ignores NaN and anything below the window's largest; fmin anything above its
    smallest. The extreme on the right side shows through either."""

    def window(held, run):
        y = X.copy()
        at = -1 if side == "x:after" else 0
        y[at] = op(X[at], np.float32(held[side]))
        return {"y": y}

    assert Model(window).found() == [Dependence("y", side, 1)]


def test_an_output_read_before_it_is_written_depends_on_its_own_contents():
    def reads_first(held, run):
        return {"y": np.fmax(np.float32(held["y:contents"]), X)}  # NaN: fmax gives x

    assert Model(reads_first, {"y": X}).found() == [Dependence("y", "y:contents", X.size)]


def test_atomics_that_vary_within_the_tolerance_are_not_a_dependence():
    def atomics(held, run):
        noise = np.random.default_rng(run).standard_normal(X.size).astype(np.float32)
        return {"y": X + np.float32(1e-7) * noise}

    assert Model(atomics, {"y": X}).found() == []


def test_atomics_beside_a_read_before_the_start_are_judged_by_the_tolerance():
    def atomics(held, run):
        noise = np.random.default_rng(run).standard_normal(X.size).astype(np.float32)
        y = X + np.float32(1e-7) * noise
        y[0] += np.float32(held["x:before"])
        return {"y": y}

    assert Model(atomics, {"y": X}).found() == [Dependence("y", "x:before", 1)]


def test_a_kernel_wrong_after_its_first_launch_is_left_to_the_fresh_inputs_check():
    def correct_once(held, run):
        if run == 0:
            return {"y": X + np.float32(1)}
        return {"y": np.full(X.size, np.float32(held["y:contents"]))}  # writes nothing

    assert Model(correct_once).found() == []


def test_a_kernel_that_drifts_from_launch_to_launch_accuses_no_memory():
    """Steady on the first plain rerun (the third run), different by the last: what the runs
    between saw may be its drift, not the memory; the fresh inputs' check judges it."""

    def drifts(held, run):
        y = SUMS.copy()
        y[-1] = X[-1] + np.float32(held["x:after"])
        if run >= 4:
            y[5] += 1
        return {"y": y}

    model = Model(drifts)
    assert model.found() == [] and model.runs > 4


def test_what_changes_only_when_both_sides_change_is_said_of_them_together():
    def both(held, run):
        y = X.copy()
        if held["x:before"] != GUARD and held["x:after"] != GUARD:
            y[:3] = 0
        return {"y": y}

    assert Model(both).found() == [Dependence("y", None, 3)]


def test_two_outputs_each_name_what_they_depend_on():
    def two(held, run):
        return {
            "y": X + np.float32(held["y:after"]) * np.float32(0),  # thrown away
            "z": np.append(X[:-1], np.float32(held["x:after"])),
        }

    assert Model(two).found() == [Dependence("z", "x:after", 1)]


def test_a_dependence_is_said_with_the_output_the_buffer_and_the_side():
    kinds = {"x": "input", "s": "scratch", "y": "output"}.__getitem__
    assert said(Dependence("y", "x:after", 1), kinds) == (
        "output 'y' depends on memory past the end of input 'x' (1 element changes when the "
        "bytes after 'x' change)"
    )
    assert said(Dependence("y", "s:before", 7), kinds) == (
        "output 'y' depends on memory before the start of scratch 's' (7 elements change when "
        "the bytes before 's' change)"
    )
    assert said(Dependence("y", "y:contents", 1000), kinds) == (
        "output 'y' depends on what output 'y' held before the kernel ran: it reads 'y' before "
        "writing it, or leaves some of it unwritten (1000 elements change when 'y' starts with "
        "other bytes)"
    )
    assert said(Dependence("y", None, 3), kinds).startswith(
        "output 'y' depends on memory outside its buffers (3 elements change when the bytes "
        "around every buffer"
    )
