"""What the fork server imports before it forks the run's Python children (harness.processes):
the modules they all import, each once. One that raises on this machine (a cuda-python that
cannot load its driver library, say) is left out rather than taken down with the server: the
server stays up for every child, and a child that needs the module raises the same error
itself, which its own cell reports."""

import contextlib
import importlib

for _module in (
    "numpy",
    "harness.model.discovery",
    "harness.vendor",
    "harness.run.worker",
    "harness.run.case",
):
    with contextlib.suppress(Exception):
        importlib.import_module(_module)
