"""Maintenance on demand: an ``AssetWatcher`` computes the table's health in the triggerer and starts this DAG
when the table crosses a threshold (by default: at least 500 small data files), which compacts its data and
expires its snapshots.

The watcher's trigger is ``LakeformatHealthTrigger`` (``airflow_lakeformat/triggers/health.py``): every
``LAKEFORMAT_HEALTH_WATCH_POLL_INTERVAL`` seconds (default 300) it computes ``table.health()`` from the metadata
and fires once per crossing (not again until the table is back under the threshold). Its Asset is
``x-lakeformat-health:lakeformat://<conn_id>/<table>``, not the table's own Asset, which every write updates.

Settings come from the environment so the file parses before any connection exists (naming the Asset and
building the trigger read no connection; the triggerer reads it when it runs the trigger):

* ``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``), ``LAKEFORMAT_DEMO_TABLE`` (default ``demo.events``).
* ``LAKEFORMAT_HEALTH_WATCH_SMALL_FILES`` (default 500): the small-file count that starts maintenance.
* ``LAKEFORMAT_HEALTH_WATCH_CONDITIONS``: JSON conditions instead, e.g. ``{"score_below": 60}`` or
  ``{"operations": ["compact_data", "compact_manifests"]}`` (``triggers/health_watch.py``); a bad one makes
  this file an import error naming the key.
* ``LAKEFORMAT_HEALTH_WATCH_POLL_INTERVAL`` (seconds, default 300).

The DAG starts paused (``is_paused_upon_creation``), even where Airflow unpauses new DAGs, as the scheduled
maintenance does: unpause it once the table exists.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.triggers.health import health_watched_asset

CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
SMALL_FILES = int(os.environ.get("LAKEFORMAT_HEALTH_WATCH_SMALL_FILES") or 500)
_CONDITIONS_JSON = os.environ.get("LAKEFORMAT_HEALTH_WATCH_CONDITIONS")
CONDITIONS: dict[str, Any] = json.loads(_CONDITIONS_JSON) if _CONDITIONS_JSON else {"smallFiles": SMALL_FILES}
POLL_INTERVAL = float(os.environ.get("LAKEFORMAT_HEALTH_WATCH_POLL_INTERVAL") or 300)

# The Asset and its watcher: no connection is read here.
HEALTH = health_watched_asset(TABLE, CONDITIONS, lakeformat_conn_id=CONN_ID, poll_interval=POLL_INTERVAL)

DOC_MD = f"""
### Maintenance when the table needs it

An Asset watcher computes the health of `{TABLE}` every {POLL_INTERVAL:g} s in the triggerer (metadata only)
and queues a run when it crosses `{json.dumps(CONDITIONS)}`; it fires once per crossing, again only after the
table was back under. The run prints what crossed (`crossed`), compacts the small data files (`compact_data`)
and expires snapshots with the table's own retention (`expire_snapshots`, which deletes the replaced files
once no retained snapshot uses them). A manual run does the same without an event.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`), read by the triggerer and the tasks,
never when this file is parsed.

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID`, `LAKEFORMAT_DEMO_TABLE` (default
`demo.events`), `LAKEFORMAT_HEALTH_WATCH_SMALL_FILES` (default 500), `LAKEFORMAT_HEALTH_WATCH_CONDITIONS` (JSON,
e.g. `{{"score_below": 60}}`), `LAKEFORMAT_HEALTH_WATCH_POLL_INTERVAL` (seconds, default 300).

**Paused**: this DAG starts paused, even where Airflow unpauses new DAGs (it changes the table), and a paused
DAG gets no runs from its Asset's events: unpause it for the watcher to start maintenance, with the toggle next
to its name or `airflow dags unpause lakeformat_health_watch`."""

with DAG(
    dag_id="lakeformat_health_watch",
    description="Compacts the table when its health crosses a threshold (an AssetWatcher on its health)",
    doc_md=DOC_MD,
    schedule=[HEALTH],
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=True,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Unticked (the default): the table is compacted. Ticked: only report what would change.",
        ),
        "execution": Param(
            "auto",
            enum=["auto", "local", "spark"],
            title="Where to run",
            description="auto: Spark (connection spark_default) for large tables, else in the worker.",
        ),
    },
    tags=["lakeformat", "maintenance", "health"],
) as dag:

    @task
    def crossed(**context: Any) -> list[dict[str, Any]]:
        """What the watcher saw: the crossed conditions and the health summary of each triggering event."""
        matches = []
        for event in context["triggering_asset_events"].get(HEALTH, []):
            match = ((event.extra or {}).get("payload") or {}).get("match")
            if match:
                matches.append(
                    {k: match.get(k) for k in ("table", "score", "crossed", "operations", "summary")}
                )
                print(f"{match.get('summary')}; crossed: {match.get('crossed')}")
        if not matches:
            print(f"{TABLE}: a manual run (no health event)")
        return matches

    shared: dict[str, Any] = {
        "table": TABLE,
        "lakeformat_conn_id": CONN_ID,
        "dry_run": "{{ params.dry_run }}",
        "execution": "{{ params.execution }}",
    }
    compact = LakeformatCompactDataOperator(task_id="compact_data", skip_unsupported=True, **shared)
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots", trigger_rule="none_failed", **shared
    )
    crossed() >> compact >> expire
