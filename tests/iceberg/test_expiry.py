"""Iceberg expiry safety on local disk: dry run, plan re-check, a concurrent writer, a crash at every step,
corrupt metadata, and the CLI. Real tables, real commits, real deletes."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError, PlanOutdatedError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.expiry import (
    execute_snapshot_expiry,
    expire_snapshots,
    plan_snapshot_expiry,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_files import to_fs_path
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.tables import open_table
from tests.iceberg import expiry_support as support
from tests.unit.test_cli import run


def everything_expires(table: IcebergTable) -> dict[str, object]:
    """Arguments that expire every snapshot but main's head."""
    return {"older_than": int(time.time() * 1000) + 1, "retain_last": 1}


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_dry_run_changes_nothing_and_lists_what_a_real_run_deletes(tmp_path: Path, kind: str) -> None:
    table = support.create(tmp_path, kind)
    support.history(table)
    location, files = table.metadata_location, support.stored_files(table)
    dry = expire_snapshots(table, dry_run=True, **everything_expires(table))  # type: ignore[arg-type]
    assert dry.report.dry_run and not dry.committed
    table.refresh()
    assert table.metadata_location == location and support.stored_files(table) == files
    assert support.journals(table) == []
    planned = {r.path for r in dry.plan.deletions}
    assert dry.to_json()["files"] == dry.plan.to_json()["files"] and planned
    real = expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    assert files - support.stored_files(table) == planned == {r.path for r in real.plan.deletions}
    assert real.to_json()["files"] == dry.to_json()["files"]
    support.assert_converged(table)
    assert support.table_rows(table) == [2, 3, 4, 5]


