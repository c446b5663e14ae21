"""On a GPU: planted kernels pass, fail and error exactly as they should. Skipped without one."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from harness import sandbox
from harness.model.outcome import Outcome
from harness.pipeline.context import RunOptions, open_run
from harness.pipeline.stages import run_target, sanitize_target
from harness.run.sanitizer import SanitizerMissing, find_compute_sanitizer
from tests.conftest import FAULTS, PLANTED, ROOT, plant_forger

SURFACES = ROOT / "tests" / "fixtures" / "surfaces"


def _run(matrix, toolchain, gpu, kernels, tmp_path, target="sm_90a"):
    """Run the kernel trees `kernels` (a list of roots) for one target on the GPU."""
    options = RunOptions(
        target=matrix.targets[target],
        kernels_roots=tuple(kernels),
        reports_dir=tmp_path / "reports",
        cache_dir=tmp_path / "cache",
        runner="test",
    )
    result = run_target(matrix, options, toolchain, [gpu])
    return {(c.kernel, c.case): c for c in result.cells}


@pytest.fixture(scope="module")
def cells(matrix, toolchain, gpu, tmp_path_factory):
    return _run(matrix, toolchain, gpu, [PLANTED], tmp_path_factory.mktemp("gpu"))


def test_a_correct_kernel_passes_with_timings(cells, gpu):
    cell = cells["add_one", "n1000"]
    assert cell.outcome is Outcome.PASSED, cell.message
    assert cell.loaded_as == "sass"
    assert cell.timing.median_us > 0 and cell.timing.samples >= 2
    assert cell.throughput.gbytes_per_s > 0
    assert cell.provenance.device == gpu.name
    # the SM clock over the samples, probed on SM 0 as NVBench does: near the default clock
    default = gpu.default_sm_clock_mhz
    assert 0.5 * default < cell.timing.sm_clock_mhz < 1.1 * default, (cell.timing, default)
    assert cell.timing.throttled_samples >= 0


def test_a_wrong_kernel_fails_with_where_and_how_much(cells):
    cell = cells["wrong_answer", "n1000"]
    assert cell.outcome is Outcome.FAILED
    assert "y: 10 of 1000 elements differ" in cell.message
    assert "first at (7,)" in cell.message and "max abs error 1" in cell.message
    assert cell.timing is None  # only passing cases are timed


def test_a_reference_of_the_wrong_shape_is_a_spec_error(cells):
    cell = cells["bad_reference_shape", "n1000"]
    assert cell.outcome is Outcome.ERROR
    assert "planted.bad_reference_shape: reference 'y' is float32[1001]" in cell.message


def test_dynamic_shared_memory_above_48_kb_is_opted_in(cells):
    assert cells["big_smem", "blocks4"].outcome is Outcome.PASSED, cells["big_smem", "blocks4"]


def test_a_cluster_given_at_launch_and_a_scratch_buffer_reach_the_kernel(cells):
    for case in ("blocks32_cluster16", "blocks16_cluster4", "blocks2_cluster2"):
        assert cells["cluster_at_launch", case].outcome is Outcome.PASSED, cells[
            "cluster_at_launch", case
        ].message


def test_sm80_runs_through_ptx_jit_on_a_newer_gpu(matrix, toolchain, gpu, planted, tmp_path):
    if gpu.cc.major == 8:
        pytest.skip("an sm_80 binary runs as SASS on CC 8.x")
    cells = _run(matrix, toolchain, gpu, [planted], tmp_path, target="sm_80")
    assert cells["add_one", "n1000"].outcome is Outcome.PASSED
    assert cells["add_one", "n1000"].loaded_as == "ptx-jit"


def test_faulting_kernels_fail_their_own_cells_and_the_run_goes_on(
    matrix, toolchain, gpu, tmp_path
):
    quick = dataclasses.replace(matrix, timer=dataclasses.replace(matrix.timer, case_timeout_s=15))
    started = time.monotonic()
    cells = _run(quick, toolchain, gpu, [FAULTS, PLANTED], tmp_path)
    elapsed = time.monotonic() - started
    oob = cells["oob_write", "n1024"]
    assert oob.outcome is Outcome.FAILED and "CUDA_ERROR_ILLEGAL_ADDRESS" in oob.message, oob
    trap = cells["trap", "n1024"]
    assert trap.outcome is Outcome.FAILED and "CUDA_ERROR" in trap.message, trap
    hang = cells["infinite_loop", "n1024"]
    assert hang.outcome is Outcome.FAILED and "timeout" in hang.message, hang
    assert hang.seconds >= 15  # the wait is on the record
    once = cells["correct_once", "n16777216"]
    assert once.outcome is Outcome.FAILED, once
    assert "the output was right on the first launch and wrong after" in once.message, once
    assert "poisoned with 0x5A bytes this time" in once.message  # the re-run wrote nothing
    replay = cells["replays_result", "n1048576"]  # right for the inputs it saw, kept and replayed
    assert replay.outcome is Outcome.FAILED, replay
    assert "on fresh inputs (seed" in replay.message, replay.message
    assert "'y' holds, bit for bit, what the kernel wrote for the inputs it was verified on" in (
        replay.message
    )
    unwritten = cells["unwritten_nan", "n1024"]  # NaN where NaN is expected, but never written
    assert unwritten.outcome is Outcome.FAILED, unwritten
    assert unwritten.message == (  # x[::7] are NaN: 147 of 1024, left as the poison was
        "output 'y' depends on what output 'y' held before the kernel ran: it reads 'y' before "
        "writing it, or leaves some of it unwritten (147 elements change when 'y' starts with "
        "other bytes)"
    )
    word = cells["writes_input", "word"]  # the outputs are right, an input is not
    assert word.outcome is Outcome.FAILED, word
    assert "input 'x' was written by the kernel: 1 of 1001 elements changed, first at (5,)" in (
        word.message
    )
    byte = cells["writes_input", "tail_byte"]  # a byte past the last whole word
    assert "input 'flags' was written by the kernel: 1 of 1001 elements changed, first at " in (
        byte.message
    ), byte.message
    assert "(1000,)" in byte.message
    past = cells["writes_past_end", "after"]  # inside the allocation's rounding: no fault
    assert past.outcome is Outcome.FAILED, past
    assert "wrote 4 bytes past the end of output 'y' (at byte 0..3 after it)" in past.message
    before = cells["writes_past_end", "before"]
    assert "wrote 4 bytes before the start of output 'y' (at byte 1..4 before it)" in (
        before.message
    ), before.message
    # a read one element outside x, whose value the guard zones' 0xA5 bytes leave invisible
    for dtype in ("f32", "bf16", "i32", "u8"):
        for side, where in (("after", "past the end of"), ("before", "before the start of")):
            read = cells["reads_outside", f"{dtype}_{side}"]
            assert read.outcome is Outcome.FAILED, (dtype, side, read.message)
            assert read.message == (
                f"output 'y' depends on memory {where} input 'x' (1 element changes when the "
                f"bytes {side} 'x' change)"
            ), (dtype, side)
            assert read.timing is None
    ignored = cells["reads_but_ignores", "n1000"]  # reads x[n], and throws it away
    assert ignored.outcome is Outcome.PASSED, ignored.message
    assert ignored.timing is not None
    index = cells["indexes_outside", "n1000"]  # indexes by what it read past the end of idx
    assert index.outcome is Outcome.FAILED, index
    assert index.message.startswith(
        "right on the verified launch, it failed on a launch of the same inputs with the memory "
        "around its buffers changed"
    ), index.message
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in index.message, index.message
    first = cells["reads_output_first", "n1000"]  # fmaxf(y, x): the NaN poison hid it
    assert first.outcome is Outcome.FAILED, first
    assert first.message == (
        "output 'y' depends on what output 'y' held before the kernel ran: it reads 'y' before "
        "writing it, or leaves some of it unwritten (1000 elements change when 'y' starts with "
        "other bytes)"
    )
    nan = cells["nan_result", "n1024"]
    assert nan.outcome is Outcome.FAILED and "got np.float32(nan)" in nan.message, nan
    # every case after a fault ran in a fresh worker, and the good kernels still pass
    assert cells["oob_write", "n1"].outcome is Outcome.FAILED
    assert cells["oob_write", "n1"].worker_start_s > 0  # a fresh worker
    assert cells["add_one", "n1000"].outcome is Outcome.PASSED, cells["add_one", "n1000"]
    assert cells["needs_sm90", "blocks8"].outcome is Outcome.PASSED
    assert elapsed < 120  # two 15 s timeouts, not a hung run


def test_sanitize_finds_the_planted_oob_write_and_passes_add_one(matrix, toolchain, gpu, tmp_path):
    """Under the tool each buffer is an allocation of exactly its size: a write or a read one
    element past the end, inside a guard zone in `test`, is out of bounds to memcheck."""
    try:
        sanitizer = find_compute_sanitizer(toolchain)
    except SanitizerMissing as error:
        pytest.skip(str(error))
    kernels = tmp_path / "kernels"
    for fault in ("oob_write", "writes_past_end", "reads_outside"):
        shutil.copytree(FAULTS / "planted_faults" / fault, kernels / "faults" / fault)
    shutil.copytree(PLANTED / "planted" / "add_one", kernels / "planted" / "add_one")
    options = RunOptions(
        matrix.targets["sm_90a"], (kernels,), tmp_path / "reports", tmp_path / "cache"
    )
    result = sanitize_target(matrix, options, toolchain, gpu, sanitizer)
    cells = {(c.classname, c.name): c for c in result.cells}
    oob = cells["faults.oob_write", "n1024[sm_90a]:memcheck"]
    assert oob.outcome is Outcome.FAILED, (oob.message, oob.detail)
    assert "Invalid __global__ write" in oob.message, (oob.message, oob.detail)
    past = cells["faults.writes_past_end", "after[sm_90a]:memcheck"]  # y[n]: 4000 bytes in
    assert past.outcome is Outcome.FAILED, (past.message, past.detail)
    assert past.message.startswith("memcheck: "), past.message
    assert "Invalid __global__ write of size 4 bytes" in past.message, (past.message, past.detail)
    assert "writes_past_end.cu:7" in past.detail, past.detail
    read = cells["faults.reads_outside", "f32_after[sm_90a]:memcheck"]  # x[n]: 4000 bytes in
    assert read.outcome is Outcome.FAILED, (read.message, read.detail)
    assert "Invalid __global__ read of size 4 bytes" in read.message, (read.message, read.detail)
    for tool in matrix.sanitize.tools:
        cell = cells["planted.add_one", f"n1[sm_90a]:{tool.value}"]
        assert cell.outcome is Outcome.PASSED, (cell.message, cell.detail)
        assert cell.sanitizer.errors == 0 and cell.sanitizer.case_outcome is Outcome.PASSED
        assert cell.loaded_as == "sass"


def test_a_time_beyond_the_datasheet_peak_fails_the_cell(matrix, toolchain, gpu, planted, tmp_path):
    if gpu.peaks is None:
        pytest.skip(f"matrix.yaml has no peaks for {gpu.name}")
    spec = planted / "planted" / "add_one" / "spec.py"
    honest = 'work=lambda case: Work(bytes=8 * case.params["n"])'
    assert honest in spec.read_text()
    spec.write_text(spec.read_text().replace(honest, "work=lambda case: Work(bytes=10**15)"))
    cell = _run(matrix, toolchain, gpu, [planted], tmp_path)["add_one", "n1000"]
    assert cell.outcome is Outcome.FAILED, cell
    assert cell.message.startswith(f"impossible timing on {gpu.name}: "), cell.message
    assert "GB/s is above the" in cell.message and "work() overcounts" in cell.message
    assert cell.timing is not None  # what was measured is kept


def test_a_spec_that_replaces_the_comparison_reaches_no_other_kernel(
    matrix, toolchain, gpu, planted, tmp_path
):
    """Each kernel runs in a worker of its own: a spec that makes every comparison pass, in the
    process it is imported into, cannot pass another kernel's wrong answer."""
    spec = planted / "planted" / "add_one" / "spec.py"
    spec.write_text(
        "import harness.run.case, harness.run.verify\n"
        "harness.run.case.compare = harness.run.verify.compare = lambda *args: None\n"
        + spec.read_text()
    )
    cells = _run(matrix, toolchain, gpu, [planted], tmp_path)
    assert cells["add_one", "n1000"].outcome is Outcome.PASSED
    wrong = cells["wrong_answer", "n1000"]
    assert wrong.outcome is Outcome.FAILED, wrong
    assert "y: 10 of 1000 elements differ" in wrong.message


