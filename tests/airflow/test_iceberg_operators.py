"""The Lakeformat operators on Iceberg tables in real DAG runs: a SQLite catalog table and Hadoop-layout roots.

Maintenance (expire -> compact manifests -> remove orphans) dry-runs and then changes the table; every result
has the one XCom shape; writes and commits append exactly once and carry the connection's commit user;
what Iceberg cannot do yet (partition overwrite, Spark for catalog tables except data compaction) fails once
with one message and no retry, or skips; data compaction on Spark, of a catalog table, leaves what the worker
leaves.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import TableAlreadyExistsError

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR
from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionSettings, LakeformatHook
from tests.airflow.helpers import load_dag_module, set_connection, task_states, xcom_result
from tests.airflow.iceberg_helpers import (
    append_batch,
    batch,
    catalog_connection,
    catalog_table,
    head,
    live_rows,
    path_table,
    plant_old_file,
    reopen_catalog_table,
    snapshot_ids,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]

HEAD_KEYS = ["operation", "table", "format", "dryRun"]


def check_shape(result: dict[str, Any], operation: str, table: str, dry_run: bool) -> None:
    """ONE shape: the four head keys first, with these values, then the operation's fields."""
    assert list(result)[:4] == HEAD_KEYS, list(result)
    assert (result["operation"], result["table"], result["format"], result["dryRun"]) == (
        operation,
        table,
        "iceberg",
        dry_run,
    )
    assert "job" not in result


# -- the hook ----------------------------------------------------------------------------------------


def test_connection_names_catalog_and_path_tables_and_keeps_secrets_out_of_repr() -> None:
    extra = {
        "iceberg_catalog": "prod",
        "iceberg_catalog_properties": json.dumps({"type": "rest", "uri": "https://catalog:8181"}),
        "iceberg_catalog_credential": "client:very-secret",
        "iceberg_catalog_secret_properties": {"s3.secret-access-key": "s3-secret"},
        "endpoint_url": "http://127.0.0.1:8333",
    }
    settings = LakeformatConnectionSettings.from_connection("lake", "s3://bucket/wh", "AKIA", "pw", extra)
    ref = settings.resolve("analytics.events")
    assert (ref.identifier, ref.location, ref.format, ref.target) == (
        "analytics.events",
        None,
        "iceberg",
        "analytics.events",
    )
    assert ref.asset_uri == "iceberg://prod/analytics/events"
    # A Paimon table under the same warehouse: the format says so; a URI is always a root.
    paimon = settings.resolve("analytics.events", "paimon")
    assert (paimon.identifier, paimon.location) == (None, "s3://bucket/wh/analytics.db/events")
    assert settings.resolve("s3://other/t").location == "s3://other/t"
    properties = settings.catalog_properties()
    assert properties["type"] == "rest" and properties["credential"] == "client:very-secret"
    assert properties["s3.endpoint"] == "http://127.0.0.1:8333" and properties["s3.access-key-id"] == "AKIA"
    assert properties["s3.secret-access-key"] == "s3-secret", "the catalog's own properties win"
    assert sorted(settings.catalog.secrets()) == ["client:very-secret", "s3-secret"]
    assert "very-secret" not in repr(settings) and "s3-secret" not in repr(settings)
    assert settings.catalog.describe() == "Iceberg catalog 'prod' (rest) at https://catalog:8181"
    without = LakeformatConnectionSettings.from_connection("lake", "/wh", None, None, {"format": "iceberg"})
    assert without.resolve("db.events").location == "/wh/db.db/events", "no catalog: a Hadoop-layout root"
    with pytest.raises(ValueError, match="extra 'iceberg_catalog_properties' is not valid JSON"):
        LakeformatConnectionSettings.from_connection(
            "lake", "/wh", None, None, {"iceberg_catalog_properties": "{"}
        )
    with pytest.raises(ValueError, match="extra 'format' must be 'paimon', 'iceberg' or empty"):
        LakeformatConnectionSettings.from_connection("lake", "/wh", None, None, {"format": "delta"})


