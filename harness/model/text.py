"""Text a kernel, a tool or a spec made, made safe to show: no control characters, no log
without bound."""

from __future__ import annotations

import re

# Characters no page or terminal may be sent as they are (C0 and C1 controls, DEL): none is
# valid HTML or XML 1.0, and ESC sequences restyle a terminal
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def shown_controls(text: str) -> str:
    """`text` with each control character written as \\xNN, visible; newlines and tabs kept."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def bounded(text: str, limit: int) -> str:
    """`text` kept whole up to `limit` characters; past that its start and its end, with the
    cut said between them: no log a kernel makes a tool print grows a report, a cache entry or
    the history without bound."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters left out ...]\n{text[-half:]}"
