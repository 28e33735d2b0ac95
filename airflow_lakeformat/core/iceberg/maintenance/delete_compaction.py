"""Compacting Iceberg position-delete files: Java's ``rewrite_position_delete_files``, as ``compact-deletes``.

Follows ``RewritePositionDeleteFilesSparkAction`` of Java Iceberg 1.10.2 (format v2; v3 is refused upstream):

1. **Plan** (``BinPackRewritePositionDeletePlanner``): the live position-delete files of ``main``'s head, per spec
   and partition, selected by size only (outside [75%, 180%] of ``write.delete.target-file-size-bytes``, 64 MiB)
   and bin-packed, groups kept with enough files (``min-input-files``, 5) or content, as the data planner does;
   ``rewrite-all`` takes every file. Delete files in a manifest that holds an entry with ``referenced_data_file``
   set are left alone (pyiceberg 0.12's v2 reader drops that field, so their manifest cannot be rewritten).
2. **Rewrite** each group: read its ``(file_path, pos)`` records, keep those whose data file is still live (the
   others are dangling), sort by path and position, and write one Parquet file of the group's spec and
   partition (a group whose records are all dangling writes nothing). Equal ``file_path`` bounds make a file
   file-scoped, as Java's writer leaves them.
3. **Commit** a ``replace`` snapshot (``write/replace.py``): the old delete files DELETED, the new ones ADDED with
   the **largest data sequence number of the group's inputs** (apache/iceberg #7651: a smaller one would let a
   delete miss rows it used to remove, a larger one would make it reach data added after it). Each attempt checks
   that every input is still live ("Missing required files to delete"); nothing else can conflict, since no data
   file changes.

A group's records are held in memory while it is sorted (delete records are two narrow columns; a group is at
most ``max-file-group-size-bytes`` of them).

Example:
    >>> compact_deletes(table, {"rewrite-all": "true"}).summary()  # doctest: +SKIP
    'db.t: position-delete compaction rewrote 12 delete files into 3, dropped 40 dangling records; committed ...'
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import ManifestContent

from airflow_lakeformat.core.errors import CommitConflictError, CommitStateUnknownError, UsageError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import check_rewritable
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import (
    KNOWN_OPTIONS,
    TARGET_FILE_SIZE_PROPERTY,
    CompactionOptions,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import (
    CompactionCandidate,
    FileGroup,
    plan_file_groups,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import discard_written
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path
from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA, CONTENT_POSITION_DELETES
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.iceberg.write.manifest_cache import manifest_cache
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore
from airflow_lakeformat.core.iceberg.write.replace import (
    replace_summary,
    rewrite_manifests_removing,
    stage_replace,
    write_added_manifest,
)
from airflow_lakeformat.core.maintenance.results import human_bytes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Transaction

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

DELETE_TARGET_PROPERTY = "write.delete.target-file-size-bytes"
DEFAULT_DELETE_TARGET = 67_108_864  # 64 MiB, TableProperties.DELETE_TARGET_FILE_SIZE_BYTES_DEFAULT
# The options Java's position-delete action accepts: the data action's, without the delete thresholds,
# max-files-to-rewrite and the data commit's own settings.
DELETE_OPTIONS = KNOWN_OPTIONS - {
    "delete-file-threshold",
    "delete-ratio-threshold",
    "max-files-to-rewrite",
    "use-starting-sequence-number",
    "remove-dangling-deletes",
}


@dataclass(frozen=True)
class DeleteCompactionPlan:
    """Which position-delete files a compaction rewrites, against one snapshot."""

    table: str
    snapshot_id: int | None
    options: CompactionOptions
    live_delete_files: int
    groups: tuple[FileGroup, ...]
    skipped: int = 0  # delete files left alone (their manifest holds referenced_data_file entries)

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(g.files) for g in self.groups)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "compact-deletes",
            "format": "iceberg",
            "table": self.table,
            "dryRun": True,
            "snapshotId": self.snapshot_id,
            "liveDeleteFiles": self.live_delete_files,
            "deleteFilesToRewrite": self.files_to_rewrite,
            "bytesToRewrite": sum(g.input_bytes for g in self.groups),
            "skipped": self.skipped,
            "options": {k: v for k, v in self.options.to_json().items() if k in DELETE_OPTIONS},
            "groups": [g.to_json() for g in self.groups],
        }

    def summary(self) -> str:
        if not self.groups:
            return f"{self.table}: position-delete compaction: nothing to rewrite ({self.live_delete_files} files)"
        return (
            f"{self.table}: position-delete compaction would rewrite {self.files_to_rewrite} delete files "
            f"({human_bytes(sum(g.input_bytes for g in self.groups))}) in {len(self.groups)} groups"
        )

    def __repr__(self) -> str:
        return f"<DeleteCompactionPlan {self.summary()}>"


@dataclass(frozen=True)
class DeleteCompactionResult:
    """The outcome of :func:`compact_deletes`."""

    plan: DeleteCompactionPlan
    dry_run: bool
    snapshot_id: int | None = None
    files_added: int = 0
    bytes_added: int = 0
    dangling_records: int = 0
    duration_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        document = self.plan.to_json()
        document.update(
            {
                "dryRun": self.dry_run,
                "snapshotBefore": self.plan.snapshot_id,
                "snapshotId": self.snapshot_id,
                "deleteFilesAdded": self.files_added,
                "bytesAdded": self.bytes_added,
                "danglingRecordsDropped": self.dangling_records,
                "durationSeconds": round(self.duration_seconds, 3),
            }
        )
        return document

    def summary(self) -> str:
        if self.dry_run or self.snapshot_id is None:
            return self.plan.summary()
        return (
            f"{self.plan.table}: position-delete compaction rewrote {self.plan.files_to_rewrite} delete files into "
            f"{self.files_added} ({human_bytes(self.bytes_added)}), dropped {self.dangling_records} dangling "
            f"records; committed snapshot {self.snapshot_id}"
        )

    def __repr__(self) -> str:
        return f"<DeleteCompactionResult {self.summary()}>"


def delete_options(options: Mapping[str, str] | None, properties: Mapping[str, str]) -> CompactionOptions:
    """Java's options of this action, the target from ``write.delete.target-file-size-bytes`` (64 MiB)."""
    options = dict(options or {})
    unknown = sorted(set(options) - DELETE_OPTIONS)
    if unknown:
        raise UsageError(
            f"Cannot use options {unknown}, they are not supported by position-delete compaction"
        )
    target = properties.get(DELETE_TARGET_PROPERTY, str(DEFAULT_DELETE_TARGET))
    return CompactionOptions.from_options(options, {TARGET_FILE_SIZE_PROPERTY: target})