def test_hook_masks_catalog_secrets_in_task_logs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    properties = {"type": "sql", "uri": "postgresql://lake:db-password-123@db/catalog"}
    set_connection(
        monkeypatch,
        "masked",
        host=str(tmp_path),
        extra={"iceberg_catalog_properties": properties, "iceberg_catalog_token": "bearer-token-456"},
    )
    _ = LakeformatHook("masked").settings
    masker = _secrets_masker()
    line = "uri postgresql://lake:db-password-123@db/catalog token bearer-token-456"
    redacted = str(masker.redact(line))
    assert "db-password-123" not in redacted and "bearer-token-456" not in redacted


def test_open_and_create_tables_of_both_kinds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse, commit_user_prefix="nightly")
    hook = LakeformatHook()
    created = hook.create_iceberg_table("db.events", batch(0).schema)
    assert (created.format, created.uri) == ("iceberg", "default:db.events")
    append_batch(created.native, 3)
    assert hook.open_lake_table("db.events").native.snapshot() is not None
    with pytest.raises(TableAlreadyExistsError):
        hook.create_iceberg_table("db.events", batch(0).schema)
    other_schema = pa.schema([("other", pa.string())])
    again = hook.create_iceberg_table("db.events", other_schema, exist_ok=True)  # as it is, not replaced
    assert again.native.snapshot() == hook.open_lake_table("db.events").native.snapshot() is not None
    assert again.native.table.schema().column_names == ["dt", "v"], "the existing schema, not other_schema"
    root = str(warehouse / "hadoop.db" / "events")
    hook_path = LakeformatHook("paths")
    set_connection(monkeypatch, "paths", host=str(warehouse))
    made = hook_path.create_iceberg_table("hadoop.events", batch(0).schema)
    assert (made.format, made.uri) == ("iceberg", root)
    assert (warehouse / "hadoop.db" / "events" / "metadata" / "v1.metadata.json").exists()
    assert (
        hook_path.create_iceberg_table("hadoop.events", pa.schema([("x", pa.int8())]), exist_ok=True).uri
        == root
    )
    assert not (warehouse / "hadoop.db" / "events" / "metadata" / "v2.metadata.json").exists(), "not changed"
    assert hook_path.open_lake_table(root).format == "iceberg", "detected from the files"
    ok, message = hook.test_connection()
    assert ok and message.startswith("Iceberg catalog 'default' (sql) at sqlite:///"), message
    assert "answers with 1 namespace(s): db" in message


# -- maintenance -------------------------------------------------------------------------------------


def test_maintenance_of_a_catalog_table_dry_run_then_for_real(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse, commit_user_prefix="nightly")
    table = catalog_table(warehouse)
    for rows in (2, 3, 4, 5):
        append_batch(table, rows)
    orphan = plant_old_file(table, days=4)
    before = snapshot_ids(table)
    module = load_dag_module("lakeformat_test_iceberg")

    dry = module.maintenance_dag.test(run_conf={"table": "db.events", "dry_run": True})
    assert set(task_states(dry).values()) == {("success", 1)}
    expired = xcom_result(dry, "expire_snapshots")
    check_shape(expired, "expire-snapshots", "default:db.events", True)
    assert (len(expired["snapshotsExpired"]), expired["execution"]) == (3, "local")
    compacted = xcom_result(dry, "compact_manifests")
    check_shape(compacted, "compact-manifests", "default:db.events", True)
    assert (compacted["manifestsBefore"], compacted["manifestsAfter"], compacted["snapshotId"]) == (
        4,
        1,
        None,
    )
    orphans = xcom_result(dry, "remove_orphan_files")
    check_shape(orphans, "remove-orphan-files", "default:db.events", True)
    assert orphans["orphans"] == 1 and orphans["orphanPaths"] == [orphan]
    assert snapshot_ids(table) == before and os.path.exists(orphan), "a dry run changes nothing"
    assert not (Path(table.root) / LOCK_DIR).exists(), "a dry run takes no lock"

    run = module.maintenance_dag.test(run_conf={"table": "db.events", "dry_run": False})
    assert set(task_states(run).values()) == {("success", 1)}
    expired = xcom_result(run, "expire_snapshots")
    check_shape(expired, "expire-snapshots", "default:db.events", False)
    assert sorted(expired["snapshotsExpired"]) == sorted(before[:3]) and expired["committed"] is True
    compacted = xcom_result(run, "compact_manifests")
    assert compacted["merge"] == "full" and compacted["snapshotId"] == head(table)
    assert xcom_result(run, "remove_orphan_files")["files"] == {"data-file": 1}
    reopened = reopen_catalog_table(warehouse)
    assert [s.snapshot_id for s in reopened.metadata.snapshots] == [before[3], head(reopened)]
    current = reopened.snapshot()
    assert (
        current is not None and current.summary is not None and current.summary.operation.value == "replace"
    )
    # The replace snapshot names the connection's commit user, as the operators' Iceberg appends do.
    user = LakeformatHook().commit_user("lakeformat_test_iceberg_maintenance", "compact_manifests")
    assert user == "nightly-lakeformat_test_iceberg_maintenance-compact_manifests"
    assert current.summary["lakeformat.commit-user"] == user
    assert current.summary["manifests-replaced"] == str(compacted["manifestsRewritten"])
    assert live_rows(reopened) == 14 and not os.path.exists(orphan)
    # Each real step held the table's lock on its storage and released it.
    locks = sorted(p.name for p in (Path(table.root) / LOCK_DIR).iterdir())
    assert locks == [f"maintenance-lock-{n}{s}" for n in (1, 2, 3) for s in ("", ".released")]


