"""Kernel discovery: every shipped kernel loads, and a bad spec is reported, not fatal."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from harness.model import declared, spec_children
from harness.model.discovery import Kernel, kernel_folders, load_kernel
from harness.model.errors import SpecError
from harness.spec import RequireAny, RequireArch
from tests.conftest import CORPUS, ROOT, SLOWDOWN, limits_for_cpu_tests


def _load_all(root) -> dict[str, Kernel | SpecError]:
    """Every kernel folder under `root` by name: its Kernel, or the SpecError it raised."""
    loaded: dict[str, Kernel | SpecError] = {}
    for folder in kernel_folders(root):
        try:
            loaded[folder.name] = load_kernel(folder)
        except SpecError as error:
            loaded[folder.name] = error
    return loaded


_DECLARED = {
    "source": "k.cu",
    "requires": None,
    "sass_must_contain": [],
    "cases": [{"name": "n1", "work": [4, 0, "fp32"]}],
    "vendor": None,
}

SHIPPED = {k.classname: k for k in _load_all(ROOT / "kernels").values() if isinstance(k, Kernel)}


def test_every_shipped_kernel_loads():
    kernels = _load_all(ROOT / "kernels").values()
    assert [str(k) for k in kernels if isinstance(k, SpecError)] == []


@pytest.mark.parametrize("classname", sorted(CORPUS))
def test_each_chapter_kernel_requires_what_the_book_says(classname):
    kernel = SHIPPED.get(classname)
    assert kernel is not None, f"{classname} is in kernels/KERNELS.yaml but not under kernels/"
    needs = CORPUS[classname]["needs"]
    assert str(kernel.spec.requires or "none") == needs
    assert list(kernel.spec.sass_must_contain) == CORPUS[classname].get("sass", [])
    assert len(kernel.spec.cases) >= 2, "a typical size and an edge size, at least"


def test_sgemm_cp_async_has_each_stage_count_as_a_case():
    (kernel,) = [
        load_kernel(f) for f in kernel_folders(ROOT / "kernels") if f.name == "sgemm_cp_async"
    ]
    names = [case.name for case in kernel.spec.cases]
    for stages in (2, 3, 4):
        assert any(name.endswith(f"stages{stages}") for name in names)


def test_a_spec_that_raises_names_its_file_and_line(planted):
    kernels = _load_all(planted)
    broken = kernels["spec_raises"]
    assert isinstance(broken, SpecError)
    assert str(planted / "planted" / "spec_raises" / "spec.py") in str(broken)
    assert "line 4" in str(broken) and "KeyError" in str(broken)
    assert isinstance(kernels["add_one"], Kernel)


def test_a_spec_without_spec_object_or_source_is_broken(planted):
    (planted / "planted" / "add_one" / "spec.py").write_text("VALUE = 1\n")
    (planted / "planted" / "wrong_answer" / "wrong_answer.cu").unlink()
    kernels = _load_all(planted)
    assert isinstance(kernels["add_one"], SpecError)
    assert "defines no SPEC" in str(kernels["add_one"])
    assert isinstance(kernels["wrong_answer"], SpecError)
    assert "'wrong_answer.cu' is not a file" in str(kernels["wrong_answer"])


@pytest.mark.parametrize("name", ["compile", "spec", "compile(VEC=2)"])
def test_a_case_named_after_a_kernel_cell_is_refused_naming_the_spec(planted, name):
    spec = planted / "planted" / "add_one" / "spec.py"
    spec.write_text(spec.read_text().replace('Case("n1", {"n": 1})', f'Case("{name}", {{"n": 1}})'))
    broken = _load_all(planted)["add_one"]
    assert isinstance(broken, SpecError)
    assert str(spec) in str(broken)
    assert f"case name '{name}' is the name of the kernel's own {name} cell" in str(broken)


@pytest.mark.parametrize(
    ("defines", "said"),
    [
        ('{"VEC": 1.5}', "define VEC is 1.5: a macro's value is an int or a string"),
        ('{"VEC": "4 -G"}', "define VEC='4 -G': a value of letters, digits"),
        ('{"-G": 1}', "define '-G' is not a macro name"),
        ("[4]", "defines is list, not a mapping"),
    ],
)
def test_case_macros_that_are_no_macros_are_refused_naming_the_case(planted, defines, said):
    spec = planted / "planted" / "add_one" / "spec.py"
    case = f'Case("n1", {{"n": 1}}, defines={defines})'
    spec.write_text(spec.read_text().replace('Case("n1", {"n": 1})', case))
    broken = _load_all(planted)["add_one"]
    assert isinstance(broken, SpecError)
    assert f"{spec}: case 'n1': {said}" in str(broken)


@pytest.mark.parametrize(
    ("tolerance", "said"),
    [
        ("1e-3", "tolerance is 0.001, not a Tolerance(rtol, atol)"),
        ("Tolerance(float('nan'), 0)", "tolerance needs finite rtol and atol, 0 or more"),
        ('{"y": Tolerance(-1, 0)}', "tolerance for 'y' needs finite rtol and atol, 0 or more"),
        ('{"y": 0.1}', "tolerance for 'y' is 0.1, not a Tolerance(rtol, atol)"),
    ],
)
def test_a_tolerance_that_cannot_be_used_is_refused_naming_spec_and_case(planted, tolerance, said):
    spec = planted / "planted" / "add_one" / "spec.py"
    text = spec.read_text().replace('Case("n1", {"n": 1})', f'Case("n1", {{"n": 1}}, {tolerance})')
    spec.write_text(
        text.replace("from harness.spec import ", "from harness.spec import Tolerance, ")
    )
    broken = _load_all(planted)["add_one"]
    assert isinstance(broken, SpecError)
    assert f"{spec}: case 'n1': {said}" in str(broken)


def test_every_chapter_case_that_states_its_work_has_its_point_on_the_roofline():
    """Setup, launches and references of every case are checked on a CPU by the product
    itself (tests/test_spec_check.py); here, what a chapter kernel's work() says up front."""
    stated = [
        (kernel.classname, case.name, case.work)
        for kernel in SHIPPED.values()
        if kernel.classname in CORPUS
        for case in kernel.declared.cases
        if case.work is not None
    ]
    assert len(stated) > 100
    assert [s for s in stated if s[2].bytes + s[2].flops <= 0] == []


