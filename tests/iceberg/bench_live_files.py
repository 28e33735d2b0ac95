"""Measure live-file listing on a table with many manifests: ours (fastavro / pyiceberg decoder) vs pyiceberg.

A test helper, not a test (no timing assertions anywhere). Run:

    .venv/bin/python -m tests.iceberg.bench_live_files [manifests] [files-per-manifest] [columns]

It writes one snapshot whose manifest list holds ``manifests`` manifests (pyiceberg's ``write_manifest``),
each with ``files-per-manifest`` data entries carrying full per-column metrics for ``columns`` columns, and
times ``files_document`` with each decoder against pyiceberg's ``inspect.files()`` and ``plan_files()``.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from airflow_lakeformat.core.iceberg.catalog import open_path_table
from airflow_lakeformat.core.iceberg.commit import commit_with_retry
from airflow_lakeformat.core.iceberg.files import files_document
from airflow_lakeformat.core.iceberg.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.live_files import PyIcebergDecoder


def build(root: Path, manifests: int, per_manifest: int, columns: int) -> None:
    schema = Schema(
        NestedField(1, "part", StringType(), required=False),
        *[NestedField(i + 2, f"c{i}", LongType(), required=False) for i in range(columns)],
    )
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "part"))
    HadoopLayoutCatalog().create_table(str(root), schema=schema, partition_spec=spec)
    table = open_path_table(str(root))
    pyt = table.table
    metadata = pyt.metadata
    snapshot_id = metadata.new_snapshot_id()
    ids = range(1, columns + 2)
    manifest_files = []
    for m in range(manifests):
        path = f"{metadata.location}/metadata/{uuid.uuid4()}-m0.avro"
        with write_manifest(
            2, metadata.spec(), schema, pyt.io.new_output(path), snapshot_id, "deflate"
        ) as writer:
            for f in range(per_manifest):
                data_file = DataFile.from_args(
                    content=DataFileContent.DATA,
                    file_path=f"{metadata.location}/data/part={m % 50}/file-{m}-{f}.parquet",
                    file_format=FileFormat.PARQUET,
                    partition=Record(str(m % 50)),
                    record_count=1000 + f,
                    file_size_in_bytes=100_000 + f,
                    column_sizes={i: 1000 for i in ids},
                    value_counts={i: 1000 for i in ids},
                    null_value_counts={i: 0 for i in ids},
                    lower_bounds={i: (0).to_bytes(8, "little") for i in ids},
                    upper_bounds={i: (10**6).to_bytes(8, "little") for i in ids},
                    split_offsets=[4],
                )
                data_file.spec_id = 0
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file
                    )
                )
        manifest_files.append(writer.to_manifest_file())
    list_path = f"{metadata.location}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, pyt.io.new_output(list_path), snapshot_id, None, 1, "deflate") as list_writer:
        list_writer.add_manifests(manifest_files)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        sequence_number=1,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(Operation.APPEND),
        schema_id=0,
    )

    def stage(tx: Transaction) -> None:
        tx._apply(
            (
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(snapshot_id=snapshot_id, ref_name="main", type="branch"),
            ),
            (AssertRefSnapshotId(snapshot_id=None, ref="main"),),
        )

    commit_with_retry(table, stage)


def timed(label: str, fn: object, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    print(f"{label:45s} {best:8.3f} s  ({result})")
    return best


def main() -> None:
    manifests = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    per_manifest = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    columns = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        started = time.perf_counter()
        build(root, manifests, per_manifest, columns)
        print(
            f"built {manifests} manifests x {per_manifest} files x {columns} columns in {time.perf_counter() - started:.1f} s"
        )
        table = open_path_table(str(root))
        pyt = table.table
        ours = timed("files_document (fastavro, projected)", lambda: len(files_document(table)["files"]))
        reference = timed(
            "files_document (pyiceberg decoder)",
            lambda: len(files_document(table, decoder=PyIcebergDecoder())["files"]),
        )
        inspect_files = timed("pyiceberg inspect.files()", lambda: pyt.inspect.files().num_rows)
        plan = timed("pyiceberg scan().plan_files()", lambda: len(list(pyt.scan().plan_files())))
        print(
            f"speed-up vs inspect.files(): {inspect_files / ours:.1f}x, vs plan_files(): {plan / ours:.1f}x, "
            f"pyiceberg decoder inside ours: {reference / ours:.1f}x slower than fastavro"
        )


if __name__ == "__main__":
    main()
