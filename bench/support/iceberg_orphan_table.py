"""The Iceberg orphan benchmark's table (``bench_iceberg_orphans_scale.py``), built once and cached.

A Hadoop-layout format-v2 table partitioned by ``part`` (50 values), built by :func:`build_table` with
our own commit path: ``commits`` fast appends, each one new manifest of ``per_file`` empty data files
(touched on disk, mtime = commit time) and a manifest list of every manifest so far, committed
``per_commit`` snapshots per metadata commit; metadata aged to 30 days. :func:`plant` adds old orphans
in data and metadata directories, a few fresh orphans and old hidden files. :func:`ensure_table` caches
the planted table by its parameters with its tree digest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.support.paimon_history import DAY, tree_digest

GENERATOR_VERSION = 1
PARTITIONS = 50


def local_path(location: str) -> str:
    return location[len("file:") :] if location.startswith("file:") else location


GENERATOR_VERSION = 1


PARTITIONS = 50


def _touch(path: str, mtime: float) -> None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.utime(fd, (mtime, mtime))
    finally:
        os.close(fd)


class BlockBatcher:
    """Makes pyiceberg's manifest writer write Avro blocks of ``size`` entries (as Java's writer does,
    about 64 KB each) instead of one block per entry (pyiceberg 0.12)."""

    def __init__(self, avro_file: Any, size: int) -> None:
        self.write = avro_file.write_block
        self.size = size
        self.buffer: list[Any] = []
        avro_file.write_block = self.add

    def add(self, objects: list[Any]) -> None:
        self.buffer.extend(objects)
        if len(self.buffer) >= self.size:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.write(self.buffer)
            self.buffer = []


def plant(table_dir: Path, count: int, seed: int) -> dict[str, Any]:
    """Old orphans (``count``), a few fresh orphans and old hidden files; returns their paths."""
    rng = random.Random(seed)
    old = time.time() - 10 * DAY
    root = str(table_dir)

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    in_metadata = max(3, count // 200)
    in_new_partition = max(1, count // 200)
    in_data = count - in_metadata - in_new_partition
    kinds: dict[str, list[str]] = {
        "data-file": [
            f"{root}/data/part={rng.randrange(PARTITIONS)}/{rng.randrange(10**5):05d}-0-{uid()}.parquet"
            for _ in range(in_data)
        ]
        + [f"{root}/data/part=new-{i % 3}/00000-{i}-{uid()}.parquet" for i in range(in_new_partition)],
        "manifest": [f"{root}/metadata/{uid()}-m{i % 2}.avro" for i in range(in_metadata // 3)],
        "manifest-list": [
            f"{root}/metadata/snap-{rng.getrandbits(62)}-1-{uid()}.avro" for _ in range(in_metadata // 3)
        ],
    }
    kinds["metadata-json"] = [
        f"{root}/metadata/{i:05d}-{uid()}.metadata.json" for i in range(in_metadata - 2 * (in_metadata // 3))
    ]
    for paths in kinds.values():
        for path in paths:
            _touch(path, old)
    fresh = [f"{root}/data/part={i}/fresh-{uid()}.parquet" for i in range(10)]
    fresh += [f"{root}/metadata/{uid()}-m0.avro"]
    hidden = [f"{root}/data/part={i}/_SUCCESS" for i in range(5)]
    hidden += [f"{root}/data/part={i}/.{uid()}.parquet.crc" for i in range(5)]
    hidden += [f"{root}/data/_temporary/0/{uid()}.parquet"]
    for path in fresh:
        _touch(path, time.time())
    for path in hidden:
        _touch(path, old)
    return {"old": kinds, "fresh": fresh, "hidden": hidden}


def ensure_table(args: argparse.Namespace) -> tuple[Path, Path, dict[str, Any]]:
    """The cached table of these parameters (built and planted if missing): (root, table dir, facts)."""
    key = f"iceberg-orphans-{args.shape}-v{GENERATOR_VERSION}-c{args.commits}-f{args.files_per_commit}"
    key += f"-n{args.files}" if args.files else f"-o{args.orphans}"
    key += f"-b{args.block_entries}" if args.block_entries > 1 else ""
    root = Path(args.work_dir).resolve() / key
    table_dir = root / "warehouse" / "db" / "t"
    marker = root / "params.json"
    if marker.exists() and not args.rebuild:
        print(f"using cached table {table_dir}", file=sys.stderr)
        return root, table_dir, json.loads(marker.read_text())
    if root.exists():
        shutil.rmtree(root)
    table_dir.parent.mkdir(parents=True)
    print(f"building {table_dir} ...", file=sys.stderr)
    t0 = time.perf_counter()
    facts = build_table(
        table_dir, args.commits, args.files_per_commit, args.snapshots_per_commit, args.block_entries
    )
    built = time.perf_counter() - t0
    pristine, _ = tree_digest(str(table_dir))
    orphans = args.orphans if args.orphans is not None else max(100, args.files - pristine)
    t1 = time.perf_counter()
    planting = plant(table_dir, orphans, seed=20261124)
    facts.update(
        build_seconds=round(built, 1),
        plant_seconds=round(time.perf_counter() - t1, 1),
        pristine_files=pristine,
    )
    count, digest = tree_digest(str(table_dir))
    facts.update(files_in_tree=count, tree_digest=digest)
    (root / "planted.json").write_text(json.dumps(planting))
    marker.write_text(json.dumps(facts, indent=2))
    print(f"built in {built:.1f} s: {facts}", file=sys.stderr)
    return root, table_dir, facts


class _FastAppender:
    """Commits fast appends with our commit path, ``per_commit`` snapshots per metadata commit: each
    snapshot writes one new manifest of empty data files and a manifest list of every manifest so far."""

    def __init__(self, table_dir: Path, block_entries: int) -> None:
        from pyiceberg.partitioning import PartitionField, PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.types import LongType, NestedField, StringType

        from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
        from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog

        self.schema = Schema(
            NestedField(1, "part", StringType(), required=False),
            NestedField(2, "id", LongType(), required=False),
        )
        self.spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "part"))
        properties = {"format-version": "2", "write.metadata.previous-versions-max": "100000"}
        HadoopLayoutCatalog().create_table(
            str(table_dir), schema=self.schema, partition_spec=self.spec, properties=properties
        )
        self.table = open_path_table(str(table_dir))
        self.location = self.table.metadata.location
        self.block_entries = block_entries
        self.manifests: list[Any] = []  # newest first, as a fast append writes them
        self.pending: list[Any] = []
        self.parent: int | None = None
        self.timings = {"manifests": 0.0, "lists": 0.0, "data_files": 0.0, "commits": 0.0}

    def _manifest(self, c: int, snapshot_id: int, per_file: int, now: float) -> Any:
        """Commit ``c``'s manifest of ``per_file`` empty data files (touched on disk with mtime ``now``)."""
        from pyiceberg.manifest import (
            DataFile,
            DataFileContent,
            FileFormat,
            ManifestEntry,
            ManifestEntryStatus,
            write_manifest,
        )
        from pyiceberg.typedef import Record

        io = self.table.table.io
        path = f"{self.location}/metadata/{uuid.uuid4()}-m0.avro"
        with write_manifest(2, self.spec, self.schema, io.new_output(path), snapshot_id, "deflate") as writer:
            batcher = BlockBatcher(writer._writer, self.block_entries) if self.block_entries > 1 else None
            for f in range(per_file):
                part = (c * per_file + f) % PARTITIONS
                data_file = DataFile.from_args(
                    content=DataFileContent.DATA,
                    file_path=f"{self.location}/data/part={part}/{c:05d}-{f:05d}-{uuid.uuid4()}.parquet",
                    file_format=FileFormat.PARQUET,
                    partition=Record(str(part)),
                    record_count=1,
                    file_size_in_bytes=0,
                )
                data_file.spec_id = 0
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file
                    )
                )
                t1 = time.perf_counter()
                _touch(local_path(data_file.file_path), now)
                self.timings["data_files"] += time.perf_counter() - t1
            if batcher is not None:
                batcher.flush()
        return writer.to_manifest_file()

    def append(self, c: int, per_file: int, now: float) -> None:
        """Snapshot ``c``: its manifest, its manifest list, the snapshot (committed by :meth:`flush`)."""
        from pyiceberg.manifest import write_manifest_list
        from pyiceberg.table.snapshots import Operation, Snapshot, Summary

        snapshot_id = 10_000_000 + c
        t0 = time.perf_counter()
        self.manifests.insert(0, self._manifest(c, snapshot_id, per_file, now))
        t1 = time.perf_counter()
        self.timings["manifests"] += t1 - t0
        list_path = f"{self.location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
        output = self.table.table.io.new_output(list_path)
        with write_manifest_list(2, output, snapshot_id, self.parent, c + 1, "deflate") as lw:
            lw.add_manifests(self.manifests)
        self.timings["lists"] += time.perf_counter() - t1
        self.pending.append(
            Snapshot(  # type: ignore[call-arg]
                snapshot_id=snapshot_id,
                parent_snapshot_id=self.parent,
                sequence_number=c + 1,
                timestamp_ms=int(now * 1000),
                manifest_list=list_path,
                summary=Summary(Operation.APPEND, **{"added-data-files": str(per_file)}),
                schema_id=0,
            )
        )
        self.parent = snapshot_id

    def flush(self) -> None:
        """Commit the pending snapshots in one metadata commit (main moves to the last)."""
        from pyiceberg.table.refs import SnapshotRefType
        from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

        from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry

        batch, head = self.pending, self.pending[-1].snapshot_id
        expected_parent = batch[0].parent_snapshot_id

        def stage(tx: Any) -> None:
            updates: list[Any] = [AddSnapshotUpdate(snapshot=snap) for snap in batch]
            updates.append(
                SetSnapshotRefUpdate(snapshot_id=head, ref_name="main", type=SnapshotRefType.BRANCH)  # type: ignore[call-arg]
            )
            tx._apply(tuple(updates), (AssertRefSnapshotId(snapshot_id=expected_parent, ref="main"),))  # type: ignore[call-arg]

        t0 = time.perf_counter()
        commit_with_retry(self.table, stage)
        self.timings["commits"] += time.perf_counter() - t0
        self.pending = []


def build_table(
    table_dir: Path, commits: int, per_file: int, per_commit: int, block_entries: int = 1
) -> dict[str, Any]:
    """Create the table and commit ``commits`` fast appends of ``per_file`` empty data files each
    (``block_entries`` manifest entries per Avro block; 1 is what pyiceberg writes)."""
    appender = _FastAppender(table_dir, block_entries)
    start = time.time() - 30 * DAY
    step = 60.0
    for c in range(commits):
        appender.append(c, per_file, start + c * step)
        if len(appender.pending) >= per_commit:
            appender.flush()
    if appender.pending:
        appender.flush()
    aged = 0
    with os.scandir(table_dir / "metadata") as entries:
        for entry in entries:
            os.utime(entry.path, (start, start))
            aged += 1
    return {
        "commits": commits,
        "snapshots_per_metadata_commit": per_commit,
        "manifest_entries_per_avro_block": block_entries,
        "referenced_data_files": commits * per_file,
        "manifests": len(appender.manifests),
        "manifest_list_rows": commits * (commits + 1) // 2,
        "metadata_files": aged,
        "build_timings": {k: round(v, 1) for k, v in appender.timings.items()},
    }