@pytest.mark.skipif(sandbox.unavailable() is not None, reason="no-landlock")
def test_a_hostile_spec_on_the_gpu_is_confined_in_workers_and_under_the_sanitizer(
    matrix, toolchain, gpu, tmp_path
):
    """The workers of `test` and the case process of `sanitize` import the spec too: there, as
    in the parent, its writes to the cache, reports and trees are denied, and CUDA still runs
    its kernel inside the confinement."""
    try:
        sanitizer = find_compute_sanitizer(toolchain)
    except SanitizerMissing as error:
        pytest.skip(str(error))
    kernels = tmp_path / "kernels"
    shutil.copytree(PLANTED / "planted" / "add_one", kernels / "planted" / "add_one")
    log = plant_forger(kernels, tmp_path)
    options = RunOptions(
        matrix.targets["sm_90a"], (kernels,), tmp_path / "reports", tmp_path / "cache"
    )
    tested = run_target(matrix, options, toolchain, [gpu])
    imports = len(log.read_text().splitlines())
    sanitized = sanitize_target(matrix, options, toolchain, gpu, sanitizer)
    attempts = log.read_text().splitlines()
    assert len(attempts) > imports, "the sanitizer's case process never imported the spec"
    landed = [line for line in attempts if not line.startswith("denied ")]
    assert not landed, landed
    for cell in [*tested.cells, *sanitized.cells]:
        assert cell.outcome is Outcome.PASSED, (cell.kernel, cell.case, cell.message, cell.detail)


