"""A primary-key table's lifecycle on SeaweedFS S3 as on local disk (issue 27): full compaction, partition
expiry, tags.

The prepared pypaimon table ``pk_dedup`` (``tests/fixtures/paimon_pk``: 3 awkward partitions x 2 buckets, 16
level-0 commits with row-kind deletes, tags t3 t9 t14) is copied to a bucket, then through the facade on its
``s3://`` URI:

1. ``compact_data(mode="full")``: one COMPACT snapshot, one file at the max level per bucket;
2. ``expire_partitions`` (update-time, one day, ``now`` two days ahead, at most one): the dry run changes no
   object and names the lexicographically first partition (``a/b:c=d``); the real run drops exactly it in one
   OVERWRITE snapshot, and keeps its files for a later snapshot expiry;
3. a tag created on the expiry's snapshot is listed beside the fixture's tags, then deleted (its object gone).

pypaimon cannot read S3 here (its oracle opens local tables), so the table is downloaded once, with the new tag,
and the download is judged (it is S3's objects, but for the tag deleted afterwards): every file of every snapshot
and tag is there, the structural checker (O2) passes at the compaction's snapshot and at the head, and in one
oracle request pypaimon reads the fixture's rows at the compaction's snapshot, the same rows without partition
``a/b:c=d`` at the head and at the new tag, and the fixture's rows at the old tag t9.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.maintenance import assert_intact, tree
from tests.support.paimon_pk import (  # noqa: F401  (fixtures)
    check_pk_table,
    max_level,
    paimon_pk_pristine_fixture,
    paimon_pk_tables_fixture,
    runs_per_bucket,
)
from tests.support.pypaimon import run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer, upload_tree

pytestmark = [pytest.mark.s3, pytest.mark.interop, pytest.mark.slow]

Copy = Callable[[str], tuple[str, dict[str, Any]]]
TABLE = "pk_dedup"
DROPPED = "a/b:c=d"  # the lexicographically first of the fixture's partitions


def _s3_options(server: SeaweedFSServer) -> dict[str, Any]:
    return {
        "key": server.access_key,
        "secret": server.secret_key,
        "endpoint_url": server.endpoint_url,
        "client_kwargs": {"region_name": server.region},
    }


def _download(table: Table, target: Path) -> str:
    """The table's objects, copied into ``target/db.db/<table>`` (the layout pypaimon's catalog reads)."""
    local = target / "db.db" / TABLE
    local.parent.mkdir(parents=True)
    table.io.fs.get(table.root + "/", str(local) + "/", recursive=True)
    return str(local)


def _latest_kind(table: Table) -> CommitKind:
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return snapshot.commit_kind


def _live_names(table: Table) -> set[str]:
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return {e.file.file_name for e in live_entries(table, snapshot)}


def _judge_download(copy: str, fixture: str, commits: int, written: set[str], old_tags: int) -> None:
    """The download (S3's objects but the tag deleted after it): every file of every snapshot and tag there, the
    compaction's snapshot one file at the max level per bucket, the checker clean at it and at the head; then
    pypaimon, one request: the fixture's rows at the compaction, without the dropped partition at the head and
    the new tag, the old tag t9 as in the fixture (the local fixture copy, untouched since its upload)."""
    local_table = Table.open(copy)
    assert assert_intact(local_table, from_id=1) == commits + 2 + old_tags + 1
    top = max_level(local_table.schema)
    at_compaction = live_entries(local_table, local_table.snapshot_manager.snapshot(commits + 1))
    assert sorted(e.file.level for e in at_compaction) == [top] * 6
    assert {e.file.file_name for e in at_compaction} == written
    assert all(levels == [top] for levels in runs_per_bucket(copy).values())
    assert len(runs_per_bucket(copy)) == 4
    assert check_pk_table(copy, local_table.snapshot_manager.snapshot(commits + 1), written) == []
    assert check_pk_table(copy, compact_files=written) == []

    reads = run_oracle_batch(
        [
            ["read", fixture],
            ["read", fixture, "--tag", "t9"],
            ["read", copy, "--snapshot", str(commits + 1)],
            ["read", copy],
            ["read", copy, "--tag", "after-expiry"],
            ["read", copy, "--tag", "t9"],
        ]
    )
    rows, t9, compacted_rows, expired_rows, tagged, old_tag = reads
    assert rows and any(r["p"] == DROPPED for r in rows), "the fixture reads rows in the dropped partition"
    assert compacted_rows == rows
    assert expired_rows == [r for r in rows if r["p"] != DROPPED]
    assert tagged == expired_rows
    assert old_tag == t9


def test_compaction_partition_expiry_and_tags_on_s3(
    paimon_pk_tables: Copy, seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    local, summary = paimon_pk_tables(TABLE)
    commits = summary["commits"]
    uri = f"{s3_bucket}/wh/db.db/{TABLE}"
    upload_tree(seaweedfs.fs(), local, uri)
    options = _s3_options(seaweedfs)
    lake = open_table(uri, storage_options=options)
    table = Table.open(uri, options)
    fixture_files = _live_names(table)

    # 1. full compaction
    compacted = lake.maintenance.compact_data(mode="full").to_json()
    assert compacted["snapshotId"] == commits + 1 and compacted["filesWritten"] == 6, compacted
    assert compacted["skippedBuckets"] == [], compacted
    table = Table.open(uri, options)
    assert _latest_kind(table) == CommitKind.COMPACT
    written = _live_names(table) - fixture_files

    # 2. partition expiry: the dry run changes nothing, the real run drops exactly the first partition
    settings: dict[str, Any] = {
        "expiration_time": "1 d",
        "strategy": "update-time",
        "max_expires": 1,
        "now": datetime.now() + timedelta(days=2),
    }
    objects = tree(table)
    dry = lake.maintenance.expire_partitions(dry_run=True, **settings).to_json()
    assert [p["partition"] for p in dry["partitionsExpired"]] == [{"p": DROPPED}], dry
    assert len(dry["partitionsOverLimit"]) == 2 and dry["snapshotId"] is None, dry
    assert tree(table) == objects, "the dry run wrote or deleted objects"
    expired = lake.maintenance.expire_partitions(**settings).to_json()
    assert [p["partition"] for p in expired["partitionsExpired"]] == [{"p": DROPPED}], expired
    assert expired["snapshotId"] == commits + 2 and expired["files"] == 2, expired
    table = Table.open(uri, options)
    assert _latest_kind(table) == CommitKind.OVERWRITE
    assert set(objects) <= set(tree(table)), "the expiry deleted files (a later snapshot expiry does)"

    # 3. tags: create on the expiry's snapshot, list, (download), delete
    created = lake.maintenance.create_tag("after-expiry").to_json()
    assert [(t["name"], t["snapshotId"]) for t in created["created"]] == [("after-expiry", commits + 2)]
    listed = {t["name"]: t["snapshotId"] for t in lake.maintenance.list_tags().to_json()["tags"]}
    assert listed == {**{t: int(t[1:]) for t in summary["tags"]}, "after-expiry": commits + 2}, listed
    copy = _download(Table.open(uri, options), tmp_path / "download")
    deleted = lake.maintenance.delete_tag("after-expiry").to_json()
    assert [t["name"] for t in deleted["deleted"]] == ["after-expiry"], deleted
    assert "after-expiry" not in {t["name"] for t in lake.maintenance.list_tags().to_json()["tags"]}
    assert set(tree(Table.open(uri, options))) == set(tree(Table.open(copy))) - {"tag/tag-after-expiry"}

    _judge_download(copy, local, commits, written, len(summary["tags"]))
