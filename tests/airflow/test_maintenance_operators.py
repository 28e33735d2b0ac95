"""The maintenance operator base in real DAG runs: compact manifests, the lock, retries, local vs Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR, MaintenanceLock
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.table import Table
from tests.airflow.helpers import (
    FIELDS,
    append,
    load_dag_module,
    make_table,
    task_state,
    task_states,
    when,
    xcom_result,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]


def lock_files(table_root: Path) -> list[str]:
    directory = table_root / LOCK_DIR
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_compact_manifests_full_dry_run_and_minor(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        append(table, 2, dt=day)
    module = load_dag_module("lakeformat_test_maintenance")

    dry = module.compact_dag.test(run_conf={"table": "db.events", "mode": "full", "dry_run": True})
    result = xcom_result(dry, "compact")
    assert (result["dryRun"], result["merge"], result["snapshotId"]) == (True, "full", None)
    assert (result["manifestsBefore"], result["manifestsAfter"]) == (3, 1)
    assert table.snapshot_manager.latest_snapshot_id() == 3
    assert lock_files(root) == [], "a dry run takes no lock"

    minor = module.compact_dag.test(run_conf={"table": "db.events", "mode": "minor", "dry_run": False})
    assert xcom_result(minor, "compact")["merge"] == "none"  # 3 manifests: below merge-min-count

    full = module.compact_dag.test(run_conf={"table": "db.events", "mode": "full", "dry_run": False})
    result = xcom_result(full, "compact")
    assert (result["snapshotId"], result["manifestsAfter"], result["execution"]) == (4, 1, "local")
    assert result["table"] == str(root)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "COMPACT"
    # The connection's commit user (prefix, DAG, task), as for the commit and write operators.
    assert latest.commit_user == "airflow-lakeformat_test_compact_manifests-compact"
    assert list(result)[:4] == ["operation", "table", "format", "dryRun"]
    assert (result["operation"], result["format"]) == ("compact-manifests", "paimon")
    # The real runs held the lock and released it: generation 1 for minor, 2 for full.
    assert lock_files(root) == [
        "maintenance-lock-1",
        "maintenance-lock-1.released",
        "maintenance-lock-2",
        "maintenance-lock-2.released",
    ]
    owner = json.loads((root / LOCK_DIR / "maintenance-lock-2").read_text())["owner"]
    assert owner == f"airflow lakeformat_test_compact_manifests/{full.run_id}/compact try 1"


def test_a_second_maintenance_run_fails_cleanly_while_the_first_holds_the_lock(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    append(table, 1)
    append(table, 1)
    holder = MaintenanceLock(table, "another maintenance run")
    holder.acquire()
    module = load_dag_module("lakeformat_test_maintenance")
    module.FAILURES.clear()
    run = module.compact_dag.test(run_conf={"table": "db.events", "mode": "full", "dry_run": False})
    # LockHeldError is worth retrying (the holder finishes); every try found the lock held.
    assert task_states(run)["compact"] == ("failed", 3)
    message = str(module.FAILURES["lakeformat_test_compact_manifests"])
    assert message.startswith(f"{root}: maintenance lock is held by 'another maintenance run' until ")
    assert table.snapshot_manager.latest_snapshot_id() == 2, "nothing was committed"
    holder.release()


def test_a_second_maintenance_run_waits_for_the_lock(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    append(table, 1)
    append(table, 1)
    holder = MaintenanceLock(table, "another maintenance run")
    holder.acquire()
    module = load_dag_module("lakeformat_test_maintenance")
    # The holder finishes while the task waits: release from a thread once the task is running.
    with when(
        lambda: task_state("lakeformat_test_compact_manifests_waits", "compact") == "running", holder.release
    ):
        run = module.lock_wait_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["compact"] == ("success", 1)
    assert xcom_result(run, "compact")["snapshotId"] == 3
    released = json.loads((root / LOCK_DIR / "maintenance-lock-1.released").read_text())["releasedAt"]
    acquired = json.loads((root / LOCK_DIR / "maintenance-lock-2").read_text())["acquiredAt"]
    assert acquired >= released, "the task took the lock only after the holder released it"


def test_commit_state_unknown_fails_without_retry(warehouse: Path) -> None:
    make_table(str(warehouse / "db.db" / "events"))
    module = load_dag_module("lakeformat_test_maintenance")
    module.FAILURES.clear()
    run = module.unknown_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["expire"] == ("failed", 1), "retries=2, yet no retry"
    error = module.FAILURES["lakeformat_test_unknown_outcome"]
    assert type(error).__name__ == "AirflowFailException"
    assert "has an unknown outcome after 11 attempts. Whether the commit landed is unknown" in str(error)
    assert f"lakeformat snapshots {warehouse}/db.db/events" in str(error)


def _live_files(table: Table) -> list[str]:
    return sorted(e.file.file_name for e in live_entries(table, table.snapshot_manager.latest_snapshot()))


def test_compact_data_dry_run_then_for_real_in_the_worker(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    for rows in (3, 4, 5):
        append(table, rows)
    append(table, 2, dt="2024-01-02")  # a partition with one file: nothing to pack
    before = _live_files(table)
    module = load_dag_module("lakeformat_test_maintenance")

    dry = xcom_result(
        module.compact_data_dag.test(run_conf={"table": "db.events", "dry_run": True}), "compact_data"
    )
    assert (dry["dryRun"], dry["snapshotId"], dry["groups"], dry["filesRewritten"]) == (True, None, 1, 3)
    assert table.snapshot_manager.latest_snapshot_id() == 4 and _live_files(table) == before
    assert lock_files(root) == [], "a dry run takes no lock"

    # dry_run given again: dag.test() leaves the previous run's conf in the DAG's params.
    run = module.compact_data_dag.test(run_conf={"table": "db.events", "dry_run": False})
    result = xcom_result(run, "compact_data")
    assert (
        result["snapshotId"],
        result["filesRewritten"],
        result["filesWritten"],
        result["rowsRewritten"],
    ) == (
        5,
        3,
        1,
        12,
    )
    assert (result["execution"], result["table"]) == ("local", str(root))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "COMPACT" and latest.total_record_count == 14
    assert latest.commit_user == "airflow-lakeformat_test_compact_data-compact_data"
    assert list(result)[:4] == ["operation", "table", "format", "dryRun"]
    assert (result["operation"], result["format"], result["dryRun"]) == ("compact-data", "paimon", False)
    after = _live_files(table)
    assert len(after) == 2 and len(set(after) - set(before)) == 1, "3 files became 1; the lone file stayed"
    assert lock_files(root) == ["maintenance-lock-1", "maintenance-lock-1.released"]


def test_compact_data_refuses_a_primary_key_table_once_or_skips_it(warehouse: Path) -> None:
    """A primary-key table whose compaction must emit a changelog (``changelog-producer=lookup``) is refused."""
    root = warehouse / "db.db" / "keyed"
    options = {"bucket": "1", "changelog-producer": "lookup"}
    table = create_table(str(root), schema_from_fields(FIELDS, ["dt"], ["dt", "v"], options))
    module = load_dag_module("lakeformat_test_maintenance")
    module.FAILURES.clear()
    run = module.compact_data_dag.test(run_conf={"table": "db.keyed", "skip_unsupported": False})
    assert task_states(run)["compact_data"] == ("failed", 1), (
        "retries=2, yet no retry: it would fail the same"
    )
    message = str(module.FAILURES["lakeformat_test_compact_data"])
    assert (
        message.startswith(f"{root}: ") and "compaction of a table with changelog-producer=lookup" in message
    )
    skipped = module.compact_data_dag.test(run_conf={"table": "db.keyed", "skip_unsupported": True})
    assert task_states(skipped)["compact_data"] == ("skipped", 1)
    assert table.snapshot_manager.latest_snapshot_id() is None and lock_files(root) == []


@pytest.mark.spark
@pytest.mark.slow
def test_compact_data_on_spark_commits_what_the_worker_would(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    for rows in (3, 4, 5):
        append(table, rows)
    module = load_dag_module("lakeformat_test_maintenance")
    run = module.compact_data_dag.test(
        run_conf={"table": "db.events", "execution": "spark", "dry_run": False}
    )
    result = xcom_result(run, "compact_data")
    # The Spark job's result comes back in the one shape, without the job's own bookkeeping.
    assert list(result)[:4] == ["operation", "table", "format", "dryRun"]
    assert "job" not in result and "mode" not in result and result["operation"] == "compact-data"
    assert (result["execution"], result["snapshotId"], result["filesRewritten"], result["filesWritten"]) == (
        "spark",
        4,
        3,
        1,
    )
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "COMPACT" and latest.total_record_count == 12
    # The job commits as the connection's commit user, passed as --commit-user, like the worker does.
    assert latest.commit_user == "airflow-lakeformat_test_compact_data-compact_data"
    assert len(_live_files(table)) == 1
    assert lock_files(root) == ["maintenance-lock-1", "maintenance-lock-1.released"]


@pytest.mark.spark
@pytest.mark.slow
def test_auto_execution_runs_small_tables_locally_and_large_ones_on_spark(warehouse: Path) -> None:
    table = make_table(str(warehouse / "db.db" / "events"))
    for _ in range(3):
        append(table, 2)
    module = load_dag_module("lakeformat_test_maintenance")
    run = module.auto_dag.test(run_conf={"table": "db.events"})
    local, spark = xcom_result(run, "below_threshold"), xcom_result(run, "above_threshold")
    assert (local["execution"], spark["execution"]) == ("local", "spark")
    assert local["table"] == spark["table"] == str(warehouse / "db.db" / "events")
    for result in (local, spark):
        assert (result["dryRun"], result["snapshotId"], result["groups"], result["filesRewritten"]) == (
            True,
            None,
            1,
            3,
        )
    assert table.snapshot_manager.latest_snapshot_id() == 3, "a dry run commits nothing"


@pytest.mark.spark
@pytest.mark.slow
def test_spark_job_failure_on_corrupt_metadata_fails_once_with_the_jobs_message(warehouse: Path) -> None:
    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    append(table, 1)
    (root / "snapshot" / "snapshot-1").write_text("{ garbage")
    module = load_dag_module("lakeformat_test_maintenance")
    module.FAILURES.clear()
    run = module.spark_failure_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["compact_data"] == ("failed", 1), "exit code 4 (corrupt metadata) is not retried"
    message = str(module.FAILURES["lakeformat_test_spark_failure"])
    assert message.startswith(f"Spark job compact_data on {root} failed: {root}/snapshot/snapshot-1: ")


def test_expiry_with_fewer_snapshots_than_retain_min_says_every_snapshot_is_kept(warehouse: Path) -> None:
    table = make_table(str(warehouse / "db.db" / "events"))
    for _ in range(3):
        append(table, 1)
    module = load_dag_module("lakeformat_test_maintenance")
    result = xcom_result(module.expire_dag.test(run_conf={"table": "db.events", "retain_min": 10}), "expire")
    assert (result["operation"], result["dryRun"], result["snapshotsExpired"]) == (
        "expire-snapshots",
        True,
        [],
    )
    assert "retain-min 10 keeps every snapshot: the table has 3 (1..3)" in result["decisions"]
    assert not any("keeps snapshots from -" in d for d in result["decisions"]), result["decisions"]


def test_a_bad_duration_names_the_accepted_formats(warehouse: Path) -> None:
    make_table(str(warehouse / "db.db" / "events"))
    module = load_dag_module("lakeformat_test_maintenance")
    module.FAILURES.clear()
    run = module.expire_dag.test(run_conf={"table": "db.events", "retain_min": 10, "older_than": "an hour"})
    assert task_states(run)["expire"] == ("failed", 1)
    assert str(module.FAILURES["lakeformat_test_expire"]) == (
        "older_than: not a duration: 'an hour' (a whole number and a unit: ms, s, min, h or d, e.g. '30 min', "
        "'1 h', '7 d'; a bare number is ms)"
    )


def test_operators_that_delete_dry_run_unless_told_otherwise() -> None:
    from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
    from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
    from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
    from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator

    defaults = {
        cls.__name__: cls(task_id=cls.__name__, table="db.t").is_dry_run
        for cls in (
            LakeformatExpireSnapshotsOperator,
            LakeformatRemoveOrphanFilesOperator,
            LakeformatCompactDataOperator,
            LakeformatCompactManifestsOperator,
        )
    }
    assert defaults == {
        "LakeformatExpireSnapshotsOperator": True,
        "LakeformatRemoveOrphanFilesOperator": True,
        "LakeformatCompactDataOperator": False,
        "LakeformatCompactManifestsOperator": False,
    }
    assert not LakeformatExpireSnapshotsOperator(task_id="x", table="db.t", dry_run=False).is_dry_run
    assert not LakeformatRemoveOrphanFilesOperator(task_id="y", table="db.t", dry_run="false").is_dry_run
