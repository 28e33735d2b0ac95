"""Typed summaries of a table and its snapshots: what ``lakeformat inspect`` and ``snapshots`` print."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import ManifestFileMeta
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table

# A live file smaller than target-file-size / SMALL_FILE_RATIO counts as small (Amoro's
# "fragment" ratio; Paimon has no single definition).
SMALL_FILE_RATIO = 8


@dataclass(frozen=True)
class SnapshotSummary:
    id: int
    schema_id: int
    commit_kind: str
    time_millis: int
    total_record_count: int | None
    delta_record_count: int | None
    commit_user: str
    commit_identifier: int
    base_manifest_count: int
    delta_manifest_count: int

    def to_json(self) -> dict[str, Any]:
        """Paimon's camelCase names, as the CLI contract prints them."""
        return {_camel(k): v for k, v in asdict(self).items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def summarize_snapshot(table: Table, snapshot: Snapshot) -> SnapshotSummary:
    base, delta = table.data_manifests(snapshot)
    return SnapshotSummary(
        id=snapshot.id,
        schema_id=snapshot.schema_id,
        commit_kind=snapshot.commit_kind.value,
        time_millis=snapshot.time_millis,
        total_record_count=snapshot.total_record_count,
        delta_record_count=snapshot.delta_record_count,
        commit_user=snapshot.commit_user,
        commit_identifier=snapshot.commit_identifier,
        base_manifest_count=len(base),
        delta_manifest_count=len(delta),
    )


def summarize_snapshots(table: Table) -> list[SnapshotSummary]:
    snapshots = table.snapshot_manager.snapshots()
    return table.parallel_map(lambda s: summarize_snapshot(table, s), snapshots)


def manifest_rows(table: Table, snapshot: Snapshot) -> list[dict[str, Any]]:
    """The data manifests of a snapshot, base first, as JSON-ready rows."""
    base, delta = table.data_manifests(snapshot)

    def row(meta: ManifestFileMeta, kind: str) -> dict[str, Any]:
        return {
            "fileName": meta.file_name,
            "list": kind,
            "fileSize": meta.file_size,
            "numAddedFiles": meta.num_added_files,
            "numDeletedFiles": meta.num_deleted_files,
            "schemaId": meta.schema_id,
            "minBucket": meta.min_bucket,
            "maxBucket": meta.max_bucket,
            "minLevel": meta.min_level,
            "maxLevel": meta.max_level,
        }

    return [row(m, "base") for m in base] + [row(m, "delta") for m in delta]


@dataclass(frozen=True)
class TableSummary:
    """Everything ``lakeformat inspect`` shows."""

    table: str
    schema_id: int
    schema_count: int
    fields: list[str]
    partition_keys: list[str]
    primary_keys: list[str]
    options: dict[str, str]
    earliest_snapshot: int | None
    latest_snapshot: int | None
    snapshot_count: int
    latest_commit_kind: str | None
    latest_time_millis: int | None
    tags: dict[str, int]
    consumers: dict[str, int]
    branches: list[str]
    live_file_count: int = 0
    live_file_bytes: int = 0
    live_row_count: int = 0
    manifest_count: int = 0
    manifest_bytes: int = 0
    small_file_threshold: int = 0
    small_file_count: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def small_file_share(self) -> float:
        return self.small_file_count / self.live_file_count if self.live_file_count else 0.0

    def to_json(self) -> dict[str, Any]:
        """Top-level keys in camelCase, like every other JSON document the CLI prints."""
        out = {_camel(k): v for k, v in asdict(self).items()}
        out["smallFileShare"] = self.small_file_share
        return out


def summarize_table(table: Table) -> TableSummary:
    """The summary; every snapshot file is parsed, since the summary reports the snapshot range (an
    unreadable one is CorruptMetadataError naming it, not a count that includes it)."""
    schema = table.schema
    manager = table.snapshot_manager
    latest = manager.latest_snapshot()
    history = table.read_snapshots(manager.list_snapshot_ids())
    threshold = schema.table_options.target_file_size // SMALL_FILE_RATIO
    files = live_entries(table, latest) if latest else []
    manifests = [m for group in table.data_manifests(latest) for m in group] if latest else []
    return TableSummary(
        table=table.uri,
        schema_id=schema.id,
        schema_count=len(table.schema_ids()),
        fields=[f"{f.name} {f.type.sql()}" for f in schema.fields],
        partition_keys=list(schema.partition_keys),
        primary_keys=list(schema.primary_keys),
        options=schema.table_options.effective(),
        earliest_snapshot=manager.earliest_snapshot_id(),
        latest_snapshot=latest.id if latest else None,
        snapshot_count=len(history),
        latest_commit_kind=latest.commit_kind.value if latest else None,
        latest_time_millis=latest.time_millis if latest else None,
        tags={name: tag.id for name, tag in manager.tags().items()},
        consumers={c.consumer_id: c.next_snapshot for c in manager.consumers()},
        branches=manager.branches(),
        live_file_count=len(files),
        live_file_bytes=sum(e.file.file_size for e in files),
        live_row_count=sum(e.file.row_count for e in files),
        manifest_count=len(manifests),
        manifest_bytes=sum(m.file_size for m in manifests),
        small_file_threshold=threshold,
        small_file_count=sum(1 for e in files if e.file.file_size < threshold),
    )
