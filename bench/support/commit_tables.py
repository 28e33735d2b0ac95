"""The commit benchmark's tables, cached under bench/.work/, and the raw fastavro floors it measures against.

Two layouts of append-only tables with the project's own codecs (``tests/support/tables.py``):
"compacted" (manifests rolled at the 8 MB target, one partial manifest and a tail of small per-commit
manifests: what Paimon's default merge policy converges to) and "fragmented" (100 files per manifest,
never merged). :func:`ensure_table` builds one once and returns its facts. The floors:
:func:`raw_commit_floor` (the I/O of a ``merge=False`` commit with plain fastavro/json/open) and
:func:`run_raw_compaction` (read every manifest into dicts, write every entry into ~8 MB zstd files).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.support.paimon_history import GENERATED_FIELDS as FIELDS

GENERATOR_VERSION = 1  # bump when the generated tables change, to invalidate cached tables
PARTITIONS = 100
TAIL_COMMITS = 20  # small per-commit manifests after the rolled ones in the "compacted" layout
TAIL_FILES = 10
FRAGMENT_FILES = 100  # files per manifest in the "fragmented" layout
APPEND_FILES = 10  # files per timed commit
COMPACTION_FILES = 100_000
COMPACTION_MANIFESTS = 1_000
RAW_BLOCK_RECORDS = 1000


class EntryFactory:
    """Realistic ADD entries (as bench_planning writes them): 10k-2M rows, 20-60 bytes a row."""

    def __init__(self, partition_types: Any, seed: int) -> None:
        from airflow_lakeformat.core.paimon import binary_row
        from airflow_lakeformat.core.paimon.values import from_python

        self.rng = random.Random(seed)
        day0 = datetime(2025, 1, 1)
        self.partitions = [
            binary_row.encode(
                [from_python((day0 + timedelta(days=i)).strftime("%Y-%m-%d"), partition_types[0])],
                partition_types,
            )
            for i in range(PARTITIONS)
        ]
        self.sequence = 0
        self.epoch_ms = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)

    def entries(self, count: int, partition_of: Callable[[int], int], commit_ms: int) -> Iterator[Any]:
        from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry

        rng = self.rng
        for j in range(count):
            rows = rng.randint(10_000, 2_000_000)
            meta = DataFileMeta.create(
                f"data-{uuid.UUID(int=rng.getrandbits(128), version=4)}-{j}.parquet",
                rows * rng.randint(20, 60),
                rows,
                min_sequence_number=self.sequence,
                max_sequence_number=self.sequence + rows - 1,
                creation_time=datetime.fromtimestamp((commit_ms - 5_000 + j) / 1000, tz=timezone.utc),
                file_source=FileSource.APPEND,
                value_stats_cols=[],
            )
            self.sequence += rows
            yield ManifestEntry.create(FileKind.ADD, self.partitions[partition_of(j)], 0, -1, meta)


def _new_builder(table_dir: Path) -> Any:
    from tests.support.tables import TableBuilder

    return TableBuilder(
        table_dir,
        FIELDS,
        partition_keys=["dt"],
        options={"bucket": "-1", "file.format": "parquet", "manifest.compression": "zstd"},
        compression="zstd",
    )


def _commit_written(builder: Any, delta: list[Any], delta_rows: int, time_millis: int) -> None:
    """TableBuilder.commit for manifests already written (here: by the rolling writer)."""
    builder.publish(delta, delta_rows, time_millis=time_millis)


def build_compacted(table_dir: Path, files: int, seed: int) -> None:
    """Rolled 8 MB manifests (one commit) + a tail of TAIL_COMMITS commits of TAIL_FILES files each."""
    from airflow_lakeformat.core.paimon.manifest_writer import RollingManifestWriter

    builder = _new_builder(table_dir)
    factory = EntryFactory(builder.schema.partition_types, seed)
    tail = min(TAIL_COMMITS, files // TAIL_FILES // 2)
    bulk = files - tail * TAIL_FILES
    options = builder.schema.table_options

    def store(name: str, data: bytes) -> None:
        (builder.root / "manifest" / name).write_bytes(data)

    writer = RollingManifestWriter(
        store,
        partition_types=builder.schema.partition_types,
        schema_id=builder.schema.id,
        target_file_size=options.manifest_target_file_size,
        compression="zstd",
    )
    rows = [0]

    def counted() -> Iterator[Any]:
        # Older files first, partition by partition, as a history merged in commit order looks.
        for entry in factory.entries(bulk, lambda j: j * PARTITIONS // bulk, factory.epoch_ms):
            rows[0] += entry.file.row_count
            yield entry

    metas = writer.write(counted())
    _commit_written(builder, metas, rows[0], factory.epoch_ms)
    for c in range(tail):
        ms = factory.epoch_ms + (c + 1) * 60_000
        entries = list(factory.entries(TAIL_FILES, lambda j: PARTITIONS - 1 - j % 3, ms))
        builder.commit(entries, manifests=1, time_millis=ms)


def build_fragmented(table_dir: Path, files: int, seed: int) -> None:
    """FRAGMENT_FILES files per manifest, 100 manifests per commit, no merging (like bench_planning)."""
    builder = _new_builder(table_dir)
    factory = EntryFactory(builder.schema.partition_types, seed)
    manifests = max(1, files // FRAGMENT_FILES)
    commits = max(1, manifests // 100)
    for c in range(commits):
        count = files * (c + 1) // commits - files * c // commits
        ms = factory.epoch_ms + c * 60_000
        start = c * PARTITIONS // commits
        entries = list(factory.entries(count, lambda j, s=start: (s + j % 3) % PARTITIONS, ms))
        builder.commit(entries, manifests=max(1, count // FRAGMENT_FILES), time_millis=ms)


def table_facts(table_dir: Path) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(table_dir))
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    base, delta = table.data_manifests(snapshot)
    metas = base + delta
    target = table.schema.table_options.manifest_target_file_size
    return {
        "snapshot_id": snapshot.id,
        "live_files": sum(m.num_added_files - m.num_deleted_files for m in metas),
        "manifests": len(metas),
        "base_manifests": len(base),
        "delta_manifests": len(delta),
        "manifests_at_target": sum(1 for m in metas if m.file_size >= target),
        "largest_manifest_bytes": max(m.file_size for m in metas),
        "manifest_bytes": sum(m.file_size for m in metas),
        "manifest_list_bytes": (snapshot.base_manifest_list_size or 0)
        + (snapshot.delta_manifest_list_size or 0),
        "manifest_target_file_size": target,
    }


def ensure_table(work_dir: Path, layout: str, files: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The cached table for (layout, files), built if missing; returns (table_dir, facts)."""
    key = f"commit-v{GENERATOR_VERSION}-{layout}-f{files}"
    root = work_dir / key
    table_dir = root / "warehouse" / "bench.db" / "t"
    marker = root / "params.json"
    if marker.exists() and not rebuild:
        return table_dir, json.loads(marker.read_text())["facts"]
    if root.exists():
        shutil.rmtree(root)
    print(f"building {layout} table with {files:,} files ...", file=sys.stderr)
    t0 = time.perf_counter()
    build = build_compacted if layout == "compacted" else build_fragmented
    build(table_dir, files, seed=20260101 + files)
    facts = table_facts(table_dir)
    facts["build_seconds"] = round(time.perf_counter() - t0, 2)
    assert facts["live_files"] == files, facts
    print(f"  built in {facts['build_seconds']} s: {facts}", file=sys.stderr)
    marker.write_text(json.dumps({"layout": layout, "files": files, "facts": facts}, indent=2))
    return table_dir, facts


