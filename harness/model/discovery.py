"""Finds the kernels: one folder per kernel under kernels/<chapter>/, holding spec.py and its .cu.

Finding a kernel's folder and loading its spec are two steps: a spec that cannot be used raises
SpecError naming the spec file, and the command that loads it makes that the kernel's error
cell, so one bad file never ends the run. Only a process of the kernel's own loads its spec (a
spec's child, harness.model.declared; its GPU worker): the run's own process knows a kernel by
what its spec declared.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import importlib.util
import math
import sys
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.model.build_options import (
    defines_problem,
    entry_problem,
    problem_with,
    with_defines,
)
from harness.model.declared import Declared
from harness.model.errors import SpecError
from harness.model.outcome import CellKind
from harness.model.spec import (
    CONTEXT_LIMITS_MOST,
    Case,
    ContextLimits,
    KernelSpec,
    RequireAny,
    RequireArch,
    RequireSm,
    Tolerance,
)

# A compile or spec cell is named after its kind (compile[sm_90a], and compile(VEC=4)[sm_90a]
# for a build of case macros): a case may not be
RESERVED_CASE_NAMES = frozenset({CellKind.COMPILE.value, CellKind.SPEC.value})


@dataclass(frozen=True)
class KernelFolder:
    """A kernel's folder, `<chapter>/<kernel>/`, before its spec is loaded."""

    chapter: str
    name: str
    folder: Path

    @classmethod
    def of(cls, spec_file: Path) -> KernelFolder:
        folder = spec_file.parent
        return cls(folder.parent.name, folder.name, folder)

    @property
    def classname(self) -> str:
        return f"{self.chapter}.{self.name}"

    @property
    def spec_file(self) -> Path:
        return self.folder / "spec.py"


@dataclass(frozen=True)
class Kernel(KernelFolder):
    """A kernel whose spec loaded, as its spec declared it."""

    declared: Declared

    @property
    def source(self) -> Path:
        return self.folder / self.declared.source

    @property
    def case_names(self) -> list[str]:
        return [case.name for case in self.declared.cases]

    @property
    def units(self) -> list[Path]:
        """The .cu files its build compiles: its source, then the sources device-linked to it."""
        return [self.source, *(self.folder / name for name in self.declared.sources)]

    @property
    def builds(self) -> list[tuple[str, ...]]:
        """The distinct sets of case macros, each a build of its own, in the order of the
        cases: [()] for a kernel whose cases add none."""
        return list(dict.fromkeys(case.defines for case in self.declared.cases))

    def variant(self, defines: tuple[str, ...]) -> Kernel:
        """The kernel as built for cases with the macros `defines`."""
        if not defines:
            return self
        build = with_defines(self.declared.build, defines)
        return dataclasses.replace(self, declared=dataclasses.replace(self.declared, build=build))


def build_label(defines: tuple[str, ...]) -> str:
    """How a cell names the build of a set of case macros: "" for the kernel's own, else
    "VEC=4,TILE=8"."""
    return ",".join(flag[2:] for flag in defines)


@dataclass(frozen=True)
class LoadedKernel(Kernel):
    """A kernel with its spec imported: in a process of that kernel's own only."""

    spec: KernelSpec


def kernel_folders(root: Path, select: str = "") -> list[KernelFolder]:
    """Every `<root>/<chapter>/<kernel>/spec.py` whose classname contains `select`, sorted by
    chapter then kernel."""
    root = Path(root).resolve()  # nvcc runs in each kernel's folder: paths must be absolute
    found = [KernelFolder.of(spec) for spec in sorted(root.glob("*/*/spec.py"))]
    return [folder for folder in found if select in folder.classname]


