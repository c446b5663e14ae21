"""nvcc per (kernel, target), cached by content, with ptxas' resource report kept.

What nvcc read is nvcc's to say, not a scan of the source's: the host preprocessor it runs
writes the files it opened (-MD, through -Xcompiler: no pass of its own), and where it stopped
short of writing them (a fatal error, a kill) a second preprocessing lists each header as it
opens it (-H). A build that read a file outside the kernel tree, the toolkit's header folders and
the host compiler's is refused naming the file, its log withheld (it may quote the file); so is
a file of the tree that holds an assembler directive reading a file (`.incbin`). Where Landlock
works, nvcc runs confined to reading the tree, the toolkit and the system's programs and headers
(harness.sandbox): what no dependency output lists cannot be read either.

The cache works as ccache's direct mode: an entry's name holds a key of what nvcc is given (the
kernel's sources, flags, the environment's nvcc flags, the target's gencode, the toolkit), its
record every file the build read with its SHA-256; an entry is served only while each still
hashes the same, so any header edit rebuilds. Each record carries a MAC (HMAC-SHA256 keyed by a
file of the cache folder no spec process may read) over the binary, the record and the files
kept beside it for the driver: an entry written by anyone else is rebuilt, and the cell says so.
Entries are written to a temporary name and renamed, so a crash or a second run never sees half a
file.

A build nvcc ran is a Compiled, failed or not, with its log; a build refused (a source outside
the kernel tree, a file it may not read, a cache that cannot be written) raises KernelFailed,
and compile_all gives that kernel Unavailable with why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import processes, sandbox, waiting
from harness.compile import entries
from harness.compile.identity import IdentityError, code_identity
from harness.compile.toolchain import Toolchain
from harness.model.cell import Resources
from harness.model.discovery import Kernel
from harness.model.errors import KernelFailed, Unavailable
from harness.model.matrix import Target
from harness.model.text import bounded

FLAGS = ("-fatbin", "-O3", "-std=c++17", "-lineinfo", "-Xptxas", "-v")
TIMEOUT_S = 600  # an nvcc that runs longer is taken for hung
# Of nvcc's output kept (in the cell, the cache, the history): a `#pragma message` in a loop
# once made 105 MB of it
LOG_CHARS = 64_000
MAC_KEY_BYTES = 32
FAILED_CHECK = "cache entry failed its check: rebuilt"
# GNU as directives that read a file into the object (`.incbin "f"`, `.include "f"`), as a C
# string spells them: with -fatbin no host code is assembled and ptxas knows neither, so this
# refusal names the file for its author; Landlock, where it works, is what stops the read.
_READS_A_FILE = re.compile(r'\.incbin\b|\.include\s*\\*"', re.IGNORECASE)
_HEADER_OPENED = re.compile(r"^\.+ (.+)$", re.MULTILINE)  # the host preprocessor's -H lines
# What nvcc and its host compiler run from: programs, shared libraries, the loader's cache, and
# the random bytes cicc asks for. Nothing here is a header a kernel may include: that is checked
# against the header folders alone.
_PROGRAM_ROOTS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc/ld.so.cache",
    "/dev/urandom",
)


class OutsideTree(KernelFailed):
    """A build reaches a file outside the kernel tree, the toolkit's headers and the host
    compiler's: refused, quoting none of it."""


class ReadsAFile(KernelFailed):
    """A file of the kernel tree holds an assembler directive that reads a file: refused."""


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
    """One nvcc run of a build, and the file it writes; a compile step also names its source
    (as the cell shows it) and where its preprocessor writes the files it read."""

    command: tuple[str, ...]
    output: Path
    source: Path | None = None  # None: the device link, which reads the steps' outputs
    dependencies: Path | None = None

    def argv(self) -> tuple[str, ...]:
        """The command nvcc runs: the one shown, with the preprocessor's -MD added (and its
        rule's target named: a source's name could hold a colon)."""
        if self.dependencies is None:
            return self.command
        return (*self.command, "-Xcompiler", f"-MD,-MF,{self.dependencies},-MT,build")