# Cases of 20 us or more without scratch (NVBench cannot reset scratch between its samples).
AGREEMENT_CASES = [
    "scale_bias/n67108864_vec4",
    "stencil_sync/n33554432",
    "prefetch_pipeline/n67108864_stages3",
    "warp_allreduce_xor/n33554432",
    "sgemm_cp_async/m4096_n4096_k4096_stages3",
]


def test_the_timer_agrees_with_nvbench_within_one_percent(gpu, tmp_path):
    """The contract's timing claim: the harness's medians are NVBench's, within 1 %."""
    if importlib.util.find_spec("cuda.bench") is None:
        pytest.skip("cuda-bench is not installed (pip install cuda-bench)")
    target = "sm_90a" if (gpu.cc.major, gpu.cc.minor) == (9, 0) else "sm_80"
    script = ROOT / "scripts" / "nvbench_agreement.py"
    files = [str(tmp_path / "cache"), str(tmp_path / "nv.json")]
    done = subprocess.run(
        [sys.executable, str(script), target, *files, *AGREEMENT_CASES],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    medians = json.loads(done.stdout.strip().splitlines()[-1])
    ratios = {c: medians["ours_us"][c] / medians["nvbench_us"][c] for c in AGREEMENT_CASES}
    print(json.dumps({"medians": medians, "ratios": ratios}))
    assert all(abs(r - 1) <= 0.01 for r in ratios.values()), ratios


def _digest_on_host(raw: np.ndarray) -> int:
    """digest.py's digest of the bytes `raw`, in numpy: words, then the tail bytes."""
    words = raw.size // 4
    values = np.concatenate(
        [raw[: 4 * words].view("<u4").astype(np.uint64), raw[4 * words :].astype(np.uint64)]
    )
    z = (np.arange(values.size, dtype=np.uint64) << np.uint64(32)) ^ values
    z += np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return int(z.sum(dtype=np.uint64))


def test_the_probe_reads_the_gpu_as_cuda_core_does(matrix, gpu):
    """The probe reads the driver API without cuda.core (its import is on the run's start):
    what it reads is what cuda.core reads."""
    from cuda.core import Device, system

    device = Device(gpu.ordinal)
    properties = device.properties
    assert gpu.name == device.name and gpu.uuid == str(device.uuid)
    assert (gpu.cc.major, gpu.cc.minor) == tuple(device.compute_capability)
    assert gpu.sm_count == properties.multiprocessor_count
    assert gpu.l2_bytes == properties.l2_cache_size
    assert gpu.smem_optin_bytes == properties.max_shared_memory_per_block_optin
    assert gpu.default_sm_clock_mhz == properties.clock_rate / 1000.0
    major, *rest = system.get_kernel_mode_driver_version()
    assert gpu.driver == ".".join([str(major), *(f"{part:02d}" for part in rest)])


def test_device_digests_are_the_documented_sum_and_see_every_change(gpu):
    from cuda.bindings import driver
    from cuda.core import Device

    from harness.run import digest
    from harness.run.checked import check

    device = Device(gpu.ordinal)
    device.set_current()
    stream = device.create_stream()
    digests = digest.Digests(device, stream, gpu.sm_count)
    raw = np.random.default_rng(7).integers(0, 256, 4 * 3_000_001 + 3, dtype=np.uint8)
    buffer = device.allocate(raw.nbytes, stream=stream)

    def digest_of(data: np.ndarray) -> int:
        check(driver.cuMemcpyHtoD(int(buffer.handle), data.ctypes.data, data.nbytes))
        return digests.of({"data": (buffer, data.nbytes)})["data"]

    first = digest_of(raw)
    assert first == _digest_on_host(raw)
    assert digests.of({"a": (buffer, raw.nbytes), "b": (buffer, 7)}) == {
        "a": first,
        "b": _digest_on_host(raw[:7]),
    }
    changed = []
    for where in (0, 5, 4 * 3_000_001, raw.nbytes - 1):  # words, and the bytes past them
        one = raw.copy()
        one[where] ^= 0x10
        changed.append(digest_of(one))
    swapped = raw.copy()
    swapped[[0, 1, 2, 3, 8, 9, 10, 11]] = swapped[[8, 9, 10, 11, 0, 1, 2, 3]]
    if not np.array_equal(swapped, raw):
        changed.append(digest_of(swapped))
    assert first not in changed and len(set(changed)) == len(changed)
    # however many threads add, the sum is one
    assert digest_of(raw) == first
    few = digest.Digests(device, stream, 1)
    assert few.of({"data": (buffer, raw.nbytes)}) == {"data": first}


def test_ab_times_unchanged_code_alike_and_names_a_base_that_fails_its_check(
    matrix, toolchain, gpu, tmp_path
):
    from harness.model.cell import Judgement
    from harness.model.matrix import ABSettings
    from harness.model.outcome import Outcome
    from harness.model.revision import BaseTree
    from harness.pipeline.comparing import compare_target

    head, base = tmp_path / "project" / "kernels", tmp_path / "base" / "kernels"
    for tree in (head, base):
        for name in ("add_one", "big_smem"):
            shutil.copytree(PLANTED / "planted" / name, tree / "planted" / name)
    wrong = base / "planted" / "add_one" / "add_one.cu"  # the base adds 2: it fails its check
    wrong.write_text(wrong.read_text().replace("+ 1.0f", "+ 2.0f"))
    quick = dataclasses.replace(matrix, ab=ABSettings(rounds=12, samples=3, budget_s=2.0))
    options = RunOptions(
        matrix.targets["sm_90a"], (head,), tmp_path / "reports", tmp_path / "cache", runner="t"
    )
    report = run_target(quick, options, toolchain, [gpu]).report
    assert all(c.outcome is not Outcome.FAILED for c in report.cells)
    tree = BaseTree("base", base.parent, head.parent)

    found = compare_target(
        open_run(quick, options, toolchain, [gpu]), report, tree, everything=True
    )

    failing = found["planted.add_one", "n1000"]
    assert failing.judgement is Judgement.NOT_RUN, failing
    assert failing.why.startswith("the base's build fails its check on this case: y:"), failing
    same = found["planted.big_smem", "blocks4"]  # the same code: measured, and alike
    assert same.judgement in (Judgement.SAME, Judgement.AMBIGUOUS), same
    assert 0.9 < same.ratio < 1.1 and same.low <= same.ratio <= same.high, same
    assert same.rounds >= 6 and same.same_inputs is True, same


def test_a_gpu_another_process_keeps_busy_is_named_shared(matrix, toolchain, gpu, tmp_path):
    load = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "gpu_load.py"), "120"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert load.stdout.readline().strip() == "ready"
        options = RunOptions(
            matrix.targets["sm_90a"], (PLANTED,), tmp_path / "r", tmp_path / "c", "add_one", "t"
        )
        result = run_target(matrix, options, toolchain, [gpu])
    finally:
        load.kill()
        load.wait()
    cell = next(c for c in result.cells if c.case == "n1000")
    assert cell.outcome is Outcome.PASSED, cell.message
    assert cell.timing.shared_gpu, cell.timing  # the samples' waits, and NVML where it can say
    assert result.report.shared_gpu and "ran while another process used the GPU" in (
        result.report.shared_gpu
    )


