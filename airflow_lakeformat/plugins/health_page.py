"""The HTML of the "Table health" page and of its prefilled trigger form (server-side, self-contained).

Algorithm: every string from a table or a connection is HTML-escaped; the page is one document with inline
CSS, its charts the inline SVG strings of ``core/health/charts.py`` made from each table's health document
(no script, image or font is fetched). The page has a summary (one row per table: score, format, the
operations it needs, a link to its section) and one section per table: score, key figures, the
recommendations with the measure that crossed its threshold, the three charts (file sizes against the
target, small files and deletes per partition, snapshots over time against the retention), and the link to
the trigger form of the manual-maintenance DAG with the table filled in. Unreadable tables come first, then
the lowest scores: the tables that need maintenance are on top.

The trigger form (:func:`render_trigger_form`) lists the DAG's Params, each field holding its default but
``table`` holding the table; submitting it creates the run through Airflow's own REST API
(``POST api/v2/dags/<dag_id>/dagRuns``, authorised by the user's session cookie), so the run is checked
against the Params' schema and the user's permissions exactly as the DAG's own trigger form would.

Example:
    >>> html = render_page([HealthEntry("lakeformat_default", "demo.events", document=doc)])  # doctest: +SKIP
    >>> "demo.events" in html
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

from airflow_lakeformat.core.maintenance.results import human_bytes
from airflow_lakeformat.plugins.health_tables import HealthEntry

MANUAL_MAINTENANCE_DAG = "lakeformat_manual_maintenance"

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 24px;color:#1a202c;
background:#f7fafc}
h1{font-size:1.5rem;margin:0 0 4px}h2{font-size:1.15rem;margin:0}
.sub{color:#4a5568;margin:0 0 16px}
table.summary{border-collapse:collapse;background:#fff;margin-bottom:20px;min-width:60%}
table.summary th,table.summary td{border-bottom:1px solid #e2e8f0;padding:6px 12px;text-align:left}
.score{display:inline-block;min-width:2.6em;text-align:center;border-radius:12px;padding:2px 8px;
font-weight:600;color:#fff}
.good{background:#2f855a}.fair{background:#b7791f}.poor{background:#c53030}.none{background:#718096}
section.table{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:14px 18px;margin-bottom:18px}
.head{display:flex;gap:12px;align-items:center;flex-wrap:wrap}
.facts{color:#4a5568;font-size:.9rem;margin:8px 0}
ul.recs{margin:6px 0 10px;padding-left:20px}ul.recs li{margin:4px 0}.exp{color:#4a5568;font-size:.88rem}
.op{font-family:ui-monospace,monospace;background:#edf2f7;border-radius:4px;padding:1px 5px}
.ok{color:#2f855a;font-weight:600}.err{color:#c53030;white-space:pre-wrap}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(400px,1fr));gap:12px;align-items:start}
.charts figure{margin:0}.charts svg{width:100%;height:auto;max-width:720px;border:1px solid #edf2f7}
a.trigger{display:inline-block;margin-top:10px;background:#0366d6;color:#fff;text-decoration:none;
border-radius:6px;padding:6px 12px}
form.trigger label{display:block;margin:10px 0 2px;font-weight:600}
form.trigger .desc{color:#4a5568;font-size:.85rem;max-width:60em}
form.trigger input[type=text],form.trigger select{min-width:28em;padding:4px}
button{background:#0366d6;color:#fff;border:0;border-radius:6px;padding:7px 14px;margin-top:14px}
"""

CHARTS = (
    ("file_size_chart", "File sizes against the target"),
    ("partition_chart", "Small files and deletes per partition"),
    ("snapshot_chart", "Snapshots over time against the retention"),
)


def score_class(score: int | None) -> str:
    """The badge colour: good from 80, fair from 50, poor under it."""
    if score is None:
        return "none"
    return "good" if score >= 80 else "fair" if score >= 50 else "poor"


def table_label(entry: HealthEntry) -> str:
    """What the page calls a table: its name under the connection (the connection's root: ``(root)``)."""
    return entry.table or "(the connection's table)"


def anchor(entry: HealthEntry) -> str:
    """The id of the table's section (letters, digits and dashes)."""
    raw = f"{entry.conn_id}-{entry.table or 'root'}"
    return "t-" + "".join(c if c.isalnum() else "-" for c in raw)


