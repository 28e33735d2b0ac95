"""Build Iceberg tables with pyiceberg itself, and compare our documents with pyiceberg's own answers.

These fixtures predate ``pyiceberg-core`` in the project's lock (issue 26): partitioned files with day/bucket
transforms enter through ``add_files`` (day: from the Parquet statistics) or as hand-built ``DataFile`` records
(bucket: the Python transform computes the value), which also exercises those paths.
"""

from __future__ import annotations

import datetime
import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import Table as PyIcebergTable
from pyiceberg.table import Transaction
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record

from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry

CONTENT_IDS = {"data": 0, "position-deletes": 1, "equality-deletes": 2}


def local_path(uri: str) -> str:
    return uri.removeprefix("file://")


def write_parquet(path: Path | str, table: pa.Table, row_group_size: int | None = None) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    pq.write_table(table, str(path), row_group_size=row_group_size)
    return str(path)


def data_file(
    pyt: PyIcebergTable,
    path: str,
    partition: Sequence[Any],
    *,
    split_offsets: list[int] | None = None,
    content: DataFileContent = DataFileContent.DATA,
    record_count: int | None = None,
    equality_ids: list[int] | None = None,
) -> DataFile:
    """A DataFile record for an existing local Parquet file in the table's current spec."""
    local = local_path(path)
    meta = pq.read_metadata(local)
    df = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=meta.num_rows if record_count is None else record_count,
        file_size_in_bytes=os.path.getsize(local),
        split_offsets=split_offsets,
        equality_ids=equality_ids,
    )
    df.spec_id = pyt.metadata.default_spec_id
    return df


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg 0.12 writes data manifests only; a delete manifest differs in ``content``."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_delete_files(table: IcebergTable, delete_files: Sequence[DataFile]) -> int:
    """Commit a v2 snapshot adding a delete manifest (position/equality deletes) on top of main."""
    pyt = table.table
    metadata = pyt.metadata
    parent = pyt.current_snapshot()
    assert parent is not None
    snapshot_id = metadata.new_snapshot_id()
    sequence_number = metadata.next_sequence_number()
    commit_uuid = uuid.uuid4()
    metadata_dir = f"{metadata.location}/metadata"
    manifest_path = f"{metadata_dir}/{commit_uuid}-m0.avro"
    with _DeleteManifestWriter(
        metadata.spec(), metadata.schema(), pyt.io.new_output(manifest_path), snapshot_id, "deflate"
    ) as writer:
        for f in delete_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=f
                )
            )
    manifests = [*parent.manifests(pyt.io), writer.to_manifest_file()]
    list_path = f"{metadata_dir}/snap-{snapshot_id}-0-{commit_uuid}.avro"
    with write_manifest_list(
        2, pyt.io.new_output(list_path), snapshot_id, parent.snapshot_id, sequence_number, "deflate"
    ) as list_writer:
        list_writer.add_manifests(manifests)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(Operation.DELETE),
        schema_id=metadata.current_schema_id,
    )
    updates = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(snapshot_id=snapshot_id, ref_name="main", type="branch"),
    )
    requirements = (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref="main"),)

    def stage(tx: Transaction) -> None:
        tx._apply(updates, requirements)

    commit_with_retry(table, stage, description="delete files")
    return snapshot_id


# -- comparison with pyiceberg ---------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def pyiceberg_files(pyt: PyIcebergTable, snapshot_id: int) -> list[tuple[Any, ...]]:
    """pyiceberg's ``inspect.files`` rows as comparable tuples."""
    rows = pyt.inspect.files(snapshot_id=snapshot_id).to_pylist()
    return sorted(
        (
            int(r["content"]),
            r["file_path"],
            str(r["file_format"]),
            r["spec_id"],
            {k: _plain(v) for k, v in (r["partition"] or {}).items()},
            r["record_count"],
            r["file_size_in_bytes"],
        )
        for r in rows
    )


def align_partitions(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """pyiceberg renders every file's partition with the union of all specs' fields (None where a file's
    spec lacks the field); ours keeps each file's own spec fields. Drop pyiceberg's extra keys, but only
    if they are None (anything else would be a real difference)."""
    own_keys = {row[1]: set(row[4]) for row in ours}
    aligned = []
    for row in theirs:
        keys = own_keys.get(row[1])
        partition = row[4]
        if keys is not None and all(partition[k] is None for k in set(partition) - keys):
            partition = {k: v for k, v in partition.items() if k in keys}
        aligned.append((*row[:4], partition, *row[5:]))
    return sorted(aligned)


def document_files(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            CONTENT_IDS[f["content"]],
            f["path"],
            f["fileFormat"],
            f["specId"],
            f["partition"],
            f["recordCount"],
            f["fileSize"],
        )
        for f in doc["files"]
    )


def pyiceberg_sequence_numbers(pyt: PyIcebergTable, snapshot_id: int) -> dict[str, tuple[int, int]]:
    """(data, file) sequence numbers of the live entries per path, from pyiceberg's manifest reader.

    (``inspect.entries`` would be the obvious source, but pyiceberg 0.12 crashes there on entries without
    ``column_sizes``: ``dict(None)`` in ``inspect.py``.)
    """
    snapshot = pyt.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    return {
        entry.data_file.file_path: (entry.sequence_number, entry.file_sequence_number)
        for manifest in snapshot.manifests(pyt.io)
        for entry in manifest.fetch_manifest_entry(pyt.io, discard_deleted=True)
    }


def pyiceberg_scan_paths(pyt: PyIcebergTable, snapshot_id: int) -> tuple[set[str], set[str]]:
    """(data paths, delete paths) of pyiceberg's scan planning at a snapshot."""
    tasks = list(pyt.scan(snapshot_id=snapshot_id).plan_files())
    return {t.file.file_path for t in tasks}, {d.file_path for t in tasks for d in t.delete_files}
