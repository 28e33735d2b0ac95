"""Iceberg live-file planning: ours against pyiceberg's ``plan_files()`` and ``inspect.files()`` on one table.

    .venv/bin/python bench/bench_iceberg_planning.py [--manifests 2000] [--files-per-manifest 20]
        [--columns 10] [--repeat 3] [--out bench/results/iceberg_planning.json]

It writes one snapshot whose manifest list holds ``--manifests`` manifests (pyiceberg's ``write_manifest``),
each with ``--files-per-manifest`` data entries carrying full per-column metrics for ``--columns`` columns,
then times, best of ``--repeat`` in this process: ``files_document`` with our fastavro decoder (the
default), the same with pyiceberg's decoder inside our reader, pyiceberg's ``inspect.files()`` and
``scan().plan_files()``. The ratios are against the pyiceberg baselines of the same run. It checks its own
answer: the set of paths (and record counts) ours returns must equal pyiceberg's ``plan_files()`` and
``inspect.files()``; a mismatch exits 1 whatever the timings.
"""

from __future__ import annotations

import argparse
import json
import platform
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


def timed(label: str, fn: object, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    print(f"{label:45s} {best:8.3f} s")
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--files-per-manifest", type=int, default=20)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        started = time.perf_counter()
        build(root, args.manifests, args.files_per_manifest, args.columns)
        built = time.perf_counter() - started
        print(
            f"built {args.manifests} manifests x {args.files_per_manifest} files x {args.columns} columns in {built:.1f} s"
        )
        table = open_path_table(str(root))
        pyt = table.table

        def ours() -> set[tuple[str, int]]:
            return {(f["path"], f["recordCount"]) for f in files_document(table)["files"]}

        def ours_pyiceberg_decoder() -> set[tuple[str, int]]:
            document = files_document(table, decoder=PyIcebergDecoder())
            return {(f["path"], f["recordCount"]) for f in document["files"]}

        def inspect_files() -> set[tuple[str, int]]:
            arrow = pyt.inspect.files()
            return set(zip(arrow["file_path"].to_pylist(), arrow["record_count"].to_pylist(), strict=True))

        def plan_files() -> set[tuple[str, int]]:
            return {(t.file.file_path, t.file.record_count) for t in pyt.scan().plan_files()}

        t_ours, r_ours = timed("ours: files_document (fastavro, projected)", ours, args.repeat)
        t_dec, r_dec = timed("ours with pyiceberg's manifest decoder", ours_pyiceberg_decoder, args.repeat)
        t_inspect, r_inspect = timed("pyiceberg inspect.files()", inspect_files, args.repeat)
        t_plan, r_plan = timed("pyiceberg scan().plan_files()", plan_files, args.repeat)
    expected = args.manifests * args.files_per_manifest
    checks = {
        "oursEqualsPlanFiles": r_ours == r_plan,
        "oursEqualsInspectFiles": r_ours == r_inspect,
        "decodersAgree": r_ours == r_dec,
        "fileCount": len(r_ours) == expected,  # type: ignore[arg-type]
    }
    figures = {
        "table": {"manifests": args.manifests, "filesPerManifest": args.files_per_manifest, "columns": args.columns,
                  "files": expected},
        "seconds": {"ours": round(t_ours, 3), "oursWithPyicebergDecoder": round(t_dec, 3),
                    "pyicebergInspectFiles": round(t_inspect, 3), "pyicebergPlanFiles": round(t_plan, 3)},
        "ratios": {"planFilesOverOurs": round(t_plan / t_ours, 2), "inspectFilesOverOurs": round(t_inspect / t_ours, 2)},
        "checks": checks,
        "repeat": args.repeat,
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
    }  # fmt: skip
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    if not all(checks.values()):
        print(f"bench_iceberg_planning: a correctness check failed: {checks}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