def trigger_href(entry: HealthEntry, dag_id: str = MANUAL_MAINTENANCE_DAG) -> str:
    """The relative link to the prefilled trigger form of ``dag_id`` for the entry's table."""
    query = {"dag_id": dag_id, "table": entry.table, "conn_id": entry.conn_id}
    return "trigger?" + urlencode(query)


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{body}</body></html>"
    )


def _recommendations(document: Mapping[str, Any]) -> str:
    recommendations = document.get("recommendations") or []
    if not recommendations:
        return '<p class="ok recs">Healthy: no maintenance needed.</p>'
    items = []
    for rec in recommendations:
        expected = (
            f'<br><span class="exp">Expected: {escape(str(rec["expected"]))}</span>'
            if rec.get("expected")
            else ""
        )
        items.append(
            f'<li><span class="op">{escape(str(rec["operation"]))}</span> '
            f"{escape(str(rec.get('reason', '')))}{expected}</li>"
        )
    return f'<ul class="recs">{"".join(items)}</ul>'


def _facts(document: Mapping[str, Any]) -> str:
    files = document.get("files") or {}
    deletes = document.get("deletes") or {}
    snapshots = document.get("snapshots") or {}
    manifests = document.get("manifests") or {}
    parts = [
        f"{files.get('dataFiles', 0)} data files ({human_bytes(int(files.get('dataBytes') or 0))})",
        f"{files.get('smallFiles', 0)} small",
        f"{deletes.get('deleteFiles', 0)} delete files",
        f"{snapshots.get('count', 0)} snapshots",
        f"{manifests.get('count', 0)} manifests",
    ]
    return f'<p class="facts">{escape(" · ".join(parts))}</p>'


def _charts(document: Mapping[str, Any]) -> str:
    from airflow_lakeformat.core.health import charts

    figures = []
    for function, caption in CHARTS:
        svg = getattr(charts, function)(dict(document))
        figures.append(f'<figure title="{escape(caption)}">{svg}</figure>')
    return f'<div class="charts">{"".join(figures)}</div>'


def _section(entry: HealthEntry, dag_id: str) -> str:
    title = f"{escape(table_label(entry))} <small>({escape(entry.conn_id)})</small>"
    if entry.document is None:
        return (
            f'<section class="table" id="{anchor(entry)}"><div class="head"><h2>{title}</h2>'
            f'<span class="score none">?</span></div><p class="err">{escape(entry.error or "")}</p></section>'
        )
    document = entry.document
    score = document.get("score")
    fmt = escape(str(document.get("format", "")))
    link = escape(trigger_href(entry, dag_id))
    return (
        f'<section class="table" id="{anchor(entry)}" data-table="{escape(entry.table)}">'
        f'<div class="head"><h2>{title}</h2><span class="score {score_class(score)}">{score}</span>'
        f"<span>{fmt}</span></div>{_facts(document)}{_recommendations(document)}{_charts(document)}"
        f'<a class="trigger" href="{link}">Maintain this table: open the trigger form of {escape(dag_id)}</a>'
        "</section>"
    )


def _summary(entries: Sequence[HealthEntry]) -> str:
    rows = []
    for entry in entries:
        document = entry.document or {}
        score = document.get("score")
        needs = ", ".join(str(r["operation"]) for r in document.get("recommendations") or [])
        needs = needs or ("nothing" if entry.document is not None else "unreadable")
        rows.append(
            f'<tr><td><a href="#{anchor(entry)}">{escape(table_label(entry))}</a></td>'
            f"<td>{escape(entry.conn_id)}</td><td>{escape(str(document.get('format', '')))}</td>"
            f'<td><span class="score {score_class(score)}">{"?" if score is None else score}</span></td>'
            f"<td>{escape(needs)}</td></tr>"
        )
    head = "<tr><th>Table</th><th>Connection</th><th>Format</th><th>Score</th><th>Needs</th></tr>"
    return f'<table class="summary">{head}{"".join(rows)}</table>'


def render_page(entries: Sequence[HealthEntry], *, dag_id: str = MANUAL_MAINTENANCE_DAG) -> str:
    """The whole "Table health" page.

    Args:
        entries: the tables and their documents (``health_tables.collect_entries``).
        dag_id: the DAG whose trigger form each table links to.

    Returns:
        One self-contained HTML document.

    Example:
        >>> render_page([]).count("<section")
        0
    """
    count = len(entries)
    intro = (
        f'<h1>Table health</h1><p class="sub">{count} table{"s" if count != 1 else ""} of the lakeformat '
        "connections, scored 0-100 from their metadata; the recommendations name the operations each needs."
        "</p>"
    )
    if not entries:
        body = intro + (
            "<p>No table found: create a connection of type <b>lakeformat</b> (or list connection ids in "
            "<code>[lakeformat] health_ui_conn_ids</code>).</p>"
        )
        return _page("Table health", body)
    ordered = sorted(entries, key=attention_order)
    sections = "".join(_section(entry, dag_id) for entry in ordered)
    return _page("Table health", intro + _summary(ordered) + sections)


