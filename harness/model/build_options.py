"""What a spec may ask of nvcc, and the flags that makes: a C++ standard, macros, and flags that
change only the code generated. nvcc runs its tools through a shell and reads files a flag
names, so anything else (an include path, a host compiler, a pre-include, -Xcompiler) could
leave the kernel tree or run a program, and is refused, naming the flag."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

from harness.model.spec import BuildOptions

STANDARDS = ("c++17", "c++20")
# What a device link may take beyond the units: the toolkit's own device runtime
LIBRARIES = ("cudadevrt",)
# Each a whole flag (fullmatch): code generation and diagnostics, nothing that names a file
ALLOWED_FLAGS = (
    r"--?use_fast_math",
    r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
    r"--expt-relaxed-constexpr",
    r"--(expt-)?extended-lambda",
    r"--?maxrregcount=[0-9]{1,3}",
    r"--restrict",
    r"--extra-device-vectorization",
    r"--default-stream=(legacy|null|per-thread)",
    r"-Xptxas=-O[0-3]",
    r"--diag-suppress=[0-9]+(,[0-9]+)*",
    r"-Wno-deprecated-(gpu-targets|declarations)",
    r"-G",
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a C++ entry name may hold: names, scopes, template arguments (types, numbers, pointers);
# nothing that ends a declaration, opens a block, or starts a directive, comment or string
_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_:<>, .()*&+-]*")
_VALUE = re.compile(r"[A-Za-z0-9_.+-]*")  # no quote, space or shell character: nvcc's shell


def problem_with(options: object) -> str | None:
    """Why `options` cannot be built with; None when it can."""
    if not isinstance(options, BuildOptions):
        return f"build is {options!r}, not a BuildOptions(...)"
    if options.std not in STANDARDS:
        return f"build std {options.std!r} is not one of {', '.join(STANDARDS)}"
    if why := defines_problem(options.defines):
        return f"build {why}"
    if not isinstance(options.flags, tuple | list):
        return f"build flags is {type(options.flags).__name__}, not a tuple of flags"
    for flag in options.flags:
        if not isinstance(flag, str) or not any(re.fullmatch(p, flag) for p in ALLOWED_FLAGS):
            return (
                f"build flag {flag!r} is refused: a spec's flags may change code generation "
                "only, never name a file or a program (allowed: -use_fast_math, --ftz=, "
                "--prec-div=, --prec-sqrt=, --fmad=, --expt-relaxed-constexpr, "
                "--extended-lambda, -maxrregcount=N, --restrict, --extra-device-vectorization, "
                "--default-stream=, -Xptxas=-O<n>, --diag-suppress=, -Wno-deprecated-*, -G; "
                "-rdc is relocatable=True, more files are sources=, libraries are libraries=)"
            )
    if not isinstance(options.relocatable, bool):
        return f"build relocatable is {options.relocatable!r}, not True or False"
    if not isinstance(options.sources, tuple | list):
        return f"build sources is {type(options.sources).__name__}, not a tuple of file names"
    for name in options.sources:
        if why := source_problem(name):
            return f"build sources: {why}"
    if not isinstance(options.libraries, tuple | list):
        return f"build libraries is {type(options.libraries).__name__}, not a tuple of names"
    for library in options.libraries:
        if library not in LIBRARIES:
            return f"build library {library!r} is not one of {', '.join(LIBRARIES)}"
    if (options.sources or options.libraries) and not options.relocatable:
        return (
            "build sources and libraries are device-linked: they need relocatable=True (-rdc=true)"
        )
    return None


def defines_problem(defines: object) -> str | None:
    """Why `defines` cannot be macros on nvcc's command line; None when they can."""
    if not isinstance(defines, Mapping):
        return f"defines is {type(defines).__name__}, not a mapping"
    for name, value in defines.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            return f"define {name!r} is not a macro name"
        if isinstance(value, bool) or not isinstance(value, int | str):
            return f"define {name} is {value!r}: a macro's value is an int or a string"
        if not _VALUE.fullmatch(str(value)):
            return (
                f"define {name}={value!r}: a value of letters, digits and _ . + - only "
                "(nvcc passes it through a shell)"
            )
    return None


def source_problem(name: object) -> str | None:
    """Why `name` is not a .cu file of the kernel's folder, as a spec names one."""
    if not isinstance(name, str) or not name.endswith(".cu"):
        return f"{name!r} is not a .cu file name"
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not _VALUE.fullmatch(name.replace("/", "")):
        return f"{name!r}: a source is a file in the kernel's folder, named plainly"
    return None


def entry_problem(name: object) -> str | None:
    """Why `name` cannot be a C++ entry the build instantiates; None when it can."""
    if not isinstance(name, str) or not _ENTRY.fullmatch(name) or "//" in name or "/*" in name:
        return f"entry {name!r} is not a C++ name (letters, digits, _ :: <> , . () * & + -)"
    return None


def nvcc_flags(options: BuildOptions) -> tuple[str, ...]:
    """What `options` puts on nvcc's command line, in a fixed order (the cache key's): the
    standard, the macros, the flags, and -rdc=true for relocatable device code."""
    relocatable = ("-rdc=true",) if options.relocatable else ()
    return (f"-std={options.std}", *define_flags(options.defines), *options.flags, *relocatable)


def define_flags(defines: Mapping[str, str | int]) -> tuple[str, ...]:
    """-DNAME=VALUE for each macro, sorted by name."""
    return tuple(f"-D{name}={value}" for name, value in sorted(defines.items()))


def with_defines(flags: tuple[str, ...], defines: tuple[str, ...]) -> tuple[str, ...]:
    """`flags` (nvcc_flags') with the macros `defines` (-DNAME=VALUE) put over theirs: a macro
    both set is the case's, once."""
    named = {flag[2:].partition("=")[0] for flag in defines}
    kept = [f for f in flags if not (f.startswith("-D") and f[2:].partition("=")[0] in named)]
    standard, *rest = kept
    own = [f for f in rest if f.startswith("-D")]
    others = [f for f in rest if not f.startswith("-D")]
    return (standard, *sorted([*own, *defines], key=lambda f: f[2:].partition("=")[0]), *others)


def flag_problem(flag: object) -> str | None:
    """Why `flag` is none nvcc_flags makes of sound options; None when it is one."""
    if not isinstance(flag, str):
        return f"{flag!r} is not a flag"
    if flag.startswith("-std="):
        return None if flag[5:] in STANDARDS else f"{flag} is not a standard of {STANDARDS}"
    if flag.startswith("-D"):
        name, _, value = flag[2:].partition("=")
        return None if _NAME.fullmatch(name) and _VALUE.fullmatch(value) else f"{flag} refused"
    if flag == "-rdc=true":
        return None
    return None if any(re.fullmatch(p, flag) for p in ALLOWED_FLAGS) else f"{flag} refused"
