"""nvcc per (kernel, target), cached by content, with ptxas' resource report kept.

The cache key covers everything that changes the binary: the source and the project headers it
includes with quotes, the toolkit's own headers (CCCL, cooperative_groups: what angle brackets
reach), the flags and the flags nvcc takes from the environment, the target's gencode, nvcc's
exact version and the host compiler's. Entries are written to a temporary name and renamed, so a
crash or a second run never sees half a file.

A build nvcc ran is a Compiled, failed or not, with its log; a build refused before nvcc could
run (a source outside the kernel tree, a cache that cannot be written) raises KernelFailed, and
compile_all gives that kernel Unavailable with why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import processes
from harness.compile import entries
from harness.compile.identity import IdentityError, code_identity
from harness.compile.toolchain import Toolchain
from harness.model.discovery import Kernel
from harness.model.matrix import Target
from harness.model.result import KernelFailed, Resources, Unavailable, bounded

FLAGS = ("-fatbin", "-O3", "-std=c++17", "-lineinfo", "-Xptxas", "-v")
TIMEOUT_S = 600  # an nvcc that runs longer is taken for hung
# Of nvcc's output kept (in the cell, the cache, the history): a `#pragma message` in a loop
# once made 105 MB of it
LOG_CHARS = 64_000
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_ANY_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)


class OutsideTree(KernelFailed):
    """A kernel includes a file outside its kernel tree: refused before nvcc could quote it."""


@dataclass(frozen=True)
class SassCheck:
    """How often each opcode the spec demands appears in the binary's SASS."""

    counts: dict[str, int]
    error: str | None = None  # why cuobjdump could not read the binary: nothing was checked

    @property
    def missing(self) -> list[str]:
        return [opcode for opcode, count in self.counts.items() if count == 0]


@dataclass(frozen=True)
class Compiled:
    """The outcome of one compile cell. `binary` is None when nvcc failed."""

    binary: Path | None
    command: tuple[str, ...]
    log: str
    seconds: float
    cached: bool
    resources: dict[str, Resources]
    sass: SassCheck | None = None  # None: the spec demands no opcodes, or nvcc failed
    sha256: str | None = None  # of the binary's bytes, which depend on where it was built
    code_identity: str | None = None  # of what the GPU executes (identity.py); None: unread
    symbols: dict[str, str] = dataclasses.field(default_factory=dict)  # C++ entry -> symbol


class _NoLibrary(Exception):
    """A device library the spec names is not in the toolkit."""


@dataclass(frozen=True)
class _Step:
    """One nvcc run of a build, and the file it writes."""

    command: tuple[str, ...]
    output: Path


def _unit_file(binary: Path, index: int) -> Path:
    """Where a relocatable build keeps its unit `index`, for the driver to link PTX from."""
    return binary.with_name(f"{binary.stem}.unit{index}.fatbin")


def sources_of(source: Path, tree: Path | None = None) -> list[Path]:
    """The .cu and every project header it includes with quotes, transitively.

    With `tree` (the kernel tree's root), an include of an absolute path, or a quoted one that
    resolves outside the tree, raises OutsideTree: a kernel is built from its tree and the
    toolkit's headers, and a report never quotes another file of the machine.
    """
    seen: list[Path] = []
    pending = [source.resolve()]
    root = tree.resolve() if tree else None
    if root and not pending[0].is_relative_to(root):  # `../` in its name, or a link out
        raise OutsideTree(
            f"{source}: the kernel's source reaches {pending[0]}, outside the kernel tree "
            f"{root}: refused"
        )
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        text = path.read_text(errors="replace")
        if root:
            for name in _ANY_INCLUDE.findall(text):
                if Path(name).is_absolute():
                    raise OutsideTree(f"{path}: #include of the absolute path {name} is refused")
        for name in _INCLUDE.findall(text):
            included = (path.parent / name).resolve()
            if root and not included.is_relative_to(root):
                raise OutsideTree(
                    f'{path}: #include "{name}" reaches {included}, outside the kernel tree '
                    f"{root}: refused"
                )
            pending.append(included)
    return seen


# nvcc reads these from the environment and adds them to every command line.
FLAG_VARIABLES = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")


