"""Finds the kernels: one folder per kernel under kernels/<chapter>/, holding spec.py and its .cu.

A folder whose spec cannot be used becomes a BrokenKernel that carries the reason, so the
report shows it as an error cell instead of the whole run dying on one bad file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

from harness.build.import_probe import unsafe_imports
from harness.spec import KernelSpec


@dataclass(frozen=True)
class Kernel:
    chapter: str
    name: str
    folder: Path
    spec: KernelSpec

    @property
    def classname(self) -> str:
        return f"{self.chapter}.{self.name}"

    @property
    def source(self) -> Path:
        return self.folder / self.spec.source


@dataclass(frozen=True)
class BrokenKernel:
    chapter: str
    name: str
    folder: Path
    reason: str

    @property
    def classname(self) -> str:
        return f"{self.chapter}.{self.name}"


def spec_files(root: Path) -> list[Path]:
    """Every `<root>/<chapter>/<kernel>/spec.py`, sorted by chapter then kernel."""
    root = Path(root).resolve()  # nvcc runs in each kernel's folder: paths must be absolute
    return sorted(root.glob("*/*/spec.py"))


def classname_of(spec_file: Path) -> str:
    return f"{spec_file.parent.parent.name}.{spec_file.parent.name}"


def discover(
    root: Path, select: str = "", import_timeout_s: float | None = None
) -> list[Kernel | BrokenKernel]:
    """The kernels under `root` whose classname contains `select`, in spec_files' order.

    With `import_timeout_s`, each spec is first imported in a child process (import_probe), and
    one whose import exits the process or runs past the timeout is a BrokenKernel saying so,
    never imported here.
    """
    files = [f for f in spec_files(root) if select in classname_of(f)]
    unsafe = unsafe_imports(files, import_timeout_s) if import_timeout_s and files else {}
    kernels = []
    for spec_file in files:
        if spec_file in unsafe:
            folder = spec_file.parent
            reason = f"{spec_file}: {unsafe[spec_file]}"
            kernels.append(BrokenKernel(folder.parent.name, folder.name, folder, reason))
        else:
            kernels.append(load_kernel(spec_file))
    return kernels


def load_kernel(spec_file: Path) -> Kernel | BrokenKernel:
    folder = spec_file.parent
    chapter, name = folder.parent.name, folder.name

    def broken(reason: str) -> BrokenKernel:
        return BrokenKernel(chapter, name, folder, f"{spec_file}: {reason}")

    module_name = _package_for(folder) + ".spec"
    loader_spec = importlib.util.spec_from_file_location(module_name, spec_file)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        sys.modules[module_name] = module
        loader_spec.loader.exec_module(module)
    except BaseException as error:  # any error in a user's spec is that kernel's error cell
        if isinstance(error, KeyboardInterrupt):
            raise
        # A SyntaxError is raised by the compiler inside importlib: its own lineno is the spec's.
        if isinstance(error, SyntaxError) and error.lineno:
            line = error.lineno
        else:
            line = traceback.extract_tb(error.__traceback__)[-1].lineno
        return broken(f"import failed at line {line}: {type(error).__name__}: {error}")
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, KernelSpec):
        return broken("defines no SPEC = KernelSpec(...)")
    if not spec.source:
        spec = dataclasses.replace(spec, source=f"{name}.cu")
    if not (folder / spec.source).is_file():
        return broken(f"source {spec.source!r} is not a file beside it")
    if len(spec.cases) == 0:
        return broken("declares no cases")
    names = [case.name for case in spec.cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return broken(f"case names repeat: {', '.join(duplicates)}")
    return Kernel(chapter, name, folder, spec)


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
