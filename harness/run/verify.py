"""Compares a kernel's outputs with its reference, with docs/CONTRACT.md's tolerances by dtype.

Outputs run to hundreds of MB, so the check that passes is the fast one: the arrays are split
into pieces small enough to stay in a core's cache while each takes its few passes, the pieces go
to the host's cores (numpy releases the GIL), and nothing is widened beyond float32 unless it is
float64. Only a mismatch pays for the full, float64 account of where and by how much.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor

import ml_dtypes
import numpy as np

from harness.model.errors import SpecError
from harness.model.spec import MOST_DEVICE_BYTES, Case, KernelSpec, Problem, Tolerance, Work

DEFAULT_TOLERANCE = {
    np.dtype(np.float32): Tolerance(rtol=1e-4, atol=1e-4),
    np.dtype(np.float64): Tolerance(rtol=1e-4, atol=1e-4),
    np.dtype(np.float16): Tolerance(rtol=1e-2, atol=1e-2),
}
LOW_PRECISION = Tolerance(rtol=1e-2, atol=1e-2)  # bf16 and other 2-byte floats
SHOWN_INDICES = 5
PIECE_ELEMENTS = 1 << 18  # 1 MiB of float32: a piece stays in cache across its passes


def tolerance_for(dtype: np.dtype) -> Tolerance | None:
    """None means exact comparison (integers, booleans). Floats of one byte or less (fp8 e4m3
    and e5m2, fp6, fp4) get one step of their own at 1.0 (the format's epsilon: 0.125 for e4m3,
    0.25 for e5m2), relative and absolute: a correct kernel that rounds once is within it."""
    dtype = np.dtype(dtype)
    if dtype in DEFAULT_TOLERANCE:
        return DEFAULT_TOLERANCE[dtype]
    if dtype.kind == "c":
        return None
    try:
        epsilon = float(ml_dtypes.finfo(dtype).eps)
    except (TypeError, ValueError):  # not a float: integers, booleans, structures
        return None
    return LOW_PRECISION if dtype.itemsize >= 2 else Tolerance(rtol=epsilon, atol=epsilon)


def check_reference_fits(
    classname: str,
    outputs: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    case: Case | None = None,
) -> None:
    """SpecError when the reference does not fit the outputs, or `case` sets a tolerance for
    an output there is not: the spec is wrong, not the kernel."""
    tolerance = case.tolerance if case else None
    if isinstance(tolerance, Mapping) and not set(tolerance) <= set(outputs):
        raise SpecError(
            f"{classname}: case {case.name if case else ''!r} sets a tolerance for "
            f"{sorted(set(tolerance) - set(outputs))}, which are not outputs (the outputs: "
            f"{sorted(outputs)})"
        )
    if not isinstance(expected, Mapping):
        raise SpecError(
            f"{classname}: reference returned a {type(expected).__name__}, not a mapping of each "
            "output's name to its array"
        )
    if set(expected) != set(outputs):
        raise SpecError(
            f"{classname}: reference returned {sorted(expected)}, but the problem's outputs are "
            f"{sorted(outputs)}"
        )
    for name, template in outputs.items():
        want = np.asarray(expected[name])
        if want.shape != template.shape or want.dtype != template.dtype:
            raise SpecError(
                f"{classname}: reference {name!r} is {want.dtype}{list(want.shape)}, but the "
                f"output is {template.dtype}{list(template.shape)}"
            )


def checked_work(classname: str, work: object) -> Work:
    """What work() returned, when it is a Work of counts (finite, 0 or more); else the spec's
    error: a negative count would show as negative GB/s, not as a broken spec."""
    if not isinstance(work, Work):
        raise SpecError(f"{classname} spec work() returned {work!r}, not a Work")
    for count in ("bytes", "flops"):
        value = getattr(work, count)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise SpecError(
                f"{classname} spec work() returned {count}={value!r}: a count, 0 or more"
            )
    return work


def declared_bytes(classname: str, spec: KernelSpec, case: Case) -> int | None:
    """The device memory `case` declares it needs (KernelSpec.device_bytes), checked: a byte
    count, 0 to MOST_DEVICE_BYTES; None where the spec declares none. Else the spec's error,
    naming the kernel, the case and the field."""
    if spec.device_bytes is None:
        return None
    where = f"{classname} spec device_bytes() of case {case.name!r}"
    if not callable(spec.device_bytes):
        raise SpecError(f"{where}: device_bytes is {spec.device_bytes!r}, not a function")
    try:
        needed = spec.device_bytes(case)
    except Exception as error:  # a user's spec: what it raises is its cell's
        raise SpecError(f"{where} raised {type(error).__name__}: {error}") from error
    if isinstance(needed, bool) or not isinstance(needed, int | np.integer):
        raise SpecError(f"{where} returned {needed!r}, not a whole number of bytes")
    if not 0 <= needed <= MOST_DEVICE_BYTES:
        raise SpecError(
            f"{where} returned {needed}: a byte count, 0 to {MOST_DEVICE_BYTES} (1 PiB)"
        )
    return int(needed)


def buffer_bytes(problem: Problem) -> int:
    """What the problem's buffers (inputs, outputs, scratch) take, in bytes."""
    groups = (problem.inputs, problem.outputs, problem.scratch)
    return sum(int(getattr(array, "nbytes", 0)) for group in groups for array in group.values())


