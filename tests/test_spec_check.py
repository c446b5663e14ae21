"""`check`, and `test` wherever no GPU runs a kernel: each case's spec checked on the CPU, a broken
one an error cell with its message, so CI without a GPU fails on it."""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from junitparser import Error, JUnitXml, Skipped

from harness.model.cell import Resources
from harness.model.errors import Unavailable
from harness.model.outcome import Outcome
from harness.pipeline.checking import CHECKED, FROM_CACHE
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import run_target
from harness.run.packing import array_beyond, bits_of, cuda_arrays, layout_of, packed
from harness.run.spec_check import problem_finding
from harness.run.stand_in import STAND_INS, DeviceFacts, FactLog, blocks_per_sm
from harness.spec import (
    Buf,
    Launch,
    Memset,
    Problem,
    Scalar,
    Struct,
    Surface,
    TensorMap,
    Texture,
)
from tests.conftest import ROOT, whole_corpus

FIXTURES = ROOT / "tests" / "fixtures" / "spec_checks"
H100 = STAND_INS[9]


def _finding_on_h100(problem, entries):
    """problem_finding of a build with `entries` (None: no build) on the H100 stand-in."""
    return problem_finding(problem, FactLog(DeviceFacts((9, 0), H100, {(): entries})), ())


def _cases(xml) -> dict[str, tuple[str, str]]:
    """Each testcase by its chapter and name (`planted.add_one::n1[sm_90a]`): its outcome and
    message, as a JUnit reader sees them."""
    found = {}
    for suite in JUnitXml.fromfile(str(xml)):
        for case in suite:
            results = {type(r): r for r in case.result}
            named = f"{case.classname.split('.')[0]}.{case.name}"
            if Error in results:
                found[named] = ("error", results[Error].message)
            elif Skipped in results:
                found[named] = ("skipped", results[Skipped].message)
            else:
                found[named] = ("passed", "")
    return found


def test_check_on_a_cpu_makes_each_broken_spec_an_error_cell_and_fails(tmp_path):
    args = ["--kernels", str(FIXTURES), "--reports", str(tmp_path), "--cache", str(tmp_path / "c")]
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", "sm_90a", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _cases(tmp_path / "check-sm_90a.xml")
    stand_in = "on a CC 9.x stand-in (H100 SXM)"
    said = {
        "missing_entry::n1": "launch 0 (add_onw): the binary has no entry 'add_onw' (its "
        "entries: add_one)",
        "setup_raises::n1000": "setup() raised ValueError: n=1000 is beyond what this spec can "
        "set up",
        "unpackable_argument::n1": "launch 0 (add_one): argument 2: Scalar(1) of int: a launch "
        "passes numpy scalars",
        "wrong_reference::n1000": "reference 'y' is float32[1001], but the output is float32[1000]",
        "declares_memory::understated": "setup() made buffers of 8000 bytes, more than the 8 its "
        "case declares (device_bytes)",
        "declares_memory::negative": "spec device_bytes() of case 'negative' returned -1: a byte "
        "count, 0 to 1125899906842624 (1 PiB)",
        "declares_memory::raises": "spec device_bytes() of case 'raises' raised KeyError: 'raises'",
    }
    for name, message in said.items():
        outcome, shown = cases[f"planted.{name}[sm_90a]"]
        kernel, case = name.split("::")
        assert outcome == "error", (name, shown)
        assert shown.startswith(f"planted.{kernel} case '{case}' {stand_in}: "), shown
        assert message in shown, shown
    clean = ("sound::n1000", "sound::n1", "setup_raises::n1", "beyond_stand_in::n1000")
    for sound in (*clean, "declares_memory::n1"):
        outcome, shown = cases[f"planted.{sound}[sm_90a]"]
        assert outcome == "skipped" and shown.endswith(CHECKED), (sound, shown)
    # what the stand-in would skip is no error, and its cell says how far it was checked
    stopped = {
        # more than the stand-in has, so never set up (its setup() would raise)
        "declares_memory::beyond_any": "its spec was checked as far as device_bytes(): the "
        "case declares 1000000000000000 bytes, more than the stand-in device has",
        "beyond_stand_in::many_sms": "its spec was checked as far as setup(), which says the "
        "stand-in device cannot run it: needs 100000 SMs, the device has 132",
        "beyond_stand_in::long_surface": f"{CHECKED}, and the stand-in device would skip it: a "
        "1-D surface over 'y' of 40000 elements (x first), beyond the device's largest 1-D "
        "surface array, 32768",
    }
    for name, note in stopped.items():
        outcome, shown = cases[f"planted.{name}[sm_90a]"]
        assert outcome == "skipped" and note in shown and CHECKED not in shown.replace(note, ""), (
            name,
            shown,
        )
    errors = sorted(name for name, (outcome, _) in cases.items() if outcome == "error")
    # the two cases of each broken spec, but setup_raises n1; three of declares_memory
    assert len(errors) == 10, errors
    assert "planted.wrong_reference::n1[sm_90a]" in done.stdout
    # a kept check says, when served, how far each case was checked, as it said it then
    again = subprocess.run(
        [sys.executable, "-m", "harness", "check", "sm_90a", *args, "-k", "beyond_stand_in"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "HOME": str(tmp_path)},
    )
    served = _cases(tmp_path / "partial-check-sm_90a.xml")
    for name in ("many_sms", "long_surface"):
        _, shown = served[f"planted.beyond_stand_in::{name}[sm_90a]"]
        note = stopped[f"beyond_stand_in::{name}"]
        assert shown.endswith(f"{note}; {FROM_CACHE}"), (shown, again.stdout, again.stderr)


