"""Ingest: stage a batch of rows, write it into the table (in the worker or as a Spark job), and emit the
table's Asset event, which schedules ``lakeformat_downstream_asset``.

Environment (read at parse time, no storage access): ``LAKEFORMAT_DEMO_WAREHOUSE`` (default
``<repo>/demo-warehouse``), ``LAKEFORMAT_DEMO_TABLE`` (default ``<warehouse>/demo.db/events``),
``LAKEFORMAT_INGEST_EXECUTION`` (``local`` or ``spark``), ``LAKEFORMAT_INGEST_SOURCE`` (a file to write;
by default the ``stage_batch`` task generates ``LAKEFORMAT_INGEST_ROWS`` demo rows), ``LAKEFORMAT_CONN_ID``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.lakeformat import table_asset
from airflow_lakeformat.operators.write import LakeformatWriteOperator

WAREHOUSE = os.environ.get("LAKEFORMAT_DEMO_WAREHOUSE") or str(
    Path(__file__).resolve().parents[1] / "demo-warehouse"
)
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or f"{WAREHOUSE}/demo.db/events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
EXECUTION = os.environ.get("LAKEFORMAT_INGEST_EXECUTION", "local")
TABLE_ASSET = table_asset(TABLE)  # named by its URI, so every DAG naming the table means the same Asset
DEMO_FIELDS = [
    {"name": "dt", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "amount", "type": "DOUBLE"},
]

with DAG(
    dag_id="lakeformat_ingest",
    description="Write a batch into a Paimon table and emit its Asset",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["lakeformat", "ingest"],
) as dag:

    @task
    def ensure_table() -> str:
        """Create the demo table (partitioned by ``dt``) when it does not exist yet."""
        from airflow_lakeformat.core.errors import TableNotFoundError
        from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
        from airflow_lakeformat.core.paimon.table import Table
        from airflow_lakeformat.hooks.lakeformat import LakeformatHook

        hook = LakeformatHook(CONN_ID)
        uri = hook.table_uri(TABLE)
        try:
            Table.open(uri, hook.storage_options(uri))
            return uri
        except TableNotFoundError:
            create_table(uri, schema_from_fields(DEMO_FIELDS, ["dt"]), hook.storage_options(uri))
            print(f"created table {uri}")
        return uri

    @task
    def stage_batch(**context: Any) -> str:
        """The source to write: ``LAKEFORMAT_INGEST_SOURCE``, or a generated Parquet file of demo rows."""
        source = os.environ.get("LAKEFORMAT_INGEST_SOURCE")
        if source:
            return source
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = int(os.environ.get("LAKEFORMAT_INGEST_ROWS", "1000"))
        run_id = "".join(c if c.isalnum() else "_" for c in context["run_id"])
        dt = context["ds"] if context.get("ds") else "1970-01-01"
        staging = Path(os.environ.get("LAKEFORMAT_INGEST_STAGING") or Path(WAREHOUSE) / "_staging")
        staging.mkdir(parents=True, exist_ok=True)
        path = staging / f"batch-{run_id}.parquet"
        batch = pa.table(
            {
                "dt": [dt] * rows,
                "id": pa.array(range(rows), pa.int64()),
                "amount": [i * 0.5 for i in range(rows)],
            }
        )
        pq.write_table(batch, str(path))
        return str(path)

    source = stage_batch()
    write = LakeformatWriteOperator(
        task_id="write_batch",
        table=TABLE,
        source=source,
        source_format="parquet" if not os.environ.get("LAKEFORMAT_INGEST_SOURCE") else None,
        lakeformat_conn_id=CONN_ID,
        execution=EXECUTION,
        outlets=[TABLE_ASSET],
    )
    ensure_table() >> write
