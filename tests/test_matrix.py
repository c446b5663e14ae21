"""matrix.yaml: the shipped file loads, and every mistake names its file and line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.model.matrix import ComputeCapability, MatrixError, load_matrix
from harness.spec import RequireAny, RequireArch, RequireSm
from tests.conftest import ROOT

SHIPPED = (ROOT / "matrix.yaml").read_text()
TOOLS_ONE_A_LINE = "  tools:\n    - memcheck\n    - leakcheck\n    - initcheck"


EITHER_ARCH = RequireAny((RequireArch("sm_90a"), RequireArch("sm_100a")))


def test_shipped_matrix_has_the_three_targets_each_with_two_toolkits(matrix):
    assert list(matrix.targets) == [
        "sm_80",
        "sm_80-cuda13.5",
        "sm_90a",
        "sm_90a-cuda13.5",
        "sm_100a",
        "sm_100a-cuda13.5",
    ]
    assert matrix.targets["sm_80"].gencode == "arch=compute_80,code=[sm_80,compute_80]"
    assert matrix.targets["sm_90a"].gencode == "arch=compute_90a,code=[sm_90a]"
    assert matrix.targets["sm_100a"].gencode == "arch=compute_100a,code=[sm_100a]"
    assert matrix.target("sm90") is matrix.targets["sm_90a"]


@pytest.mark.parametrize(
    ("target", "device_cc", "path"),
    [
        ("sm_80", (8, 0), "sass"),
        ("sm_80", (8, 6), "sass"),
        ("sm_80", (9, 0), "ptx-jit"),
        ("sm_80", (10, 0), "ptx-jit"),
        ("sm_80", (7, 5), None),
        ("sm_90a", (9, 0), "sass"),
        ("sm_90a", (10, 0), None),
        ("sm_100a", (9, 0), None),
        ("sm_100a", (10, 0), "sass"),
        ("sm_100a", (10, 3), None),
    ],
)
def test_which_devices_run_a_target(matrix, target, device_cc, path):
    assert matrix.targets[target].runs_on(ComputeCapability(*device_cc)) == path


@pytest.mark.parametrize(
    ("target", "requirement", "expressible"),
    [
        ("sm_80", None, True),
        ("sm_80", RequireSm(8, 0), True),
        ("sm_80", RequireSm(9, 0), False),
        ("sm_90a", RequireSm(9, 0), True),
        ("sm_100a", RequireSm(9, 0), True),
        ("sm_90a", RequireArch("sm_90a"), True),
        ("sm_100a", RequireArch("sm_90a"), False),
        ("sm_80", RequireArch("sm_90a"), False),
        ("sm_90a", EITHER_ARCH, True),
        ("sm_100a", EITHER_ARCH, True),
        ("sm_80", EITHER_ARCH, False),
        ("sm_80", RequireAny((RequireArch("sm_90a"), RequireSm(8, 0))), True),
    ],
)
def test_which_targets_express_a_requirement(matrix, target, requirement, expressible):
    assert matrix.targets[target].expresses(requirement) is expressible


def _refused_at_its_line(tmp_path, text: str, needle: str, expected: str) -> None:
    """`text` as matrix.yaml is refused, the message starting at the line of `needle`."""
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{_line_of(text, needle)}:"), message
    assert re.search(expected, message), message


def _line_of(text: str, needle: str) -> int:
    return text.splitlines().index(next(line for line in text.splitlines() if needle in line)) + 1


@pytest.mark.parametrize(
    ("edit", "needle", "expected"),
    [
        (
            ("    sass: sm_90a", "    sas: sm_90a"),
            "sas: sm_90a",
            r"unknown key 'sas'.*expected:.*sass",
        ),
        (("    sass: sm_90a", "    sass: sm90a"), "sass: sm90a", r"'sm90a' is not an arch"),
        (
            (
                '    ptx: false\n    toolkits: ["13.0", "13.5"]\n    session: sm90',
                '    ptx: maybe\n    toolkits: ["13.0", "13.5"]\n    session: sm90',
            ),
            "ptx: maybe",
            r"expected a bool",
        ),
        (("  min_samples: 10", "  min_samples: ten"), "min_samples: ten", r"expected a int"),
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm100',
                '    toolkit: "12.9"\n    session: sm100',
            ),
            '"12.9"',
            r"toolkit '12.9' is not under toolkits",
        ),
        (("  budget_s: 1.0", "  budget_s: -1"), "budget_s: -1", r"positive"),
        (
            ("      - nvidia-cuda-nvcc==13.0.88", "      - nvidia-cuda-nvcc==13.5.37"),
            "      - nvidia-cuda-nvcc==13.5.37",
            r"toolkits.13.0.wheels: nvidia-cuda-nvcc==13.5.37 is the nvcc of CUDA 13.5.37, not of "
            r"13.0",
        ),
        (
            ("      - nvidia-cuda-nvcc==13.0.88\n", ""),
            "      - nvidia-cuda-crt==13.0.88",  # the list's first item: where the list is
            r"toolkits.13.0.wheels: no nvidia-cuda-nvcc==<version> pin: nothing installs the nvcc",
        ),
        (
            ("  tools: [memcheck, racecheck, synccheck, initcheck]", TOOLS_ONE_A_LINE),
            "- leakcheck",
            r"sanitize.tools: unknown tool 'leakcheck' \(expected: memcheck, racecheck, synccheck",
        ),
        (
            ("  tools: [memcheck, racecheck,", "  tools: [memcheck, memcheck,"),
            "tools: [memcheck, memcheck,",
            r"sanitize.tools: memcheck is listed twice",
        ),
        (
            ("    session: sm90\n", "    session: sm90\n    shards: 0\n"),
            "shards: 0",
            r"targets.sm_90a.shards: expected a finite positive number",
        ),
        (
            ("    session: sm90\n", "    session: sm90\n    shards: 300\n"),
            "shards: 300",
            r"targets.sm_90a.shards: expected at most 256",
        ),
        (
            ("    session: sm90\n", "    session: sm90\n    shards: two\n"),
            "shards: two",
            r"targets.sm_90a.shards: expected a int",
        ),
    ],
)
def test_a_wrong_entry_names_file_line_and_expectation(tmp_path, edit, needle, expected):
    old, new = edit
    assert old in SHIPPED
    text = SHIPPED.replace(old, new, 1)
    _refused_at_its_line(tmp_path, text, needle, expected)


def test_a_missing_field_names_the_target(tmp_path):
    text = SHIPPED.replace("    image: cuda-matrix-sm80\n", "", 1)
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixError, match=r"matrix.yaml:\d+: targets.sm_80: missing image"):
        load_matrix(path)


def test_broken_yaml_names_the_line(tmp_path):
    path = tmp_path / "matrix.yaml"
    path.write_text("targets:\n  sm_80: [unclosed\n")
    with pytest.raises(MatrixError, match=r"matrix.yaml:\d+: not valid YAML"):
        load_matrix(path)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(MatrixError, match=r"nowhere\.yaml: cannot be read"):
        load_matrix(tmp_path / "nowhere.yaml")


def test_an_unknown_target_lists_the_known_ones(matrix):
    known = "sm_80, sm_80-cuda13.5, sm_90a, sm_90a-cuda13.5, sm_100a, sm_100a-cuda13.5"
    with pytest.raises(MatrixError, match=rf"no target 'sm_75' \(targets: {known}\)"):
        matrix.target("sm_75")


def test_reading_the_matrix_imports_neither_numpy_nor_the_run_stage():
    """The noxfile reads matrix.yaml before any session installs numpy or cuda-python."""
    probe = (
        "import sys; from harness.model.matrix import load_matrix; "
        f"load_matrix({str(ROOT / 'matrix.yaml')!r}); "
        "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith("
        "('harness.run', 'harness.commands', 'harness.report', 'cuda'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "[]"


def _written(tmp_path, text: str):
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def test_a_key_given_twice_names_both_lines(tmp_path):
    text = (ROOT / "matrix.yaml").read_text()
    first = text.index("  sm_90a:\n")
    block = text[first : text.index("  sm_100a:\n")]
    path = _written(tmp_path, text[:first] + block + block + text[first + len(block) :])
    line = _line_of(text, "  sm_90a:")
    with pytest.raises(MatrixError) as error:
        load_matrix(path)
    assert str(error.value) == (
        f"{path}:{line + block.count(chr(10))}: targets: key 'sm_90a' is given twice (first at "
        f"line {line}); the second would silently replace the first"
    )


ALIAS_BOMB = """\
a: &a [x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
? [*f, *f, *f, *f, *f, *f, *f, *f, *f]
: boom
"""


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    path = _written(tmp_path, ALIAS_BOMB)
    with pytest.raises(MatrixError, match=rf"^{path}:2: YAML aliases \(\*a\) are not allowed"):
        load_matrix(path)


def test_an_error_quotes_a_long_value_only_in_part(tmp_path):
    text = (
        (ROOT / "matrix.yaml")
        .read_text()
        .replace("  budget_s: 1.0", "  budget_s: " + "9" * 5000 + "x")
    )
    with pytest.raises(MatrixError) as error:
        load_matrix(_written(tmp_path, text))
    assert "expected a float, got '9999" in str(error.value) and len(str(error.value)) < 300


def test_bytes_that_are_not_utf8_are_named(tmp_path):
    path = tmp_path / "matrix.yaml"
    path.write_bytes((ROOT / "matrix.yaml").read_bytes().replace(b"sm_90a:", b"sm_9\xff0a:", 1))
    with pytest.raises(MatrixError, match=rf"^{path}: not UTF-8 text \(byte 0xff at offset \d+\)"):
        load_matrix(path)


def test_a_target_name_cannot_climb_out_of_the_reports_folder(tmp_path):
    text = (ROOT / "matrix.yaml").read_text().replace("  sm_90a:\n", '  "../../escaped":\n', 1)
    with pytest.raises(
        MatrixError, match=r"targets: '\.\./\.\./escaped' is not a name like sm_90a"
    ):
        load_matrix(_written(tmp_path, text))


def test_container_limits_are_read_and_checked(tmp_path, matrix):
    assert (matrix.container.pids, matrix.container.memory) == (4096, "32g")
    text = (ROOT / "matrix.yaml").read_text().replace('memory: "32g"', 'memory: "lots"')
    with pytest.raises(MatrixError, match=r"container.memory: 'lots' is not like 32g"):
        load_matrix(_written(tmp_path, text))


FAMILY_TARGET = """  sm_100f:
    sass: sm_100f
    ptx: false
    toolkit: "13.0"
    session: sm100f
    image: cuda-matrix-sm100f
    runner_labels: [self-hosted, linux, x64, gpu-sm100]
"""


def test_a_family_specific_target_loads_runs_on_its_family_and_compiles(
    tmp_path, toolchain, compile_cache
):
    from harness.model.outcome import Outcome
    from harness.pipeline.context import RunOptions
    from harness.pipeline.stages import compile_target
    from tests.conftest import PLANTED

    text = (ROOT / "matrix.yaml").read_text().replace("\ntiming:", FAMILY_TARGET + "\ntiming:", 1)
    (tmp_path / "matrix.yaml").write_text(text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    family = matrix.targets["sm_100f"]
    assert family.cc == ComputeCapability(10, 0) and not family.arch_specific
    assert family.gencode == "arch=compute_100f,code=[sm_100f]"
    assert family.runs_on(ComputeCapability(10, 3)) == "sass"  # the family, from its own CC on
    assert family.runs_on(ComputeCapability(9, 0)) is None
    assert not family.expresses(RequireArch("sm_100a"))  # an `a` feature wants its `a` target
    options = RunOptions(family, (PLANTED,), tmp_path / "r", compile_cache, select="add_one")
    compiled = compile_target(matrix, options, toolchain)
    (cell,) = compiled.cells
    assert cell.case == "compile" and cell.outcome is Outcome.PASSED, cell.message
    assert cell.compile.embedded == "arch=compute_100f,code=[sm_100f]"


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "0", "-3"])
def test_a_number_that_is_not_finite_and_positive_is_named(tmp_path, value):
    text = (
        (ROOT / "matrix.yaml")
        .read_text()
        .replace("  case_timeout_s: 60", f"  case_timeout_s: {value}")
    )
    path = _written(tmp_path, text)
    with pytest.raises(
        MatrixError, match=r"timing.case_timeout_s: expected a finite positive number"
    ):
        load_matrix(path)


@pytest.mark.parametrize(("value", "loaded"), [("1e5", 1e5), ("604800", 604800.0), ("1e9", None)])
def test_a_time_limit_beyond_a_week_is_named_before_any_wait_is_given_it(tmp_path, value, loaded):
    """1e9 s once passed and then crashed the run: poll() takes no wait that long."""
    text = (ROOT / "matrix.yaml").read_text()
    path = _written(tmp_path, text.replace("  case_timeout_s: 60", f"  case_timeout_s: {value}"))
    if loaded is not None:
        assert load_matrix(path).timer.case_timeout_s == loaded
        return
    with pytest.raises(MatrixError) as raised:
        load_matrix(path)
    assert f"{path}:" in str(raised.value)
    assert "timing.case_timeout_s: expected at most 604800, got '1e9'" in str(raised.value)


def test_a_float_without_a_dot_is_a_number(tmp_path):
    text = (ROOT / "matrix.yaml").read_text().replace("  budget_s: 1.0", "  budget_s: 1e0")
    assert load_matrix(_written(tmp_path, text)).timer.budget_s == 1.0
    peaks = (
        (ROOT / "matrix.yaml").read_text().replace("memory_gb_per_s: 4800", "memory_gb_per_s: .inf")
    )
    with pytest.raises(
        MatrixError, match=r"devices.NVIDIA H200.memory_gb_per_s: expected a finite"
    ):
        load_matrix(_written(tmp_path, peaks))


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "expected a finite positive number, got '0'"),
        ("two", "expected a int, got 'two'"),
        ("1.5", "expected a int, got '1.5'"),
        ("9", "expected at most 8, got '9'"),
    ],
)
def test_a_lanes_value_a_gpu_cannot_take_is_named_at_its_line(tmp_path, value, said):
    text = re.sub(r"(?m)^  lanes: .*$", f"  lanes: {value}", (ROOT / "matrix.yaml").read_text())
    path = _written(tmp_path, text)
    with pytest.raises(MatrixError) as raised:
        load_matrix(path)
    line = text.splitlines().index(f"  lanes: {value}") + 1
    assert f"{path}:{line}" in str(raised.value) and f"timing.lanes: {said}" in str(raised.value)


def test_a_matrix_without_lanes_reads_the_default(tmp_path):
    text = (ROOT / "matrix.yaml").read_text()
    without = "\n".join(line for line in text.splitlines() if not line.startswith("  lanes:"))
    assert load_matrix(_written(tmp_path, without + "\n")).timer.lanes == 2


def test_a_matrix_without_the_median_rule_reads_its_defaults(tmp_path):
    text = (ROOT / "matrix.yaml").read_text()
    without = "\n".join(line for line in text.splitlines() if not line.startswith("  median_"))
    timer = load_matrix(_written(tmp_path, without + "\n")).timer
    assert (timer.median_within_pct, timer.median_min_samples) == (0.2, 100)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("  median_within_pct: 0", "timing.median_within_pct: expected a finite positive number"),
        ("  median_within_pct: 101", "timing.median_within_pct: expected at most 100"),
        ("  median_min_samples: 2.5", "timing.median_min_samples: expected a int, got '2.5'"),
    ],
)
def test_a_median_rule_value_that_cannot_be_is_named_at_its_line(tmp_path, line, said):
    _refused_at_its_line(tmp_path, _with_line(line), line, re.escape(said))


def _with_line(line):
    """matrix.yaml with the row of `line`'s key (indentation included) replaced by `line`."""
    key = line.split(":")[0]
    rows = (ROOT / "matrix.yaml").read_text().splitlines()
    return "\n".join(line if row.startswith(key + ":") else row for row in rows) + "\n"


def test_a_median_rule_that_could_never_stop_sampling_is_refused(tmp_path):
    text = (
        (ROOT / "matrix.yaml")
        .read_text()
        .replace("  median_min_samples: 100", "  median_min_samples: 501")
    )
    path = _written(tmp_path, text)
    with pytest.raises(MatrixError, match="median_min_samples is above max_samples") as raised:
        load_matrix(path)
    line = text.splitlines().index("  median_min_samples: 501") + 1
    assert f"{path}:{line}" in str(raised.value)
    # left out, the rule's default never refuses a matrix of fewer samples: it just never applies
    without = "\n".join(
        row for row in text.splitlines() if not row.startswith("  median_")
    ).replace("  max_samples: 500", "  max_samples: 50")
    assert load_matrix(_written(tmp_path, without + "\n")).timer.max_samples == 50


def test_each_toolkit_of_a_target_is_a_column_named_after_it(matrix):
    """The first toolkit keeps the target's names; each other one's column, sessions, image,
    reports and GitHub jobs carry its suffix, so nothing mixes the two."""
    first, second = matrix.targets["sm_90a"], matrix.targets["sm_90a-cuda13.5"]
    assert (first.toolkit.version, second.toolkit.version) == ("13.0", "13.5")
    assert (first.session, second.session) == ("sm90", "sm90-cuda13.5")
    assert (first.image, second.image) == ("cuda-matrix-sm90", "cuda-matrix-sm90-cuda13.5")
    assert (first.sass, first.gencode) == (second.sass, second.gencode)
    assert matrix.target("sm90-cuda13.5") is second
    jobs = {job["target"]: job for job in matrix.github_jobs()}
    assert jobs["sm_90a-cuda13.5"]["toolkit"] == "13.5"
    assert jobs["sm_90a-cuda13.5"]["report"] == "junit-sm_90a-cuda13.5"
    assert jobs["sm_90a"]["artifact"] != jobs["sm_90a-cuda13.5"]["artifact"]
    for name in ("sm_80", "sm_90a", "sm_100a"):
        assert {
            matrix.targets[name].toolkit.version,
            matrix.targets[f"{name}-cuda13.5"].toolkit.version,
        } == {"13.0", "13.5"}


def test_a_single_toolkit_key_is_one_column(tmp_path):
    text = SHIPPED.replace(
        '    toolkits: ["13.0", "13.5"]\n    session: sm90',
        '    toolkit: "13.5"\n    session: sm90',
        1,
    )
    (tmp_path / "matrix.yaml").write_text(text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert matrix.targets["sm_90a"].toolkit.version == "13.5"
    assert "sm_90a-cuda13.5" not in matrix.targets and matrix.targets["sm_90a"].session == "sm90"


INSTALLED_12_4 = """  "12.4":
    path: /usr/local/cuda-12.4
    base_image: nvidia/cuda:12.4.1-devel-ubuntu22.04
"""


@pytest.mark.parametrize(
    ("edit", "needle", "expected"),
    [
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm90',
                '    toolkits: ["13.0", "13.9"]\n    session: sm90',
            ),
            '    toolkits: ["13.0", "13.9"]',
            r"targets.sm_90a: toolkit '13.9' is not under toolkits \(13.0, 13.5\)",
        ),
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm90',
                '    toolkits: ["13.5", "13.5"]\n    session: sm90',
            ),
            '    toolkits: ["13.5", "13.5"]',
            r"targets.sm_90a: toolkit 13.5 is listed twice",
        ),
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm90',
                "    toolkits: []\n    session: sm90",
            ),
            "    toolkits: []",
            r"targets.sm_90a.toolkits: expected a non-empty list of strings",
        ),
        (
            ('    toolkits: ["13.0", "13.5"]\n    session: sm90', "    session: sm90"),
            "    sass: sm_90a",
            r"targets.sm_90a: give toolkits: \[versions\] \(or one as toolkit:\)",
        ),
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm90',
                '    toolkits: ["13.0"]\n    toolkit: "13.0"\n    session: sm90',
            ),
            "    sass: sm_90a",
            r"targets.sm_90a: give toolkits: \[versions\] \(or one as toolkit:\)",
        ),
        (
            (
                '    base_image: debian:bookworm-slim\n  "13.5":',
                '    base_image: debian:bookworm-slim\n    path: /opt/cuda\n  "13.5":',
            ),
            "    wheels:",
            r"toolkits.13.0: give either wheels \(pinned PyPI wheels\) or path",
        ),
        (
            (
                "targets:\n",
                INSTALLED_12_4.replace("path: /usr", "path: usr") + "targets:\n",
            ),
            "    path: usr/local/cuda-12.4",
            r"toolkits.12.4.path: 'usr/local/cuda-12.4' is not an absolute path or \$VARIABLE",
        ),
        (
            (
                '    toolkits: ["13.0", "13.5"]\n    session: sm100',
                '    toolkits: ["13.0", "12.4"]\n    session: sm100',
            ),
            '    toolkits: ["13.0", "12.4"]',
            r"targets.sm_100a: toolkit 12.4: sm_100a needs CUDA 12.8 or newer; 12.4 cannot emit it",
        ),
    ],
)
def test_a_toolkit_a_target_cannot_have_is_named_at_its_line(tmp_path, edit, needle, expected):
    old, new = edit
    assert old in SHIPPED, old
    text = SHIPPED.replace(old, new, 1)
    if "12.4" in new and "path:" not in new:
        text = text.replace("targets:\n", INSTALLED_12_4 + "targets:\n", 1)
    _refused_at_its_line(tmp_path, text, needle, expected)