def test_a_gpu_of_its_own_is_not_called_shared(cells):
    timed = [c for c in cells.values() if c.timing]
    assert timed and not [c for c in timed if c.timing.shared_gpu], [
        (c.name, c.timing.queued_us, c.timing.shared_gpu) for c in timed if c.timing.shared_gpu
    ]


def test_a_worker_makes_its_context_and_is_killed_only_while_no_case_is_timed(
    matrix, gpu, tmp_path
):
    """A CUDA context made or torn down beside a timing delays and slows its samples: a worker
    makes its context under the GPU's lock, and the pool kills it under the lock. Seen from here
    in the GPU's free memory, which a context takes and gives back."""
    from cuda.bindings import driver
    from cuda.core import Device

    from harness.run.checked import check
    from harness.run.quiet import QuietLock
    from harness.run.worker import WorkerSetup, gpu_pool

    Device(gpu.ordinal).set_current()

    def free() -> int:
        return int(check(driver.cuMemGetInfo())[0])

    lock = tmp_path / "gpu.lock"
    timing = QuietLock(lock)  # as another worker's, timing
    setup = WorkerSetup(gpu, matrix.timer, quiet_lock=lock)
    pool = gpu_pool(setup)  # as the run makes a GPU's
    alone = free()
    try:
        with timing.exclusive():
            pool.start()
            time.sleep(5.0)  # a worker's start takes about a second
            assert not pool.caught_up()
            waiting = free()
        deadline = time.monotonic() + 60
        while not pool.caught_up() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.caught_up()
        made = free()
        assert alone - waiting < 16 << 20, (alone, waiting)  # no context yet
        assert alone - made > 64 << 20, (alone, made)  # its context and flush buffer
        with timing.exclusive():
            pool.close(wait=False)
            time.sleep(2.0)
            killing = free()
        pool.close()
        gone = free()
    finally:
        pool.close()
        timing.close()
    assert abs(killing - made) < 16 << 20, (made, killing)  # not killed during the timing
    assert gone - made > 64 << 20, (made, gone)  # then killed, its memory given back


