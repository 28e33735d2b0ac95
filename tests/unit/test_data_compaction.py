"""Data compaction, driver-side: the planner's rules, the rewrite, the COMPACT commit and its conflicts."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CorruptMetadataError,
    MissingMetadataError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.data_compaction import (
    commit_data_compaction,
    compact_data,
    plan_data_compaction,
    rewrite_group,
)
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.core.paimon.write.live_state import next_sequence_numbers
from airflow_lakeformat.core.paimon.write.rolling_writer import RollingFileWriter
from tests.support.pypaimon import oracle_read
from tests.support.tables import TableBuilder

FIELDS = [{"name": "p", "type": "STRING"}, {"name": "v", "type": "BIGINT"}, {"name": "s", "type": "STRING"}]


def new_table(root: Path, **options: str) -> Table:
    return create_table(str(root), schema_from_fields(FIELDS, ["p"], options=options))


def batch(start: int, count: int, partitions: tuple[str, ...] = ("a", "b")) -> pa.Table:
    values = list(range(start, start + count))
    return pa.table(
        {
            "p": [partitions[v % len(partitions)] for v in values],
            "v": values,
            "s": [f"row-{v}" for v in values],
        }
    )


def append_batches(table: Table, batches: int, rows: int = 50) -> list[int]:
    committer = Committer(table, "writer")
    for i in range(batches):
        committer.commit(write_data_files(table, batch(i * rows, rows)))
    return list(range(batches * rows))


def live(table: Table) -> list[ManifestEntry]:
    latest = table.snapshot_manager.latest_snapshot()
    return live_entries(table, latest) if latest else []


def rows_of(table: Table) -> list[tuple[Any, ...]]:
    """Every live row, read back with pyarrow from the live files."""
    paths = DataFilePaths(table.schema)
    out: list[tuple[Any, ...]] = []
    for entry in live(table):
        data = pq.read_table(Path(table.root) / paths.relative_path(entry))
        assert data.num_rows == entry.file.row_count
        out.extend(zip(*(data.column(f["name"]).to_pylist() for f in FIELDS), strict=True))
    return sorted(out, key=repr)


# -- planning (metadata only: sizes are chosen, no data files) ------------------------------------


def fake_table(root: Path, options: dict[str, str] | None = None, **kwargs: Any) -> TableBuilder:
    return TableBuilder(
        root, [("p", "STRING"), ("v", "BIGINT")], partition_keys=["p"], options=options, **kwargs
    )


def test_plan_bin_packs_small_files_per_partition_and_bucket_in_sequence_order(tmp_path: Path) -> None:
    builder = fake_table(tmp_path / "t", {"bucket": "2", "bucket-key": "v", "target-file-size": "450 b"})
    entries = []
    for i in range(10):  # p=a bucket 0: 10 files of 100 bytes, sequence ranges 10 apart
        entries.append(builder.entry(["a"], 0, f"data-a0-{i:02d}.parquet", file_size=100, row_count=10,
                                     min_sequence_number=i * 10, max_sequence_number=i * 10 + 9, total_buckets=2))  # fmt: skip
    for i in range(3):  # p=b bucket 1: 3 small files around a large one
        entries.append(builder.entry(["b"], 1, f"data-b1-{i}.parquet", file_size=100, row_count=1,
                                     min_sequence_number=i, max_sequence_number=i, total_buckets=2))  # fmt: skip
    entries.append(builder.entry(["b"], 1, "data-b1-big.parquet", file_size=1000, row_count=1,
                                 min_sequence_number=3, max_sequence_number=3, total_buckets=2))  # fmt: skip
    for i in range(4, 7):
        entries.append(builder.entry(["b"], 1, f"data-b1-{i}.parquet", file_size=100, row_count=1,
                                     min_sequence_number=i, max_sequence_number=i, total_buckets=2))  # fmt: skip
    builder.commit(entries[::-1])  # manifest order must not matter
    table = Table.open(str(tmp_path / "t"))

    plan = plan_data_compaction(table, min_file_count=3)
    groups = [(g.partition_spec, g.bucket, [e.file.file_name for e in g.entries]) for g in plan.groups]
    assert groups == [
        ({"p": "a"}, 0, [f"data-a0-{i:02d}.parquet" for i in range(4)]),
        ({"p": "a"}, 0, [f"data-a0-{i:02d}.parquet" for i in range(4, 8)]),
        # a0-08 and a0-09 are a bin of 2 < 3; in the fixed-bucket table the big file splits the run.
        ({"p": "b"}, 1, ["data-b1-0.parquet", "data-b1-1.parquet", "data-b1-2.parquet"]),
        ({"p": "b"}, 1, ["data-b1-4.parquet", "data-b1-5.parquet", "data-b1-6.parquet"]),
    ]
    assert all(g.total_buckets == 2 for g in plan.groups)
    document = plan.to_json()
    assert (document["liveFiles"], document["candidates"], document["skipped"]) == (17, 16, {"large": 1})
    assert (document["filesToRewrite"], document["bytesToRewrite"]) == (14, 1400)
    assert plan.groups[0].min_sequence_number == 0 and plan.groups[0].max_sequence_number == 39

    # Only the selected partitions; the default minimum (5) drops every bin of p=b.
    only_b = plan_data_compaction(table, partitions=[{"p": "b"}], min_file_count=3)
    assert {g.partition_spec["p"] for g in only_b.groups} == {"b"}
    assert plan_data_compaction(table, partitions=[{"p": "b"}]).groups == ()
    with pytest.raises(ValueError, match="not partition keys"):
        plan_data_compaction(table, partitions=[{"dt": "x"}])
    with pytest.raises(ValueError, match="at least 2"):
        plan_data_compaction(table, min_file_count=1)


def test_plan_skips_files_a_rewrite_could_get_wrong(tmp_path: Path) -> None:
    builder = fake_table(tmp_path / "t", {"target-file-size": "1 kb"})
    ok = [builder.entry(["a"], 0, f"data-ok-{i}.parquet", file_size=10) for i in range(3)]
    odd = [
        builder.entry(["a"], 0, "data-orc.orc", file_size=10),
        builder.entry(["a"], 0, "data-old.parquet", file_size=10, schema_id=7),
        builder.entry(["a"], 0, "data-ext.parquet", file_size=10, external_path="s3://elsewhere/x.parquet"),
        builder.entry(["a"], 0, "data-idx.parquet", file_size=10, extra_files=["data-idx.parquet.index"]),
        builder.entry(["a"], 0, "data-l1.parquet", file_size=10, level=1),
        builder.entry(["a"], 0, "data-big.parquet", file_size=5000),
    ]
    builder.commit(ok[:1] + odd + ok[1:])
    plan = plan_data_compaction(Table.open(str(tmp_path / "t")), min_file_count=2)
    # Unaware-bucket table: skipped files do not split the run of candidates.
    assert [[e.file.file_name for e in g.entries] for g in plan.groups] == [
        ["data-ok-0.parquet", "data-ok-1.parquet", "data-ok-2.parquet"]
    ]
    assert plan.skipped == {
        "notParquet": 1, "otherSchema": 1, "extraFilesOrExternal": 2, "notLevel0": 1, "large": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("primary_keys", "options", "problem"),
    [
        (["p", "v"], {}, "primary-key table"),
        ([], {"deletion-vectors.enabled": "true"}, "deletion-vectors.enabled=true"),
        ([], {"file.format": "orc"}, "file.format=orc"),
        ([], {"bucket": "-2"}, "bucket=-2"),
    ],
)
def test_plan_refuses_tables_it_cannot_bin_pack(
    tmp_path: Path, primary_keys: list[str], options: dict[str, str], problem: str
) -> None:
    table = create_table(
        str(tmp_path / "t"), schema_from_fields(FIELDS, ["p"], primary_keys, options=options)
    )
    with pytest.raises(UnsupportedFormatError, match=problem):
        plan_data_compaction(table)
    with pytest.raises(UnsupportedFormatError, match=problem):
        compact_data(table)


# -- rewriting and committing (real data files) ---------------------------------------------------


def test_compact_data_rewrites_small_files_into_fewer_keeping_rows_and_sequences(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", bucket="2", **{"bucket-key": "v"})
    append_batches(table, 8)
    before_rows, before_files = rows_of(table), live(table)
    before_latest = table.snapshot_manager.latest_snapshot()
    assert before_latest is not None

    dry = compact_data(table, dry_run=True, min_file_count=3)
    assert dry.dry_run and dry.snapshot_id is None and dry.files_written == 0 and dry.groups == 4
    assert table.snapshot_manager.latest_snapshot_id() == before_latest.id

    plan = plan_data_compaction(table, min_file_count=3)
    ranges = {(g.partition, g.bucket): (g.min_sequence_number, g.max_sequence_number) for g in plan.groups}
    result = compact_data(table, min_file_count=3)
    assert (result.snapshot_before, result.snapshot_id) == (before_latest.id, before_latest.id + 1)
    assert (result.groups, result.files_rewritten, result.files_written) == (4, len(before_files), 4)
    assert result.rows_rewritten == len(before_rows) and result.bytes_written > 0
    assert result.to_json()["filesWritten"] == 4

    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind is CommitKind.COMPACT
    assert (snapshot.delta_record_count, snapshot.total_record_count) == (0, before_latest.total_record_count)
    _, delta = table.data_manifests(snapshot)
    [delta_entries] = table.read_manifests(delta, "test")
    assert sorted(e.file.file_name for e in delta_entries if e.kind is FileKind.DELETE) == sorted(
        e.file.file_name for e in before_files
    )
    after = live(table)
    assert len(after) == 4 and rows_of(table) == before_rows
    for entry in after:
        assert entry.file.file_source is FileSource.COMPACT and entry.total_buckets == 2
        # The new file covers exactly the range its inputs covered.
        assert (entry.file.min_sequence_number, entry.file.max_sequence_number) == ranges[
            (entry.partition, entry.bucket)
        ]
    # A writer restoring a bucket continues after the same maximum as before.
    starts = next_sequence_numbers(table, ranges)
    assert starts == {key: high + 1 for key, (_, high) in ranges.items()}
    # Nothing left worth compacting: no snapshot.
    assert compact_data(table, min_file_count=3).snapshot_id is None


def test_rewrite_rolls_at_the_target_size_and_keeps_the_partition_bytes(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", **{"target-file-size": "8 kb"})
    committer = Committer(table, "writer")
    for i in range(6):
        committer.commit(write_data_files(table, batch(i * 2000, 2000, ("a",))))
    plan = plan_data_compaction(table, min_file_count=2, target_file_size=1 << 20)
    [group] = plan.groups
    written: list[str] = []
    added = rewrite_group(table, group, target_file_size=16 << 10, written=written)
    assert len(added) > 1 and len(written) == len(added)
    assert all(e.partition == group.partition and e.bucket == 0 and e.total_buckets == -1 for e in added)
    sizes = [e.file.file_size for e in added]
    assert max(sizes[:-1]) < 2 * (16 << 10) and min(sizes[:-1]) >= 16 << 10
    assert sum(e.file.row_count for e in added) == group.rows
    seq = [(e.file.min_sequence_number, e.file.max_sequence_number) for e in added]
    assert seq[0][0] == group.min_sequence_number and seq[-1][1] == group.max_sequence_number
    assert all(low <= high for low, high in seq)
    result = commit_data_compaction(table, plan, [added])
    assert result.files_written == len(added) and rows_of(table) == sorted(
        (("a", v, f"row-{v}") for v in range(12000)), key=repr
    )


def test_commit_is_refused_when_a_planned_file_is_no_longer_live(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    append_batches(table, 6)
    stale = plan_data_compaction(table, min_file_count=2)
    stale_rewrites = [rewrite_group(table, g, target_file_size=stale.target_file_size) for g in stale.groups]
    # Another compaction (or an overwrite) removes the planned files first.
    winner = compact_data(table, min_file_count=2)
    assert winner.snapshot_id is not None
    rows, latest = rows_of(table), table.snapshot_manager.latest_snapshot_id()
    with pytest.raises(CommitConflictError, match="is not live"):
        commit_data_compaction(table, stale, stale_rewrites)
    assert table.snapshot_manager.latest_snapshot_id() == latest and rows_of(table) == rows
    # The loser's files are referenced by no snapshot: orphans, never deleted here.
    referenced = {e.file.file_name for e in live(table)}
    for group in stale_rewrites:
        for entry in group:
            assert entry.file.file_name not in referenced
            assert (Path(table.root) / DataFilePaths(table.schema).relative_path(entry)).is_file()


def test_concurrent_appends_do_not_conflict_with_a_compaction(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    expected = append_batches(table, 6)
    plan = plan_data_compaction(table, min_file_count=2)
    rewritten = [rewrite_group(table, g, target_file_size=plan.target_file_size) for g in plan.groups]
    Committer(table, "late-writer").commit(write_data_files(table, batch(1000, 10)))
    result = commit_data_compaction(table, plan, rewritten)
    assert result.snapshot_id == plan.snapshot_id + 2  # type: ignore[operator]
    assert sorted(r[1] for r in rows_of(table)) == expected + list(range(1000, 1010))


def test_rewrite_refuses_inputs_that_disagree_with_their_manifest(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    append_batches(table, 3)
    plan = plan_data_compaction(table, min_file_count=2)
    group = plan.groups[0]
    group.entries[0].file.record["_ROW_COUNT"] += 1
    with pytest.raises(CorruptMetadataError, match="manifest entry says"):
        rewrite_group(table, group, target_file_size=plan.target_file_size)
    group.entries[0].file.record["_ROW_COUNT"] -= 1
    missing = Path(table.root) / DataFilePaths(table.schema).relative_path(group.entries[1])
    missing.unlink()
    with pytest.raises(MissingMetadataError, match=missing.name):
        rewrite_group(table, group, target_file_size=plan.target_file_size)


def test_rolling_writer_streams_batches_and_numbers_from_zero(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", bucket="3", **{"bucket-key": "v"})
    writer = RollingFileWriter(table, target_file_size=4 << 10)
    for i in range(10):
        writer.write(batch(i * 500, 500).to_batches()[0])
    entries = writer.close()
    assert len({(e.partition, e.bucket) for e in entries}) == 6 and len(entries) > 6
    assert len(writer.written) == len(entries)
    for key in {(e.partition, e.bucket) for e in entries}:
        ranges = [
            (e.file.min_sequence_number, e.file.max_sequence_number)
            for e in entries
            if (e.partition, e.bucket) == key
        ]
        assert ranges[0][0] == 0 and all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    Committer(table, "w").commit(entries)
    assert sorted(r[1] for r in rows_of(table)) == list(range(5000))
    with pytest.raises(Exception, match="not in the table"):
        RollingFileWriter(table).write(pa.table({"nope": [1]}))
    partition = binary_row.encode(["a"], table.schema.partition_types)
    first = next_sequence_numbers(table, [(partition, 0)])[(partition, 0)]
    assert first == 1 + max(
        e.file.max_sequence_number for e in entries if (e.partition, e.bucket) == (partition, 0)
    )


@pytest.mark.interop
def test_pypaimon_reads_the_same_rows_after_a_driver_side_compaction(tmp_path: Path) -> None:
    table = new_table(tmp_path / "wh" / "db.db" / "t", bucket="2", **{"bucket-key": "v"})
    append_batches(table, 6)
    copy = tmp_path / "copy" / "db.db" / "t"
    shutil.copytree(table.root, copy)
    before = oracle_read(copy)
    result = compact_data(table, min_file_count=2)
    assert result.snapshot_id is not None and result.files_written < result.files_rewritten
    assert oracle_read(table.root) == before and len(before) == 300


def test_rolling_writer_splits_rows_into_the_same_partitions_as_write_data_files(tmp_path: Path) -> None:
    fields = [{"name": "d", "type": "DATE"}, {"name": "s", "type": "STRING"}, {"name": "n", "type": "INT"},
              {"name": "v", "type": "BIGINT"}]  # fmt: skip
    table = create_table(str(tmp_path / "t"), schema_from_fields(fields, ["d", "s", "n"]))
    count = 3000
    data = pa.table(
        {
            "d": pa.array([None if i % 11 == 0 else 19000 + i % 3 for i in range(count)], pa.int32()).cast(
                pa.date32()
            ),
            "s": [None if i % 5 == 0 else ["", "a/b", "é"][i % 3] for i in range(count)],
            "n": pa.array([None if i % 7 == 0 else i % 2 for i in range(count)], pa.int32()),
            "v": list(range(count)),
        }
    )
    writer = RollingFileWriter(table)
    for chunk in data.to_batches(max_chunksize=700):
        writer.write(chunk)
    streamed = writer.close()
    direct = write_data_files(table, data)

    def rows_per_partition(entries: list[ManifestEntry]) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for e in entries:
            out[e.partition] = out.get(e.partition, 0) + e.file.row_count
        return out

    assert rows_per_partition(streamed) == rows_per_partition(direct)
    assert len(rows_per_partition(direct)) == len(data.group_by(["d", "s", "n"]).aggregate([]))
    Committer(table, "w").commit(streamed)
    paths = DataFilePaths(table.schema)
    for entry in streamed:  # every row sits in the partition its file is filed under
        values = pq.read_table(Path(table.root) / paths.relative_path(entry), columns=["d", "s", "n"])
        assert len(values.group_by(["d", "s", "n"]).aggregate([])) == 1
