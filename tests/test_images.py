"""Images per target, the job matrix, and (where a docker engine answers) a real build and run.

The docker tests are skipped only where no engine answers; CI starts one (.ci/run), so there
they build an image for real, compile every kernel inside it and compare with the host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import images
from harness.model.errors import Unavailable
from harness.model.matrix import load_matrix
from harness.model.outcome import Outcome, SkipReason
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import run_target
from harness.report.merge import read_report
from tests.conftest import ROOT, needs_docker

NEW_TARGET = """  sm_120a:
    sass: sm_120a
    ptx: false
    toolkit: "13.0"
    session: sm120
    image: cuda-matrix-sm120
    runner_labels: [self-hosted, linux, x64, gpu-sm120]
"""


def test_the_tag_follows_the_build_inputs(matrix, tmp_path, monkeypatch):
    for relative in images.CONTEXT_FILES:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    target = matrix.targets["sm_90a"]
    tag = images.image_for(target, tmp_path).tag
    assert tag.startswith("cuda-matrix-sm90:")
    assert images.image_for(target, tmp_path).tag == tag  # stable
    assert (
        images.image_for(matrix.targets["sm_80"], tmp_path).tag.split(":")[1] != tag.split(":")[1]
    )
    monkeypatch.setenv("MATRIX_CA_BUNDLE", str(tmp_path / "requirements.txt"))
    assert images.image_for(target, tmp_path).tag == tag  # how pip reaches PyPI is not content
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    assert images.image_for(target, tmp_path).tag != tag
    (tmp_path / "docker" / "entrypoint.sh").write_text("#!/bin/sh\n")
    assert images.image_for(target, tmp_path).tag not in (tag, images.image_for(target, ROOT).tag)


def test_the_ci_image_is_the_one_a_laptop_looks_for(matrix, monkeypatch):
    """The tag hashes the build inputs only: no CA bundle, no proxy, no host."""
    target = matrix.targets["sm_90a"]
    tags = set()
    for variable in (None, *images.CA_BUNDLE_VARIABLES):
        for name in images.CA_BUNDLE_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        if variable:
            monkeypatch.setenv(variable, str(ROOT / "requirements.txt"))
        tags.add(images.image_for(target, ROOT).tag)
    assert len(tags) == 1


@pytest.mark.parametrize(
    ("output", "cause"),
    [
        (
            [
                "Step 4/9 : RUN pip install",
                "ssl.SSLCertVerificationError: [SSL: "
                "CERTIFICATE_VERIFY_FAILED] certificate verify failed",
                "ERROR: No matching dist",
            ],
            "pip could not verify PyPI's TLS certificate. Behind a TLS-inspecting proxy, name "
            "its CA bundle: MATRIX_CA_BUNDLE=/path/to/ca.pem",
        ),
        (
            [
                "Step 1/9 : FROM debian:bookworm-slim",
                "pull access denied for debian, repository does not exist",
            ],
            "the base image debian:bookworm-slim cannot be pulled here; make it locally: "
            "nox -s base-image",
        ),
        (
            [
                "Collecting numpy==9.9",
                "ERROR: No matching distribution found for numpy==9.9",
                "The command '/bin/sh -c ...' returned a non-zero code: 1",
            ],
            "ERROR: No matching distribution found for numpy==9.9",
        ),
    ],
    ids=["certificate", "base-image", "pip"],
)
def test_a_failed_build_names_its_real_cause(output, cause):
    assert images.build_failure(output, "debian:bookworm-slim") == cause


def test_the_container_is_told_the_host_s_runner_name(monkeypatch):
    from harness.model.provenance import runner_name

    monkeypatch.setenv("MATRIX_RUNNER", "gpu-box-7")
    assert runner_name() == "gpu-box-7" and runner_name("given") == "given"


def test_the_gpu_docker_command_line_is_exactly_this(matrix):
    """What the NVIDIA Container Toolkit needs (--gpus all), and the sandbox around it. The GPU
    machine here has no docker: this line is checked, not run, on a GPU."""
    image = images.image_for(matrix.targets["sm_90a"], ROOT)
    mounts = images.Mounts(ROOT, ROOT / "reports", ROOT / ".cache" / "compile", (1000, 1001))
    command = images.harness_command(
        image, mounts, ["test", "sm_90a"], True, matrix.container, {"MATRIX_RUNNER": "box"}
    )
    assert command == [
        "docker", "run", "--rm", "--network", "none", "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges", "--user", "1000:1001", "--read-only",
        "--tmpfs", "/tmp:rw,exec,size=8g", "--env", "HOME=/tmp",
        "--env", "CUDA_CACHE_PATH=/tmp/cuda-cache",
        "--pids-limit", str(matrix.container.pids), "--memory", matrix.container.memory,
        "--volume", f"{ROOT}:/src:ro",
        "--volume", f"{ROOT / 'harness'}:/opt/cuda-matrix/harness:ro",
        "--volume", f"{ROOT / 'reports'}:/out/reports",
        "--volume", f"{ROOT / '.cache' / 'compile'}:/out/cache", "--gpus", "all",
        "--env", "MATRIX_RUNNER=box", image.tag, "test", "sm_90a",
        "--reports", "/out/reports", "--cache", "/out/cache",
    ]  # fmt: skip


def _nox(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "nox", *args], capture_output=True, text=True, cwd=cwd
    )


def test_a_new_target_in_matrix_yaml_brings_its_sessions_and_jobs(tmp_path):
    for name in ("noxfile.py", "matrix.yaml", "requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "harness", tmp_path / "harness")
    text = (tmp_path / "matrix.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(text.replace("\ntiming:", NEW_TARGET + "\ntiming:", 1))
    listed = _nox("-l", "--json", "-s", "build-sm120", "test-sm120", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert {s["session"] for s in json.loads(listed.stdout)} == {"build-sm120", "test-sm120"}
    planned = _nox("-s", "gha-matrix", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    jobs = {job["target"]: job for job in json.loads(planned.stdout)["include"]}
    assert set(jobs) == {*load_matrix(ROOT / "matrix.yaml").targets, "sm_120a"}
    assert jobs["sm_120a"]["runner"] == ["self-hosted", "linux", "x64", "gpu-sm120"]
    assert jobs["sm_120a"]["session"] == "sm120"
    assert (jobs["sm_120a"]["shard"], jobs["sm_120a"]["report"]) == ("", "junit-sm_120a")


def test_a_target_in_shards_is_a_gpu_job_per_shard_and_one_image(tmp_path):
    for name in ("noxfile.py", "matrix.yaml", "requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "harness", tmp_path / "harness")
    text = (tmp_path / "matrix.yaml").read_text()
    sharded = text.replace("    session: sm90\n", "    session: sm90\n    shards: 3\n", 1)
    assert sharded != text
    (tmp_path / "matrix.yaml").write_text(sharded)
    planned = _nox("-s", "gha-matrix", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    jobs = [job for job in json.loads(planned.stdout)["include"] if job["target"] == "sm_90a"]
    assert [(j["shard"], j["report"], j["artifact"]) for j in jobs] == [
        (f"{i}/3", f"junit-sm_90a-shard{i}of3", f"reports-sm_90a-shard{i}of3") for i in (1, 2, 3)
    ]
    images_only = _nox("-s", "gha-matrix", "--", "images", cwd=tmp_path)
    targets = [job["target"] for job in json.loads(images_only.stdout)["include"]]
    assert targets == list(load_matrix(ROOT / "matrix.yaml").targets)  # one image per column


CALLERS = sorted((ROOT / "tests" / "fixtures" / "consumer" / ".github" / "workflows").glob("*.yml"))


def test_the_workflow_takes_its_jobs_from_the_plan():
    workflows = ROOT / ".github" / "workflows"
    workflow = (workflows / "cuda-matrix.yml").read_text()
    assert "nox --non-interactive -s gha-matrix" in workflow
    assert "runs-on: ${{ matrix.runner }}" in workflow
    for path in (*workflows.glob("*.yml"), *CALLERS):
        text = path.read_text()
        assert "pull_request_target" not in text, path
        for line in text.splitlines():
            if "uses:" in line:  # every action and workflow pinned by a full commit SHA
                reference = line.split("uses:")[1].split("#")[0].strip()
                if reference.startswith("$/"):  # this repository's own, at this very commit
                    continue
                assert len(reference.split("@")[1]) == 40, line


@pytest.fixture(scope="module")
def built(matrix, pytestconfig):
    """The sm_90a image, built for real; (image, built_now, built_again). The build takes
    minutes: its progress goes to the terminal, past pytest's capture."""
    image = images.image_for(matrix.targets["sm_90a"], ROOT)
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        images.make_base(image.build_args["BASE_IMAGE"])
        first = images.build(image)
    second = images.build(image)
    return image, first, second


