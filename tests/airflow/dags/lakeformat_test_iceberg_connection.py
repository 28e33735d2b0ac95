"""Test DAG: a sensor and snapshot expiry on a table of a REST catalog, named by an official ``iceberg`` connection.

Neither task has a ``lakeformat`` connection: ``iceberg_conn_id`` (the connection of
apache-airflow-providers-apache-iceberg) is the catalog. tests/airflow/test_iceberg_connection.py starts the
REST catalog and creates the connection ``iceberg_rest``; params carry the table, the sensor's baseline and the
dry run. The sensor defers (``dag.test()`` runs its trigger in line), so the trigger gets the connection too.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

with DAG(
    "lakeformat_test_iceberg_connection",
    schedule=None,
    params={"table": "sales.orders", "after": 0, "dry_run": False},
) as connection_dag:
    wait = LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        iceberg_conn_id="iceberg_rest",
        after_snapshot_id="{{ params.after }}",
        deferrable=True,  # dag.test() runs the trigger in line: the sensor hands iceberg_conn_id to it
        check_before_defer=False,
        poll_interval=0.1,
        timeout=60,
    )
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        table="{{ params.table }}",
        iceberg_conn_id="iceberg_rest",
        dry_run="{{ params.dry_run }}",
        execution="local",
        retain_min=1,
        older_than="1 ms",
    )
    wait >> expire