def _unit_file(binary: Path, index: int) -> Path:
    """Where a relocatable build keeps its unit `index`, for the driver to link PTX from."""
    return binary.with_name(f"{binary.stem}.unit{index}.fatbin")


def kernel_tree(kernel: Kernel) -> Path:
    """The root of the tree `kernel` is found in (`<root>/<chapter>/<kernel>/`)."""
    return kernel.folder.parent.parent.resolve()


def _toolkit_root(toolchain: Toolchain) -> Path:
    """The toolkit nvcc runs from (bin, nvvm, lib, include), as the toolchain finds it."""
    return toolchain.root


def _toolkit_headers(toolchain: Toolchain) -> tuple[Path, ...]:
    """The toolkit's header folders, as nvcc passes them to the host compiler."""
    return toolchain.include_dirs


def mac_key_file(cache_dir: Path) -> Path:
    """The key of the MACs of the cache's entries: only the harness may read it."""
    return Path(cache_dir) / ".mac-key"


def cache_mac_key(cache_dir: Path) -> bytes:
    """The cache's MAC key, made on first use: random bytes, readable by their owner only. It
    appears whole or not at all (written aside, then linked under its name), and the link fails
    where another run got there first: two runs at once agree on the first one's."""
    path = mac_key_file(cache_dir)
    if not path.exists():
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=cache_dir, prefix=".mac-key.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as written:  # mkstemp made it 0600
                written.write(secrets.token_bytes(MAC_KEY_BYTES))
            with contextlib.suppress(FileExistsError):
                os.link(partial, path)
        finally:
            os.unlink(partial)
    key = path.read_bytes()
    if len(key) != MAC_KEY_BYTES:
        raise KernelFailed(
            f"{path}: the compile cache's key is {len(key)} bytes, not {MAC_KEY_BYTES}: remove "
            "it, and every entry is rebuilt"
        )
    return key


def entry_mac(key: bytes, binary: Path, record: Mapping[str, object]) -> str:
    """The MAC of a cache entry: over where it lies (its kernel's folder and its key), its
    record's fields, its binary, and each file kept beside it for the driver."""
    fields = {name: value for name, value in record.items() if name != "mac"}
    mac = hmac.new(key, digestmod=hashlib.sha256)
    kept = fields.get("jit_link")
    parts = [
        f"{binary.parent.name}/{binary.name}".encode(),
        json.dumps(fields, sort_keys=True).encode(),
        binary.read_bytes(),
    ]
    for name in kept if isinstance(kept, list) else ():
        parts += [str(name).encode(), (binary.parent / str(name)).read_bytes()]
    for part in parts:  # each with its length: no two splits of the bytes read alike
        mac.update(len(part).to_bytes(8, "little") + part)
    return mac.hexdigest()


def dependencies_of(rule: str) -> list[str]:
    """The files a make rule (-MD's) lists after its target, as it names them."""
    listed = rule.replace("\\\n", " ").partition(":")[2]
    names = re.findall(r"(?:\\.|[^\s\\])+", listed)
    return [re.sub(r"\\(.)", r"\1", name).replace("$$", "$") for name in names]


def _prefixes(*folders: Path) -> tuple[str, ...]:
    """What the paths inside `folders` begin with, for str.startswith."""
    return tuple(str(folder).rstrip("/") + "/" for folder in folders)