def test_the_planted_slowdown_is_judged_as_the_chapter_kernel_it_slows():
    """Its cells must meet the chapter kernel's in history: same classname, case and seed;
    5 % more threads, the same output."""
    (slowed,) = [load_kernel(folder) for folder in kernel_folders(SLOWDOWN)]
    chapter = SHIPPED[slowed.classname]
    (case,) = slowed.spec.cases
    assert case.name in {c.name for c in chapter.spec.cases}
    limits = limits_for_cpu_tests()
    rng = np.random.default_rng(1)
    mine = slowed.spec.setup(case, rng, limits)
    theirs = chapter.spec.setup(
        next(c for c in chapter.spec.cases if c.name == case.name), np.random.default_rng(1), limits
    )
    assert np.array_equal(mine.inputs["x"], theirs.inputs["x"])
    extra = mine.launches[0].grid[0] / theirs.launches[0].grid[0]
    assert 1.045 < extra < 1.055
    expected = chapter.spec.reference(case, theirs.inputs)["y"]
    assert np.array_equal(slowed.spec.reference(case, mine.inputs)["y"], expected)


def test_what_a_spec_declares_is_read_in_its_own_child_and_matches_its_import():
    """The run's process knows each kernel by what its spec's child sends: the same facts its
    import gives, and the child's own modules never reach this process."""
    folders = kernel_folders(ROOT / "kernels")
    before = {name for name in sys.modules if name.startswith("kernel_specs")}
    read = spec_children.read_all([f.spec_file for f in folders], timeout_s=60)
    assert {name for name in sys.modules if name.startswith("kernel_specs")} == before
    for folder in folders:
        assert read[folder.spec_file] == load_kernel(folder).declared, folder.classname


def test_each_spec_is_read_in_a_child_of_its_own_so_a_hang_names_only_itself(planted):
    hangs = planted / "planted" / "add_one" / "spec.py"
    hangs.write_text("import time\ntime.sleep(600)\n")
    fine = planted / "planted" / "needs_sm90" / "spec.py"
    started = time.monotonic()
    read = spec_children.read_all([hangs, fine], timeout_s=3)
    assert time.monotonic() - started < 30
    assert str(read[hangs]) == f"{hangs}: importing it did not finish within 3 s"
    assert isinstance(read[fine], declared.Declared)


