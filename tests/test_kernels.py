"""Kernel discovery: every shipped kernel loads, and a bad spec is reported, not fatal."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernels import BrokenKernel, Kernel, discover
from harness.spec import RequireArch, RequireSm
from harness.verify import check_reference_fits
from tests.conftest import ROOT, limits_for_cpu_tests

SHIPPED = [k for k in discover(ROOT / "kernels") if isinstance(k, Kernel)]


def test_every_shipped_kernel_loads_with_two_cases_or_more():
    kernels = discover(ROOT / "kernels")
    broken = [k.reason for k in kernels if isinstance(k, BrokenKernel)]
    assert broken == []
    assert {k.classname for k in kernels} >= {
        "async_hopper.sgemm_reg_tiled",
        "async_hopper.sgemm_cp_async",
        "async_hopper.tma_add_one",
        "async_hopper.cluster_pair_sum",
    }
    for kernel in kernels:
        assert len(kernel.spec.cases) >= 2, kernel.classname


# ../shared/KERNELS.md's "needs" column, kernel by kernel (None: any target).
REQUIRED = {
    "programming_model.scale_bias": None,
    "programming_model.thread_ids": None,
    "programming_model.warp_broadcast": None,
    "programming_model.warp_allreduce_xor": None,
    "programming_model.warp_vote": None,
    "programming_model.cg_warp_reduce": None,
    "programming_model.block_reduce": None,
    "programming_model.two_pass_reduce": None,
    "programming_model.dynamic_smem_optin": None,
    "programming_model.double_buffer": None,
    "programming_model.cluster_static": RequireSm(9, 0),
    "programming_model.cluster_dynamic_launch": RequireSm(9, 0),
    "programming_model.cluster_reduce": RequireSm(9, 0),
    "programming_model.cluster_dsmem_exchange": RequireSm(9, 0),
    "programming_model.persistent_tiles": None,
    "async_hopper.sgemm_reg_tiled": None,
    "async_hopper.sgemm_cp_async": RequireSm(8, 0),
    "async_hopper.tma_add_one": RequireSm(9, 0),
    "async_hopper.cluster_pair_sum": RequireSm(9, 0),
    "async_hopper.wgmma_ws_gemm": RequireArch("sm_90a"),
    "async_copy.stencil_sync": None,
    "async_copy.stencil_memcpy_async_thread": RequireSm(8, 0),
    "async_copy.stencil_memcpy_async_block": RequireSm(8, 0),
    "async_copy.prefetch_pipeline": RequireSm(8, 0),
    "async_copy.prefetch_cp_async_ptx": RequireSm(8, 0),
}


def test_each_kernel_requires_what_the_chapter_list_says():
    shipped = {k.classname: k.spec.requires for k in SHIPPED}
    assert shipped == REQUIRED


def test_sgemm_cp_async_has_each_stage_count_as_a_case():
    (kernel,) = [k for k in discover(ROOT / "kernels") if k.name == "sgemm_cp_async"]
    names = [case.name for case in kernel.spec.cases]
    for stages in (2, 3, 4):
        assert any(name.endswith(f"stages{stages}") for name in names)


def test_a_spec_that_raises_names_its_file_and_line(planted):
    kernels = {k.name: k for k in discover(planted)}
    broken = kernels["spec_raises"]
    assert isinstance(broken, BrokenKernel)
    assert str(planted / "planted" / "spec_raises" / "spec.py") in broken.reason
    assert "line 4" in broken.reason and "KeyError" in broken.reason
    assert isinstance(kernels["add_one"], Kernel)


def test_a_spec_without_spec_object_or_source_is_broken(planted):
    (planted / "planted" / "add_one" / "spec.py").write_text("VALUE = 1\n")
    (planted / "planted" / "wrong_answer" / "wrong_answer.cu").unlink()
    kernels = {k.name: k for k in discover(planted)}
    assert "defines no SPEC" in kernels["add_one"].reason
    assert "'wrong_answer.cu' is not a file" in kernels["wrong_answer"].reason


@pytest.mark.parametrize(
    ("kernel", "case"),
    [(k, c) for k in SHIPPED for c in k.spec.cases],
    ids=lambda item: getattr(item, "classname", None) or getattr(item, "name", None),
)
def test_every_case_sets_up_and_its_reference_fits_the_outputs(kernel, case):
    """What CI can check of a spec without a GPU: setup, work and the reference's shape."""
    problem = kernel.spec.setup(case, np.random.default_rng(0), limits_for_cpu_tests())
    assert problem.launches, "a problem launches something"
    seen = problem.case_seen_by(case)
    check_reference_fits(problem.outputs, kernel.spec.reference(seen, problem.inputs))
    work = kernel.spec.work(seen)
    assert work.bytes >= 0 and work.flops >= 0