def toolkit_fingerprint(toolchain: Toolchain, env: Mapping[str, str]) -> str:
    """What changes every binary of this toolchain: nvcc's version, its headers' content, the
    host compiler's version, and the environment's nvcc flags."""
    digest = hashlib.sha256()
    digest.update(toolchain.version.encode() + b"\0")
    for name in FLAG_VARIABLES:
        digest.update(f"{name}={env.get(name, '')}".encode() + b"\0")
    digest.update(_host_compiler_version(env.get("NVCC_CCBIN") or "g++").encode() + b"\0")
    include = toolchain.nvcc.parent.parent / "include"
    for header in sorted(path for path in include.rglob("*") if path.is_file()):
        digest.update(str(header.relative_to(include)).encode() + b"\0")
        digest.update(header.read_bytes() + b"\0")
    return digest.hexdigest()


def _host_compiler_version(compiler: str) -> str:
    try:
        result = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{compiler}: {type(error).__name__}"  # nvcc will fail too, and say why
    return (result.stdout.splitlines() or [""])[0]


def kernel_flags(kernel: Kernel) -> tuple[str, ...]:
    """The harness's flags with the spec's standard, then the spec's macros and flags: a
    kernel that asks for nothing is built exactly as before specs could ask."""
    standard, *more = kernel.declared.build
    own = tuple(standard if flag.startswith("-std=") else flag for flag in FLAGS)
    return (*own, *more)


def cache_key(kernel: Kernel, target: Target, fingerprint: str) -> str:
    digest = hashlib.sha256()
    for part in (fingerprint, target.gencode, *kernel_flags(kernel)):
        digest.update(part.encode() + b"\0")
    for name in kernel.declared.entries:  # each a probe in the unit built: other code
        digest.update(b"entry\0" + name.encode() + b"\0")
    for path in sources_of(kernel.source, kernel.folder.parent.parent):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for unit in kernel.units[1:]:  # a kernel of one source keeps the key it always had
        digest.update(b"unit\0")
        for path in sources_of(unit, kernel.folder.parent.parent):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for library in kernel.declared.libraries:
        digest.update(b"library\0" + library.encode() + b"\0")
    return digest.hexdigest()[:24]


def is_relocatable(kernel: Kernel) -> bool:
    return "-rdc=true" in kernel.declared.build


def _readable(resources: dict[str, Resources], symbols: dict[str, str]) -> dict[str, Resources]:
    """ptxas's resources by entry, each C++ entry under the name the spec wrote, its probe
    left out."""
    names = {symbol: name for name, symbol in symbols.items()}
    return {
        names.get(symbol, symbol): used
        for symbol, used in resources.items()
        if not entries.is_probe(symbol)
    }


def symbols_of_binary(binary: Path) -> dict[str, str]:
    """The C++ entries of a cached build and their symbols, from its record beside it."""
    symbols = _record_of(binary).get("symbols")
    return dict(symbols) if isinstance(symbols, dict) else {}


def jit_inputs_of_binary(binary: Path) -> list[Path]:
    """What the driver links for a device that runs a relocatable build's PTX: its units'
    fatbins (their PTX) and the device libraries, kept beside it; [] for any other build."""
    names = _record_of(binary).get("jit_link")
    if not isinstance(names, list):
        return []
    return [binary.parent / str(name) for name in names]


def entries_of_binary(binary: Path) -> list[str]:
    """A cached build's entry points as its compile cell names them (ptxas's, C++ entries by
    the names the spec wrote), from its record beside it."""
    resources = _record_of(binary).get("resources")
    return list(resources) if isinstance(resources, dict) else []


