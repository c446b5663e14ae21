"""matrix.yaml as typed objects: the targets, their toolkits, timing defaults, device peaks and
what `sanitize` runs.

Loading validates as it goes, and every error names the file, the line and what was expected,
because a matrix file is edited by hand and read by CI far from whoever edited it.
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.model.files import Unreadable, read_bounded
from harness.model.spec import Math, RequireAny, RequireArch, Requirement

# sm_<major><minor>, then "a" (arch-specific: that CC exactly) or "f" (family-specific: the CCs
# of its major family from its own on, such as sm_100f on CC 10.0 and 10.3), or plain.
SASS_PATTERN = re.compile(r"^sm_([0-9]+)([0-9])([af]?)$")


class Tool(enum.Enum):
    """compute-sanitizer's tools that `sanitize.tools` may name."""

    MEMCHECK = "memcheck"  # out-of-bounds and misaligned accesses, hardware exceptions
    RACECHECK = "racecheck"  # shared memory hazards
    SYNCCHECK = "synccheck"  # barriers that not every thread reaches, bad masks
    INITCHECK = "initcheck"  # reads of global memory nothing wrote


MATRIX_MOST_BYTES = 1 << 20  # a matrix is a page of YAML


class MatrixError(Exception):
    """A matrix.yaml that cannot be used; the message starts with `file:line:`."""


