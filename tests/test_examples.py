"""The examples adopters copy from (examples/kernels): each compiles for every target and every
case of it checks clean on the CPU, as the book's kernels do. A new example is covered here with
no edit."""

from __future__ import annotations

import pytest

from harness.model.errors import Unavailable
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import run_target
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "kernels"


@pytest.mark.corpus
@pytest.mark.parametrize("target_name", ["sm_80", "sm_90a", "sm_100a"])
def test_every_example_builds_and_checks_clean_on_every_target(
    matrix, toolchain, compile_cache, tmp_path, target_name
):
    options = RunOptions(matrix.targets[target_name], (EXAMPLES,), tmp_path, compile_cache)
    result = run_target(matrix, options, toolchain, Unavailable("no GPU in this test"))
    assert result.ok
    compiles = [c for c in result.cells if c.kind is CellKind.COMPILE]
    assert compiles and all(c.outcome is Outcome.PASSED for c in compiles), [
        (c.classname, c.message) for c in compiles if c.outcome is not Outcome.PASSED
    ]
    cases = [c for c in result.cells if c.kind is CellKind.CASE]
    assert all(c.skip_reason is SkipReason.NO_DEVICE for c in cases), [
        (c.classname, c.case, c.message) for c in cases if c.skip_reason is not SkipReason.NO_DEVICE
    ]
