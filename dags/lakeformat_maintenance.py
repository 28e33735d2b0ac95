"""Scheduled maintenance of a list of Paimon tables: per table, expire partitions -> (compact data) -> expire
snapshots -> compact manifests -> remove orphan files, as one mapped task group expanded over the tables. ``validate_settings`` runs first
and checks the settings below once (durations, retention, the orphan age floor): a typo fails that one task
with one message, and no table is touched.

Settings come from the environment so the file parses without touching storage:

* ``LAKEFORMAT_MAINTENANCE_TABLES``: comma-separated table URIs, or ``db.table`` names under the connection's
  warehouse (default: the demo table, ``LAKEFORMAT_DEMO_TABLE`` or ``demo.events``).
* ``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``), ``LAKEFORMAT_MAINTENANCE_EXECUTION`` (``auto``,
  ``local`` or ``spark``: where expiry and orphan cleanup run; manifest compaction always runs in the worker).
* ``LAKEFORMAT_MAINTENANCE_DRY_RUN`` (default ``false``): ``true`` only reports what each step would do.
* ``LAKEFORMAT_PARTITION_EXPIRATION_TIME`` for partition expiry (default: each table's
  ``partition.expiration-time``; a table without one is skipped, as Iceberg tables are), Paimon's order:
  partitions first, so the snapshot expiry after it deletes the dropped partitions' files once no retained
  snapshot uses them.
* ``LAKEFORMAT_MAINTENANCE_COMPACTION``: ``off`` (the default: writers compact), ``minor`` or ``full``: adds a
  ``compact_data`` step after partition expiry. Primary-key tables get Paimon's merge-tree compaction in that
  mode, append tables the bin-pack of small files (``minor`` only: ``full`` is refused for them), both where
  ``LAKEFORMAT_MAINTENANCE_EXECUTION`` says; tables it does not handle are skipped.
* ``LAKEFORMAT_MAINTENANCE_RETAIN_MIN`` and ``LAKEFORMAT_MAINTENANCE_OLDER_THAN`` for expiry (default: the
  table's options); ``LAKEFORMAT_ORPHAN_OLDER_THAN`` (default ``1 d``) for orphan cleanup.

The DAG starts paused (``is_paused_upon_creation``), even where Airflow unpauses new DAGs: unpause it once
its tables exist. Retries cover transient failures (a dropped connection, a held maintenance lock); the
operators fail an unknown commit state, a missing table or corrupt metadata without retry.
"""

from __future__ import annotations

import os
from datetime import timedelta

from airflow.sdk import DAG, task, task_group

from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_partitions import LakeformatExpirePartitionsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.validate import validate_maintenance_inputs

# db.table names are placed under the connection's warehouse when the tasks run.
DEFAULT_TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
TABLES = [
    name.strip()
    for name in (os.environ.get("LAKEFORMAT_MAINTENANCE_TABLES") or DEFAULT_TABLE).split(",")
    if name.strip()
]
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
EXECUTION = os.environ.get("LAKEFORMAT_MAINTENANCE_EXECUTION", "auto")
DRY_RUN = os.environ.get("LAKEFORMAT_MAINTENANCE_DRY_RUN", "false")
RETAIN_MIN = os.environ.get("LAKEFORMAT_MAINTENANCE_RETAIN_MIN")
OLDER_THAN = os.environ.get("LAKEFORMAT_MAINTENANCE_OLDER_THAN")
ORPHAN_OLDER_THAN = os.environ.get("LAKEFORMAT_ORPHAN_OLDER_THAN", "1 d")
ORPHAN_ALLOW_SHORT = os.environ.get("LAKEFORMAT_ORPHAN_ALLOW_SHORT", "false")
PARTITION_EXPIRATION_TIME = os.environ.get("LAKEFORMAT_PARTITION_EXPIRATION_TIME")
# off, minor or full; another value reaches the compaction task, which fails naming it.
COMPACTION = (os.environ.get("LAKEFORMAT_MAINTENANCE_COMPACTION") or "off").strip().lower()

