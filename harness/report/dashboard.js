// Filters and the details panel. Every string from the reports goes in through textContent.
"use strict";
(function () {
  const CELLS = JSON.parse(document.getElementById("cells-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const filters = { chapter: $("filter-chapter"), target: $("filter-target"), outcome: $("filter-outcome") };
  const PROPERTY_ORDER = [
    "time_median_us", "time_p10_us", "time_p90_us", "noise_pct", "samples", "gbytes_per_s",
    "tflops", "roofline_pct", "sm_clock_mhz", "throttled_samples", "registers", "smem_bytes", "spill_bytes",
    "binary", "embedded", "target", "device", "cc", "driver", "toolkit", "seed",
  ];

  function outcomeMatches(el, wanted) {
    if (!wanted) return true;
    const outcome = el.dataset.outcome;
    if (wanted === "not-passed") return outcome !== "passed";
    if (wanted.startsWith("skipped:")) {
      return outcome === "skipped" && el.dataset.skipReason === wanted.slice(8);
    }
    return outcome === wanted;
  }

  function applyFilters() {
    const chapter = filters.chapter.value, target = filters.target.value;
    const outcome = filters.outcome.value;
    document.querySelectorAll("#grid [data-target]").forEach((el) => {
      if (!el.classList.contains("cell")) el.classList.toggle("col-hidden", !!target && el.dataset.target !== target);
    });
    let shown = 0;
    document.querySelectorAll("#grid .cell").forEach((el) => {
      const visible = (!chapter || el.dataset.chapter === chapter) &&
        (!target || el.dataset.target === target) && outcomeMatches(el, outcome);
      el.classList.toggle("filtered", !visible);
      if (visible) shown += 1;
    });
    const filtering = !!(chapter || outcome);
    const kernelsShown = new Set(), chaptersShown = new Set();
    document.querySelectorAll("#grid tr.case-row").forEach((row) => {
      const anyCell = row.querySelector(".cell:not(.filtered)") !== null;
      const hide = (chapter && row.dataset.chapter !== chapter) || (filtering && !anyCell);
      row.classList.toggle("filtered", !!hide);
      if (!hide) { kernelsShown.add(row.dataset.kernel); chaptersShown.add(row.dataset.chapter); }
    });
    document.querySelectorAll("#grid tr.kernel-row").forEach((row) => {
      row.classList.toggle("filtered", !kernelsShown.has(row.dataset.kernel));
    });
    document.querySelectorAll("#grid tr.chapter-row").forEach((row) => {
      row.classList.toggle("filtered", !chaptersShown.has(row.dataset.chapter));
    });
    $("visible-count").textContent = `showing ${shown} of ${CELLS.length} cells`;
    // The count pills count what the chapter and target filters leave (the outcome filter is
    // what the pills choose between, so it does not narrow them).
    const counted = {};
    document.querySelectorAll("#grid .cell").forEach((node) => {
      if ((chapter && node.dataset.chapter !== chapter) || (target && node.dataset.target !== target)) return;
      const keys = [node.dataset.outcome];
      if (node.dataset.skipReason) keys.push(`skipped:${node.dataset.skipReason}`);
      keys.forEach((k) => { counted[k] = (counted[k] || 0) + 1; });
    });
    document.querySelectorAll("#counts [data-count]").forEach((chip) => {
      const n = counted[chip.dataset.count] || 0;
      chip.querySelector("b").textContent = String(n);
      chip.classList.toggle("zero", n === 0);
    });
    // A cell the filters hide leaves the details panel.
    const selected = document.querySelector("#grid .cell.selected");
    if (selected && selected.classList.contains("filtered")) {
      selected.classList.remove("selected");
      $("details").replaceChildren(el("p", { class: "hint" }, "The selected cell is hidden by the filters."));
    }
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, String(v)));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const fmt = (v) => (v >= 100 ? v.toFixed(1) : v >= 10 ? v.toFixed(2) : v.toFixed(3));

  function histogram(binned, timing) {
    // Binned by the page's maker (dashboard.py _histogram): low, high, counts, and the tail.
    if (!binned) return el("p", { class: "none" }, "no timing samples (the cell did not run)");
    const W = 440, H = 140, pad = 22, top = 26;
    const lo = binned.low, hi = binned.high, counts = binned.counts, bins = counts.length;
    const clipped = binned.clipped;
    const peak = Math.max(...counts), bw = (W - 2 * pad) / bins;
    const x = (v) => pad + ((v - lo) / (hi - lo)) * (W - 2 * pad);
    const root = svg("svg", { id: "details-hist", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    counts.forEach((c, i) => {
      const h = (c / peak) * (H - top - pad);
      const bar = svg("rect", { x: pad + i * bw + 0.5, y: H - pad - h, width: Math.max(1, bw - 1), height: h, fill: "#5c8fc7" });
      bar.appendChild(svg("title", {}, `${c} samples in [${fmt(lo + (i * (hi - lo)) / bins)}, ${fmt(lo + ((i + 1) * (hi - lo)) / bins)}) µs`));
      root.appendChild(bar);
    });
    [["p10_us", "#8a949e"], ["p90_us", "#8a949e"], ["median_us", "#c62828"]].forEach(([key, colour]) => {
      const v = timing ? timing[key] : NaN;
      if (!Number.isFinite(v) || v < lo || v > hi) return;
      const median = key === "median_us";
      root.appendChild(svg("line", { x1: x(v), x2: x(v), y1: top - 4, y2: H - pad, stroke: colour, "stroke-width": median ? 2 : 1, "stroke-dasharray": median ? "" : "3 2" }));
    });
    const label = (key) => (timing && Number.isFinite(timing[key]) ? fmt(timing[key]) : "?");
    const legend = `median ${label("median_us")} µs (red), p10 ${label("p10_us")} / p90 ${label("p90_us")} (dashed)`;
    root.appendChild(svg("text", { x: pad, y: 12 }, legend));
    root.appendChild(svg("line", { x1: pad, x2: W - pad, y1: H - pad, y2: H - pad, stroke: "#8a949e" }));
    root.appendChild(svg("text", { x: pad, y: H - 6 }, `${fmt(lo)} µs`));
    root.appendChild(svg("text", { x: W - pad, y: H - 6, "text-anchor": "end" }, `${fmt(hi)} µs`));
    const note = clipped ? `${binned.samples} samples; ${clipped} above, up to ${fmt(binned.largest)} µs` : `${binned.samples} samples`;
    root.appendChild(svg("text", { x: W / 2, y: H - 6, "text-anchor": "middle" }, note));
    return root;
  }

  function sparkline(trend, current, verdict) {
    const points = trend.filter((p) => typeof p[1] === "number");
    if (!points.length) {
      const why = Number.isFinite(current) ? "no stored run has this cell yet (this run is not stored: see --db)" : "no trend: the cell has no timing (only passed run cells are timed)";
      return el("p", { class: "none" }, why);
    }
    const W = 440, H = 110, left = 70, right = 16, top = 14, bottom = 22;
    const baseline = verdict ? verdict.baseline_us : NaN;
    const values = points.map((p) => p[1]).concat(Number.isFinite(current) ? [current] : [])
      .concat(Number.isFinite(baseline) ? [baseline] : []);
    let lo = Math.min(...values), hi = Math.max(...values);
    if (hi === lo) { lo -= 0.5; hi += 0.5; }
    const x = (i) => (points.length === 1 ? (left + W - right) / 2 : left + (i / (points.length - 1)) * (W - left - right));
    const y = (v) => H - bottom - ((v - lo) / (hi - lo)) * (H - top - bottom);
    const root = svg("svg", { id: "details-trend-svg", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    root.appendChild(svg("text", { x: left - 6, y: y(hi) + 4, "text-anchor": "end" }, `${fmt(hi)} µs`));
    root.appendChild(svg("text", { x: left - 6, y: y(lo) + 4, "text-anchor": "end" }, `${fmt(lo)} µs`));
    if (Number.isFinite(current)) {
      root.appendChild(svg("line", { x1: left, x2: W - right, y1: y(current), y2: y(current), stroke: "#c62828", "stroke-dasharray": "4 3" }));
    }
    if (Number.isFinite(baseline)) {
      const mark = svg("line", { id: "details-trend-baseline", x1: left, x2: W - right, y1: y(baseline), y2: y(baseline), stroke: "#2e7d32", "stroke-dasharray": "2 2" });
      mark.appendChild(svg("title", {}, `baseline ${fmt(baseline)} µs: ${verdict.judgement} ${verdict.ratio.toFixed(3)}`));
      root.appendChild(mark);
      root.appendChild(svg("text", { id: "details-trend-verdict", x: W - right, y: y(baseline) - 4, "text-anchor": "end" }, `${verdict.judgement} ${verdict.ratio.toFixed(3)}`));
    }
    root.appendChild(svg("polyline", { points: points.map((p, i) => `${x(i)},${y(p[1])}`).join(" "), fill: "none", stroke: "#1565c0", "stroke-width": 2 }));
    points.forEach((p, i) => {
      const dot = svg("circle", { cx: x(i), cy: y(p[1]), r: 3, fill: "#1565c0" });
      dot.appendChild(svg("title", {}, `${p[0]}: ${fmt(p[1])} µs`));
      root.appendChild(dot);
    });
    root.appendChild(svg("text", { x: left, y: H - 6 }, points[0][0]));
    if (points.length > 1) root.appendChild(svg("text", { x: W - right, y: H - 6, "text-anchor": "end" }, points[points.length - 1][0]));
    const wrap = el("div");
    wrap.appendChild(root);
    const caption = `${points.length} stored run(s), oldest first` + (Number.isFinite(current) ? `; red dashed: this run, ${fmt(current)} µs` : "") + (Number.isFinite(baseline) ? `; green dotted: the baseline, ${fmt(baseline)} µs` : "");
    wrap.appendChild(el("div", { class: "caption" }, caption));
    return wrap;
  }

  function showDetails(index) {
    const cell = CELLS[index], panel = $("details"), props = cell.properties || {};
    document.querySelectorAll("#grid .cell.selected").forEach((n) => n.classList.remove("selected"));
    document.querySelector(`#grid .cell[data-index="${index}"]`).classList.add("selected");
    document.querySelectorAll("#charts .selected").forEach((n) => n.classList.remove("selected"));
    document.querySelectorAll(`#charts [data-index="${index}"]`).forEach((n) => n.classList.add("selected"));
    panel.replaceChildren();
    panel.dataset.index = index;
    panel.appendChild(el("h2", { id: "details-title" }, `${cell.classname} ${cell.name}`));
    panel.appendChild(el("div", { class: "where" }, `${cell.target} on ${cell.runner}, ` + (cell.device ? `GPU: ${cell.device}` : "no GPU")));
    const label = cell.outcome === "skipped" && cell.skip_reason ? `skipped: ${cell.skip_reason}` : cell.outcome;
    const reason = cell.skip_reason ? ` reason-${cell.skip_reason}` : "";
    panel.appendChild(el("div", { id: "details-outcome", class: `badge outcome-${cell.outcome}${reason}` }, label));
    panel.appendChild(el("h3", {}, "message"));
    panel.appendChild(cell.message ? el("pre", { id: "details-message" }, cell.message) : el("p", { id: "details-message", class: "none" }, "(no message)"));
    panel.appendChild(el("h3", {}, "properties"));
    const table = el("table", { id: "details-props" });
    const keys = Object.keys(props);
    keys.sort((a, b) => {
      const ia = PROPERTY_ORDER.indexOf(a), ib = PROPERTY_ORDER.indexOf(b);
      return (ia < 0 ? 999 : ia) - (ib < 0 ? 999 : ib) || a.localeCompare(b);
    });
    keys.forEach((k) => {
      const row = el("tr", { "data-key": k });
      row.appendChild(el("th", {}, k));
      row.appendChild(el("td", {}, props[k]));
      table.appendChild(row);
    });
    panel.appendChild(keys.length ? table : el("p", { class: "none" }, "(no properties)"));
    panel.appendChild(el("h3", {}, "timing distribution"));
    panel.appendChild(histogram(cell.histogram, cell.timing));
    if (cell.verdict) {
      const v = cell.verdict;
      const cause = v.judgement === "SLOWER" ? (v.same_code ? "; the same code: the environment" : "; the code changed") : "";
      const shared = v.shared_gpu ? `; ${v.shared_gpu}` : "";
      panel.appendChild(el("div", { id: "details-verdict", class: `verdict verdict-${v.slug}` },
        `${v.judgement} against the baseline: ${fmt(v.baseline_us)} → ${fmt(cell.timing.median_us)} µs, ratio ${v.ratio.toFixed(3)} (95 % ${v.low.toFixed(3)}–${v.high.toFixed(3)}, cross-run threshold ${v.threshold_pct.toFixed(1)} %)${cause}${shared}`));
    }
    if (cell.ab) {
      panel.appendChild(el("div", { id: "details-ab", class: `verdict verdict-${cell.ab.slug}` },
        `A/B against ${cell.ab.base_commit.slice(0, 10)} on one GPU: ${cell.ab.text}`));
    }
    panel.appendChild(el("h3", {}, "trend"));
    const trendBox = el("div", { id: "details-trend" });
    trendBox.appendChild(sparkline(cell.trend || [], cell.timing ? cell.timing.median_us : NaN, cell.verdict));
    panel.appendChild(trendBox);
    panel.appendChild(el("h3", {}, "log"));
    panel.appendChild(cell.detail ? el("pre", { id: "details-log" }, cell.detail) : el("p", { id: "details-log", class: "none" }, "(no nvcc log or traceback)"));
  }

  Object.values(filters).forEach((f) => f.addEventListener("change", applyFilters));
  document.querySelectorAll("#grid .cell, #charts [data-index]").forEach((node) => {
    node.addEventListener("click", () => showDetails(Number(node.dataset.index)));
    node.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); showDetails(Number(node.dataset.index)); } });
  });
  applyFilters();
})();
