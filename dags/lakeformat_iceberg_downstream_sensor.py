"""Downstream of the Iceberg example table, waiting on the table itself: a deferrable sensor waits (in the
triggerer, holding no worker slot) for a new snapshot that adds data, then a task returns the matched
snapshot's id.

Iceberg snapshot ids are random, so "new" means above the baseline on the ``main`` branch's ancestry
(``triggers/watch.py``): the baseline is the snapshot the previous run of this sensor matched (kept in an
Airflow Variable), on the first run ever the latest snapshot at the first look, or the trigger form's
``after_snapshot_id``. ``REPLACE`` snapshots (manifest compactions of ``lakeformat_iceberg_maintenance``) do
not count.

The table is ``lakeformat_iceberg_maintenance``'s (``LAKEFORMAT_ICEBERG_TABLE``, default
``demo.events_iceberg``, through ``LAKEFORMAT_ICEBERG_CONN_ID``, else ``LAKEFORMAT_CONN_ID``, else
``lakeformat_default``); the sensor opens it through the connection when it runs. Environment, read when the
file is parsed: those, ``LAKEFORMAT_SENSOR_POLL_INTERVAL`` (seconds, default 30) and
``LAKEFORMAT_SENSOR_TIMEOUT`` (seconds, default 6 h), the same as ``lakeformat_downstream_sensor``'s.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

CONN_ID = (
    os.environ.get("LAKEFORMAT_ICEBERG_CONN_ID")
    or os.environ.get("LAKEFORMAT_CONN_ID")
    or "lakeformat_default"
)
# namespace.table of the connection's Iceberg catalog, else placed under its warehouse when the sensor runs.
TABLE = os.environ.get("LAKEFORMAT_ICEBERG_TABLE") or "demo.events_iceberg"
POLL_INTERVAL = float(os.environ.get("LAKEFORMAT_SENSOR_POLL_INTERVAL", "30"))
TIMEOUT = float(os.environ.get("LAKEFORMAT_SENSOR_TIMEOUT", str(6 * 3600)))

DOC_MD = f"""
### Wait for a new snapshot of the Iceberg table

`wait_for_snapshot` waits, deferred in the triggerer (it holds no worker slot), for a snapshot of `{TABLE}`
above the last one this sensor matched on the `main` branch, ignoring the `replace` snapshots of manifest
compactions; `use_snapshot` then returns the matched snapshot's id. Trigger it, then run
`lakeformat_iceberg_ingest`: the sensor resumes. The first run ever waits for a snapshot above the latest at
its first look.

**Trigger form**: *Wait for a snapshot after* (`after_snapshot_id`) waits for a snapshot above that one instead.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_ICEBERG_CONN_ID`, else `LAKEFORMAT_CONN_ID`): the
table of its Iceberg catalog, or without one a Hadoop-layout table under its host. The triggerer needs the
connection too.

**Environment** (read when the file is parsed): `LAKEFORMAT_ICEBERG_CONN_ID`, `LAKEFORMAT_CONN_ID`,
`LAKEFORMAT_ICEBERG_TABLE` (default `demo.events_iceberg`), `LAKEFORMAT_SENSOR_POLL_INTERVAL` (seconds between
looks, now {POLL_INTERVAL:g}), `LAKEFORMAT_SENSOR_TIMEOUT` (seconds before the sensor gives up, now {TIMEOUT:g}).

**Paused**: on a stock Airflow a new DAG starts paused, and a triggered run waits until it is unpaused: use
the toggle next to its name, or `airflow dags unpause lakeformat_iceberg_downstream_sensor`. See
`docs/airflow.md`, "Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_iceberg_downstream_sensor",
    description="Wait for a new (non-replace) snapshot of the Iceberg demo table, then use it",
    doc_md=DOC_MD,
    schedule=None,
    catchup=False,
    max_active_runs=1,
    params={
        "after_snapshot_id": Param(
            None,
            type=["null", "integer"],
            title="Wait for a snapshot after",
            description=(
                "An Iceberg snapshot id: wait for a snapshot above it on the main branch. Empty (the "
                "default): above the snapshot this sensor matched last time (on its first run ever, the "
                "latest one)."
            ),
        )
    },
    render_template_as_native_obj=False,
    tags=["lakeformat", "iceberg", "downstream"],
) as dag:
    wait = LakeformatSnapshotSensor(
        task_id="wait_for_snapshot",
        table=TABLE,
        lakeformat_conn_id=CONN_ID,
        table_format="iceberg",
        after_snapshot_id="{{ params.after_snapshot_id }}",
        ignore_commit_kinds=["REPLACE"],
        deferrable=True,
        poll_interval=POLL_INTERVAL,
        timeout=TIMEOUT,
    )

    @task
    def use_snapshot(snapshot: dict[str, Any]) -> int:
        """The matched snapshot's id."""
        print(
            f"snapshot {snapshot['id']} ({snapshot['commitKind']}) of {snapshot['table']}: "
            f"{snapshot['newRecords']} new records since snapshot {snapshot['afterSnapshotId']}"
        )
        return int(snapshot["id"])

    use_snapshot(wait.output)
