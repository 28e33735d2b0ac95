"""Build Paimon tables on the local filesystem for tests and benchmarks.

The builder writes real metadata through the core's codecs (schema JSON, Avro manifests and
manifest lists, snapshot JSON, LATEST) but no data files unless asked, and it performs no
conflict checks or manifest merging: it is a fixture factory, not the commit path.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from airflow_lakeformat.core.paimon import avro, binary_row
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry, ManifestFileMeta
from airflow_lakeformat.core.paimon.manifest_writer import manifest_file_meta
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.types import DataField, parse_type
from airflow_lakeformat.core.paimon.values import from_python


class TableBuilder:
    def __init__(
        self,
        root: Path | str,
        fields: Sequence[tuple[str, str]],
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: dict[str, str] | None = None,
        compression: str = "zstd",
    ) -> None:
        self.root = Path(root)
        self.compression = compression
        self.schema = TableSchema(
            id=0,
            fields=tuple(DataField(i, name, parse_type(t)) for i, (name, t) in enumerate(fields)),
            partition_keys=tuple(partition_keys),
            primary_keys=tuple(primary_keys),
            options=dict(options or {}),
            highest_field_id=len(fields) - 1,
            time_millis=int(time.time() * 1000),
        )
        for sub in ("schema", "snapshot", "manifest"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "schema" / "schema-0").write_bytes(self.schema.to_bytes())
        self.snapshots: list[Snapshot] = []
        self.base: list[ManifestFileMeta] = []
        self.commit_user = str(uuid.uuid4())
        self.paths = DataFilePaths(self.schema)

    def partition(self, *values: Any) -> bytes:
        types = self.schema.partition_types
        return binary_row.encode([from_python(v, t) for v, t in zip(values, types, strict=True)], types)

    def entry(
        self,
        partition: bytes | Sequence[Any] = (),
        bucket: int = 0,
        file_name: str | None = None,
        *,
        kind: FileKind = FileKind.ADD,
        row_count: int = 1,
        file_size: int = 1024,
        level: int = 0,
        total_buckets: int = -1,
        **file_fields: Any,
    ) -> ManifestEntry:
        partition_bytes = partition if isinstance(partition, bytes) else self.partition(*partition)
        meta = DataFileMeta.create(
            file_name or f"data-{uuid.uuid4()}-0.parquet", file_size, row_count, level=level, **file_fields
        )
        return ManifestEntry.create(kind, partition_bytes, bucket, total_buckets, meta)

    def delete_of(self, entry: ManifestEntry) -> ManifestEntry:
        return entry.to_delete()

    def write_manifest(self, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        name = f"manifest-{uuid.uuid4()}-0"
        data = avro.encode_manifest(entries, self.compression)
        (self.root / "manifest" / name).write_bytes(data)
        return manifest_file_meta(name, len(data), entries, self.schema.partition_types, self.schema.id)

    def write_manifest_list(self, metas: Iterable[ManifestFileMeta]) -> tuple[str, int]:
        name = f"manifest-list-{uuid.uuid4()}-0"
        data = avro.encode_manifest_list(list(metas), self.compression)
        (self.root / "manifest" / name).write_bytes(data)
        return name, len(data)

    def commit(
        self,
        entries: Sequence[ManifestEntry],
        kind: CommitKind = CommitKind.APPEND,
        manifests: int = 1,
        time_millis: int | None = None,
        write_data_files: bool = False,
    ) -> Snapshot:
        """Publish one snapshot whose delta holds ``entries`` split over ``manifests`` manifest files."""
        chunk = max(1, -(-len(entries) // manifests))
        delta = [self.write_manifest(entries[i : i + chunk]) for i in range(0, len(entries), chunk)]
        delta_rows = sum(e.file.row_count if e.kind is FileKind.ADD else -e.file.row_count for e in entries)
        snapshot = self.publish(delta, delta_rows, kind, time_millis)
        if write_data_files:
            for e in entries:
                if e.kind is FileKind.ADD:
                    path = self.root / self.paths.relative_path(e)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"x")
        return snapshot

    def publish(
        self,
        delta: list[ManifestFileMeta],
        delta_rows: int,
        kind: CommitKind = CommitKind.APPEND,
        time_millis: int | None = None,
    ) -> Snapshot:
        """Write the lists and ``snapshot-N`` for delta manifests already written (no checks, no merge)."""
        previous = self.snapshots[-1] if self.snapshots else None
        base_name, base_size = self.write_manifest_list(self.base)
        delta_name, delta_size = self.write_manifest_list(delta)
        snapshot = Snapshot(
            id=(previous.id + 1) if previous else 1,
            schema_id=self.schema.id,
            base_manifest_list=base_name,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_name,
            delta_manifest_list_size=delta_size,
            commit_user=self.commit_user,
            commit_identifier=BATCH_COMMIT_IDENTIFIER,
            commit_kind=kind,
            time_millis=time_millis if time_millis is not None else int(time.time() * 1000),
            total_record_count=((previous.total_record_count or 0) if previous else 0) + delta_rows,
            delta_record_count=delta_rows,
        )
        (self.root / "snapshot" / f"snapshot-{snapshot.id}").write_bytes(snapshot.to_bytes())
        (self.root / "snapshot" / "LATEST").write_text(str(snapshot.id))
        self.base = self.base + delta
        self.snapshots.append(snapshot)
        return snapshot

    def tag(self, name: str, snapshot: Snapshot) -> None:
        (self.root / "tag").mkdir(exist_ok=True)
        document = {
            **snapshot.to_json(),
            "tagCreateTime": [2026, 1, 1, 0, 0, 0, 0],
            "tagTimeRetained": 86400.0,
        }
        (self.root / "tag" / f"tag-{name}").write_text(json.dumps(document))

    def consumer(self, consumer_id: str, next_snapshot: int) -> None:
        (self.root / "consumer").mkdir(exist_ok=True)
        (self.root / "consumer" / f"consumer-{consumer_id}").write_text(
            json.dumps({"nextSnapshot": next_snapshot})
        )

    def set_mtime(self, relative: str, epoch_seconds: float) -> None:
        os.utime(self.root / relative, (epoch_seconds, epoch_seconds))