@pytest.mark.corpus
def test_every_shipped_case_checks_clean_on_a_cpu(matrix, toolchain, compile_cache, tmp_path):
    options = RunOptions(
        matrix.targets["sm_90a"], (ROOT / "kernels",), tmp_path, compile_cache, runner="ci"
    )
    with whole_corpus(compile_cache, "sm_90a"):
        report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    cases = [cell for cell in report.cells if cell.kind.value == "case"]
    assert len(cases) > 100
    unsound = [f"{c.classname} {c.case}: {c.message}" for c in cases if c.outcome is Outcome.ERROR]
    assert unsound == []
    checked = [c for c in cases if CHECKED in c.message]  # or served from the check cache
    target_unsupported = [c for c in cases if c.skip_reason.value == "target-unsupported"]
    assert len(checked) + len(target_unsupported) == len(cases)


@pytest.mark.parametrize(
    ("registers", "threads", "shmem", "blocks"),
    [
        (32, 256, 0, 8),  # threads bound: 2048 / 256
        (128, 256, 0, 2),  # registers bound: 65536 / (128 * 256)
        (32, 128, 100 * 1024, 2),  # shared memory bound: 228 KiB / (100 KiB + 1 KiB)
        (32, 32, 0, 32),  # the SM's block limit
        (255, 1024, 0, 0),  # one block does not fit its registers
    ],
)
def test_occupancy_on_a_stand_in_follows_the_calculator(registers, threads, shmem, blocks):
    resources = Resources(registers=registers, smem_bytes=0, spill_bytes=0, stack_bytes=0)
    assert blocks_per_sm(H100, resources, threads, shmem) == blocks


def _problem(*launches: Launch, **buffers) -> Problem:
    inputs = buffers or {
        "x": np.zeros(8, np.float32),
        "d": np.zeros(8, np.float64),
        "m": np.zeros((8, 8), np.float32),
        "odd": np.zeros((4, 7), np.float32),  # rows of 28 bytes: no pitch a texture takes
        "i": np.zeros(8, np.int32),
    }
    return Problem(inputs=inputs, outputs={"y": np.zeros(8, np.float32)}, launches=launches)


def _launch(*args: object) -> Launch:
    return Launch("k", (1, 1, 1), (32, 1, 1), args)  # type: ignore[arg-type]


class _Inner(ctypes.Structure):
    _fields_ = (("flag", ctypes.c_uint8), ("scale", ctypes.c_double))


class _Params(ctypes.Structure):
    """What a C compiler makes of the struct the test packs: the layout to match."""

    _fields_ = (
        ("n", ctypes.c_int32),
        ("x", ctypes.c_uint64),  # a pointer
        ("half", ctypes.c_uint16),
        ("inner", _Inner),
        ("tail", ctypes.c_int8),
    )