def attention_order(entry: HealthEntry) -> tuple[int, int, str, str]:
    """Unreadable tables first, then the lowest scores (the tables that need maintenance), then by name."""
    if entry.document is None:
        return (0, 0, entry.conn_id, entry.table)
    return (1, int(entry.document.get("score") or 0), entry.conn_id, entry.table)


def _field(name: str, param: Mapping[str, Any], value: Any) -> str:
    schema = param.get("schema") or {}
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    label = escape(str(schema.get("title") or name))
    description = escape(str(param.get("description") or schema.get("description") or ""))
    attrs = f'name="{escape(name)}" id="p-{escape(name)}" data-types="{escape(json.dumps(types))}"'
    if "boolean" in types:
        checked = " checked" if value else ""
        control = f'<input type="checkbox" {attrs}{checked}>'
    elif schema.get("enum"):
        options = "".join(
            f'<option value="{escape("" if o is None else str(o))}"'
            f"{' selected' if o == value else ''}>{escape('(default)' if o is None else str(o))}</option>"
            for o in schema["enum"]
        )
        control = f"<select {attrs}>{options}</select>"
    else:
        shown = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        control = f'<input type="text" {attrs} value="{escape(str(shown))}">'
    return f'<label for="p-{escape(name)}">{label}</label>{control}<div class="desc">{description}</div>'


SUBMIT_SCRIPT = """
document.getElementById('trigger-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const conf = {};
  for (const el of event.target.querySelectorAll('[data-types]')) {
    const types = JSON.parse(el.dataset.types);
    if (el.type === 'checkbox') { conf[el.name] = el.checked; continue; }
    const text = el.value.trim();
    if (text === '' && types.includes('null')) { conf[el.name] = null; continue; }
    conf[el.name] = (types.includes('integer') || types.includes('number')) && text !== '' ? Number(text) : text;
  }
  const out = document.getElementById('result');
  const dagId = event.target.dataset.dag;
  const response = await fetch('../api/v2/dags/' + encodeURIComponent(dagId) + '/dagRuns', {
    method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({logical_date: null, conf: conf})});
  const body = await response.json().catch(() => ({}));
  out.textContent = response.ok ? 'Triggered run ' + body.dag_run_id : 'Refused: ' + JSON.stringify(body.detail ?? body);
});
"""


def render_trigger_form(
    dag_id: str, params: Mapping[str, Mapping[str, Any]] | None, prefill: Mapping[str, Any]
) -> str:
    """The trigger form of ``dag_id``: its Params with their defaults, overridden by ``prefill``.

    Args:
        dag_id: the DAG to trigger.
        params: name -> ``{"value", "schema", "description"}`` (the serialized DAG's Params); None when the
            DAG is not (yet) known to Airflow.
        prefill: values filled in (e.g. ``{"table": "demo.events"}``).

    Example:
        >>> 'value="demo.events"' in render_trigger_form("d", {"table": {"value": "x"}}, {"table": "demo.events"})
        True
    """
    title = f"Trigger {dag_id}"
    if params is None:
        body = f"<h1>{escape(title)}</h1><p class='err'>DAG {escape(dag_id)} is not known to Airflow.</p>"
        return _page(title, body)
    fields = "".join(
        _field(name, param, prefill.get(name, param.get("value"))) for name, param in params.items()
    )
    body = (
        f'<h1>{escape(title)}</h1><p class="sub">The form of the DAG\'s Params, filled in for '
        f"{escape(str(prefill.get('table', '')))}; <b>Trigger</b> creates the run through Airflow's REST API.</p>"
        f'<form class="trigger" id="trigger-form" data-dag="{escape(dag_id)}">{fields}'
        '<button type="submit">Trigger</button></form><p id="result"></p>'
        f'<p><a href="./">Back to table health</a></p><script>{SUBMIT_SCRIPT}</script>'
    )
    return _page(title, body)