def plan_delete_compaction(
    table: IcebergTable, options: Mapping[str, str] | None = None
) -> DeleteCompactionPlan:
    """Step 1: the groups of position-delete files of ``main``'s head worth rewriting.

    Raises:
        UnsupportedFormatError: a v3 table.
        UsageError: an option this action does not take, or a value Java refuses.
    """
    check_rewritable(table)
    opts = delete_options(options, table.metadata.properties)
    head = table.snapshot(ref="main")
    if head is None:
        return DeleteCompactionPlan(table.name, None, opts, 0, ())
    files = manifest_cache(table).live_files(table, head)
    unsafe = {f.manifest_path for f in files if f.referenced_data_file is not None}
    deletes = [f for f in files if f.content == CONTENT_POSITION_DELETES]
    usable = [f for f in deletes if f.manifest_path not in unsafe]
    groups: list[FileGroup] = []
    for spec_id in sorted({f.spec_id for f in usable}):
        candidates = [
            CompactionCandidate(f.path, f.spec_id, f.partition, f.file_size, f.record_count)
            for f in usable
            if f.spec_id == spec_id
        ]
        groups += plan_file_groups(candidates, current_spec_id=spec_id, options=opts)
    return DeleteCompactionPlan(
        table.name, head.snapshot_id, opts, len(deletes), tuple(groups), skipped=len(deletes) - len(usable)
    )


@dataclass
class _Rewritten:
    group: FileGroup
    outputs: list[DataFile] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    dangling: int = 0


