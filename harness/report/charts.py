"""What the dashboard draws, as numbers for charts.html: rooflines per target and device, and the
vendor ratios. Geometry only; the template renders (and escapes) it.

A cell that counts flops is a point at its arithmetic intensity (flops per byte of its work())
and its TFLOPS, under the device's roofs: memory bandwidth times intensity, and the fp32 and
bf16 tensor-core peaks of matrix.yaml. A cell that counts bytes only has no intensity: it is a
point of the bandwidth chart, its GB/s against the bytes it moves, under the memory peak and
the best bandwidth any cell of that target and device reached (the copy bandwidth as measured).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from harness.model.cell import Cell, Throughput, VendorTiming
from harness.model.matrix import DevicePeaks
from harness.model.outcome import Outcome

# what a template reads: names to values, built here and drawn by the dashboard's Jinja2
View = dict[str, object]

PALETTE = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#ad1457")
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 320, 64, 16, 12, 40
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


class _LogAxis:
    def __init__(self, low: float, high: float, start: float, length: float, flip: bool):
        self.low, self.high = math.log10(low), math.log10(high)
        self.start, self.length, self.flip = start, length, flip

    def __call__(self, value: float) -> float:
        share = (math.log10(value) - self.low) / (self.high - self.low)
        return round(self.start + (1 - share if self.flip else share) * self.length, 1)

    def ticks(self) -> list[View]:
        first, last = math.ceil(self.low), math.floor(self.high)
        return [{"at": self(10.0**p), "label": _power(p)} for p in range(first, last + 1)]


def _power(exponent: int) -> str:
    return f"{10.0**exponent:g}" if -3 <= exponent <= 4 else f"1e{exponent}"


# A timed cell as a chart draws it: its index among the dashboard's cells, the cell, its rate
_Timed = tuple[int, Cell, Throughput]


def _timed(cells: Iterable[Cell]) -> list[_Timed]:
    return [
        (index, cell, cell.throughput)
        for index, cell in enumerate(cells)
        if cell.outcome is Outcome.PASSED and cell.throughput and cell.median_us
    ]


def rooflines(cells: list[Cell], peaks: Mapping[str, DevicePeaks]) -> list[View]:
    """Per (target, device) with peaks: the roofline of its flop-counting cells and the
    bandwidth chart of its byte-only cells, each where it has points."""
    groups: dict[tuple[str, str], list[_Timed]] = {}
    for timed in _timed(cells):
        cell = timed[1]
        if cell.provenance.device is not None and cell.provenance.device in peaks:
            groups.setdefault((cell.target, cell.provenance.device), []).append(timed)
    chapters = sorted({cell.chapter for cell in cells})
    colours = {chapter: PALETTE[i % len(PALETTE)] for i, chapter in enumerate(chapters)}
    charts = []
    for (target, device), members in sorted(groups.items()):
        peak = peaks[device]
        with_flops = [m for m in members if m[2].tflops and m[2].gbytes_per_s]
        bytes_only = [m for m in members if m[2].tflops is None and m[2].gbytes_per_s]
        if with_flops:
            charts.append(_roofline(target, device, peak, with_flops, colours))
        if bytes_only:
            charts.append(_bandwidth(target, device, peak, bytes_only, colours))
    return charts


def _frame(title: str, target: str, x_label: str, y_label: str) -> View:
    return {
        "title": title,
        "target": target,
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "top": TOP,
        "plot_w": PLOT_W,
        "plot_h": PLOT_H,
        "x_label": x_label,
        "y_label": y_label,
    }


def _plotted(chart: View, x: _LogAxis, y: _LogAxis, roofs: list[View], points: list[View]) -> View:
    """Fills a framed chart with its axes' ticks, its roofs and its points."""
    chart.update(x_ticks=x.ticks(), y_ticks=y.ticks(), roofs=roofs, points=points)
    chart["legend"] = sorted({(p["chapter"], p["colour"]) for p in points})
    return chart


def _point(index: int, cell: Cell, x: float, y: float, colours: dict[str, str], what: str) -> View:
    """One cell at (x, y), coloured by chapter; `what` ends the name a hover shows."""
    name = f"{cell.classname} {cell.name} @ {cell.runner}: {what}"
    colour = colours[cell.chapter]
    return {"index": index, "x": x, "y": y, "colour": colour, "chapter": cell.chapter, "name": name}


def _level(kind: str, y: float, label: str, below: bool = False) -> View:
    """A horizontal roof across the plot, labelled at its right end (above it, or below)."""
    return {
        "kind": kind,
        "points": f"{LEFT},{y} {WIDTH - RIGHT},{y}",
        "label": label,
        "label_x": WIDTH - RIGHT - 4,
        "label_y": y + 12 if below else y - 4,
    }


