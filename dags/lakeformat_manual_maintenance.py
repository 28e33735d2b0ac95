"""Maintenance of one table, triggered from the UI with Params: compact small data files, expire snapshots
(which deletes the files compaction replaced, once no retained snapshot uses them), compact the manifests,
then remove orphan files.

``dry_run`` defaults to True, so a trigger with the defaults only reports what each step would do (see the
task logs and XCom); untick it to change the table. Retention left empty uses the table's options. Data
compaction skips tables it does not handle (primary-key tables, deletion vectors, formats other than
Parquet) and the other steps run regardless.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator

# A db.table name is placed under the connection's warehouse when the tasks run.
DEFAULT_TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")

with DAG(
    dag_id="lakeformat_manual_maintenance",
    description="Compact data, expire snapshots, compact manifests, remove orphans of one table (dry run by default)",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "table": Param(DEFAULT_TABLE, type="string", minLength=1, description="table URI or db.table"),
        "dry_run": Param(True, type="boolean", description="report only, change nothing"),
        "execution": Param(
            "auto",
            enum=["auto", "local", "spark"],
            description="where data compaction, expiry and orphan cleanup run",
        ),
        "min_file_count": Param(
            5,
            type="integer",
            minimum=2,
            description="data compaction: smallest group of small files worth a rewrite",
        ),
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
    shared = {
        "table": "{{ params.table }}",
        "lakeformat_conn_id": CONN_ID,
        "dry_run": "{{ params.dry_run }}",
    }
    compact_data = LakeformatCompactDataOperator(
        task_id="compact_data",
        execution="{{ params.execution }}",
        min_file_count="{{ params.min_file_count }}",
        skip_unsupported=True,
        **shared,
    )
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        execution="{{ params.execution }}",
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        trigger_rule="none_failed",  # runs after a skipped data compaction too
        **shared,
    )
    compact_manifests = LakeformatCompactManifestsOperator(task_id="compact_manifests", mode="full", **shared)
    orphans = LakeformatRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        execution="{{ params.execution }}",
        older_than="{{ params.orphan_older_than }}",
        **shared,
    )
    compact_data >> expire >> compact_manifests >> orphans
