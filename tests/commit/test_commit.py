"""The commit protocol: kinds and counts, conflicts, preemption, unknown outcomes, idempotency, faults."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    TableAlreadyExistsError,
    UnsupportedStorageError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon.commit import COMMIT_ID_PROPERTY, Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.faults import FaultyFileIO, InjectedFault

FIELDS = [{"name": "p", "type": "STRING"}, {"name": "v", "type": "BIGINT"}]


def new_table(root: Path, **options: str) -> Table:
    return create_table(str(root), schema_from_fields(FIELDS, ["p"], options=options))


def add(table: Table, name: str, partition: str = "a", rows: int = 1) -> ManifestEntry:
    from airflow_lakeformat.core.paimon import binary_row

    part = binary_row.encode([partition], table.schema.partition_types)
    return ManifestEntry.create(FileKind.ADD, part, 0, -1, DataFileMeta.create(name, 100, rows))


def delete(entry: ManifestEntry) -> ManifestEntry:
    return entry.to_delete()


def live_names(table: Table) -> list[str]:
    latest = table.snapshot_manager.latest_snapshot()
    return sorted(e.file.file_name for e in live_entries(table, latest)) if latest else []


def no_sleep(_: float) -> None:
    pass


def test_create_table_is_exclusive_and_validates(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    assert table.schema.partition_keys == ("p",)
    with pytest.raises(TableAlreadyExistsError):
        new_table(tmp_path / "t")
    with pytest.raises(ValueError, match="not a field"):
        schema_from_fields(FIELDS, ["nope"])
    pk = schema_from_fields(FIELDS, ["p"], ["p", "v"])
    assert [f.type.nullable for f in pk.fields] == [False, False]


def test_append_overwrite_compact_counts_and_hint(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    c = Committer(table, "user-1")
    e1, e2 = add(table, "f1", rows=3), add(table, "f2", "b", rows=4)
    r1 = c.commit([e1, e2])
    s1 = r1.snapshot
    assert (s1.id, s1.commit_kind, s1.total_record_count, s1.delta_record_count) == (
        1,
        CommitKind.APPEND,
        7,
        7,
    )
    assert (tmp_path / "t" / "snapshot" / "LATEST").read_text() == "1"
    assert s1.properties and COMMIT_ID_PROPERTY in s1.properties
    s2 = c.commit([delete(e1), add(table, "f3", rows=1)]).snapshot
    assert (s2.commit_kind, s2.total_record_count, s2.delta_record_count) == (CommitKind.OVERWRITE, 5, -2)
    # A COMPACT that rewrites f2 into f4 keeps the count.
    s3 = c.commit([delete(e2), add(table, "f4", "b", rows=4)], kind=CommitKind.COMPACT).snapshot
    assert (s3.commit_kind, s3.total_record_count, s3.delta_record_count) == (CommitKind.COMPACT, 5, 0)
    assert live_names(table) == ["f3", "f4"]
    document = json.loads((tmp_path / "t" / "snapshot" / "snapshot-3").read_text())
    assert document["version"] == 3 and document["writerVersion"].startswith("airflow-lakeformat-")


def test_conflicts_are_refused_and_publish_nothing(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    c = Committer(table)
    e1 = add(table, "f1")
    c.commit([e1])
    c.commit([delete(e1)])
    manifests_before = set((tmp_path / "t" / "manifest").iterdir())
    with pytest.raises(CommitConflictError, match=r"f1.*not live"):
        c.commit([delete(e1)])
    with pytest.raises(CommitConflictError, match=r"f9.*not live"):
        c.commit([delete(add(table, "f9"))], kind=CommitKind.COMPACT)
    e2 = add(table, "f2")
    c.commit([e2])
    with pytest.raises(CommitConflictError, match="already live"):
        c.commit([add(table, "f2"), delete(add(table, "f2", "zz"))])  # the ADD duplicates a live file
    assert table.snapshot_manager.latest_snapshot_id() == 3
    # Nothing the refused commits wrote stays behind.
    # Only the successful third commit added files: its delta manifest and its two lists.
    assert len(set((tmp_path / "t" / "manifest").iterdir()) - manifests_before) == 3


def test_preemption_retries_on_the_new_latest_and_cleans_its_attempt(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    other = Committer(Table.open(str(tmp_path / "t")), "other")

    class Racing(FaultyFileIO):
        raced = False

        def create_exclusive(self, path: str, data: bytes) -> None:
            if not self.raced and "/snapshot/snapshot-" in path:
                self.raced = True
                other.commit([add(other.table, "theirs")])
            FileIO.create_exclusive(self, path, data)

    io = Racing(table.io)
    ours = Committer(Table(io, table.root), "ours", sleep=no_sleep)
    result = ours.commit([add(table, "mine")])
    assert result.snapshot.id == 2 and result.attempts == 2
    assert [s.commit_user for s in table.snapshot_manager.snapshots()] == ["other", "ours"]
    assert live_names(table) == ["mine", "theirs"]
    referenced = {s.base_manifest_list for s in table.snapshot_manager.snapshots()}
    lists = {p.name for p in (tmp_path / "t" / "manifest").iterdir() if p.name.startswith("manifest-list-")}
    # Each snapshot has a base and a delta list; the preempted attempt's base list was removed.
    assert len(lists) == 4 and referenced <= lists


def test_lost_acknowledgement_is_recognized_as_published(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")

    class AckLost(FaultyFileIO):
        def create_exclusive(self, path: str, data: bytes) -> None:
            FileIO.create_exclusive(self, path, data)
            if not self.calls:
                self.calls.append(("create_exclusive", path))
                raise OSError("connection reset after the write")

    result = Committer(Table(AckLost(table.io), table.root), sleep=no_sleep).commit([add(table, "f1")])
    assert result.snapshot.id == 1 and result.attempts == 1
    assert table.snapshot_manager.list_snapshot_ids() == [1]


def test_unknown_outcome_republishes_the_same_snapshot_and_exhaustion_is_reported(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")

    class Flaky(FaultyFileIO):
        failures = 0

        def create_exclusive(self, path: str, data: bytes) -> None:
            if self.failures < 2:
                self.failures += 1
                raise OSError("timeout, the write did not land")
            FileIO.create_exclusive(self, path, data)

        def exists(self, path: str) -> bool:
            return FileIO.exists(self, path)

    result = Committer(Table(Flaky(table.io), table.root), sleep=no_sleep).commit([add(table, "f1")])
    assert result.snapshot.id == 1 and result.attempts == 3

    class Down(FaultyFileIO):
        def create_exclusive(self, path: str, data: bytes) -> None:
            raise OSError("store unreachable")

    files_before = set((tmp_path / "t" / "manifest").iterdir())
    with pytest.raises(CommitStateUnknownError, match="re-run with the same commit user"):
        Committer(Table(Down(table.io), table.root), max_retries=2, sleep=no_sleep).commit([add(table, "f2")])
    # Unknown outcome: the files written for it are kept, since they may be live.
    assert len(set((tmp_path / "t" / "manifest").iterdir()) - files_before) >= 3


def test_retries_exhausted_by_preemption_cleans_up(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    other = Committer(Table.open(str(tmp_path / "t")), "other")

    class AlwaysRaced(FaultyFileIO):
        def create_exclusive(self, path: str, data: bytes) -> None:
            if "/snapshot/snapshot-" in path:
                other.commit([add(other.table, f"theirs-{len(self.calls)}")])
                self.calls.append(("race", path))
            FileIO.create_exclusive(self, path, data)

    (tmp_path / "t" / "manifest").mkdir()
    with pytest.raises(CommitRetriesExhaustedError):
        Committer(Table(AlwaysRaced(table.io), table.root), "ours", max_retries=3, sleep=no_sleep).commit(
            [add(table, "mine")]
        )
    referenced: set[str] = set()
    for s in table.snapshot_manager.snapshots():
        referenced |= {s.base_manifest_list, s.delta_manifest_list}
        base, delta = table.data_manifests(s)
        referenced |= {m.file_name for m in base + delta}
    leftovers = {p.name for p in (tmp_path / "t" / "manifest").iterdir()} - referenced
    assert leftovers == set()
    assert "mine" not in live_names(table)


def test_same_user_and_identifier_commits_once(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    first = Committer(table, "airflow-dag-task").commit([add(table, "f1")], commit_identifier=42)
    again = Committer(Table.open(str(tmp_path / "t")), "airflow-dag-task").commit(
        [add(table, "f1")], commit_identifier=42
    )
    assert again.already_committed and again.snapshot.id == first.snapshot.id
    assert table.snapshot_manager.list_snapshot_ids() == [1]
    other = Committer(table, "airflow-dag-task").commit([add(table, "f2")], commit_identifier=43)
    assert not other.already_committed and other.snapshot.id == 2


def test_stores_without_exclusive_create_are_refused_unless_opted_in(tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe_file("/mem-table/schema/schema-0", schema_from_fields(FIELDS, ["p"]).to_bytes())
    table = Table.open("memory://mem-table")
    with pytest.raises(UnsupportedStorageError, match="create-if-absent"):
        Committer(table)
    result = Committer(table, allow_unsafe_publish=True).commit([add(table, "f1")])
    assert result.snapshot.id == 1


@pytest.mark.parametrize("after", [False, True], ids=["fails-before", "lost-ack"])
def test_fault_at_every_step_leaves_a_readable_table_and_the_retry_commits_once(
    tmp_path: Path, after: bool
) -> None:
    base = tmp_path / "base"
    table = new_table(base, **{"manifest.merge-min-count": "2"})  # so the commit also merges manifests
    setup = Committer(table, "setup")
    keep = [add(table, f"old-{i}") for i in range(3)]
    for entry in keep:
        setup.commit([entry])
    changes = [delete(keep[0]), add(table, "new-1"), add(table, "new-2", "b")]
    before = live_names(table)
    expected = sorted([*before[1:], "new-1", "new-2"])
    # Count the mutating operations of one clean commit.
    probe_root = tmp_path / "probe"
    shutil.copytree(base, probe_root)
    probe = FaultyFileIO(FileIO.for_uri(str(probe_root))[0])
    Committer(Table(probe, str(probe_root)), "job", sleep=no_sleep).commit(changes, commit_identifier=7)
    operations = len(probe.calls)
    assert operations >= 6  # merged manifests, delta manifest, 2 lists, snapshot, LATEST
    for k in range(1, operations + 1):
        root = tmp_path / f"k{k}"
        shutil.copytree(base, root)
        faulty = FaultyFileIO(FileIO.for_uri(str(root))[0], fail_at=k, after=after)
        with contextlib.suppress(InjectedFault):
            Committer(Table(faulty, str(root)), "job", sleep=no_sleep).commit(changes, commit_identifier=7)
        clean = Table.open(str(root))
        assert live_names(clean) in (before, expected), (k, faulty.calls[k - 1])
        retry = Committer(clean, "job").commit(changes, commit_identifier=7)
        assert live_names(clean) == expected, k
        assert clean.snapshot_manager.list_snapshot_ids() == [1, 2, 3, 4], k
        assert retry.snapshot.id == 4
