"""Maintenance of an Apache Iceberg table, triggered with Params: create the demo table when it is missing,
check every input, append a few batches, then compact data files -> expire snapshots -> compact manifests ->
remove orphan files (data compaction first, as Iceberg's own guidance orders it: the expiry that follows deletes
the small files the compaction replaced).

The table is ``namespace.table`` (default ``demo.events_iceberg``, or ``LAKEFORMAT_ICEBERG_TABLE``) through the
connection ``LAKEFORMAT_ICEBERG_CONN_ID`` (else ``LAKEFORMAT_CONN_ID``, else ``lakeformat_default``). When the
connection names an Iceberg catalog (extras ``iceberg_catalog`` / ``iceberg_catalog_properties``, e.g. an
SQL catalog on SQLite), the table is that catalog's; without one it is a Hadoop-layout table at
``<warehouse>/<namespace>.db/<table>`` under the connection's host (local or ``s3://``). The file reads only
the environment when it is parsed; the tasks open the connection when they run.

Why ``validate_inputs`` runs after ``ensure_table`` and before everything else: the orphan-age floor depends
on the table's format (24 h for Iceberg, 1 h for Paimon), and the validation learns the format by opening the
table, so the table must exist first; validated without a table, a ``2 h`` orphan age would pass the Paimon
floor and fail only in ``remove_orphan_files``, after the appends and the expiry had changed the table.
``ensure_table`` never touches an existing table: at most it creates the missing demo table, empty (no
snapshot). So on bad input the run stops in ``validate_inputs`` with one message, and no append, expiry,
compaction or orphan removal runs.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.validate import DURATION_PATTERN, LakeformatValidateOperator

CONN_ID = (
    os.environ.get("LAKEFORMAT_ICEBERG_CONN_ID")
    or os.environ.get("LAKEFORMAT_CONN_ID")
    or "lakeformat_default"
)
DEFAULT_TABLE = os.environ.get("LAKEFORMAT_ICEBERG_TABLE") or "demo.events_iceberg"
DURATION_FORMAT = "a whole number and a unit: ms, s, min, h or d, e.g. '30 min', '1 h', '7 d'"

DOC_MD = f"""
### Maintenance of an Iceberg table

Trigger it with **Trigger DAG** and fill in the form. The tasks run in this order:

1. `ensure_table` creates the table (`dt` string, `id` long, `amount` double; format v2) when it is missing
   (empty, no snapshot); an existing table is left as it is.
2. `validate_inputs` checks every field below and that the table opens as an Iceberg table. On bad input it
   fails with one message naming every problem, and nothing else runs (the other tasks end
   *upstream_failed*). It runs after `ensure_table` because the orphan-age floor depends on the table's
   format, which it reads from the table.
