"""A Paimon table with a realistic history, written through the core's own commit path, and tree helpers.

:class:`HistoryWriter` commits with ``Committer`` (the default manifest merge policy) under an injected
clock: bulk loads, appends into a moving window of partitions, compactions that DELETE what the appends
wrote and ADD one file per bucket, overwrites. Data files exist on disk (empty, mtime = commit time).
Shared by the orphan-cleanup and expiry benchmarks; ``tree_digest`` checks that a cached table is
still pristine.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

PARTITIONS = 100
BUCKETS = 4
DAY = 86_400
FIELDS = [
    {"name": "dt", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "ts", "type": "TIMESTAMP(3)"},
]
# The same schema as (name, type) pairs: the tables generated with ``tests/support/tables.py`` (planning, commit).
GENERATED_FIELDS = [(f["name"], f["type"]) for f in FIELDS]


class HistoryWriter:
    """Commits a realistic history with ``Committer`` (default merge policy) and writes empty data files.

    Time is injected: every commit happens ``step`` seconds after the previous one, starting at
    ``start`` (epoch seconds); data files get their commit time as mtime. ``track_live`` keeps every
    live entry by partition (needed for overwrites); otherwise only the files appended since the
    last compaction of each partition are kept (what compactions rewrite).
    """

    def __init__(self, table_dir: Path, *, seed: int, start: float, step: float, track_live: bool) -> None:
        from airflow_lakeformat.core.paimon import binary_row
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
        from airflow_lakeformat.core.paimon.paths import DataFilePaths
        from airflow_lakeformat.core.paimon.values import from_python

        table_dir.mkdir(parents=True, exist_ok=True)
        schema = schema_from_fields(
            FIELDS,
            partition_keys=["dt"],
            options={"bucket": str(BUCKETS), "bucket-key": "id", "file.format": "parquet"},
            time_millis=int(start * 1000),
        )
        self.root = table_dir
        self.table = create_table(str(table_dir), schema)
        self.now = start
        self.step = step
        self.committer = Committer(self.table, "bench-history", clock=lambda: self.now)
        self.paths = DataFilePaths(self.table.schema)
        types = self.table.schema.partition_types
        day0 = datetime(2025, 1, 1)
        self.partitions = [
            binary_row.encode([from_python((day0 + timedelta(days=i)).strftime("%Y-%m-%d"), types[0])], types)
            for i in range(PARTITIONS)
        ]
        self.rng = random.Random(seed)
        self.sequence = 0
        self.track_live = track_live
        self.live: dict[int, dict[str, Any]] = {}  # partition -> file name -> live entry (track_live only)
        self.pending: dict[int, list[Any]] = {}  # partition -> files appended since its last compaction
        self.deleted_by_snapshot: dict[int, list[str]] = {}  # snapshot id -> relative paths it DELETEd
        self.data_files = 0
        self.merges: list[dict[str, Any]] = []
        self._partition_index = {p: i for i, p in enumerate(self.partitions)}

    def _entry(self, partition: int, bucket: int, source: Any) -> Any:
        from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry

        rng = self.rng
        rows = rng.randint(10_000, 2_000_000)
        meta = DataFileMeta.create(
            f"data-{uuid.UUID(int=rng.getrandbits(128), version=4)}-0.parquet",
            rows * rng.randint(20, 60),
            rows,
            min_sequence_number=self.sequence,
            max_sequence_number=self.sequence + rows - 1,
            creation_time=datetime.fromtimestamp(self.now, tz=timezone.utc),
            file_source=source,
            value_stats_cols=[],
        )
        self.sequence += rows
        return ManifestEntry.create(FileKind.ADD, self.partitions[partition], bucket, BUCKETS, meta)

    def new_files(self, groups: Sequence[tuple[int, int]], compacted: bool = False) -> list[Any]:
        """One ADD entry per (partition, bucket) in ``groups``, its (empty) data file written."""
        from airflow_lakeformat.core.paimon.manifest import FileSource

        source = FileSource.COMPACT if compacted else FileSource.APPEND
        entries = [self._entry(p, b, source) for p, b in groups]
        stamp = (self.now, self.now)
        for entry in entries:
            path = os.path.join(self.root, self.paths.relative_path(entry))
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                os.utime(fd, stamp)
            finally:
                os.close(fd)
        self.data_files += len(entries)
        if self.track_live:
            for entry in entries:
                self.live.setdefault(self._partition_index[entry.partition], {})[entry.file.file_name] = entry
        return entries

    def _commit(self, entries: list[Any], kind: Any) -> int:
        from airflow_lakeformat.core.paimon.manifest import FileKind

        deletes = [e for e in entries if e.kind is FileKind.DELETE]
        started = time.perf_counter()
        # The benchmark knows its DELETEs match live files; the conflict check would re-read the table.
        result = self.committer.commit(entries, kind=kind, check_conflicts=False if deletes else None)
        if result.merge != "none":
            self.merges.append(
                {
                    "snapshot": result.snapshot.id,
                    "mode": result.merge,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
        if deletes:
            self.deleted_by_snapshot[result.snapshot.id] = [self.paths.relative_path(e) for e in deletes]
            if self.track_live:
                for entry in deletes:
                    del self.live[self._partition_index[entry.partition]][entry.file.file_name]
        self.now += self.step
        return int(result.snapshot.id)

    def append(self, groups: Sequence[tuple[int, int]]) -> int:
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        entries = self.new_files(groups)
        for entry in entries:
            self.pending.setdefault(self._partition_index[entry.partition], []).append(entry)
        return self._commit(entries, CommitKind.APPEND)

    def compact(self, partition: int | None = None) -> int:
        """Rewrite the files appended to a partition since its last compaction into one file per bucket
        (default: the partition with the most such files)."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        if partition is None:
            partition = max(self.pending, key=lambda p: len(self.pending[p]), default=0)
        victims = self.pending.pop(partition, [])
        added = self.new_files([(partition, b) for b in range(BUCKETS)], compacted=True)
        return self._commit([*(v.to_delete() for v in victims), *added], CommitKind.COMPACT)

    def overwrite(self, partition: int) -> int:
        """INSERT OVERWRITE of one partition: DELETE every live file, ADD as many new ones."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        if not self.track_live:
            raise ValueError("overwrite needs track_live")
        victims = list(self.live.get(partition, {}).values())
        self.pending.pop(partition, None)
        added = self.new_files([(partition, i % BUCKETS) for i in range(max(BUCKETS, len(victims)))])
        return self._commit([*(v.to_delete() for v in victims), *added], CommitKind.OVERWRITE)

    def bulk(self, count: int) -> int:
        """An initial load of ``count`` files over every partition and bucket, in one snapshot."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        groups = [(i % PARTITIONS, (i // PARTITIONS) % BUCKETS) for i in range(count)]
        return self._commit(self.new_files(groups), CommitKind.APPEND)

    def live_count(self) -> int:
        return sum(len(files) for files in self.live.values())


