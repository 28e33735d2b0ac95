"""Hint files, listing fallbacks, lookups by id and time, tags, consumers and branches."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    SnapshotNotFoundError,
    TagNotFoundError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.paimon.table import Table
from tests.support.tables import TableBuilder


@pytest.fixture
def five(tmp_path: Path) -> TableBuilder:
    builder = TableBuilder(tmp_path / "t", [("k", "INT"), ("v", "STRING")], ["k"])
    for i in range(5):
        builder.commit([builder.entry((i,))], time_millis=1_000 * (i + 1))
    return builder


def manager(builder: TableBuilder):  # type: ignore[no-untyped-def]
    return Table.open(str(builder.root)).snapshot_manager


def test_hints_are_used_when_they_agree_with_the_files(five: TableBuilder) -> None:
    sm = manager(five)
    (five.root / "snapshot" / "EARLIEST").write_text("1")
    assert sm.latest_snapshot_id() == 5
    assert sm.earliest_snapshot_id() == 1
    assert sm.list_snapshot_ids() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("latest", [None, "garbage", "", "3", "9", "0", "-1"])
def test_latest_falls_back_to_listing_when_the_hint_is_missing_wrong_or_behind(
    five: TableBuilder, latest: str | None
) -> None:
    hint = five.root / "snapshot" / "LATEST"
    if latest is None:
        hint.unlink()
    else:
        hint.write_text(latest)
    assert manager(five).latest_snapshot_id() == 5


def test_latest_naming_a_missing_snapshot_falls_back(five: TableBuilder) -> None:
    (five.root / "snapshot" / "snapshot-5").unlink()
    (five.root / "snapshot" / "LATEST").write_text("5")
    assert manager(five).latest_snapshot_id() == 4


def test_earliest_naming_a_deleted_snapshot_falls_back(five: TableBuilder) -> None:
    for i in (1, 2):
        (five.root / "snapshot" / f"snapshot-{i}").unlink()
    (five.root / "snapshot" / "EARLIEST").write_text("1")
    sm = manager(five)
    assert sm.earliest_snapshot_id() == 3
    assert [s.id for s in sm.snapshots()] == [3, 4, 5]


def test_listing_ignores_temp_and_foreign_files(five: TableBuilder) -> None:
    d = five.root / "snapshot"
    (d / ".snapshot-6.0b1c.tmp").write_text("{}")
    (d / "snapshot-6abc.tmp").write_text("{}")  # the name old pypaimon used (#9026)
    (d / "README").write_text("x")
    assert manager(five).list_snapshot_ids() == [1, 2, 3, 4, 5]


def test_empty_table_has_no_snapshots(tmp_path: Path) -> None:
    TableBuilder(tmp_path / "t", [("v", "INT")])
    sm = Table.open(str(tmp_path / "t")).snapshot_manager
    assert sm.latest_snapshot_id() is None and sm.earliest_snapshot_id() is None
    assert sm.latest_snapshot() is None and sm.snapshots() == []


def test_snapshot_by_id_and_by_time(five: TableBuilder) -> None:
    sm = manager(five)
    assert sm.snapshot(3).time_millis == 3000
    assert sm.snapshot_at_or_before(3500).id == 3
    assert sm.snapshot_at_or_before(3000).id == 3
    assert sm.snapshot_at_or_before(10**12).id == 5
    with pytest.raises(SnapshotNotFoundError, match="at or before 999"):
        sm.snapshot_at_or_before(999)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 42"):
        sm.snapshot(42)


def test_garbage_snapshot_json_is_corrupt_metadata_naming_the_file(five: TableBuilder) -> None:
    (five.root / "snapshot" / "snapshot-4").write_text("{ not json")
    sleeps: list[float] = []
    sm = manager(five)
    sm.sleep = sleeps.append
    with pytest.raises(CorruptMetadataError, match="snapshot-4"):
        sm.snapshot(4)
    assert len(sleeps) == sm.read_attempts - 1  # retried like Paimon does for partial uploads


def test_snapshot_missing_required_fields_or_mismatched_id_is_corrupt(five: TableBuilder) -> None:
    (five.root / "snapshot" / "snapshot-2").write_text('{"version": 3, "id": 2}')
    with pytest.raises(CorruptMetadataError, match="missing field"):
        manager(five).snapshot(2)
    (five.root / "snapshot" / "snapshot-3").write_bytes((five.root / "snapshot" / "snapshot-1").read_bytes())
    with pytest.raises(CorruptMetadataError, match="holds snapshot id 1"):
        manager(five).snapshot(3)


def test_snapshot_version_above_3_is_refused(five: TableBuilder) -> None:
    path = five.root / "snapshot" / "snapshot-5"
    path.write_text(path.read_text().replace('"version" : 3', '"version" : 4'))
    with pytest.raises(UnsupportedFormatError, match="snapshot version 4"):
        manager(five).snapshot(5)


def test_tags_consumers_and_branches(five: TableBuilder) -> None:
    five.tag("release", five.snapshots[1])
    five.consumer("reader-a", 3)
    (five.root / "branch" / "branch-dev" / "snapshot").mkdir(parents=True)
    sm = manager(five)
    assert sm.tag_names() == ["release"]
    tag = sm.tag("release")
    assert tag.id == 2 and tag.tag_create_time == [2026, 1, 1, 0, 0, 0, 0]
    assert tag.extra["tagTimeRetained"] == 86400.0
    assert [(c.consumer_id, c.next_snapshot) for c in sm.consumers()] == [("reader-a", 3)]
    assert sm.branches() == ["dev"]
    with pytest.raises(TagNotFoundError, match="nope"):
        sm.tag("nope")


def test_corrupt_consumer_file_is_reported(five: TableBuilder) -> None:
    five.consumer("bad", 1)
    (five.root / "consumer" / "consumer-bad").write_text("[]")
    with pytest.raises(CorruptMetadataError, match="consumer-bad"):
        manager(five).consumers()
