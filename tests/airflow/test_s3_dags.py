"""The Airflow layer against SeaweedFS S3: credentials from the connection reach the worker and the triggerer."""

from __future__ import annotations

import json

import pytest

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR
from tests.airflow.helpers import load_dag_module, make_table, set_connection, task_states, xcom_result
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = [pytest.mark.airflow, pytest.mark.s3, pytest.mark.usefixtures("airflow_db")]


def s3_connection(monkeypatch: pytest.MonkeyPatch, server: SeaweedFSServer, host: str, secret: str) -> None:
    set_connection(
        monkeypatch,
        "lakeformat_default",
        host=host,
        login=server.access_key,
        password=secret,
        extra={
            "endpoint_url": server.endpoint_url,
            "region": server.region,
            "storage_options": json.dumps({"config_kwargs": {"s3": {"addressing_style": "path"}}}),
        },
    )


def test_commit_compact_and_deferred_sensor_on_s3(
    seaweedfs: SeaweedFSServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_connection(monkeypatch, seaweedfs, f"{s3_bucket}/wh", seaweedfs.secret_key)
    uri = f"{s3_bucket}/wh/db.db/events"
    table = make_table(uri, seaweedfs.storage_options())

    commit = load_dag_module("lakeformat_test_commit").commit_dag.test(run_conf={"table": "db.events"})
    assert set(task_states(commit).values()) == {("success", 1)}
    assert xcom_result(commit, "commit_entries")["snapshotId"] == 2

    maintenance = load_dag_module("lakeformat_test_maintenance")
    compact = maintenance.compact_dag.test(run_conf={"table": "db.events", "mode": "full", "dry_run": False})
    result = xcom_result(compact, "compact")
    assert (result["snapshotId"], result["manifestsBefore"], result["manifestsAfter"]) == (3, 2, 1)
    lock_dir = f"{s3_bucket.removeprefix('s3://')}/wh/db.db/events/{LOCK_DIR}"
    assert sorted(p.rsplit("/", 1)[1] for p in seaweedfs.fs().ls(lock_dir)) == [
        "maintenance-lock-1",
        "maintenance-lock-1.released",
    ]

    # The trigger builds its hook from the connection id, so the S3 credentials never travel with it.
    sensor = load_dag_module("lakeformat_test_sensor").trigger_dag.test(
        run_conf={"table": "db.events", "after": 1}
    )
    matched = xcom_result(sensor, "wait")
    assert (matched["table"], matched["id"], matched["newRecords"], matched["snapshotsMatched"]) == (
        uri,
        3,
        2,
        2,
    )
    assert table.snapshot_manager.latest_snapshot_id() == 3


def test_wrong_secret_fails_once_with_access_denied(
    seaweedfs: SeaweedFSServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_table(f"{s3_bucket}/wh/db.db/events", seaweedfs.storage_options())
    s3_connection(monkeypatch, seaweedfs, f"{s3_bucket}/wh", "not-the-secret")
    maintenance = load_dag_module("lakeformat_test_maintenance")
    maintenance.FAILURES.clear()
    run = maintenance.compact_dag.test(run_conf={"table": "db.events", "mode": "full", "dry_run": False})
    assert task_states(run)["compact"] == ("failed", 1)
    message = str(maintenance.FAILURES["lakeformat_test_compact_manifests"])
    assert message.startswith(f"{s3_bucket}/wh/db.db/events: access denied (")
    assert message.endswith("check the credentials of connection 'lakeformat_default'")
