"""Iceberg tags through the facade: refs pyiceberg sees, max-ref-age-ms retention, expiry by age and
``older_than``, scheduled period names with auto-tag retention, dry runs, a concurrent commit, and the CLI."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyiceberg.table.refs import SnapshotRefType

from airflow_lakeformat import cli
from airflow_lakeformat.core.errors import (
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UsageError,
)
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.tables import IcebergLakeTable, open_table
from tests.iceberg import expiry_support as support
from tests.support.java_iceberg import JavaIcebergWarehouse


def _table(tmp_path: Path, kind: str = "hadoop") -> tuple[IcebergLakeTable, list[int]]:
    table = support.create(tmp_path, kind)
    ids = [support.append(table, [1], "a"), support.append(table, [2], "b"), support.append(table, [3], "a")]
    lake = open_table(table.root) if kind == "hadoop" else IcebergLakeTable(table)
    assert isinstance(lake, IcebergLakeTable)
    return lake, ids


def _refs(root: str) -> dict[str, tuple[str, int, int | None]]:
    """The refs as a fresh pyiceberg handle reads them from the table's latest metadata."""
    pyt = open_path_table(root).table
    return {
        n: (r.snapshot_ref_type.value, r.snapshot_id, r.max_ref_age_ms) for n, r in pyt.metadata.refs.items()
    }


