"""LakeformatCommitOperator in real DAG runs: staged paths and entries, exactly-once retries, Asset events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.operators.commit import (
    commit_identifier,
    entries_from_xcom,
    entries_to_xcom,
    flatten_staged,
    parse_overwrite,
    staged_digest,
)
from tests.airflow.helpers import (
    append,
    load_dag_module,
    make_table,
    set_connection,
    task_states,
    xcom_result,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]


def test_commit_staged_paths_then_entries_with_overwrite(warehouse: Path) -> None:
    table = make_table(str(warehouse / "db.db" / "events"))
    module = load_dag_module("lakeformat_test_commit")
    run = module.commit_dag.test(run_conf={"table": "db.events"})
    assert task_states(run) == {
        "stage_paths": ("success", 1),
        "stage_entries": ("success", 1),
        "commit_paths": ("success", 1),
        "commit_entries": ("success", 1),
    }
    first, second = xcom_result(run, "commit_paths"), xcom_result(run, "commit_entries")
    assert first["table"] == second["table"] == str(warehouse / "db.db" / "events")
    assert (first["snapshotId"], first["commitKind"], first["filesAdded"], first["deltaRecordCount"]) == (
        1,
        "APPEND",
        1,
        3,
    )
    assert first["commitUser"] == "airflow-lakeformat_test_commit-commit_paths"
    assert (second["snapshotId"], second["commitKind"], second["filesAdded"], second["filesDeleted"]) == (
        2,
        "OVERWRITE",
        1,
        0,
    )
    assert second["totalRecordCount"] == 5 and second["alreadyCommitted"] is False
    snapshots = table.snapshot_manager.snapshots()
    assert [(s.commit_user, s.commit_identifier) for s in snapshots] == [
        (first["commitUser"], first["commitIdentifier"]),
        (second["commitUser"], second["commitIdentifier"]),
    ]
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    assert sum(e.file.row_count for e in live_entries(table, latest)) == 5
    # The table name was templated, so the Asset event came through the alias, resolved to the connection's
    # Asset of the rendered name (issue 28), not to the root URI the name resolves to.
    events = asset_events("lakeformat://lakeformat_default/db.events", run.run_id)
    assert asset_events(f"file://{warehouse}/db.db/events") == []
    assert [e["extra"] for e in events] == [
        {"snapshotId": 1, "commitKind": "APPEND"},
        {"snapshotId": 2, "commitKind": "OVERWRITE"},
    ]


def test_retry_after_a_failure_after_publishing_commits_once(warehouse: Path) -> None:
    table = make_table(str(warehouse / "db.db" / "events"))
    before = append(table, 1)
    module = load_dag_module("lakeformat_test_commit")
    run = module.retry_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["commit"] == ("success", 2)
    result = xcom_result(run, "commit")
    assert result["alreadyCommitted"] is True and result["snapshotId"] == before + 1
    # Exactly one new snapshot: the first try's; the retry found it by its commit user and identifier.
    assert table.snapshot_manager.list_snapshot_ids() == [before, before + 1]
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.total_record_count == 1 + 4


def test_literal_table_uri_emits_its_asset_and_queues_the_consumer(
    session_warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_connection(monkeypatch, "lakeformat_default", host=str(session_warehouse))
    module = load_dag_module("lakeformat_test_commit")
    table = make_table(module.ASSET_TABLE)
    run = module.asset_dag.test()
    assert task_states(run)["commit"] == ("success", 1)
    [event] = asset_events(f"file://{module.ASSET_TABLE}")
    assert event["extra"] == {"snapshotId": 1, "commitKind": "APPEND"}
    assert event["source_dag_id"] == "lakeformat_test_commit_asset"
    assert table.snapshot_manager.latest_snapshot_id() == 1
    assert queued_dag_ids(f"file://{module.ASSET_TABLE}") == ["lakeformat_test_asset_consumer"]


@pytest.mark.parametrize(
    ("table_name", "files", "message"),
    [
        (
            "db.missing",
            ["dt=2024-01-01/bucket-0/data-x.parquet"],
            "db.db/missing: no Paimon or Iceberg table here (the path does not exist)",
        ),
        (
            "db.events",
            [{"format": "something-else"}],
            "<xcom>: not a staged file or lakeformat.manifest-entry.v1 document",
        ),
        ("db.events", ["../outside.parquet"], "outside.parquet"),
    ],
)
def test_bad_input_fails_once_with_a_clear_message(
    warehouse: Path, table_name: str, files: list[Any], message: str
) -> None:
    make_table(str(warehouse / "db.db" / "events"))
    module = load_dag_module("lakeformat_test_commit")
    module.FAILURES.clear()
    run = module.bad_dag.test(run_conf={"table": table_name, "files": files})
    assert task_states(run)["commit"] == ("failed", 1), "a permanent error is not retried"
    error = module.FAILURES["commit"]
    assert type(error).__name__ == "AirflowFailException"
    assert message in str(error)


def test_staged_entries_survive_xcom_json(tmp_path: Path) -> None:
    import json

    import pyarrow as pa

    from airflow_lakeformat.core.paimon.write.data_files import write_data_files

    table = make_table(str(tmp_path / "t"))
    entries = write_data_files(table, pa.table({"dt": ["a", "b"], "v": [1, 2]}))
    documents = json.loads(json.dumps(entries_to_xcom(entries)))
    decoded = entries_from_xcom(documents)
    assert [e.record for e in decoded] == [e.record for e in entries]
    assert [e.identifier() for e in decoded] == [e.identifier() for e in entries]


def test_commit_identity_is_stable_and_specific() -> None:
    staged = flatten_staged([["b.parquet", "a.parquet"], None, "c.parquet"])
    assert staged == ["b.parquet", "a.parquet", "c.parquet"]
    digest = staged_digest(staged)
    assert digest == staged_digest(["c.parquet", "a.parquet", "b.parquet"])
    ident = commit_identifier("dag", "run", "task", -1, digest)
    assert ident == commit_identifier("dag", "run", "task", -1, digest)
    assert 0 <= ident < 2**63 - 1
    others = {
        commit_identifier("dag", "run2", "task", -1, digest),
        commit_identifier("dag", "run", "task", 0, digest),
        commit_identifier("dag", "run", "task", -1, staged_digest(["a.parquet"])),
    }
    assert ident not in others and len(others) == 3
    assert parse_overwrite("*") == (True, None)
    assert parse_overwrite("dt=2024-01-01, h=3") == (True, {"dt": "2024-01-01", "h": "3"})
    assert parse_overwrite(None) == (False, None)
    assert parse_overwrite("  ") == (False, None)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overwrite("dt")
    with pytest.raises(ValueError, match="expected '\\*'"):
        parse_overwrite(",")  # a templated spec that rendered empty must not overwrite the whole table


def asset_events(uri: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The events of the Asset ``uri`` (of one DAG run's tasks when ``run_id`` is given: a table named
    through the connection, ``lakeformat://lakeformat_default/db.events``, is one Asset for every test)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
        query = query.where(AssetModel.uri == uri)
        if run_id is not None:
            query = query.where(AssetEvent.source_run_id == run_id)
        rows = session.scalars(query.order_by(AssetEvent.id)).all()
        return [{"extra": dict(row.extra), "source_dag_id": row.source_dag_id} for row in rows]


def queued_dag_ids(uri: str) -> list[str]:
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return sorted(
            session.scalars(
                select(AssetDagRunQueue.target_dag_id)
                .join(AssetModel, AssetDagRunQueue.asset_id == AssetModel.id)
                .where(AssetModel.uri == uri)
            ).all()
        )