3. `append_batches` appends *Batches* batches of *Rows per batch* rows, one snapshot each, exactly once per
   run (a retried task finds the batches its earlier try committed, by the commit user and identifier in
   each snapshot's summary).
4. `expire_snapshots` expires snapshots older than *Expire older than* while keeping *Keep at least* per
   branch, commits the metadata through the catalog, then deletes the files only they reached.
5. `compact_manifests` rewrites the manifests into one per partition spec (a `replace` snapshot).
6. `remove_orphan_files` deletes files under the table no snapshot or metadata file references, older
   than *Orphans older than* (Java Iceberg's rules; under 24 h is refused unless *Allow an orphan age under
   the floor* is ticked).

**Dry run is on by default**: steps 4 to 6 only report what they would do (task logs and XCom); the
appends of step 3 always happen. Untick *Dry run* to change the table.

**Connection** `{CONN_ID}` (type `lakeformat`): with an Iceberg catalog in its extras, e.g.
`{{"iceberg_catalog_properties": {{"type": "sql", "uri": "sqlite:////data/iceberg_catalog.db",
"warehouse": "file:///data/iceberg"}}}}`, *Table* is `namespace.table` of that catalog; without one, a
Hadoop-layout table under the connection's host (`<host>/<namespace>.db/<table>`).

**Environment** (read when the file is parsed): `LAKEFORMAT_ICEBERG_CONN_ID` (else `LAKEFORMAT_CONN_ID`, else
`lakeformat_default`), `LAKEFORMAT_ICEBERG_TABLE` (the *Table* field's default, `demo.events_iceberg`).

**Paused**: on a stock Airflow a new DAG starts paused. A manual trigger still creates the run, but it waits
until the DAG is unpaused: use the toggle next to its name, or
`airflow dags unpause lakeformat_iceberg_maintenance`. See `docs/airflow.md`, "Run the examples on your
Airflow".
"""

with DAG(
    dag_id="lakeformat_iceberg_maintenance",
    description="Create an Iceberg table, append batches, then expire snapshots, compact manifests, remove orphans",
    doc_md=DOC_MD,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    params={
        "table": Param(
            DEFAULT_TABLE,
            type="string",
            minLength=1,
            title="Table",
            description=(
                f"namespace.table of the Iceberg catalog of connection {CONN_ID} (or, without a catalog, a "
                f"Hadoop-layout table under its warehouse); a table root URI works too. Default {DEFAULT_TABLE}; "
                "created when missing."
            ),
        ),
        "batches": Param(
            3,
            type="integer",
            minimum=0,
            maximum=100,
            title="Batches",
            description="How many batches to append before the maintenance (one snapshot each); 0: none.",
        ),
        "rows": Param(
            100, type="integer", minimum=1, title="Rows per batch", description="Rows in each appended batch."
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description="Ticked (the default): data compaction, expiry, manifest compaction and orphan cleanup only "
            "report.",
        ),
        "min_input_files": Param(
            2,
            type="integer",
            minimum=1,
            title="Fewest files per rewrite",
            description="Data compaction rewrites a partition's small files once at least this many are there "
            "(Java's min-input-files; Iceberg's default is 5).",
        ),
        "retain_min": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Keep at least",
            description="Snapshots kept per branch whatever their age. Empty: the table's "
            "history.expire.min-snapshots-to-keep (1).",
        ),
        "older_than": Param(
            None,
            type=["null", "string"],
            pattern=DURATION_PATTERN,
            title="Expire older than",
            description=(
                f"Expire a snapshot once it is older than this: {DURATION_FORMAT}. Empty (the default): the "
                "table's own option, history.expire.max-snapshot-age-ms (5 days)."
            ),
        ),
        "orphan_older_than": Param(
            "3 d",
            type="string",
            pattern=DURATION_PATTERN,
            minLength=1,
            title="Orphans older than",
            description=(
                f"Only files older than this can be orphans: {DURATION_FORMAT}. Default 3 d. At least 24 h, "
                "because a younger file may belong to a commit still being written; shorter is refused "
                "unless the next box is ticked."
            ),
        ),
        "allow_short_orphan_older_than": Param(
            False,
            type="boolean",
            title="Allow an orphan age under the floor",
            description=(
                "Default off. Tick only when no writer is running on the table: it lets Orphans older than "
                "go under 24 h, e.g. to clean up right after a failed write."
            ),
        ),
    },
    tags=["lakeformat", "iceberg", "maintenance"],
) as dag:

    @task
    def ensure_table(table: str) -> str:
        """Create the demo table when it does not exist yet; its name as the tables are shown."""
        import pyarrow as pa

        from airflow_lakeformat.hooks.lakeformat import LakeformatHook

        schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])
        # An existing table is returned as it is: never changed, whatever its schema.
        return LakeformatHook(CONN_ID).create_iceberg_table(table, schema, exist_ok=True).uri

    @task
    def append_batches(table: str, batches: int, rows: int, **context: Any) -> list[int]:
        """Append the batches, each once per run; the snapshot ids."""
        import pyarrow as pa

        from airflow_lakeformat.core.table_writes import table_writes
        from airflow_lakeformat.hooks.lakeformat import LakeformatHook
        from airflow_lakeformat.operators.commit import commit_identifier

        hook = LakeformatHook(CONN_ID)
        writes = table_writes(hook.open_lake_table(table, "iceberg"))
        ti = context["ti"]
        user = hook.commit_user(ti.dag_id, ti.task_id)
        dt = context["ds"] if context.get("ds") else "1970-01-01"
        snapshots = []
        for number in range(int(batches)):
            identifier = commit_identifier(
                ti.dag_id, context["run_id"], ti.task_id, ti.map_index, f"batch-{number}"
            )
            first = number * int(rows)
            data = pa.table(
                {
                    "dt": [dt] * int(rows),
                    "id": pa.array(range(first, first + int(rows)), pa.int64()),
                    "amount": [i * 0.5 for i in range(int(rows))],
                }
            )
            done = writes.write_rows(data, commit_user=user, commit_identifier=identifier)
            state = "already committed by an earlier try" if done["alreadyCommitted"] else "committed"
            print(f"batch {number}: {int(rows)} rows, snapshot {done['snapshotId']} ({state})")
            snapshots.append(done["snapshotId"])
        return snapshots

    shared: dict[str, Any] = {
        "table": "{{ params.table }}",
        "lakeformat_conn_id": CONN_ID,
        "table_format": "iceberg",
        "dry_run": "{{ params.dry_run }}",
        "execution": "local",
    }
    compact_data = LakeformatCompactDataOperator(
        task_id="compact_data", min_file_count="{{ params.min_input_files }}", **shared
    )
    expire = LakeformatExpireSnapshotsOperator(
        task_id="expire_snapshots",
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        **shared,
    )
    compact = LakeformatCompactManifestsOperator(task_id="compact_manifests", mode="full", **shared)
    orphans = LakeformatRemoveOrphanFilesOperator(
        task_id="remove_orphan_files",
        older_than="{{ params.orphan_older_than }}",
        allow_short_older_than="{{ params.allow_short_orphan_older_than }}",
        **shared,
    )
    # After ensure_table (the orphan floor depends on the table's format, read from the table), before
    # anything that changes an existing table: see the module docstring.
    validate = LakeformatValidateOperator(
        task_id="validate_inputs",
        table="{{ params.table }}",
        lakeformat_conn_id=CONN_ID,
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        orphan_older_than="{{ params.orphan_older_than }}",
        allow_short_orphan_older_than="{{ params.allow_short_orphan_older_than }}",
        execution="local",
    )
    created = ensure_table(table="{{ params.table }}")
    appended = append_batches(
        table="{{ params.table }}", batches="{{ params.batches }}", rows="{{ params.rows }}"
    )
    created >> validate >> appended >> compact_data >> expire >> compact >> orphans
