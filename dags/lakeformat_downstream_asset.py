"""Downstream, scheduled on the table's Asset: runs after every successful ``lakeformat_ingest`` write and
reads the snapshot id its Asset event carries.

The table is the ingest DAG's: ``LAKEFORMAT_DEMO_TABLE`` (default ``demo.events``) placed under the warehouse
of the connection ``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``). The Asset is
``lakeformat://<conn_id>/demo.events`` (``airflow_lakeformat/hooks/assets.py``), the one the ingest DAG's write
emits: naming it reads no connection, so this file parses before the connection exists.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.assets import connection_table_asset

CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
TABLE_ASSET = connection_table_asset(TABLE, CONN_ID)  # lakeformat://<conn_id>/<db>.<table>; no lookup

DOC_MD = f"""
### Run after every ingest

Scheduled on the table's Asset, `{TABLE_ASSET.uri}`: every successful `write_batch` of `lakeformat_ingest`
queues a run, and `report` prints the snapshot ids the triggering Asset events carry. A manual run reports
none.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`): it names the Asset; this DAG never
reads it (the ingest DAG's tasks do, when they run).

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID`, `LAKEFORMAT_DEMO_TABLE` (default
`demo.events`; the same as the ingest DAG's).

**Paused**: on a stock Airflow a new DAG starts paused, and a paused DAG gets no runs from Asset events:
unpause it before ingesting, with the toggle next to its name or
`airflow dags unpause lakeformat_downstream_asset`. See `docs/airflow.md`, "Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_downstream_asset",
    description="Runs whenever the ingest DAG commits a snapshot to the table",
    doc_md=DOC_MD,
    schedule=[TABLE_ASSET],
    catchup=False,
    tags=["lakeformat", "downstream"],
) as dag:

    @task
    def report(**context: Any) -> list[int]:
        events = context["triggering_asset_events"].get(TABLE_ASSET, [])
        ids = [
            int(e.extra["snapshotId"]) for e in events if e.extra and e.extra.get("snapshotId") is not None
        ]
        print(f"{TABLE}: triggered by snapshot(s) {ids or 'none (a manual run)'}")
        return ids

    report()
