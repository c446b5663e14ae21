"""A driver older than the binary's toolkit: a cell it cannot load is skipped
`driver-unsupported` with the versions, before any launch, never failed with the driver's error
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION). What an H200 with driver 580 (CUDA 13.0) did with nvcc 13.5:
sm_90a SASS ran, the PTX of sm_80 did not. The GPUs here are fake_workers.fake_gpu processes."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from harness.model.matrix import ComputeCapability
from harness.model.outcome import CellKind, Outcome, SkipReason
from harness.pipeline.context import RunOptions, driver_refuses
from harness.pipeline.running import Workers
from harness.pipeline.stages import run_target
from harness.run.device import DeviceInfo
from tests import fake_workers
from tests.conftest import PLANTED

H200 = DeviceInfo(
    0, "Fake H200", ComputeCapability(9, 0), "580.159.04", "13.0", 132, 50 << 20, 227 << 10, None
)


@pytest.mark.parametrize(
    ("nvcc", "way", "refused"),
    [
        ("13.0.88", "ptx-jit", None),  # its own release
        ("12.9.86", "ptx-jit", None),  # older
        ("13.5.37", "sass", None),  # minor-version compatibility
        (
            "13.5.37",
            "ptx-jit",
            "cannot JIT the PTX of nvcc 13.5.37, which needs a driver of CUDA 13.5",
        ),
        ("14.0.1", "sass", "cannot load a binary of nvcc 14.0.1, a newer CUDA major"),
    ],
)
def test_what_a_driver_of_cuda_13_0_loads(toolchain, nvcc, way, refused):
    said = driver_refuses(dataclasses.replace(toolchain, version=nvcc), H200, way)
    if refused is None:
        assert said is None
    else:
        assert said.startswith("compiled, never run here: driver 580.159.04 (CUDA 13.0) ")
        assert refused in said


def test_a_driver_whose_version_is_unknown_is_not_refused(toolchain):
    unknown = dataclasses.replace(H200, cuda_driver="unknown")
    newer = dataclasses.replace(toolchain, version="13.5.37")
    assert driver_refuses(newer, unknown, "ptx-jit") is None


def test_cells_of_a_newer_toolkit_skip_where_the_driver_cannot_load_them(
    matrix, toolchain, tmp_path
):
    """Every target pinned to 13.5 (nvcc says 13.5): sm_90a runs on the CC 9.0 GPU, sm_80's
    cells, which it would JIT from PTX, skip with the versions; nothing fails."""
    kernels = tmp_path / "kernels"
    shutil.copytree(PLANTED / "planted" / "add_one", kernels / "planted" / "add_one")
    newer = dataclasses.replace(toolchain, version="13.5.37")
    targets = {
        name: dataclasses.replace(t, toolkit=dataclasses.replace(t.toolkit, version="13.5"))
        for name, t in matrix.targets.items()
    }
    pinned = dataclasses.replace(matrix, targets=targets)
    found = {}
    for name in ("sm_90a", "sm_80"):
        options = RunOptions(targets[name], (kernels,), tmp_path / name, tmp_path / "cache")
        result = run_target(
            pinned, options, newer, [H200], Workers(fake_workers.fake_gpu, fake_workers.serve_case)
        )
        found[name] = [c for c in result.cells if c.kind is CellKind.CASE]
    assert found["sm_90a"] and all(c.outcome is Outcome.PASSED for c in found["sm_90a"])
    assert found["sm_80"] and all(
        c.skip_reason is SkipReason.DRIVER_UNSUPPORTED for c in found["sm_80"]
    )
    assert "cannot JIT the PTX of nvcc 13.5.37" in found["sm_80"][0].message
