"""The harness's timer and NVBench (cuda-bench) on the same workspaces, in one process: prints, as
one JSON line, each case's median by both. NVBench runs once per process, so
tests/test_on_gpu.py starts this as a process of its own.

    python scripts/nvbench_agreement.py <target> <compile cache> <nvbench json> kernel/case ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cuda.bench as bench  # noqa: E402
from cuda.core import Device  # noqa: E402

from harness.compile.nvcc import Compiler  # noqa: E402
from harness.compile.toolchain import find_toolchain  # noqa: E402
from harness.model.discovery import kernel_folders, load_kernel  # noqa: E402
from harness.model.matrix import load_matrix  # noqa: E402
from harness.run.case import GpuRuntime  # noqa: E402
from harness.run.device import probe  # noqa: E402


def main(target_name: str, cache: Path, nvbench_json: Path, chosen: list[str]) -> None:
    matrix = load_matrix(ROOT / "matrix.yaml")
    target = matrix.targets[target_name]
    runtime = GpuRuntime(probe(matrix), matrix.timer)
    folders = {folder.name: folder for folder in kernel_folders(ROOT / "kernels")}
    compiler = Compiler(find_toolchain(), cache)
    workspaces, ours = {}, {}
    for item in chosen:
        name, case_name = item.split("/")
        kernel = load_kernel(folders[name])
        (case,) = [c for c in kernel.spec.cases if c.name == case_name]
        built = compiler.compile(kernel, target)
        workspace = runtime.prepare(kernel, case, runtime.module(built.binary, target))
        assert not workspace.problem.scratch, f"{item}: NVBench cannot reset scratch per sample"
        workspaces[item] = workspace
        ours[item] = runtime.measure(workspace.run, lambda: None).median_us
    device = Device()

    def body(state) -> None:
        workspace = workspaces[state.get_string("case")]
        state.exec(
            lambda launch: workspace.run(device.create_stream(launch.get_stream())), batched=False
        )

    benchmark = bench.register(body)
    benchmark.set_name("agreement")
    benchmark.add_string_axis("case", chosen)
    stopping = ["--min-samples", "10", "--min-time", "0.05", "--timeout", "1", "--max-noise", "0.5"]
    device_args = ["--devices", str(runtime.info.ordinal)]
    bench.run_all_benchmarks(["agreement", "--json", str(nvbench_json), *device_args, *stopping])
    theirs = {}
    for state in json.loads(nvbench_json.read_text())["benchmarks"][0]["states"]:
        case = state["name"].split("case=", 1)[1]  # "Device=0 case=<kernel>/<case>"
        summaries = {s["tag"]: s for s in state["summaries"]}
        median = summaries["nv/cold/time/gpu/median"]["data"]
        seconds = next(float(d["value"]) for d in median if d["name"] == "value")
        theirs[case] = seconds * 1e6
    print(json.dumps({"ours_us": ours, "nvbench_us": theirs}))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
