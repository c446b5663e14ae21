"""What a kernel's spec declares, as plain data: its source, requirement, SASS demands, case
names and sizes. It is made in a process of the spec's own (harness.model.spec_children) and
travels to the run as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.model.build_options import (
    LIBRARIES,
    define_flags,
    entry_problem,
    flag_problem,
    nvcc_flags,
    source_problem,
)
from harness.model.spec import (
    BuildOptions,
    KernelSpec,
    Math,
    RequireAny,
    RequireArch,
    Requirement,
    RequireSm,
    Work,
)


@dataclass(frozen=True)
class DeclaredCase:
    """A case by name, and its size where work() says it without a device (else None)."""

    name: str
    work: Work | None
    defines: tuple[str, ...] = ()  # the case's own macros (-DNAME=VALUE): its build's


@dataclass(frozen=True)
class Declared:
    """What the stages before the GPU need of a spec, and nothing that runs its code."""

    source: str
    requires: Requirement | None
    sass_must_contain: tuple[str, ...]
    cases: tuple[DeclaredCase, ...]
    vendor: str | None  # the vendor library's name, as the report shows it
    preload: tuple[str, ...] = ()  # what the vendor imports: its worker imports it at start
    # what the spec puts on nvcc's command line (build_options.nvcc_flags), its standard first
    build: tuple[str, ...] = field(default_factory=lambda: nvcc_flags(BuildOptions()))
    entries: tuple[str, ...] = ()  # C++ entries the build instantiates and maps
    sources: tuple[str, ...] = ()  # more units, device-linked with the source
    libraries: tuple[str, ...] = ()  # what the device link takes: cudadevrt

    @classmethod
    def of(cls, spec: KernelSpec) -> Declared:
        return cls(
            source=spec.source,
            requires=spec.requires,
            sass_must_contain=tuple(spec.sass_must_contain),
            cases=tuple(
                DeclaredCase(case.name, _work_or_none(spec, case), define_flags(case.defines))
                for case in spec.cases
            ),
            vendor=spec.vendor.library if spec.vendor else None,
            preload=tuple(spec.vendor.preload) if spec.vendor else (),
            build=nvcc_flags(spec.build),
            entries=tuple(spec.entries),
            sources=tuple(spec.build.sources),
            libraries=tuple(spec.build.libraries),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "requires": _requirement_json(self.requires),
            "sass_must_contain": list(self.sass_must_contain),
            "cases": [
                {
                    "name": case.name,
                    "work": None
                    if case.work is None
                    else [case.work.bytes, case.work.flops, case.work.math.value],
                    "defines": list(case.defines),
                }
                for case in self.cases
            ],
            "vendor": self.vendor,
            "preload": list(self.preload),
            "build": list(self.build),
            "entries": list(self.entries),
            "sources": list(self.sources),
            "libraries": list(self.libraries),
        }

    @classmethod
    def from_json(cls, record: Any) -> Declared:
        """ValueError where `record` is not what to_json makes: it comes from a spec's process."""
        try:
            requires = _requirement_from(record["requires"])
            cases = []
            for case in _list(record["cases"]):
                work = None
                if case["work"] is not None:
                    size, flops, units = case["work"]
                    work = Work(_count(size), _count(flops), Math(units))
                defines = _defines_from(case.get("defines", []))
                cases.append(DeclaredCase(_str(case["name"]), work, defines))
            vendor = record["vendor"]
            return cls(
                source=_str(record["source"]),
                requires=requires,
                sass_must_contain=tuple(_str(op) for op in _list(record["sass_must_contain"])),
                cases=tuple(cases),
                vendor=None if vendor is None else _str(vendor),
                preload=tuple(_module_name(m) for m in _list(record["preload"])),
                build=_build_from(record.get("build", ["-std=c++17"])),
                entries=_entries_from(record.get("entries", [])),
                sources=_sources_from(record.get("sources", [])),
                libraries=_libraries_from(record.get("libraries", [])),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a spec's declaration: {type(error).__name__}: {error}") from None


def _strings(record: Any, problem: Callable[[str], str | None]) -> tuple[str, ...]:
    """A list of strings from a spec's process, each one `problem` finds none in."""
    values = tuple(_str(value) for value in _list(record))
    for value in values:
        if why := problem(value):
            raise ValueError(why)
    return values


def _entries_from(record: Any) -> tuple[str, ...]:
    return _strings(record, entry_problem)


def _defines_from(record: Any) -> tuple[str, ...]:
    def problem(flag: str) -> str | None:
        refused = not flag.startswith("-D") or flag_problem(flag)
        return f"case define {flag!r} refused" if refused else None

    return _strings(record, problem)


def _sources_from(record: Any) -> tuple[str, ...]:
    return _strings(record, source_problem)


def _libraries_from(record: Any) -> tuple[str, ...]:
    return _strings(
        record,
        lambda name: None if name in LIBRARIES else f"library {name!r} is not one of {LIBRARIES}",
    )


def _build_from(record: Any) -> tuple[str, ...]:
    flags = tuple(_list(record))
    for flag in flags:
        if why := flag_problem(flag):
            raise ValueError(why)
    if not flags or not flags[0].startswith("-std="):
        raise ValueError(f"build flags {flags!r} do not start with the standard")
    return flags


def _requirement_json(requires: Requirement | None) -> dict[str, Any] | None:
    if isinstance(requires, RequireSm):
        return {"sm": [requires.major, requires.minor]}
    if isinstance(requires, RequireArch):
        return {"arch": requires.arch}
    if isinstance(requires, RequireAny):
        return {"any": [_requirement_json(option) for option in requires.options]}
    return None


def _requirement_from(record: Any) -> Requirement | None:
    if record is None:
        return None
    if "sm" in record:
        major, minor = record["sm"]
        return RequireSm(_int(major), _int(minor))
    if "any" in record:
        options = [_requirement_from(option) for option in _list(record["any"])]
        if not options or not all(isinstance(o, RequireSm | RequireArch) for o in options):
            raise ValueError(f"not a list of requirements: {record['any']!r}")
        return RequireAny(tuple(options))  # type: ignore[arg-type]
    return RequireArch(_str(record["arch"]))


def _work_or_none(spec: KernelSpec, case: Any) -> Work | None:
    """work() where it answers with finite counts, 0 or more, before any device is known."""
    try:
        work = spec.work(case)
    except Exception:  # a param only setup() derives: the case's own cell says what it raised
        return None
    if not isinstance(work, Work) or not isinstance(work.math, Math):
        return None
    counts = (work.bytes, work.flops)
    if not all(isinstance(c, int | float) and not isinstance(c, bool) for c in counts):
        return None
    if not all(math.isfinite(c) and c >= 0 for c in counts):
        return None
    return work


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a count, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a count, 0 or more, got {value!r}")
    return int(value)


def _module_name(value: Any) -> str:
    """A dotted module name: what a worker may import by it, and nothing else."""
    name = _str(value)
    if not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"{name!r} is not a module name")
    return name


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value