@needs_docker
def test_a_second_build_is_a_no_op(built):
    image, _, second = built
    assert second is False
    labels = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image.tag],
        capture_output=True,
        text=True,
    )
    assert json.loads(labels.stdout)["org.cuda-matrix.target"] == "sm_90a"


def _probe(image, mounts, code):
    command = images.container_flags(
        mounts, gpu=False, limits=load_matrix(ROOT / "matrix.yaml").container
    )
    return subprocess.run(
        [*command, "--entrypoint", "python", image.tag, "-c", code], capture_output=True, text=True
    )


def _mounts(tmp_path: Path) -> images.Mounts:
    owner = (os.getuid(), os.getgid())
    return images.Mounts(ROOT, tmp_path / "reports", tmp_path / "cache", owner)


def test_the_container_runs_as_the_invoker_and_never_as_root():
    as_user = images.Mounts(ROOT, ROOT / "r", ROOT / "c", (1000, 1000))
    assert as_user.user == (1000, 1000)
    flags = images.container_flags(
        as_user, gpu=False, limits=load_matrix(ROOT / "matrix.yaml").container
    )
    assert flags[flags.index("--user") + 1] == "1000:1000"
    as_root = images.Mounts(ROOT, ROOT / "r", ROOT / "c", (0, 0))
    assert as_root.user == images.IMAGE_USER != (0, 0)


