"""Measure our full manifest compaction on a table of many small manifests (no timing assertions).

    .venv/bin/python bench/bench_iceberg_manifest_compaction.py [--manifests 2000] [--files-per-manifest 5]
        [--columns 8] [--partitions 50] [--root /tmp/bench-table] [--out figures.json]

Builds one Hadoop-layout v2 table whose head snapshot lists ``--manifests`` data manifests (written with
pyiceberg's ``write_manifest``, as a fast-appending writer leaves them), each with ``--files-per-manifest``
entries carrying per-column metrics for ``--columns`` columns, partitioned by identity over ``--partitions``
values. Then it times, in this process: the dry run (plan + encode in memory), the real full compaction
(plan, write, commit) and a second, no-op run. It checks that the live files are identical before and
after and that every entry kept its snapshot id and sequence numbers; a mismatch exits 1.

With ``--root`` the table is built there and kept, so that the same table (same absolute paths) can be
restored and compacted by Java's ``CALL system.rewrite_manifests`` for comparison (reference section 5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
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
from airflow_lakeformat.core.iceberg.manifest_compaction import compact_manifests
from airflow_lakeformat.core.iceberg.table import IcebergTable


def build_table(root: Path, manifests: int, per_manifest: int, columns: int, partitions: int) -> IcebergTable:
    """A v2 table whose head lists ``manifests`` manifests of ``per_manifest`` ADDED entries each.

    Each manifest is given its own (fake) snapshot id and sequence number, as if each came from its own
    append, so that preserving ids and sequence numbers is actually exercised.
    """
    schema = Schema(
        NestedField(1, "region", StringType(), required=False),
        *[NestedField(i + 2, f"m{i}", LongType(), required=False) for i in range(columns)],
    )
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "region"))
    HadoopLayoutCatalog().create_table(str(root), schema=schema, partition_spec=spec)
    table = open_path_table(str(root))
    pyt = table.table
    metadata = pyt.metadata
    column_ids = range(1, columns + 2)
    head_id = metadata.new_snapshot_id()
    rows: list[ManifestFile] = []
    for m in range(manifests):
        writer_snapshot = 10_000 + m
        location = f"{metadata.location}/metadata/{uuid.uuid4()}-m0.avro"
        with write_manifest(
            2, metadata.spec(), schema, pyt.io.new_output(location), writer_snapshot, "deflate"
        ) as w:
            for f in range(per_manifest):
                df = DataFile.from_args(
                    content=DataFileContent.DATA,
                    file_path=f"{metadata.location}/data/region=r{(m + f) % partitions}/{m:06d}-{f:03d}.parquet",
                    file_format=FileFormat.PARQUET,
                    partition=Record(f"r{(m + f) % partitions}"),
                    record_count=500 + f,
                    file_size_in_bytes=50_000 + 17 * f,
                    column_sizes=dict.fromkeys(column_ids, 4000),
                    value_counts=dict.fromkeys(column_ids, 500),
                    null_value_counts=dict.fromkeys(column_ids, 0),
                    lower_bounds={i: (m).to_bytes(8, "little") for i in column_ids},
                    upper_bounds={i: (m + 10**6).to_bytes(8, "little") for i in column_ids},
                    split_offsets=[4],
                )
                df.spec_id = 0
                w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=writer_snapshot,
                                              data_file=df))  # fmt: skip
        row = w.to_manifest_file()
        row.sequence_number = row.min_sequence_number = m + 1  # as if appended by commit m + 1
        rows.append(row)
    rows.reverse()  # newest first, as appends list them
    list_location = f"{metadata.location}/metadata/snap-{head_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, pyt.io.new_output(list_location), head_id, None, manifests, "deflate") as lw:
        lw.add_manifests(rows)
    snapshot = Snapshot(  # type: ignore[call-arg]
        snapshot_id=head_id,
        sequence_number=manifests,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_location,
        summary=Summary(Operation.APPEND),
        schema_id=0,
    )

    def stage(tx: Transaction) -> None:
        tx._apply(
            (
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(snapshot_id=head_id, ref_name="main", type="branch"),  # type: ignore[call-arg]
            ),
            (AssertRefSnapshotId(snapshot_id=None, ref="main"),),  # type: ignore[call-arg]
        )

    commit_with_retry(table, stage, description="bench table")
    return table


def live_entries(table: IcebergTable) -> dict[str, tuple[Any, ...]]:
    snapshot = table.snapshot()
    assert snapshot is not None
    return {
        e.data_file.file_path: (e.snapshot_id, e.sequence_number, e.file_sequence_number)
        for m in snapshot.manifests(table.table.io)
        for e in m.fetch_manifest_entry(table.table.io)
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--files-per-manifest", type=int, default=5)
    parser.add_argument("--columns", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--root", help="build the table here and keep it (default: a temporary directory)")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    tmp = None if args.root else tempfile.mkdtemp(prefix="bench-manifest-compaction-")
    root = Path(args.root or tmp or ".") / ("" if args.root else "table")
    try:
        started = time.perf_counter()
        table = build_table(root, args.manifests, args.files_per_manifest, args.columns, args.partitions)
        build_seconds = time.perf_counter() - started
        files_before = files_document(table)["files"]
        entries_before = live_entries(table)

        started = time.perf_counter()
        dry = compact_manifests(table, "full", dry_run=True)
        dry_seconds = time.perf_counter() - started
        started = time.perf_counter()
        real = compact_manifests(table, "full")
        real_seconds = time.perf_counter() - started
        started = time.perf_counter()
        again = compact_manifests(table, "full")
        noop_seconds = time.perf_counter() - started

        checks = {
            "filesUnchanged": files_document(table)["files"] == files_before,
            "idsAndSequenceNumbersPreserved": live_entries(table) == entries_before,
            "dryRunMatchesRealRun": (dry.manifests_after, dry.bytes_after)
            == (real.manifests_after, real.bytes_after),
            "secondRunIsNoop": again.snapshot_id is None,
        }
        figures = {
            "table": {"manifests": args.manifests, "filesPerManifest": args.files_per_manifest,
                      "columns": args.columns, "partitions": args.partitions, "entries": len(entries_before),
                      "root": str(root) if args.root else None},
            "seconds": {"build": round(build_seconds, 3), "dryRun": round(dry_seconds, 3),
                        "fullCompaction": round(real_seconds, 3), "secondRunNoop": round(noop_seconds, 3)},
            "result": real.to_json(),
            "checks": checks,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        }  # fmt: skip
        print(json.dumps(figures, indent=2))
        if args.out:
            Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
        if not all(checks.values()):
            print(f"bench_manifest_compaction: a check failed: {checks}", file=sys.stderr)
            return 1
        return 0
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
