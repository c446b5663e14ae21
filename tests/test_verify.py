"""Verification: messages say how many, where first, and how far off."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ml_dtypes import bfloat16

from harness.model.errors import SpecError
from harness.run.launch import SECOND_POISON_BYTE
from harness.run.verify import (
    LOW_PRECISION,
    changed_elements,
    check_reference_fits,
    checked_work,
    compare,
    mismatch_count,
    tolerance_for,
    unchanged,
)
from harness.spec import Case, Tolerance, Work


def test_matching_floats_within_tolerance_pass():
    want = np.linspace(-1, 1, 100, dtype=np.float32)
    assert compare("y", want * (1 + 5e-5), want, None) is None


def test_a_mismatch_reports_count_indices_and_errors():
    want = np.zeros((4, 5), np.float32)
    got = want.copy()
    got[1, 2], got[3, 4] = 0.5, -2.0
    message = compare("c", got, want, None)
    assert "c: 2 of 20 elements differ (rtol 0.0001, atol 0.0001)" in message
    assert "first at (1, 2): got" in message and "(3, 4)" in message
    assert "max abs error 2" in message and "max rel error inf" in message


def test_nan_never_passes_and_unwritten_poison_is_caught():
    want = np.ones(8, np.float32)
    got = want.copy()
    got[3] = np.nan
    assert "1 of 8 elements differ" in compare("y", got, want, None)


def test_integers_are_exact():
    want = np.arange(10, dtype=np.int32)
    got = want.copy()
    got[9] = 8
    assert tolerance_for(np.int32) is None
    assert "1 of 10 elements differ (exact)" in compare("ranks", got, want, None)


def test_dtype_defaults_follow_the_contract():
    assert tolerance_for(np.float32) == Tolerance(1e-4, 1e-4)
    assert tolerance_for(np.float16) == Tolerance(1e-2, 1e-2)


def test_case_tolerance_overrides_the_default():
    want = np.full(4, 100.0, np.float32)
    assert compare("y", want + 0.05, want, Tolerance(rtol=0, atol=0.1)) is None
    assert compare("y", want + 0.05, want, None) is not None


@pytest.mark.parametrize(
    ("dtype", "epsilon"),
    [(ml_dtypes.float8_e4m3fn, 0.125), (ml_dtypes.float8_e5m2, 0.25)],
)
def test_fp8_outputs_are_within_one_step_of_their_format_by_default(dtype, epsilon):
    assert tolerance_for(np.dtype(dtype)) == Tolerance(epsilon, epsilon)
    want = np.array([1.0, 2.0, -4.0, 0.5], dtype)
    one_step = np.array([1.0 + epsilon, 2.0, -4.0, 0.5], dtype)  # a rounding the other way
    assert compare("y", one_step, want, None) is None
    off = np.array([1.0, 3.0, -4.0, 0.5], dtype)  # 2 -> 3: far beyond a rounding
    assert "y: 1 of 4 elements differ" in compare("y", off, want, None)
    assert tolerance_for(np.dtype(bfloat16)) == LOW_PRECISION


def test_a_case_sets_tolerances_per_output_and_the_rest_keep_their_dtype_s():
    case = Case("n4", tolerance={"loose": Tolerance(rtol=0, atol=0.5)})
    want = np.full(4, 10.0, np.float32)
    assert case.tolerance_of("loose") == Tolerance(0, 0.5) and case.tolerance_of("tight") is None
    assert compare("loose", want + 0.25, want, case.tolerance_of("loose")) is None
    assert compare("tight", want + 0.25, want, case.tolerance_of("tight")) is not None
    outputs = {"loose": want, "tight": want}
    check_reference_fits("k.k", outputs, outputs, case)
    typo = Case("n4", tolerance={"lose": Tolerance(rtol=0, atol=0.5)})
    with pytest.raises(SpecError, match=r"case 'n4' sets a tolerance for \['lose'\], which are"):
        check_reference_fits("k.k", outputs, outputs, typo)


def test_a_written_input_is_reported():
    before = np.arange(6, dtype=np.float32)
    after = before.copy()
    after[2] = 9
    assert unchanged("x", before, before.copy()) is None
    message = unchanged("x", before, after)
    assert message == "input 'x' was written by the kernel: 1 of 6 elements changed, first at (2,)"


def test_a_reference_of_the_wrong_shape_or_dtype_is_a_spec_error():
    outputs = {"y": np.empty((3, 4), np.float32)}
    with pytest.raises(
        SpecError,
        match=r"^ch\.k: reference 'y' is float32\[12\], but the output is float32\[3, 4\]",
    ):
        check_reference_fits("ch.k", outputs, {"y": np.zeros(12, np.float32)})
    with pytest.raises(SpecError, match=r"^ch\.k: .*float64"):
        check_reference_fits("ch.k", outputs, {"y": np.zeros((3, 4))})
    with pytest.raises(SpecError, match=r"^ch\.k: reference returned \['z'\]"):
        check_reference_fits("ch.k", outputs, {"z": np.zeros((3, 4), np.float32)})
    with pytest.raises(SpecError, match=r"^ch\.k: reference returned a list, not a mapping"):
        check_reference_fits("ch.k", outputs, [np.zeros((3, 4), np.float32)])
    with pytest.raises(SpecError, match=r"^ch\.k: reference returned a NoneType, not a mapping"):
        check_reference_fits("ch.k", outputs, None)


@pytest.mark.parametrize(
    ("work", "said"),
    [
        (Work(bytes=-800), "bytes=-800: a count, 0 or more"),
        (Work(flops=float("nan")), "flops=nan"),
        (Work(bytes="8"), "bytes='8'"),
        (None, "returned None, not a Work"),
        ({"bytes": 8}, "returned {'bytes': 8}, not a Work"),
    ],
)
def test_a_work_that_is_no_count_is_the_specs_error(work, said):
    with pytest.raises(SpecError, match=r"^ch\.k spec work\(\) returned ") as error:
        checked_work("ch.k", work)
    assert said in str(error.value)
    assert checked_work("ch.k", Work(bytes=8, flops=0)) == Work(bytes=8, flops=0)


def test_bf16_outputs_compare_at_bf16_precision_and_name_the_bad_element():
    expected = np.array([1.0, 2.0, 100.0, -3.0], np.float32).astype(bfloat16)
    one_step_off = np.array([1.0078125, 2.0, 100.0, -3.0], np.float32).astype(bfloat16)
    assert tolerance_for(expected.dtype) == LOW_PRECISION
    assert compare("c", one_step_off, expected, None) is None  # one bf16 step at 1.0
    wrong = np.array([1.0, 2.0, 108.0, -3.0], np.float32).astype(bfloat16)
    message = compare("c", wrong, expected, None)
    assert message.startswith("c: 1 of 4 elements differ (rtol 0.01, atol 0.01)")
    assert "first at (2,)" in message
    nan = np.full(4, np.nan, np.float32).astype(bfloat16)  # the harness's 0xFFFF poison
    assert compare("c", nan, expected, None).startswith("c: 4 of 4 elements differ")


def test_an_element_left_at_the_second_poison_never_matches_an_expected_nan():
    """What verifying again relies on: 0x5A bytes are a finite number in every float width."""
    for dtype in (np.float16, np.float32, np.float64, bfloat16):
        raw = np.full(4 * np.dtype(dtype).itemsize, SECOND_POISON_BYTE, np.uint8)
        unwritten = raw.view(dtype)
        assert np.isfinite(unwritten.astype(np.float64)).all(), dtype
        message = compare("y", unwritten, np.full(4, np.nan, dtype=dtype), None)
        assert message and message.startswith("y: 4 of 4 elements differ"), dtype


def test_the_pieces_spread_over_cores_count_every_mismatch_once():
    from concurrent.futures import ThreadPoolExecutor

    from harness.run.verify import PIECE_ELEMENTS

    want = np.random.default_rng(0).standard_normal(3 * PIECE_ELEMENTS + 17).astype(np.float32)
    got = want.copy()
    wrong = [0, PIECE_ELEMENTS - 1, PIECE_ELEMENTS, 2 * PIECE_ELEMENTS + 5, got.size - 1]
    got[wrong] += 1.0
    with ThreadPoolExecutor(4) as cores:
        spread = compare("y", got.reshape(-1, 1), want.reshape(-1, 1), None, cores)
        assert unchanged("x", want, want.copy(), cores) is None
        changed = want.copy()
        changed[-1] = -changed[-1]  # in the last, partial piece
        assert "1 of" in unchanged("x", want, changed, cores)
    assert f"y: {len(wrong)} of {got.size} elements differ" in spread
    assert spread == compare("y", got.reshape(-1, 1), want.reshape(-1, 1), None)  # one core


@pytest.mark.parametrize("dtype", [np.float16, bfloat16, np.float32, np.float64])
def test_infinities_and_nans_match_only_their_own_kind(dtype):
    inf, nan = np.inf, np.nan
    want = np.array([inf, -inf, nan, 1.0, inf, nan, 2.0], np.float32).astype(dtype)
    got = np.array([inf, -inf, nan, 1.0, -inf, 3.0, nan], np.float32).astype(dtype)
    message = compare("y", got, want, None)
    assert "3 of 7 elements differ" in message, message  # -inf for inf, 3 for NaN, NaN for 2
    assert "first at (4,)" in message


def test_low_precision_floats_are_judged_as_in_float64():
    rng = np.random.default_rng(3)
    want = rng.standard_normal(10_000).astype(np.float32).astype(bfloat16)
    off = rng.choice([0.0, 0.005, 0.05], size=want.size).astype(np.float32)  # in, in, out of 1e-2
    got = (want.astype(np.float32) * (1 + off)).astype(bfloat16)
    wide = got.astype(np.float64), want.astype(np.float64)
    expected = np.count_nonzero(~(np.abs(wide[0] - wide[1]) <= 1e-2 + 1e-2 * np.abs(wide[1])))
    assert expected > 1000
    assert f"y: {expected} of 10000 elements differ" in compare("y", got, want, None)


def test_the_mismatch_count_is_compares_and_takes_a_tolerance_or_the_dtypes():
    want = np.linspace(-1, 1, 1000, dtype=np.float32)
    got = want.copy()
    got[[3, 500]] += np.float32(0.01)  # beyond float32's 1e-4, within a 0.1 tolerance
    got[7] = np.nan
    assert mismatch_count(got, want, None) == 3
    assert mismatch_count(got, want, Tolerance(rtol=0.1, atol=0.1)) == 1  # NaN still counts
    assert "3 of 1000 elements differ" in compare("y", got, want, None)
    assert mismatch_count(np.array([1, 2], np.uint8), np.array([1, 3], np.uint8), None) == 1


@pytest.mark.parametrize("dtype", [bfloat16, np.float32, np.float64])
def test_changed_elements_are_floats_whose_value_changed(dtype):
    before = np.array([1.0, np.nan, -0.0, 4.0, 2.0], np.float32).astype(dtype)
    after = before.copy()
    assert changed_elements(before, after) == 0
    after[1] = -np.nan  # a NaN of another sign: still NaN
    after[2] = 0.0  # +0 for -0: what 0 * x gives for an x of the other sign
    after[3] = 5.0
    after[4] = np.nan
    assert changed_elements(before, after) == 2


def test_changed_elements_are_anything_else_bit_for_bit():
    grid = np.zeros((3, 4), np.int32)
    moved = grid.copy()
    moved[2, 3] = 1
    assert changed_elements(grid, moved) == 1
    pair = np.dtype([("key", "<i4"), ("value", "<f4")])
    kept, rewritten = np.zeros(3, pair), np.zeros(3, pair)
    rewritten["value"][1] = -0.0
    assert changed_elements(kept, rewritten) == 1
