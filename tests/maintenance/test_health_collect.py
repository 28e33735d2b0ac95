"""The Paimon health collector's fast path (issue 28: health within 1.2x of the live-file plan) gives the
report the per-file path gave: ``live_facts`` (a projected manifest decode, summed per (partition, bucket))
folds to exactly ``live_entries``' files, the report from its :class:`FileGroup` s equals the report from one
:class:`FileFacts` per live file, the size histogram equals the per-size rule; and a snapshot expiry cut by
``snapshot.expire.limit`` is recommended with the ``max_deletes`` that expires the whole range in one run."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from airflow_lakeformat.core.health.assess import assess
from airflow_lakeformat.core.health.model import FileFacts, FileSizeHistogram, HealthInputs
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.live_facts import decode_manifest_facts, live_facts
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.health import collect_health, partition_text
from airflow_lakeformat.core.paimon.manifest import FileKind
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.tables import PaimonTable, open_table
from tests.maintenance.test_health import create, write


def _compacted_pk_table(root: Path) -> PaimonTable:
    """A primary-key table with ADD and DELETE entries (a full compaction between writes), two partitions."""
    table = create(root, "paimon", "bucket=2", "num-sorted-run.compaction-trigger=3", primary_keys="p,k")
    write(table, 4)
    write(table, 2, partition="b")
    table.maintenance.compact_data(mode="full")
    write(table, 2, start=10)
    assert isinstance(table, PaimonTable)
    return table


def test_live_facts_fold_to_the_live_entries(tmp_path: Path) -> None:
    _compacted_pk_table(tmp_path / "t")
    table = Table.open(str(tmp_path / "t"))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    entries = live_entries(table, latest)
    expected = sorted(
        (e.identifier(), e.file.file_size, e.file.row_count, e.file.delete_row_count or 0) for e in entries
    )
    grouped = live_facts(table, latest)
    got = sorted((row[1], row[2], row[3], row[4]) for rows in grouped.values() for row in rows)
    assert got == expected and len(got) >= 3
    assert all(key == (row[1][0], row[1][1]) and row[0] for key, rows in grouped.items() for row in rows)
    # Every manifest (with its DELETE entries) decodes as the full decode does.
    base, delta = table.data_manifests(latest)
    kinds = set()
    for meta in base + delta:
        data = table.io.read_bytes(table.manifest_path(meta.file_name))
        full = avro.decode_manifest(data, meta.file_name)
        kinds |= {e.kind for e in full}
        assert decode_manifest_facts(data, meta.file_name) == [
            (
                e.kind is FileKind.ADD,
                e.identifier(),
                e.file.file_size,
                e.file.row_count,
                e.file.delete_row_count or 0,
            )
            for e in full
        ]
    assert kinds == {FileKind.ADD, FileKind.DELETE}


def _per_file_inputs(table: Table) -> tuple[HealthInputs, HealthInputs]:
    """The collector's inputs with one FileFacts per live entry instead of its groups (the former path)."""
    inputs = collect_health(table)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    paths = DataFilePaths(table.schema)
    pk = bool(table.schema.primary_keys)
    files = [
        FileFacts(
            partition_text(paths.partitions.to_json(e.partition)), "data", e.file.row_count, e.file.file_size,
            e.bucket, e.file.level, (e.file.delete_row_count or 0) if pk else 0,
        )
        for e in live_entries(table, latest)
    ]  # fmt: skip
    return inputs, replace(inputs, groups=[], files=files)


def test_the_report_from_groups_equals_the_report_from_per_file_facts(tmp_path: Path) -> None:
    _compacted_pk_table(tmp_path / "pk")
    append = create(tmp_path / "append", "paimon", "target-file-size=4 kb")
    write(append, 6)
    write(append, 2, partition="b")
    for name in ("pk", "append"):
        grouped, per_file = _per_file_inputs(Table.open(str(tmp_path / name)))
        assert grouped.groups and not grouped.files
        assert assess(grouped).to_json() == assess(per_file).to_json()
    assert assess(grouped).operations == ["compact_data"]  # the append table's small files


def test_size_histogram_counts_by_the_per_size_rule() -> None:
    rng = random.Random(7)
    for sizes in ([0, 1, 2, 3], [5000], [rng.randrange(0, 1 << rng.randrange(1, 40)) for _ in range(500)]):
        h = FileSizeHistogram.of(sizes, target_file_size=1 << 27, small_file_threshold=3 << 25)
        assert sum(h.counts) == len(sizes) and h.edges[0] <= max(1, min(sizes)) and h.edges[-1] > 1 << 27
        for size in sizes:  # each size lies in the bucket it is counted in
            assert any(lo <= max(size, h.edges[0]) < hi for lo, hi in zip(h.edges, h.edges[1:], strict=False))
        step = h.edges[1] // h.edges[0]
        low = h.edges[0].bit_length() - 1
        expected = [0] * len(h.counts)
        for size in sizes:
            expected[(max(1, size).bit_length() - 1 - low) // (step.bit_length() - 1)] += 1
        assert h.counts == expected


def test_expiry_past_the_expire_limit_is_recommended_as_one_run(tmp_path: Path) -> None:
    table = create(
        tmp_path / "t", "paimon", "snapshot.time-retained=1 ms", "snapshot.num-retained.min=1",
        "snapshot.expire.limit=2",
    )  # fmt: skip
    for i, partition in enumerate("abc"):  # 6 snapshots, 2 files a partition: too few to compact
        write(table, 2, start=2 * i, partition=partition)
    health = open_table(str(tmp_path / "t")).health()
    assert health.operations == ["expire_snapshots"], health.to_json()["recommendations"]
    expiry = health.recommendations[0]
    assert health.snapshots["expirable"] == 2  # the plan of one run at the limit
    assert expiry.arguments == {"dry_run": False, "max_deletes": 5}
    assert (
        "5 snapshot(s) removed in one run" in expiry.expected and "snapshot.expire.limit 2" in expiry.expected
    )
    table.maintenance.expire_snapshots(**expiry.arguments)
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [] and after.snapshots["count"] == 1, after.to_json()["recommendations"]