def _roofline(
    target: str, device: str, peak: DevicePeaks, members: list[_Timed], colours: dict[str, str]
) -> View:
    intensity = {i: _tflops(r) * 1e3 / _gbytes_per_s(r) for i, _, r in members}
    ridge = peak.bf16_tensor_tflops * 1e3 / peak.memory_gb_per_s
    x_low = min(min(intensity.values()), peak.fp32_tflops * 1e3 / peak.memory_gb_per_s) / 4
    x_high = max(max(intensity.values()), ridge) * 4
    y_low = min(_tflops(r) for _, _, r in members) / 4
    y_high = peak.bf16_tensor_tflops * 2
    chart = _frame(f"{target} on {device}: roofline", target, "flops per byte", "TFLOPS (log)")
    x = _LogAxis(x_low, x_high, LEFT, PLOT_W, flip=False)
    y = _LogAxis(y_low, y_high, TOP, PLOT_H, flip=True)
    roofs: list[View] = []
    for kind, tflops in (("fp32", peak.fp32_tflops), ("bf16", peak.bf16_tensor_tflops)):
        knee = tflops * 1e3 / peak.memory_gb_per_s  # where bandwidth stops being the limit
        start = max(x_low, y_low * 1e3 / peak.memory_gb_per_s)
        corners = [(start, start * peak.memory_gb_per_s / 1e3), (knee, tflops), (x_high, tflops)]
        roofs.append(
            {
                "kind": kind,
                "points": " ".join(f"{x(a)},{y(b)}" for a, b in corners),
                "label": f"{kind} {tflops:g} TFLOPS · {peak.memory_gb_per_s:g} GB/s",
                "label_x": WIDTH - RIGHT - 4,
                "label_y": y(tflops) - 4,
            }
        )
    points = [
        _point(
            i,
            c,
            x(intensity[i]),
            y(_tflops(r)),
            colours,
            f"{_tflops(r):.1f} TFLOPS at {intensity[i]:.3g} flop/B",
        )
        for i, c, r in members
    ]
    return _plotted(chart, x, y, roofs, points)


def _bandwidth(
    target: str, device: str, peak: DevicePeaks, members: list[_Timed], colours: dict[str, str]
) -> View:
    moved = {i: _gbytes_per_s(r) * 1e9 * (c.median_us or 0.0) * 1e-6 for i, c, r in members}
    chart = _frame(f"{target} on {device}: bandwidth", target, "bytes moved (log)", "GB/s (log)")
    x = _LogAxis(min(moved.values()) / 4, max(moved.values()) * 4, LEFT, PLOT_W, False)
    y_low = min(_gbytes_per_s(r) for _, _, r in members) / 4
    y = _LogAxis(y_low, peak.memory_gb_per_s * 2, TOP, PLOT_H, flip=True)
    _, best, best_rate = max(members, key=lambda m: _gbytes_per_s(m[2]))
    measured = _gbytes_per_s(best_rate)
    roofs = [
        _level("memory", y(peak.memory_gb_per_s), f"memory peak {peak.memory_gb_per_s:g} GB/s"),
        _level(
            "measured",
            y(measured),
            f"best measured {measured:.0f} GB/s ({best.kernel} {best.case})",
            below=True,
        ),
    ]
    points = [
        _point(i, c, x(moved[i]), y(_gbytes_per_s(r)), colours, f"{_gbytes_per_s(r):.0f} GB/s")
        for i, c, r in members
    ]
    return _plotted(chart, x, y, roofs, points)


def vendor_bars(cells: list[Cell]) -> View | None:
    """A bar per cell timed beside its vendor baseline: vendor time / kernel time."""
    judged: list[tuple[int, Cell, VendorTiming, float]] = [
        (i, c, c.vendor, c.vendor.ratio)
        for i, c, _ in _timed(cells)
        if c.vendor is not None and c.vendor.ratio is not None and c.vendor.ratio > 0
    ]
    if not judged:
        return None
    runners = {c.runner for _, c, _, _ in judged}
    left, scale_w = 330, WIDTH - 330 + 140
    most = max(max(ratio for *_, ratio in judged), 1.0) * 1.1
    bars = [
        {
            "index": i,
            "name": f"{c.kernel} {c.name}" + (f" @ {c.runner}" if len(runners) > 1 else ""),
            "y": 6 + row * 22,
            "w": round(ratio / most * scale_w, 1),
            "kind": "faster" if ratio >= 1 else "slower",
            "text": f"{ratio:.2f} ({vendor.library})",
        }
        for row, (i, c, vendor, ratio) in enumerate(judged)
    ]
    return {
        "title": "kernel against its vendor baseline",
        "width": WIDTH + 200,
        "height": 6 + 22 * len(bars) + 24,
        "left": left,
        "parity_x": round(left + scale_w / most, 1),
        "bars": bars,
    }


def _tflops(rate: Throughput) -> float:
    """Of a cell the roofline draws: it counts flops (rooflines chose it for that)."""
    return rate.tflops or 0.0


def _gbytes_per_s(rate: Throughput) -> float:
    """Of a cell a chart draws: it counts bytes (rooflines chose it for that)."""
    return rate.gbytes_per_s or 0.0