def load_kernel(kernel: KernelFolder) -> LoadedKernel:
    """The kernel of the folder `kernel`, its spec imported into this process and checked;
    SpecError naming the spec file when it cannot be used."""
    spec_file = kernel.spec_file

    def broken(why: str) -> SpecError:
        return SpecError(f"{spec_file}: {why}")

    module_name = _package_for(kernel.folder) + ".spec"
    loader_spec = importlib.util.spec_from_file_location(module_name, spec_file)
    if loader_spec is None or loader_spec.loader is None:
        raise broken("cannot be imported as a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    try:
        sys.modules[module_name] = module
        loader_spec.loader.exec_module(module)
    except BaseException as error:  # any error in a user's spec is that kernel's error cell
        if isinstance(error, KeyboardInterrupt):
            raise
        # A SyntaxError is raised by the compiler inside importlib: its own lineno is the spec's.
        line: int | None
        if isinstance(error, SyntaxError) and error.lineno:
            line = error.lineno
        else:
            line = traceback.extract_tb(error.__traceback__)[-1].lineno
        raise broken(f"import failed at line {line}: {type(error).__name__}: {error}") from error
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, KernelSpec):
        raise broken("defines no SPEC = KernelSpec(...)")
    if not spec.source:
        spec = dataclasses.replace(spec, source=f"{kernel.name}.cu")
    if not (kernel.folder / spec.source).is_file():
        raise broken(f"source {spec.source!r} is not a file beside it")
    if len(spec.cases) == 0:
        raise broken("declares no cases")
    not_cases = [case for case in spec.cases if not isinstance(case, Case)]
    if not_cases:
        raise broken(f"cases holds {not_cases[0]!r}, not a Case(...)")
    unnamed = [case for case in spec.cases if not isinstance(case.name, str) or not case.name]
    if unnamed:
        raise broken(f"a case's name must be a non-empty string, not {unnamed[0].name!r}")
    counted = collections.Counter(case.name for case in spec.cases)
    duplicates = sorted(name for name, count in counted.items() if count > 1)
    if duplicates:
        raise broken(f"case names repeat: {', '.join(duplicates)}")
    reserved = sorted(
        name
        for name in counted
        if name in RESERVED_CASE_NAMES or name.startswith(f"{CellKind.COMPILE.value}(")
    )
    if reserved:
        raise broken(
            f"case name {reserved[0]!r} is the name of the kernel's own {reserved[0]} cell: "
            "rename the case"
        )
    if why := _requirement_problem(spec.requires) or problem_with(spec.build):
        raise broken(why)
    for name in spec.build.sources:
        if not (kernel.folder / name).is_file():
            raise broken(f"build source {name!r} is not a file beside it")
    for case in spec.cases:
        if why := defines_problem(case.defines):
            raise broken(f"case {case.name!r}: {why}")
    if not isinstance(spec.entries, tuple | list):
        raise broken(f"entries is {type(spec.entries).__name__}, not a tuple of names")
    for name in spec.entries:
        if why := entry_problem(name):
            raise broken(why)
    for case in spec.cases:
        if why := _tolerance_problem(case.tolerance):
            raise broken(f"case {case.name!r}: {why}")
    if why := _context_problem(spec.context):
        raise broken(why)
    return LoadedKernel(kernel.chapter, kernel.name, kernel.folder, Declared.of(spec), spec)


def _context_problem(context: object) -> str | None:
    """Why `context` is not limits a context can be asked for: each a whole number, 1 to its
    field's most (CONTEXT_LIMITS_MOST), or None."""
    if not isinstance(context, ContextLimits):
        return f"context is {context!r}, not a ContextLimits(...)"
    for name, most in CONTEXT_LIMITS_MOST.items():
        value = getattr(context, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            return f"context {name}={value!r}: a whole number, 1 to {most}"
    return None


def _requirement_problem(requires: object) -> str | None:
    """Why `requires` is not a requirement: a misspelt one would otherwise run everywhere."""
    if requires is None or isinstance(requires, RequireSm | RequireArch):
        return None
    if isinstance(requires, RequireAny):
        options = requires.options
        if (
            isinstance(options, tuple)
            and options
            and all(isinstance(o, RequireSm | RequireArch) for o in options)
        ):
            return None
        return (
            f"requires is {requires!r}: RequireAny takes a tuple of RequireSm and RequireArch, "
            "at least one"
        )
    return (
        f"requires is {requires!r}, not RequireSm(major, minor), RequireArch(arch) or "
        "RequireAny((...))"
    )


def _tolerance_problem(tolerance: object) -> str | None:
    """Why a case's tolerance cannot be used; None when it can (None, a Tolerance of finite
    bounds 0 or more, or a mapping of output names to such)."""
    if tolerance is None:
        return None
    named = tolerance.items() if isinstance(tolerance, Mapping) else [("", tolerance)]
    for output, each in named:
        where = f" for {output!r}" if output else ""
        if not isinstance(output, str):
            return f"tolerance names the output {output!r}, not a string"
        if not isinstance(each, Tolerance):
            return f"tolerance{where} is {each!r}, not a Tolerance(rtol, atol)"
        bounds = (each.rtol, each.atol)
        if not all(
            isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b) and b >= 0
            for b in bounds
        ):
            return f"tolerance{where} needs finite rtol and atol, 0 or more, not {bounds}"
    return None


def _package_for(folder: Path) -> str:
    """The import package of a kernel folder, inside one of its chapter folder.

    So a spec may share code with its chapter: `from ..stencil import ...` in
    `<chapter>/<kernel>/spec.py` imports `<chapter>/stencil.py`, and `from . import x` a module
    beside the spec. Package names come from the folders' absolute paths, so two trees with the
    same chapter never share a module.
    """
    chapter_folder = folder.parent
    chapter = _package("kernel_specs", chapter_folder)
    return _package(chapter, folder)


def _package(parent: str, folder: Path) -> str:
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    name = f"{parent}.p{digest}"
    if parent not in sys.modules:
        root = types.ModuleType(parent)
        root.__path__ = []
        sys.modules[parent] = root
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        package.__package__ = name
        sys.modules[name] = package
    return name
