"""The health report's charts: inline SVG built from the health document (``TableHealth.to_json()``).

Three charts, each a function of the JSON document (a ``Mapping``, as ``lakeformat health --json`` prints it
or an XCom holds it) returning one ``<svg>`` element as text:

- :func:`file_size_chart`: the live data files by size (the document's ``fileSizes`` histogram, log-spaced
  buckets of equal width), the small-file threshold (dashed) and the target size (solid) drawn where they
  fall on the same log scale. A bar is ``small`` when its whole bucket is under the threshold, ``mixed``
  when the threshold falls inside it, ``ok`` otherwise.
- :func:`partition_chart`: per partition, small files against ``min-small-files`` and delete records over
  rows against ``delete-ratio`` (primary-key tables also sorted runs against ``max-sorted-runs``); a bar at or
  past its threshold is drawn as a warning. Many partitions: the worst ``limit`` by the sum of each measure
  over its threshold, with a note saying how many are left out.
- :func:`snapshot_chart`: the snapshots kept, cumulated over their commit times (``snapshots.times``), with
  the retention cut (``nowMs - retentionMs``) as a vertical line and the older side shaded. The oldest
  ``snapshots.expirable`` snapshots are marked expirable (the expiry plan removes the oldest first).

Every text from the document is escaped (``html.escape``, quotes included), so a partition value such as
``<script>`` is shown, not run. The output is deterministic (same document, same text): no random ids, no
clock read, numbers rounded to 0.1 px. There is no script, no external reference and no ``xmlns`` URL (an
HTML5 page places an inline ``<svg>`` in the SVG namespace itself); ``standalone=True`` adds the namespace
for an ``.svg`` file. Each chart degrades to a titled box with a sentence when there is nothing to draw (no
data file, no snapshot, times not collected). Missing keys are tolerated (older documents).

This module is neutral: it imports no format.

Example:
    >>> doc = open_table("/wh/db.db/t").health().to_json()  # doctest: +SKIP
    >>> svg = file_size_chart(doc)  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from typing import Any

from airflow_lakeformat.core.maintenance.results import human_bytes

WIDTH = 720
#: Plot margins: left, right, top, bottom.
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 58, 56
COLORS = {
    "ok": "#4a7bb7",
    "small": "#e0653a",
    "mixed": "#f0a35e",
    "warn": "#e0653a",
    "target": "#2e8b57",
    "threshold": "#b5472b",
    "grid": "#e4e7eb",
    "axis": "#5b6470",
    "text": "#1f2933",
    "muted": "#6b7480",
    "past": "#fbe3da",
}
NAMESPACE = "http://www.w3.org/2000/svg"


def _e(value: object) -> str:
    """Text or attribute value, escaped (``<``, ``>``, ``&``, both quotes)."""
    return escape(str(value), quote=True)


def _n(x: float) -> str:
    """A coordinate rounded to 0.1 (``12.0`` -> ``"12"``)."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _text(x: float, y: float, content: object, *, anchor: str = "start", size: int = 11, **attrs: str) -> str:
    fill = attrs.pop("fill", COLORS["text"])
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{_e(v)}"' for k, v in attrs.items())
    return (
        f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}" fill="{fill}"{extra}>'
        f"{_e(content)}</text>"
    )


def _svg(kind: str, height: int, title: str, subtitle: str, body: list[str], standalone: bool) -> str:
    """The ``<svg>`` element: title and subtitle on top, ``body`` inside."""
    ns = f' xmlns="{NAMESPACE}"' if standalone else ""
    head = [
        f'<svg{ns} class="lf-chart lf-chart-{kind}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
        f' height="{height}" role="img" aria-label="{_e(title)}" font-family="Helvetica, Arial, sans-serif">',
        f"<title>{_e(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        _text(LEFT, 22, title, size=15, font_weight="bold"),
        _text(LEFT, 40, subtitle, size=11, fill=COLORS["muted"]),
    ]
    return "\n".join([*head, *body, "</svg>"])


