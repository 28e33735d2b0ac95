"""Maintenance of one table, triggered from the UI with Params: expire snapshots, then remove orphan files.

``dry_run`` defaults to True, so a trigger with the defaults only reports what would be deleted (see the
task logs and XCom); untick it to delete. Retention left empty uses the table's options.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator

WAREHOUSE = os.environ.get("LAKEFORMAT_DEMO_WAREHOUSE") or str(
    Path(__file__).resolve().parents[1] / "demo-warehouse"
)
DEFAULT_TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or f"{WAREHOUSE}/demo.db/events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")

with DAG(
    dag_id="lakeformat_manual_maintenance",
    description="Expire snapshots and remove orphan files of one table (dry run by default)",
    schedule=None,
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "table": Param(DEFAULT_TABLE, type="string", minLength=1, description="table URI or db.table"),
        "dry_run": Param(True, type="boolean", description="report only, delete nothing"),
        "retain_min": Param(
            None, type=["null", "integer"], minimum=1, description="snapshots to keep at least"
        ),
        "older_than": Param(
            None, type=["null", "string"], description="expire snapshots whose successor is older, e.g. '1 h'"
        ),
        "orphan_older_than": Param("1 d", type="string", description="only older files can be orphans"),
    },
    render_template_as_native_obj=False,
    tags=["lakeformat", "maintenance"],
) as dag:
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        lakeformat_conn_id=CONN_ID,
        dry_run="{{ params.dry_run }}",
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        execution="auto",
    )
    orphans = LakeformatRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        table="{{ params.table }}",
        lakeformat_conn_id=CONN_ID,
        dry_run="{{ params.dry_run }}",
        older_than="{{ params.orphan_older_than }}",
        execution="auto",
    )
    expire >> orphans
