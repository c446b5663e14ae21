"""A worker's standard output (where the driver writes device printf) is caught per case: each
read is what was written since the last, bounded, and the run's console gets none of it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from harness.run.printed import PRINTED_MOST_BYTES
from tests.conftest import ROOT

# As the driver writes device printf: through the C library's buffered stdout
SCRIPT = textwrap.dedent(
    """
    import ctypes, json, os
    from harness.run.printed import PRINTED_MOST_BYTES, Printed

    libc = ctypes.CDLL(None)
    printed = Printed()
    libc.printf(b"block 0 covers elements 0 to 255\\n")
    first = printed.read()
    second = printed.read()
    print("x" * (PRINTED_MOST_BYTES + 100))
    third = printed.read()
    os.write(1, b"after\\n")
    fourth = printed.read()
    os.write(2, json.dumps([first, second, third, fourth]).encode())
    """
)


def test_each_read_is_what_was_printed_since_the_last_bounded_and_nothing_reaches_the_console():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # none of it on the process's own standard output
    first, second, third, fourth = json.loads(done.stderr)
    assert first == "block 0 covers elements 0 to 255\n"
    assert second == ""
    assert third == "x" * PRINTED_MOST_BYTES + "\n... and 101 bytes more"
    assert fourth == "after\n"  # the file was emptied, and written from its start again