@dataclass(frozen=True)
class ComputeCapability:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit the matrix compiles with: pinned PyPI wheels, or one installed at `path`
    (on the runner, or in `base_image`, the image its columns' images build on)."""

    version: str  # "13.0": what `nvcc --version` must report as its release
    wheels: tuple[str, ...]  # () for an installed toolkit
    base_image: str
    path: str | None = None  # an installed toolkit's root: "/usr/local/cuda-12.9", "$CUDA_HOME"

    @property
    def suffix(self) -> str:
        """What a column of this toolkit adds to its target's names where it is not the
        target's first toolkit: sm_90a-cuda13.5, test-sm90-cuda13.5."""
        return f"-cuda{self.version}"


@dataclass(frozen=True)
class Target:
    """One column of the matrix, a target built with one of its toolkits: what nvcc emits and
    which devices can run it. A target's first toolkit keeps the target's own names; each
    other toolkit's column adds the toolkit's suffix to each (sm_90a-cuda13.5)."""

    name: str
    sass: str  # sm_80, sm_90a, sm_100a
    ptx: bool  # embed PTX of the same virtual arch for the driver's JIT
    toolkit: Toolkit
    session: str  # nox suffix: test-<session>
    image: str
    runner_labels: tuple[str, ...]
    shards: int = 1  # GPU jobs the target's kernels are split across (test --shard i/N)

    @property
    def cc(self) -> ComputeCapability:
        match = SASS_PATTERN.match(self.sass)
        if match is None:  # load_matrix refuses such a target; one made by hand may not be
            raise MatrixError(f"target {self.name}: {self.sass!r} is not an arch like sm_90a")
        major, minor, _ = match.groups()
        return ComputeCapability(int(major), int(minor))

    @property
    def arch_specific(self) -> bool:
        return self.sass.endswith("a")

    @property
    def gencode(self) -> str:
        virtual = "compute_" + self.sass.removeprefix("sm_")
        codes = [self.sass, virtual] if self.ptx else [self.sass]
        return f"arch={virtual},code=[{','.join(codes)}]"

    def expresses(self, requirement: Requirement | None) -> bool:
        """Whether code generated for this target can use what the kernel requires."""
        if requirement is None:
            return True
        if isinstance(requirement, RequireAny):
            return any(self.expresses(option) for option in requirement.options)
        if isinstance(requirement, RequireArch):
            return requirement.arch == self.sass
        own = self.cc
        return (own.major, own.minor) >= (requirement.major, requirement.minor)

    def runs_on(self, device_cc: ComputeCapability) -> str | None:
        """How a device runs this target's binary: "sass", "ptx-jit", or None if it cannot.

        SASS runs within its major family (an `a` binary on its exact CC only); PTX runs on any
        device at least as new as its virtual arch.
        """
        own = self.cc
        if self.arch_specific:
            return "sass" if device_cc == own else None
        if device_cc.major == own.major and device_cc.minor >= own.minor:
            return "sass"
        if self.ptx and (device_cc.major, device_cc.minor) >= (own.major, own.minor):
            return "ptx-jit"
        return None


@dataclass(frozen=True)
class TimerSettings:
    warmup_runs: int
    min_samples: int
    max_samples: int
    noise_target_pct: float
    budget_s: float
    case_timeout_s: float
    # kernels whose cases are in flight on one GPU at once (harness.run.lanes): their timings
    # never overlap; one's host checks overlap another's timing
    lanes: int = 2
    # sampling also stops once the median's interval (harness.model.median) lies within this
    # much of it, from median_min_samples samples on
    median_within_pct: float = 0.2
    median_min_samples: int = 100


@dataclass(frozen=True)
class ABSettings:
    """How `ab` times a case's base and head against each other (matrix.yaml's `ab:`)."""

    rounds: int  # at most this many rounds, each base, head, head, base
    samples: int  # cold samples of each side in each of a round's four places
    budget_s: float  # a case stops adding rounds past this (with at least MIN_ROUNDS)


AB_DEFAULTS = ABSettings(rounds=30, samples=5, budget_s=10.0)


@dataclass(frozen=True)
class CarrySettings:
    """Which verdicts a run may carry from the history (matrix.yaml's `carry:`)."""

    max_age_days: float  # a verdict kept longer ago than this is reached anew


CARRY_DEFAULTS = CarrySettings(max_age_days=7.0)


@dataclass(frozen=True)
class HostCacheSettings:
    """How much host work a run keeps for the next (matrix.yaml's `host_cache:`,
    harness.run.host_cache): at most `max_gib` in all (0: none), each case's only where making
    it took `min_s_per_gib` seconds or more for each GiB it holds."""

    max_gib: float
    min_s_per_gib: float


HOST_CACHE_DEFAULTS = HostCacheSettings(max_gib=16.0, min_s_per_gib=2.0)


@dataclass(frozen=True)
class DevicePeaks:
    memory_gb_per_s: float
    fp32_tflops: float
    bf16_tensor_tflops: float  # dense

    def tflops(self, math: Math) -> float:
        return self.bf16_tensor_tflops if math is Math.BF16_TENSOR else self.fp32_tflops


@dataclass(frozen=True)
class SanitizeDefaults:
    tools: tuple[Tool, ...]
    timeout_s: float  # one (kernel, tool) run under compute-sanitizer


@dataclass(frozen=True)
class ContainerLimits:
    """What a run in a target's container may take of the host."""

    pids: int  # processes and threads: a fork bomb in a kernel's spec stops here
    memory: str  # docker's --memory: "32g"


CONTAINER = ContainerLimits(pids=4096, memory="32g")


@dataclass(frozen=True)
class Matrix:
    path: Path
    targets: dict[str, Target]
    timer: TimerSettings  # matrix.yaml's `timing:`
    devices: dict[str, DevicePeaks]
    sanitize: SanitizeDefaults
    container: ContainerLimits = CONTAINER
    ab: ABSettings = AB_DEFAULTS
    carry: CarrySettings = CARRY_DEFAULTS
    host_cache: HostCacheSettings = HOST_CACHE_DEFAULTS

    def github_jobs(self) -> list[dict[str, Any]]:
        """The GitHub Actions job matrix: one GPU job per target, one per shard of a target
        split in shards, each with the report and artifact it alone uploads."""
        jobs = []
        for t in self.targets.values():
            for index in range(1, t.shards + 1):
                part = f"-shard{index}of{t.shards}" if t.shards > 1 else ""
                jobs.append(
                    {
                        "target": t.name,
                        "session": t.session,
                        "image": t.image,
                        "toolkit": t.toolkit.version,
                        "runner": list(t.runner_labels),
                        "shard": f"{index}/{t.shards}" if t.shards > 1 else "",
                        "report": f"junit-{t.name}{part}",
                        "artifact": f"reports-{t.name}{part}",
                    }
                )
        return jobs

    def github_images(self) -> list[dict[str, Any]]:
        """One entry per target: the image its GPU jobs test in."""
        return [
            {"target": t.name, "session": t.session, "image": t.image}
            for t in self.targets.values()
        ]

    def target(self, name: str) -> Target:
        if name in self.targets:
            return self.targets[name]
        by_session = {t.session: t for t in self.targets.values()}
        if name in by_session:
            return by_session[name]
        known = ", ".join(self.targets)
        raise MatrixError(f"{self.path}: no target {name!r} (targets: {known})")


class _Reader:
    """Walks the YAML node tree so each complaint can point at its line."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, node: yaml.Node, message: str) -> MatrixError:
        return MatrixError(f"{self.path}:{node.start_mark.line + 1}: {message}")

    def mapping(
        self,
        node: yaml.Node,
        place: str,
        required: set[str],
        optional: frozenset[str] = frozenset(),
    ) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{place}: expected a mapping")
        items = self._unique(node, place)
        for key, _ in node.value:
            if key.value not in required | optional:
                expected = ", ".join(sorted(required | optional))
                raise self.fail(
                    key, f"{place}: unknown key {_quoted(key.value)} (expected: {expected})"
                )
        missing = sorted(required - items.keys())
        if missing:
            raise self.fail(node, f"{place}: missing {', '.join(missing)}")
        return items

    def entries(self, node: yaml.Node, place: str) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode) or not node.value:
            raise self.fail(node, f"{place}: expected a non-empty mapping")
        return self._unique(node, place)

    def _unique(self, node: yaml.MappingNode, place: str) -> dict[str, yaml.Node]:
        """The mapping's items by key; a key given twice is an error naming both lines, since
        YAML would silently keep the last."""
        items: dict[str, yaml.Node] = {}
        lines: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise self.fail(key, f"{place}: a key must be a plain name")
            name = key.value
            if name in items:
                raise self.fail(
                    key,
                    f"{place}: key {_quoted(name)} is given twice (first at line {lines[name]});"
                    " the second would silently replace the first",
                )
            items[name], lines[name] = value, key.start_mark.line + 1
        return items

    def scalar(self, node: yaml.Node, place: str, kind: type, most: float | None = None) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, f"{place}: expected a {kind.__name__}")
        value = yaml.safe_load(yaml.serialize(node))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is float and isinstance(value, str) and node.style is None:
            # YAML 1.1 reads 1e9 (no dot) as a string; every other reader takes it as a number
            with contextlib.suppress(ValueError):
                value = float(value)
        if kind is str and node.style is None and not isinstance(value, str):
            raise self.fail(
                node, f"{place}: expected a string, got {_quoted(node.value)} (quote it)"
            )
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise self.fail(node, f"{place}: expected a {kind.__name__}, got {_quoted(node.value)}")
        positive = not isinstance(value, int | float) or isinstance(value, bool) or value > 0
        if not positive or (isinstance(value, float) and not math.isfinite(value)):
            raise self.fail(
                node, f"{place}: expected a finite positive number, got {_quoted(node.value)}"
            )
        if most is not None and isinstance(value, int | float) and value > most:
            raise self.fail(node, f"{place}: expected at most {most:g}, got {_quoted(node.value)}")
        return value

    def strings(self, node: yaml.Node, place: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.fail(node, f"{place}: expected a non-empty list of strings")
        return tuple(self.scalar(item, place, str) for item in node.value)


QUOTED_CHARS = 80  # of a value an error message repeats
# The longest time a limit may name: a week. The waits it reaches take at most ~24 days
# (poll's milliseconds in an int); a larger number means "no limit", which a CI run must not have.
MOST_LANES = 8  # more lanes than this buy no overlap: one timing at a time
MOST_S = 7 * 24 * 3600.0


MOST_SHARDS = 256  # GitHub Actions runs at most 256 jobs of one matrix


def _shards(reader: _Reader, node: yaml.Node | None, place: str) -> int:
    if node is None:
        return 1
    return int(reader.scalar(node, f"{place}.shards", int, most=MOST_SHARDS))


def _quoted(value: object) -> str:
    """A value as an error message shows it: repr, cut to QUOTED_CHARS."""
    text = repr(value)
    return text if len(text) <= QUOTED_CHARS else text[: QUOTED_CHARS - 3] + "..."


def _refuse_aliases(path: Path, text: str) -> None:
    """matrix.yaml has no use for anchors and aliases, and an alias bomb (a few hundred bytes
    that expand to gigabytes) must not get as far as a node tree."""
    for event in yaml.parse(text):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark else "?"
            raise MatrixError(
                f"{path}:{line}: YAML aliases (*{_quoted(event.anchor)[1:-1]}) are not allowed in "
                "a matrix file: write each value out"
            )


def load_matrix(path: Path) -> Matrix:
    path = Path(path)
    try:
        text = read_bounded(path, MATRIX_MOST_BYTES).decode()
        _refuse_aliases(path, text)
        root = yaml.compose(text)
    except Unreadable as error:
        raise MatrixError(str(error)) from error
    except UnicodeDecodeError as error:
        raise MatrixError(
            f"{path}: not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset "
            f"{error.start})"
        ) from error
    except yaml.YAMLError as error:
        # Where the broken construct starts (an unclosed bracket) beats where parsing gave up.
        mark = getattr(error, "context_mark", None) or getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise MatrixError(f"{path}{line}: not valid YAML: {error}") from error
    if root is None:
        raise MatrixError(f"{path}: empty file")
    reader = _Reader(path)
    top = reader.mapping(
        root,
        "matrix",
        {"toolkits", "targets", "timing", "devices", "sanitize"},
        frozenset({"container", "ab", "carry", "host_cache"}),
    )

    toolkits = {
        version: _toolkit(reader, version, node)
        for version, node in reader.entries(top["toolkits"], "toolkits").items()
    }

    targets: dict[str, Target] = {}
    target_keys = {"sass", "ptx", "session", "image", "runner_labels"}
    for name, node in reader.entries(top["targets"], "targets").items():
        place = f"targets.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name) or ".." in name:
            # It names report and cache files: nothing that could climb out of their folders.
            raise reader.fail(node, f"targets: {_quoted(name)} is not a name like sm_90a")
        optional = frozenset({"shards", "toolkit", "toolkits"})
        fields = reader.mapping(node, place, target_keys, optional)
        sass = reader.scalar(fields["sass"], f"{place}.sass", str)
        if not SASS_PATTERN.match(sass):
            raise reader.fail(
                fields["sass"],
                f"{place}.sass: {sass!r} is not an arch like sm_80, sm_90a or sm_100f",
            )
        session = reader.scalar(fields["session"], f"{place}.session", str)
        if not re.fullmatch(r"[a-z0-9]+", session):
            raise reader.fail(fields["session"], f"{place}.session: use [a-z0-9]+, got {session!r}")
        ptx = reader.scalar(fields["ptx"], f"{place}.ptx", bool)
        image = reader.scalar(fields["image"], f"{place}.image", str)
        labels = reader.strings(fields["runner_labels"], f"{place}.runner_labels")
        shards = _shards(reader, fields.get("shards"), place)
        listed = _toolkits_of(reader, place, node, fields, toolkits)
        for index, (toolkit, item) in enumerate(listed):
            if why := arch_problem(sass, toolkit.version):
                raise reader.fail(item, f"{place}: toolkit {toolkit.version}: {why}")
            suffix = toolkit.suffix if index else ""  # the first keeps the target's names
            if name + suffix in targets:
                raise reader.fail(item, f"{place}: a second column named {name + suffix}")
            targets[name + suffix] = Target(
                name=name + suffix,
                sass=sass,
                ptx=ptx,
                toolkit=toolkit,
                session=session + suffix,
                image=image + suffix,
                runner_labels=labels,
                shards=shards,
            )
    sessions = [t.session for t in targets.values()]
    if len(set(sessions)) != len(sessions):
        raise reader.fail(top["targets"], "targets: two targets share one session name")

    timing_fields = reader.mapping(
        top["timing"],
        "timing",
        {
            "warmup_runs",
            "min_samples",
            "max_samples",
            "noise_target_pct",
            "budget_s",
            "case_timeout_s",
        },
        frozenset({"lanes", "median_within_pct", "median_min_samples"}),
    )
    timing = TimerSettings(
        warmup_runs=reader.scalar(timing_fields["warmup_runs"], "timing.warmup_runs", int),
        min_samples=reader.scalar(timing_fields["min_samples"], "timing.min_samples", int),
        max_samples=reader.scalar(timing_fields["max_samples"], "timing.max_samples", int),
        noise_target_pct=reader.scalar(
            timing_fields["noise_target_pct"], "timing.noise_target_pct", float
        ),
        budget_s=reader.scalar(timing_fields["budget_s"], "timing.budget_s", float, MOST_S),
        case_timeout_s=reader.scalar(
            timing_fields["case_timeout_s"], "timing.case_timeout_s", float, MOST_S
        ),
        lanes=reader.scalar(timing_fields["lanes"], "timing.lanes", int, MOST_LANES)
        if "lanes" in timing_fields
        else TimerSettings.lanes,
        median_within_pct=reader.scalar(
            timing_fields["median_within_pct"], "timing.median_within_pct", float, 100.0
        )
        if "median_within_pct" in timing_fields
        else TimerSettings.median_within_pct,
        median_min_samples=reader.scalar(
            timing_fields["median_min_samples"], "timing.median_min_samples", int
        )
        if "median_min_samples" in timing_fields
        else TimerSettings.median_min_samples,
    )
    if timing.max_samples < timing.min_samples:
        raise reader.fail(top["timing"], "timing: max_samples is below min_samples")
    # A matrix that leaves the median rule out keeps its max_samples, whatever the default
    if "median_min_samples" in timing_fields and timing.median_min_samples > timing.max_samples:
        raise reader.fail(
            timing_fields["median_min_samples"],
            "timing: median_min_samples is above max_samples: the median rule would never stop "
            "sampling",
        )

    devices = {}
    for name, node in reader.entries(top["devices"], "devices").items():
        keys = {"memory_gb_per_s", "fp32_tflops", "bf16_tensor_tflops"}
        fields = reader.mapping(node, f"devices.{name}", keys)
        peaks = {key: reader.scalar(fields[key], f"devices.{name}.{key}", float) for key in keys}
        devices[name] = DevicePeaks(**peaks)
    return Matrix(
        path=path,
        targets=targets,
        timer=timing,
        devices=devices,
        sanitize=_sanitize(reader, top["sanitize"]),
        container=_container(reader, top["container"]) if "container" in top else CONTAINER,
        ab=_ab(reader, top["ab"]) if "ab" in top else AB_DEFAULTS,
        carry=_carry(reader, top["carry"]) if "carry" in top else CARRY_DEFAULTS,
        host_cache=_host_cache(reader, top["host_cache"])
        if "host_cache" in top
        else HOST_CACHE_DEFAULTS,
    )


def _toolkit(reader: _Reader, version: str, node: yaml.Node) -> Toolkit:
    """toolkits.<version>: pinned wheels, or the path of an installed toolkit."""
    place = f"toolkits.{version}"
    fields = reader.mapping(node, place, {"base_image"}, frozenset({"wheels", "path"}))
    if not re.fullmatch(r"[0-9]+\.[0-9]+", version):
        raise reader.fail(node, f"toolkits: version {version!r} is not MAJOR.MINOR")
    if ("wheels" in fields) == ("path" in fields):
        raise reader.fail(
            node,
            f"{place}: give either wheels (pinned PyPI wheels) or path (an installed toolkit: "
            "/usr/local/cuda-12.9, $CUDA_HOME)",
        )
    base_image = reader.scalar(fields["base_image"], f"{place}.base_image", str)
    if "path" in fields:
        path = reader.scalar(fields["path"], f"{place}.path", str)
        if not re.fullmatch(r"/.*|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?(/.*)?", path):
            raise reader.fail(
                fields["path"],
                f"{place}.path: {_quoted(path)} is not an absolute path or $VARIABLE",
            )
        return Toolkit(version=version, wheels=(), base_image=base_image, path=path)
    wheels = reader.strings(fields["wheels"], f"{place}.wheels")
    if why := _nvcc_pin_problem(version, wheels):
        raise reader.fail(fields["wheels"], f"{place}.wheels: {why}")
    return Toolkit(version=version, wheels=wheels, base_image=base_image)


def _toolkits_of(
    reader: _Reader,
    place: str,
    node: yaml.Node,
    fields: dict[str, yaml.Node],
    toolkits: dict[str, Toolkit],
) -> list[tuple[Toolkit, yaml.Node]]:
    """A target's toolkits (`toolkits: [...]`, or one as `toolkit:`), each with its node."""
    if ("toolkit" in fields) == ("toolkits" in fields):
        raise reader.fail(node, f"{place}: give toolkits: [versions] (or one as toolkit:)")
    if "toolkit" in fields:
        items = [fields["toolkit"]]
    else:
        listed = fields["toolkits"]
        reader.strings(listed, f"{place}.toolkits")  # a non-empty list of strings
        assert isinstance(listed, yaml.SequenceNode)
        items = list(listed.value)
    found: list[tuple[Toolkit, yaml.Node]] = []
    for item in items:
        version = reader.scalar(item, f"{place}.toolkits", str)
        if version not in toolkits:
            raise reader.fail(
                item, f"{place}: toolkit {version!r} is not under toolkits ({', '.join(toolkits)})"
            )
        if any(known.version == version for known, _ in found):
            raise reader.fail(item, f"{place}: toolkit {version} is listed twice")
        found.append((toolkits[version], item))
    return found


# The first CUDA release whose nvcc emits each arch (its `a` and `f` forms alike, but that `f`
# came in 12.9), and the arches CUDA 13 no longer emits: a toolkit a target cannot have is the
# matrix's error at its line, not every kernel's failed compile.
FIRST_RELEASE = {
    "sm_75": (10, 0),
    "sm_80": (11, 0),
    "sm_86": (11, 1),
    "sm_87": (11, 4),
    "sm_89": (11, 8),
    "sm_90": (12, 0),
    "sm_100": (12, 8),
    "sm_101": (12, 8),
    "sm_120": (12, 8),
    "sm_103": (12, 9),
    "sm_121": (12, 9),
    "sm_110": (13, 0),
}
FAMILY_RELEASE = (12, 9)
OLDEST_IN_13 = 75  # CUDA 13.0 dropped Maxwell, Pascal and Volta (sm_50 to sm_72)


def arch_problem(sass: str, version: str) -> str | None:
    """Why CUDA `version`'s nvcc cannot emit `sass`; None where it can, or where the arch is
    not in FIRST_RELEASE (nvcc's own list decides at compile time)."""
    release = tuple(int(part) for part in version.split("."))
    plain = re.sub(r"[af]$", "", sass)
    number = int(plain.removeprefix("sm_"))
    first = FIRST_RELEASE.get(plain)
    if sass.endswith("f"):
        first = max(first or FAMILY_RELEASE, FAMILY_RELEASE)
    if first is not None and release < first:
        return f"{sass} needs CUDA {first[0]}.{first[1]} or newer; {version} cannot emit it"
    if release >= (13, 0) and number < OLDEST_IN_13:
        return f"CUDA 13 no longer emits {sass} (its oldest is sm_{OLDEST_IN_13})"
    if plain == "sm_101" and release >= (13, 0):
        return "CUDA 13 calls sm_101 sm_110"
    return None


def _nvcc_pin_problem(version: str, wheels: tuple[str, ...]) -> str | None:
    """Why `wheels` would not install the nvcc of CUDA `version`: no nvidia-cuda-nvcc pinned,
    or one of another release (whose nvcc the run would then refuse, after the install)."""
    pins = [w for w in wheels if re.match(r"nvidia-cuda-nvcc(-cu\d+)?\s*==", w)]
    if not pins:
        return f"no nvidia-cuda-nvcc==<version> pin: nothing installs the nvcc of CUDA {version}"
    for pin in pins:
        pinned = pin.split("==", 1)[1].strip()
        if ".".join(pinned.split(".")[:2]) != version:
            return f"{pin} is the nvcc of CUDA {pinned}, not of {version}"
    return None


def _carry(reader: _Reader, node: yaml.Node) -> CarrySettings:
    fields = reader.mapping(node, "carry", {"max_age_days"})
    days = reader.scalar(fields["max_age_days"], "carry.max_age_days", float, 3650)
    return CarrySettings(max_age_days=days)


def _host_cache(reader: _Reader, node: yaml.Node) -> HostCacheSettings:
    fields = reader.mapping(node, "host_cache", set(), frozenset({"max_gib", "min_s_per_gib"}))
    place = "host_cache.max_gib"
    max_gib = HOST_CACHE_DEFAULTS.max_gib
    if "max_gib" in fields:  # 0 keeps none
        zero = isinstance(fields["max_gib"], yaml.ScalarNode) and fields["max_gib"].value in (
            "0",
            "0.0",
        )
        max_gib = 0.0 if zero else reader.scalar(fields["max_gib"], place, float, 1 << 20)
    min_s_per_gib = HOST_CACHE_DEFAULTS.min_s_per_gib
    if "min_s_per_gib" in fields:
        place = "host_cache.min_s_per_gib"
        min_s_per_gib = reader.scalar(fields["min_s_per_gib"], place, float, 3600.0)
    return HostCacheSettings(max_gib=max_gib, min_s_per_gib=min_s_per_gib)


def _ab(reader: _Reader, node: yaml.Node) -> ABSettings:
    fields = reader.mapping(node, "ab", {"rounds", "samples", "budget_s"})
    settings = ABSettings(
        rounds=reader.scalar(fields["rounds"], "ab.rounds", int),
        samples=reader.scalar(fields["samples"], "ab.samples", int),
        budget_s=reader.scalar(fields["budget_s"], "ab.budget_s", float),
    )
    if settings.rounds < 6 or settings.samples < 1 or settings.budget_s <= 0:
        # fewer than 6 rounds give no distribution-free interval of their median
        raise reader.fail(node, "ab: rounds must be 6 or more, samples 1 or more, budget_s > 0")
    return settings


def _container(reader: _Reader, node: yaml.Node) -> ContainerLimits:
    fields = reader.mapping(node, "container", {"pids_limit", "memory"})
    memory = reader.scalar(fields["memory"], "container.memory", str)
    if not re.fullmatch(r"[0-9]+[kmg]?", memory):
        raise reader.fail(fields["memory"], f"container.memory: {_quoted(memory)} is not like 32g")
    return ContainerLimits(
        pids=reader.scalar(fields["pids_limit"], "container.pids_limit", int), memory=memory
    )


def _sanitize(reader: _Reader, node: yaml.Node) -> SanitizeDefaults:
    fields = reader.mapping(node, "sanitize", {"tools", "timeout_s"})
    names = reader.strings(fields["tools"], "sanitize.tools")
    known = {tool.value: tool for tool in Tool}
    tools = []
    for item, name in zip(fields["tools"].value, names, strict=True):
        if name not in known:
            raise reader.fail(
                item, f"sanitize.tools: unknown tool {name!r} (expected: {', '.join(known)})"
            )
        if known[name] in tools:
            raise reader.fail(item, f"sanitize.tools: {name} is listed twice")
        tools.append(known[name])
    return SanitizeDefaults(
        tools=tuple(tools),
        timeout_s=reader.scalar(fields["timeout_s"], "sanitize.timeout_s", float, MOST_S),
    )
