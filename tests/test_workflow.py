"""The workflow's aggregate job, its commands run here: a first run starts the history, the next
run is judged against it, as a dispatched pull request's head against main, and only a test job's
same-GPU A/B fails it; and what the workflow itself does to keep pull requests off the GPU
runners, and to give the A/B its base commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT

KEPT = sorted((ROOT / "tests" / "fixtures" / "h200").glob("junit-*.xml"))
NOX_REPORT = "nox --non-interactive -s report --"
SGEMM = "m4096_n4096_k4096_stages3"
SLOWER_AB = {  # a measured A/B in the report's JSON form (harness.model.cell.ABComparison)
    "base_commit": "a" * 40,
    "judgement": "SLOWER",
    "ratio": 1.10,
    "low": 1.095,
    "high": 1.105,
    "threshold_pct": 0.5,
    "rounds": 15,
    "base_median_us": 3000.0,
    "head_median_us": 3300.0,
}


WORKFLOWS = ROOT / ".github" / "workflows"


def _workflow() -> dict:
    """The reusable workflow: the jobs every caller gets."""
    return yaml.safe_load((WORKFLOWS / "cuda-matrix.yml").read_text())


def _caller() -> dict:
    """This repository's own workflow: its triggers, and the reusable one called with them."""
    return yaml.safe_load((WORKFLOWS / "matrix.yml").read_text())


def _aggregate_script() -> str:
    (step,) = [s for s in _workflow()["jobs"]["aggregate"]["steps"] if "judge" in s.get("name", "")]
    # nox only makes the environment: the harness's own command is what runs in it.
    assert NOX_REPORT in step["run"]
    env = dict(step["env"])
    # what Actions makes of the input this repository's workflow passes
    assert env["MAX_SLOWDOWN_PCT"] == "${{ inputs.max-slowdown-pct }}"
    env["MAX_SLOWDOWN_PCT"] = _caller()["jobs"]["matrix"]["with"]["max-slowdown-pct"]
    return step["run"].replace(NOX_REPORT, f"{sys.executable} -m harness report"), env


def _workspace(tmp_path: Path) -> Path:
    """What the aggregate job has: a checkout (the harness and matrix.yaml) and no reports;
    its matrix.yaml the one the kept reports ran under (one toolkit per target)."""
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "harness", work / "harness", ignore=shutil.ignore_patterns("__py*"))
    shutil.copy(ROOT / "tests" / "fixtures" / "h200" / "matrix.yaml", work / "matrix.yaml")
    return work


def _download(work: Path, slower: float = 1.0, ab: dict | None = None) -> int:
    """The test jobs' artifacts, each in artifacts/reports-<target>/ as download-artifact puts
    them: the kept H200 reports, the SGEMM case slower and, when slower, its binary changed (a
    code change, not the environment), and `ab` its A/B (as the test job's A/B step writes it).
    Returns how many timed cells were slowed (one per target that times it)."""
    slowed = 0
    shutil.rmtree(work / "artifacts", ignore_errors=True)
    for xml in KEPT:
        reports = work / "artifacts" / f"reports-{xml.stem.removeprefix('junit-')}"
        reports.mkdir(parents=True)
        shutil.copy(xml, reports / xml.name)
        record = json.loads(xml.with_suffix(".json").read_text())
        for cell in record["cells"]:
            if cell["case"] == SGEMM and cell["timing"]:
                cell["timing"]["samples_us"] = [v * slower for v in cell["timing"]["samples_us"]]
                cell["timing"]["median_us"] *= slower
                cell["ab"] = ab
                slowed += 1
            if slower != 1.0 and cell["kernel"] == "sgemm_cp_async" and cell["case"] == "compile":
                cell["compile"]["binary_sha256"] = "0" * 64
                cell["compile"]["code_identity"] = "0" * 64
        (reports / xml.with_suffix(".json").name).write_text(json.dumps(record))
    return slowed


def _run_job(work: Path, sha: str, base_sha: str = "") -> subprocess.CompletedProcess:
    script, env = _aggregate_script()
    summary = work / f"step-summary-{sha}.md"
    environment = {
        **os.environ,
        **env,
        # What Actions makes of the step's expressions: the commit tested, and main's when a
        # maintainer dispatched a pull request's head.
        "BASE_SHA": base_sha,
        "TESTED_SHA": sha,
        "GITHUB_SHA": base_sha or sha,
        "GITHUB_STEP_SUMMARY": str(summary),
        "PYTHONPATH": str(work),
    }
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=work, env=environment, capture_output=True, text=True
    )


