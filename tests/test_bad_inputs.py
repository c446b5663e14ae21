"""The bad inputs and build faults a user meets, as one table: what was tried, what the run says.

Each row makes one fault in a private copy of the planted kernels or of matrix.yaml, runs the
harness as a user would (no GPU needed), and checks the outcome and that the message names the
file, line or kernel. The other cells of the run must still report.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PLANTED, ROOT

SPEC = "planted/add_one/spec.py"
SOURCE = "planted/add_one/add_one.cu"
NEEDS_SM90 = "planted/needs_sm90/needs_sm90.cu"


def _fake_nvcc(folder: Path, version: str, body: str) -> Path:
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "release x, V{version}"; exit 0; fi\n' + body
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return nvcc


# An nvcc that hangs in a kernel's compile, and answers the harness's questions of it (its
# targets, its include folders) with nothing at once, so that a run reaches its compile stage
HANGS_IN_ITS_COMPILE = 'case " $* " in *" -fatbin "*) sleep 60;; esac\n'


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# (fault, how to make it in `work` (a folder with kernels/ and matrix.yaml; it may return
#  environment variables for the run), expected exit status, fragments the output must hold)
def _prepend(path: Path, text: str) -> None:
    path.write_text(text + path.read_text())


def _include(work: Path, line: str) -> None:
    """add_one.cu begins with `line`; beside the tree, a header holding a secret."""
    (work / "secret.h").write_text("#define SECRET_TOKEN_123 1\n")
    source = work / "kernels" / SOURCE
    source.write_text(line + "\n" + source.read_text())


def _file(path: Path) -> Path:
    path.write_text("not a folder\n")
    return path


def _link(work: Path, target: str) -> Path:
    link = work / "link"
    link.symlink_to(target)
    return link


def _fifo(work: Path) -> Path:
    fifo = work / "times.fifo"
    os.mkfifo(fifo)
    return fifo


def _times(work: Path, seconds: str) -> Path:
    """A --times object of seconds whose add_one takes `seconds` (JSON as Python writes it)."""
    times = work / "times.json"
    times.write_text(f'{{"planted.add_one": {seconds}, "planted.needs_sm90": 1.0}}')
    return times


def _second_tree(work: Path, folder: str) -> dict:
    """Another kernel tree beside kernels/, holding add_one at `folder` (<chapter>/<kernel>)."""
    other = work / "other"
    shutil.copytree(PLANTED / "planted" / "add_one", other / folder)
    (other / folder / "add_one.cu").write_text('extern "C" __global__ void broken( {\n')
    return {"ARGS": ["--kernels", str(other)]}


def _dotted_twins(work: Path) -> dict:
    """kernels/planted.1/add_one beside other/planted/1.add_one: both are planted.1.add_one."""
    (work / "kernels" / "planted.1").mkdir()
    shutil.move(work / "kernels" / "planted" / "add_one", work / "kernels" / "planted.1")
    return _second_tree(work, "planted/1.add_one")


TABLE = [
    (
        "matrix.yaml is not YAML",
        lambda work: (work / "matrix.yaml").write_text("targets:\n  sm_80: [unclosed\n"),
        2,
        ["matrix.yaml:2: not valid YAML"],
    ),
    (
        "matrix.yaml has an unknown key",
        lambda work: _edit(
            work / "matrix.yaml", "    sass: sm_90a", "    sass: sm_90a\n    gpu: h200"
        ),
        2,
        ["matrix.yaml:", "unknown key 'gpu'"],
    ),
    (
        "matrix.yaml names a bad arch",
        lambda work: _edit(work / "matrix.yaml", "sass: sm_90a", "sass: hopper"),
        2,
        ["'hopper' is not an arch like sm_80, sm_90a or sm_100f"],
    ),
    (
        "matrix.yaml names an arch nvcc does not know",
        lambda work: _edit(work / "matrix.yaml", "sass: sm_90a", "sass: sm_1000a"),
        1,
        ["matrix.yaml: target sm_90a emits sm_1000a, which nvcc 13.0", "does not know (it knows"],
    ),
    (
        "a spec raises while importing",
        lambda work: (work / "kernels" / SPEC).write_text("import numpy\nraise ValueError('x')\n"),
        1,
        ["ERROR    planted.add_one::spec[sm_90a]", "add_one/spec.py: import failed at line 2"],
    ),
    (
        "a spec has a syntax error",
        lambda work: (work / "kernels" / SPEC).write_text("import numpy\n\nSPEC = (\n"),
        1,
        ["add_one/spec.py: import failed at line 3: SyntaxError"],
    ),
    (
        "the compile cache is a file",
        lambda work: {"ARGS": ["--cache", str(_file(work / "cache-file"))]},
        2,
        ["error: --cache", "cache-file: not a folder"],
    ),
    (
        "a spec calls sys.exit(3) at import",
        lambda work: (work / "kernels" / SPEC).write_text("import sys\nsys.exit(3)\n"),
        1,
        ["ERROR    planted.add_one::spec[sm_90a]", "import failed at line 2: SystemExit: 3"],
    ),
    (
        "a spec calls os._exit(1) at import",
        lambda work: (work / "kernels" / SPEC).write_text("import os\nos._exit(1)\n"),
        1,
        ["add_one/spec.py: importing it ended the process (exited with status 1)"],
    ),
    (
        "a spec leaves a thread running at import",
        lambda work: _prepend(
            work / "kernels" / SPEC,
            "import threading, time\n"
            "threading.Thread(target=time.sleep, args=(600,), name='stray').start()\n",
        ),
        1,
        [
            "ERROR    planted.add_one::spec[sm_90a]",
            "add_one/spec.py: importing it left threads running (stray)",
            "PASSED   planted.needs_sm90::compile[sm_90a]",  # no other kernel blamed
        ],
    ),
    (
        "a spec prints another spec's import markers, then ends the process",
        lambda work: _prepend(
            work / "kernels" / SPEC,
            "import os\n"
            f"print('\\ndone {work / 'kernels' / SPEC}\\nstart /elsewhere/spec.py', flush=True)\n"
            "os._exit(1)\n",
        ),
        1,
        ["add_one/spec.py: importing it ended the process (exited with status 1)"],
    ),
    (
        "a spec replaces the harness's compile verdict at import, to pass every kernel",
        lambda work: (
            _prepend(work / "kernels" / NEEDS_SM90, '#error "broken on purpose"\n'),
            _prepend(
                work / "kernels" / SPEC,
                "import harness.pipeline.compiling as stage\n"
                "def _passed(kernel, target, build, where, real=stage._compile_cell):\n"
                "    cell = real(kernel, target, build, where)\n"
                "    cell.outcome, cell.message = type(cell.outcome).PASSED, ''\n"
                "    return cell\n"
                "stage._compile_cell = _passed\n",
            ),
        ),
        1,
        ["FAILED   planted.needs_sm90::compile[sm_90a]", "broken on purpose"],
    ),
    (
        "a spec hangs at import",
        lambda work: (
            (work / "kernels" / SPEC).write_text("import time\ntime.sleep(600)\n"),
            _edit(work / "matrix.yaml", "  case_timeout_s: 60", "  case_timeout_s: 3"),
        ),
        1,
        ["add_one/spec.py: importing it did not finish within 3 s"],
    ),
    (
        "a kernel includes a file outside its tree",
        lambda work: _include(work, '#include "../../../secret.h"'),
        1,
        ["the kernel's source reaches", "secret.h, outside the kernel tree", "refused"],
    ),
    (
        "a kernel's .cu is a link to a file outside its tree",
        lambda work: (
            (work / "secret.cu").write_text((work / "kernels" / SOURCE).read_text()),
            (work / "kernels" / SOURCE).unlink(),
            (work / "kernels" / SOURCE).symlink_to(work / "secret.cu"),
        ),
        1,
        ["the kernel's source reaches", "secret.cu, outside the kernel tree", "refused"],
    ),
    (
        "a spec names a source outside its tree",
        lambda work: (
            (work / "secret.cu").write_text((work / "kernels" / SOURCE).read_text()),
            _edit(work / "kernels" / SPEC, 'source="add_one.cu"', 'source="../../../secret.cu"'),
        ),
        1,
        ["the kernel's source reaches", "secret.cu, outside the kernel tree", "refused"],
    ),
    (
        "a kernel includes an absolute path",
        lambda work: _include(work, "#include </etc/hostname>"),
        1,
        ["the kernel's source reaches /etc/hostname, outside the kernel tree", "refused"],
    ),
    (
        "a spec defines no SPEC",
        lambda work: (work / "kernels" / SPEC).write_text("CASES = ()\n"),
        1,
        ["add_one/spec.py: defines no SPEC = KernelSpec(...)"],
    ),
    (
        "a spec names a missing .cu",
        lambda work: (work / "kernels" / SOURCE).unlink(),
        1,
        ["add_one/spec.py: source 'add_one.cu' is not a file beside it"],
    ),
    (
        "a .cu does not compile",
        lambda work: (work / "kernels" / SOURCE).write_text('extern "C" __global__ void f( {\n'),
        1,
        ["FAILED   planted.add_one::compile[sm_90a]", "nvcc failed for", "add_one.cu"],
    ),
    (
        "NVCC names a file that is not there",
        lambda work: {"NVCC": str(work / "nowhere" / "nvcc")},
        1,
        ["$NVCC is", "nowhere/nvcc, which is not an executable file", "FAILED   planted.add_one"],
    ),
    (
        "nvcc is of another toolkit than the target pins",
        lambda work: {"NVCC": str(_fake_nvcc(work, "12.8.93", "exit 1\n"))},
        1,
        ["sm_90a pins CUDA 13.0, but", "is 12.8.93"],
    ),
    (
        "--kernels names a folder that is not there",
        lambda work: {"ARGS": ["--kernels", str(work / "nowhere")]},
        2,
        ["error: --kernels", "nowhere: no such directory"],
    ),
    (
        "-k selects no kernel",
        lambda work: {"ARGS": ["-k", "no_such_kernel"]},
        2,
        ["error: -k 'no_such_kernel' selects none of the 4 kernels found"],
    ),
    (
        "two trees hold the same <chapter>.<kernel>",
        lambda work: _second_tree(work, "planted/add_one"),
        1,
        [
            "ERROR    planted.add_one::spec[sm_90a]",
            "planted.add_one is the name of 2 kernel folders",
        ],
    ),
    (
        "ch.1/kern and ch/1.kern",
        lambda work: _dotted_twins(work),
        1,
        ["planted.1.add_one is the name of 2 kernel folders", "rename one"],
    ),
    (
        "the disk fills up while nvcc writes",
        lambda work: {
            "NVCC": str(
                _fake_nvcc(
                    work,
                    "13.0.88",
                    "echo \"ptxas info    : Compiling entry function 'error_count'\" >&2\n"
                    "echo 'fatbinary fatal   : Could not write file: No space left on device' >&2\n"
                    "exit 1\n",
                )
            )
        },
        1,
        ["compile[sm_90a]  -- nvcc failed for", "fatbinary fatal   : Could not write file"],
    ),
    (
        "--matrix is a device that never ends",
        lambda work: {"ARGS": ["--matrix", "/dev/zero"]},
        2,
        ["error: /dev/zero: a character device, not a regular file"],
    ),
    (
        "--reports names a file",
        lambda work: {"ARGS": ["--reports", str(_file(work / "afile"))]},
        2,
        ["error: --reports", "afile: not a folder"],
    ),
    (
        "--shard asks for a billion shards",
        lambda work: {"ARGS": ["--shard", "1/1000000000"]},
        2,
        ["error: --shard '1/1000000000': at most 256 shards"],
    ),
    (
        "--shard in Arabic-Indic digits",
        lambda work: {"ARGS": ["--shard", "\u0661/\u0663"]},
        2,
        ["error: --shard", "expected i/N with 1 <= i <= N"],
    ),
    (
        "--times is a device that never ends",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", "/dev/zero"]},
        2,
        ["error: --times /dev/zero: a character device, not a regular file"],
    ),
    (
        "--times is a link to a device",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", str(_link(work, "/dev/zero"))]},
        2,
        ["a character device, not a regular file"],
    ),
    (
        "--times is a FIFO no one writes",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", str(_fifo(work))]},
        2,
        ["times.fifo: a pipe, not a regular file"],
    ),
    (
        "--times holds NaN seconds",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", str(_times(work, "NaN"))]},
        2,
        ["times.json: 'planted.add_one' is nan s, not a time"],
    ),
    (
        "--times holds negative seconds",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", str(_times(work, "-5"))]},
        2,
        ["times.json: 'planted.add_one' is -5 s, not a time"],
    ),
    (
        "--times holds infinite seconds",
        lambda work: {"ARGS": ["--shard", "1/2", "--times", str(_times(work, "Infinity"))]},
        2,
        ["times.json: 'planted.add_one' is inf s, not a time"],
    ),
    (
        "a build flag in Arabic-Indic digits",
        lambda work: (
            _edit(
                work / "kernels" / SPEC,
                "SPEC = KernelSpec(",
                'SPEC = KernelSpec(build=BuildOptions(flags=("-maxrregcount=\u0663\u0662",)), ',
            )
            or _edit(
                work / "kernels" / SPEC,
                "from harness.spec import ",
                "from harness.spec import BuildOptions, ",
            )
        ),
        1,
        ["ERROR    planted.add_one::spec[sm_90a]", "build flag '-maxrregcount=", "is refused"],
    ),
    (
        "nvcc crashes",
        lambda work: {
            "NVCC": str(_fake_nvcc(work, "13.0.88", "echo 'Segmentation fault' >&2; exit 139\n"))
        },
        1,
        ["FAILED   planted.add_one::compile[sm_90a]", "Segmentation fault"],
    ),
]


@pytest.mark.parametrize(("fault", "make", "status", "expected"), TABLE, ids=[r[0] for r in TABLE])
def test_each_bad_input_is_reported_where_it_is(
    fault, make, status, expected, compile_cache, tmp_path
):
    work = tmp_path / "work"
    shutil.copytree(PLANTED, work / "kernels")
    shutil.copy(ROOT / "matrix.yaml", work / "matrix.yaml")
    for kept in ("spec_raises", "compile_error", "wrong_answer", "bad_reference_shape"):
        shutil.rmtree(work / "kernels" / "planted" / kept)  # only this row's fault is in play
    environment = {k: v for k, v in os.environ.items() if k != "NVCC"}
    made = make(work)
    extra = []
    if isinstance(made, dict):  # a row may name an nvcc; it never leaks out of its run
        extra = made.pop("ARGS", [])
        environment.update(made)
    environment["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "test",
            "sm_90a",
            "--matrix",
            str(work / "matrix.yaml"),
            "--kernels",
            str(work / "kernels"),
            "--reports",
            str(work / "reports"),
            "--cache",  # the suite's: the row's fault is built anew, the other kernels served
            str(compile_cache),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
    )
    output = run.stdout + run.stderr
    assert run.returncode == status, output
    for fragment in expected:
        assert fragment in output, f"{fault}: {fragment!r} missing from:\n{output}"
    if status == 1:  # the run went on: the other kernels still have their cells
        assert "planted.needs_sm90::compile[sm_90a]" in output
    assert "SECRET_TOKEN_123" not in output + "".join(
        f.read_text() for f in (work / "reports").glob("*") if f.is_file()
    )
    if status == 2:  # nothing was run: no report, so none looks current
        assert not (work / "reports").exists(), output


def test_a_run_killed_before_its_compile_stage_ends_leaves_no_stale_report(tmp_path):
    """Its report says it did not finish, replacing the last run's, and `report` says so."""
    work = tmp_path / "work"
    shutil.copytree(PLANTED / "planted" / "add_one", work / "kernels" / "planted" / "add_one")
    reports = work / "reports"
    reports.mkdir()
    (reports / "junit-sm_90a.json").write_text('{"the last run": "complete"}')
    nvcc = _fake_nvcc(work, "13.0.88", HANGS_IN_ITS_COMPILE)
    folders = ["--kernels", str(work / "kernels"), "--reports", str(reports)]
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "test", "sm_90a", *folders, "--cache", str(work / "c")],
        cwd=ROOT,
        env={**os.environ, "NVCC": str(nvcc), "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while "the last run" in (reports / "junit-sm_90a.json").read_text():
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    left = json.loads((reports / "junit-sm_90a.json").read_text())
    assert left["finished"] is False and left["cells"] == []
    out = ["--out", str(tmp_path / "out"), "--db", str(tmp_path / "h.sqlite")]
    done = subprocess.run(
        [sys.executable, "-m", "harness", "report", str(reports / "junit-sm_90a.xml"), *out],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert "junit-sm_90a.xml: the run did not finish (killed, or still running)" in done.stderr
    assert "the run did not finish" in (tmp_path / "out" / "summary.md").read_text()


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """`signum` to thread `tid` of process `pid`, as the kernel may choose to deliver a signal
    sent to the process (Python has no call for another process's thread)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


@pytest.mark.parametrize("receiver", ["the process", "another thread"])
def test_ctrl_c_during_a_compile_ends_the_run_with_one_line(tmp_path, receiver):
    work = tmp_path / "work"
    shutil.copytree(PLANTED / "planted" / "add_one", work / "kernels" / "planted" / "add_one")
    nvcc = _fake_nvcc(work, "13.0.88", HANGS_IN_ITS_COMPILE)
    folders = ["--kernels", str(work / "kernels"), "--reports", str(work / "reports")]
    run = subprocess.Popen(
        [sys.executable, "-m", "harness", "test", "sm_90a", *folders, "--cache", str(work / "c")],
        cwd=ROOT,
        env={**os.environ, "NVCC": str(nvcc), "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal's Ctrl-C finds it: a suite started in the background (`cmd &` in a
        # script) passes SIGINT down ignored, and Python then never raises KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not list((work / "c").rglob("*.fatbin.tmp")):  # nvcc has started
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.1)
    if receiver == "the process":
        run.send_signal(signal.SIGINT)
    else:  # the main thread, asleep waiting for the build, is not woken by the signal itself
        others = [int(t.name) for t in Path(f"/proc/{run.pid}/task").iterdir()]
        _tgkill(run.pid, max(tid for tid in others if tid != run.pid), signal.SIGINT)
    _, stderr = run.communicate(timeout=30)  # not nvcc's 60 s
    assert run.returncode == 130
    assert stderr.strip() == "interrupted: the reports hold the cells finished so far"
    assert json.loads((work / "reports" / "junit-sm_90a.json").read_text())["finished"] is False