def _empty(kind: str, title: str, message: str, standalone: bool) -> str:
    """A chart with nothing to draw: the title and one sentence in a box."""
    box = (
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="60" fill="#f7f8fa"'
        f' stroke="{COLORS["grid"]}"/>'
    )
    return _svg(
        kind, TOP + 80, title, "", [box, _text(WIDTH / 2, TOP + 35, message, anchor="middle")], standalone
    )


def _ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to at least ``top`` (1, 2 or 5 times a power of 10 apart)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if top >= 1 and step < 1:
        step = 1.0
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _tick_label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _y_axis(ticks: list[float], y0: float, height: float, label: str) -> list[str]:
    """Horizontal grid lines with their values, and the axis title."""
    out = []
    for t in ticks:
        y = y0 - t / ticks[-1] * height
        out.append(
            f'<line x1="{LEFT}" y1="{_n(y)}" x2="{WIDTH - RIGHT}" y2="{_n(y)}" stroke="{COLORS["grid"]}"/>'
        )
        out.append(_text(LEFT - 6, y + 4, _tick_label(t), anchor="end", size=10, fill=COLORS["axis"]))
    out.append(
        f'<text x="14" y="{_n(y0 - height / 2)}" text-anchor="middle" font-size="11" fill="{COLORS["axis"]}"'
        f' transform="rotate(-90 14 {_n(y0 - height / 2)})">{_e(label)}</text>'
    )
    return out


def _swatch(
    x: float, y: float, color: str, label: str, *, dashed: bool = False, line: bool = False
) -> list[str]:
    if line:
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        mark = f'<line x1="{_n(x)}" y1="{_n(y - 4)}" x2="{_n(x + 14)}" y2="{_n(y - 4)}" stroke="{color}" stroke-width="2"{dash}/>'
    else:
        mark = f'<rect x="{_n(x)}" y="{_n(y - 9)}" width="10" height="10" fill="{color}"/>'
    return [mark, _text(x + 18, y, label, size=10, fill=COLORS["axis"])]