def test_staged_downloads_stay_whole_until_reset_and_the_staging_grows_once(gpu):
    from cuda.bindings import driver
    from cuda.core import Device

    from harness.run.checked import check
    from harness.run.staging import HostStaging

    device = Device(gpu.ordinal)
    device.set_current()
    staging = HostStaging()
    first = staging.array((1000, 3), np.dtype(np.float32))
    first[:] = 1.0
    second = staging.array((5_000_000,), np.dtype(np.float64))  # beyond the first block
    second[:] = 2.0
    third = staging.array((0, 4), np.dtype(np.int8))  # an empty output
    assert third.shape == (0, 4)
    assert (first == 1.0).all() and (second == 2.0).all()  # the first block kept for `first`
    data = np.arange(7, dtype=np.int32)
    buffer = device.allocate(data.nbytes, stream=device.create_stream())
    check(driver.cuMemcpyHtoD(int(buffer.handle), data.ctypes.data, data.nbytes))
    staging.reset()
    kept = staging.held_bytes
    assert kept >= first.nbytes + second.nbytes  # the larger block, the smaller given back
    assert staging.locked_bytes == kept  # the driver locked it
    landed = staging.array(data.shape, data.dtype)
    check(driver.cuMemcpyDtoH(landed.ctypes.data, int(buffer.handle), data.nbytes))
    assert np.array_equal(landed, data)
    staging.reset()
    # everything the last check took fits the block it kept: no more page-locked memory
    staging.array((1000, 3), np.dtype(np.float32))
    staging.array((5_000_000,), np.dtype(np.float64))
    assert staging.held_bytes == kept
    # a reset told of more makes and locks a block that large, and downloads land in it
    staging.reset(4 * kept)
    again = staging.array(data.shape, data.dtype)
    assert staging.held_bytes == staging.locked_bytes >= 4 * kept
    check(driver.cuMemcpyDtoH(again.ctypes.data, int(buffer.handle), data.nbytes))
    assert np.array_equal(again, data)
    staging.close()
    assert staging.held_bytes == 0


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_the_examples_of_context_limits_and_64_bit_sizes_run_as_their_specs_say(
    matrix, toolchain, gpu, tmp_path, target
):
    """20,000 child grids with pending_launches raised, device printf in the case's output,
    2^31 + 63 bytes indexed in 64 bits, bilinear filtering over a CUDA array (clamped and
    wrapped), and a case declaring more memory than any GPU has skipped before its setup()
    would build 400 GB of host arrays."""
    examples = ROOT / "examples" / "kernels"
    cells = _run(matrix, toolchain, gpu, [examples], tmp_path, target=target)
    for kernel, case in [
        ("many_children", "r20000_c64"),
        ("device_printf", "n1M"),
        ("add_one_int64", "n2147483711"),
        ("declared_memory", "n16M"),
        ("resample_bilinear", "up2x_clamp_2048"),
        ("resample_bilinear", "up2x_wrap_shifted"),
        ("resample_bilinear", "down3x_clamp"),
    ]:
        assert cells[kernel, case].outcome is Outcome.PASSED, cells[kernel, case].message
    assert "device printf (standard output):\nblock 0 covers elements 0 to 255" in (
        cells["device_printf", "n1M"].detail or ""
    )
    huge = cells["declared_memory", "n50G"]
    assert huge.outcome is Outcome.SKIPPED and "skipped before setup()" in huge.message


