"""Ingest into the Iceberg example table: create it when missing, stage a generated batch, then append it with
``LakeformatWriteOperator`` in the worker, exactly once per run.

The table is ``lakeformat_iceberg_maintenance``'s: ``namespace.table`` (default ``demo.events_iceberg``, or
``LAKEFORMAT_ICEBERG_TABLE``) through the connection ``LAKEFORMAT_ICEBERG_CONN_ID`` (else ``LAKEFORMAT_CONN_ID``,
else ``lakeformat_default``). With an Iceberg catalog in the connection it is that catalog's table; without one
it is a Hadoop-layout table at ``<warehouse>/<namespace>.db/<table>`` under the connection's host (local or
``s3://``). Batches are staged as Parquet files in ``<warehouse>/_staging`` with the connection's storage
options (``LAKEFORMAT_INGEST_STAGING`` overrides), placed when ``stage_batch`` runs: this file reads neither the
connection nor the storage when it is parsed, so it parses before the connection exists.

Exactly once: the write's commit user (the connection's prefix, the DAG and the task) and identifier (the DAG
run, the task and the staged file) go into the snapshot summary, so a retry, or a cleared and re-run task,
finds the snapshot its earlier try committed and reports ``alreadyCommitted`` instead of appending again.

**No outlets, on purpose.** ``lakeformat_iceberg_downstream_asset`` is scheduled on this table's Asset through
an ``AssetWatcher`` (``watched_table_asset``): its trigger runs in the triggerer and records one Asset event for
every commit it sees, whichever engine made it, this DAG's appends included. An outlet on the same URI would
record a second event for the same commit (one from ``write_batch``, one from the watcher), and the consumer
would see every ingest twice. So the watcher is the one source of this table's events and the write runs with
``emit_asset=False``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, task

from airflow_lakeformat.hooks.lakeformat import LakeformatHook
from airflow_lakeformat.operators.write import LakeformatWriteOperator

CONN_ID = (
    os.environ.get("LAKEFORMAT_ICEBERG_CONN_ID")
    or os.environ.get("LAKEFORMAT_CONN_ID")
    or "lakeformat_default"
)
TABLE = os.environ.get("LAKEFORMAT_ICEBERG_TABLE") or "demo.events_iceberg"


def staging_directory() -> str:
    """``LAKEFORMAT_INGEST_STAGING``, else ``<warehouse>/_staging`` under the connection's host."""
    configured = os.environ.get("LAKEFORMAT_INGEST_STAGING")
    if configured:
        return configured.rstrip("/")
    warehouse = LakeformatHook(CONN_ID).settings.root
    if warehouse is None:
        raise ValueError(
            f"connection {CONN_ID!r} has no host (warehouse) to stage batches under; "
            "set LAKEFORMAT_INGEST_STAGING"
        )
    return f"{warehouse.rstrip('/')}/_staging"


STAGING = os.environ.get("LAKEFORMAT_INGEST_STAGING")  # None: staging_directory() when the task runs
DOC_MD = f"""
### Ingest a batch into the Iceberg demo table

`ensure_table` creates the table (`dt` string, `id` long, `amount` double; format v2) when it is missing,
`stage_batch` stages a Parquet file of demo rows, and `write_batch` appends it (`LakeformatWriteOperator`,
`table_format="iceberg"`, in the worker). Each run adds one `append` snapshot; a retry never writes a batch
twice (it finds its snapshot by the commit user and identifier in the snapshot summary).

No outlet: `lakeformat_iceberg_downstream_asset` learns of every commit from the Asset watcher in the
triggerer, which would otherwise see each append twice (once from this task, once from the watcher).

**Table**: `{TABLE}`. **Staging**: `{STAGING or "<warehouse>/_staging"}`.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_ICEBERG_CONN_ID`, else `LAKEFORMAT_CONN_ID`): with
an Iceberg catalog in its extras the table is that catalog's; without one a Hadoop-layout table under its
host (`<host>/<namespace>.db/<table>`). The tasks read it when they run (batches are staged under its host);
the DAG parses without it.

**Environment** (read when the file is parsed): `LAKEFORMAT_ICEBERG_CONN_ID`, `LAKEFORMAT_CONN_ID`,
`LAKEFORMAT_ICEBERG_TABLE` (default `demo.events_iceberg`, the same as `lakeformat_iceberg_maintenance`'s),
`LAKEFORMAT_INGEST_STAGING` (where batches are staged; default `<warehouse>/_staging`); when the task runs,
`LAKEFORMAT_INGEST_ROWS` (rows per batch, default 1000).

**Paused**: on a stock Airflow a new DAG starts paused, and a triggered run waits until it is unpaused: use
the toggle next to its name, or `airflow dags unpause lakeformat_iceberg_ingest`. See `docs/airflow.md`,
"Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_iceberg_ingest",
    description="Append a generated batch to the Iceberg demo table, exactly once per run",
    doc_md=DOC_MD,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["lakeformat", "iceberg", "ingest"],
) as dag:

    @task
    def ensure_table(table: str) -> str:
        """Create the demo table when it does not exist yet; the table as it is shown."""
        import pyarrow as pa

        schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
        # An existing table is returned as it is: never changed, whatever its schema.
        return LakeformatHook(CONN_ID).create_iceberg_table(table, schema, exist_ok=True).uri

    @task
    def stage_batch(staging: str | None, **context: Any) -> str:
        """A Parquet file of ``LAKEFORMAT_INGEST_ROWS`` demo rows, named by the run (a retry rewrites it)."""
        import fsspec
        import pyarrow as pa
        import pyarrow.parquet as pq

        staging = staging or staging_directory()

        rows = int(os.environ.get("LAKEFORMAT_INGEST_ROWS", "1000"))
        run_id = "".join(c if c.isalnum() else "_" for c in context["run_id"])
        dt = context["ds"] if context.get("ds") else "1970-01-01"
        uri = f"{staging.rstrip('/')}/iceberg-batch-{run_id}.parquet"
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

    write = LakeformatWriteOperator(
        task_id="write_batch",
        table=TABLE,
        table_format="iceberg",
        source=stage_batch(staging=STAGING),
        source_format="parquet",
        lakeformat_conn_id=CONN_ID,
        execution="local",
        # The watcher of lakeformat_iceberg_downstream_asset records this commit's Asset event; see above.
        emit_asset=False,
    )
    ensure_table(table=TABLE) >> write
