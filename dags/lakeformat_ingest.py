"""Ingest: stage a batch of rows, write it into the table (in the worker or as a Spark job), and emit the
table's Asset event, which schedules ``lakeformat_downstream_asset``.

The table is ``demo.events`` under the warehouse of the connection ``LAKEFORMAT_CONN_ID`` (default
``lakeformat_default``; its host, e.g. ``s3://warehouse/wh``), or ``LAKEFORMAT_DEMO_TABLE`` (a full URI or
another ``db.table``). The file reads neither the connection nor the storage when it is parsed, so it parses
before the connection exists: the table's Asset is ``lakeformat://<conn_id>/demo.events``
(``airflow_lakeformat/hooks/assets.py``), and the tasks resolve the connection when they run. Generated batches
are staged in ``<warehouse>/_staging`` with the connection's storage options (on S3 when the warehouse is), or
in ``LAKEFORMAT_INGEST_STAGING``.

Other environment: ``LAKEFORMAT_INGEST_EXECUTION`` (``local`` or ``spark``), ``LAKEFORMAT_INGEST_SOURCE`` (a
file to write; by default the ``stage_batch`` task generates ``LAKEFORMAT_INGEST_ROWS`` demo rows).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.assets import connection_table_asset
from airflow_lakeformat.hooks.lakeformat import LakeformatHook
from airflow_lakeformat.operators.write import LakeformatWriteOperator

CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
# A name the connection places under its warehouse when a task runs (or a full URI).
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"


def warehouse_of(table_uri: str) -> str:
    """``<warehouse>`` of ``<warehouse>/<db>.db/<table>``; the table's parent for other layouts."""
    parent = table_uri.rstrip("/").rsplit("/", 1)[0]
    return parent.rsplit("/", 1)[0] if parent.endswith(".db") else parent


STAGING = os.environ.get("LAKEFORMAT_INGEST_STAGING")  # None: <warehouse>/_staging, placed when the task runs
EXECUTION = os.environ.get("LAKEFORMAT_INGEST_EXECUTION", "local")
# lakeformat://<conn_id>/<db>.<table> (or the root URI of a full URI): no connection read at parse time, and
# every DAG naming the table through the same connection means the same Asset.
TABLE_ASSET = connection_table_asset(TABLE, CONN_ID)
DOC_MD = f"""
### Ingest a batch into the demo table

`ensure_table` creates the table (partitioned by `dt`) when it does not exist, `stage_batch` stages a Parquet
file of demo rows, and `write_batch` writes it into the table and emits the table's Asset event, which
schedules `lakeformat_downstream_asset`. Each run adds one snapshot; a retry never writes a batch twice.

**Table**: `{TABLE}` (Asset `{TABLE_ASSET.uri}`). **Staging**: `{STAGING or "<warehouse>/_staging"}`.
**Execution**: `{EXECUTION}`.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`): its host is the warehouse, e.g.
`s3://warehouse/wh` (with login/password and the extra `endpoint_url` for an S3-compatible store) or
`/data/warehouse`. The tasks read it when they run; the DAG parses without it.

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID`, `LAKEFORMAT_DEMO_TABLE` (default
`demo.events`), `LAKEFORMAT_INGEST_EXECUTION` (`local` or `spark`), `LAKEFORMAT_INGEST_ROWS` (rows per
generated batch, default 1000), `LAKEFORMAT_INGEST_SOURCE` (a file to write instead),
`LAKEFORMAT_INGEST_STAGING` (where batches are staged; default `<warehouse>/_staging`).

**Paused**: on a stock Airflow a new DAG starts paused, and a triggered run waits until it is unpaused: use
the toggle next to its name, or `airflow dags unpause lakeformat_ingest`. See `docs/airflow.md`, "Run the
examples on your Airflow".
"""
DEMO_FIELDS = [
    {"name": "dt", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "amount", "type": "DOUBLE"},
]

with DAG(
    dag_id="lakeformat_ingest",
    description="Write a batch into a Paimon table and emit its Asset",
    doc_md=DOC_MD,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["lakeformat", "ingest"],
) as dag:

    @task
    def ensure_table(table: str) -> str:
        """Create the demo table (partitioned by ``dt``) when it does not exist yet."""
        from airflow_lakeformat.core.errors import TableNotFoundError
        from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
        from airflow_lakeformat.core.paimon.table import Table

        hook = LakeformatHook(CONN_ID)
        uri = hook.table_uri(table)
        try:
            Table.open(uri, hook.storage_options(uri))
            return uri
        except TableNotFoundError:
            create_table(uri, schema_from_fields(DEMO_FIELDS, ["dt"]), hook.storage_options(uri))
            print(f"created table {uri}")
        return uri

    @task
    def stage_batch(staging: str | None, **context: Any) -> str:
        """The source to write: ``LAKEFORMAT_INGEST_SOURCE``, or a generated Parquet file of demo rows."""
        source = os.environ.get("LAKEFORMAT_INGEST_SOURCE")
        if source:
            return source
        if not staging:
            staging = f"{warehouse_of(LakeformatHook(CONN_ID).table_uri(TABLE))}/_staging"
        import fsspec
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = int(os.environ.get("LAKEFORMAT_INGEST_ROWS", "1000"))
        run_id = "".join(c if c.isalnum() else "_" for c in context["run_id"])
        dt = context["ds"] if context.get("ds") else "1970-01-01"
        uri = f"{staging.rstrip('/')}/batch-{run_id}.parquet"
        fs, path = fsspec.core.url_to_fs(uri, **LakeformatHook(CONN_ID).storage_options(uri))
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        batch = pa.table(
            {
                "dt": [dt] * rows,
                "id": pa.array(range(rows), pa.int64()),
                "amount": [i * 0.5 for i in range(rows)],
            }
        )
        with fs.open(path, "wb") as out:
            pq.write_table(batch, out)
        return uri

    source = stage_batch(staging=STAGING)
    write = LakeformatWriteOperator(
        task_id="write_batch",
        table=TABLE,
        source=source,
        source_format="parquet" if not os.environ.get("LAKEFORMAT_INGEST_SOURCE") else None,
        lakeformat_conn_id=CONN_ID,
        execution=EXECUTION,
        outlets=[TABLE_ASSET],
    )
    ensure_table(table=TABLE) >> write
