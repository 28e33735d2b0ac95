"""Manifests written with ~64 KB Avro blocks (``write/manifest_blocks``) read back through pyiceberg exactly as
written (statuses, sequence numbers, counts, delete content), in a handful of blocks instead of one per entry; and
the per-group schema projection (``data_compaction_project``) returns what pyiceberg's projection returns."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.io.pyarrow import PyArrowFileIO, _to_requested_schema, pyarrow_to_schema
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from airflow_lakeformat.core import avro_blocks
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_project import GroupProjection
from airflow_lakeformat.core.iceberg.write.manifest_blocks import PendingEncoder, blocked_manifest_writer

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()))
ENTRIES = 600


def _data_file(n: int, content: DataFileContent) -> DataFile:
    data_file = DataFile.from_args(
        content=content,
        file_path=f"file:/warehouse/t/data/{n:05d}-{'x' * 40}.parquet",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1000 + n,
        file_size_in_bytes=4096 + n,
        column_sizes={1: 100 + n, 2: 200},
        value_counts={1: 1000 + n, 2: 1000 + n},
        null_value_counts={1: 0, 2: n % 3},
        lower_bounds={1: n.to_bytes(8, "little")},
        upper_bounds={1: (n + 999).to_bytes(8, "little")},
    )
    data_file.spec_id = 0
    return data_file


@pytest.mark.parametrize("content", [ManifestContent.DATA, ManifestContent.DELETES])
def test_blocked_manifest_reads_back_entry_for_entry(tmp_path: Path, content: ManifestContent) -> None:
    io = PyArrowFileIO()
    location = f"file:{tmp_path}/m0.avro"
    file_content = (
        DataFileContent.DATA if content == ManifestContent.DATA else DataFileContent.POSITION_DELETES
    )
    writer = blocked_manifest_writer(
        2, content, UNPARTITIONED_PARTITION_SPEC, SCHEMA, io.new_output(location), 77, "gzip"
    )
    with writer:
        for n in range(ENTRIES):
            status = ManifestEntryStatus.DELETED if n % 2 else ManifestEntryStatus.EXISTING
            writer.add_entry(
                ManifestEntry.from_args(
                    status=status,
                    snapshot_id=77 if n % 2 else 5,
                    sequence_number=3 + n % 4,
                    file_sequence_number=3 + n % 4,
                    data_file=_data_file(n, file_content),
                )
            )
    manifest = writer.to_manifest_file()
    assert manifest.content == content
    assert (manifest.existing_files_count, manifest.deleted_files_count) == (ENTRIES // 2, ENTRIES // 2)
    assert manifest.min_sequence_number == 3
    data = Path(tmp_path / "m0.avro").read_bytes()
    assert manifest.manifest_length == len(data)
    blocks = avro_blocks.split_container(data).blocks
    assert sum(count for count, _ in blocks) == ENTRIES
    assert 1 < len(blocks) <= ENTRIES // 50  # ~64 KB of entries per block, not one block per entry
    read = manifest.fetch_manifest_entry(io, discard_deleted=False)
    assert [e.data_file.file_path for e in read] == [
        _data_file(n, file_content).file_path for n in range(ENTRIES)
    ]
    for n, entry in enumerate(read):
        assert entry.status == (ManifestEntryStatus.DELETED if n % 2 else ManifestEntryStatus.EXISTING)
        assert (entry.snapshot_id, entry.sequence_number) == (77 if n % 2 else 5, 3 + n % 4)
        assert entry.data_file.content == file_content
        assert entry.data_file.record_count == 1000 + n
        assert entry.data_file.null_value_counts == {1: 0, 2: n % 3}
        assert entry.data_file.upper_bounds == {1: (n + 999).to_bytes(8, "little")}


def test_pending_encoder_writes_pyiceberg_s_bytes() -> None:
    values = [*range(-300, 300), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 10**12, True, False]
    ours, theirs = io.BytesIO(), io.BytesIO()
    fast, reference = PendingEncoder(ours), BinaryEncoder(theirs)
    for value in values:
        fast.write_int(value)
        reference.write_int(value)
    for text in ("", "abc", "é" * 70, "x" * 300):
        fast.write_utf8(text)
        reference.write_utf8(text)
        fast.write_bytes(text.encode())
        reference.write_bytes(text.encode())
    assert ours.getvalue() == theirs.getvalue()


def _file_batch(ids: list[int | None], field_id: int = 1) -> pa.RecordBatch:
    """A batch as read from a Parquet file with field ids (``id`` long, ``s`` string)."""
    meta = {b"PARQUET:field_id": str(field_id).encode()}
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata=meta),
            pa.field("s", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
        ]
    )
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.int64()), pa.array([f"v{i}" for i in range(len(ids))])], schema=schema
    )


def test_projection_relabels_only_what_pyiceberg_relabels() -> None:
    first = _file_batch([1, 2, 3])
    file_schema = pyarrow_to_schema(first.schema, format_version=2)
    calls = []

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        return _to_requested_schema(SCHEMA, file_schema, batch)

    projection = GroupProjection()
    for batch in (first, _file_batch([4, 5]), _file_batch([6])):
        out = projection.project("read", batch, SCHEMA, file_schema, convert)
        assert out.equals(_to_requested_schema(SCHEMA, file_schema, batch), check_metadata=True)
    assert calls == [3]  # the first batch of the schema only
    # a null in a column the projection declares required: pyiceberg decides, as without the cache
    with_null = _file_batch([7, None])
    projection.project("read", with_null, SCHEMA, file_schema, convert)
    assert calls == [3, 2]
    # a renamed column (file name "id", table name "key"): the table's name, through the cache as well
    renamed = Schema(NestedField(1, "key", LongType(), required=True), NestedField(2, "s", StringType()))
    projection = GroupProjection()
    for batch in (first, _file_batch([4, 5])):
        out = projection.project(
            "read", batch, renamed, file_schema, lambda b: _to_requested_schema(renamed, file_schema, b)
        )
        assert out.equals(_to_requested_schema(renamed, file_schema, batch), check_metadata=True)
        assert out.schema.names == ["key", "s"]


def test_projection_keeps_pyiceberg_for_a_promotion() -> None:
    ints = pa.RecordBatch.from_arrays(
        [pa.array([1, 2], pa.int32()), pa.array(["a", "b"])],
        schema=pa.schema(
            [
                pa.field("id", pa.int32(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
                pa.field("s", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
            ]
        ),
    )
    file_schema = pyarrow_to_schema(ints.schema, format_version=2)
    calls = []

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(batch.num_rows)
        return _to_requested_schema(SCHEMA, file_schema, batch)

    projection = GroupProjection()
    for _ in range(3):
        out = projection.project("read", ints, SCHEMA, file_schema, convert)
        assert out.schema.field("id").type == pa.int64()
    assert calls == [2, 2, 2]  # int promoted to long: pyiceberg's projection every time