def test_a_second_run_is_judged_against_the_history_the_first_left(tmp_path):
    work = _workspace(tmp_path)
    _download(work)
    first = _run_job(work, "a" * 40)  # a push to main with no history yet: nothing to judge
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert (work / "history" / "history.sqlite").is_file()
    assert "# CUDA matrix:" in (work / f"step-summary-{'a' * 40}.md").read_text()

    # the cache step restores history/ as the first run left it; a pull request's head,
    # dispatched from main
    _download(work)
    same = _run_job(work, "b" * 40, base_sha="a" * 40)
    assert same.returncode == 0, same.stderr[-2000:]
    summary = (work / f"step-summary-{'b' * 40}.md").read_text()
    assert "- against the baseline: " in summary
    assert " 0 SLOWER" in summary and " 0 FASTER" in summary

    slowed = _download(work, slower=1.10)
    slower = _run_job(work, "c" * 40, base_sha="a" * 40)
    assert slower.returncode == 0, slower.stderr[-2000:]  # across runs: shown, never failing
    summary = (work / f"step-summary-{'c' * 40}.md").read_text()
    assert "## Slower than the baseline" in summary and f"{slowed} SLOWER" in summary
    assert f"unconfirmed: async_hopper.sgemm_cp_async {SGEMM}[sm_90a] on vm" in slower.stderr
    assert "no A/B was run for it" in summary

    _download(work, slower=1.10, ab=SLOWER_AB)  # the test job's A/B on its own GPU says so
    confirmed = _run_job(work, "d" * 40, base_sha="a" * 40)
    assert confirmed.returncode == 1  # an A/B SLOWER by more than MAX_SLOWDOWN_PCT
    assert (
        f"{SGEMM}[sm_90a] on vm: 10.0 % slower in the A/B against {'a' * 10} on one GPU: "
        "SLOWER, ratio 1.100 (95 % interval 1.095-1.105"
    ) in confirmed.stderr
    assert "(limit 5 %)" in confirmed.stderr
    summary = (work / f"step-summary-{'d' * 40}.md").read_text()
    assert f"## A/B against {'a' * 10}" in summary and "unconfirmed" not in summary


def test_an_artifact_carrying_another_targets_report_is_left_out(tmp_path):
    """One job's upload may not overwrite or add to another target's report."""
    work = _workspace(tmp_path)
    _download(work)
    smuggled = work / "artifacts" / "reports-sm_100a"
    for suffix in (".xml", ".json"):  # sm_100a's job uploads an sm_90a report as well
        source = work / "artifacts" / "reports-sm_90a" / f"junit-sm_90a{suffix}"
        shutil.copy(source, smuggled / f"junit-sm_90a{suffix}")
    done = _run_job(work, "d" * 40)
    assert done.returncode == 1
    assert "reports-sm_100a/junit-sm_90a.xml: a report of sm_90a in the artifact of sm_100a" in (
        done.stderr
    )


def test_gpu_jobs_never_run_for_a_pull_requests_own_workflow():
    """What the file itself can do; the runner group and ephemeral runners (docs/ci.md) do the
    rest."""
    jobs = _workflow()["jobs"]
    assert jobs["test"]["if"].startswith("github.event_name != 'pull_request' && ")
    assert "github.event_name != 'pull_request'" in jobs["aggregate"]["if"]
    assert jobs["test"]["environment"] == "gpu"
    triggers = _caller()[True]  # YAML reads the key `on` as True
    assert set(triggers) == {"push", "pull_request", "workflow_dispatch", "schedule"}
    assert triggers["push"]["branches"] == ["main"]
    assert "ref" in triggers["workflow_dispatch"]["inputs"]
    for name in ("build", "test"):  # the dispatched commit, resolved once, built and tested
        (checkout,) = [s for s in jobs[name]["steps"] if "actions/checkout" in s.get("uses", "")]
        assert checkout["with"]["ref"] == "${{ needs.plan.outputs.tested }}", name
    gpu_steps = " ".join(str(step.get("run", "")) for step in jobs["test"]["steps"])
    assert "--user" not in gpu_steps and "RUNNER_TEMP" in gpu_steps  # nothing left on the host