def test_a_struct_is_packed_as_a_c_compiler_lays_it_out():
    struct = Struct(
        (
            ("n", np.int32(-7)),
            ("x", Buf("x")),
            ("half", ml_dtypes.bfloat16(1.5)),
            ("inner", Struct((("flag", np.uint8(1)), ("scale", np.float64(0.25))))),
            ("tail", np.int8(-1)),
        )
    )
    expected = _Params(-7, 0xDEAD0000, 0x3FC0, _Inner(1, 0.25), -1)
    shape = layout_of(struct)
    assert (shape.size, shape.alignment) == (ctypes.sizeof(_Params), ctypes.alignment(_Params))
    assert packed(struct, {"x": 0xDEAD0000}.__getitem__) == bytes(expected)


@pytest.mark.parametrize(
    ("launch", "said"),
    [
        (Launch("k", (0, 1, 1), (32, 1, 1), ()), "grid (0, 1, 1) is not three whole numbers"),
        (Launch("k", (1, 1, 1), (2048, 1, 1), ()), "block (2048, 1, 1) is 2048 threads"),
        (Launch("k", (1, 1, 1), (32, 1, 1), (Buf("z"),)), "names buffer 'z', which the problem"),
        (Launch("k", (3, 1, 1), (32, 1, 1), (), cluster=(2, 1, 1)), "not a multiple of cluster"),
        (Launch("k", (1, 1, 1), (32, 1, 1), (), shmem_bytes=300_000), "300000 bytes of dynamic"),
        (Launch("k", (1, 1, 1), (32, 1, 1), (TensorMap("x", (1, 8)),)), "'x', which is not 2-D"),
        (Launch("k", (1, 1, 1), (32, 1, 1), (Scalar(1.5),)), "Scalar(1.5) of float"),
        (Launch("k", (1, 1, 1), (32, 1, 1), ("x",)), "'x' is not a Buf, Scalar, TensorMap"),
        (_launch(Struct((("p", Buf("z")),))), "field p names buffer 'z', which the problem"),
        (_launch(Struct((("n", 3),))), "field n: Scalar(3) of int"),
        (_launch(Struct(())), "a Struct with no fields"),
        (_launch(Struct((("inner", Struct((("v", 1.5),))),))), "field inner.v: Scalar(1.5)"),
        (_launch(Struct((("n", np.int32(1)),)), TensorMap("m", (1, 8))), "not TensorMap"),
        (_launch(Texture("y")), "a Texture over 'y', which is not an input"),
        (_launch(Texture("x", dims=2)), "a 2-D Texture over 'x', which is 1-D"),
        (_launch(Texture("x", dims=3)), "dims=3"),
        (_launch(Texture("x", filter="linear")), "a 1-D Texture reads with tex1Dfetch"),
        (_launch(Texture("m", dims=2, filter="cubic")), "filter='cubic'"),
        (_launch(Texture("d")), "a Texture over 'd' of float64"),
        (_launch(Texture("odd", dims=2)), "its rows are 28 bytes, not a multiple of the"),
        # over a CUDA array: any pitch, filtering in every dims, but as the hardware allows
        (_launch(Texture("m", dims=3, array=True)), "a 3-D Texture over 'm', which is 2-D"),
        (_launch(Texture("m", dims=4, array=True)), "dims=4 over an array: 1, 2 or 3"),
        (_launch(Texture("i", dims=1, array=True, filter="linear")), "linear filtering over"),
        (
            _launch(Texture("m", dims=2, array=True, address="wrap")),
            "address='wrap' reads normalized coordinates",
        ),
        (_launch(Texture("m", dims=2, array="yes")), "array='yes': True or False"),
    ],
)
def test_a_launch_no_gpu_could_take_is_named(launch, said):
    found = _finding_on_h100(_problem(launch), {"k": Resources(32, 0, 0, 0)})
    assert found is not None and said in found, found