def test_plan_is_rechecked_before_commit_and_delete(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    plan = plan_snapshot_expiry(table, **everything_expires(table))  # type: ignore[arg-type]
    assert ids[1] in plan.expired
    other = open_path_table(table.root)
    other.table.manage_snapshots().create_tag(ids[1], "audit").commit()  # protects a planned snapshot
    location, files = other.metadata_location, support.stored_files(table)
    with pytest.raises(PlanOutdatedError, match="now retained"):
        execute_snapshot_expiry(table, plan, dry_run=False)
    table.refresh()
    assert table.metadata_location == location and support.stored_files(table) == files
    assert support.journals(table) == []
    # A new plan honours the tag: the snapshot and every file it reaches stay.
    result = expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    assert ids[1] not in result.plan.expired and ids[1] in {s.snapshot_id for s in table.metadata.snapshots}
    support.assert_converged(table)
    assert support.table_rows(table, ids[1]) == [1, 2, 3]


def test_an_append_between_plan_and_commit_is_kept(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    support.history(table)
    plan = plan_snapshot_expiry(table, **everything_expires(table))  # type: ignore[arg-type]
    late = support.append(open_path_table(table.root), [99], "late")
    result = execute_snapshot_expiry(table, plan, dry_run=False)
    assert result.committed and late in {s.snapshot_id for s in table.metadata.snapshots}
    support.assert_converged(table)
    assert support.table_rows(table) == [2, 3, 4, 5, 99]


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_a_writer_committing_during_expiry_loses_nothing(tmp_path: Path, kind: str) -> None:
    table = support.create(tmp_path, kind)
    support.history(table)
    written: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            mine = open_table(table.root) if kind == "hadoop" else None
            own = (
                mine.native
                if mine is not None
                else table.__class__(  # a second handle on the catalog table
                    table.table.catalog.load_table(table.table.name()), table.io, table.root, table.name
                )
            )
            n = 1000
            while not stop.is_set() and n < 1040:
                write.append(own, support.arrow_rows([n], "w"))
                written.append(n)
                n += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(5):
            expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors
    assert written, "the writer never committed"
    expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    support.assert_converged(table)
    assert support.table_rows(table) == [2, 3, 4, 5, *written]


def _crash_run(table: IcebergTable, crash_at: int, after: bool) -> bool:
    """One expiry whose FileIO dies at its ``crash_at``-th mutation; True if it crashed."""
    inner = table.io
    table.io = support.CrashingFileIO(inner, crash_at, after)
    try:
        expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
        return False
    except support.SimulatedCrash:
        return True
    finally:
        table.io = inner


# mutation 1 writes the journal, 2 .. n-1 delete files (content, manifests, lists), n removes the journal
CRASH_POINTS = list(range(1, 10))


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
@pytest.mark.parametrize("after", [False, True])
def test_a_crash_at_any_step_converges_on_rerun(tmp_path: Path, crash_at: int, after: bool) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    table.table.manage_snapshots().create_tag(ids[2], "t").commit()
    table.table.manage_snapshots().remove_tag("t").commit()  # two more snapshots-free commits
    table.refresh()
    expected_rows = support.table_rows(table)
    crashed = _crash_run(table, crash_at, after)
    reopened = open_path_table(table.root)
    journal_removed = after and crash_at == CRASH_POINTS[-1]  # died right after its last step
    if crashed and crash_at > 1 and not journal_removed:
        assert support.journals(reopened), "a run that committed and crashed leaves its journal"
    rerun = expire_snapshots(reopened, dry_run=False, **everything_expires(reopened))  # type: ignore[arg-type]
    assert rerun.committed or rerun.plan.expired == [] or not crashed
    support.assert_converged(reopened)
    assert [s.snapshot_id for s in reopened.metadata.snapshots] == [ids[-1]]
    assert support.table_rows(reopened) == expected_rows


def test_the_crash_points_cover_the_whole_run(tmp_path: Path) -> None:
    """The parameters above reach every phase: count the mutations of an uninterrupted run."""
    table = support.create(tmp_path)
    support.history(table)
    recorder = support.CrashingFileIO(table.io, crash_at=10**9)
    table.io = recorder
    result = expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    ops = [op for op, _ in recorder.calls]
    assert ops[0] == "write_atomic" and ops[-1] == "delete"
    assert len(ops) == 2 + len(result.plan.deletions) == CRASH_POINTS[-1]
    assert {r.kind for r in result.plan.deletions} == {"data-file", "manifest", "manifest-list"}
    assert ".lakeformat-expiry-" in recorder.calls[0][1] and ".lakeformat-expiry-" in recorder.calls[-1][1]


def _manifest_list_of(table: IcebergTable, snapshot_id: int) -> str:
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    path = to_fs_path(table.io, snapshot.manifest_list)
    assert path is not None
    return path


def test_truncated_manifest_list_is_a_typed_error_and_nothing_is_deleted(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    victim = _manifest_list_of(table, ids[1])
    data = Path(victim).read_bytes()
    Path(victim).write_bytes(data[: len(data) // 2])
    location, files = table.metadata_location, support.stored_files(table)
    with pytest.raises(CorruptMetadataError) as caught:
        expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    assert victim in str(caught.value)
    table.refresh()
    assert table.metadata_location == location and support.stored_files(table) == files


def test_missing_manifest_of_a_retained_snapshot_is_a_typed_error(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    head = table.metadata.snapshot_by_id(ids[-1])
    assert head is not None
    manifests = head.manifests(table.table.io)
    victim = to_fs_path(table.io, manifests[-1].manifest_path)
    assert victim is not None
    Path(victim).unlink()
    location, files = table.metadata_location, support.stored_files(table)
    with pytest.raises(MissingMetadataError) as caught:
        expire_snapshots(table, dry_run=False, **everything_expires(table))  # type: ignore[arg-type]
    assert victim in str(caught.value)
    table.refresh()
    assert table.metadata_location == location and support.stored_files(table) == files


def test_garbage_metadata_json_is_a_typed_error_and_nothing_is_deleted(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    support.history(table)
    plan = plan_snapshot_expiry(table, **everything_expires(table))  # type: ignore[arg-type]
    files = support.stored_files(table)
    version = int(Path(table.metadata_location).name.split(".")[0][1:])
    garbage = Path(table.root) / "metadata" / f"v{version + 1}.metadata.json"
    garbage.write_bytes(b'{"format-version": 2, "garbage')
    with pytest.raises(CorruptMetadataError) as caught:
        execute_snapshot_expiry(table, plan, dry_run=False)
    assert str(garbage) in str(caught.value)
    assert support.stored_files(table) == files and support.journals(table) == []


def test_cli_expire_on_an_iceberg_table(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    moment = datetime.fromtimestamp(support.timestamp(table, ids[2]) / 1000, tz=timezone.utc)
    iso = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    code, out, err = run(
        "expire", table.root, "--older-than", iso, "--retain-last", "1", "--dry-run", "--json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["operation"] == "expire-snapshots" and document["format"] == "iceberg"
    assert document["dryRun"] is True and document["snapshotsExpired"] == ids[:2]
    code, out, err = run(
        "expire", table.root, "--snapshot-id", str(ids[3]), "--apply", "--json"
    )  # --apply: a real run (the default is a dry run)
    assert code == 0, err
    document = json.loads(out)
    assert document["dryRun"] is False and document["snapshotsExpired"] == [ids[3]]
    assert ids[3] not in {s.snapshot_id for s in open_path_table(table.root).metadata.snapshots}
    code, _, err = run("expire", table.root, "--max-deletes", "3")
    assert code == 2 and "only for Paimon tables" in err  # a usage mistake


def test_cli_expire_real_run_and_exit_codes(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    code, out, err = run("expire", table.root, "--snapshot-id", str(ids[-1]), "--apply")
    assert code == 9 and "Still referenced by refs" in err
    code, out, err = run("expire", table.root, "--older-than", "0 ms", "--retain-min", "2", "--apply")
    assert code == 0, err
    assert "expired 3 of 5 snapshots" in out
    support.assert_converged(open_path_table(table.root))
