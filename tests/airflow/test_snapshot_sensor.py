"""LakeformatSnapshotSensor and its trigger in real DAG runs, plus the trigger on its own.

Commits that the sensor must see are made by a thread of the test once the run has reached the state
that matters (the sensor recorded its baseline, or the task is up for reschedule), so no assertion
depends on timing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.sensors.snapshot import sensor_variable_key
from airflow_lakeformat.triggers.snapshot import COMMIT_KINDS, LakeformatSnapshotTrigger, SnapshotWatch
from tests.airflow.helpers import (
    append,
    load_dag_module,
    make_table,
    set_connection,
    task_state,
    task_states,
    variable_record,
    when,
    xcom_result,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]


def test_deferrable_sensor_resumes_on_a_new_snapshot_and_the_next_run_continues_after_it(
    warehouse: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    append(table, 1)
    append(table, 1, dt="2024-01-02")
    module = load_dag_module("lakeformat_test_sensor")
    key = sensor_variable_key("lakeformat_test_sensor_deferrable", "wait", -1, uri)

    def commit_batches() -> None:
        assert compact_manifests(table, "full").snapshot_id == 3  # COMPACT: ignored by the sensor
        append(table, 2)  # 4
        append(table, 3)  # 5: 2 + 3 >= min_new_records 4

    with when(lambda: variable_record(key) is not None, commit_batches):
        first = module.deferrable_dag.test(run_conf={"table": "db.events"})
    assert task_states(first)["wait"] == ("success", 1)
    assert any("[DAG TEST] running trigger in line" in r.getMessage() for r in caplog.records), "it deferred"
    assert xcom_result(first, "wait") == {
        "table": uri,
        "format": "paimon",
        "branch": "main",
        "afterSnapshotId": 2,  # the latest snapshot when this sensor first ran
        "id": 5,
        "commitKind": "APPEND",
        "timeMillis": table.snapshot_manager.snapshot(5).time_millis,
        "deltaRecordCount": 3,
        "totalRecordCount": 7,
        "newRecords": 5,
        "snapshotsMatched": 2,
    }
    assert variable_record(key) == {"table": uri, "runId": first.run_id, "after": 2, "snapshotId": 5}

    def one_more_batch() -> None:
        append(table, 4)  # 6

    with when(lambda: (variable_record(key) or {}).get("runId") != first.run_id, one_more_batch):
        second = module.deferrable_dag.test(run_conf={"table": "db.events"})
    result = xcom_result(second, "wait")
    assert (result["afterSnapshotId"], result["id"], result["newRecords"]) == (5, 6, 4)


def test_explicit_after_id_matches_without_deferring(
    warehouse: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    for _ in range(3):
        append(table, 2)
    module = load_dag_module("lakeformat_test_sensor")
    run = module.explicit_dag.test(run_conf={"table": uri, "after": 1})
    result = xcom_result(run, "wait")
    assert (result["afterSnapshotId"], result["id"], result["newRecords"], result["snapshotsMatched"]) == (
        1,
        3,
        4,
        2,
    )
    assert not any("running trigger in line" in r.getMessage() for r in caplog.records)
    # An explicit id leaves no record behind.
    assert variable_record(sensor_variable_key("lakeformat_test_sensor_explicit", "wait", -1, uri)) is None


def test_rescheduled_sensor_keeps_its_baseline_across_pokes(warehouse: Path) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    append(table, 1)
    module = load_dag_module("lakeformat_test_sensor")
    dag_id = "lakeformat_test_sensor_reschedule"

    with when(lambda: task_state(dag_id, "wait") == "up_for_reschedule", lambda: append(table, 3)):
        run = module.reschedule_dag.test(run_conf={"table": "db.events"})
    result = xcom_result(run, "wait")
    assert (result["afterSnapshotId"], result["id"]) == (1, 2)
    assert task_states(run)["wait"] == ("success", 1)


def test_poking_sensor_sees_a_commit_made_while_it_waits(warehouse: Path) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    module = load_dag_module("lakeformat_test_sensor")
    key = sensor_variable_key("lakeformat_test_sensor_poke", "wait", -1, uri)
    with when(lambda: variable_record(key) is not None, lambda: append(table, 2)):
        run = module.poke_dag.test(run_conf={"table": "db.events"})
    result = xcom_result(run, "wait")
    assert (result["afterSnapshotId"], result["id"], result["commitKind"]) == (0, 1, "APPEND")


@pytest.mark.parametrize("where", ["worker", "trigger"])
def test_corrupt_snapshot_fails_once_with_the_file_named(warehouse: Path, where: str) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    append(table, 1)
    (warehouse / "db.db" / "events" / "snapshot" / "snapshot-1").write_text("{ garbage")
    module = load_dag_module("lakeformat_test_sensor")
    module.FAILURES.clear()
    dag = module.explicit_dag if where == "worker" else module.trigger_dag
    run = dag.test(run_conf={"table": "db.events", "after": 0})
    assert task_states(run)["wait"] == ("failed", 1)
    error = module.FAILURES[dag.dag_id]
    assert type(error).__name__ == "AirflowFailException"
    assert str(error).startswith(f"{uri}/snapshot/snapshot-1: not a valid snapshot JSON document")


def test_missing_table_and_bad_connection_fail_once(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_dag_module("lakeformat_test_sensor")
    module.FAILURES.clear()
    run = module.explicit_dag.test(run_conf={"table": "db.nothing", "after": 0})
    assert task_states(run)["wait"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_sensor_explicit"]) == (
        f"{warehouse}/db.db/nothing: no Paimon or Iceberg table here (the path does not exist)"
    )
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse), extra={"storage_options": "{oops"})
    module.FAILURES.clear()
    run = module.explicit_dag.test(run_conf={"table": "db.nothing", "after": 0})
    assert task_states(run)["wait"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_sensor_explicit"]).startswith(
        "connection 'lakeformat_default': extra 'storage_options' is not valid JSON"
    )


# -- the trigger on its own ------------------------------------------------------------------------


def test_trigger_serializes_without_secrets_and_round_trips() -> None:
    from airflow.sdk._shared.module_loading import import_string

    trigger = LakeformatSnapshotTrigger(
        table="db.events",
        lakeformat_conn_id="prod_lake",
        after_snapshot_id=41,
        ignore_commit_kinds=["compact"],
        min_new_records=10,
        poll_interval=15,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_lakeformat.triggers.snapshot.LakeformatSnapshotTrigger"
    assert kwargs == {
        "table": "db.events",
        "lakeformat_conn_id": "prod_lake",
        "after_snapshot_id": 41,
        "ignore_commit_kinds": ["COMPACT"],
        "min_new_records": 10,
        "poll_interval": 15.0,
        "table_format": None,
        "branch": "main",
    }
    assert json.loads(json.dumps(kwargs)) == kwargs
    rebuilt = import_string(classpath)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)


def first_event(trigger: LakeformatSnapshotTrigger) -> dict[str, Any]:
    async def collect() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(collect(), timeout=120))


def test_trigger_events(warehouse: Path) -> None:
    uri = str(warehouse / "db.db" / "events")
    table = make_table(uri)
    append(table, 3)
    success = first_event(LakeformatSnapshotTrigger("db.events", after_snapshot_id=0, poll_interval=0.05))
    assert success["status"] == "success"
    assert (success["snapshot"]["id"], success["snapshot"]["table"]) == (1, uri)
    missing = first_event(LakeformatSnapshotTrigger("db.other", poll_interval=0.05))
    assert missing == {
        "status": "error",
        "table": "db.other",
        "message": f"{warehouse}/db.db/other: no Paimon or Iceberg table here (the path does not exist)",
    }


def test_watch_counts_net_records_and_skips_ignored_kinds(tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "t"))
    watch = SnapshotWatch(0, ["COMPACT"], min_new_records=5)
    assert watch.poll(table) is None
    append(table, 2)
    append(table, 2, dt="2024-01-02")
    assert watch.poll(table) is None  # 4 < 5
    assert compact_manifests(table, "full").snapshot_id == 3
    assert watch.poll(table) is None  # COMPACT does not count
    append(table, 1)
    match = watch.poll(table)
    assert match is not None and (match.snapshot_id, match.new_records, match.snapshots_matched) == (4, 5, 3)
    assert watch.examined == 4


def test_commit_kinds_match_the_core() -> None:
    assert tuple(kind.value for kind in CommitKind) == COMMIT_KINDS
    with pytest.raises(ValueError, match="unknown commit kind"):
        SnapshotWatch(0, ["MERGE"])
