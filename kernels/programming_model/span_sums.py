"""The reference of block_reduce (one span per block) and cluster_reduce (one span per cluster):
float64 sums of consecutive spans of x, the last one cut short at x's end."""

from __future__ import annotations

import numpy as np

from harness.spec import ceil_div


def span_sums(x: np.ndarray, span: int) -> np.ndarray:
    """sums[s] = sum(x[s * span : min((s + 1) * span, x.size)]) in float64, for every s below
    ceil(x.size / span)."""
    spans = ceil_div(x.size, span)
    full = x.size // span  # spans lying entirely inside x
    sums = np.empty(spans, dtype=np.float64)
    sums[:full] = x[: full * span].reshape(full, span).sum(axis=1, dtype=np.float64)
    if full < spans:  # the last, partial span
        sums[full] = x[full * span :].sum(dtype=np.float64)
    return sums