def file_size_chart(doc: Mapping[str, Any], *, standalone: bool = False) -> str:
    """The live data files by size against the small-file threshold and the target size.

    Args:
        doc: the health document (``TableHealth.to_json()``); reads ``fileSizes`` (and ``files`` for the
            target and threshold when ``fileSizes`` lacks them).
        standalone: add the SVG namespace (an ``.svg`` file rather than inline HTML).

    Returns:
        One ``<svg>`` element: a ``<rect class="bar small|mixed|ok" data-count=...>`` per non-empty bucket.

    Example:
        >>> svg = file_size_chart({"fileSizes": {"edges": [1024, 2048], "counts": [3],
        ...                        "targetFileSize": 2048, "smallFileThreshold": 1536}})
        >>> svg.count('class="bar ')
        1
    """
    sizes = doc.get("fileSizes") or {}
    files = doc.get("files") or {}
    edges = [int(e) for e in sizes.get("edges") or []]
    counts = [int(c) for c in sizes.get("counts") or []]
    target = int(sizes.get("targetFileSize") or files.get("targetFileSize") or 0)
    threshold = int(sizes.get("smallFileThreshold") or files.get("smallFileThreshold") or 0)
    total = sum(counts)
    title = f"Data file sizes against the target ({total} file{'' if total == 1 else 's'})"
    if not total or len(edges) != len(counts) + 1:
        return _empty("file-sizes", title, "No data files", standalone)
    subtitle = f"target {human_bytes(target)}; a file under {human_bytes(threshold)} is small"
    subtitle += f": {files['smallFiles']} of {total}" if "smallFiles" in files else ""
    height, plot_w = 300, WIDTH - LEFT - RIGHT
    y0, plot_h = height - BOTTOM, height - BOTTOM - TOP - 14
    ticks = _ticks(max(counts))
    lo, hi = math.log2(edges[0]), math.log2(edges[-1])

    def x_of(size: float) -> float:
        return LEFT + (math.log2(max(size, edges[0])) - lo) / (hi - lo) * plot_w

    body = _y_axis(ticks, y0, plot_h, "data files")
    width = plot_w / len(counts)
    for i, count in enumerate(counts):
        if not count:
            continue
        kind = "small" if edges[i + 1] <= threshold else "mixed" if edges[i] < threshold else "ok"
        h = count / ticks[-1] * plot_h
        x = LEFT + i * width
        body.append(
            f'<rect class="bar {kind}" data-count="{count}" data-low="{edges[i]}" data-high="{edges[i + 1]}"'
            f' x="{_n(x + 1)}" y="{_n(y0 - h)}" width="{_n(max(width - 2, 1))}" height="{_n(h)}"'
            f' fill="{COLORS[kind]}"><title>{_e(human_bytes(edges[i]))} to {_e(human_bytes(edges[i + 1]))}:'
            f" {count} file{'' if count == 1 else 's'}</title></rect>"
        )
        body.append(_text(x + width / 2, y0 - h - 3, count, anchor="middle", size=10))
    every = max(1, math.ceil(len(edges) / 9))
    for i, edge in enumerate(edges):
        if i % every == 0 or i == len(edges) - 1:
            x = LEFT + i * width
            body.append(
                f'<line x1="{_n(x)}" y1="{y0}" x2="{_n(x)}" y2="{y0 + 4}" stroke="{COLORS["axis"]}"/>'
            )
            anchor = "end" if i == len(edges) - 1 else "middle"
            body.append(_text(x, y0 + 16, human_bytes(edge), anchor=anchor, size=10, fill=COLORS["axis"]))
    body += [
        f'<line x1="{LEFT}" y1="{y0}" x2="{WIDTH - RIGHT}" y2="{y0}" stroke="{COLORS["axis"]}"/>',
        _text(LEFT + plot_w / 2, y0 + 34, "file size (log scale)", anchor="middle", size=11),
    ]
    for cls, value, color, dash in (
        ("small-threshold", threshold, COLORS["threshold"], ' stroke-dasharray="5 4"'),
        ("target", target, COLORS["target"], ""),
    ):
        if value > 0:
            x = x_of(value)
            body.append(
                f'<line class="{cls}" data-bytes="{value}" x1="{_n(x)}" y1="{_n(y0 - plot_h - 6)}" x2="{_n(x)}"'
                f' y2="{y0}" stroke="{color}" stroke-width="2"{dash}/>'
            )
    body += _size_legend(height - 8)
    return _svg("file-sizes", height, title, subtitle, body, standalone)


def _size_legend(y: float) -> list[str]:
    return [
        *_swatch(LEFT, y, COLORS["small"], "small"),
        *_swatch(LEFT + 60, y, COLORS["mixed"], "straddles the threshold"),
        *_swatch(LEFT + 210, y, COLORS["ok"], "large enough"),
        *_swatch(LEFT + 320, y, COLORS["threshold"], "small-file threshold", dashed=True, line=True),
        *_swatch(LEFT + 470, y, COLORS["target"], "target size", line=True),
    ]


def _partition_label(name: str, limit: int = 26) -> str:
    if not name:
        return "(unpartitioned)"
    return name if len(name) <= limit else name[: limit - 1] + "\u2026"


