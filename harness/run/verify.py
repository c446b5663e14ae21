"""Compares a kernel's outputs with its reference, with CONTRACT.md's tolerances by dtype."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.spec import Tolerance

DEFAULT_TOLERANCE = {
    np.dtype(np.float32): Tolerance(rtol=1e-4, atol=1e-4),
    np.dtype(np.float64): Tolerance(rtol=1e-4, atol=1e-4),
    np.dtype(np.float16): Tolerance(rtol=1e-2, atol=1e-2),
}
LOW_PRECISION = Tolerance(rtol=1e-2, atol=1e-2)  # bf16 and other 2-byte floats
SHOWN_INDICES = 5


class SpecError(Exception):
    """The reference does not fit the outputs: the spec is wrong, not the kernel."""


def tolerance_for(dtype: np.dtype) -> Tolerance | None:
    """None means exact comparison (integers, booleans)."""
    dtype = np.dtype(dtype)
    if dtype in DEFAULT_TOLERANCE:
        return DEFAULT_TOLERANCE[dtype]
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return LOW_PRECISION
    return None


def check_reference_fits(
    outputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]
) -> None:
    if set(expected) != set(outputs):
        raise SpecError(
            f"reference returned {sorted(expected)}, but the problem's outputs are "
            f"{sorted(outputs)}"
        )
    for name, template in outputs.items():
        want = np.asarray(expected[name])
        if want.shape != template.shape or want.dtype != template.dtype:
            raise SpecError(
                f"reference {name!r} is {want.dtype}{list(want.shape)}, but the output is "
                f"{template.dtype}{list(template.shape)}"
            )


def compare(
    name: str, actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance | None
) -> str | None:
    """None when they match; else a message with the mismatch count, first indices, max errors."""
    tolerance = tolerance if tolerance is not None else tolerance_for(expected.dtype)
    if tolerance is None:
        bad = actual != expected
    else:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(a - e) <= tolerance.atol + tolerance.rtol * np.abs(e))
        bad |= np.isnan(a) != np.isnan(e)
        bad &= ~(np.isnan(a) & np.isnan(e))
    count = int(np.count_nonzero(bad))
    if count == 0:
        return None
    where = np.argwhere(bad)[:SHOWN_INDICES]
    first = ", ".join(
        f"{tuple(int(i) for i in index)}: got {actual[tuple(index)]!r}, "
        f"want {expected[tuple(index)]!r}"
        for index in where
    )
    a, e = actual[bad].astype(np.float64), expected[bad].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        abs_error = np.abs(a - e)
        rel_error = abs_error / np.abs(e)
    bound = f" (rtol {tolerance.rtol:g}, atol {tolerance.atol:g})" if tolerance else " (exact)"
    return (
        f"{name}: {count} of {expected.size} elements differ{bound}; "
        f"max abs error {_largest(abs_error):.6g}, max rel error {_largest(rel_error):.6g}; "
        f"first at {first}"
    )


def _largest(errors: np.ndarray) -> float:
    """The largest error that is a number; NaN when every differing element is NaN."""
    numbers = errors[~np.isnan(errors)]
    return float(numbers.max()) if numbers.size else float("nan")


def unchanged(name: str, before: np.ndarray, after: np.ndarray) -> str | None:
    """Bitwise, so that a NaN input rewritten as the same NaN still counts as unchanged."""
    width = before.dtype.itemsize
    old = np.ascontiguousarray(before).view(np.uint8).reshape(-1, width)
    new = np.ascontiguousarray(after).view(np.uint8).reshape(-1, width)
    changed = np.flatnonzero((old != new).any(axis=1))
    if changed.size == 0:
        return None
    first = tuple(int(i) for i in np.unravel_index(changed[0], before.shape))
    return (
        f"input {name!r} was written by the kernel: {changed.size} of {before.size} elements "
        f"changed, first at {first}"
    )
