"""Maintenance of one table, triggered from the UI with Params: check the inputs, drop expired partitions
(Paimon's partition expiry), compact small data files, expire snapshots (which deletes the files compaction replaced, once no retained snapshot uses them), compact
the manifests, then remove orphan files.

``validate_inputs`` runs first and checks every Param (durations, retention, that the table exists, the
orphan age floor); on bad input it fails once with one message and no other task runs. ``dry_run`` defaults
to True, so a trigger with the defaults only reports what each step would do (see the task logs and XCom);
untick it to change the table. Data compaction bin-packs append tables and merges primary-key tables by key
(the ``compaction_mode`` Param: minor or full); it skips tables it does not handle (changelog producers,
deletion vectors, formats other than Parquet) and the other steps run regardless; partition expiry skips
tables without an expiration time (the form's or the table's ``partition.expiration-time``) and Iceberg tables.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, Param

from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_partitions import LakeformatExpirePartitionsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.validate import DURATION_PATTERN, LakeformatValidateOperator

# A db.table name is placed under the connection's warehouse when the tasks run.
DEFAULT_TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
DURATION_FORMAT = "a whole number and a unit: ms, s, min, h or d, e.g. '30 min', '1 h', '7 d'"

DOC_MD = f"""
### Manual maintenance of one table

Trigger it with **Trigger DAG** and fill in the form. The tasks run in this order:

1. `validate_inputs` checks every field below and that the table exists. On bad input it fails with one
   message naming every problem, and nothing else runs (the other tasks end *upstream_failed*).