def raw_commit_floor(table_dir: str, records: list[dict[str, Any]], tag: str) -> int:
    """The same I/O as a merge=False commit with plain fastavro, json and open(), no protocol logic.

    Reads the LATEST hint, the snapshot JSON and both manifest lists into dicts, then writes the new
    manifest (``records``), the new base list (every previous row), a one-row delta list and a
    snapshot JSON, under ``raw-*`` names that no reader looks at. Returns the base list's rows.
    """
    import fastavro

    from airflow_lakeformat.core.paimon import avro

    manifest_dir = os.path.join(table_dir, "manifest")

    def read(name: str) -> list[dict[str, Any]]:
        with open(os.path.join(manifest_dir, name), "rb") as handle:
            data = handle.read()
        return list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]

    def write(name: str, schema: dict[str, Any], rows: list[dict[str, Any]]) -> int:
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(schema), rows, codec="zstandard")
        with open(os.path.join(manifest_dir, name), "wb") as handle:
            handle.write(buffer.getvalue())
        return buffer.tell()

    with open(os.path.join(table_dir, "snapshot", "LATEST"), encoding="ascii") as handle:
        latest = handle.read().strip()
    with open(os.path.join(table_dir, "snapshot", f"snapshot-{latest}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    rows = read(snapshot["baseManifestList"]) + read(snapshot["deltaManifestList"])
    size = write(f"raw-manifest-{tag}", avro.manifest_entry_schema(), records)
    delta_row = {**rows[-1], "_FILE_NAME": f"raw-manifest-{tag}", "_FILE_SIZE": size}
    write(f"raw-list-base-{tag}", avro.manifest_file_meta_schema(), rows)
    write(f"raw-list-delta-{tag}", avro.manifest_file_meta_schema(), [delta_row])
    snapshot.update(id=snapshot["id"] + 1, baseManifestList=f"raw-list-base-{tag}")
    with open(os.path.join(table_dir, "snapshot", f"raw-snapshot-{tag}"), "w", encoding="utf-8") as handle:
        json.dump(snapshot, handle)
    return len(rows)


def run_raw_compaction(table_dir: str, out_dir: str, target: int) -> dict[str, int]:
    """Read every manifest of the latest snapshot into dicts; write all entries to ~target-byte zstd files."""
    import fastavro
    from fastavro import write as fastavro_write

    from airflow_lakeformat.core.paimon import avro

    def read(path: str) -> list[dict[str, Any]]:
        with open(path, "rb") as handle:
            data = handle.read()
        return list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]

    manifest_dir = os.path.join(table_dir, "manifest")
    with open(os.path.join(table_dir, "snapshot", "LATEST"), encoding="ascii") as handle:
        latest = handle.read().strip()
    with open(os.path.join(table_dir, "snapshot", f"snapshot-{latest}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    metas = read(os.path.join(manifest_dir, snapshot["baseManifestList"]))
    metas += read(os.path.join(manifest_dir, snapshot["deltaManifestList"]))

    parsed = fastavro.parse_schema(avro.manifest_entry_schema())
    os.makedirs(out_dir, exist_ok=True)
    files = records = 0
    buffer = io.BytesIO()
    writer = fastavro_write.Writer(buffer, parsed, codec="zstandard", sync_interval=1 << 62)
    pending = 0

    def close() -> None:
        nonlocal buffer, writer, files, pending
        writer.flush()
        with open(os.path.join(out_dir, f"raw-manifest-{files}"), "wb") as handle:
            handle.write(buffer.getvalue())
        files += 1
        pending = 0
        buffer = io.BytesIO()
        writer = fastavro_write.Writer(buffer, parsed, codec="zstandard", sync_interval=1 << 62)

    for meta in metas:
        for record in read(os.path.join(manifest_dir, meta["_FILE_NAME"])):
            writer.write(record)
            records += 1
            pending += 1
            if pending % RAW_BLOCK_RECORDS == 0:
                writer.flush()
                if buffer.tell() >= target:
                    close()
    if pending:
        close()
    return {"manifests_read": len(metas), "entries_written": records, "files_written": files}


def append_batches(table: Any, count: int, seed: int) -> list[list[Any]]:
    """``count`` batches of the timed commits' new ADD entries, far above the generated history."""
    factory = EntryFactory(table.schema.partition_types, seed)
    factory.sequence = 10**15  # far above the generated history
    ms = factory.epoch_ms + 10**8
    return [
        list(factory.entries(APPEND_FILES, lambda j: PARTITIONS - 1 - j % 3, ms + i * 1000))
        for i in range(count)
    ]