def test_the_tested_commit_is_resolved_once_to_its_sha_and_recorded_as_such():
    plan = _workflow()["jobs"]["plan"]
    assert plan["outputs"]["tested"] == "${{ steps.tested.outputs.sha }}"
    (resolve,) = [s for s in plan["steps"] if s.get("id") == "tested"]
    assert "git -C tested rev-parse HEAD" in resolve["run"]
    (tested_checkout,) = [s for s in plan["steps"] if s.get("with", {}).get("path") == "tested"]
    assert tested_checkout["with"]["ref"] == "${{ inputs.ref }}"
    (judge,) = [
        s for s in _workflow()["jobs"]["aggregate"]["steps"] if "judge" in s.get("name", "")
    ]
    assert judge["env"]["TESTED_SHA"] == "${{ needs.plan.outputs.tested }}"  # never a raw ref


def test_the_gpu_runners_are_chosen_by_main_s_files_not_the_tested_commit_s():
    plan = _workflow()["jobs"]["plan"]
    checkouts = [s for s in plan["steps"] if "actions/checkout" in s.get("uses", "")]
    (own,) = [s for s in checkouts if "path" not in s.get("with", {})]
    assert "ref" not in own["with"]  # the workflow's own ref: main's matrix.yaml plans the jobs
    steps = plan["steps"]
    planned = next(i for i, s in enumerate(steps) if s.get("id") == "plan")
    assert "working-directory" not in steps[planned]  # the plan reads main's checkout, at the root
    assert _workflow()["jobs"]["test"]["runs-on"] == "${{ matrix.runner }}"


def test_main_s_runs_are_never_cancelled_and_alone_write_the_history():
    workflow = _workflow()
    concurrency = _caller()["concurrency"]
    # a pull request groups by its ref and cancels its older run; anything else is its own group
    assert concurrency["group"] == (
        "matrix-${{ github.event_name == 'pull_request' && github.ref || github.run_id }}"
    )
    assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    steps = workflow["jobs"]["aggregate"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in steps]
    assert "actions/cache" not in uses  # restore and save are apart, so the save has a condition
    (save,) = [s for s in steps if s.get("uses", "").startswith("actions/cache/save@")]
    assert save["if"] == (
        "always() && (github.event_name == 'push' || github.event_name == 'schedule') "
        "&& github.ref == 'refs/heads/main'"
    )
    restore = next(s for s in steps if s.get("uses", "").startswith("actions/cache/restore@"))
    assert restore["with"]["path"] == save["with"]["path"] == "history"
    assert steps.index(restore) < steps.index(save)


def test_the_commit_is_the_checkouts_not_the_event_s(tmp_path):
    from harness.model.provenance import current_commit

    assert current_commit(tmp_path, {"GITHUB_SHA": "main" * 10}) == "main" * 10  # no git here
    assert current_commit(tmp_path, {"MATRIX_COMMIT": "c" * 40, "GITHUB_SHA": "x"}) == "c" * 40
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert current_commit(ROOT, {"GITHUB_SHA": "main" * 10}) == head  # a dispatched checkout
    assert current_commit(tmp_path, {}) is None


def test_a_copy_of_the_project_inside_another_repository_is_not_that_repository_s_commit(
    tmp_path,
):
    from harness.model.provenance import current_commit

    outer = tmp_path / "outer"
    (outer / "vendored" / "cuda-matrix").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(outer)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "outer"], check=True)
    copy = outer / "vendored" / "cuda-matrix"
    assert current_commit(copy, {}) is None  # unknown, not the outer repository's HEAD
    assert current_commit(copy, {"GITHUB_SHA": "f" * 40}) == "f" * 40
    outer_head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    assert current_commit(outer, {}) == outer_head.stdout.strip()  # its own top level: its own


def test_no_artifact_at_all_is_every_target_missing_not_a_stale_local_report(tmp_path):
    """The GPU jobs uploaded nothing: the job fails on missing targets; it does not publish
    whatever an earlier run left in reports/."""
    work = _workspace(tmp_path)
    (work / "artifacts").mkdir()
    (work / "reports").mkdir()
    shutil.copy(KEPT[0], work / "reports" / KEPT[0].name)  # stale, from some earlier run
    shutil.copy(KEPT[0].with_suffix(".json"), work / "reports" / KEPT[0].with_suffix(".json").name)
    done = _run_job(work, "e" * 40)
    assert done.returncode == 1
    for target in ("sm_80", "sm_90a", "sm_100a"):
        assert f"error: target {target} has no report" in done.stderr