def test_data_compaction_of_an_iceberg_table_commits_a_replace_snapshot_in_a_dag_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse)
    for _ in range(3):
        append_batch(table, 2)
    before = snapshot_ids(table)
    module = load_dag_module("lakeformat_test_iceberg")
    dry = module.compact_data_dag.test(run_conf={"table": "db.events", "dry_run": True})
    assert task_states(dry)["compact_data"] == ("success", 1)
    planned = xcom_result(dry, "compact_data")
    assert planned["format"] == "iceberg" and planned["dryRun"] is True and planned["filesToRewrite"] == 3
    assert snapshot_ids(table) == before  # the dry run committed nothing
    run = module.compact_data_dag.test(run_conf={"table": "db.events", "dry_run": False})
    assert task_states(run)["compact_data"] == ("success", 1)
    result = xcom_result(run, "compact_data")
    assert result["dryRun"] is False and result["filesRewritten"] == 3 and result["filesAdded"] == 1
    table.refresh()
    current = table.snapshot()
    assert current is not None and current.snapshot_id == result["snapshotId"]
    assert current.summary.operation.value == "replace"
    assert current.summary["lakeformat.commit-user"].startswith(
        "airflow-lakeformat_test_iceberg_compact_data"
    )
    assert live_rows(table) == 6


def test_paimon_only_arguments_and_spark_on_a_catalog_table_are_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse)
    for _ in range(3):
        append_batch(table, 1)
    module = load_dag_module("lakeformat_test_iceberg")
    module.FAILURES.clear()
    run = module.expire_bad_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["expire_snapshots"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_iceberg_expire_bad"]) == (
        "retain_max: only for Paimon tables (default:db.events is an Iceberg table)"
    )
    run = module.expire_bad_dag.test(
        run_conf={"table": "db.events", "older_than": "yesterday", "retain_max": ""}
    )
    message = str(module.FAILURES["lakeformat_test_iceberg_expire_bad"])
    assert message.startswith("older_than: 'yesterday' is neither a duration (a whole number and a unit: ms")
    assert "nor an ISO-8601 timestamp" in message
    module.FAILURES.clear()
    run = module.maintenance_dag.test(run_conf={"table": "db.events", "dry_run": False, "execution": "spark"})
    assert task_states(run)["expire_snapshots"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_iceberg_maintenance"]) == (
        "default:db.events: unsupported format: the Spark job expire_snapshots opens Iceberg tables by their "
        "Hadoop-layout root only, not from a catalog; use execution='local' (or name the table by its root "
        "URI if it is a Hadoop-layout table)"
    )
    assert len(snapshot_ids(table)) == 3, "nothing expired"


# -- writes and commits ------------------------------------------------------------------------------


