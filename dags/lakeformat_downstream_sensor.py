"""Downstream, waiting on the table itself: a deferrable sensor waits (in the triggerer, holding no worker
slot) for a snapshot newer than the last one this sensor saw, ignoring COMPACT snapshots of maintenance,
then a task reads the matched snapshot from XCom. A run triggered with ``after_snapshot_id`` waits for a
snapshot after that id instead.

Environment: ``LAKEFORMAT_DEMO_TABLE`` (default ``demo.events``, under the warehouse of the connection),
``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``), ``LAKEFORMAT_SENSOR_POLL_INTERVAL`` (seconds,
default 30), ``LAKEFORMAT_SENSOR_TIMEOUT`` (seconds, default 6 h).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

# A db.table name is placed under the connection's warehouse when the sensor runs.
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
POLL_INTERVAL = float(os.environ.get("LAKEFORMAT_SENSOR_POLL_INTERVAL", "30"))
TIMEOUT = float(os.environ.get("LAKEFORMAT_SENSOR_TIMEOUT", str(6 * 3600)))

DOC_MD = f"""
### Wait for a new snapshot of the table

`wait_for_snapshot` waits, deferred in the triggerer (it holds no worker slot), for a snapshot of `{TABLE}`
newer than the last one this sensor saw, ignoring the COMPACT snapshots maintenance commits; `use_snapshot`
then reads the matched snapshot from XCom. Trigger it, then run `lakeformat_ingest`: the sensor resumes.
The first run ever waits for a snapshot newer than the latest at its first look.

**Trigger form**: *Wait for a snapshot after* (`after_snapshot_id`) waits beyond that id instead.

**Connection**: `{CONN_ID}` (type `lakeformat`; `LAKEFORMAT_CONN_ID`): its host is the warehouse; a
`db.table` name is placed under it when the task runs. The triggerer needs the connection too.

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID`, `LAKEFORMAT_DEMO_TABLE` (default
`demo.events`), `LAKEFORMAT_SENSOR_POLL_INTERVAL` (seconds between looks, now {POLL_INTERVAL:g}),
`LAKEFORMAT_SENSOR_TIMEOUT` (seconds before the sensor gives up, now {TIMEOUT:g}).

**Paused**: on a stock Airflow a new DAG starts paused, and a triggered run waits until it is unpaused: use
the toggle next to its name, or `airflow dags unpause lakeformat_downstream_sensor`. See `docs/airflow.md`,
"Run the examples on your Airflow".
"""

with DAG(
    dag_id="lakeformat_downstream_sensor",
    description="Wait for a new (non-COMPACT) snapshot of the table, then use it",
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
                "A snapshot id: wait for a snapshot newer than it. Empty (the default): newer than the "
                "snapshot this sensor matched last time (on its first run ever, the latest one)."
            ),
        )
    },
    render_template_as_native_obj=False,
    tags=["lakeformat", "downstream"],
) as dag:
    wait = LakeformatSnapshotSensor(
        task_id="wait_for_snapshot",
        table=TABLE,
        lakeformat_conn_id=CONN_ID,
        after_snapshot_id="{{ params.after_snapshot_id }}",
        ignore_commit_kinds=["COMPACT"],
        deferrable=True,
        poll_interval=POLL_INTERVAL,
        timeout=TIMEOUT,
    )

    @task
    def use_snapshot(snapshot: dict[str, Any]) -> int:
        print(
            f"snapshot {snapshot['id']} ({snapshot['commitKind']}) of {snapshot['table']}: "
            f"{snapshot['newRecords']} new records since snapshot {snapshot['afterSnapshotId']}"
        )
        return int(snapshot["id"])

    use_snapshot(wait.output)