def test_each_test_job_runs_the_a_b_on_its_own_gpu_against_the_base_commit():
    """After the tests, on the same runner: a dispatched commit against main (github.sha, where
    it was dispatched from), a push to main against its parent; the checkout has that commit."""
    test = _workflow()["jobs"]["test"]
    steps = test["steps"]
    names = [step.get("name", "") for step in steps]
    tested, ab = (
        names.index("Test in the target's image"),
        names.index("A/B against the base commit"),
    )
    assert ab == tested + 1
    assert steps[tested]["id"] == "test"
    # the tests ran, passed or failed: never after a cancel or a step before them failing
    assert steps[ab]["if"] == "${{ !cancelled() && steps.test.outcome != 'skipped' }}"
    assert steps[ab]["env"]["DISPATCHED_FROM"] == "${{ inputs.ref && github.sha || '' }}"
    run = steps[ab]["run"]
    assert 'BASE_SHA="${DISPATCHED_FROM:-$(git rev-parse --verify --quiet HEAD^ || true)}"' in run
    assert '"${RUNNER_TEMP}/nox/bin/nox" --non-interactive -s "ab-${SESSION}" --' in run
    # a shard's job names the run by its runners' labels, as its test step did, and its shard
    assert '--backend "${BACKEND}" --runner "${RUN_NAME:-${RUNNER_NAME}}" "${base[@]}"' in run
    assert (
        '${SHARD:+--shard "${SHARD}"}' in run
        and '${SHARD:+--shard "${SHARD}"}' in (steps[tested]["run"])
    )
    for step in (steps[tested], steps[ab]):
        # in the target's image, or on the host where the caller has none (containers: false)
        assert step["env"]["BACKEND"] == "${{ inputs.containers && 'docker' || 'host' }}"
        assert step["env"]["KERNELS"] == "${{ inputs.kernels }}"
        assert '"${kernels[@]}"' in step["run"]
        assert step["env"]["SHARD"] == "${{ matrix.shard }}"
        assert step["env"]["RUN_NAME"] == "${{ matrix.shard && join(matrix.runner, '-') || '' }}"
    assert steps[ab]["env"]["SESSION"] == "${{ matrix.session }}"
    (checkout,) = [s for s in steps if "actions/checkout" in s.get("uses", "")]
    assert checkout["with"]["fetch-depth"] == 0  # main's tip and the parent: the whole history
    assert checkout["with"]["persist-credentials"] is False
    (upload,) = [s for s in steps if "upload-artifact" in s.get("uses", "")]
    assert steps.index(upload) > ab and upload["if"] == "always()"  # a failed A/B still uploads
    assert "reports/${{ matrix.report }}.json" in upload["with"]["path"]
    assert upload["with"]["name"] == "${{ matrix.artifact }}"  # a shard's upload is its own


def test_every_shard_of_a_run_weighs_the_kernels_by_the_same_history():
    """The plan restores main's newest history once and hands it to every shard as one
    artifact: shards that read the cache themselves could each find another one."""
    plan = _workflow()["jobs"]["plan"]
    (restore,) = [s for s in plan["steps"] if s.get("id") == "history"]
    assert "actions/cache/restore@" in restore["uses"]
    assert restore["with"]["restore-keys"] == "matrix-history-"
    (handed,) = [s for s in plan["steps"] if "upload-artifact" in s.get("uses", "")]
    assert handed["with"] == {
        "name": "shard-times",
        "path": "history/history.sqlite",
        "retention-days": 1,
    }
    assert plan["outputs"]["history"] == "${{ steps.history.outputs.cache-matched-key != '' }}"
    steps = _workflow()["jobs"]["test"]["steps"]
    (fetched,) = [s for s in steps if s.get("with", {}).get("name") == "shard-times"]
    assert fetched["if"] == "needs.plan.outputs.history == 'true'"
    (tested,) = [s for s in steps if s.get("id") == "test"]
    assert tested["env"]["TIMES"] == (
        "${{ matrix.shard && needs.plan.outputs.history == 'true' && "
        "'shard-times/history.sqlite' || '' }}"
    )
    assert f"{fetched['with']['path']}/history.sqlite" in tested["env"]["TIMES"]
    assert '${TIMES:+--times "${TIMES}"}' in tested["run"]


