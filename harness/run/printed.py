"""What a worker's kernels print (device printf, which the driver writes to the process's standard
output at each synchronization), caught per case for its cell, not lost on the run's console."""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile

# What a cell keeps of it: a kernel printing from every thread of every timed launch would
# otherwise put megabytes in a report
PRINTED_MOST_BYTES = 8 * 1024


class Printed:
    """The process's standard output, sent to an unlinked file from now on; each read() is what
    was written since the last one (at most PRINTED_MOST_BYTES of it, saying how much more), and
    empties the file."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), sys.stdout.fileno())

    def read(self) -> str:
        sys.stdout.flush()
        ctypes.CDLL(None).fflush(None)  # the C library's buffer, where the driver writes
        handle = self._file.fileno()
        size = os.fstat(handle).st_size
        if size == 0:
            return ""
        kept = os.pread(handle, min(size, PRINTED_MOST_BYTES), 0)
        # standard output shares this file's offset: back to the start, for the next case's
        os.ftruncate(handle, 0)
        os.lseek(handle, 0, os.SEEK_SET)
        text = kept.decode(errors="replace")
        if size > PRINTED_MOST_BYTES:
            text += f"\n... and {size - PRINTED_MOST_BYTES} bytes more"
        return text
