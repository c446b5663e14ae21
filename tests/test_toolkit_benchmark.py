"""scripts/toolkit_benchmark.py: the matrix it times `check` with, cut to each target's first
toolkits, is the project's in all else."""

from __future__ import annotations

import importlib.util
import sys

from harness.model.matrix import load_matrix
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "toolkits", ROOT / "scripts" / "toolkit_benchmark.py"
)
toolkits = importlib.util.module_from_spec(_spec)
sys.modules["toolkits"] = toolkits  # its dataclasses look their module up there
_spec.loader.exec_module(toolkits)


def test_the_matrix_cut_to_the_first_toolkit_keeps_each_target_and_nothing_else_changes(tmp_path):
    shipped = load_matrix(ROOT / "matrix.yaml")
    (tmp_path / "m.yaml").write_text(toolkits.first_toolkits((ROOT / "matrix.yaml").read_text(), 1))
    cut = load_matrix(tmp_path / "m.yaml")
    assert list(cut.targets) == ["sm_80", "sm_90a", "sm_100a"]
    for name, column in cut.targets.items():
        assert column == shipped.targets[name]  # the first toolkit's column, as it was
    assert (cut.timer, cut.devices, cut.sanitize) == (
        shipped.timer,
        shipped.devices,
        shipped.sanitize,
    )
    (tmp_path / "all.yaml").write_text(
        toolkits.first_toolkits((ROOT / "matrix.yaml").read_text(), 2)
    )
    assert load_matrix(tmp_path / "all.yaml").targets.keys() == shipped.targets.keys()
