"""Test DAGs: stage files upstream, commit them once, emit the table's Asset event.

Tables come in through params (``table``); the asset DAGs use a literal URI under the session warehouse
($LAKEFORMAT_TEST_WAREHOUSE), because a literal URI is what makes the Asset known at parse time.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Context, task

from airflow_lakeformat.hooks.lakeformat import LakeformatHook, table_asset
from airflow_lakeformat.operators.commit import LakeformatCommitOperator, entries_to_xcom

WAREHOUSE = os.environ.get("LAKEFORMAT_TEST_WAREHOUSE", "/tmp/lakeformat-test-warehouse")
ASSET_TABLE = f"{WAREHOUSE}/assets.db/events"
FAILURES: dict[str, BaseException] = {}


def remember_failure(context: Context) -> None:
    FAILURES[context["ti"].task_id] = context["exception"]  # type: ignore[assignment]


def _write(table_name: str, rows: int, dt: str) -> tuple[Any, list[Any]]:
    import pyarrow as pa

    from airflow_lakeformat.core.paimon.write.data_files import write_data_files

    table = LakeformatHook().open_table(table_name)
    data = pa.table({"dt": [dt] * rows, "v": list(range(rows))})
    return table, write_data_files(table, data)


@task
def stage_entries(table_name: str, rows: int, dt: str) -> list[dict[str, Any]]:
    """Write data files into the table's layout without committing; hand over their entries."""
    _, entries = _write(table_name, rows, dt)
    return entries_to_xcom(entries)


@task
def stage_paths(table_name: str, rows: int, dt: str) -> list[str]:
    """Write data files into the table's layout without committing; hand over their relative paths."""
    from airflow_lakeformat.core.paimon.paths import DataFilePaths

    table, entries = _write(table_name, rows, dt)
    paths = DataFilePaths(table.schema)
    return [paths.relative_path(entry) for entry in entries]


class CommitThenCrash(LakeformatCommitOperator):
    """Publishes, then fails its first try: the worker died after the snapshot landed."""

    def execute(self, context: Context) -> dict[str, Any]:
        result = super().execute(context)
        if context["ti"].try_number == 1:
            raise RuntimeError("injected: the worker was lost after the snapshot was published")
        return result


with DAG("lakeformat_test_commit", schedule=None, params={"table": "db.events"}) as commit_dag:
    paths = stage_paths("{{ params.table }}", 3, "2024-01-01")
    entries = stage_entries.override(task_id="stage_entries")("{{ params.table }}", 2, "2024-01-02")
    commit_paths = LakeformatCommitOperator(task_id="commit_paths", table="{{ params.table }}", files=paths)
    commit_entries = LakeformatCommitOperator(
        task_id="commit_entries", table="{{ params.table }}", files=entries, overwrite="dt=2024-01-02"
    )
    commit_paths >> commit_entries


with DAG("lakeformat_test_commit_retry", schedule=None, params={"table": "db.events"}) as retry_dag:
    CommitThenCrash(
        task_id="commit",
        table="{{ params.table }}",
        files=stage_entries("{{ params.table }}", 4, "2024-01-03"),
        retries=1,
        retry_delay=timedelta(0),
    )


with DAG("lakeformat_test_commit_asset", schedule=None) as asset_dag:
    LakeformatCommitOperator(
        task_id="commit", table=ASSET_TABLE, files=stage_entries(ASSET_TABLE, 5, "2024-02-01")
    )


# Scheduled on the table's Asset: each commit above queues a run of this DAG.
with DAG("lakeformat_test_asset_consumer", schedule=[table_asset(ASSET_TABLE)]) as consumer_dag:

    @task
    def read_latest() -> None:
        pass

    read_latest()


with DAG(
    "lakeformat_test_commit_bad",
    schedule=None,
    params={"table": "db.events", "files": []},
    render_template_as_native_obj=True,
) as bad_dag:
    LakeformatCommitOperator(
        task_id="commit",
        table="{{ params.table }}",
        files="{{ params.files }}",
        retries=2,
        retry_delay=timedelta(0),
        on_failure_callback=remember_failure,
    )
