"""The Iceberg planning benchmark's table (``bench_iceberg_planning.py``, and ``bench_health.py`` at 100,000
files): one snapshot whose manifest list holds ``manifests`` manifests (pyiceberg's ``write_manifest``), each
with ``per_manifest`` data entries carrying full per-column metrics for ``columns`` columns, partitioned by
``part`` (50 values). :func:`ensure_table` caches it under bench/.work/ by its parameters.
"""

from __future__ import annotations

import json
import shutil
import sys
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
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry


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
    snapshot = Snapshot(  # type: ignore[call-arg]
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
                SetSnapshotRefUpdate(snapshot_id=snapshot_id, ref_name="main", type=SnapshotRefType.BRANCH),  # type: ignore[call-arg]
            ),
            (AssertRefSnapshotId(snapshot_id=None, ref="main"),),  # type: ignore[call-arg]
        )

    commit_with_retry(table, stage)


def ensure_table(work_dir: Path, manifests: int, per_manifest: int, columns: int) -> Path:
    """The cached table of these parameters under ``work_dir`` (built if missing); its directory."""
    root = work_dir.resolve() / f"iceberg-planning-m{manifests}-f{per_manifest}-c{columns}"
    table_dir, marker = root / "table", root / "params.json"
    if marker.exists():
        print(f"using cached Iceberg table {table_dir}", file=sys.stderr)
        return table_dir
    shutil.rmtree(table_dir, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    print(f"building {table_dir} ({manifests} manifests x {per_manifest} files) ...", file=sys.stderr)
    started = time.perf_counter()
    build(table_dir, manifests, per_manifest, columns)
    seconds = round(time.perf_counter() - started, 1)
    marker.write_text(
        json.dumps({"manifests": manifests, "files": manifests * per_manifest, "seconds": seconds})
    )
    return table_dir
