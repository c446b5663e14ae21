"""Files a user names (a matrix, a times file, a report), read only when they are regular files
and only up to a size: a device, a pipe or a huge file is an error naming it, never a hang or
a MemoryError."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


class Unreadable(Exception):
    """A named file that cannot be read; the message starts with its path."""


def kind_of(mode: int) -> str:
    """What a file of `mode` is, in words, where it is no regular file."""
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """`path` (links followed) opened for reading, where it is a regular file; Unreadable where
    it is missing or no regular file."""
    try:
        # Opened without waiting, so that a pipe is refused rather than waited on.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise Unreadable(f"{path}: cannot be read ({error.strerror})") from error
    mode = os.fstat(handle).st_mode
    if not stat.S_ISREG(mode):
        os.close(handle)
        raise Unreadable(f"{path}: {kind_of(mode)}, not a regular file")
    os.set_blocking(handle, True)
    return os.fdopen(handle, "rb")


def read_bounded(path: Path, most_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `most_bytes` of them; Unreadable where it
    is missing, no regular file, or larger."""
    with open_regular(path) as opened:
        try:
            data = opened.read(most_bytes + 1)
        except OSError as error:
            raise Unreadable(f"{path}: cannot be read ({error.strerror})") from error
    if len(data) > most_bytes:
        raise Unreadable(f"{path}: larger than {most_bytes >> 20} MiB, the most read")
    return data