@pytest.mark.parametrize(
    ("sass", "version", "why"),
    [
        ("sm_90a", "11.8", "sm_90a needs CUDA 12.0 or newer"),
        ("sm_100f", "12.8", "sm_100f needs CUDA 12.9 or newer"),
        ("sm_70", "13.0", "CUDA 13 no longer emits sm_70"),
        ("sm_101a", "13.0", "CUDA 13 calls sm_101 sm_110"),
        ("sm_90a", "12.4", None),
        ("sm_100a", "12.8", None),
        ("sm_70", "12.9", None),
        ("sm_999", "13.0", None),  # unknown here: nvcc's own list decides at compile time
    ],
)
def test_which_toolkits_emit_an_arch(sass, version, why):
    from harness.model.matrix import arch_problem

    found = arch_problem(sass, version)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_the_host_cache_reads_its_defaults_where_left_out_and_none_at_zero(tmp_path):
    text = (ROOT / "matrix.yaml").read_text()
    start = text.index("host_cache:")
    end = text.index("\n\n", start)
    without = load_matrix(_written(tmp_path, text[:start] + text[end + 2 :])).host_cache
    assert (without.max_gib, without.min_s_per_gib) == (16.0, 2.0)
    none = text.replace("  max_gib: 16", "  max_gib: 0")
    assert load_matrix(_written(tmp_path, none)).host_cache.max_gib == 0.0


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("  max_gib: -1", "host_cache.max_gib: expected a finite positive number"),
        ("  max_gib: lots", "host_cache.max_gib: expected a float, got 'lots'"),
        ("  min_s_per_gib: 0", "host_cache.min_s_per_gib: expected a finite positive number"),
        ("  keep: all", "host_cache: unknown key 'keep'"),
    ],
)
def test_a_host_cache_value_that_cannot_be_is_named_at_its_line(tmp_path, line, said):
    if line.startswith("  keep:"):  # a key of its own, beside the known ones
        text = (ROOT / "matrix.yaml").read_text()
        text = text.replace("  min_s_per_gib: 2\n", f"  min_s_per_gib: 2\n{line}\n")
    else:
        text = _with_line(line)
    _refused_at_its_line(tmp_path, text, line, re.escape(said))