@pytest.mark.parametrize(
    "record",
    [
        [],
        {"source": "k.cu"},
        {**_DECLARED, "cases": [{"name": 3, "work": None}]},
        {**_DECLARED, "cases": [{"name": "n1", "work": [-1, 0, "fp32"]}]},
        {**_DECLARED, "cases": [{"name": "n1", "work": [1, 0, "fp64"]}]},
        {**_DECLARED, "requires": {"sm": ["9", 0]}},
        {**_DECLARED, "requires": {"any": []}},
        {**_DECLARED, "requires": {"any": [{"any": [{"sm": [9, 0]}]}]}},
        {**_DECLARED, "sass_must_contain": "HGMMA"},
        {**_DECLARED, "build": ["-std=c++17", "-Xcompiler=-B/tmp"]},
        {**_DECLARED, "build": ["-DVEC=4"]},
        {**_DECLARED, "build": ["-std=c++17", "-DN=1;reboot"]},
        {**_DECLARED, "cases": [{"name": "n1", "work": None, "defines": ["-use_fast_math"]}]},
        {**_DECLARED, "cases": [{"name": "n1", "work": None, "defines": ["-DV=1 -G"]}]},
        {**_DECLARED, "sources": ["../other/k.cu"]},
        {**_DECLARED, "sources": ["/etc/k.cu"]},
        {**_DECLARED, "libraries": ["cublas"]},
    ],
)
def test_a_declaration_that_is_not_what_a_child_of_ours_sends_is_refused(record):
    with pytest.raises(ValueError, match="not a spec's declaration"):
        declared.Declared.from_json(record)


def test_an_any_of_requirement_travels_from_the_spec_s_child_whole():
    either = RequireAny((RequireArch("sm_90a"), RequireArch("sm_100a")))
    any_of = {"any": [{"arch": "sm_90a"}, {"arch": "sm_100a"}]}
    record = {
        **_DECLARED,
        "cases": [{"name": "n1", "work": [4, 0, "fp32"], "defines": ["-DVEC=4"]}],
        "requires": any_of,
        "preload": [],
        "build": ["-std=c++17", "-rdc=true"],
        "entries": [],
        "sources": ["helpers.cu"],
        "libraries": ["cudadevrt"],
    }
    read = declared.Declared.from_json(record)
    assert read.requires == either and read.to_json() == record
    assert str(either) == "require_arch(sm_90a) or require_arch(sm_100a)"


@pytest.mark.parametrize(
    ("requires", "said"),
    [
        ('"sm_90a"', "requires is 'sm_90a', not RequireSm(major, minor), RequireArch(arch) or"),
        (
            "RequireAny(())",
            "requires is RequireAny(options=()): RequireAny takes a tuple of RequireSm and "
            "RequireArch, at least one",
        ),
    ],
)
def test_a_requirement_that_is_none_is_refused_rather_than_run_everywhere(planted, requires, said):
    spec = planted / "planted" / "add_one" / "spec.py"
    text = spec.read_text().replace(
        "SPEC = KernelSpec(", f"SPEC = KernelSpec(requires={requires}, "
    )
    spec.write_text(
        text.replace("from harness.spec import ", "from harness.spec import RequireAny, ")
    )
    broken = _load_all(planted)["add_one"]
    assert isinstance(broken, SpecError) and f"{spec}: {said}" in str(broken)


@pytest.mark.parametrize(
    ("context", "said"),
    [
        ("ContextLimits(pending_launches=-1)", "context pending_launches=-1: a whole number, 1 to"),
        ("ContextLimits(stack_bytes=2**40)", "context stack_bytes=1099511627776: a whole number"),
        ("ContextLimits(printf_fifo_bytes=1.5)", "context printf_fifo_bytes=1.5: a whole number"),
        ('{"stack_bytes": 4096}', "context is {'stack_bytes': 4096}, not a ContextLimits(...)"),
        ("ContextLimits(threads=4)", "unexpected keyword argument 'threads'"),
    ],
    ids=["negative", "absurd", "not whole", "not ContextLimits", "an unknown limit"],
)
def test_context_limits_that_cannot_be_asked_are_refused_naming_spec_and_field(
    planted, context, said
):
    spec = planted / "planted" / "add_one" / "spec.py"
    text = spec.read_text().replace("SPEC = KernelSpec(", f"SPEC = KernelSpec(context={context}, ")
    spec.write_text(
        text.replace("from harness.spec import ", "from harness.spec import ContextLimits, ")
    )
    broken = _load_all(planted)["add_one"]
    assert isinstance(broken, SpecError)
    assert str(broken).startswith(f"{spec}: ") and said in str(broken), broken
