"""The spec API's own arithmetic, and what the loader gives a spec: its .cu by default, and its
chapter's shared modules."""

from __future__ import annotations

import pytest

from harness.model.discovery import kernel_folders, load_kernel
from harness.model.errors import SpecError
from harness.spec import (
    Case,
    ceil_div,
    grid_1d,
    grid_2d,
    int32_extent,
    int32_param,
    int64_extent,
    int64_param,
)

SPEC = """\
from harness.spec import Case, KernelSpec, Work

from ..problem import WORDS

SPEC = KernelSpec(
    cases=(Case("n1", {"n": 1}), Case("n9", {"n": 9})),
    setup=None,
    reference=None,
    work=lambda case: Work(bytes=WORDS * case.params["n"]),
)
"""


def test_grids_cover_every_item():
    assert [ceil_div(n, 4) for n in (1, 4, 5, 8)] == [1, 1, 2, 2]
    assert grid_1d(1025, 256) == (5, 1, 1)
    assert grid_2d(cols=1000, rows=17, tile_cols=128, tile_rows=16) == (8, 2, 1)


def test_int32_sizes_are_checked_with_the_headroom_the_kernel_needs():
    assert int32_extent("n", 2**31 - 1) == 2**31 - 1
    assert int32_extent("n", 2**31 - 1 - 4096, headroom=4096) == 2**31 - 4097
    with pytest.raises(ValueError, match=r"n=2147483648: the kernel takes n as a 32-bit int"):
        int32_extent("n", 2**31)
    with pytest.raises(ValueError, match=r"needs 1 <= n <= 2147479551 with 4096 to spare"):
        int32_extent("n", 2**31 - 4096, headroom=4096)
    with pytest.raises(ValueError, match=r"n=0"):
        int32_param(Case("empty", {"n": 0}), "n")


def test_int64_sizes_go_past_int32_and_are_checked_as_those_are():
    assert int64_extent("n", 2**31 + 63) == 2**31 + 63
    assert int64_param(Case("big", {"n": 2**63 - 1}), "n") == 2**63 - 1
    with pytest.raises(ValueError, match=r"n=9223372036854775808: the kernel takes n as a 64-bit"):
        int64_extent("n", 2**63)
    with pytest.raises(ValueError, match=r"needs 1 <= n <= 9223372036854771711 with 4096 to spare"):
        int64_extent("n", 2**63 - 4096, headroom=4096)
    with pytest.raises(ValueError, match=r"n=-1"):
        int64_param(Case("negative", {"n": -1}), "n", low=0)


def _chapter(root, words: int):
    chapter = root / "chapter"
    (chapter / "scale").mkdir(parents=True)
    (chapter / "problem.py").write_text(f"WORDS = {words}\n")
    (chapter / "scale" / "spec.py").write_text(SPEC)
    (chapter / "scale" / "scale.cu").write_text('extern "C" __global__ void scale() {}\n')
    return chapter


def test_a_spec_finds_its_cu_by_its_folder_and_imports_its_chapter_module(tmp_path):
    _chapter(tmp_path / "one", words=2)
    _chapter(tmp_path / "two", words=3)  # the same chapter and kernel names, another tree
    one, two = [load_kernel(f) for t in ("one", "two") for f in kernel_folders(tmp_path / t)]
    assert one.spec.source == "scale.cu" and one.source.is_file()
    case = one.spec.cases[1]
    assert (one.spec.work(case).bytes, two.spec.work(case).bytes) == (18, 27)


def test_a_missing_chapter_module_is_the_kernels_error(tmp_path):
    chapter = _chapter(tmp_path, words=1)
    (chapter / "problem.py").unlink()
    (folder,) = kernel_folders(tmp_path)
    with pytest.raises(SpecError, match="import failed at line 3: ModuleNotFoundError"):
        load_kernel(folder)
