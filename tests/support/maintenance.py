"""Tables with a history worth expiring, storage-neutral tree snapshots, and integrity checks."""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.references import snapshot_references
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table
from tests.support.tables import TableBuilder

DAY_MS = 86_400_000
OLD = time.time() - 10 * 86400  # mtime for files that every cutoff considers old


@dataclass
class History:
    builder: TableBuilder
    entries: dict[str, ManifestEntry] = field(default_factory=dict)


def build_history(root: Path, snapshots: int = 8, start_millis: int | None = None) -> History:
    """A partitioned table whose snapshots add, compact (DELETE + ADD), upgrade (same-name re-ADD)
    and overwrite files, one snapshot per day ending ten days ago, with every data file on disk."""
    builder = TableBuilder(root, [("dt", "STRING"), ("v", "BIGINT")], partition_keys=["dt"])
    history = History(builder)
    start = start_millis if start_millis is not None else int(time.time() * 1000) - (snapshots + 10) * DAY_MS
    live: list[ManifestEntry] = []
    for i in range(snapshots):
        when = start + i * DAY_MS
        part = f"d{i % 3}"
        added = [builder.entry([part], bucket=0) for _ in range(2)]
        entries = list(added)
        kind = CommitKind.APPEND
        if i % 3 == 2 and live:
            # compaction: two live files replaced by one, and one file upgraded in place
            victims, live = live[:2], live[2:]
            entries += [v.to_delete() for v in victims]
            upgraded_from = live.pop(0) if live else None
            if upgraded_from is not None:
                up = builder.entry(
                    upgraded_from.partition, bucket=0, file_name=upgraded_from.file.file_name, level=1
                )
                entries += [upgraded_from.to_delete(), up]
                added.append(up)
            kind = CommitKind.COMPACT
        builder.commit(entries, kind, time_millis=when, write_data_files=True)
        live += added
        for e in added:
            history.entries[e.file.file_name] = e
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))
    return history


def tree(table: Table) -> dict[str, int]:
    """Every file under the table root with its size (relative paths), on any filesystem."""
    found = table.io.fs.find(table.root, detail=True)
    root = table.root.rstrip("/") + "/"
    return {
        path[len(root) :]: int(info.get("size") or 0)
        for path, info in found.items()
        if info.get("type") != "directory" and path.startswith(root)
    }


def referenced_files(table: Table, snapshot: Snapshot) -> set[str]:
    """Paths (relative to the root) of every file a snapshot or tag needs: metadata and live data."""
    refs = snapshot_references(table, snapshot)
    needed = {posixpath.join("manifest", n) for n in refs.manifest_file_names()}
    if refs.statistics:
        needed.add(posixpath.join("statistics", refs.statistics))
    paths = DataFilePaths(table.schema)
    needed |= {paths.relative_path(e) for e in live_entries(table, snapshot)}
    return needed


def assert_intact(table: Table, from_id: int | None = None) -> int:
    """Every existing snapshot from ``from_id`` (default: EARLIEST) on, and every tag, has all its
    files. Returns how many snapshots and tags were checked."""
    manager = table.snapshot_manager
    present = set(tree(table))
    checked = 0
    first = from_id if from_id is not None else manager.earliest_snapshot_id()
    owners = [manager.snapshot(i) for i in manager.list_snapshot_ids() if first is not None and i >= first]
    owners += list(manager.tags().values())
    for owner in owners:
        missing = referenced_files(table, owner) - present
        assert not missing, f"snapshot/tag {owner.id} lost {sorted(missing)[:5]}"
        checked += 1
    return checked


# Unreferenced files of every kind orphan cleanup removes, in every location Paimon writes to.
OLD_ORPHANS = [
    "manifest/manifest-0000-orphan-0",
    "manifest/manifest-list-0000-orphan-1",
    "index/index-0000-orphan-0",
    "statistics/stat-0000-orphan-0",
    "dt=d0/bucket-0/data-0000-orphan-0.parquet",
    "dt=d1/bucket-0/data-0000-orphan-1.parquet",
    "dt=d2/bucket-0/data-0000-orphan-2.parquet.index",
    "snapshot/.snapshot-99.1234.tmp",
    "snapshot/snapshot-12abcd.tmp",
]


def plant_files(root: Path, names: list[str], mtime: float | None) -> None:
    """Write each relative name under ``root``, aged to ``mtime`` when given."""
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"orphan")
        if mtime is not None:
            os.utime(path, (mtime, mtime))