def test_the_a_b_step_resolves_the_base_as_actions_would(tmp_path):
    """Its lines up to the base's arguments, run in a checkout: the parent for a push, the
    commit it was dispatched from (as Actions fills DISPATCHED_FROM) for a dispatch, and for a
    first commit, which has no parent, no base, and --no-base-ok to judge every kernel NEW."""
    (step,) = [
        s for s in _workflow()["jobs"]["test"]["steps"] if s.get("name", "").startswith("A/B")
    ]
    lines = step["run"].splitlines()
    resolve = "\n".join(lines[: lines.index("kernels=()")]) + '\necho "${base[@]}"'
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)

    def resolved(dispatched_from: str) -> str:
        environment = {**os.environ, "DISPATCHED_FROM": dispatched_from}
        done = subprocess.run(
            ["bash", "-e", "-c", resolve], cwd=tmp_path, env=environment, capture_output=True,
            text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    assert resolved("") == "--base  --no-base-ok"
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "tested"], check=True)
    parent = subprocess.run(
        [*git, "rev-parse", "HEAD^"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert resolved("") == f"--base {parent}"
    assert resolved("f" * 40) == f"--base {'f' * 40}"


CONSUMER_CALLER = ROOT / "tests" / "fixtures" / "consumer" / ".github" / "workflows" / "matrix.yml"


def test_every_caller_passes_only_inputs_the_reusable_workflow_declares_of_their_types():
    """This repository's own workflow and a kernel repository's (the fixture consumer's): each
    calls the reusable workflow, pinned (a commit, or this repository's own), with inputs it
    declares."""
    declared = _workflow()[True]["workflow_call"]["inputs"]
    assert {"ref", "kernels", "max-slowdown-pct", "containers", "nox-requirements"} <= set(declared)
    assert _workflow()["permissions"] == {}
    kinds = {"string": str, "boolean": bool}
    for path in (WORKFLOWS / "matrix.yml", CONSUMER_CALLER):
        caller = yaml.safe_load(path.read_text())
        (job,) = caller["jobs"].values()
        assert job["uses"].split("@")[0].endswith(".github/workflows/cuda-matrix.yml"), path
        assert job["permissions"] == {"contents": "read"} and caller["permissions"] == {}
        for name, value in job["with"].items():
            assert name in declared, (path, name)
            if not str(value).startswith("${{"):
                assert isinstance(value, kinds[declared[name]["type"]]), (path, name)
    assert _caller()["jobs"]["matrix"]["uses"] == "$/.github/workflows/cuda-matrix.yml"
    consumer = yaml.safe_load(CONSUMER_CALLER.read_text())["jobs"]["matrix"]
    assert consumer["with"]["containers"] is True  # its images, from the package's build files
    # a caller without images skips their builds, and its GPU jobs still run (on the host)
    jobs = _workflow()["jobs"]
    assert jobs["build"]["if"] == "inputs.containers"
    assert "needs.build.result == 'skipped'" in jobs["test"]["if"]


def test_the_fixture_caller_passes_actionlint_and_zizmor():
    tools = Path(sys.executable).parent
    linted = subprocess.run(
        [str(tools / "actionlint"), str(CONSUMER_CALLER)], capture_output=True, text=True
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    audited = subprocess.run(
        [str(tools / "zizmor"), "--offline", str(CONSUMER_CALLER.parent)],
        capture_output=True,
        text=True,
    )
    assert audited.returncode == 0, audited.stdout + audited.stderr


def test_each_gpu_job_carries_from_main_s_history_but_the_nightly_run_of_main():
    """A push or a dispatch carries the verdicts main's history vouches for; the schedule,
    which only main has, runs every case anew, and its reports join the history."""
    assert _caller()[True]["schedule"] == [{"cron": "17 3 * * *"}]  # YAML reads `on` as True
    steps = _workflow()["jobs"]["test"]["steps"]
    (fetched,) = [s for s in steps if s.get("with", {}).get("name") == "shard-times"]
    (tested,) = [s for s in steps if s.get("id") == "test"]
    assert tested["env"]["CARRY"] == (
        "${{ needs.plan.outputs.history == 'true' && github.event_name != 'schedule' && "
        "'shard-times/history.sqlite' || '' }}"
    )
    assert f"{fetched['with']['path']}/history.sqlite" in tested["env"]["CARRY"]
    assert '${CARRY:+--carry-from "${CARRY}"}' in tested["run"]