@pytest.mark.skipif(os.getuid() != 0, reason="only root can hand folders to another user")
def test_a_root_invoker_lends_the_folders_and_gets_everything_back_never_world_writable(
    tmp_path,
):
    mounts = _mounts(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("root's")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "planted").symlink_to(victim)  # a link is handed over, not its target
    with mounts.lent():
        for folder in (mounts.reports, mounts.cache):
            assert (folder.stat().st_uid, folder.stat().st_gid) == images.IMAGE_USER
            assert folder.stat().st_mode & 0o002 == 0
        assert victim.stat().st_uid == 0
        written = mounts.cache / "sm_90a" / "binary"  # as the container would leave it
        written.parent.mkdir()
        written.write_text("x")
        os.chown(written.parent, *images.IMAGE_USER)
        os.chown(written, *images.IMAGE_USER)
    for path in (mounts.reports, mounts.cache, written.parent, written):
        assert (path.stat().st_uid, path.stat().st_gid) == (0, 0), path
        assert path.stat().st_mode & 0o002 == 0, path


@needs_docker
def test_the_container_is_not_root_has_no_network_and_cannot_write_sources(built, tmp_path):
    image, _, _ = built
    mounts = _mounts(tmp_path)
    with mounts.lent():
        _check_the_sandbox(image, mounts)
    assert mounts.reports.stat().st_uid == os.getuid()


def _check_the_sandbox(image, mounts):
    user = _probe(image, mounts, "import os; print(os.getuid(), os.getgid())")
    assert user.returncode == 0 and user.stdout.split() == [str(i) for i in mounts.user], user
    assert mounts.user[0] != 0
    interfaces = _probe(image, mounts, "import os; print(sorted(os.listdir('/sys/class/net')))")
    assert interfaces.stdout.strip() == "['lo']", interfaces  # loopback only: no network
    network = _probe(
        image, mounts, "import socket; socket.create_connection(('pypi.org', 443), timeout=5)"
    )
    assert network.returncode != 0 and "socket.gaierror" in network.stderr, network
    write = _probe(image, mounts, "open('/src/written-by-container', 'w')")
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write
    root = _probe(image, mounts, "open('/etc/written-by-container', 'w')")
    assert root.returncode != 0 and "Read-only file system" in root.stderr, root  # --read-only
    scratch = _probe(image, mounts, "open('/tmp/scratch', 'w').write('ok'); print('ok')")
    assert scratch.stdout.strip() == "ok", scratch  # nvcc's intermediate files go there
    status = _probe(image, mounts, "print(open('/proc/self/status').read())").stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["CapEff"].strip() == "0000000000000000", fields["CapEff"]  # --cap-drop ALL
    assert fields["NoNewPrivs"].strip() == "1"  # --security-opt no-new-privileges


