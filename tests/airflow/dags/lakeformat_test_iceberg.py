"""Test DAGs: the Lakeformat operators and the snapshot sensor on Iceberg tables.

Tables come in through params (``table``: ``namespace.table`` of the connection's catalog, or a table root);
settings the tests vary (dry run, execution, orphan age) too. Failures are remembered per DAG for assertions.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Context, task

from airflow_lakeformat.operators.commit import LakeformatCommitOperator
from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.write import LakeformatWriteOperator
from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

FAILURES: dict[str, BaseException] = {}


def remember_failure(context: Context) -> None:
    FAILURES[context["dag"].dag_id] = context["exception"]  # type: ignore[assignment]


COMMON: dict[str, Any] = {"retries": 2, "retry_delay": timedelta(0), "on_failure_callback": remember_failure}
SPARK: dict[str, Any] = {"spark_conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}}
PARAMS: dict[str, Any] = {
    "table": "db.events",
    "dry_run": True,
    "execution": "local",
    "orphan_older_than": "1 d",
    "table_format": "",
}

with DAG("lakeformat_test_iceberg_maintenance", schedule=None, params=PARAMS) as maintenance_dag:
    shared: dict[str, Any] = {
        "table": "{{ params.table }}",
        "table_format": "{{ params.table_format }}",
        "dry_run": "{{ params.dry_run }}",
        **COMMON,
    }
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        execution="{{ params.execution }}",
        retain_min=1,
        older_than="1 ms",
        **SPARK,
        **shared,
    )
    compact = LakeformatCompactManifestsOperator(task_id="compact_manifests", mode="full", **shared)
    orphans = LakeformatRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        execution="{{ params.execution }}",
        older_than="{{ params.orphan_older_than }}",
        allow_short_older_than=True,
        **SPARK,
        **shared,
    )
    expire >> compact >> orphans

with DAG(
    "lakeformat_test_iceberg_compact_data",
    schedule=None,
    params={
        "table": "db.events",
        "skip_unsupported": False,
        "min_file_count": 2,
        "dry_run": False,
        "execution": "local",
        "options": {},
    },
) as compact_data_dag:
    LakeformatCompactDataOperator(
        task_id="compact_data",
        table="{{ params.table }}",
        skip_unsupported="{{ params.skip_unsupported }}",
        min_file_count="{{ params.min_file_count }}",
        dry_run="{{ params.dry_run }}",
        execution="{{ params.execution }}",
        options="{{ params.options | tojson }}",
        **SPARK,
        **COMMON,
    )

with DAG(
    "lakeformat_test_iceberg_expire_bad",
    schedule=None,
    params={"table": "db.events", "older_than": "5 d", "retain_max": 3},
) as expire_bad_dag:
    LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        older_than="{{ params.older_than }}",
        retain_max="{{ params.retain_max }}",
        **COMMON,
    )


class WriteThenCrash(LakeformatWriteOperator):
    """Publishes, then fails its first try: the worker died after the snapshot landed."""

    def execute(self, context: Context) -> dict[str, Any]:
        result = super().execute(context)
        if context["ti"].try_number == 1:
            raise RuntimeError("injected: the worker was lost after the snapshot was published")
        return result


with DAG(
    "lakeformat_test_iceberg_write",
    schedule=None,
    params={"table": "db.events", "source": "", "execution": "local", "overwrite": ""},
) as write_dag:
    WriteThenCrash(
        task_id="write",
        table="{{ params.table }}",
        source="{{ params.source }}",
        execution="{{ params.execution }}",
        overwrite="{{ params.overwrite }}",
        retries=1,
        retry_delay=timedelta(0),
        on_failure_callback=remember_failure,
    )


@task
def stage_parquet(table: str, rows: int) -> list[str]:
    """Write a Parquet file under the Iceberg table's ``data/`` (not committed) and hand over its path."""
    import uuid

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_lakeformat.hooks.lakeformat import LakeformatHook

    native = LakeformatHook().open_lake_table(table).native
    path = native.io.join(native.root, "data", f"staged-{uuid.uuid4()}.parquet")
    native.io.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with native.io.fs.open(path, "wb") as out:
        pq.write_table(pa.table({"dt": ["2024-03-01"] * rows, "v": pa.array(range(rows), pa.int64())}), out)
    return [native.io.uri(path)]


with DAG("lakeformat_test_iceberg_commit", schedule=None, params={"table": "db.events"}) as commit_dag:
    LakeformatCommitOperator(
        task_id="commit", table="{{ params.table }}", files=stage_parquet("{{ params.table }}", 3)
    )

with DAG(
    "lakeformat_test_iceberg_sensor", schedule=None, params={"table": "db.events", "branch": "main"}
) as sensor_dag:
    # Straight to the trigger (no look in the worker first), so the wait always defers.
    LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        branch="{{ params.branch }}",
        deferrable=True,
        check_before_defer=False,
        poll_interval=0.1,
        ignore_commit_kinds=["COMPACT"],
        min_new_records=3,
        timeout=600,
        **COMMON,
    )

with DAG(
    "lakeformat_test_iceberg_sensor_poke",
    schedule=None,
    params={"table": "db.events", "branch": "main", "after": 0},
) as poke_dag:
    LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        branch="{{ params.branch }}",
        after_snapshot_id="{{ params.after }}",
        mode="poke",
        poll_interval=0.1,
        timeout=600,
        **COMMON,
    )
