"""Downstream, scheduled on the table's Asset: runs after every successful ``lakeformat_ingest`` write and
reads the snapshot id its Asset event carries.

Environment: ``LAKEFORMAT_DEMO_WAREHOUSE``, ``LAKEFORMAT_DEMO_TABLE`` (the same table as the ingest DAG).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.lakeformat import table_asset

WAREHOUSE = os.environ.get("LAKEFORMAT_DEMO_WAREHOUSE") or str(
    Path(__file__).resolve().parents[1] / "demo-warehouse"
)
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or f"{WAREHOUSE}/demo.db/events"
TABLE_ASSET = table_asset(TABLE)  # named by its URI, so every DAG naming the table means the same Asset

with DAG(
    dag_id="lakeformat_downstream_asset",
    description="Runs whenever the ingest DAG commits a snapshot to the table",
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