def age_metadata(table_dir: Path, when: float) -> int:
    """Set the mtime of every metadata file (schema, snapshot, manifest directories) to ``when``."""
    count = 0
    for sub in ("schema", "snapshot", "manifest"):
        with os.scandir(table_dir / sub) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    os.utime(entry.path, (when, when))
                    count += 1
    return count


def walk_files(root: str) -> Iterator[os.DirEntry[str]]:
    """Every regular file under ``root`` (os.scandir, depth first, no symlinks followed)."""
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    yield entry


def tree_digest(root: str, exclude: set[str] | None = None) -> tuple[int, str]:
    """(file count, sha256 of the sorted relative paths) of the tree, without ``exclude`` (full paths)."""
    prefix = len(root.rstrip("/")) + 1
    exclude = exclude or set()
    paths = sorted(e.path[prefix:] for e in walk_files(root) if e.path not in exclude)
    return len(paths), hashlib.sha256("\n".join(paths).encode()).hexdigest()


def distinct_manifests(table: Any) -> tuple[list[Any], int]:
    """Every distinct manifest any snapshot references (metas), and the manifest lists read."""
    metas: dict[str, Any] = {}
    lists: set[str] = set()
    for snapshot in table.snapshot_manager.snapshots():
        for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            lists.add(name)
            for meta in table.manifest_list(name):
                metas.setdefault(meta.file_name, meta)
    return list(metas.values()), len(lists)