def test_write_appends_once_with_the_connections_commit_user(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    set_connection(
        monkeypatch, "lakeformat_default", host=str(warehouse), extra={"commit_user_prefix": "nightly"}
    )
    root = str(warehouse / "db.db" / "events")
    table = path_table(root)
    source = tmp_path / "batch.parquet"
    pq.write_table(batch(7), source)
    module = load_dag_module("lakeformat_test_iceberg")
    run = module.write_dag.test(run_conf={"table": "db.events", "source": str(source)})
    # The first try committed, then "crashed"; the retry found its snapshot instead of appending again.
    assert task_states(run)["write"] == ("success", 2)
    result = xcom_result(run, "write")
    check_shape(result, "write", root, False)
    assert result["alreadyCommitted"] is True and result["execution"] == "local"
    assert result["commitUser"] == "nightly-lakeformat_test_iceberg_write-write"
    [snapshot] = table.refresh().metadata.snapshots
    assert snapshot.snapshot_id == result["snapshotId"] and live_rows(table) == 7
    summary = snapshot.summary
    assert summary is not None
    assert summary["lakeformat.commit-user"] == "nightly-lakeformat_test_iceberg_write-write"
    assert summary["lakeformat.commit-identifier"] == str(result["commitIdentifier"])
    # The table's Asset got an event (through the alias: the name was templated).
    from tests.airflow.test_commit_operator import asset_events

    # The connection's Asset of the rendered name (issue 28), not the root it resolves to.
    events = asset_events("lakeformat://lakeformat_default/db.events", run.run_id)
    assert [e["extra"]["snapshotId"] for e in events] == [snapshot.snapshot_id]
    assert asset_events(f"file://{root}") == []

    module.FAILURES.clear()
    # an overwrite of the whole table ('*'): one overwrite snapshot replaces the append's file (issue 26 point 8)
    replaced = module.write_dag.test(run_conf={"table": root, "source": str(source), "overwrite": "*"})
    # the first try "crashes" after publishing, as above: the retry finds the overwrite instead of repeating it
    assert task_states(replaced)["write"] == ("success", 2)
    result = xcom_result(replaced, "write")
    assert result["commitKind"] == "OVERWRITE" and result["alreadyCommitted"] is True
    head = table.refresh().metadata.snapshot_by_id(result["snapshotId"])
    assert head is not None and head.summary is not None and head.summary["deleted-data-files"] == "1"
    module.FAILURES.clear()
    spark = module.write_dag.test(
        run_conf={"table": root, "source": str(source), "execution": "spark", "overwrite": ""}
    )
    assert task_states(spark)["write"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_iceberg_write"]) == (
        f"{root}: unsupported format: the Spark job write does not take Iceberg tables; use execution='local'"
    )
    assert len(table.refresh().metadata.snapshots) == 2 and live_rows(table) == 7


def test_commit_registers_staged_parquet_files_in_a_catalog_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse)
    append_batch(table, 2)
    module = load_dag_module("lakeformat_test_iceberg")
    run = module.commit_dag.test(run_conf={"table": "db.events"})
    result = xcom_result(run, "commit")
    check_shape(result, "commit", "default:db.events", False)
    assert (result["commitKind"], result["filesAdded"], result["alreadyCommitted"]) == ("APPEND", 1, False)
    assert (result["deltaRecordCount"], result["totalRecordCount"]) == (3, 5)
    assert result["commitUser"] == "airflow-lakeformat_test_iceberg_commit-commit"
    assert result["snapshotId"] == head(table) and live_rows(table) == 5
    from tests.airflow.test_commit_operator import asset_events

    events = asset_events(
        "lakeformat://lakeformat_default/db.events", run.run_id
    )  # not iceberg://default/...
    assert [e["extra"] for e in events] == [{"snapshotId": result["snapshotId"], "commitKind": "APPEND"}]


