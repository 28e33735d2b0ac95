"""Test DAGs: maintenance operators on the shared base (lock, dry run, execution, error mapping)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Context

from airflow_lakeformat.core.errors import CommitStateUnknownError
from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator, LakeTable
from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator

FAILURES: dict[str, BaseException] = {}


def remember_failure(context: Context) -> None:
    FAILURES[context["dag"].dag_id] = context["exception"]  # type: ignore[assignment]


COMMON: dict[str, Any] = {"retries": 2, "retry_delay": timedelta(0), "on_failure_callback": remember_failure}
PARAMS = {"table": "db.events", "mode": "full", "dry_run": False}


class UnknownOutcomeOperator(LakeformatMaintenanceOperator):
    """A maintenance step whose commit ends in an unknown state (as after a lost acknowledgement)."""

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        raise CommitStateUnknownError(
            f"commit of snapshot 9 to {table.uri} has an unknown outcome after 11 attempts"
        )


with DAG("lakeformat_test_compact_manifests", schedule=None, params=PARAMS) as compact_dag:
    LakeformatCompactManifestsOperator(
        task_id="compact",
        table="{{ params.table }}",
        mode="{{ params.mode }}",
        dry_run="{{ params.dry_run }}",
        **COMMON,
    )

with DAG("lakeformat_test_compact_manifests_waits", schedule=None, params=PARAMS) as lock_wait_dag:
    LakeformatCompactManifestsOperator(
        task_id="compact",
        table="{{ params.table }}",
        lock_wait=timedelta(minutes=5),
        lock_poll_interval=0.1,
        **COMMON,
    )

with DAG("lakeformat_test_unknown_outcome", schedule=None, params=PARAMS) as unknown_dag:
    UnknownOutcomeOperator(task_id="expire", table="{{ params.table }}", execution="local", **COMMON)

SPARK: dict[str, Any] = {"spark_conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}}

DATA_PARAMS = {**PARAMS, "execution": "local", "dry_run": False, "skip_unsupported": False}

with DAG("lakeformat_test_compact_data", schedule=None, params=DATA_PARAMS) as compact_data_dag:
    LakeformatCompactDataOperator(
        task_id="compact_data",
        table="{{ params.table }}",
        execution="{{ params.execution }}",
        dry_run="{{ params.dry_run }}",
        skip_unsupported="{{ params.skip_unsupported }}",
        min_file_count=2,
        **SPARK,
        **COMMON,
    )

with DAG("lakeformat_test_execution_auto", schedule=None, params=PARAMS) as auto_dag:
    # Below the thresholds: in the worker. From one live file on: the Spark job. Both plan the same.
    small = LakeformatCompactDataOperator(
        task_id="below_threshold", table="{{ params.table }}", dry_run=True, min_file_count=2, **COMMON
    )
    large = LakeformatCompactDataOperator(
        task_id="above_threshold",
        table="{{ params.table }}",
        dry_run=True,
        min_file_count=2,
        spark_min_files=1,
        **SPARK,
        **COMMON,
    )
    small >> large

with DAG("lakeformat_test_spark_failure", schedule=None, params=PARAMS) as spark_failure_dag:
    LakeformatCompactDataOperator(
        task_id="compact_data", table="{{ params.table }}", execution="spark", **SPARK, **COMMON
    )

with DAG(
    "lakeformat_test_expire",
    schedule=None,
    params={"table": "db.events", "retain_min": 10, "older_than": "1 ms"},
) as expire_dag:
    LakeformatExpireSnapshotsOperator(
        task_id="expire",
        table="{{ params.table }}",
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        **COMMON,
    )