2. `expire_partitions` drops the partitions older than *Expire partitions older than* (Paimon tables; skipped
   when neither the form nor the table's `partition.expiration-time` gives a time, and for Iceberg tables).
   Their files stay until the snapshot expiry below deletes them.
3. `compact_data` rewrites small data files into larger ones: append tables bin-pack small files, Paimon
   primary-key tables get Paimon's merge-tree compaction (*Primary-key compaction*: minor or full); skipped
   for tables it does not handle (changelog producers, deletion vectors, ...).
4. `expire_snapshots` expires old snapshots and deletes the files only they used.
5. `compact_manifests` merges the manifests into one.
6. `remove_orphan_files` deletes old files no snapshot uses (a crashed writer's leftovers).

**Dry run is on by default**: the steps only report what they would do (task logs and XCom). Untick
*Dry run* to change the table.

**Connection**: `{CONN_ID}` (type `lakeformat`, from the environment variable `LAKEFORMAT_CONN_ID`): its host
is the warehouse, e.g. `s3://warehouse/wh` or `/data/warehouse`; a `db.table` name is placed under it.

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID` (default `lakeformat_default`),
`LAKEFORMAT_DEMO_TABLE` (the *Table* field's default, `demo.events`).

**Paused**: on a stock Airflow a new DAG starts paused. A manual trigger still creates the run, but it waits
until the DAG is unpaused: use the toggle next to its name, or
`airflow dags unpause lakeformat_manual_maintenance`. See `docs/airflow.md`, "Run the examples on your
Airflow".
"""

with DAG(
    dag_id="lakeformat_manual_maintenance",
    description="Check inputs, expire partitions, compact data, expire snapshots, compact manifests, remove orphans of one table (dry run by default)",
    doc_md=DOC_MD,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2)},
    params={
        "table": Param(
            DEFAULT_TABLE,
            type="string",
            minLength=1,
            title="Table",
            description=(
                f"A table URI (s3://bucket/wh/db.db/events, /data/wh/db.db/events) or db.table under the "
                f"warehouse of connection {CONN_ID}. Default {DEFAULT_TABLE}. The run stops at once if it "
                "does not exist."
            ),
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description=(
                "Ticked (the default): every step only reports what it would do; nothing is written or "
                "deleted. Untick to change the table."
            ),
        ),
        "execution": Param(
            "auto",
            enum=["auto", "local", "spark"],
            title="Where to run",
            description=(
                "Default auto: Spark (connection spark_default) from 250,000 live files or 5,000 manifests, "
                "else in the worker; local: always in the worker; spark: always a Spark job. Applies to data "
                "compaction, expiry and orphan cleanup; manifest compaction always runs in the worker."
            ),
        ),
        "min_file_count": Param(
            None,
            type=["null", "integer"],
            minimum=2,
            title="Data compaction: smallest group",
            description=(
                "Append tables: rewrite small files only where at least this many can be merged, at least 2. "
                "Empty (the default): the table's compaction.min.file-num, 5. Primary-key tables choose what to "
                "merge by Paimon's own rules and refuse this: leave it empty for them."
            ),
        ),
        "compaction_mode": Param(
            None,
            type=["null", "string"],
            enum=[None, "minor", "full"],
            title="Primary-key compaction",
            description=(
                "Paimon primary-key tables only. minor: merge the small sorted runs Paimon's writers would merge "
                "(its universal compaction; readers get faster, deletes stay until the top level). full: merge "
                "every bucket into one sorted run at the top level, dropping deleted rows (slower, the most "
                "compact result). Empty (the default): minor. Leave empty for append and Iceberg tables."
            ),
        ),
        "partition_expiration_time": Param(
            None,
            type=["null", "string"],
            pattern=DURATION_PATTERN,
            title="Expire partitions older than",
            description=(
                f"Paimon tables: drop every partition whose time is older than now minus this: {DURATION_FORMAT}. "
                "Empty (the default): the table's own partition.expiration-time; a table without one keeps "
                "all its partitions (the step is skipped)."
            ),
        ),
        "partition_time_format": Param(
            None,
            type=["null", "string"],
            title="Partition time format",
            description=(
                "How a partition value spells its time, as a Java date pattern: yyyyMMdd for dt=20240131, "
                "yyyy-MM-dd HH for 2024-01-31 07. Empty (the default): the table's partition.timestamp-formatter, "
                "else year-month-day as in 2024-01-31 (optionally followed by ' 07:00:00'). Partitions whose "
                "value does not match are kept and listed in the step's result."
            ),
        ),
        "partition_time_template": Param(
            None,
            type=["null", "string"],
            title="Partition time from several keys",
            description=(
                "When the time is spread over several partition keys: a template naming them with $, e.g. "
                "'$dt $hour:00:00'. Empty (the default): the table's partition.timestamp-pattern, else the "
                "first partition key's value."
            ),
        ),
        "retain_min": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Snapshots to keep at least",
            description=(
                "Expiry never leaves fewer snapshots than this. A whole number, at least 1. Empty (the "
                "default): the table's own option (Paimon snapshot.num-retained.min, default 10; Iceberg "
                "history.expire.min-snapshots-to-keep, default 1)."
            ),
        ),
        "older_than": Param(
            None,
            type=["null", "string"],
            pattern=DURATION_PATTERN,
            title="Expire snapshots older than",
            description=(
                f"Expire a snapshot once its successor is older than this: {DURATION_FORMAT}. Empty (the "
                "default): the table's own option (Paimon snapshot.time-retained, default 1 h; Iceberg "
                "history.expire.max-snapshot-age-ms, default 5 d)."
            ),
        ),
        "orphan_older_than": Param(
            "1 d",
            type="string",
            pattern=DURATION_PATTERN,
            minLength=1,
            title="Orphan files older than",
            description=(
                f"Only files older than this can be deleted as orphans: {DURATION_FORMAT}. Default 1 d. "
                "Floor: at least 1 h for Paimon tables and 24 h for Iceberg tables, because a younger file may "
                "belong to a commit still being written; shorter is refused unless the next box is ticked."
            ),
        ),
        "allow_short_orphan_older_than": Param(
            False,
            type="boolean",
            title="Allow an orphan age under the floor",
            description=(
                "Default off. Tick only when no writer is running on the table: it lets Orphan files older "
                "than go under 1 h (Paimon) or 24 h (Iceberg), e.g. to clean up right after a failed write."
            ),
        ),
    },
    render_template_as_native_obj=False,
    tags=["lakeformat", "maintenance"],
) as dag:
    shared = {
        "table": "{{ params.table }}",
        "lakeformat_conn_id": CONN_ID,
        "dry_run": "{{ params.dry_run }}",
    }
    validate = LakeformatValidateOperator(
        task_id="validate_inputs",
        table="{{ params.table }}",
        lakeformat_conn_id=CONN_ID,
        retain_min="{{ params.retain_min }}",
        older_than="{{ params.older_than }}",
        orphan_older_than="{{ params.orphan_older_than }}",
        allow_short_orphan_older_than="{{ params.allow_short_orphan_older_than }}",
        min_file_count="{{ params.min_file_count }}",
        execution="{{ params.execution }}",
    )
    expire_partitions = LakeformatExpirePartitionsOperator(
        task_id="expire_partitions",
        expiration_time="{{ params.partition_expiration_time }}",
        timestamp_formatter="{{ params.partition_time_format }}",
        timestamp_pattern="{{ params.partition_time_template }}",
        skip_unsupported=True,
        **shared,
    )
    compact_data = LakeformatCompactDataOperator(
        task_id="compact_data",
        execution="{{ params.execution }}",
        min_file_count="{{ params.min_file_count }}",
        mode="{{ params.compaction_mode or '' }}",  # empty: the operator's default for the table
        skip_unsupported=True,
        trigger_rule="none_failed",  # runs after a skipped partition expiry too
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
        allow_short_older_than="{{ params.allow_short_orphan_older_than }}",
        **shared,
    )
    validate >> expire_partitions >> compact_data >> expire >> compact_manifests >> orphans