def _live_records(table: IcebergTable, group: FileGroup, live_data: set[str]) -> tuple[pa.Table, int]:
    """The group's delete records whose data file is live, sorted by (file_path, pos); and how many were not."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # Each file cast on its own: Java's files read as string, ours (pyiceberg's Arrow schema) as large_string, and
    # concat_tables refuses tables of different types
    schema = pa.schema([("file_path", pa.string()), ("pos", pa.int64())])
    parts = []
    for candidate in group.files:
        with table.table.io.new_input(candidate.path).open() as stream:
            parts.append(pq.read_table(stream, columns=["file_path", "pos"]).cast(schema))
    records = pa.concat_tables(parts)
    live = records.filter(
        pc.is_in(records.column("file_path"), value_set=pa.array(sorted(live_data), pa.string()))
    )
    ordered = live.sort_by([("file_path", "ascending"), ("pos", "ascending")])
    return ordered, records.num_rows - live.num_rows


def _write_deletes(table: IcebergTable, group: FileGroup, records: pa.Table) -> tuple[DataFile, str]:
    """One position-delete file of the group's spec and partition, with pyiceberg's statistics."""
    from pyiceberg.io.pyarrow import ParquetFormatModel, schema_to_pyarrow
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.table.locations import load_location_provider
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField, StringType

    metadata = table.metadata
    schema = Schema(
        NestedField(2147483546, "file_path", StringType(), required=True),
        NestedField(2147483545, "pos", LongType(), required=True),
    )
    spec_id = group.files[0].spec_id
    spec = metadata.specs()[spec_id]
    partition_path = (
        spec.partition_to_path(Record(*group.partition), metadata.schema()) if spec.fields else ""
    )
    name = f"{partition_path}/" if partition_path else ""
    locations = load_location_provider(metadata.location, metadata.properties)
    location = locations.new_data_location(f"{name}{uuid.uuid4()}-deletes.parquet")
    output = table.table.io.new_output(location)
    writer = ParquetFormatModel().create_writer(output, schema, metadata.properties)
    writer.write(records.cast(schema_to_pyarrow(schema, include_field_ids=True)))
    statistics = writer.close()
    data_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(*group.partition),
        file_size_in_bytes=len(output),
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
    data_file.spec_id = spec_id
    return data_file, location


def _rewrite(table: IcebergTable, group: FileGroup, live_data: set[str]) -> _Rewritten:
    """Step 2 for one group."""
    records, dangling = _live_records(table, group, live_data)
    result = _Rewritten(group, dangling=dangling)
    if records.num_rows:
        data_file, location = _write_deletes(table, group, records)
        result.outputs.append(data_file)
        result.locations.append(location)
    return result


def _stage(
    tx: Transaction,
    table: IcebergTable,
    rewritten: Sequence[_Rewritten],
    inputs: Mapping[str, DataFile],
    sequences: Mapping[str, int],
    store_box: list[ManifestStore],
) -> int:
    """Step 3, one attempt: check the inputs are live, write manifests, stage the replace snapshot."""
    metadata = tx.table_metadata
    head = metadata.snapshot_by_id(metadata.refs["main"].snapshot_id)
    assert head is not None
    live = {f.path for f in manifest_cache(table).live_files(table, head)}
    missing = sorted(set(inputs) - live)
    if missing:
        raise CommitConflictError(
            f"{table.name}: position-delete compaction: Missing required files to delete: {missing[0]}"
        )
    snapshot_id = metadata.new_snapshot_id()
    store = ManifestStore(table, metadata, dry_run=False)
    store_box.append(store)
    added: list[DataFile] = []
    manifests = []
    for r in rewritten:
        sequence = max(sequences[c.path] for c in r.group.files)
        spec = metadata.specs()[r.group.files[0].spec_id]
        new = write_added_manifest(
            table,
            metadata,
            store,
            snapshot_id,
            ManifestContent.DELETES,
            [(f, sequence) for f in r.outputs],
            spec,
        )
        if new is not None:
            manifests.append(new)
        added += r.outputs
    kept = rewrite_manifests_removing(table, metadata, head, snapshot_id, set(inputs), store)
    summary = replace_summary(metadata, head, list(inputs.values()), added, {})
    stage_replace(tx, table, head, snapshot_id, kept + manifests, summary, store)
    return snapshot_id


def compact_deletes(
    table: IcebergTable,
    options: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
    policy: RetryPolicy | None = None,
) -> DeleteCompactionResult:
    """Rewrite small position-delete files of ``main``'s head without their dangling records, in one commit.

    Args:
        table: a writable v2 table.
        options: Java's options of ``rewrite_position_delete_files`` (``{"rewrite-all": "true"}``).
        dry_run: plan and report only.
        policy: the commit retry policy.

    Raises:
        CommitConflictError: an input was removed concurrently; the written files are removed.
        CommitStateUnknownError: the commit may have landed; the written files are kept.
    """
    started = time.monotonic()
    plan = plan_delete_compaction(table, options)
    if dry_run or not plan.groups:
        return DeleteCompactionResult(plan, dry_run=dry_run, duration_seconds=time.monotonic() - started)
    table.check_writable()
    head = table.snapshot(plan.snapshot_id)
    assert head is not None
    files = manifest_cache(table).live_files(table, head)
    live_data = {f.path for f in files if f.content == CONTENT_DATA}
    sequences = {f.path: f.data_sequence_number or 0 for f in files}
    inputs = data_files_by_path(table, head, [c.path for g in plan.groups for c in g.files])
    stores: list[ManifestStore] = []
    rewritten: list[_Rewritten] = []
    snapshot_id = None
    try:
        rewritten = [_rewrite(table, g, live_data) for g in plan.groups]

        def stage(tx: Transaction) -> int:
            discard_written(table, [p for s in stores for p in s.written], "a concurrent commit won")
            stores.clear()
            return _stage(tx, table, rewritten, inputs, sequences, stores)

        snapshot_id = commit_with_retry(table, stage, description="position-delete compaction", policy=policy)
    except CommitStateUnknownError:
        raise
    except BaseException:
        written = [p for r in rewritten for p in r.locations] + [p for s in stores for p in s.written]
        discard_written(table, written, "the position-delete compaction was not committed")
        raise
    return DeleteCompactionResult(
        plan,
        dry_run=False,
        snapshot_id=snapshot_id,
        files_added=sum(len(r.outputs) for r in rewritten),
        bytes_added=sum(f.file_size_in_bytes for r in rewritten for f in r.outputs),
        dangling_records=sum(r.dangling for r in rewritten),
        duration_seconds=time.monotonic() - started,
    )