# -- Spark and S3 ------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_expiry_and_orphans_of_a_hadoop_layout_table_on_spark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    root = str(warehouse / "db.db" / "events")
    table = path_table(root)
    for rows in (2, 3, 4):
        append_batch(table, rows)
    orphan = plant_old_file(table, days=4)
    last = head(table)
    module = load_dag_module("lakeformat_test_iceberg")
    run = module.maintenance_dag.test(
        run_conf={"table": "db.events", "dry_run": False, "execution": "spark", "table_format": "iceberg"}
    )
    assert set(task_states(run).values()) == {("success", 1)}
    expired = xcom_result(run, "expire_snapshots")
    check_shape(expired, "expire-snapshots", root, False)
    assert expired["execution"] == "spark" and len(expired["snapshotsExpired"]) == 2
    orphans = xcom_result(run, "remove_orphan_files")
    check_shape(orphans, "remove-orphan-files", root, False)
    assert orphans["execution"] == "spark" and orphans["files"] == {"data-file": 1}
    assert xcom_result(run, "compact_manifests")["execution"] == "local"
    snapshots = table.refresh().metadata.snapshots
    assert snapshots[0].snapshot_id == last and len(snapshots) == 2
    assert live_rows(table) == 9 and not os.path.exists(orphan)


@pytest.mark.spark
@pytest.mark.slow
def test_data_compaction_of_a_catalog_table_on_spark_leaves_what_the_worker_leaves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The acceptance table (deletes, two partitions, partial progress) of an SQL catalog, compacted by the
    operator in the worker and, restored at the same path, on Spark: the job gets ``namespace.table`` and the
    connection's catalog in its environment, and leaves the same rows, commits and result."""
    from tests.support import iceberg_compaction as acceptance

    directory, pristine = tmp_path / "catalog", tmp_path / "pristine"
    acceptance.build(directory, "sql")
    shutil.copytree(directory, pristine)
    set_connection(
        monkeypatch,
        "lakeformat_default",
        host=str(directory / "warehouse"),
        extra={
            "iceberg_catalog": "test",
            "iceberg_catalog_properties": acceptance.catalog_properties(directory),
        },
    )
    module = load_dag_module("lakeformat_test_iceberg")
    conf = {"table": "db.t", "options": acceptance.OPTIONS, "min_file_count": 2}
    outcomes, results = [], []
    for execution in ("local", "spark"):
        acceptance.restore(pristine, directory)
        run = module.compact_data_dag.test(run_conf={**conf, "execution": execution})
        assert task_states(run)["compact_data"] == ("success", 1)
        result = xcom_result(run, "compact_data")
        check_shape(result, "compact-data", "test:db.t", False)
        assert result.pop("execution") == execution
        results.append(acceptance.comparable(result))
        table = acceptance.open_built(directory, "sql")
        outcomes.append(acceptance.outcome(table, result))
        current = table.snapshot(ref="main")
        assert current is not None and current.summary is not None
        assert (
            current.summary["lakeformat.commit-user"]
            == "airflow-lakeformat_test_iceberg_compact_data-compact_data"
        )
    assert results[0] == results[1] and outcomes[0] == outcomes[1]
    assert len(outcomes[1]["commits"]) == 2 and len(outcomes[1]["rows"]) == 14


@pytest.mark.s3
def test_maintenance_of_a_hadoop_layout_table_on_seaweedfs(
    seaweedfs: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    options = seaweedfs.storage_options()
    root = f"{s3_bucket}/wh/db.db/events"
    table = path_table(root, options)
    for rows in (2, 3, 4):
        append_batch(table, rows)
    orphan = plant_old_file(table)
    time.sleep(2.5)  # S3 keeps its own modification times: let the orphan age past older_than
    set_connection(
        monkeypatch,
        "lakeformat_default",
        host=f"{s3_bucket}/wh",
        login=seaweedfs.access_key,
        password=seaweedfs.secret_key,
        extra={
            "endpoint_url": seaweedfs.endpoint_url,
            "region": seaweedfs.region,
            "storage_options": {"config_kwargs": {"s3": {"addressing_style": "path"}}},
        },
    )
    module = load_dag_module("lakeformat_test_iceberg")
    run = module.maintenance_dag.test(
        run_conf={"table": "db.events", "dry_run": False, "orphan_older_than": "2 s"}
    )
    assert set(task_states(run).values()) == {("success", 1)}
    check_shape(xcom_result(run, "expire_snapshots"), "expire-snapshots", root, False)
    assert xcom_result(run, "remove_orphan_files")["files"] == {"data-file": 1}
    table.refresh()
    assert len(table.metadata.snapshots) == 2 and live_rows(table) == 9
    assert not table.io.exists(orphan)
    assert table.io.exists(table.io.join(table.root, LOCK_DIR, "maintenance-lock-3.released"))
