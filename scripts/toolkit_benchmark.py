"""What each toolkit of the matrix costs `check` (issue #38): the project's matrix cut to the
first N toolkits of each target, for N = 1 up to all, each run cold (an empty compile cache)
then warm (the same again: it must compile nothing). A cold run's time should grow no worse
than linearly with the number of toolkits.

    python scripts/toolkit_benchmark.py --out bench/toolkits [-k reduce]

Run it with a Python whose toolkits are installed (`nox -s check` installs each in its venv's
cuda-toolkits/, and this script takes that venv's python). `<out>/toolkits.md` and
`toolkits.json` hold, per N, the columns, the wall of the cold and the warm run, and how many
binaries each compiled and found cached.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.matrix import load_matrix  # noqa: E402


@dataclass(frozen=True)
class CheckRun:
    toolkits: int  # the first N of each target's
    columns: list[str]
    run: str  # cold, warm
    wall_s: float
    compiled: int
    cached: int
    status: int


def first_toolkits(matrix_text: str, count: int) -> str:
    """matrix.yaml with each target's toolkits cut to its first `count` (comments dropped)."""
    data = yaml.safe_load(matrix_text)
    for target in data["targets"].values():
        listed = target.pop("toolkits", None) or [target.pop("toolkit")]
        target["toolkits"] = listed[:count]
    return yaml.safe_dump(data, sort_keys=False)


def check(matrix: Path, folder: Path, run: str, count: int, select: str | None) -> CheckRun:
    """`check` over every column of `matrix`, its cache and reports in `folder`."""
    command = [sys.executable, "-m", "harness", "check", "--matrix", str(matrix)]
    command += ["--cache", str(folder / "cache"), "--reports", str(folder / f"reports-{run}")]
    command += ["-k", select] if select else []
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - started
    (folder / f"{run}.log").write_text(done.stdout + done.stderr)
    counts = re.findall(r"^compile: (\d+) compiled, (\d+) cached", done.stdout, flags=re.M)
    counts += [
        ("0", n)
        for n in re.findall(r"^compile: nothing to do, (\d+) binaries", done.stdout, flags=re.M)
    ]
    return CheckRun(
        toolkits=count,
        columns=list(load_matrix(matrix).targets),
        run=run,
        wall_s=round(wall, 1),
        compiled=sum(int(c) for c, _ in counts),
        cached=sum(int(c) for _, c in counts),
        status=done.returncode,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("-k", dest="select", help="only kernels whose name has this")
    args = parser.parse_args(argv)
    text = (ROOT / "matrix.yaml").read_text()
    most = max(len(t) for t in _toolkit_lists(text))
    runs: list[CheckRun] = []
    for count in range(1, most + 1):
        folder = args.out / f"toolkits-{count}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        matrix = folder / "matrix.yaml"
        matrix.write_text(first_toolkits(text, count))
        for run in ("cold", "warm"):
            runs.append(check(matrix, folder, run, count, args.select))
            print(json.dumps(asdict(runs[-1])), flush=True)
    (args.out / "toolkits.json").write_text(json.dumps([asdict(r) for r in runs], indent=1))
    rows = ["| toolkits | columns | run | wall | compiled | cached | exit |"]
    rows.append("|---|---|---|---|---|---|---|")
    for r in runs:
        cells = (r.toolkits, len(r.columns), r.run, f"{r.wall_s} s", r.compiled, r.cached, r.status)
        rows.append("| " + " | ".join(map(str, cells)) + " |")
    (args.out / "toolkits.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))
    return 0 if all(r.status == 0 for r in runs) else 1


def _toolkit_lists(text: str) -> list[list[str]]:
    data = yaml.safe_load(text)
    return [t.get("toolkits") or [t["toolkit"]] for t in data["targets"].values()]


if __name__ == "__main__":
    sys.exit(main())