def test_a_surface_no_gpu_could_make_is_named_and_one_beyond_the_device_is_no_error():
    problem = Problem(
        inputs={
            "x": np.zeros((4, 5), np.uint8),
            "d": np.zeros(8),
            "cube": np.zeros((2,) * 4, np.int8),
        },
        outputs={"y": np.zeros((2, 3, 4), np.float32), "none": np.zeros(0, np.int16)},
        scratch={"work": np.zeros(8, np.float32)},
        launches=(),
    )
    said = {
        "work": "a Surface over 'work', which is not an input or an output (['cube', 'd', 'none'",
        "d": "a Surface over 'd' of float64: surfaces hold uint8,",
        "cube": "a Surface over 'cube', which is 4-D: surfaces are 1-, 2- or 3-D",
        "none": "a Surface over 'none', which is empty",
    }
    entries = {"k": Resources(32, 0, 0, 0)}
    for name, message in said.items():
        found = _finding_on_h100(
            dataclasses.replace(problem, launches=(_launch(Surface(name)),)), entries
        )
        assert found is not None and message in found, found
    # an input read and an output written through surfaces, and a texture over the same input
    sound = _launch(Surface("x"), Texture("x", dims=2, array=True), Surface("y"))
    assert _finding_on_h100(dataclasses.replace(problem, launches=(sound,)), entries) is None
    assert dict(cuda_arrays(dataclasses.replace(problem, launches=(sound,)))) == {
        "x": "surface",  # its array takes surface stores: the surface's limits hold for it
        "y": "surface",
    }


def test_an_array_is_beyond_a_device_only_past_each_shape_it_takes():
    deep = [[16384] * 3, [8192, 8192, 32768]]
    assert array_beyond("texture", "v", (20000, 1, 1), deep) is None  # (z, y, x): the alternate
    assert array_beyond("texture", "v", (16384, 16384, 16384), deep) is None
    assert array_beyond("texture", "v", (20000, 9000, 1), deep) == (
        "a 3-D texture over 'v' of 1 x 9000 x 20000 elements (x first), beyond the device's "
        "largest 3-D texture array, 16384 x 16384 x 16384 or 8192 x 8192 x 32768"
    )
    assert array_beyond("surface", "y", (32768,), [[32768]]) is None
    assert "of 32769 elements" in array_beyond("surface", "y", (32769,), [[32768]])


def test_steps_constants_and_accumulated_outputs_no_gpu_could_take_are_named():
    sound = Launch("k", (4, 1, 1), (32, 1, 1), (Buf("x"), Buf("y")))
    entries = {"k": Resources(32, 0, 0, 0)}

    def found(**fields):
        problem = dataclasses.replace(_problem(sound), **fields)
        return _finding_on_h100(problem, entries)

    assert found(launches=(Memset("x"), sound), accumulated=("y",)) is None
    assert found(launches=(Memset("z"), sound)) == (
        "step 0: Memset of 'z', which the problem does not have"
    )
    assert found(launches=(Memset("x", 256), sound)) == (
        "step 0: Memset('x', 256): a byte is 0 to 255"
    )
    assert found(launches=(Memset("x"),)) == "the problem launches nothing"
    assert found(accumulated=("x",)) == "accumulated names ['x'], which are not outputs (['y'])"
    assert found(constants={"coeffs": [1.0]}) == ("constant 'coeffs' is a list, not a numpy array")
    assert found(constants={"a b": np.zeros(1)}) == "constant 'a b' is not a symbol's name"


def test_bf16_and_fp8_scalars_go_as_their_bits():
    assert bits_of(ml_dtypes.bfloat16(1.5)) == np.uint16(0x3FC0)
    assert bits_of(ml_dtypes.float8_e4m3fn(2.0)) == np.uint8(0x40)
    assert bits_of(ml_dtypes.float8_e5m2(2.0)) == np.uint8(0x40)
    assert type(bits_of(np.float16(1.0))) is np.float16  # cuda.core packs fp16 itself
    launch = Launch("k", (1, 1, 1), (32, 1, 1), (Scalar(ml_dtypes.bfloat16(1.5)),))
    assert _finding_on_h100(_problem(launch), {"k": Resources(32, 0, 0, 0)}) is None


