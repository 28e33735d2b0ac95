"""Paimon's manifest merge policy (core.manifest_merge) and the rolling manifest writer.

Most tests keep manifests in memory as real Avro bytes. Tests that need exact group boundaries
override a meta's ``_FILE_SIZE`` (the policy reads sizes only from the metas). The 200-commit
simulation uses a writer whose file sizes follow an exact model, so its bound can be derived.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from airflow_lakeformat.core.errors import CorruptMetadataError, DuplicateFileError, UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro, binary_row
from airflow_lakeformat.core.paimon.manifest import (
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    merge_entries,
)
from airflow_lakeformat.core.paimon.manifest_merge import (
    ManifestMergeResult,
    merge_manifests,
    must_change,
    partition_may_contain,
)
from airflow_lakeformat.core.paimon.manifest_writer import RollingManifestWriter, manifest_file_meta
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import DataType, parse_type
from tests.support.tables import TableBuilder

TYPES: tuple[DataType, ...] = (parse_type("INT"),)
HUGE = 1 << 40


# -- helpers -----------------------------------------------------------------------------------------


def add(name: str, part: int | None = 1, bucket: int = 0, level: int = 0, **fields: Any) -> ManifestEntry:
    file = DataFileMeta.create(f"{name}.parquet", 1024, 10, level=level)
    file.record.update(fields)
    return ManifestEntry.create(FileKind.ADD, binary_row.encode([part], TYPES), bucket, 2, file)


def delete(entry: ManifestEntry) -> ManifestEntry:
    return entry.to_delete()


def at_level(entry: ManifestEntry, level: int) -> ManifestEntry:
    """The same data file re-registered at a higher level (a PK-table level upgrade)."""
    record = dict(entry.file.record)
    record["_LEVEL"] = level
    return ManifestEntry.create(
        FileKind.ADD, entry.partition, entry.bucket, entry.total_buckets or -1, DataFileMeta(record)
    )


def resized(meta: ManifestFileMeta, size: int) -> ManifestFileMeta:
    return ManifestFileMeta({**meta.record, "_FILE_SIZE": size})


class Store:
    """Manifests as Avro bytes in a dict; records every read."""

    def __init__(self, types: Sequence[DataType] = TYPES) -> None:
        self.types = tuple(types)
        self.files: dict[str, bytes] = {}
        self.reads: list[str] = []

    def read(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        self.reads.append(meta.file_name)
        return avro.decode_manifest(self.files[meta.file_name], meta.file_name)

    def writer(self, target: int, **kwargs: Any) -> RollingManifestWriter:
        return RollingManifestWriter(
            self.files.__setitem__, partition_types=self.types, schema_id=0, target_file_size=target, **kwargs
        )

    def manifest(self, entries: Sequence[ManifestEntry], **kwargs: Any) -> ManifestFileMeta:
        (meta,) = self.writer(HUGE, **kwargs).write(entries)
        return meta

    def merge(self, metas: Sequence[ManifestFileMeta], target: int, **kwargs: Any) -> ManifestMergeResult:
        options: dict[str, Any] = {
            "full_compaction_threshold": HUGE,
            "merge_min_count": 30,
            "partitioned": bool(self.types),
            "partition_stats_may_contain": self.may_contain,
        }
        options.update(kwargs)
        return merge_manifests(
            metas, self.read, self.writer(target).write, target_file_size=target, **options
        )

    def may_contain(self, meta: ManifestFileMeta, partition: bytes) -> bool:
        return partition_may_contain(meta, partition, self.types)


def fold(metas: Iterable[ManifestFileMeta], read: Any) -> dict[tuple[Any, ...], ManifestEntry]:
    folded: dict[tuple[Any, ...], ManifestEntry] = {}
    for meta in metas:
        merge_entries(read(meta), folded)
    return folded


def live(metas: Iterable[ManifestFileMeta], read: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    """What a reader sees: the folded ADDs. Complete histories leave no DELETE behind."""
    folded = fold(metas, read)
    assert all(e.kind is FileKind.ADD for e in folded.values()), "an unmatched DELETE in a complete list"
    return {key: e.record for key, e in folded.items()}


def names(entries: Iterable[ManifestEntry]) -> list[tuple[str, str]]:
    return [(e.kind.name, e.file.file_name) for e in entries]


def all_entries(metas: Iterable[ManifestFileMeta], read: Any) -> list[ManifestEntry]:
    return [e for m in metas for e in read(m)]


# -- minor compaction ----------------------------------------------------------------------------------


def test_minor_keeps_unmatched_delete_and_cancels_matched_pairs() -> None:
    store = Store()
    a, b, c, d = add("a"), add("b"), add("c"), add("d")
    big = resized(store.manifest([a, b]), 100_000)  # a group of its own: kept as is
    m1 = store.manifest([c])
    m2 = store.manifest([delete(a), delete(c), d])  # DELETE a: its ADD is outside this group
    before = live([big, m1, m2], store.read)

    result = store.merge([big, m1, m2], target=100_000, merge_min_count=2)

    assert result.mode == "minor"
    assert result.manifests[0] is big
    assert result.rewritten == [m1, m2]
    assert result.manifests[1:] == result.written and len(result.written) == 1
    assert names(store.read(result.written[0])) == [("DELETE", "a.parquet"), ("ADD", "d.parquet")]
    assert live(result.manifests, store.read) == before


def test_minor_groups_close_at_target_and_keep_their_place() -> None:
    store = Store()
    m = [resized(store.manifest([add(f"f{i}")]), 40) for i in range(5)]
    result = store.merge(m, target=100, merge_min_count=30)
    # sizes 40+40+40 >= 100 closes [m0, m1, m2]; [m3, m4] is left over (2 < 30) and kept
    assert result.mode == "minor"
    assert result.rewritten == m[:3]
    assert result.manifests[-2:] == m[3:] and result.manifests[-2] is m[3]
    assert result.manifests[:-2] == result.written  # rolled at the (tiny) target: one entry each
    assert names(all_entries(result.written, store.read)) == [("ADD", f"f{i}.parquet") for i in range(3)]


def test_minor_one_manifest_group_is_kept() -> None:
    store = Store()
    big = resized(store.manifest([add("a"), delete(add("gone"))]), 1000)
    small = store.manifest([add("b")])
    result = store.merge([big, small], target=1000, merge_min_count=1)
    # [big] closes alone (size >= target); the leftover [small] has one manifest: nothing to merge
    assert result.mode == "none" and result.manifests == [big, small] and result.manifests[0] is big
    assert store.reads == []


def test_minor_duplicate_add_raises() -> None:
    store = Store()
    m1 = store.manifest([add("x")])
    m2 = store.manifest([add("x")])
    with pytest.raises(DuplicateFileError):
        store.merge([m1, m2], target=HUGE, merge_min_count=2)


def test_minor_group_that_folds_to_nothing_leaves_no_manifest() -> None:
    store = Store()
    x = add("x")
    m1 = store.manifest([x])
    m2 = store.manifest([delete(x)])
    result = store.merge([m1, m2], target=HUGE, merge_min_count=2)
    assert result.mode == "minor"
    assert result.manifests == [] and result.written == [] and result.rewritten == [m1, m2]


@pytest.mark.parametrize(("min_count", "merged"), [(6, False), (5, True), (1, True)])
def test_leftover_group_is_merged_only_from_merge_min_count(min_count: int, merged: bool) -> None:
    store = Store()
    m = [store.manifest([add(f"f{i}")]) for i in range(5)]
    result = store.merge(m, target=HUGE, merge_min_count=min_count)
    if merged:
        assert result.mode == "minor" and len(result.manifests) == 1 and result.rewritten == m
        assert len(store.read(result.manifests[0])) == 5
    else:
        assert result.mode == "none" and result.manifests == m and result.written == []


# -- full compaction -----------------------------------------------------------------------------------


def _partitioned_case(store: Store, target: int) -> tuple[list[ManifestFileMeta], ManifestEntry]:
    c = add("c", part=2)
    big1 = resized(store.manifest([add("a", part=1), add("b", part=1)]), target)  # cannot hold partition 2
    big2 = resized(store.manifest([c, add("d", part=2)]), target)  # holds the deleted c
    small = store.manifest([delete(c), add("e", part=2)])  # must change: has a DELETE
    big3 = resized(store.manifest([add("f", part=3)]), target)  # cannot hold partition 2
    return [big1, big2, small, big3], c


def test_full_drops_deletes_and_keeps_manifests_that_cannot_hold_deleted_partitions() -> None:
    store = Store()
    target = 100_000
    metas, _ = _partitioned_case(store, target)
    big1, big2, small, big3 = metas
    before = live(metas, store.read)
    store.reads.clear()

    result = store.merge(metas, target=target, full_compaction_threshold=small.file_size)

    assert result.mode == "full"
    assert result.manifests[0] is big1 and result.manifests[1] is big3  # untouched, in input order
    assert result.manifests[2:] == result.written
    assert result.rewritten == [big2, small]
    assert [e for m in result.written for e in names(store.read(m))] == [
        ("ADD", "d.parquet"),
        ("ADD", "e.parquet"),
    ]
    assert big1.file_name not in store.reads and big3.file_name not in store.reads
    assert live(result.manifests, store.read) == before


def test_full_without_partition_stats_reads_everything_but_passes_unaffected_manifests_through() -> None:
    store = Store()
    target = 100_000
    metas, _ = _partitioned_case(store, target)
    big1, big2, small, big3 = metas
    result = store.merge(
        metas, target=target, full_compaction_threshold=small.file_size, partition_stats_may_contain=None
    )
    assert result.mode == "full"
    assert big1.file_name in store.reads and big3.file_name in store.reads
    # read, nothing deleted in them, not "must change": passed through, after the kept ones (none here)
    assert result.manifests[0] is big1 and result.manifests[1] is big3
    assert result.rewritten == [big2, small]


def test_full_on_unpartitioned_table_considers_every_manifest() -> None:
    store = Store(types=())
    x = ManifestEntry.create(FileKind.ADD, binary_row.encode([], []), 0, 1, DataFileMeta.create("x", 1, 1))
    y = ManifestEntry.create(FileKind.ADD, binary_row.encode([], []), 0, 1, DataFileMeta.create("y", 1, 1))
    big1 = resized(store.manifest([x]), 1000)
    big2 = resized(store.manifest([y]), 1000)
    small = store.manifest([delete(x)])
    result = store.merge([big1, big2, small], target=1000, full_compaction_threshold=1)
    assert result.mode == "full"
    assert result.manifests[0] is big2  # read (ALWAYS_TRUE), nothing of it deleted: passed through
    assert result.rewritten == [big1, small] and result.written == []
    assert set(store.reads) == {big1.file_name, big2.file_name, small.file_name}


def test_full_triggers_exactly_at_the_must_change_threshold() -> None:
    store = Store()
    target = 100_000
    big = resized(store.manifest([add("big")]), target)  # not "must change": does not count
    s1 = store.manifest([add("a")])
    s2 = store.manifest([add("b")])
    total = s1.file_size + s2.file_size
    assert [must_change(m, target) for m in (big, s1, s2)] == [False, True, True]

    below = store.merge([big, s1, s2], target=target, full_compaction_threshold=total + 1)
    assert below.mode == "none"
    at = store.merge([big, s1, s2], target=target, full_compaction_threshold=total)
    assert at.mode == "full"
    assert at.manifests[0] is big and at.rewritten == [s1, s2]  # no deletes: only must-change ones merge


def test_full_is_skipped_when_at_most_one_manifest_would_merge() -> None:
    store = Store()
    big1 = resized(store.manifest([add("a")]), 100_000)
    small = store.manifest([add("b")])
    big2 = resized(store.manifest([add("c")]), 100_000)
    result = store.merge([big1, small, big2], target=100_000, full_compaction_threshold=1, merge_min_count=1)
    # full: only `small` must change -> skipped; minor: [big1], [small, big2] closes at >= target
    assert result.mode == "minor"
    assert result.manifests[0] is big1 and result.rewritten == [small, big2]


def test_full_keeps_a_file_added_again_after_its_delete() -> None:
    """Java would drop both ADDs of x; the fold says x is live, so we keep the later ADD."""
    store = Store()
    x = add("x")
    metas = [store.manifest([x]), store.manifest([delete(x)]), store.manifest([add("x"), add("y")])]
    before = live(metas, store.read)
    assert set(k[3] for k in before) == {"x.parquet", "y.parquet"}
    result = store.merge(metas, target=HUGE, full_compaction_threshold=1, merge_min_count=1)
    assert result.mode == "full"
    assert live(result.manifests, store.read) == before


def test_full_refuses_delete_entries_that_the_meta_does_not_count() -> None:
    store = Store()
    x = add("x")
    lying = ManifestFileMeta({**store.manifest([delete(x)]).record, "_NUM_DELETED_FILES": 0})
    with pytest.raises(CorruptMetadataError):
        store.merge([store.manifest([x]), lying], target=HUGE, full_compaction_threshold=1)


def test_forced_merge_leaves_minimal_manifests_and_no_deletes() -> None:
    store = Store()
    rng = random.Random(7)
    alive: list[ManifestEntry] = []
    metas = []
    for i in range(40):
        entries = [add(f"c{i}-{j}", part=rng.randrange(4), bucket=rng.randrange(3)) for j in range(3)]
        for _ in range(rng.randrange(3)):
            if alive:
                entries.append(delete(alive.pop(rng.randrange(len(alive)))))
        alive += [e for e in entries if e.kind is FileKind.ADD]
        metas.append(store.manifest(entries))
    before = live(metas, store.read)
    target = 2600  # the Avro header alone is ~2.3 KB and zstd packs these entries tightly

    result = store.merge(metas, target=target, full_compaction_threshold=1, merge_min_count=1)

    assert result.mode == "full" and result.rewritten == metas
    assert not any(e.kind is FileKind.DELETE for e in all_entries(result.manifests, store.read))
    assert live(result.manifests, store.read) == before
    sizes = [m.file_size for m in result.manifests]
    assert all(s >= target for s in sizes[:-1]) and len(sizes) > 1  # rolled: only the last is short
    # compact_manifest again: nothing changes, so nothing would be committed
    again = store.merge(result.manifests, target=target, full_compaction_threshold=1, merge_min_count=1)
    assert again.mode == "none" and again.manifests == result.manifests


def test_threshold_must_be_positive() -> None:
    store = Store()
    with pytest.raises(ValueError):
        store.merge([], target=10, full_compaction_threshold=0)


# -- equivalence property --------------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[list[ManifestEntry]]:
    """Valid Paimon histories: files added once, deleted at most once, levels upgraded in place."""
    alive: list[ManifestEntry] = []
    commits = []
    counter = 0
    for _ in range(draw(st.integers(2, 12))):
        entries: list[ManifestEntry] = []
        for _ in range(draw(st.integers(1, 6))):
            op = draw(st.sampled_from(["add", "add", "delete", "upgrade", "compact"]))
            if op == "add" or not alive:
                part = draw(st.sampled_from([1, 2, 3, None]))
                entry = add(f"f{counter}", part=part, bucket=draw(st.integers(0, 2)))
                counter += 1
                entries.append(entry)
                alive.append(entry)
            elif op == "delete":
                entries.append(delete(alive.pop(draw(st.integers(0, len(alive) - 1)))))
            elif op == "upgrade":
                victim = alive.pop(draw(st.integers(0, len(alive) - 1)))
                entries.append(delete(victim))
                if victim.file.level < 5:
                    upgraded = at_level(victim, draw(st.integers(victim.file.level + 1, 5)))
                    entries.append(upgraded)
                    alive.append(upgraded)
            else:
                victims = [alive.pop(draw(st.integers(0, len(alive) - 1))) for _ in range(min(len(alive), 2))]
                entries += [delete(v) for v in victims]
                merged = add(
                    f"f{counter}", part=None, bucket=victims[0].bucket, level=draw(st.integers(1, 5))
                )
                merged = ManifestEntry.create(
                    FileKind.ADD, victims[0].partition, merged.bucket, 2, merged.file
                )
                counter += 1
                entries.append(merged)
                alive.append(merged)
        commits.append(entries)
    return commits


def _check_merge(
    store: Store, before: list[ManifestFileMeta], result: ManifestMergeResult, label: str
) -> None:
    event(f"{label} merge: {result.mode}")
    assert live(result.manifests, store.read) == live(before, store.read)
    inputs = {id(m) for m in before}
    written = {id(m) for m in result.written}
    assert all(id(m) in inputs or id(m) in written for m in result.manifests)
    assert [m for m in before if m not in result.manifests] == result.rewritten
    if result.mode == "none":
        assert result.manifests == before and not result.written
    if result.mode == "full":
        assert not any(e.kind is FileKind.DELETE for e in all_entries(result.manifests, store.read))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=histories(),
    # One small manifest is ~2.4 KB (mostly the Avro header). Drawn from sets, because hypothesis
    # favours range ends, and a target of ~2.3 KB makes every manifest a group of its own.
    target=st.sampled_from([2_400, 3_000, 4_000, 6_000, 9_000, 20_000]),
    threshold=st.sampled_from([1, 6_000, 24_000, HUGE]),
    min_count=st.integers(1, 6),
    every_commit=st.booleans(),
    use_stats=st.booleans(),
)
def test_merging_never_changes_the_live_files(
    commits: list[list[ManifestEntry]],
    target: int,
    threshold: int,
    min_count: int,
    every_commit: bool,
    use_stats: bool,
) -> None:
    store = Store()
    options = {
        "full_compaction_threshold": threshold,
        "merge_min_count": min_count,
        "partition_stats_may_contain": store.may_contain if use_stats else None,
    }
    metas: list[ManifestFileMeta] = []
    for entries in commits:
        if every_commit and metas:  # as a Paimon commit: base + previous delta are merged
            result = store.merge(metas, target=target, **options)
            _check_merge(store, metas, result, "policy")
            metas = result.manifests
        metas = [*metas, store.manifest(entries)]
    result = store.merge(metas, target=target, **options)
    _check_merge(store, metas, result, "policy")
    forced = store.merge(metas, target=target, full_compaction_threshold=1, merge_min_count=1)
    _check_merge(store, metas, forced, "forced")


# -- rolling writer ----------------------------------------------------------------------------------------


def test_rolling_writer_splits_at_target_and_metas_match_their_entries() -> None:
    store = Store()
    rng = random.Random(3)
    entries = [
        add(f"data-{rng.getrandbits(64):016x}", part=rng.randrange(5), bucket=i % 4) for i in range(400)
    ]
    entries += [delete(e) for e in entries[:50]]
    target = 3000
    writer = store.writer(target)

    metas = writer.write(iter(entries))  # any iterable, consumed lazily

    assert len(metas) > 2 and writer.written == metas
    assert all(m.file_size >= target for m in metas[:-1])
    assert all(m.file_size < 1.5 * target for m in metas)
    decoded = []
    for meta in metas:
        data = store.files[meta.file_name]
        assert meta.file_size == len(data)
        got = avro.decode_manifest(data, meta.file_name)
        assert meta.record == manifest_file_meta(meta.file_name, len(data), got, TYPES, 0).record
        assert meta.num_deleted_files == sum(e.kind is FileKind.DELETE for e in got)
        decoded += got
    assert [e.record for e in decoded] == [e.record for e in entries]
    assert len({m.file_name for m in metas}) == len(metas)
    assert writer.write([]) == []


FUTURE = [{"name": "_FUTURE_FIELD", "type": ["null", "string"], "default": None}]


def test_unknown_file_fields_survive_a_rewrite_and_are_never_dropped_silently() -> None:
    store = Store()
    metas = [
        store.manifest([add(f"f{i}", _FUTURE_FIELD=f"v{i}"), add(f"g{i}")], extra_file_fields=FUTURE)
        for i in range(3)
    ]
    assert avro.read_records(store.files[metas[0].file_name], "m")[0]["fields"][5]["type"]["fields"][-1][
        "name"
    ] == ("_FUTURE_FIELD")
    with pytest.raises(UnsupportedFormatError, match="_FUTURE_FIELD"):
        store.merge(metas, target=HUGE, merge_min_count=1)

    result = merge_manifests(
        metas,
        store.read,
        store.writer(HUGE, extra_file_fields=FUTURE).write,
        target_file_size=HUGE,
        full_compaction_threshold=1,
        merge_min_count=1,
        partitioned=True,
    )
    assert result.mode == "full"
    values = {
        e.file.file_name: e.file.record.get("_FUTURE_FIELD")
        for e in all_entries(result.manifests, store.read)
    }
    assert values == {
        **{f"f{i}.parquet": f"v{i}" for i in range(3)},
        **{f"g{i}.parquet": None for i in range(3)},
    }


def test_merging_a_real_tables_manifests(tmp_path: Path) -> None:
    builder = TableBuilder(tmp_path / "t", [("dt", "INT"), ("v", "INT")], ["dt"], ["dt", "v"])
    first = [builder.entry((d,), 0) for d in (1, 2)]
    builder.commit(first)
    third = builder.entry((3,), 1)
    builder.commit([third])
    builder.commit([builder.delete_of(first[0]), builder.entry((1,), 0, first[0].file.file_name, level=5)])
    builder.commit([builder.delete_of(first[1])])
    table = Table.open(str(builder.root))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    base, delta = table.data_manifests(latest)
    manifests = base + delta
    assert len(manifests) == 4

    def read(meta: ManifestFileMeta) -> list[ManifestEntry]:
        return table.manifest(meta.file_name)

    writer = RollingManifestWriter(
        lambda name, data: (builder.root / "manifest" / name).write_bytes(data),
        partition_types=table.schema.partition_types,
        schema_id=table.schema.id,
        target_file_size=8 << 20,
    )
    result = merge_manifests(
        manifests,
        read,
        writer.write,
        target_file_size=8 << 20,
        full_compaction_threshold=1,
        merge_min_count=1,
        partitioned=True,
        partition_stats_may_contain=lambda m, p: partition_may_contain(m, p, table.schema.partition_types),
    )
    assert result.mode == "full" and len(result.manifests) == 1 and result.written == writer.written
    assert live(result.manifests, read) == live(manifests, read)
    assert sorted((e.file.file_name, e.file.level) for e in read(result.manifests[0])) == sorted(
        [(first[0].file.file_name, 5), (third.file.file_name, 0)]
    )


# -- partition pruning by stats ----------------------------------------------------------------------------


TWO = (parse_type("INT"), parse_type("STRING"))


def _meta(partitions: list[list[Any]], types: Sequence[DataType] = TWO) -> ManifestFileMeta:
    entries = [
        ManifestEntry.create(
            FileKind.ADD, binary_row.encode(p, types), 0, 1, DataFileMeta.create(f"f{i}", 1, 1)
        )
        for i, p in enumerate(partitions)
    ]
    return manifest_file_meta("m", 1, entries, types, 0)


def _may(meta: ManifestFileMeta, values: list[Any], types: Sequence[DataType] = TWO) -> bool:
    return partition_may_contain(meta, binary_row.encode(values, types), types)


def test_partition_may_contain_checks_each_field_against_its_own_range() -> None:
    meta = _meta([[1, "a"], [3, "c"]])
    assert _may(meta, [1, "a"]) and _may(meta, [3, "c"])
    assert _may(meta, [2, "b"]) and _may(meta, [1, "c"])  # column-wise ranges: cannot exclude these
    assert not _may(meta, [4, "a"]) and not _may(meta, [0, "b"])
    assert not _may(meta, [2, "d"]) and not _may(meta, [2, "B"])
    assert not _may(meta, [None, "a"])  # null count of field 0 is 0


def test_partition_may_contain_handles_nulls_through_null_counts() -> None:
    meta = _meta([[None, "a"], [5, "long string value beyond 7 bytes"]])
    assert _may(meta, [None, "a"]) and _may(meta, [5, "a"])
    assert not _may(meta, [5, None])
    all_null = _meta([[None, "x"]])
    assert _may(all_null, [None, "x"])
    assert _may(all_null, [7, "x"])  # all-null range: conservatively True


def test_partition_may_contain_is_conservative_when_unsure() -> None:
    meta = _meta([[1, "a"]])
    unknown_nulls = ManifestFileMeta(
        {**meta.record, "_PARTITION_STATS": {**meta.record["_PARTITION_STATS"], "_NULL_COUNTS": None}}
    )
    assert _may(unknown_nulls, [None, "a"])
    garbage = ManifestFileMeta(
        {**meta.record, "_PARTITION_STATS": SimpleStats(b"\x00\x01", b"", None).to_record()}
    )
    assert _may(garbage, [9, "z"])
    narrower = ManifestFileMeta(
        {**meta.record, "_PARTITION_STATS": _meta([[1]], TYPES).record["_PARTITION_STATS"]}
    )
    assert _may(narrower, [9, "z"])
    binary = (parse_type("BYTES"),)
    assert _may(_meta([[b"\x01"]], binary), [b"\xff"], binary)  # Java may order bytes differently
    assert partition_may_contain(meta, binary_row.encode([], []), ())
    doubles = (parse_type("DOUBLE"),)
    assert _may(_meta([[1.0], [2.0]], doubles), [math.nan], doubles)
    assert not _may(_meta([[1.0], [2.0]], doubles), [2.5], doubles)


# -- 200-commit simulation --------------------------------------------------------------------------------

# Exact size model: a manifest of n entries weighs H + n * E bytes. Sizes scaled down from Paimon's
# defaults (8 MB target, 16 MB threshold, 30 min count); a 4-file commit is 1/16 of the target.
H, E = 256, 64
T, F, MIN_COUNT = 8192, 16384, 30
N_ROLL = math.ceil((T - H) / E)  # entries of a rolled (closed) file: the first n with H + n*E >= T


class ModelStore:
    def __init__(self) -> None:
        self.files: dict[str, list[ManifestEntry]] = {}
        self.counter = 0

    def read(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        return list(self.files[meta.file_name])

    def write(self, entries: Iterable[ManifestEntry], roll: int = N_ROLL) -> list[ManifestFileMeta]:
        items = list(entries)
        metas = []
        for i in range(0, len(items), roll):
            chunk = items[i : i + roll]
            name = f"manifest-{self.counter}"
            self.counter += 1
            self.files[name] = chunk
            metas.append(manifest_file_meta(name, H + E * len(chunk), chunk, TYPES, 0))
        return metas


def test_200_small_commits_keep_the_manifest_count_bounded() -> None:
    """Derivation of the bound (every file in this run is smaller than T + E, and none is empty).

    Let S be the must-change total (files with DELETEs or < T bytes) of the list a merge gets.
    * S >= F: there are >= 2 must-change files (one is < T + E < F), so full compaction runs.
      Afterwards at most one file is below T and none has DELETEs.
    * S < F: must-change files weigh >= s_min = H + E, so there are < F / s_min of them. All
      other files are >= T, so each holds >= N_ROLL ADD entries. Each such ADD is live or has its
      DELETE in the list, and all DELETEs sit in must-change files (< F bytes) => fewer than F / E.
      So count <= ceil(F / s_min) - 1 + (live + ceil(F / E) - 1) // N_ROLL.
    * No merge increases the count: a merged group's manifests before its last hold < N_ROLL
      entries together and its last one <= N_ROLL, so it rolls into <= 2 files.
    A commit adds one manifest, so before each merge: count <= that bound (with the largest live
    count so far) + 1.
    """
    store = ModelStore()
    rng = random.Random(42)
    alive: list[ManifestEntry] = []  # oldest first
    metas: list[ManifestFileMeta] = []
    modes = []
    max_live = 0
    s_min = H + E
    for i in range(200):
        # Appends add 4 files; every 4th commit compacts the 8 oldest files into 1 at level 1, so
        # DELETEs pile up against ADDs that already sit in big (>= T) manifests.
        if i % 4 == 3:
            victims, alive = alive[:8], alive[8:]
            merged = add(f"c{i}", part=binary_row.decode(victims[0].partition, TYPES)[0], level=1)
            entries = [*map(delete, victims), merged]
        else:
            entries = [add(f"a{i}-{j}", part=rng.randrange(5), bucket=rng.randrange(2)) for j in range(4)]
        alive += [e for e in entries if e.kind is FileKind.ADD]
        max_live = max(max_live, len(alive))

        if metas:
            must = sum(m.file_size for m in metas if must_change(m, T))
            before = live(metas, store.read)
            result = merge_manifests(
                metas,
                store.read,
                store.write,
                target_file_size=T,
                full_compaction_threshold=F,
                merge_min_count=MIN_COUNT,
                partitioned=True,
                partition_stats_may_contain=lambda m, p: partition_may_contain(m, p, TYPES),
            )
            assert (result.mode == "full") == (must >= F), (i, must, result.mode)
            assert len(result.manifests) <= len(metas)
            assert live(result.manifests, store.read) == before
            if result.mode == "full":
                assert sum(m.file_size < T for m in result.manifests) <= 1
                assert len(result.manifests) <= len(before) // N_ROLL + 1
            modes.append(result.mode)
            metas = result.manifests
        metas = [*metas, *store.write(entries, roll=len(entries))]
        assert all(0 < m.file_size < T + E for m in metas)
        bound = math.ceil(F / s_min) - 1 + (max_live + math.ceil(F / E) - 1) // N_ROLL + 1
        assert len(metas) <= bound, (i, len(metas), bound)

    assert modes.count("full") >= 3 and modes.count("minor") >= 10
    assert len(metas) < 40  # vs 200 without merging