def _record_of(binary: Path) -> dict:
    try:
        record = json.loads(binary.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def parse_ptxas(log: str) -> dict[str, Resources]:
    resources: dict[str, Resources] = {}
    entry = None
    stack = spills = 0
    for line in log.splitlines():
        if match := re.search(r"Compiling entry function '([^']+)'", line):
            entry, stack, spills = match.group(1), 0, 0
        elif match := re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        ):
            stack, spills = int(match.group(1)), int(match.group(2)) + int(match.group(3))
        elif entry and (match := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            resources[entry] = Resources(
                registers=int(match.group(1)),
                smem_bytes=int(smem.group(1)) if smem else 0,
                spill_bytes=spills,
                stack_bytes=stack,
            )
            entry = None
    return resources


def check_sass(cuobjdump: Path, binary: Path, opcodes: tuple[str, ...]) -> SassCheck:
    """Counts each opcode as a whole mnemonic (HGMMA matches HGMMA.64x256x16.F32.BF16)."""
    try:
        result = subprocess.run(
            [str(cuobjdump), "-sass", str(binary)], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return SassCheck({op: 0 for op in opcodes}, f"cannot run {cuobjdump}: {error}")
    if result.returncode != 0:
        why = (result.stderr or result.stdout).strip()[-300:]
        return SassCheck({op: 0 for op in opcodes}, f"{cuobjdump.name} -sass failed: {why}")
    counts = {op: len(re.findall(rf"\b{re.escape(op)}\b", result.stdout)) for op in opcodes}
    return SassCheck(counts)


def failure_line(log: str) -> str:
    """The line of a failed build's log that says why: a fatal error (a full disk:
    `fatbinary fatal : Could not write file`) over the first error, over the log's end."""
    lines = log.splitlines()
    for marks in (("fatal",), ("error",)):
        found = [line for line in lines if any(mark in line.lower() for mark in marks)]
        if found:
            return found[0] if marks == ("error",) else found[-1]
    return log[-300:]


def _read_entry(binary: Path, record: Path) -> dict | None:
    """A cache entry whose binary still matches the hash recorded with it; else None (rebuild)."""
    try:
        entry = json.loads(record.read_text())
        if hashlib.sha256(binary.read_bytes()).hexdigest() != entry["sha256"]:
            return None
        entry["resources"] = {n: Resources(**r) for n, r in entry["resources"].items()}
        if not all((binary.parent / name).is_file() for name in entry.get("jit_link", [])):
            return None  # a unit the driver would link for PTX has gone
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return entry


class Compiler:
    def __init__(
        self,
        toolchain: Toolchain,
        cache_dir: Path,
        timeout_s: float = TIMEOUT_S,
        env: Mapping[str, str] | None = None,
    ):
        self.toolchain = toolchain
        self.cache_dir = Path(cache_dir)
        self.timeout_s = timeout_s
        self.fingerprint = toolkit_fingerprint(toolchain, os.environ if env is None else env)
        self._running: set[subprocess.Popen] = set()  # nvcc processes, for an interrupt to end
        self._lock = threading.Lock()
        self._stopping = False  # set by an interrupt: an nvcc starting after it is killed
        self._sweep_scratch()

    def _sweep_scratch(self) -> None:
        """Scratch files of runs that were killed: older than the nvcc timeout, no live nvcc
        still writes them."""
        now = time.time()
        swept = [
            *self.cache_dir.glob("*/*.tmp"),
            *self.cache_dir.glob("*/*.tmp.cu"),
            *self.cache_dir.glob("*/*.tmp.unit*.fatbin"),
        ]
        for scratch in swept:
            with contextlib.suppress(OSError):  # another run swept it first
                if now - scratch.stat().st_mtime > self.timeout_s:
                    scratch.unlink()

    def command(
        self, kernel: Kernel, target: Target, output: Path, source: Path | None = None
    ) -> tuple[str, ...]:
        """nvcc's command for `kernel`; `source`: the unit built, where it is not the kernel's
        own source (its C++ entries' probes)."""
        return (
            str(self.toolchain.nvcc),
            *kernel_flags(kernel),
            "-gencode",
            target.gencode,
            str(source or kernel.source),
            "-o",
            str(output),
        )

    def compile(self, kernel: Kernel, target: Target) -> Compiled:
        """The build of `kernel` for `target`, from the cache or from nvcc; KernelFailed when
        it is refused before nvcc runs."""
        try:
            compiled = self._compile(kernel, target)
        except OSError as error:  # a read-only cache, a folder where a binary should be
            where = error.filename or self.cache_dir
            raise KernelFailed(f"the compile cache {where}: {error.strerror or error}") from error
        demanded = kernel.declared.sass_must_contain
        if compiled.binary is None or not demanded:
            return compiled
        sass = check_sass(self.toolchain.cuobjdump, compiled.binary, demanded)
        return dataclasses.replace(compiled, sass=sass)

    def _compile_or_why(self, kernel: Kernel, target: Target) -> Compiled | Unavailable:
        try:
            return self.compile(kernel, target)
        except KernelFailed as refused:
            return Unavailable(str(refused))

    def _compile(self, kernel: Kernel, target: Target) -> Compiled:
        key = cache_key(kernel, target, self.fingerprint)
        folder = self.cache_dir / kernel.classname
        binary = folder / f"{target.name}-{key}.fatbin"
        record = binary.with_suffix(".json")
        cached = _read_entry(binary, record)
        if cached is not None:
            log = bounded(cached["log"], LOG_CHARS)  # an entry from before logs were bounded
            identity = cached.get("code_identity")
            if identity is None:  # an entry from before code identities
                identity, log = self._identity(binary, log)
            return Compiled(
                binary=binary,
                command=tuple(cached["command"]),
                log=log,
                seconds=0.0,
                cached=True,
                resources=cached["resources"],
                sha256=cached["sha256"],
                code_identity=identity,
                symbols=dict(cached.get("symbols", {})),
            )
        folder.mkdir(parents=True, exist_ok=True)
        handle, scratch_name = tempfile.mkstemp(dir=folder, suffix=".fatbin.tmp")
        os.close(handle)
        scratch = Path(scratch_name)
        names = list(kernel.declared.entries)
        unit = scratch.with_name(scratch.name + ".cu") if names else None
        if unit is not None:
            unit.write_text(entries.probe_source(kernel.source, names))
        started = time.monotonic()
        steps = []
        try:
            steps = self._steps(kernel, target, scratch, unit)
            failed, log = self._run_steps(steps, kernel.folder)
            if unit is not None:
                log = entries.said_of_probes(log, unit, names, kernel.source)
        except OSError as error:
            failed, log = True, f"cannot run {self.toolchain.nvcc}: {error.strerror}"
        except _NoLibrary as error:
            failed, log = True, f"error: {error}"
        finally:
            if unit is not None:
                unit.unlink(missing_ok=True)
        seconds = time.monotonic() - started
        resources = parse_ptxas(log)  # from the whole log, before it is bounded
        symbols: dict[str, str] = {}
        if names and not failed:
            try:
                symbols = entries.symbols_of(names, resources)
            except entries.EntryError as error:
                failed, log = True, f"{log}\nerror: {error}"
        resources = _readable(resources, symbols)
        log = bounded(log, LOG_CHARS)
        # as the cell and the cache show it: the kernel's source, the kept files' names
        renames = {str(scratch): str(binary)}
        if unit is not None:
            renames[str(unit)] = str(kernel.source)
        for index, step in enumerate(steps[:-1]):
            renames[str(step.output)] = str(_unit_file(binary, index))
        shown = tuple(
            part for step in steps for part in (*(renames.get(x, x) for x in step.command), "&&")
        )[:-1]
        kept = [step.output for step in steps[:-1]]  # the units of a relocatable build
        if failed:
            for scratch_file in (scratch, *kept):
                scratch_file.unlink(missing_ok=True)
            return Compiled(None, shown, log, seconds, False, resources)
        jit_link = self._keep_for_jit(kernel, target, kept, scratch, binary)
        sha256 = hashlib.sha256(scratch.read_bytes()).hexdigest()
        identity, log = self._identity(scratch, log)
        record_scratch = scratch.with_suffix(".json.tmp")
        record_scratch.write_text(
            json.dumps(
                {
                    "command": shown,
                    "sha256": sha256,
                    "code_identity": identity,
                    "log": log,
                    "resources": {name: asdict(r) for name, r in resources.items()},
                    "symbols": symbols,
                    "jit_link": jit_link,
                }
            )
        )
        os.replace(scratch, binary)
        os.replace(record_scratch, record)
        return Compiled(
            binary,
            shown,
            log,
            seconds,
            False,
            resources,
            sha256=sha256,
            code_identity=identity,
            symbols=symbols,
        )

    def _steps(
        self, kernel: Kernel, target: Target, scratch: Path, unit: Path | None
    ) -> list[_Step]:
        """The nvcc runs of a build: one, or for relocatable device code one per unit and a
        device link of them all (with the libraries the spec names) into `scratch`."""
        if not is_relocatable(kernel):
            return [_Step(self.command(kernel, target, scratch, unit), scratch)]
        units = [unit or kernel.source, *kernel.units[1:]]
        # nvcc knows an input by its suffix: a unit's fatbin must end in .fatbin
        outputs = [scratch.with_name(f"{scratch.name}.unit{i}.fatbin") for i in range(len(units))]
        steps = [
            _Step(self.command(kernel, target, output, source), output)
            for source, output in zip(units, outputs, strict=True)
        ]
        libraries = []
        for name in kernel.declared.libraries:
            found = self.toolchain.library(name)
            if found is None:
                raise _NoLibrary(
                    f"the toolkit of {self.toolchain.nvcc} has no lib{name}.a for the device link"
                )
            libraries.append(str(found))
        link = (
            str(self.toolchain.nvcc),
            "-dlink",
            "-fatbin",
            "-gencode",
            target.gencode,
            *map(str, outputs),
            *libraries,
            "-o",
            str(scratch),
        )
        return [*steps, _Step(link, scratch)]

    def _run_steps(self, steps: list[_Step], folder: Path) -> tuple[bool, str]:
        """Each step's nvcc in turn until one fails: whether one did, and all they said."""
        said = []
        for step in steps:
            status, log = self._run_nvcc(step.command, folder)
            said.append(log)
            if status is None:
                said.append(f"timeout: nvcc ran past {self.timeout_s:g} s and was killed")
            elif status != 0:
                said.append(f"nvcc exited with status {status}")
            if status != 0:
                return True, "\n".join(said).strip()
        return False, "\n".join(said).strip()

    def _keep_for_jit(
        self, kernel: Kernel, target: Target, units: list[Path], scratch: Path, binary: Path
    ) -> list[str]:
        """A relocatable build's units, and a copy of its libraries, kept beside the binary when
        the target embeds PTX: a newer GPU runs that PTX only through a link of its own, which
        the driver makes from them (launch.Module). Their names; the units are dropped when
        nothing will link them."""
        if not units or not target.ptx:
            for unit in units:
                unit.unlink(missing_ok=True)
            return []
        names = []
        for index, unit in enumerate(units):
            kept = _unit_file(binary, index)
            os.replace(unit, kept)
            names.append(kept.name)
        for name in kernel.declared.libraries:
            library = self.toolchain.library(name)
            assert library is not None  # _steps found it
            data = library.read_bytes()
            copy = binary.parent / f"lib{name}-{hashlib.sha256(data).hexdigest()[:12]}.a"
            if not copy.is_file():
                partial = copy.with_suffix(".a.tmp")
                partial.write_bytes(data)
                os.replace(partial, copy)
            names.append(copy.name)
        return names

    def _identity(self, binary: Path, log: str) -> tuple[str | None, str]:
        """The binary's code identity, and the log, which says why when there is none."""
        try:
            return code_identity(self.toolchain.cuobjdump, binary), log
        except IdentityError as error:
            return None, f"{log}\ncode identity unavailable: {error}".strip()

    def compile_all(
        self,
        pairs: list[tuple[Kernel, Target]],
        done: Callable[[int, int], None] | None = None,
    ) -> list[Compiled | Unavailable]:
        """Compile every pair, in parallel across cores; results in the order given, Unavailable
        with why for a build refused before nvcc ran; `done(finished, total)` after each build.

        Interrupted (Ctrl-C reaches this thread, not the compiling ones), it kills every nvcc
        still running, and any about to start, so that the interrupt ends the run instead of
        waiting on them. The interrupt may land while a compile is being submitted, its thread
        already compiling: that is inside the guard too."""
        workers = max(1, min(len(pairs), os.cpu_count() or 1))
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            futures = [pool.submit(self._compile_or_why, *pair) for pair in pairs]
            if done is not None:  # each build as it finishes: how many of how many
                for count, _ in enumerate(as_completed(futures), start=1):
                    done(count, len(futures))
            return [future.result() for future in futures]
        except BaseException:
            self._kill_running()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run_nvcc(self, command: tuple[str, ...], folder: Path) -> tuple[int | None, str]:
        """nvcc's exit status (None: killed at the timeout) and its output.

        nvcc runs in a process group of its own, and a timeout kills the group: nvcc's children
        (the host compiler's cc1plus, ptxas) would otherwise run on, orphaned, and keep growing.
        """
        process = processes.start(command, cwd=folder, stderr="stdout")
        with self._lock:
            self._running.add(process)
            stopping = self._stopping
        if stopping:  # interrupted between the scratch file and here: _kill_running missed it
            processes.kill_group(process)
        try:
            finished = processes.finish(process, self.timeout_s)
            return finished.status, finished.stdout
        finally:
            with self._lock:
                self._running.discard(process)

    def _kill_running(self) -> None:
        with self._lock:
            self._stopping = True  # and any nvcc that starts from now on
            running = list(self._running)
        for process in running:
            processes.kill_group(process)