def test_tags_are_refs_pyiceberg_reads_with_their_retention(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    root = lake.maintenance.table.root
    m = lake.maintenance
    created = m.create_tag("audit", ids[0], "7 d")
    assert created.to_json()["created"][0]["timeRetainedMs"] == 7 * 86_400_000
    m.create_tag("head")
    refs = _refs(root)
    assert refs["audit"] == ("tag", ids[0], 7 * 86_400_000)
    assert refs["head"] == ("tag", ids[2], None)
    pyt = open_path_table(root).table
    assert pyt.scan(snapshot_id=pyt.metadata.refs["audit"].snapshot_id).to_arrow().num_rows == 1
    listed = {t.name: t for t in m.list_tags().tags}
    assert set(listed) == {"audit", "head"}  # main is a branch, not listed
    snapshot = pyt.metadata.snapshot_by_id(ids[0])
    assert snapshot is not None and listed["audit"].expires_at_ms == snapshot.timestamp_ms + 7 * 86_400_000
    with pytest.raises(TagAlreadyExistsError):
        m.create_tag("audit")
    assert m.create_tag("audit", ignore_if_exists=True).already_existed[0].snapshot_id == ids[0]
    m.create_tag("audit", ids[1], replace=True)
    assert _refs(root)["audit"][1] == ids[1]
    with pytest.raises(UsageError, match="main branch"):
        m.create_tag("main", ids[0])
    with pytest.raises(SnapshotNotFoundError):
        m.create_tag("nope", 12345)


def test_delete_and_dry_runs_change_nothing_and_branches_are_refused(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    table = lake.maintenance.table
    m = lake.maintenance
    m.create_tag("t1", ids[0])
    table.table.manage_snapshots().create_branch(ids[1], "dev").commit()
    table.refresh()
    location = table.metadata_location
    assert [t.name for t in m.create_tag("t2", dry_run=True).created] == ["t2"]
    assert [d.tag.name for d in m.delete_tag("t1", dry_run=True).deleted] == ["t1"]
    assert m.expire_tags(older_than=timedelta(0), dry_run=True).deleted
    table.refresh()
    assert table.metadata_location == location
    with pytest.raises(UsageError):
        m.delete_tag("dev")
    result = m.delete_tag("t1")
    assert "snapshot expiry" in result.decisions[0]
    refs = _refs(table.root)
    assert "t1" not in refs and refs["dev"][0] == "branch"
    assert open_path_table(table.root).table.metadata.snapshot_by_id(ids[0]) is not None  # the snapshot stays
    with pytest.raises(TagNotFoundError):
        m.delete_tag("t1")


def test_expire_tags_by_max_ref_age_and_older_than(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    m = lake.maintenance
    table = m.table
    m.create_tag("short", ids[0], "1 h")
    m.create_tag("long", ids[1], "30 d")
    m.create_tag("forever", ids[2])
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert [d.tag.name for d in m.expire_tags(now=later, dry_run=True).deleted] == ["short"]
    newest = table.metadata.snapshot_by_id(ids[2])
    assert newest is not None
    cutoff = datetime.fromtimestamp(newest.timestamp_ms / 1000, timezone.utc).isoformat()
    by_time = m.expire_tags(older_than=cutoff, now=later, dry_run=False)
    assert sorted(d.tag.name for d in by_time.deleted) == ["long", "short"]
    assert sorted(n for n, r in _refs(table.root).items() if r[0] == "tag") == ["forever"]
    with pytest.raises(UsageError):
        m.expire_tags(older_than="soon")


def test_table_default_max_ref_age_applies_to_tags_without_their_own(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    m = lake.maintenance
    m.create_tag("t", ids[0])
    m.table.table.transaction().set_properties({"history.expire.max-ref-age-ms": "1000"}).commit_transaction()
    m.table.refresh()
    later = datetime.now(timezone.utc) + timedelta(seconds=5)
    assert [d.tag.name for d in m.expire_tags(dry_run=True, now=later).deleted] == ["t"]


def test_scheduled_tags_keep_num_retained_max_auto_tags_and_rerun_is_a_no_op(tmp_path: Path) -> None:
    lake, _ = _table(tmp_path)
    m = lake.maintenance
    m.create_tag("release")
    for day in (2, 3, 4):
        when = datetime(2024, 1, day, 0, 5, tzinfo=timezone.utc)
        m.create_scheduled_tag(when, formatter="without_dashes", num_retained_max=2, time_retained="3 d")
    refs = _refs(m.table.root)
    assert sorted(n for n, r in refs.items() if r[0] == "tag") == ["20240102", "20240103", "release"]
    assert refs["20240103"][2] == 3 * 86_400_000
    location = m.table.metadata_location
    again = m.create_scheduled_tag(
        datetime(2024, 1, 4, 0, 5, tzinfo=timezone.utc), formatter="without_dashes", num_retained_max=2
    )
    assert again.created == [] and again.deleted == [] and m.table.metadata_location == location
    berlin = m.create_scheduled_tag(
        datetime(2024, 1, 4, 23, 30, tzinfo=timezone.utc), time_zone="Europe/Berlin", dry_run=True
    )
    assert [t.name for t in berlin.created] == ["2024-01-04"]  # 00:30 on the 5th in Berlin


def test_a_concurrent_commit_makes_the_tag_commit_retry(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    m = lake.maintenance
    stale = m.table  # loaded before the other writer commits
    other = open_path_table(stale.root)
    support.append(other, [9], "c")
    m.create_tag("after-race", ids[0])
    refs = _refs(stale.root)
    assert refs["after-race"][1] == ids[0]
    assert refs["main"][1] == other.metadata.current_snapshot_id  # the other commit survived


def test_sql_catalog_tags(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path, "sql")
    lake.maintenance.create_tag("cat", ids[1])
    lake.maintenance.table.refresh()
    refs = lake.maintenance.table.metadata.refs
    assert refs["cat"].snapshot_id == ids[1] and refs["cat"].snapshot_ref_type == SnapshotRefType.TAG


def test_cli_tags_on_iceberg(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    root = lake.maintenance.table.root

    def run(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        return cli.main(list(argv), out=out), out.getvalue()

    code, text = run("tag", "create", root, "v1", "--snapshot", str(ids[0]), "--retain", "1d", "--json")
    document = json.loads(text)
    assert code == 0 and document["format"] == "iceberg" and document["created"][0]["snapshotId"] == ids[0]
    assert run("tag", "list", root)[1].splitlines()[1].split()[:2] == ["v1", str(ids[0])]
    assert json.loads(
        run("expire-tags", root, "--older-than", "2099-01-01T00:00:00Z", "--apply", "--json")[1]
    )["deleted"]
    assert "v1" not in _refs(root)


def test_snapshot_expiry_keeps_the_snapshot_and_files_of_a_tag_we_made(tmp_path: Path) -> None:
    lake, ids = _table(tmp_path)
    m = lake.maintenance
    m.create_tag("keep", ids[0])
    result = m.expire_snapshots(
        dry_run=False, older_than=datetime.now(timezone.utc) + timedelta(seconds=1), retain_last=1
    )
    assert (
        ids[1] in result.to_json()["snapshotsExpired"] and ids[0] not in result.to_json()["snapshotsExpired"]
    )
    pyt = open_path_table(m.table.root).table
    assert pyt.metadata.snapshot_by_id(ids[1]) is None
    assert pyt.scan(snapshot_id=ids[0]).to_arrow().column("id").to_pylist() == [1]


@pytest.mark.interop
@pytest.mark.slow
def test_java_iceberg_reads_our_tag_and_its_retention(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    """Java Iceberg 1.10.2 sees a tag made through the facade: the ref with its max-ref-age-ms, and the rows of
    the tagged snapshot (one request to the shared oracle)."""
    table_info = fresh_java_iceberg_warehouse.tables["v2_cow"]
    lake = open_table(table_info["path"])
    assert isinstance(lake, IcebergLakeTable)
    first = min(lake.native.metadata.snapshots, key=lambda s: s.sequence_number or 0).snapshot_id
    lake.maintenance.create_tag("ours", first, "7 d")
    identifier = table_info["identifier"]
    by_tag, by_id, snapshots = fresh_java_iceberg_warehouse.batch(
        [
            ["rows", "--table", identifier, "--ref", "ours"],
            ["rows", "--table", identifier, "--snapshot", str(first)],
            ["snapshots", "--table", identifier],
        ]
    )
    assert by_tag == by_id
    ref = snapshots["refs"]["ours"]
    assert (ref["type"].lower(), ref["snapshot_id"], ref["max_reference_age_in_ms"]) == (
        "tag",
        first,
        7 * 86_400_000,
    )