def _partition_panels(doc: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The measures drawn per partition: name, value getter, threshold, value format."""
    t = doc.get("thresholds") or {}
    panels: list[dict[str, Any]] = [
        {
            "key": "small-files",
            "title": "Small files",
            "value": lambda p: float(p.get("smallFiles") or 0),
            "threshold": float(t.get("min-small-files") or 5),
            "format": lambda v: str(int(v)),
        },
        {
            "key": "delete-load",
            "title": "Delete records / rows",
            "value": lambda p: (
                (float(p.get("deleteRecords") or 0) / p["records"]) if p.get("records") else 0.0
            ),
            "threshold": float(t.get("delete-ratio") or 0.1),
            "format": lambda v: f"{v:.0%}" if v >= 0.01 or v == 0 else f"{v:.1%}",
        },
    ]
    if any(p.get("sortedRuns") is not None for p in parts):
        panels.append(
            {
                "key": "sorted-runs",
                "title": "Sorted runs (worst bucket)",
                "value": lambda p: float(p.get("sortedRuns") or 0),
                "threshold": float(t.get("max-sorted-runs") or 5),
                "format": lambda v: str(int(v)),
            }
        )
    return panels


def rank_partitions(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's partitions, worst first: by the sum of each measure over its threshold (small files,
    delete records over rows, sorted runs), then by name. The partition chart and the report's table show
    this order."""
    parts = [p for p in doc.get("partitions") or [] if isinstance(p, Mapping)]
    panels = _partition_panels(doc, parts)

    def badness(p: Mapping[str, Any]) -> float:
        return float(sum(panel["value"](p) / panel["threshold"] for panel in panels))

    return sorted(parts, key=lambda p: (-badness(p), str(p.get("partition") or "")))


def partition_chart(doc: Mapping[str, Any], *, limit: int = 20, standalone: bool = False) -> str:
    """Small files and delete load per partition, each against its threshold; the worst ``limit`` shown.

    Args:
        doc: the health document; reads ``partitions`` and ``thresholds``.
        limit: most partitions drawn (the worst by the sum of each measure over its threshold, then by name).
        standalone: add the SVG namespace.

    Returns:
        One ``<svg>`` element: per partition and measure a ``<rect class="pbar <measure> ok|warn"
        data-partition=... data-value=...>``, and a ``<line class="threshold">`` per measure.
    """
    parts = rank_partitions(doc)
    title = "Small files and delete load per partition"
    if not parts:
        return _empty("partitions", title, "No data files, so no partition", standalone)
    panels = _partition_panels(doc, parts)
    shown = parts[:limit]
    unpartitioned = len(parts) == 1 and not parts[0].get("partition")
    subtitle = (
        "unpartitioned table"
        if unpartitioned
        else f"the {len(shown)} worst of {len(parts)} partitions"
        if len(shown) < len(parts)
        else f"{len(parts)} partition{'' if len(parts) == 1 else 's'}, worst first"
    )
    row, label_w, gap = 24, 170, 16
    top = TOP + 18
    height = top + row * len(shown) + 44
    panel_w = (WIDTH - LEFT - label_w - RIGHT - gap * (len(panels) - 1)) / len(panels)
    body: list[str] = []
    for i, p in enumerate(shown):
        name = str(p.get("partition") or "")
        y = top + i * row
        body.append(
            f'<text x="{LEFT + label_w - 8}" y="{_n(y + row / 2 + 4)}" text-anchor="end" font-size="11"'
            f' fill="{COLORS["text"]}" class="plabel"><title>{_e(name or "(unpartitioned)")}</title>'
            f"{_e(_partition_label(name))}</text>"
        )
    for j, panel in enumerate(panels):
        x0 = LEFT + label_w + j * (panel_w + gap)
        body += _panel(panel, shown, x0, panel_w, top, row)
    if len(shown) < len(parts):
        body.append(
            _text(
                LEFT,
                height - 10,
                f"Showing the {len(shown)} worst of {len(parts)} partitions (by small files and delete load "
                f"against their thresholds); {len(parts) - len(shown)} not shown.",
                size=11,
                fill=COLORS["muted"],
                class_="note",
            )
        )
    return _svg("partitions", height, title, subtitle, body, standalone)


def _panel(
    panel: Mapping[str, Any],
    shown: Sequence[Mapping[str, Any]],
    x0: float,
    width: float,
    top: float,
    row: float,
) -> list[str]:
    """One measure's column: its title, a bar per partition, the threshold line."""
    values = [panel["value"](p) for p in shown]
    scale = max([*values, panel["threshold"]]) * 1.15 or 1.0
    bottom = top + row * len(shown)
    out = [
        _text(x0, top - 6, panel["title"], size=11, font_weight="bold"),
        f'<line x1="{_n(x0)}" y1="{_n(top)}" x2="{_n(x0)}" y2="{_n(bottom)}" stroke="{COLORS["axis"]}"/>',
    ]
    for i, (p, value) in enumerate(zip(shown, values, strict=True)):
        state = "warn" if value >= panel["threshold"] else "ok"
        w = value / scale * width
        y = top + i * row + 5
        out.append(
            f'<rect class="pbar {panel["key"]} {state}" data-partition="{_e(p.get("partition") or "")}"'
            f' data-value="{_e(round(value, 6))}" x="{_n(x0)}" y="{_n(y)}" width="{_n(w)}"'
            f' height="{_n(row - 10)}" fill="{COLORS[state]}"/>'
        )
        out.append(_text(x0 + w + 4, y + row - 13, panel["format"](value), size=10, fill=COLORS["axis"]))
    tx = x0 + panel["threshold"] / scale * width
    out.append(
        f'<line class="threshold" data-measure="{panel["key"]}" x1="{_n(tx)}" y1="{_n(top)}" x2="{_n(tx)}"'
        f' y2="{_n(bottom)}" stroke="{COLORS["threshold"]}" stroke-width="1.5" stroke-dasharray="5 4"/>'
    )
    out.append(
        _text(tx, bottom + 14, f"threshold {panel['format'](panel['threshold'])}", anchor="middle", size=10,
              fill=COLORS["threshold"])
    )  # fmt: skip
    return out


def duration_text(ms: float) -> str:
    """``432000000`` -> ``"5 d"``, ``5400000`` -> ``"1.5 h"``, ``1`` -> ``"1 ms"``: the largest unit reaching 1."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{ms:.0f} ms"


def _time_label(ms: float, span: float) -> str:
    moment = datetime.fromtimestamp(ms / 1000, timezone.utc)
    if span >= 2 * 86_400_000:
        return moment.strftime("%Y-%m-%d")
    if span >= 10_000:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%H:%M:%S.%f")[:-3]


def snapshot_chart(doc: Mapping[str, Any], *, standalone: bool = False) -> str:
    """The snapshots kept over their commit times, against the retention cut.

    Args:
        doc: the health document; reads ``snapshots`` (``times``, ``nowMs``, ``retentionMs``, ``minRetained``,
            ``count``, ``expirable``).
        standalone: add the SVG namespace.

    Returns:
        One ``<svg>`` element: a ``<circle class="snap expirable|kept" data-time=...>`` per snapshot (up to
        400 of them; beyond, the step line only), a ``<line class="retention-cut" data-time=...>`` where the
        retention cuts when that falls on the chart.
    """
    s = doc.get("snapshots") or {}
    times = sorted(int(t) for t in s.get("times") or [])
    count = int(s.get("count") or len(times))
    expirable = int(s.get("expirable") or 0)
    retention = s.get("retentionMs")
    keep = s.get("minRetained")
    rule = "retention " + ("not set" if retention is None else duration_text(float(retention)))
    if keep is not None:
        rule += f", at least {keep} kept"
    title = "Snapshots over time against the retention"
    if not times:
        message = (
            "No snapshots"
            if count == 0
            else f"{count} snapshot(s), {expirable} expirable ({rule}); commit times not collected"
        )
        return _empty("snapshots", title, message, standalone)
    now = max(int(s.get("nowMs") or times[-1]), times[-1])
    cut = None if retention is None else now - int(retention)
    start = times[0]
    if cut is not None and cut < start and now - cut <= 2 * max(now - start, 1):
        start = cut
    span = max(now - start, 1)
    subtitle = f"{count} snapshot(s), {expirable} past the retention; {rule}"
    if len(times) < count:
        subtitle += f"; the {len(times)} commit times collected are drawn"
    height, plot_w = 300, WIDTH - LEFT - RIGHT
    y0, plot_h = height - BOTTOM, height - BOTTOM - TOP - 14
    ticks = _ticks(len(times))

    def x_of(ms: float) -> float:
        return LEFT + (ms - start) / span * plot_w

    def y_of(n: float) -> float:
        return y0 - n / ticks[-1] * plot_h

    body = _y_axis(ticks, y0, plot_h, "snapshots kept")
    body += _retention_marks(cut, start, now, rule, x_of, y0, plot_h)
    body += _snapshot_marks(times, min(expirable, len(times)), now, x_of, y_of)
    for i in range(5):
        ms = start + span * i / 4
        x = x_of(ms)
        body.append(f'<line x1="{_n(x)}" y1="{y0}" x2="{_n(x)}" y2="{y0 + 4}" stroke="{COLORS["axis"]}"/>')
        anchor = "end" if i == 4 else "middle"
        body.append(_text(x, y0 + 16, _time_label(ms, span), anchor=anchor, size=10, fill=COLORS["axis"]))
    body.append(f'<line x1="{LEFT}" y1="{y0}" x2="{WIDTH - RIGHT}" y2="{y0}" stroke="{COLORS["axis"]}"/>')
    day = datetime.fromtimestamp(now / 1000, timezone.utc).strftime("%Y-%m-%d")
    axis = "commit time (UTC)" if span >= 2 * 86_400_000 else f"commit time (UTC, report of {day})"
    body.append(_text(LEFT + plot_w / 2, y0 + 34, axis, anchor="middle", size=11))
    legend_y = height - 8
    body += _swatch(LEFT, legend_y, COLORS["ok"], "kept")
    body += _swatch(LEFT + 60, legend_y, COLORS["warn"], "expirable")
    body += _swatch(LEFT + 150, legend_y, COLORS["threshold"], "retention cut", dashed=True, line=True)
    return _svg("snapshots", height, title, subtitle, body, standalone)


def _retention_marks(
    cut: int | None, start: int, now: int, rule: str, x_of: Any, y0: float, plot_h: float
) -> list[str]:
    """The shaded past-retention side and the cut line, or a sentence when the cut is off the chart."""
    if cut is None:
        return []
    if cut < start:
        return [_text(LEFT + 8, y0 - plot_h + 4, f"every snapshot is younger than the {rule.split(',')[0]}",
                      size=10, fill=COLORS["muted"], class_="retention-note")]  # fmt: skip
    x = x_of(min(cut, now))
    return [
        f'<rect class="past-retention" x="{LEFT}" y="{_n(y0 - plot_h - 6)}" width="{_n(x - LEFT)}"'
        f' height="{_n(plot_h + 6)}" fill="{COLORS["past"]}"/>',
        f'<line class="retention-cut" data-time="{cut}" x1="{_n(x)}" y1="{_n(y0 - plot_h - 6)}" x2="{_n(x)}"'
        f' y2="{y0}" stroke="{COLORS["threshold"]}" stroke-width="2" stroke-dasharray="6 4"/>',
        _text(x - 4, y0 - plot_h + 6, "past retention", anchor="end", size=10, fill=COLORS["threshold"]),
    ]


def _snapshot_marks(times: list[int], expirable: int, now: int, x_of: Any, y_of: Any) -> list[str]:
    """The cumulative step line (to the report's time) and a dot per snapshot, the oldest ``expirable`` marked."""
    steps: dict[str, tuple[int, int]] = {}  # x (rounded) -> (count before, count after): one riser per x
    for i, t in enumerate(times):
        x = _n(x_of(t))
        steps[x] = (steps[x][0] if x in steps else i, i + 1)
    points = [f"{x},{_n(y_of(lo))} {x},{_n(y_of(hi))}" for x, (lo, hi) in steps.items()]
    points.append(f"{_n(x_of(now))},{_n(y_of(len(times)))}")
    out = [f'<polyline points="{" ".join(points)}" fill="none" stroke="{COLORS["ok"]}" stroke-width="1.5"/>']
    if len(times) > 400:
        return out
    radius = 3.5 if len(times) <= 60 else 2.2
    for i, t in enumerate(times):
        kind = "expirable" if i < expirable else "kept"
        moment = datetime.fromtimestamp(t / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        out.append(
            f'<circle class="snap {kind}" data-time="{t}" cx="{_n(x_of(t))}" cy="{_n(y_of(i + 1))}"'
            f' r="{radius}" fill="{COLORS["warn" if kind == "expirable" else "ok"]}">'
            f"<title>snapshot committed {moment} UTC ({kind})</title></circle>"
        )
    return out
