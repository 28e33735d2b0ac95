"""Downstream, scheduled on the table's Asset: runs after every successful ``lakeformat_ingest`` write and
reads the snapshot id its Asset event carries.

The table is the ingest DAG's: ``LAKEFORMAT_DEMO_TABLE`` (default ``demo.events``) placed under the warehouse
of the connection ``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``), which this file reads when parsed
because the Asset is named by the table's URI.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.lakeformat import LakeformatHook, table_asset

CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
TABLE = LakeformatHook(CONN_ID).table_uri(os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events")
TABLE_ASSET = table_asset(TABLE)  # named by its URI, so every DAG naming the table means the same Asset

DOC_MD = f"""
### Run after every ingest

Scheduled on the table's Asset, `{TABLE_ASSET.uri}`: every successful `write_batch` of `lakeformat_ingest`
queues a run, and `report` prints the snapshot ids the triggering Asset events carry. A manual run reports
none.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`): it must exist where DAG files are
parsed, because the Asset is named by the table's URI under its warehouse.

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