@needs_docker
def test_the_main_command_in_the_image_gives_the_host_s_cells(
    matrix, toolchain, built, compile_cache, tmp_path
):
    """`test sm_90a` (what `nox -s test-sm90` runs) in the image and on the host: the same
    cells, compile cells with the same resources; no GPU here, so run cells skip on both."""
    image, _, _ = built
    options = RunOptions(
        matrix.targets["sm_90a"],
        (ROOT / "kernels",),
        tmp_path / "host-reports",
        compile_cache,
    )
    on_host = run_target(matrix, options, toolchain, Unavailable("no GPU on this machine"))
    # The container shares the host's compile cache: what the host compiled, it does not.
    owner = (os.getuid(), os.getgid())
    mounts = images.Mounts(ROOT, tmp_path / "reports", compile_cache, owner)
    command = images.harness_command(
        image,
        mounts,
        ["test", "sm_90a"],
        gpu=False,
        limits=matrix.container,
        env={"MATRIX_RUNNER": "the-host"},
    )
    with mounts.lent():
        inside = subprocess.run(command, capture_output=True, text=True)
    assert inside.returncode == 0, inside.stdout[-2000:] + inside.stderr[-2000:]
    assert "compile: nothing to do" in inside.stdout, inside.stdout[-2000:]
    in_container = read_report(mounts.reports / "junit-sm_90a.xml")
    assert in_container.suite == "cuda-matrix.sm_90a.the-host"  # the host's name, passed in
    written = mounts.reports / "junit-sm_90a.xml"
    assert (written.stat().st_uid, written.stat().st_gid) == mounts.owner  # the invoker's
    back_on_host = run_target(matrix, options, toolchain, Unavailable("no GPU on this machine"))
    assert back_on_host.compiled == 0  # and back: nothing compiled either way

    def cells(found):
        return {
            (c.classname, c.name): (c.outcome, c.skip_reason, c.compile and c.compile.resources)
            for c in found
        }

    host = cells(on_host.cells)
    assert cells(in_container.cells) == host
    for (_, name), (outcome, reason, _) in host.items():
        if reason is SkipReason.TARGET_UNSUPPORTED:  # an sm_100a kernel: neither builds it
            continue
        if name.startswith("compile["):
            assert outcome is Outcome.PASSED, name
        else:
            assert outcome is Outcome.SKIPPED and reason is SkipReason.NO_DEVICE, name


@needs_docker
def test_a_bare_docker_run_says_how_to_use_the_image(built):
    image, _, _ = built
    bare = subprocess.run(["docker", "run", "--rm", image.tag], capture_output=True, text=True)
    assert bare.returncode == 2
    assert "mounted at /src" in bare.stderr and "nox -s test-sm90" in bare.stderr, bare.stderr
    assert "Traceback" not in bare.stderr


@needs_docker
def test_the_image_carries_compute_sanitizer(built, tmp_path):
    image, _, _ = built
    code = (
        "from harness.compile.toolchain import find_toolchain; "
        "from harness.run.sanitizer import find_compute_sanitizer; "
        "import subprocess; path = find_compute_sanitizer(find_toolchain()); "
        "print(path); print(subprocess.run([path, '--version'], capture_output=True, "
        "text=True).stdout)"
    )
    found = _probe(image, _mounts(tmp_path), code)
    assert found.returncode == 0, found.stderr
    assert "/opt/matrix/venv/" in found.stdout and "Compute Sanitizer" in found.stdout, found


@pytest.mark.parametrize(
    "command", [["actionlint"], ["zizmor", "--offline", ".github/workflows"]], ids=lambda c: c[0]
)
def test_the_workflow_passes_actionlint_and_zizmor(command):
    tool = shutil.which(
        command[0], path=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    )
    if tool is None:
        pytest.skip(f"{command[0]} is not installed (requirements-test.txt installs it)")
    checked = subprocess.run([tool, *command[1:]], capture_output=True, text=True, cwd=ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


FAKE_DOCKER = """#!/bin/sh
# An engine that answers, and a build that fails as pip fails behind an unknown proxy CA.
case "$1" in
  info) echo 28.2.2 ;;
  image) exit 1 ;;
  build) echo "Step 4/9 : RUN pip install"
         echo "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify"
         exit 1 ;;
  *) exit 1 ;;
esac
"""


def test_auto_runs_on_the_host_and_says_why_when_the_image_cannot_build(tmp_path, compile_cache):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    planted = ROOT / "tests" / "fixtures" / "kernels"
    args = ["-k", "add_one", "--kernels", str(planted), "--reports", str(tmp_path / "r")]
    done = subprocess.run(
        [sys.executable, "-m", "nox", "--no-venv", "-s", "test-sm90", "--", *args,
         "--cache", str(compile_cache)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PATH": path},
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "backend: host (docker unavailable: docker build of cuda-matrix-sm90:" in said
    assert "pip could not verify PyPI's TLS certificate" in said and "MATRIX_CA_BUNDLE" in said
    assert (tmp_path / "r" / "partial-junit-sm_90a.xml").is_file(), said  # the run went on