def test_a_sound_launch_and_buffers_that_are_no_arrays():
    sound = Launch("k", (4, 1, 1), (32, 1, 1), (Buf("x"), Buf("y"), Scalar(np.int32(8))))
    assert _finding_on_h100(_problem(sound), {"k": Resources(32, 0, 0, 0)}) is None
    assert _finding_on_h100(_problem(sound), None) is None  # no build: entries not held
    listed = _finding_on_h100(_problem(sound, x=[1.0, 2.0]), None)
    assert listed == "input 'x' is a list, not a numpy array"
    assert _finding_on_h100(_problem(), None) == "the problem launches nothing"
    # a CUDA array takes rows of any length, and filters and wraps in every dimension
    arrayed = Texture("odd", dims=2, array=True, filter="linear", address="wrap", normalized=True)
    assert _finding_on_h100(_problem(_launch(arrayed)), None) is None


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
def test_the_library_styles_build_and_check_clean_on_every_target(
    matrix, toolchain, tmp_path, target
):
    """tests/fixtures/styles: kernels as libraries write them (a template entry, C++20 with
    macros and fast math, sm_90a-or-sm_100a, an fp8 output, a tolerance per output, a case too
    big for any GPU), which the H200 ran (9336b2d:docs/reports/h200/styles)."""
    styles = ROOT / "tests" / "fixtures" / "styles"
    options = RunOptions(matrix.targets[target], (styles,), tmp_path, tmp_path / "c", runner="ci")
    report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    broken = [
        f"{c.classname} {c.case}: {c.message}"
        for c in report.cells
        if c.outcome in (Outcome.FAILED, Outcome.ERROR)
    ]
    assert broken == []
    unsupported = {
        c.kernel
        for c in report.cells
        if c.skip_reason and c.skip_reason.value == "target-unsupported"
    }
    assert unsupported == ({"any_arch"} if target == "sm_80" else set())


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("import time\ntime.sleep(600)\n", "checking its cases did not finish within 3 s"),
        ("import os\nos._exit(3)\n", "checking its cases ended the process (exited with status 3)"),
    ],
)
def test_a_setup_that_hangs_or_exits_in_its_check_names_its_spec_and_no_other(
    tmp_path, matrix, planted, said
):
    """Each spec is checked in a child of its own: one whose setup() hangs or ends the process
    is named on each of its cases, and the sound kernel beside it is checked as ever."""
    import shutil

    from harness.model import spec_children
    from harness.model.discovery import Kernel, kernel_folders
    from harness.run.spec_check import check_kernels

    tree = tmp_path / "kernels"
    shutil.copytree(FIXTURES, tree)
    broken = tree / "planted" / "setup_raises" / "spec.py"
    problem = tree / "planted" / "add_problem.py"
    hook = "    def setup(case, rng, device):\n"
    body = "".join(f"        {line}\n" for line in planted.splitlines())
    text = problem.read_text().replace(
        hook,
        hook
        + "        if setup_raises_above is not None:\n"
        + body.replace("        ", "            "),
    )
    problem.write_text(text)
    folders = [f for f in kernel_folders(tree) if f.name in ("setup_raises", "sound")]
    read = spec_children.read_all([f.spec_file for f in folders], timeout_s=30)
    kernels = [Kernel(f.chapter, f.name, f.folder, read[f.spec_file]) for f in folders]
    found = check_kernels(kernels, {}, matrix.targets["sm_90a"], timeout_s=1.5)
    findings = {k: {c: check.finding for c, check in cases.items()} for k, cases in found.items()}
    assert findings["planted.setup_raises"] == dict.fromkeys(["n1000", "n1"], f"{broken}: {said}")
    assert findings["planted.sound"] == {"n1000": None, "n1": None}
    assert all(check.seconds > 0 for check in found["planted.sound"].values())


def test_the_cpu_check_says_how_far_it_is_as_it_goes(
    matrix, toolchain, compile_cache, tmp_path, capsys
):
    """Off a terminal (CI's logs) a check of many specs would otherwise print nothing for a
    minute between the compile's last line and the summary."""
    from harness.pipeline.stages import check_target

    options = RunOptions(
        matrix.targets["sm_90a"], (ROOT / "kernels",), tmp_path, compile_cache, select="reduce"
    )
    result = check_target(matrix, options, toolchain)
    kernels = len({cell.classname for cell in result.cells})
    said = capsys.readouterr().out.splitlines()
    assert f"check sm_90a: {kernels} kernels, their cases checked on the CPU ..." in said
    assert any(line.startswith(f"check sm_90a: {kernels}/{kernels} kernels, ") for line in said)
    assert kernels > 1
