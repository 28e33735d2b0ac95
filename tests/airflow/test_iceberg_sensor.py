"""The snapshot sensor, its trigger and the Asset watcher on Iceberg tables (and the watcher on Paimon).

Commits the sensor must see are made by a thread once the run reached the state that matters (the sensor
recorded its baseline, or the poking task is running); the watcher's commits are made once it took its
baseline. The deferring test takes the real path (``dag.test()`` runs the trigger in line), the watcher
test drives the event trigger's async run loop directly, with commits by pyiceberg itself and by our core.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.sensors.snapshot import sensor_variable_key
from airflow_lakeformat.triggers import snapshot as trigger_module
from airflow_lakeformat.triggers.snapshot import LakeformatSnapshotEventTrigger, watched_table_asset
from airflow_lakeformat.triggers.watch import IcebergSnapshotWatch
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
from tests.airflow.iceberg_helpers import (
    append_batch,
    batch,
    catalog_connection,
    catalog_table,
    head,
    path_table,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]


def test_deferrable_sensor_on_a_catalog_table_ignores_compaction_and_counts_records(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse)
    append_batch(table, 2)
    baseline = append_batch(table, 2)
    module = load_dag_module("lakeformat_test_iceberg")
    key = sensor_variable_key("lakeformat_test_iceberg_sensor", "wait", -1, "default:db.events")
    committed: dict[str, int] = {}

    def commit_batches() -> None:
        table.refresh()
        replaced = compact_manifests(table, "full").snapshot_id  # a replace: ignored (COMPACT covers it)
        assert replaced is not None
        committed["replace"] = replaced
        committed["first"] = append_batch(table, 2)  # 2 < min_new_records 3
        committed["second"] = append_batch(table, 2)  # 4 >= 3: the match

    with when(lambda: variable_record(key) is not None, commit_batches):
        run = module.sensor_dag.test(run_conf={"table": "db.events", "branch": "main"})
    assert task_states(run)["wait"] == ("success", 1)
    assert any("running trigger in line" in r.getMessage() for r in caplog.records), "it deferred"
    result = xcom_result(run, "wait")
    table.refresh()
    second = table.metadata.snapshot_by_id(committed["second"])
    assert second is not None
    assert result == {
        "table": "default:db.events",
        "format": "iceberg",
        "branch": "main",
        "afterSnapshotId": baseline,
        "id": committed["second"],
        "commitKind": "APPEND",
        "timeMillis": second.timestamp_ms,
        "deltaRecordCount": 2,
        "totalRecordCount": 8,
        "newRecords": 4,
        "snapshotsMatched": 2,
    }
    assert variable_record(key) == {
        "table": "default:db.events",
        "runId": run.run_id,
        "after": baseline,
        "snapshotId": committed["second"],
    }


def test_poking_sensor_waits_on_a_branch_and_ignores_main(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    root = str(warehouse / "db.db" / "events")
    table = path_table(root)
    start = append_batch(table, 1)
    table.table.manage_snapshots().create_branch(start, "audit").commit()
    append_batch(table, 5)  # on main: not on the audit branch's history
    module = load_dag_module("lakeformat_test_iceberg")
    landed: dict[str, int] = {}

    def commit_to_audit() -> None:
        landed["audit"] = append_batch(table, 3, branch="audit")

    with when(
        lambda: task_state("lakeformat_test_iceberg_sensor_poke", "wait") == "running", commit_to_audit
    ):
        run = module.poke_dag.test(run_conf={"table": "db.events", "branch": "audit", "after": start})
    result = xcom_result(run, "wait")
    assert (result["id"], result["branch"], result["newRecords"], result["snapshotsMatched"]) == (
        landed["audit"],
        "audit",
        3,
        1,
    )
    assert (result["table"], result["format"], result["afterSnapshotId"]) == (root, "iceberg", start)
    assert head(table) != landed["audit"], "main moved on its own"


def test_iceberg_watch_does_not_count_a_rollback_as_new(tmp_path: Path) -> None:
    table = path_table(str(tmp_path / "t"))
    first = append_batch(table, 1)
    second = append_batch(table, 2)
    watch = IcebergSnapshotWatch(second, min_new_records=1)
    assert watch.poll(table) is None
    table.table.manage_snapshots().rollback_to_snapshot(first).commit()
    assert watch.poll(table) is None, "the branch went back: nothing is new"
    third = append_batch(table, 4)
    match = watch.poll(table)
    assert match is not None and (match.snapshot_id, match.new_records, match.snapshots_matched) == (
        third,
        4,
        1,
    )


# -- the Asset watcher -------------------------------------------------------------------------------


def test_watched_asset_serializes_with_its_event_trigger_and_no_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.triggers.base import BaseEventTrigger

    catalog_connection(monkeypatch, tmp_path, iceberg_catalog_token="watch-token-789")
    asset = watched_table_asset("db.events", ignore_commit_kinds=["compact"], poll_interval=5)
    # Named through the connection without reading it (issue 28), as the write and commit operators name it.
    assert asset.uri == "lakeformat://lakeformat_default/db.events"
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, BaseEventTrigger)
    assert watcher.name == "lakeformat-commits:lakeformat://lakeformat_default/db.events"
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_lakeformat.triggers.snapshot.LakeformatSnapshotEventTrigger"
    assert kwargs == {
        "table": "db.events",
        "lakeformat_conn_id": "lakeformat_default",
        "ignore_commit_kinds": ["COMPACT"],
        "min_new_records": 0,
        "poll_interval": 5.0,
        "table_format": None,
        "branch": "main",
        "after_snapshot_id": None,
    }
    with DAG("lakeformat_test_watched", schedule=[asset]) as dag:
        pass
    serialized = str(DagSerialization.to_dict(dag))
    assert "LakeformatSnapshotEventTrigger" in serialized and "watch-token-789" not in serialized


def run_watcher(trigger: LakeformatSnapshotEventTrigger, commits: list[Any]) -> list[dict[str, Any]]:
    """Drive the watcher's run loop; once it took its baseline, make ``commits`` (callables, in a thread)
    one after the other, each after the previous one's event arrived; return the events' payloads."""
    baseline_taken = threading.Event()
    real = trigger_module.latest_snapshot_id

    def observed(table: Any, branch: str = "main") -> int:
        value = real(table, branch)
        baseline_taken.set()
        return value

    async def collect() -> list[dict[str, Any]]:
        payloads: list[dict[str, Any]] = []
        stream = trigger.run()
        pending = asyncio.ensure_future(stream.__anext__())
        assert await asyncio.to_thread(baseline_taken.wait, 60), "the watcher never took its baseline"
        for index, commit in enumerate(commits):
            await asyncio.to_thread(commit)
            payloads.append(dict((await pending).payload))
            if index + 1 < len(commits):
                pending = asyncio.ensure_future(stream.__anext__())
        await stream.aclose()
        return payloads

    trigger_module.latest_snapshot_id = observed  # type: ignore[assignment]
    try:
        return asyncio.run(asyncio.wait_for(collect(), timeout=120))
    finally:
        trigger_module.latest_snapshot_id = real  # type: ignore[assignment]


def test_event_trigger_fires_on_commits_of_any_engine_to_an_iceberg_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse)
    append_batch(table, 1)  # before the watcher starts: not an event
    seen: dict[str, int] = {}

    def pyiceberg_append() -> None:
        # Another engine: pyiceberg's own Table.append, not this package.
        table.refresh()
        table.table.append(batch(3))
        seen["pyiceberg"] = head(table)

    def compact_then_append() -> None:
        table.refresh()
        assert compact_manifests(table, "full").snapshot_id is not None  # ignored
        seen["core"] = append_batch(table, 2)

    trigger = LakeformatSnapshotEventTrigger("db.events", ignore_commit_kinds=["COMPACT"], poll_interval=0.05)
    first, second = run_watcher(trigger, [pyiceberg_append, compact_then_append])
    assert first["status"] == "success" and second["status"] == "success"
    assert (first["snapshot"]["id"], first["snapshot"]["newRecords"], first["snapshot"]["commitKind"]) == (
        seen["pyiceberg"],
        3,
        "APPEND",
    )
    assert first["snapshot"]["format"] == "iceberg" and first["snapshot"]["table"] == "default:db.events"
    # The next event counts from the previous one: the replace is ignored, the append counted.
    assert (second["snapshot"]["id"], second["snapshot"]["newRecords"]) == (seen["core"], 2)
    assert (second["snapshot"]["afterSnapshotId"], second["snapshot"]["snapshotsMatched"]) == (
        seen["pyiceberg"],
        1,
    )


def test_event_trigger_fires_on_paimon_commits_and_waits_out_a_missing_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    uri = str(warehouse / "db.db" / "events")
    seen: dict[str, int] = {}

    def create_and_append() -> None:
        seen["first"] = append(make_table(uri), 4)

    trigger = LakeformatSnapshotEventTrigger("db.events", poll_interval=0.05, after_snapshot_id=0)

    async def collect() -> dict[str, Any]:
        stream = trigger.run()
        pending = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.3)  # the table does not exist yet: the watcher keeps looking, no event
        assert not pending.done()
        await asyncio.to_thread(create_and_append)
        event = await pending
        await stream.aclose()
        return dict(event.payload)

    payload = asyncio.run(asyncio.wait_for(collect(), timeout=120))
    assert payload["snapshot"]["id"] == seen["first"] == 1
    assert (payload["snapshot"]["format"], payload["snapshot"]["newRecords"]) == ("paimon", 4)
