"""Downstream of the Iceberg example table, scheduled on its Asset, which an ``AssetWatcher`` updates: a run
for every commit that adds data, whoever made it, reporting the snapshot(s) the triggering events name.

The Asset is ``watched_table_asset(...)`` (``airflow_lakeformat/triggers/snapshot.py``): its
``LakeformatSnapshotEventTrigger`` runs in the triggerer for as long as an unpaused DAG schedules on the Asset,
polls the table and records one Asset event per commit it sees (several commits between two polls: one event
for the newest, with their count), by any engine: ``lakeformat_iceberg_ingest``, the appends of
``lakeformat_iceberg_maintenance``, Spark, Flink, Trino or pyiceberg. It ignores ``REPLACE`` snapshots (and
Paimon's ``COMPACT``, the same kind): a manifest or data compaction adds no data.

One event per commit: the watcher is the only producer of this Asset. ``lakeformat_iceberg_ingest`` writes
without an outlet (``emit_asset=False``) on purpose; an outlet on the same URI would add a second event for
each of its commits, as the watcher sees that commit too.

The table is ``lakeformat_iceberg_maintenance``'s (``LAKEFORMAT_ICEBERG_TABLE``, default
``demo.events_iceberg``, through ``LAKEFORMAT_ICEBERG_CONN_ID``, else ``LAKEFORMAT_CONN_ID``, else
``lakeformat_default``). The Asset is ``lakeformat://<conn_id>/<namespace>.<table>``
(``airflow_lakeformat/hooks/assets.py``): naming it reads no connection, so this file parses before the
connection exists; the watcher's trigger reads it in the triggerer.
``LAKEFORMAT_WATCHER_POLL_INTERVAL`` sets the seconds between the watcher's looks (default 30).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.triggers.snapshot import watched_table_asset

CONN_ID = (
    os.environ.get("LAKEFORMAT_ICEBERG_CONN_ID")
    or os.environ.get("LAKEFORMAT_CONN_ID")
    or "lakeformat_default"
)
TABLE = os.environ.get("LAKEFORMAT_ICEBERG_TABLE") or "demo.events_iceberg"
POLL_INTERVAL = float(os.environ.get("LAKEFORMAT_WATCHER_POLL_INTERVAL", "30"))
IGNORED = ["REPLACE"]  # also ignores COMPACT, its Paimon name
COMMITS = watched_table_asset(
    TABLE,
    lakeformat_conn_id=CONN_ID,
    table_format="iceberg",
    ignore_commit_kinds=IGNORED,
    poll_interval=POLL_INTERVAL,
)

DOC_MD = f"""
### Run after every commit to the Iceberg table

Scheduled on the table's Asset, `{COMMITS.uri}`, whose watcher runs in the triggerer: every commit that adds
data (not a `replace` snapshot of a compaction), by any engine, records an Asset event and queues a run;
`report` prints and returns the snapshot id(s) the triggering events carry. `lakeformat_iceberg_ingest` has no
outlet, so each of its appends makes exactly one event. A manual run reports none.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_ICEBERG_CONN_ID`, else `LAKEFORMAT_CONN_ID`): the
triggerer opens the table through it; the DAG parses without it (it only names the Asset).

**Environment** (read when the file is parsed): `LAKEFORMAT_ICEBERG_CONN_ID`, `LAKEFORMAT_CONN_ID`,
`LAKEFORMAT_ICEBERG_TABLE` (default `demo.events_iceberg`), `LAKEFORMAT_WATCHER_POLL_INTERVAL` (seconds between
the watcher's looks at the table, now {POLL_INTERVAL:g}).

**Paused**: on a stock Airflow a new DAG starts paused. A paused DAG gets no runs from Asset events, and
Airflow runs the watcher only for Assets an unpaused DAG is scheduled on: unpause it before ingesting, with
the toggle next to its name or `airflow dags unpause lakeformat_iceberg_downstream_asset`. See
`docs/airflow.md`, "Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_iceberg_downstream_asset",
    description="Runs whenever any engine commits new data to the Iceberg demo table (an Asset watcher)",
    doc_md=DOC_MD,
    schedule=[COMMITS],
    catchup=False,
    tags=["lakeformat", "iceberg", "downstream"],
) as dag:

    @task
    def report(**context: Any) -> list[int]:
        """The snapshot ids the triggering Asset events carry (the watcher's payload)."""
        ids = []
        for event in context["triggering_asset_events"].get(COMMITS, []):
            snapshot = ((event.extra or {}).get("payload") or {}).get("snapshot") or {}
            if snapshot.get("id") is None:
                continue
            ids.append(int(snapshot["id"]))
            print(
                f"snapshot {snapshot['id']} ({snapshot.get('commitKind')}) of {snapshot.get('table')}: "
                f"{snapshot.get('newRecords')} new records in {snapshot.get('snapshotsMatched')} commit(s)"
            )
        print(f"{COMMITS.uri}: triggered by snapshot(s) {ids or 'none (a manual run)'}")
        return ids

    report()
