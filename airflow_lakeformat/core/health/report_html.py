"""The health report as one self-contained HTML file: the score, the recommendations, the charts, the partitions.

:func:`render_report` takes one health document (``TableHealth.to_json()``, what ``lakeformat health --json``
prints and the health operator returns) or several, and returns the page as text; :func:`write_report`
writes it. The page is one file that needs nothing else when opened: the CSS is inline, the charts are
inline SVG (``core/health/charts.py``), there is no script, no font, image or style sheet fetched and no
link out of the page (several tables link to their own sections, ``#table-1``...).

Per table, in reading order: the score with the points each load took off, key figures (files, small files,
deletes, snapshots, manifests, metadata, orphans when measured), the recommendations (operation, reason,
metric with its value and threshold, what the operation is expected to change, the facade arguments), what
a policy suppressed (when a policy applied), the three charts, the per-partition table (worst first, at most
:data:`MAX_PARTITION_ROWS` rows, the rest counted) and the thresholds used. With several documents a summary
table comes first. Every text from a document is escaped. The page is deterministic: its time is the
newest ``snapshots.nowMs`` of the documents, never the clock.

This module is neutral: it imports no format.

Example:
    >>> from airflow_lakeformat.core.tables import open_table  # doctest: +SKIP
    >>> write_report(open_table("/wh/db.db/events").health().to_json(), "events.html")  # doctest: +SKIP
    PosixPath('events.html')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.health.charts import (
    duration_text,
    file_size_chart,
    partition_chart,
    rank_partitions,
    snapshot_chart,
)
from airflow_lakeformat.core.maintenance.results import human_bytes

#: At most this many partitions are listed per table (the worst first); the others are counted.
MAX_PARTITION_ROWS = 200

CSS = """
* { box-sizing: border-box; }
body { margin: 0; background: #f3f5f8; color: #1f2933; font: 14px/1.45 Helvetica, Arial, sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 24px 28px 48px; }
header.page h1 { font-size: 24px; margin: 0 0 4px; }
header.page p, .muted { color: #6b7480; margin: 0; }
section.table { background: #fff; border: 1px solid #dde2e8; border-radius: 8px; padding: 20px 24px;
  margin: 20px 0; }
section.table h2 { font-size: 19px; margin: 0 0 2px; word-break: break-all; }
h3 { font-size: 15px; margin: 22px 0 8px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; background: #e8eef7; color: #2d4f7c;
  font-size: 12px; margin-left: 6px; vertical-align: middle; }
.overview { display: flex; gap: 20px; align-items: stretch; flex-wrap: wrap; margin-top: 14px; }
.score { width: 170px; border-radius: 8px; padding: 12px 14px; color: #fff; }
.score .value { font-size: 46px; font-weight: bold; line-height: 1; }
.score .label { font-size: 12px; opacity: .9; }
.score ul { margin: 8px 0 0; padding: 0; list-style: none; font-size: 12px; }
.score.good { background: #2e8b57; } .score.fair { background: #c7851f; } .score.poor { background: #c2452d; }
.figures { flex: 1; display: grid; grid-template-columns: repeat(4, minmax(120px, 1fr)); gap: 10px; }
.figure { background: #f7f8fa; border: 1px solid #e4e7eb; border-radius: 6px; padding: 8px 10px; }
.figure .k { font-size: 11px; color: #6b7480; text-transform: uppercase; letter-spacing: .03em; }
.figure .v { font-size: 18px; font-weight: bold; }
.figure .s { font-size: 12px; color: #6b7480; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e4e7eb; vertical-align: top; }
th { background: #f7f8fa; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.warn { color: #b5472b; font-weight: 600; }
code { font: 12px Menlo, Consolas, monospace; background: #f3f5f8; padding: 1px 4px; border-radius: 3px;
  overflow-wrap: anywhere; }
td.metric code { white-space: nowrap; }
.op { font-weight: 600; white-space: nowrap; }
.healthy { background: #e9f6ee; border: 1px solid #b9e0c7; color: #1e6b40; padding: 10px 12px;
  border-radius: 6px; }
.charts svg { display: block; width: 100%; max-width: 980px; height: auto; margin: 12px 0;
  border: 1px solid #eef0f3; border-radius: 6px; }
footer { color: #6b7480; font-size: 12px; margin-top: 28px; }
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _documents(docs: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One document or several, as a list; anything else is refused (UsageError)."""
    found = [docs] if isinstance(docs, Mapping) else list(docs) if isinstance(docs, Sequence) else []
    if not found or isinstance(docs, str) or not all(isinstance(d, Mapping) for d in found):
        raise UsageError("render_report needs a health document (a mapping) or a non-empty list of them")
    return found


def _score_class(score: int) -> str:
    return "good" if score >= 80 else "fair" if score >= 50 else "poor"


def _figure(key: str, value: object, sub: str = "") -> str:
    sub_html = f'<div class="s">{_e(sub)}</div>' if sub else ""
    return (
        f'<div class="figure"><div class="k">{_e(key)}</div><div class="v">{_e(value)}</div>{sub_html}</div>'
    )


def _overview(doc: Mapping[str, Any]) -> str:
    """The score card with its penalties and the key figures."""
    score = int(doc.get("score") or 0)
    penalties = doc.get("penalties") or {}
    names = {"smallFiles": "small files", "deleteLoad": "delete load", "positionDeletes": "position deletes"}
    lost = "".join(f"<li>\u2212{_e(penalties[k])} {v}</li>" for k, v in names.items() if penalties.get(k))
    card = (
        f'<div class="score {_score_class(score)}"><div class="label">health score</div>'
        f'<div class="value">{score}</div><ul>{lost or "<li>no penalty</li>"}</ul></div>'
    )
    f, d, s, m = (doc.get(k) or {} for k in ("files", "deletes", "snapshots", "manifests"))
    retention = s.get("retentionMs")
    figures = [
        _figure("data files", f.get("dataFiles", 0), human_bytes(f.get("dataBytes"))),
        _figure("small files", f.get("smallFiles", 0), f"under {human_bytes(f.get('smallFileThreshold'))}"),
        _figure(
            "average file",
            human_bytes(f.get("averageFileSize")),
            f"target {human_bytes(f.get('targetFileSize'))}",
        ),
        _figure("partitions", f.get("partitions", 0)),
        _figure("delete files", d.get("deleteFiles", 0), _delete_note(d)),
        _figure(
            "snapshots",
            s.get("count", 0),
            f"{s.get('expirable', 0)} expirable"
            + ("" if retention is None else f"; retention {duration_text(float(retention))}"),
        ),
        _figure("manifests", m.get("count", 0), f"{m.get('small', 0)} small; {human_bytes(m.get('bytes'))}"),
        _figure(
            "metadata", "n/a" if doc.get("metadataBytes") is None else human_bytes(doc.get("metadataBytes"))
        ),
    ]
    orphans = doc.get("orphans")
    if isinstance(orphans, Mapping):
        figures.append(_figure("orphan files", orphans.get("files", 0), human_bytes(orphans.get("bytes"))))
    expirable = doc.get("expirablePartitions")
    if expirable:
        figures.append(_figure("expired partitions", len(expirable), ", ".join(map(str, expirable[:3]))))
    return f'<div class="overview">{card}<div class="figures">{"".join(figures)}</div></div>'


def _delete_note(d: Mapping[str, Any]) -> str:
    if d.get("maxSortedRuns") is not None:
        return f"most sorted runs per bucket {d['maxSortedRuns']}; {d.get('deleteRecords', 0)} DELETE records"
    rows = int(d.get("positionDeleteRecords") or 0) + int(d.get("equalityDeleteRecords") or 0)
    return f"{rows} deleted rows" + (
        f", {d['deleteRecords']} DELETE records" if d.get("deleteRecords") else ""
    )


def _recommendations(doc: Mapping[str, Any]) -> str:
    """The recommendations table, or a sentence that the table needs nothing."""
    recs = [r for r in doc.get("recommendations") or [] if isinstance(r, Mapping)]
    if not recs:
        return '<p class="healthy">Nothing to do: no measure crossed its threshold.</p>'
    rows = []
    for r in recs:
        arguments = r.get("arguments") or {}
        args = f"<code>{_e(json.dumps(arguments, sort_keys=True))}</code>" if arguments else "\u2014"
        rows.append(
            f'<tr><td class="op">{_e(r.get("operation"))}</td><td>{_e(r.get("reason"))}</td>'
            f'<td class="metric"><code>{_e(r.get("metric"))}</code><br>{_e(r.get("value"))} '
            f"(threshold {_e(r.get('threshold'))})"
            f"</td><td>{_e(r.get('expected'))}</td><td>{args}</td></tr>"
        )
    head = "<tr><th>operation</th><th>reason</th><th>metric</th><th>expected</th><th>arguments</th></tr>"
    return f'<table class="recommendations">{head}{"".join(rows)}</table>'


def _policy(doc: Mapping[str, Any]) -> str:
    """What the policy applied and the operations it suppressed (nothing without a policy)."""
    policy = doc.get("policy")
    if not isinstance(policy, Mapping):
        return ""
    suppressed = [s for s in policy.get("suppressed") or [] if isinstance(s, Mapping)]
    items = "".join(
        f'<li><span class="op">{_e(s.get("operation"))}</span> suppressed by <code>{_e(s.get("rule"))}</code>:'
        f" {_e(s.get('reason'))}</li>"
        for s in suppressed
    )
    allowed = ", ".join(map(str, policy.get("operations") or [])) or "none"
    return (
        f'<h3>Policy</h3><p class="policy">From <code>{_e(policy.get("source"))}</code>; operations allowed: '
        f"{_e(allowed)}.</p>" + (f'<ul class="suppressed">{items}</ul>' if items else "")
    )


def _partitions(doc: Mapping[str, Any]) -> str:
    """The per-partition table, worst first, at most MAX_PARTITION_ROWS rows."""
    parts = rank_partitions(doc)
    if not parts:
        return '<p class="muted">No data files.</p>'
    thresholds = doc.get("thresholds") or {}
    min_small = thresholds.get("min-small-files") or 5
    ratio = thresholds.get("delete-ratio") or 0.1
    runs = any(p.get("sortedRuns") is not None for p in parts)
    head = (
        "<tr><th>partition</th><th class=num>data files</th><th class=num>bytes</th><th class=num>records</th>"
        "<th class=num>small files</th><th class=num>average file</th><th class=num>delete files</th>"
        "<th class=num>delete records</th>" + ("<th class=num>sorted runs</th>" if runs else "") + "</tr>"
    )
    rows = []
    for p in parts[:MAX_PARTITION_ROWS]:
        small_warn = " warn" if (p.get("smallFiles") or 0) >= min_small else ""
        records = p.get("records") or 0
        delete_warn = " warn" if records and (p.get("deleteRecords") or 0) / records >= ratio else ""
        cells = [
            f"<td>{_e(p.get('partition') or '(unpartitioned)')}</td>",
            f"<td class=num>{_e(p.get('dataFiles', 0))}</td>",
            f"<td class=num>{_e(human_bytes(p.get('dataBytes')))}</td>",
            f"<td class=num>{_e(records)}</td>",
            f'<td class="num{small_warn}">{_e(p.get("smallFiles", 0))}</td>',
            f"<td class=num>{_e(human_bytes(p.get('averageFileSize')))}</td>",
            f"<td class=num>{_e(p.get('deleteFiles', 0))}</td>",
            f'<td class="num{delete_warn}">{_e(p.get("deleteRecords", 0))}</td>',
        ]
        if runs:
            cells.append(f"<td class=num>{_e('' if p.get('sortedRuns') is None else p['sortedRuns'])}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    rest = len(parts) - MAX_PARTITION_ROWS
    note = f'<p class="muted">{rest} more partition(s), healthier, not listed.</p>' if rest > 0 else ""
    return f'<table class="partitions">{head}{"".join(rows)}</table>{note}'


def _thresholds(doc: Mapping[str, Any]) -> str:
    thresholds = doc.get("thresholds") or {}
    if not thresholds:
        return ""
    cells = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td class=num>{_e(v)}</td></tr>" for k, v in thresholds.items()
    )
    return f'<h3>Thresholds used</h3><table class="thresholds" style="width:auto">{cells}</table>'


def _section(doc: Mapping[str, Any], index: int) -> str:
    """One table's section."""
    snapshot = doc.get("snapshotId")
    where = "no snapshot" if snapshot is None else f"snapshot {snapshot}"
    return "\n".join(
        [
            f'<section class="table" id="table-{index}">',
            f'<h2>{_e(doc.get("table"))}<span class="badge">{_e(doc.get("format"))}</span></h2>',
            f'<p class="muted">{_e(where)}</p>',
            _overview(doc),
            "<h3>Recommendations</h3>",
            _recommendations(doc),
            _policy(doc),
            '<h3>Charts</h3><div class="charts">',
            file_size_chart(doc),
            partition_chart(doc),
            snapshot_chart(doc),
            "</div>",
            "<h3>Partitions</h3>",
            _partitions(doc),
            _thresholds(doc),
            "</section>",
        ]
    )


def _summary(docs: Sequence[Mapping[str, Any]]) -> str:
    """The table of tables (several documents only), each linking to its section."""
    rows = []
    for i, doc in enumerate(docs, 1):
        ops = ", ".join(str(r.get("operation")) for r in doc.get("recommendations") or []) or "nothing"
        score = int(doc.get("score") or 0)
        rows.append(
            f'<tr><td><a href="#table-{i}">{_e(doc.get("table"))}</a></td><td>{_e(doc.get("format"))}</td>'
            f'<td class="num {"warn" if score < 80 else ""}">{score}</td><td>{_e(ops)}</td></tr>'
        )
    head = "<tr><th>table</th><th>format</th><th class=num>score</th><th>recommended</th></tr>"
    return f'<section class="table"><h2>{len(docs)} tables</h2><table class="summary">{head}{"".join(rows)}</table></section>'


def render_report(docs: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, title: str | None = None) -> str:
    """The HTML report of one health document or several, as one self-contained page.

    Args:
        docs: a health document (``TableHealth.to_json()``) or a list of them (one section each).
        title: the page's title (default: the table's name, or the number of tables).

    Returns:
        The page (UTF-8 text): inline CSS and SVG, no script, no external reference.

    Raises:
        UsageError: neither a document nor a non-empty list of documents (a ``TableHealth`` is given as
            its ``to_json()``).

    Example:
        >>> page = render_report(open_table("/wh/db.db/events").health().to_json())  # doctest: +SKIP
    """
    found = _documents(docs)
    heading = title or ("Table health" if len(found) == 1 else f"Table health: {len(found)} tables")
    name = title or (f"Table health: {found[0].get('table')}" if len(found) == 1 else heading)
    times = [int(t) for d in found if (t := (d.get("snapshots") or {}).get("nowMs"))]
    when = (
        datetime.fromtimestamp(max(times) / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        if times
        else ""
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(name)}</title><style>{CSS}</style></head><body><main>",
        f'<header class="page"><h1>{_e(heading)}</h1><p>Computed from the table metadata only'
        + (f", {_e(when)}" if when else "")
        + ".</p></header>",
    ]
    if len(found) > 1:
        parts.append(_summary(found))
    parts += [_section(doc, i) for i, doc in enumerate(found, 1)]
    parts.append(
        "<footer>score = 100 \u2212 40 \u00d7 small-file load \u2212 40 \u00d7 delete load \u2212 20 \u00d7 "
        "position-delete load, each load between 0 and 1 (docs/health.md). Generated by lakeformat.</footer>"
    )
    parts.append("</main></body></html>\n")
    return "\n".join(parts)


def write_report(
    docs: Mapping[str, Any] | Sequence[Mapping[str, Any]], path: str | Path, *, title: str | None = None
) -> Path:
    """Write :func:`render_report`'s page to ``path`` (parent directories made); returns the path.

    Args:
        docs: a health document or a list of them.
        path: the HTML file to write (replaced when it exists).
        title: the page's title (see :func:`render_report`).

    Example:
        >>> write_report(doc, "reports/events.html")  # doctest: +SKIP
        PosixPath('reports/events.html')
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(docs, title=title), encoding="utf-8")
    return target