def host_header_folders(compiler: str, timeout_s: float = 60) -> tuple[Path, ...]:
    """The folders the host compiler searches for system headers (`-E -x c++ -v`)."""
    try:
        found = subprocess.run(
            [compiler, "-E", "-x", "c++", os.devnull, "-v", "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise KernelFailed(f"cannot ask {compiler} for its header folders: {error}") from error
    folders, listing = [], False
    for line in found.stderr.splitlines():
        if line.startswith("#include ") and line.endswith("search starts here:"):
            listing = True
        elif line.startswith("End of search list."):
            listing = False
        elif listing and line.startswith(" "):
            folders.append(Path(line.strip()).resolve())
    if not folders:
        raise KernelFailed(f"{compiler} -E -v listed no header folders: {found.stderr[-300:]}")
    return tuple(folders)


def host_compiler(env: Mapping[str, str]) -> str:
    """The host compiler nvcc runs: $NVCC_CCBIN (a program, or the folder of gcc), else gcc."""
    named = env.get("NVCC_CCBIN")
    if not named:
        return "gcc"
    return str(Path(named) / "gcc") if Path(named).is_dir() else named


def assembler_reads(text: str) -> str | None:
    """An assembler directive in `text` that reads a file (`.incbin`), even split across a
    line's continuation or adjacent string literals; None where there is none."""
    joined = re.sub(r'\\\n|"\s*"', "", text)
    found = _READS_A_FILE.search(joined)
    return found.group(0).rstrip('\\"').strip() if found else None


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
    include = _toolkit_root(toolchain) / "include"
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
    """The name of the entry of what nvcc is given: the headers the build reads are in its
    record, each with its hash, and checked before it is served."""
    digest = hashlib.sha256()
    for part in (fingerprint, target.gencode, *kernel_flags(kernel)):
        digest.update(part.encode() + b"\0")
    for name in kernel.declared.entries:  # each a probe in the unit built: other code
        digest.update(b"entry\0" + name.encode() + b"\0")
    for index, unit in enumerate(kernel.units):
        if index:
            digest.update(b"unit\0")
        digest.update(unit.name.encode() + b"\0" + unit.read_bytes() + b"\0")
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


def _record_of(binary: Path) -> dict[str, object]:
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


def _outside(source: Path, reached: Path, tree: Path) -> OutsideTree:
    return OutsideTree(
        f"{source}: the kernel's source reaches {reached}, outside the kernel tree {tree}, the "
        "toolkit's headers and the host compiler's: refused"
    )


@dataclass(frozen=True)
class _Run:
    """What a build's nvcc runs did: whether one failed, all they said, and each file their
    preprocessors read, with the source whose compile read it."""

    failed: bool
    log: str
    reads: tuple[tuple[Path, str], ...]  # each file's real path


Build = Compiled | Unavailable  # Unavailable: nothing was compiled (no nvcc, refused), and why


@dataclass(frozen=True)
class _Entry:
    """A build's place in the cache, its kernel tree, and what the entry there serves: a
    Compiled, None (none, or one no longer standing), or why it was not as written."""

    binary: Path
    tree: Path
    served: Compiled | str | None


def _settled(build: Build) -> Future[Build]:
    done: Future[Build] = Future()
    done.set_result(build)
    return done


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
        # nvcc runs confined where Landlock works; the dependency check holds either way
        self.confined = sandbox.unavailable() is None
        self._running: set[subprocess.Popen[str]] = set()  # nvcc processes, for an interrupt to end
        self._lock = threading.Lock()
        self._stopping = False  # set by an interrupt: an nvcc starting after it is killed
        # each file's SHA-256, by the stat it had: a header many builds read is hashed once
        self._digests: dict[str, tuple[tuple[int, ...], str]] = {}
        self._real_folders: dict[str, str] = {}  # the headers' folders, their links resolved
        self._sweep_scratch()

    @functools.cached_property
    def mac_key(self) -> bytes:
        return cache_mac_key(self.cache_dir)

    @functools.cached_property
    def header_folders(self) -> tuple[Path, ...]:
        """Where a build may read headers beyond its kernel tree: the toolkit's header folders
        (the wheels' CCCL and crt among them, as nvcc reports them) and the host compiler's."""
        toolkit = tuple(folder.resolve() for folder in _toolkit_headers(self.toolchain))
        return (*toolkit, *host_header_folders(host_compiler(os.environ)))

    @functools.cached_property
    def _header_prefixes(self) -> tuple[str, ...]:
        return _prefixes(*self.header_folders)

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
        it is refused."""
        return self._finished(kernel, target, self._looked_up(kernel, target))

    def _looked_up(self, kernel: Kernel, target: Target) -> _Entry:
        """The cache's entry for `kernel` on `target`, and what it serves."""
        with self._cache_errors():
            tree = kernel_tree(kernel)
            for unit in kernel.units:
                if not unit.resolve().is_relative_to(tree):  # `../` in its name, or a link out
                    raise _outside(unit, unit.resolve(), tree)
            key = cache_key(kernel, target, self.fingerprint)
            binary = self.cache_dir / kernel.classname / f"{target.name}-{key}.fatbin"
            return _Entry(binary, tree, self._served(binary, tree))

    def _finished(self, kernel: Kernel, target: Target, entry: _Entry) -> Compiled:
        """What `entry` serves, else nvcc's build into it; its SASS checked for the opcodes the
        spec demands."""
        served = entry.served
        with self._cache_errors():
            if isinstance(served, Compiled):
                compiled = served
            else:
                compiled = self._build(kernel, target, entry.binary, entry.tree)
                if served is not None:
                    compiled = dataclasses.replace(compiled, log=f"{served}\n{compiled.log}")
        demanded = kernel.declared.sass_must_contain
        if compiled.binary is None or not demanded:
            return dataclasses.replace(compiled, sass=None)
        counted = compiled.sass
        if counted is None or counted.error is not None or not set(demanded) <= set(counted.counts):
            # not counted when it was built (its spec demands another opcode now)
            counted = check_sass(self.toolchain.cuobjdump, compiled.binary, demanded)
        sass = SassCheck({op: counted.counts[op] for op in demanded}, counted.error)
        return dataclasses.replace(compiled, sass=sass)

    @contextlib.contextmanager
    def _cache_errors(self) -> Iterator[None]:
        """An OSError of the cache (read-only, a folder where a binary should be) as the
        kernel's KernelFailed, naming where."""
        try:
            yield
        except OSError as error:
            where = error.filename or self.cache_dir
            raise KernelFailed(f"the compile cache {where}: {error.strerror or error}") from error

    def _finished_or_why(self, kernel: Kernel, target: Target, entry: _Entry) -> Build:
        try:
            return self._finished(kernel, target, entry)
        except KernelFailed as refused:
            return Unavailable(str(refused))

    def _served(self, binary: Path, tree: Path) -> Compiled | str | None:
        """The cache's entry at `binary` where it may be served; else None (there is none, it
        is older than MACs, or a file its build read has changed since), or FAILED_CHECK (it
        is not as the harness wrote it)."""
        started = time.monotonic()  # a served build's time is the check that served it
        key = self.mac_key
        try:
            record = json.loads(binary.with_suffix(".json").read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return FAILED_CHECK
        if not isinstance(record, dict) or "mac" not in record:
            return None
        try:
            if not hmac.compare_digest(str(record["mac"]), entry_mac(key, binary, record)):
                return FAILED_CHECK
            resources = {name: Resources(**used) for name, used in record["resources"].items()}
            inputs = {place: dict(files) for place, files in record["inputs"].items()}
            counted = {str(op): int(count) for op, count in record.get("sass_counts", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return FAILED_CHECK
        if not self._unchanged(inputs, tree):
            return None
        log, identity = record["log"], record.get("code_identity")
        if identity is None:  # cuobjdump could not read it when it was built
            identity, log = self._identity(binary, log)
        return Compiled(
            binary=binary,
            command=tuple(record["command"]),
            log=log,
            seconds=time.monotonic() - started,
            cached=True,
            resources=resources,
            sass=SassCheck(counted),
            sha256=record["sha256"],
            code_identity=identity,
            symbols=dict(record.get("symbols", {})),
        )

    def _places(self, tree: Path) -> dict[str, str]:
        """Where the files a build reads lie, by the name its record gives the place: the kernel
        tree and the toolkit (each file relative to it: a clone of the tree, or the same wheels
        in a container, are checked by their own files), and the rest of the machine."""
        return {
            "tree": _prefixes(tree)[0],
            "toolkit": _prefixes(_toolkit_root(self.toolchain).resolve())[0],
            "system": "",
        }

    def _inputs(
        self, reads: tuple[tuple[Path, str], ...], own: set[str], tree: Path
    ) -> dict[str, dict[str, str]]:
        """Each file a build read but its own, with its SHA-256, by its place (_places)."""
        places = self._places(tree)
        inputs: dict[str, dict[str, str]] = {place: {} for place in places}
        for _, path in reads:
            if path not in own:
                place = next(name for name, root in places.items() if path.startswith(root))
                inputs[place][path.removeprefix(places[place])] = self._digest(path) or ""
        return inputs

    def _unchanged(self, inputs: Mapping[str, Mapping[str, str]], tree: Path) -> bool:
        """Whether each file a build read still hashes as it did, where it is now."""
        places = self._places(tree)
        return all(
            self._digest(places[place] + name) == digest
            for place, files in inputs.items()
            for name, digest in files.items()
        )

    def _digest(self, path: str) -> str | None:
        """The SHA-256 of `path`'s bytes (None: unreadable), hashed again when its stat changes."""
        try:
            stat = os.stat(path)
            signature = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            known = self._digests.get(path)
            if known is not None and known[0] == signature:
                return known[1]
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return None
        self._digests[path] = (signature, digest)
        return digest

    def _real(self, folder: Path, name: str) -> str:
        """The real path of `name`, as a preprocessor run in `folder` wrote it: its folder's
        links resolved once in a run (builds share their headers' few folders), its own where
        it is one."""
        parent, base = os.path.split(os.path.join(folder, name))
        real = self._real_folders.get(parent)
        if real is None:
            real = self._real_folders[parent] = os.path.realpath(parent)
        path = os.path.join(real, base)
        return os.path.realpath(path) if os.path.islink(path) else path

    def _build(self, kernel: Kernel, target: Target, binary: Path, tree: Path) -> Compiled:
        """nvcc's build of `kernel` into the cache entry `binary`; nvcc's temporary files in a
        folder of the build's own (what a confined nvcc may write), gone with it."""
        folder = binary.parent
        folder.mkdir(parents=True, exist_ok=True)
        handle, scratch_name = tempfile.mkstemp(dir=folder, suffix=".fatbin.tmp")
        os.close(handle)
        scratch = Path(scratch_name)
        try:
            with tempfile.TemporaryDirectory(prefix="nvcc-") as private:
                if "," in private:  # -Xcompiler splits its argument at commas
                    raise KernelFailed(f"the temporary folder {private} has a comma: set TMPDIR")
                return self._build_in(kernel, target, binary, tree, scratch, Path(private))
        finally:  # a build's scratch files, kept or not, all begin with its scratch's stem
            for leftover in folder.glob(glob.escape(scratch.stem) + "*"):
                leftover.unlink(missing_ok=True)

    def _build_in(
        self, kernel: Kernel, target: Target, binary: Path, tree: Path, scratch: Path, private: Path
    ) -> Compiled:
        """_build's work: nvcc's steps, the refusal of what they may not read, then the entry."""
        names = list(kernel.declared.entries)
        unit = scratch.with_name(scratch.name + ".cu") if names else None
        if unit is not None:
            unit.write_text(entries.probe_source(kernel.source, names))
        started = time.monotonic()
        steps = []
        run = _Run(True, "", ())
        try:
            steps = self._steps(kernel, target, scratch, unit, private)
            confinement = self._confinement(kernel, binary.parent, private, tree)
            run = self._run_steps(steps, kernel.folder, private, confinement)
        except OSError as error:
            run = _Run(True, f"cannot run {self.toolchain.nvcc}: {error.strerror}", ())
        except _NoLibrary as error:
            run = _Run(True, f"error: {error}", ())
        seconds = time.monotonic() - started
        own = {os.path.realpath(unit)} if unit is not None else set()
        sources = {unit: kernel.source} if unit is not None else {}
        self._refuse_reads(run.reads, tree, own, sources)  # before anything of them is shown
        failed, log = run.failed, run.log
        if unit is not None:
            log = entries.said_of_probes(log, unit, names, kernel.source)
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
        if failed:
            return Compiled(None, shown, log, seconds, False, resources)
        kept = [step.output for step in steps[:-1]]  # the units of a relocatable build
        jit_link = self._keep_for_jit(kernel, target, kept, scratch, binary)
        sha256 = hashlib.sha256(scratch.read_bytes()).hexdigest()
        identity, log = self._identity(scratch, log)
        inputs = self._inputs(run.reads, own, tree)
        demanded = kernel.declared.sass_must_contain
        sass = check_sass(self.toolchain.cuobjdump, scratch, demanded) if demanded else None
        record: dict[str, object] = {
            "command": shown,
            "sha256": sha256,
            "code_identity": identity,
            "log": log,
            "resources": {name: asdict(r) for name, r in resources.items()},
            "symbols": symbols,
            "jit_link": jit_link,
            "inputs": inputs,
            # a function of the binary, which the MAC covers: a warm run reads the counts here
            # (a disassembly of a GEMM's SASS takes ~0.4 s, the longest step of a served build)
            "sass_counts": sass.counts if sass is not None and sass.error is None else {},
        }
        os.replace(scratch, binary)
        record["mac"] = entry_mac(self.mac_key, binary, record)
        record_scratch = scratch.with_suffix(".json.tmp")
        record_scratch.write_text(json.dumps(record))
        os.replace(record_scratch, binary.with_suffix(".json"))
        return Compiled(
            binary,
            shown,
            log,
            seconds,
            False,
            resources,
            sass=sass,
            sha256=sha256,
            code_identity=identity,
            symbols=symbols,
        )

    def _refuse_reads(
        self,
        reads: tuple[tuple[Path, str], ...],
        tree: Path,
        own: set[str],
        sources: Mapping[Path, Path],
    ) -> None:
        """Refuses a build that read a file outside the kernel tree and the header folders
        (OutsideTree), or a file of the tree holding an assembler directive that reads a file
        (ReadsAFile); `own`: the build's own files, `sources`: the source a cell names for each
        unit the build made."""
        checked: set[str] = set()
        inside = _prefixes(tree)
        for source, path in reads:
            if path in own or path in checked:
                continue
            checked.add(path)
            if not path.startswith(inside):
                if not path.startswith(self._header_prefixes):
                    raise _outside(sources.get(source, source), Path(path), tree)
                continue
            try:
                directive = assembler_reads(Path(path).read_text(errors="replace"))
            except OSError:  # gone since: nothing of it can be in the binary's next build
                continue
            if directive:
                raise ReadsAFile(
                    f"{path}: the assembler directive {directive} reads a file into the binary: "
                    "refused (a kernel is built from its tree and the toolkit's headers)"
                )

    def _confinement(
        self, kernel: Kernel, folder: Path, private: Path, tree: Path
    ) -> sandbox.Confinement | None:
        """What a build's nvcc may touch, where Landlock works (None elsewhere): it reads the
        kernel tree, the toolkit, the header folders and what it runs from; it writes its
        kernel's cache folder and its own temporary folder."""
        if not self.confined:
            return None
        compiler = shutil.which(host_compiler(os.environ))
        libraries = (self.toolchain.library(name) for name in kernel.declared.libraries)
        readable = [
            tree,
            _toolkit_root(self.toolchain),
            self.toolchain.nvcc.resolve().parent,  # a wrapper script is read by its shell
            *self.header_folders,
            *map(Path, _PROGRAM_ROOTS),
            *(library.parent for library in libraries if library is not None),
            *(Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p[:1] == "/"),
        ]
        if compiler:  # its own programs and libraries (cc1plus), where they are not /usr's
            readable.append(Path(compiler).resolve().parent.parent)
        return sandbox.Confinement(
            # a path that is not there would stand for its nearest folder: left out
            readable=tuple(dict.fromkeys(path for path in readable if path.exists())),
            writable=(folder, private, Path(os.devnull)),
        )

    def _steps(
        self, kernel: Kernel, target: Target, scratch: Path, unit: Path | None, private: Path
    ) -> list[_Step]:
        """The nvcc runs of a build: one, or for relocatable device code one per unit and a
        device link of them all (with the libraries the spec names) into `scratch`; each
        compile's preprocessor lists what it read in `private`."""
        if not is_relocatable(kernel):
            source = unit or kernel.source
            command = self.command(kernel, target, scratch, unit)
            return [_Step(command, scratch, source, private / "unit0.d")]
        units = [unit or kernel.source, *kernel.units[1:]]
        # nvcc knows an input by its suffix: a unit's fatbin must end in .fatbin
        outputs = [scratch.with_name(f"{scratch.name}.unit{i}.fatbin") for i in range(len(units))]
        steps = [
            _Step(
                self.command(kernel, target, output, source), output, source, private / f"unit{i}.d"
            )
            for i, (source, output) in enumerate(zip(units, outputs, strict=True))
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

    def _run_steps(
        self,
        steps: list[_Step],
        folder: Path,
        private: Path,
        confinement: sandbox.Confinement | None,
    ) -> _Run:
        """Each step's nvcc in turn until one fails, confined where it can be."""
        environment = {**os.environ, "TMPDIR": str(private)}
        said: list[str] = []
        reads: list[tuple[Path, str]] = []
        for step in steps:
            argv = step.argv()
            if confinement is not None:
                argv = tuple(sandbox.confined(confinement, argv))
            status, log = self._run_nvcc(argv, folder, environment)
            if step.source is not None:
                read = self._read_by(step, folder, environment)
                if read is None:  # it may have quoted any file: what it said is not shown
                    log = "nvcc's output is withheld: it was stopped before it said what it read"
                reads += [(step.source, path) for path in read or ()]
            said.append(log)
            if status is None:
                said.append(f"timeout: nvcc ran past {self.timeout_s:g} s and was killed")
            elif status != 0:
                said.append(f"nvcc exited with status {status}")
            if status != 0:
                return _Run(True, "\n".join(said).strip(), tuple(reads))
        return _Run(False, "\n".join(said).strip(), tuple(reads))

    def _read_by(
        self, step: _Step, folder: Path, environment: Mapping[str, str]
    ) -> list[str] | None:
        """The real paths of the files a compile step's preprocessor read: its -MD rule;
        where it stopped short of writing one (a fatal error: a header missing, or denied it),
        each header a listing pass opens (-H: unconfined, and never shown); None where that
        pass was killed too."""
        assert step.source is not None and step.dependencies is not None
        try:
            names = dependencies_of(step.dependencies.read_text())
        except FileNotFoundError:
            listing = (*step.command[:-2], "-M", "-Xcompiler", "-H", "-o", os.devnull)
            status, listed = self._run_nvcc(listing, folder, environment)
            if status is None:
                return None
            names = [str(step.source), *_HEADER_OPENED.findall(listed)]
        return [self._real(folder, name) for name in names]

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
    ) -> list[Build]:
        """Compile every pair, in parallel across cores; results in the order given, Unavailable
        with why for a build refused before nvcc ran; `done(finished, total)` after each build.

        Interrupted (Ctrl-C reaches this thread, not the compiling ones), it kills every nvcc
        still running, and any about to start, so that the interrupt ends the run instead of
        waiting on them. The interrupt may land while a compile is being submitted, its thread
        already compiling: that is inside the guard too."""
        workers = max(1, min(len(pairs), os.cpu_count() or 1))
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            futures: list[Future[Build]] = []
            # Each entry is looked up here, one after another, and what it leaves to do (nvcc,
            # cuobjdump) goes to the pool. A look-up is the interpreter's work (a stat of each
            # file the build read, and each file's hash once a run), which threads only slow
            # down: on a 16-core H200 machine, 25 served builds took 1.4 s across 16 threads, each
            # hashing the headers the others were hashing, against 0.1 s in one.
            for kernel, target in pairs:
                try:
                    entry = self._looked_up(kernel, target)
                except KernelFailed as refused:
                    futures.append(_settled(Unavailable(str(refused))))
                    continue
                futures.append(pool.submit(self._finished_or_why, kernel, target, entry))
            if done is not None:  # each build as it finishes: how many of how many
                for count, _ in enumerate(waiting.as_completed(futures), start=1):
                    done(count, len(futures))
            return [waiting.result(future) for future in futures]
        except BaseException:
            self._kill_running()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run_nvcc(
        self, command: tuple[str, ...], folder: Path, environment: Mapping[str, str]
    ) -> tuple[int | None, str]:
        """nvcc's exit status (None: killed at the timeout) and its output.

        nvcc runs in a process group of its own, and a timeout kills the group: nvcc's children
        (the host compiler's cc1plus, ptxas) would otherwise run on, orphaned, and keep growing.
        """
        process = processes.start(command, cwd=folder, env=environment, stderr="stdout")
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