def test_context_limits_are_set_as_asked_and_the_defaults_come_back(gpu):
    from cuda.bindings import driver
    from cuda.core import Device

    from harness.run.checked import check
    from harness.run.context import ContextLimiter
    from harness.spec import ContextLimits, DeviceUnsupported

    Device(gpu.ordinal).set_current()
    pending = driver.CUlimit.CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT
    default = check(driver.cuCtxGetLimit(pending))
    limiter = ContextLimiter()
    limiter.allow(ContextLimits(pending_launches=32768))
    assert check(driver.cuCtxGetLimit(pending)) >= 32768
    limiter.allow(ContextLimits())  # another kernel, asking nothing
    assert check(driver.cuCtxGetLimit(pending)) == default
    with pytest.raises(DeviceUnsupported, match="stack_bytes"):
        limiter.allow(ContextLimits(stack_bytes=2**30))


def test_surfaces_are_poisoned_checked_and_held_to_the_arrays_a_device_makes(
    matrix, toolchain, gpu, tmp_path
):
    """An output written through a surface starts as poison and is copied back before it is
    checked; an input written through one is found; an array wider than the GPU makes is a
    device-unsupported skip with the figures, before anything runs."""
    cells = _run(matrix, toolchain, gpu, [SURFACES], tmp_path)
    missed = cells["misses_a_column", "100x70"]
    assert missed.outcome is Outcome.FAILED and "100 of 7000 elements" in missed.message, missed
    written = cells["writes_its_input", "100x70"]
    assert written.outcome is Outcome.FAILED, written.message
    assert "input 'x' was written by the kernel: 7000 of 7000 elements" in written.message
    narrow = cells["longer_than_a_device_makes", "100x70"]
    assert narrow.outcome is Outcome.PASSED and narrow.timing is not None, narrow.message
    wide = cells["longer_than_a_device_makes", "2x140000"]
    assert wide.outcome is Outcome.SKIPPED, wide.message
    assert wide.skip_reason.value == "device-unsupported"
    assert "a 2-D surface over 'y' of 140000 x 2 elements (x first), beyond" in wide.message


def test_the_stand_in_of_this_gpus_family_makes_the_arrays_this_gpu_makes(matrix, gpu):
    """The CPU check skips a case as this GPU would only where the stand-in's largest arrays
    are its family's: held to the driver's figures here."""
    from cuda.core import Device

    from harness.run.launch import largest_array
    from harness.run.stand_in import stand_in_for

    family = [t for t in matrix.targets.values() if t.cc.major == gpu.cc.major]
    if not family:
        pytest.skip(f"no target of this GPU's family (CC {gpu.cc.major}.x) in the matrix")
    device = Device(gpu.ordinal)
    device.set_current()
    stand_in = stand_in_for(family[0])
    for kind in ("texture", "surface"):
        for dims in (1, 2, 3):
            assert largest_array(device, kind, dims) == stand_in.largest_array(kind, dims), (
                kind,
                dims,
            )