def check_declared_bytes(classname: str, problem: Problem, declared: int | None) -> None:
    """The spec's error where setup() made buffers larger than its case declared: the skip
    that declaration decides would otherwise let a case past that cannot fit."""
    made = buffer_bytes(problem)
    if declared is not None and made > declared:
        raise SpecError(
            f"{classname}: setup() made buffers of {made} bytes, more than the {declared} its "
            "case declares (device_bytes)"
        )


def compare(
    name: str,
    actual: np.ndarray,
    expected: np.ndarray,
    tolerance: Tolerance | None,
    cores: Executor | None = None,
) -> str | None:
    """None when they match; else a message with the mismatch count, first indices, max errors.

    Both NaN is a match, and so are equal infinities; a NaN against a number is not.
    """
    tolerance = tolerance if tolerance is not None else tolerance_for(expected.dtype)
    count = mismatch_count(actual, expected, tolerance, cores)
    if count == 0:
        return None
    bad = _mismatch_mask(actual, expected, tolerance)
    wrong_at = np.argwhere(bad)[:SHOWN_INDICES]
    first = ", ".join(
        f"{tuple(int(i) for i in index)}: got {actual[tuple(index)]!r}, "
        f"want {expected[tuple(index)]!r}"
        for index in wrong_at
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


def mismatch_count(
    actual: np.ndarray,
    expected: np.ndarray,
    tolerance: Tolerance | None,
    cores: Executor | None = None,
) -> int:
    """How many elements of `actual` are beyond `tolerance` (its dtype's default when None) of
    `expected`, as compare() counts them."""
    tolerance = tolerance if tolerance is not None else tolerance_for(expected.dtype)
    got, want = _flat(actual), _flat(expected)
    return sum(_spread(cores, lambda part: _mismatches(got[part], want[part], tolerance), got.size))


def changed_elements(before: np.ndarray, after: np.ndarray) -> int:
    """How many elements changed value: floats by value, +0 and -0 being one and every NaN
    another (a zero mask times a stray value changes no element, whatever the value's sign),
    anything else bit for bit."""
    if tolerance_for(before.dtype) is not None:  # a float
        work = _working_dtype(before.dtype)
        old, new = _flat(before).astype(work), _flat(after).astype(work)
        with np.errstate(invalid="ignore"):
            same = (old == new) | (np.isnan(old) & np.isnan(new))
        return int(np.count_nonzero(~same))
    width = max(before.dtype.itemsize, 1)
    old, new = (_flat(a).view(np.uint8).reshape(-1, width) for a in (before, after))
    return int(np.count_nonzero((old != new).any(axis=1)))


def _flat(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1)


def _spread(
    cores: Executor | None, work: Callable[[slice], int], size: int, piece: int = PIECE_ELEMENTS
) -> Iterable[int]:
    """`work` over consecutive pieces of `size` elements, on `cores` when given."""
    parts = [slice(start, start + piece) for start in range(0, size, piece)]
    if cores is None or len(parts) < 2:
        return map(work, parts)
    return cores.map(work, parts)


def _working_dtype(dtype: np.dtype) -> np.dtype:
    """float32 holds every float of 4 bytes or fewer exactly (fp16, bf16): no wider copies."""
    return np.dtype(np.float64) if dtype.itemsize > 4 else np.dtype(np.float32)


def _mismatches(got: np.ndarray, want: np.ndarray, tolerance: Tolerance | None) -> int:
    if tolerance is None:
        return int(np.count_nonzero(got != want))
    work = _working_dtype(want.dtype)
    a, e = got.astype(work, copy=False), want.astype(work, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.subtract(a, e)
        np.abs(error, out=error)
        bound = np.abs(e)
        bound *= work.type(tolerance.rtol)
        bound += work.type(tolerance.atol)
        ok = error <= bound  # False wherever either side is NaN
    ok &= np.isfinite(e)  # an infinite bound would let any infinity pass for another
    ok |= a == e  # equal infinities
    if ok.all():
        return 0
    bad = ~ok
    bad &= ~(np.isnan(a) & np.isnan(e))
    return int(np.count_nonzero(bad))


def _mismatch_mask(
    actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance | None
) -> np.ndarray:
    """Where they differ, in float64: the slow path, taken only to describe a mismatch."""
    if tolerance is None:
        return np.asarray(actual != expected)
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore"):
        close = (np.abs(a - e) <= tolerance.atol + tolerance.rtol * np.abs(e)) & np.isfinite(e)
        bad = ~(close | (a == e))
    bad &= ~(np.isnan(a) & np.isnan(e))
    return np.asarray(bad)


def _largest(errors: np.ndarray) -> float:
    """The largest error that is a number; NaN when every differing element is NaN."""
    numbers = errors[~np.isnan(errors)]
    return float(numbers.max()) if numbers.size else float("nan")


def unchanged(
    name: str, before: np.ndarray, after: np.ndarray, cores: Executor | None = None
) -> str | None:
    """Bitwise, so that a NaN input rewritten as the same NaN still counts as unchanged."""
    old, new = _flat(before).view(np.uint8), _flat(after).view(np.uint8)

    def differs(part: slice) -> bool:
        return not np.array_equal(old[part], new[part])

    if not any(_spread(cores, differs, old.size, PIECE_ELEMENTS * 4)):
        return None
    width = before.dtype.itemsize
    changed = np.flatnonzero((old.reshape(-1, width) != new.reshape(-1, width)).any(axis=1))
    first = tuple(int(i) for i in np.unravel_index(changed[0], before.shape))
    return (
        f"input {name!r} was written by the kernel: {changed.size} of {before.size} elements "
        f"changed, first at {first}"
    )