DOC_MD = f"""
### Scheduled maintenance of a list of tables

Every day, for each table of `LAKEFORMAT_MAINTENANCE_TABLES` (now: `{", ".join(TABLES)}`), a mapped task group
runs `expire_partitions` -> `compact_data` (when `LAKEFORMAT_MAINTENANCE_COMPACTION` is not `off`; now
`{COMPACTION}`) -> `expire_snapshots` -> `compact_manifests` -> `remove_orphan_files`, after `validate_settings` checked
the settings once. It **deletes files** (`LAKEFORMAT_MAINTENANCE_DRY_RUN` is `{DRY_RUN}`).

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`): its host is the warehouse, e.g.
`s3://warehouse/wh`; a `db.table` name is placed under it when the tasks run.

**Environment** (read when the file is parsed): `LAKEFORMAT_MAINTENANCE_TABLES` (comma-separated URIs or
`db.table` names; default `LAKEFORMAT_DEMO_TABLE` or `demo.events`), `LAKEFORMAT_MAINTENANCE_EXECUTION`
(`auto`, `local`, `spark`), `LAKEFORMAT_MAINTENANCE_DRY_RUN` (`true` only reports),
`LAKEFORMAT_PARTITION_EXPIRATION_TIME` (empty: each table's `partition.expiration-time`; tables without one
keep their partitions), `LAKEFORMAT_MAINTENANCE_COMPACTION` (`off`, `minor`: Paimon's universal compaction of
primary-key tables and the bin-pack of append tables, `full`: every primary-key bucket merged into one sorted
run), `LAKEFORMAT_MAINTENANCE_RETAIN_MIN` and `LAKEFORMAT_MAINTENANCE_OLDER_THAN` (empty:
each table's options),
`LAKEFORMAT_ORPHAN_OLDER_THAN` (default `1 d`, at least `1 h`, 24 h for Iceberg tables) and
`LAKEFORMAT_ORPHAN_ALLOW_SHORT` (`true` accepts a shorter age: only where no writer runs).

**Paused**: this DAG always starts paused, even where Airflow unpauses new DAGs. Unpause it once its tables
exist: the toggle next to its name, or `airflow dags unpause lakeformat_maintenance`. See `docs/airflow.md`,
"Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_maintenance",
    description="Expire partitions and snapshots, compact manifests and remove orphan files of every listed table",
    schedule="@daily",
    doc_md=DOC_MD,
    catchup=False,
    # It deletes files, and fails while its tables do not exist yet: turned on deliberately, in the UI.
    is_paused_upon_creation=True,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["lakeformat", "maintenance"],
) as dag:

    @task(retries=0)
    def validate_settings() -> dict[str, object]:
        """Check the settings from the environment once, before any table is touched."""
        return validate_maintenance_inputs(
            None,
            lakeformat_conn_id=CONN_ID,
            retain_min=RETAIN_MIN,
            older_than=OLDER_THAN,
            orphan_older_than=ORPHAN_OLDER_THAN,
            allow_short_orphan_older_than=ORPHAN_ALLOW_SHORT,
            execution=EXECUTION,
        )

    @task_group(group_id="maintain")
    def maintain(table: str) -> None:
        # The three steps hold the table's maintenance lock one after another; another DAG's run on the
        # same table waits for it (lock_wait) rather than failing.
        shared = {
            "table": table,
            "lakeformat_conn_id": CONN_ID,
            "execution": EXECUTION,
            "lock_wait": timedelta(minutes=30),
            # Expiry and orphan cleanup dry-run by default; this DAG exists to delete.
            "dry_run": DRY_RUN,
        }
        # Partition expiry reads and commits metadata only: it always runs in the worker. Tables without an
        # expiration time (and Iceberg tables) skip it.
        partitions = LakeformatExpirePartitionsOperator(
            task_id="expire_partitions",
            expiration_time=PARTITION_EXPIRATION_TIME,
            skip_unsupported=True,
            **{**shared, "execution": "local"},
        )
        expire = LakeformatExpireSnapshotsOperator(
            task_id="expire_snapshots",
            retain_min=RETAIN_MIN,
            older_than=OLDER_THAN,
            trigger_rule="none_failed",  # runs after a skipped partition expiry or compaction too
            **shared,
        )
        if COMPACTION != "off":
            # Before snapshot expiry, which then deletes the files the compaction replaced.
            compact_data = LakeformatCompactDataOperator(
                task_id="compact_data",
                mode=COMPACTION,
                skip_unsupported=True,
                trigger_rule="none_failed",
                **shared,
            )
            partitions >> compact_data >> expire
        else:
            partitions >> expire
        # Manifest compaction rewrites metadata only: it always runs in the worker.
        compact = LakeformatCompactManifestsOperator(
            task_id="compact_manifests", mode="full", **{**shared, "execution": "local"}
        )
        orphans = LakeformatRemoveOrphanFilesOperator(
            task_id="remove_orphan_files",
            older_than=ORPHAN_OLDER_THAN,
            allow_short_older_than=ORPHAN_ALLOW_SHORT,
            **shared,
        )
        expire >> compact >> orphans

    validate_settings() >> maintain.expand(table=TABLES)
