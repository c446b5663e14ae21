"""nvcc per (kernel, target): real compiles, the content cache, and ptxas' report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import sandbox
from harness.compile import nvcc
from harness.compile.identity import IdentityError, code_identity, code_sections, sass_identity
from harness.compile.nvcc import (
    FAILED_CHECK,
    MAC_KEY_BYTES,
    Compiler,
    cache_key,
    check_sass,
    failure_line,
    jit_inputs_of_binary,
    kernel_tree,
    mac_key_file,
    parse_ptxas,
    symbols_of_binary,
    toolkit_fingerprint,
)
from harness.compile.toolchain import Toolchain, ToolchainError, find_toolchain
from harness.model.discovery import Kernel, KernelFolder, kernel_folders, load_kernel
from harness.model.errors import SpecError, Unavailable
from harness.model.outcome import Outcome
from harness.pipeline.context import RunOptions
from harness.pipeline.stages import compile_target, run_target
from tests.conftest import PLANTED, ROOT


def _kernel(root: Path, name: str) -> Kernel:
    (folder,) = [f for f in kernel_folders(root) if f.name == name]
    return load_kernel(folder)


@pytest.fixture
def add_one(planted):
    return _kernel(planted, "add_one")


def test_compiles_every_target_then_serves_the_cache(matrix, toolchain, add_one, tmp_path):
    compiler = Compiler(toolchain, tmp_path / "cache")
    pairs = [(add_one, target) for target in matrix.targets.values()]
    first = compiler.compile_all(pairs)
    assert all(result.binary is not None and not result.cached for result in first), [
        r.log for r in first
    ]
    assert all(result.binary.stat().st_size > 0 for result in first)
    assert first[0].resources["add_one"].registers > 0
    second = compiler.compile_all(pairs)
    assert all(result.cached for result in second)
    assert [r.binary for r in second] == [r.binary for r in first]


def test_the_key_follows_source_and_target(matrix, add_one):
    sm80, sm90 = matrix.targets["sm_80"], matrix.targets["sm_90a"]
    key = cache_key(add_one, sm90, "toolkit")
    assert key != cache_key(add_one, sm80, "toolkit")
    assert key != cache_key(add_one, sm90, "another toolkit")
    add_one.source.write_text(add_one.source.read_text() + "\n// edited\n")
    assert cache_key(add_one, sm90, "toolkit") != key


MACRO_INCLUDE = "#define S(x) #x\n#define P(x) S(x)\n#include P({})\n"


def test_a_header_edit_rebuilds(matrix, toolchain, add_one, tmp_path):
    """A header beside the kernel, reached through a macro, and one its chapter shares: an edit
    of either rebuilds, and one into a syntax error fails the build (it was once "nothing to
    do", and passed)."""
    header = add_one.folder / "helper.cuh"
    header.write_text('#include "../shared.cuh"\n#define ONE 1.0f\n')
    shared = add_one.folder.parent / "shared.cuh"
    shared.write_text("#define TWO 2.0f\n")
    add_one.source.write_text(MACRO_INCLUDE.format("helper.cuh") + add_one.source.read_text())
    sm90 = matrix.targets["sm_90a"]
    compiler = Compiler(toolchain, tmp_path / "cache")
    first = compiler.compile(add_one, sm90)
    assert first.binary is not None and not first.cached, first.log
    assert compiler.compile(add_one, sm90).cached
    header.write_text('#include "../shared.cuh"\n#define ONE 3.0f\n')
    assert not compiler.compile(add_one, sm90).cached
    shared.write_text("#define TWO 4.0f\n")
    assert not Compiler(toolchain, tmp_path / "cache").compile(add_one, sm90).cached  # a next run
    shared.write_text("#define TWO 4.0f\nint broken( {\n")
    broken = Compiler(toolchain, tmp_path / "cache").compile(add_one, sm90)
    assert broken.binary is None and not broken.cached
    assert "error: expected" in failure_line(broken.log)


def test_clones_sharing_a_cache_are_each_checked_by_their_own_headers(matrix, toolchain, tmp_path):
    """The same source in two trees: its headers are checked in the tree being built, so a
    clone whose header differs is rebuilt, and one whose headers are the same is served."""
    built = {}
    for clone, value in (("one", "1.0f"), ("same", "1.0f"), ("other", "2.0f")):
        folder = tmp_path / clone / "kernels" / "planted" / "add_one"
        shutil.copytree(PLANTED / "planted" / "add_one", folder)
        (folder / "helper.cuh").write_text(f"#define ONE {value}\n")
        source = folder / "add_one.cu"
        source.write_text('#include "helper.cuh"\n' + source.read_text())
        kernel = _kernel(tmp_path / clone / "kernels", "add_one")
        built[clone] = Compiler(toolchain, tmp_path / "cache").compile(
            kernel, matrix.targets["sm_90a"]
        )
    assert not built["one"].cached and built["same"].cached and not built["other"].cached


def test_the_toolkit_fingerprint_follows_its_headers_env_flags_and_host_compiler(tmp_path):
    """What the angle brackets reach (CCCL, cooperative_groups), what nvcc reads from the
    environment, and the host compiler's version all change every binary."""
    bin_dir, include = tmp_path / "cuda" / "bin", tmp_path / "cuda" / "include" / "cuda"
    bin_dir.mkdir(parents=True)
    include.mkdir(parents=True)
    (include / "pipeline").write_text("// libcu++ 3.0\n")
    compiler = tmp_path / "g++"
    compiler.write_text("#!/bin/sh\necho 'g++ (Debian 12.2.0-14) 12.2.0'\n")
    compiler.chmod(0o755)
    toolchain = Toolchain(bin_dir / "nvcc", "13.0.88", "test")
    env = {"NVCC_CCBIN": str(compiler)}
    prints = {toolkit_fingerprint(toolchain, env)}
    (include / "pipeline").write_text("// libcu++ 3.1\n")
    prints.add(toolkit_fingerprint(toolchain, env))
    prints.add(toolkit_fingerprint(toolchain, {**env, "NVCC_APPEND_FLAGS": "-DNDEBUG"}))
    prints.add(toolkit_fingerprint(toolchain, {**env, "NVCC_PREPEND_FLAGS": "-G"}))
    compiler.write_text("#!/bin/sh\necho 'g++ (Debian 13.1.0-1) 13.1.0'\n")
    prints.add(toolkit_fingerprint(toolchain, env))
    assert len(prints) == 5
    assert toolkit_fingerprint(toolchain, env) in prints  # and it is stable


def test_a_tampered_cache_entry_is_rebuilt(matrix, toolchain, add_one, tmp_path):
    compiler = Compiler(toolchain, tmp_path / "cache")
    first = compiler.compile(add_one, matrix.targets["sm_90a"])
    first.binary.write_bytes(first.binary.read_bytes()[:100])  # truncated
    again = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert again.binary is not None and not again.cached
    assert again.binary.stat().st_size > 100


SECRET = "#warning SECRET_TOKEN_123\n"  # what nvcc's log quotes of a file it reads
# Spellings of an include of another file of the machine that a text scan of the source missed
SPELLINGS = {
    "through a macro": MACRO_INCLUDE,
    "split by a continuation": '#inc\\\nlude "{}"\n',
    "with a comment inside": '# /**/ include "{}"\n',
    "in angle brackets": "#include <{}>\n",
}
# the Landlock-confined nvcc where this machine has Landlock, and the unconfined one anyway
CONFINEMENTS = [
    pytest.param(True, marks=pytest.mark.skipif(bool(sandbox.unavailable()), reason="no-landlock")),
    False,
]


def _refused(compiler: Compiler, kernel: Kernel, target) -> str:
    """Why `compiler` refuses `kernel`: compile_all's Unavailable, which the cell shows."""
    (result,) = compiler.compile_all([(kernel, target)])
    assert isinstance(result, Unavailable), result.log
    return result.why


@pytest.mark.parametrize("confined", CONFINEMENTS)
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_include_of_a_file_outside_the_tree_is_refused_naming_it_quoting_none(
    matrix, toolchain, add_one, tmp_path, spelling, confined
):
    secret = tmp_path / "secret.h"
    secret.write_text(SECRET)
    add_one.source.write_text(SPELLINGS[spelling].format(secret) + add_one.source.read_text())
    compiler = Compiler(toolchain, tmp_path / "cache")
    compiler.confined = confined
    why = _refused(compiler, add_one, matrix.targets["sm_90a"])
    assert f"the kernel's source reaches {secret}, outside the kernel tree" in why
    assert "SECRET_TOKEN_123" not in why
    assert not list((tmp_path / "cache").rglob("*.fatbin"))


@pytest.mark.parametrize(
    "after", ['#error "stops here"', '#include "missing.h"'], ids=["an error", "a fatal error"]
)
def test_an_outside_include_is_refused_when_the_preprocessor_fails_after_it(
    matrix, toolchain, add_one, tmp_path, after
):
    """An error after the include (-MD's list is written), or a fatal one (it is not: a
    listing pass says what was opened): nvcc's log, which quotes the file, is never shown."""
    secret = tmp_path / "secret.h"
    secret.write_text(SECRET)
    add_one.source.write_text(f'#include "{secret}"\n{after}\n' + add_one.source.read_text())
    compiler = Compiler(toolchain, tmp_path / "cache")
    compiler.confined = False  # confined, the include is denied: a fatal error too
    why = _refused(compiler, add_one, matrix.targets["sm_90a"])
    assert f"reaches {secret}, outside the kernel tree" in why and "SECRET_TOKEN" not in why


@pytest.mark.parametrize("confined", CONFINEMENTS)
@pytest.mark.parametrize(
    ("where", "spelled"),
    [
        ("add_one.cu", 'asm(".incbin \\"{}\\"");\n'),
        ("helper.cuh", 'asm(".inc" "bin \\"{}\\"");\n'),
        ("helper.cuh", 'asm(".include \\"{}\\"");\n'),
    ],
    ids=[".incbin", "split .incbin in a header", ".include"],
)
def test_an_assembler_directive_that_reads_a_file_is_refused_naming_where_it_is(
    matrix, toolchain, add_one, tmp_path, where, spelled, confined
):
    secret = tmp_path / "secret.bin"
    secret.write_text("SECRET_TOKEN_123\n")
    (add_one.folder / "helper.cuh").write_text("// a header of the kernel\n")
    holder = add_one.folder / where
    holder.write_text(spelled.format(secret) + holder.read_text())
    add_one.source.write_text('#include "helper.cuh"\n' + add_one.source.read_text())
    compiler = Compiler(toolchain, tmp_path / "cache")
    compiler.confined = confined
    why = _refused(compiler, add_one, matrix.targets["sm_90a"])
    assert why.startswith(f"{holder}: the assembler directive .inc")
    assert "reads a file into the binary: refused" in why


def test_an_incbin_no_text_check_sees_embeds_nothing_with_fatbin(
    matrix, toolchain, add_one, tmp_path
):
    """What makes the text check a courtesy: with -fatbin no host code is assembled (a file
    scope asm is dropped) and ptxas, which assembles device asm, has no directive that reads a
    file: `.incbin` spelled past the check (a \\x2e for its dot) reaches nothing."""
    secret = tmp_path / "secret.bin"
    secret.write_text("SECRET_TOKEN_123\n")
    spelled = f'asm("\\x2eincbin \\"{secret}\\"");\n'
    device = spelled.replace("asm(", 'extern "C" __global__ void embed() { asm(').replace(
        ";", "; }"
    )
    compiler = Compiler(toolchain, tmp_path / "cache")
    add_one.source.write_text(spelled + add_one.source.read_text())
    host = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert host.binary is not None, host.log
    assert b"SECRET_TOKEN_123" not in host.binary.read_bytes()
    add_one.source.write_text(device + add_one.source.read_text())
    refused = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert refused.binary is None and "Parsing error near '.incbin'" in refused.log
    assert "SECRET_TOKEN_123" not in refused.log


@pytest.mark.skipif(bool(sandbox.unavailable()), reason="no-landlock")
def test_a_confined_nvcc_reads_neither_another_file_nor_the_cache_key(toolchain, add_one, tmp_path):
    """Landlock's part: what no dependency output would list cannot be read either."""
    compiler = Compiler(toolchain, tmp_path / "cache")
    secret = tmp_path / "secret.h"
    secret.write_text(SECRET)
    key = mac_key_file(compiler.cache_dir)
    assert len(compiler.mac_key) == MAC_KEY_BYTES  # made
    folder, private = tmp_path / "cache" / add_one.classname, tmp_path / "private"
    folder.mkdir()
    private.mkdir()
    confinement = compiler._confinement(add_one, folder, private, kernel_tree(add_one))

    def read(path: Path) -> int:
        return subprocess.run(sandbox.confined(confinement, ["cat", str(path)])).returncode

    assert read(add_one.source) == 0
    assert read(secret) != 0 and read(key) != 0 and read(Path("/etc/hostname")) != 0
    written = private / "scratch"
    touch = subprocess.run(sandbox.confined(confinement, ["touch", str(written)]))
    assert touch.returncode == 0 and written.exists()


def _forge_with_another_s_binary(victim: Path, other: Path) -> None:
    """A hostile step: the victim's binary replaced by another kernel's, its record's digest
    recomputed to match."""
    forged = other.read_bytes()
    victim.write_bytes(forged)
    record = json.loads(victim.with_suffix(".json").read_text())
    record["sha256"] = hashlib.sha256(forged).hexdigest()
    victim.with_suffix(".json").write_text(json.dumps(record))


def _forge_with_another_s_entry(victim: Path, other: Path) -> None:
    """A hostile step: another kernel's entry, MAC and all, copied over the victim's."""
    shutil.copyfile(other, victim)
    shutil.copyfile(other.with_suffix(".json"), victim.with_suffix(".json"))


@pytest.mark.parametrize("forge", [_forge_with_another_s_binary, _forge_with_another_s_entry])
def test_a_forged_cache_entry_is_not_served_but_rebuilt(
    matrix, toolchain, planted, tmp_path, forge
):
    sm90 = matrix.targets["sm_90a"]
    victim, other = _kernel(planted, "add_one"), _kernel(planted, "needs_sm90")
    compiler = Compiler(toolchain, tmp_path / "cache")
    own, theirs = compiler.compile(victim, sm90), compiler.compile(other, sm90)
    assert own.binary is not None and theirs.binary is not None
    forge(own.binary, theirs.binary)
    again = Compiler(toolchain, tmp_path / "cache").compile(victim, sm90)  # the next run
    assert not again.cached and again.log.splitlines()[0] == FAILED_CHECK
    assert again.binary == own.binary and again.code_identity == own.code_identity
    assert again.binary.read_bytes() != theirs.binary.read_bytes()
    assert Compiler(toolchain, tmp_path / "cache").compile(victim, sm90).cached  # replaced


def test_the_mac_key_is_made_once_private_and_agreed_on_by_runs_at_once(tmp_path):
    script = (
        "import sys; from pathlib import Path; from harness.compile.nvcc import cache_mac_key; "
        f"print(cache_mac_key(Path({str(tmp_path / 'cache')!r})).hex())"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(4)
    ]
    keys = {run.communicate(timeout=60)[0].strip() for run in runs}
    assert len(keys) == 1 and len(bytes.fromhex(keys.pop())) == MAC_KEY_BYTES
    key = mac_key_file(tmp_path / "cache")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [key.name]  # nothing half-made


def test_nvcc_errors_fail_with_the_log(matrix, toolchain, planted, tmp_path):
    broken = _kernel(planted, "compile_error")
    result = Compiler(toolchain, tmp_path / "cache").compile(broken, matrix.targets["sm_90a"])
    assert result.binary is None
    assert "undeclared_value" in result.log and "is undefined" in result.log
    assert not list((tmp_path / "cache").rglob("*.fatbin"))


def test_ptxas_report_is_parsed_per_entry():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90a'
ptxas info    : Function properties for first
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function 'second' for 'sm_90a'
ptxas info    : Function properties for second
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
"""
    resources = parse_ptxas(log)
    assert resources["first"].registers == 40
    assert resources["first"].smem_bytes == 4096
    assert resources["first"].spill_bytes == 20
    assert resources["first"].stack_bytes == 16
    assert resources["second"].smem_bytes == 0


def test_nvcc_can_be_named_and_a_missing_one_is_explained(tmp_path, monkeypatch):
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    named = find_toolchain({"NVCC": str(fake), "PATH": ""})
    assert named.version == "12.8.93" and named.release == "12.8" and named.origin == "$NVCC"
    with pytest.raises(ToolchainError, match=r"\$NVCC is .*missing, which is not an executable"):
        find_toolchain({"NVCC": str(tmp_path / "missing")})
    monkeypatch.setattr("harness.compile.toolchain._wheel_roots", lambda: [])
    with pytest.raises(ToolchainError, match=r"no nvcc found.*set NVCC="):
        find_toolchain({"CUDA_HOME": str(tmp_path), "PATH": os.devnull})


def _fake_nvcc(folder, body):
    """An executable that answers --version like nvcc 13.0 and otherwise runs `body`."""
    fake = folder / "nvcc"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "release 13.0, V13.0.88"; exit 0; fi\n' + body
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return find_toolchain({"NVCC": str(fake)})


def _in_its_compile(body):
    """A fake nvcc's body that runs in a kernel's compile only: the harness's questions of nvcc
    (its include folders) get nothing at once, so the compile is what the test times."""
    return f'case " $* " in *" -fatbin "*) {body};; esac\n'


def test_a_hanging_nvcc_times_out_in_its_own_cell_and_takes_its_children(matrix, add_one, tmp_path):
    """As a real nvcc's cc1plus would, the fake's child outlives nvcc unless the group goes."""
    child = tmp_path / "child.pid"
    hung = _fake_nvcc(tmp_path, _in_its_compile(f"sleep 60 & echo $! > {child}; sleep 60"))
    compiler = Compiler(hung, tmp_path / "cache", timeout_s=1)
    started = time.monotonic()
    result = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert time.monotonic() - started < 30
    assert result.binary is None and "timeout: nvcc ran past 1 s" in result.log
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and "State:\tZ" not in _status(pid):
        assert time.monotonic() < deadline, f"nvcc's child {pid} outlived the timeout"
        time.sleep(0.1)


def test_an_nvcc_that_starts_after_an_interrupt_is_killed_at_once(matrix, add_one, tmp_path):
    """Ctrl-C can land between a compile's scratch file and its nvcc's start, where killing
    the running ones misses it: that nvcc must not hold the run for its whole length."""
    hangs = _fake_nvcc(tmp_path, _in_its_compile("sleep 60"))
    compiler = Compiler(hangs, tmp_path / "cache", timeout_s=120)
    compiler._kill_running()  # the interrupt, before this compile's nvcc exists
    started = time.monotonic()
    result = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert time.monotonic() - started < 30
    assert result.binary is None


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return "State:\tZ"  # gone


def test_the_cause_of_a_failed_build_is_its_fatal_line():
    full_disk = (
        "ptxas info    : Compiling entry function 'error_count' for 'sm_90a'\n"
        "ptxas info    : Used 10 registers\n"
        'fatbinary fatal   : Could not write file "/cache/x.fatbin.tmp": No space left on device'
    )
    assert failure_line(full_disk).startswith("fatbinary fatal   : Could not write file")
    typo = 'k.cu(2): error: identifier "x" is undefined\n1 error detected in k.cu.'
    assert failure_line(typo) == 'k.cu(2): error: identifier "x" is undefined'
    assert failure_line("Segmentation fault") == "Segmentation fault"


def test_a_crashing_nvcc_fails_with_its_status(matrix, add_one, tmp_path):
    crashing = _fake_nvcc(tmp_path, "echo 'internal compiler error' >&2; exit 134\n")
    result = Compiler(crashing, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    assert result.binary is None
    assert "internal compiler error" in result.log and "status 134" in result.log


def test_two_runs_sharing_one_cache_at_once_both_get_a_valid_binary(tmp_path):
    script = (
        "import sys; from pathlib import Path; from harness.compile.nvcc import Compiler; "
        "from harness.model.discovery import kernel_folders, load_kernel; "
        "from harness.model.matrix import load_matrix; "
        "from harness.compile.toolchain import find_toolchain; "
        f"(f,) = [f for f in kernel_folders(Path({str(PLANTED)!r})) if f.name == 'add_one']; "
        "k = load_kernel(f); "
        "m = load_matrix(Path('matrix.yaml')); "
        f"r = Compiler(find_toolchain(), Path({str(tmp_path / 'shared')!r}))"
        ".compile(k, m.targets['sm_90a']); "
        "print(r.binary is not None, r.binary.stat().st_size)"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=300)[0].split() for run in runs]
    assert all(out[0] == "True" for out in outputs), outputs
    assert len({out[1] for out in outputs}) == 1  # the same complete binary for each
    assert not list((tmp_path / "shared").rglob("*.tmp"))  # no half-written leftovers


def test_a_wgmma_build_shows_hgmma_in_its_sass(matrix, toolchain, tmp_path):
    gemm = _kernel(ROOT / "kernels", "wgmma_ws_gemm")
    built = Compiler(toolchain, tmp_path / "cache").compile(gemm, matrix.targets["sm_90a"])
    assert built.binary is not None, built.log
    assert built.sass.error is None and built.sass.counts["HGMMA"] >= 4
    assert built.sass.missing == []


def test_a_build_without_the_demanded_opcode_is_caught(matrix, toolchain, add_one, tmp_path):
    binary = Compiler(toolchain, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    sass = check_sass(toolchain.cuobjdump, binary.binary, ("HGMMA", "FADD"))
    assert sass.counts["HGMMA"] == 0 and sass.counts["FADD"] >= 1
    assert sass.missing == ["HGMMA"]


def _demanding(kernel: Kernel, *opcodes: str) -> Kernel:
    return dataclasses.replace(
        kernel, declared=dataclasses.replace(kernel.declared, sass_must_contain=opcodes)
    )


def test_a_served_build_s_sass_counts_are_its_record_s_until_the_spec_demands_more(
    matrix, toolchain, add_one, tmp_path, monkeypatch
):
    sm90 = matrix.targets["sm_90a"]
    built = Compiler(toolchain, tmp_path / "cache").compile(_demanding(add_one, "FADD"), sm90)
    assert built.sass.counts["FADD"] >= 1 and built.sass.error is None
    disassembled = []
    real = nvcc.check_sass

    def counted(*args):
        disassembled.append(args[2])
        return real(*args)

    monkeypatch.setattr(nvcc, "check_sass", counted)
    served = Compiler(toolchain, tmp_path / "cache").compile(_demanding(add_one, "FADD"), sm90)
    assert served.cached and served.sass == built.sass and disassembled == []
    more = Compiler(toolchain, tmp_path / "cache").compile(
        _demanding(add_one, "FADD", "HGMMA"), sm90
    )
    assert more.cached and disassembled == [("FADD", "HGMMA")]
    assert more.sass.counts == {"FADD": built.sass.counts["FADD"], "HGMMA": 0}
    assert more.sass.missing == ["HGMMA"]
    none = Compiler(toolchain, tmp_path / "cache").compile(add_one, sm90)
    assert none.cached and none.sass is None


def test_a_missing_disassembler_is_an_error_not_a_pass(toolchain, tmp_path):
    sass = check_sass(tmp_path / "cuobjdump", tmp_path / "x.fatbin", ("HGMMA",))
    assert "cannot run" in sass.error and sass.missing == ["HGMMA"]


def test_scratch_files_a_killed_run_left_are_swept(toolchain, tmp_path):
    folder = tmp_path / "cache" / "ch.k"
    folder.mkdir(parents=True)
    stale, live = folder / "sm_90a-x.fatbin.tmp", folder / "sm_90a-y.fatbin.tmp"
    stale.write_bytes(b"half a binary")
    live.write_bytes(b"being written")
    old = time.time() - 2 * 600
    os.utime(stale, (old, old))
    Compiler(toolchain, tmp_path / "cache", timeout_s=600)
    assert not stale.exists() and live.exists()


def test_the_code_identity_is_the_same_in_any_folder_and_changes_with_the_code(
    matrix, toolchain, tmp_path
):
    """-lineinfo writes the source's path into the binary: the bytes differ between two clones,
    the code identity does not; a moved line does not change it, a changed instruction does."""
    source = PLANTED / "planted" / "add_one"
    builds = {}
    for clone in ("one", "two/deeper"):
        tree = tmp_path / clone / "kernels"
        (tree / "planted").mkdir(parents=True)
        shutil.copytree(source, tree / "planted" / "add_one")
        kernel = _kernel(tree, "add_one")
        compiler = Compiler(toolchain, tmp_path / clone / "cache")
        builds[clone] = {t: compiler.compile(kernel, matrix.targets[t]) for t in matrix.targets}
    for target in matrix.targets:
        one, two = builds["one"][target], builds["two/deeper"][target]
        assert one.sha256 != two.sha256, target  # the paths in the line table
        assert one.code_identity is not None and one.code_identity == two.code_identity, target
    cu = tmp_path / "two/deeper/kernels/planted/add_one/add_one.cu"
    cu.write_text("// a line more above the kernel moves every line of it\n" + cu.read_text())
    moved = Compiler(toolchain, tmp_path / "moved").compile(
        _kernel(tmp_path / "two/deeper/kernels", "add_one"), matrix.targets["sm_90a"]
    )
    assert moved.code_identity == builds["one"]["sm_90a"].code_identity
    cu.write_text(cu.read_text().replace("x[i] + 1.0f", "x[i] + 2.0f"))
    changed = Compiler(toolchain, tmp_path / "changed").compile(
        _kernel(tmp_path / "two/deeper/kernels", "add_one"), matrix.targets["sm_90a"]
    )
    assert changed.code_identity != builds["one"]["sm_90a"].code_identity
    # the instructions alone (what an upgrade report asks of two toolkits' builds): the same
    # wherever built, another where an instruction changed
    first = sass_identity(toolchain.cuobjdump, builds["one"]["sm_90a"].binary)
    assert sass_identity(toolchain.cuobjdump, builds["two/deeper"]["sm_90a"].binary) == first
    assert sass_identity(toolchain.cuobjdump, moved.binary) == first
    assert sass_identity(toolchain.cuobjdump, changed.binary) != first


def test_a_cache_entry_whose_identity_was_unread_gets_one(
    toolchain, add_one, matrix, tmp_path, monkeypatch
):
    import harness.compile.nvcc as nvcc

    def unreadable(cuobjdump, binary, timeout_s=120):
        raise IdentityError("cuobjdump -xelf failed: planted")

    monkeypatch.setattr(nvcc, "code_identity", unreadable)
    first = Compiler(toolchain, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    assert first.code_identity is None
    monkeypatch.undo()
    again = Compiler(toolchain, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    assert again.cached and again.code_identity == code_identity(toolchain.cuobjdump, again.binary)


def test_a_cache_entry_from_before_macs_is_rebuilt_quietly(toolchain, add_one, matrix, tmp_path):
    compiler = Compiler(toolchain, tmp_path / "cache")
    first = compiler.compile(add_one, matrix.targets["sm_90a"])
    record = first.binary.with_suffix(".json")
    entry = json.loads(record.read_text())
    del entry["mac"], entry["inputs"]
    record.write_text(json.dumps(entry))
    again = compiler.compile(add_one, matrix.targets["sm_90a"])
    assert not again.cached and FAILED_CHECK not in again.log
    assert compiler.compile(add_one, matrix.targets["sm_90a"]).cached


def test_a_binary_that_cannot_be_taken_apart_has_no_identity_and_says_why(toolchain, tmp_path):
    with pytest.raises(IdentityError, match="failed"):
        code_identity(toolchain.cuobjdump, tmp_path / "missing.fatbin")
    with pytest.raises(IdentityError, match="not a 64-bit"):
        code_sections(b"not an elf")


def test_a_build_whose_identity_cannot_be_read_still_builds_and_says_why(
    matrix, toolchain, add_one, tmp_path, monkeypatch
):
    import harness.compile.nvcc as nvcc

    def unreadable(cuobjdump, binary, timeout_s=120):
        raise IdentityError("cuobjdump -xelf failed: planted")

    monkeypatch.setattr(nvcc, "code_identity", unreadable)
    built = Compiler(toolchain, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    assert built.binary is not None and built.code_identity is None
    assert "code identity unavailable: cuobjdump -xelf failed: planted" in built.log


def test_a_kernel_that_makes_nvcc_print_megabytes_keeps_its_start_and_end(
    matrix, toolchain, add_one, tmp_path
):
    from harness.compile.nvcc import LOG_CHARS

    source = add_one.folder / "add_one.cu"
    noisy = "".join(f'#pragma message("line {i} {"x" * 80}")\n' for i in range(3000))
    source.write_text(noisy + source.read_text())
    result = Compiler(toolchain, tmp_path / "cache").compile(add_one, matrix.targets["sm_90a"])
    assert result.binary is not None, result.log[-500:]
    assert LOG_CHARS < len(result.log) < LOG_CHARS + 100
    assert "characters left out ...]" in result.log
    assert "line 0 " in result.log  # its start
    assert "add_one" in result.log.splitlines()[-1] or "ptxas" in result.log[-2000:]  # its end
    assert result.resources["add_one"].registers > 0  # read from the whole log first
    (record,) = (tmp_path / "cache").rglob("*.json")
    assert len(json.loads(record.read_text())["log"]) == len(result.log)  # the cache keeps no more


STYLED = """
#include <concepts>
#ifndef VEC
#error "build with -DVEC=1, 2 or 4"
#endif
template <typename T> concept Real = std::floating_point<T>;  // C++20
template <Real T> __device__ T plus_one(T v) { return v + T(1); }
extern "C" __global__ void add_one(const float* x, float* y, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  for (int k = 0; k < VEC; ++k) if (i + k < n) y[i + k] = plus_one(x[i + k]);
}
"""


def _with_build(planted: Path, build: str) -> Path:
    """add_one's folder with STYLED as its source and `build` as its spec's BuildOptions."""
    folder = planted / "planted" / "add_one"
    (folder / "add_one.cu").write_text(STYLED)
    spec = folder / "spec.py"
    text = spec.read_text().replace("SPEC = KernelSpec(", f"SPEC = KernelSpec(build={build}, ")
    spec.write_text(
        text.replace("from harness.spec import ", "from harness.spec import BuildOptions, ")
    )
    return folder


def test_a_spec_s_standard_macros_and_flags_build_it_and_key_its_cache(
    matrix, toolchain, planted, tmp_path
):
    sm90 = matrix.targets["sm_90a"]
    _with_build(planted, 'BuildOptions(std="c++20", defines={"VEC": 4}, flags=("-use_fast_math",))')
    styled = _kernel(planted, "add_one")
    built = Compiler(toolchain, tmp_path / "cache").compile(styled, sm90)
    assert built.binary is not None, built.log
    assert ["-std=c++20", "-DVEC=4", "-use_fast_math"] == [
        f for f in built.command if f in ("-std=c++20", "-DVEC=4", "-use_fast_math")
    ]
    assert "-std=c++17" not in built.command
    plain = dataclasses.replace(
        styled, declared=dataclasses.replace(styled.declared, build=("-std=c++17",))
    )
    assert cache_key(plain, sm90, "toolkit") != cache_key(styled, sm90, "toolkit")
    failed = Compiler(toolchain, tmp_path / "cache").compile(plain, sm90)
    assert failed.binary is None and "build with -DVEC=1, 2 or 4" in failed.log


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (
            'BuildOptions(flags=("-Xcompiler=-B/tmp/evil",))',
            "build flag '-Xcompiler=-B/tmp/evil' is refused",
        ),
        ('BuildOptions(flags=("-I/etc",))', "build flag '-I/etc' is refused"),
        ('BuildOptions(flags=("--run",))', "build flag '--run' is refused"),
        (
            'BuildOptions(defines={"N": "1;touch /tmp/x"})',
            "build define N='1;touch /tmp/x': a value of",
        ),
        ('BuildOptions(defines={"1N": 1})', "build define '1N' is not a macro name"),
        ('BuildOptions(std="c++98")', "build std 'c++98' is not one of c++17, c++20"),
        ('BuildOptions(flags=("-rdc=true",))', "build flag '-rdc=true' is refused"),
        (
            'BuildOptions(sources=("helper.cu",))',
            "build sources and libraries are device-linked: they need relocatable=True",
        ),
        (
            'BuildOptions(relocatable=True, sources=("../x/a.cu",))',
            "build sources: '../x/a.cu': a source is a file in the kernel's folder",
        ),
        (
            'BuildOptions(relocatable=True, sources=("missing.cu",))',
            "build source 'missing.cu' is not a file beside it",
        ),
        (
            'BuildOptions(relocatable=True, libraries=("cublas",))',
            "build library 'cublas' is not one of cudadevrt",
        ),
    ],
)
def test_build_options_that_could_leave_the_tree_or_run_a_program_are_refused(planted, build, said):
    folder = _with_build(planted, build)
    with pytest.raises(SpecError) as refused:
        load_kernel(KernelFolder.of(folder / "spec.py"))
    assert f"{folder / 'spec.py'}: {said}" in str(refused.value)


def test_a_spec_that_sets_nvcc_flags_in_the_environment_changes_no_build(
    matrix, toolchain, planted, tmp_path
):
    """Specs are imported in children of their own: NVCC_APPEND_FLAGS set by one at import never
    reaches nvcc's environment, for its own build or another's."""
    spec = planted / "planted" / "needs_sm90" / "spec.py"
    spec.write_text(
        'import os\nos.environ["NVCC_APPEND_FLAGS"] = "-DPLANTED_BY_A_SPEC"\n' + spec.read_text()
    )
    source = planted / "planted" / "add_one" / "add_one.cu"
    source.write_text(
        '#ifdef PLANTED_BY_A_SPEC\n#error "another spec set my flags"\n#endif\n'
        + source.read_text()
    )
    options = RunOptions(
        matrix.targets["sm_90a"], (planted,), tmp_path / "r", tmp_path / "c", select=""
    )
    report = compile_target(matrix, options, toolchain).report
    compiled = {c.kernel: c for c in report.cells if c.case == "compile"}
    assert compiled["add_one"].outcome is Outcome.PASSED, compiled["add_one"].message
    assert compiled["needs_sm90"].outcome is Outcome.PASSED
    assert "NVCC_APPEND_FLAGS" not in os.environ


TEMPLATED = """
namespace ns {
template <typename T, int V>
__global__ void scale(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * T(V);
}
}  // namespace ns
template <int BLOCK>
__global__ void block_sum(const float* x, float* y, int n) {
  if (threadIdx.x < BLOCK && n > 0) y[blockIdx.x] = x[blockIdx.x];
}
extern "C" __global__ void add_one(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
"""


def _templated(planted: Path, names: str) -> Kernel:
    folder = planted / "planted" / "add_one"
    (folder / "add_one.cu").write_text(TEMPLATED)
    spec = folder / "spec.py"
    spec.write_text(
        spec.read_text().replace("SPEC = KernelSpec(", f"SPEC = KernelSpec(entries={names}, ")
    )
    return _kernel(planted, "add_one")


def test_c_plus_plus_entries_are_instantiated_and_mapped_by_the_names_the_spec_writes(
    matrix, toolchain, planted, tmp_path
):
    kernel = _templated(planted, '("block_sum<128>", "ns::scale<float, 4>")')
    compiler = Compiler(toolchain, tmp_path / "cache")
    built = compiler.compile(kernel, matrix.targets["sm_90a"])
    assert built.binary is not None, built.log
    assert built.symbols == {
        "block_sum<128>": "_Z9block_sumILi128EEvPKfPfi",
        "ns::scale<float, 4>": "_ZN2ns5scaleIfLi4EEEvPKT_PS1_i",
    }
    assert set(built.resources) == {"block_sum<128>", "ns::scale<float, 4>", "add_one"}
    assert symbols_of_binary(built.binary) == built.symbols
    again = compiler.compile(kernel, matrix.targets["sm_90a"])
    assert again.cached and again.symbols == built.symbols
    assert not list((tmp_path / "cache").rglob("*.cu"))  # the probes' unit is gone


def test_a_c_plus_plus_entry_the_source_cannot_instantiate_fails_the_build_saying_why(
    matrix, toolchain, planted, tmp_path
):
    kernel = _templated(planted, '("block_sum<128, 2>",)')
    built = Compiler(toolchain, tmp_path / "cache").compile(kernel, matrix.targets["sm_90a"])
    assert built.binary is None
    assert failure_line(built.log).startswith("add_one.cu, entry 'block_sum<128, 2>': error: ")


@pytest.mark.parametrize(
    "names", ['("block_sum<128>", "block_sum<128 >")', '("block_sum<128>", "block_sum<0x80>")']
)
def test_two_spellings_of_one_instantiation_fail_the_build_naming_both(
    matrix, toolchain, planted, tmp_path, names
):
    """Both would map to one symbol, and a launch by one would find the other's name."""
    kernel = _templated(planted, names)
    built = Compiler(toolchain, tmp_path / "cache").compile(kernel, matrix.targets["sm_90a"])
    first, second = eval(names)
    assert built.binary is None
    line = failure_line(built.log)
    assert f"entries {first!r} and {second!r} name one instantiation" in line, line
    assert "block_sum<128>" in line and "name it once" in line


def test_a_source_that_takes_the_probe_s_name_is_told_so(matrix, toolchain, planted, tmp_path):
    kernel = _templated(planted, '("block_sum<128>",)')
    source = kernel.folder / "add_one.cu"
    source.write_text(source.read_text() + "\nint cuda_matrix_entry = 0;\n")
    built = Compiler(toolchain, tmp_path / "cache").compile(kernel, matrix.targets["sm_90a"])
    assert built.binary is None
    line = failure_line(built.log)
    assert "it may not define `cuda_matrix_entry`" in line and "entry '?'" not in line, line


@pytest.mark.parametrize("name", ['"k<1>; int x"', '"k<1>{}"', '"k/*x*/"', "3"])
def test_an_entry_that_is_no_cxx_name_is_refused_at_discovery(planted, name):
    folder = planted / "planted" / "add_one"
    spec = folder / "spec.py"
    spec.write_text(
        spec.read_text().replace("SPEC = KernelSpec(", f"SPEC = KernelSpec(entries=({name},), ")
    )
    with pytest.raises(SpecError, match=r"entry .* is not a C\+\+ name"):
        load_kernel(KernelFolder.of(spec))


HELPER = """
__device__ float plus_one(float v) { return v + 1.0f; }
"""
CALLER = """
extern __device__ float plus_one(float v);
extern "C" __global__ void add_one(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = plus_one(x[i]);
}
"""


def _two_units(planted: Path, build: str) -> Kernel:
    """add_one split in two files, its spec's BuildOptions `build`."""
    folder = _with_build(planted, build)
    (folder / "add_one.cu").write_text(CALLER)
    (folder / "helper.cu").write_text(HELPER)
    return _kernel(planted, "add_one")


def test_relocatable_units_are_device_linked_and_kept_for_the_driver_only_under_ptx(
    matrix, toolchain, planted, tmp_path
):
    kernel = _two_units(planted, 'BuildOptions(relocatable=True, sources=("helper.cu",))')
    compiler = Compiler(toolchain, tmp_path / "cache")
    for name, kept in (("sm_80", 2), ("sm_90a", 0)):
        built = compiler.compile(kernel, matrix.targets[name])
        assert built.binary is not None, built.log
        assert built.command.count("&&") == 2 and "-dlink" in built.command
        assert str(kernel.folder / "helper.cu") in built.command
        assert len(jit_inputs_of_binary(built.binary)) == kept
        assert all(path.is_file() for path in jit_inputs_of_binary(built.binary))
        assert list(built.resources) == ["add_one"]
    unlinked = dataclasses.replace(
        kernel, declared=dataclasses.replace(kernel.declared, build=("-std=c++17",))
    )
    failed = compiler.compile(unlinked, matrix.targets["sm_90a"])
    assert failed.binary is None and "Unresolved extern function" in failed.log
    # a unit kept for the driver gone: the build is made again, not loaded half
    sm80 = compiler.compile(kernel, matrix.targets["sm_80"])
    assert sm80.binary is not None
    jit_inputs_of_binary(sm80.binary)[1].unlink()
    again = compiler.compile(kernel, matrix.targets["sm_80"])
    assert not again.cached and all(p.is_file() for p in jit_inputs_of_binary(again.binary))


def test_the_key_of_a_kernel_follows_its_other_units(matrix, planted):
    kernel = _two_units(planted, 'BuildOptions(relocatable=True, sources=("helper.cu",))')
    before = cache_key(kernel, matrix.targets["sm_90a"], "toolkit")
    (kernel.folder / "helper.cu").write_text(HELPER.replace("1.0f", "2.0f"))
    assert cache_key(kernel, matrix.targets["sm_90a"], "toolkit") != before


def test_a_device_library_the_toolkit_lacks_fails_the_build_naming_it(
    matrix, toolchain, planted, tmp_path
):
    kernel = _two_units(
        planted,
        'BuildOptions(relocatable=True, sources=("helper.cu",), libraries=("cudadevrt",))',
    )
    root = tmp_path / "toolkit"
    (root / "bin").mkdir(parents=True)
    bare = Toolchain(nvcc=root / "bin" / "nvcc", version=toolchain.version, origin="test")
    assert bare.library("cudadevrt") is None
    assert toolchain.library("cudadevrt") is not None
    compiler = Compiler(toolchain, tmp_path / "cache")
    compiler.toolchain = bare
    built = compiler.compile(kernel, matrix.targets["sm_90a"])
    assert built.binary is None
    assert f"the toolkit of {bare.nvcc} has no libcudadevrt.a" in failure_line(built.log)


def test_case_macros_make_one_build_per_set_each_with_its_own_compile_cell(
    matrix, toolchain, planted, tmp_path
):
    from harness.pipeline.compiling import compile_kernels
    from harness.pipeline.context import open_run

    folder = _with_build(planted, 'BuildOptions(std="c++20")')
    spec = folder / "spec.py"
    text = spec.read_text()
    cases = "cases=({}),".format(
        ", ".join(
            f'Case("{name}", {{"n": 9}}, defines={{"VEC": {vec}}})'
            for name, vec in (("a", 2), ("b", 2), ("c", 3), ("d", 4))
        )
    )
    text = re.sub(r"cases=\(.*?\),\n", cases + "\n", text, count=1, flags=re.S)
    spec.write_text(text)
    kernel = _kernel(planted, "add_one")
    assert kernel.builds == [("-DVEC=2",), ("-DVEC=3",), ("-DVEC=4",)]
    options = RunOptions(matrix.targets["sm_90a"], (planted,), tmp_path, tmp_path / "cache")
    context = open_run(matrix, options, toolchain, Unavailable("no GPU in this test"))
    stage = compile_kernels(context, [kernel], lambda kernel: [])
    named = {cell.case: cell.outcome for cell in stage.cells}
    assert named == {
        "compile(VEC=2)": Outcome.PASSED,
        "compile(VEC=3)": Outcome.PASSED,
        "compile(VEC=4)": Outcome.PASSED,
    }
    binaries = {stage.build_of(kernel, case).binary for case in kernel.declared.cases}
    assert len(binaries) == 3
    shown = {cell.case: cell.detail.split("\n")[0] for cell in stage.cells}
    assert "-DVEC=3" in shown["compile(VEC=3)"] and "-DVEC=2" not in shown["compile(VEC=3)"]


def test_a_failed_build_of_case_macros_fails_its_own_cases_only(
    matrix, toolchain, planted, tmp_path
):
    folder = _with_build(planted, 'BuildOptions(std="c++20")')
    source = folder / "add_one.cu"
    source.write_text('#if VEC == 3\n#error "no VEC=3 here"\n#endif\n' + source.read_text())
    spec = folder / "spec.py"
    cases = (
        'cases=(Case("two", {"n": 9}, defines={"VEC": 2}), '
        'Case("three", {"n": 9}, defines={"VEC": 3})),'
    )
    spec.write_text(
        re.sub(r"cases=\(.*?\),\n", cases + "\n", spec.read_text(), count=1, flags=re.S)
    )
    options = RunOptions(
        matrix.targets["sm_90a"], (planted,), tmp_path, tmp_path / "cache", select="add_one"
    )
    report = run_target(matrix, options, toolchain, Unavailable("no GPU in this test")).report
    seen = {cell.name: (cell.outcome, cell.message) for cell in report.cells}
    assert seen["compile(VEC=2)[sm_90a]"][0] is Outcome.PASSED
    assert seen["compile(VEC=3)[sm_90a]"][0] is Outcome.FAILED
    assert "no VEC=3 here" in seen["compile(VEC=3)[sm_90a]"][1]
    assert seen["three[sm_90a]"] == (
        Outcome.FAILED,
        "not compiled: nvcc failed (see compile(VEC=3)[sm_90a])",
    )
    assert seen["two[sm_90a]"][0] is Outcome.SKIPPED


def test_compiling_says_how_many_builds_are_done_at_most_once_a_second(matrix, capsys):
    from harness.pipeline.console import CountProgress

    progress = CountProgress("compile sm_90a", "builds", "nvcc running", 3)
    progress(1, 3)  # within the second: not said
    progress.said -= 2  # as if two seconds passed
    progress(2, 3)
    progress(3, 3)  # the last is always said
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "compile sm_90a: 3 builds, nvcc running ..."
    assert [line.split(",")[0] for line in said[1:]] == [
        "compile sm_90a: 2/3 builds",
        "compile sm_90a: 3/3 builds",
    ]
