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

``--java`` does that comparison in the same run (needs ``.venv-iceberg``, see ``tests/support/java_iceberg.py``):

    .venv/bin/python bench/bench_iceberg_manifest_compaction.py --java \
        --out bench/results/iceberg_manifest_compaction.json

The table is built at ``<work>/warehouse/db/bench`` (a Hadoop-catalog location Java's ``hc`` catalog
resolves), tarred, and after our timings restored AT THE SAME PATH before each measured run: ``--repeat``
(3) runs of our full compaction alone (the pristine table, no dry run before it; the best counts), then
Java in one Spark session whose JVM gets its default JIT and GC back (the oracle's C1-only, serial-GC
settings are for quick test start-ups): ``CALL hc.system.rewrite_manifests(table => 'db.bench')`` on a
cold JVM (timed inside the session, session start reported apart), Java's views (``files`` metadata table
before and after, ``entries``, the new manifest list), then ``--repeat`` more runs of the procedure on the
warm JVM, each after we restored the pristine table again (the best counts). Checks (any false one exits 1): both sides keep the live files (path, records, bytes) of
the pristine snapshot and every entry's snapshot id and data/file sequence numbers; our compacted live
files and entries equal Java's; Java's data-manifest count is its cut rule's (``ceil(sum of replaced
manifest lengths / target)`` Spark range partitions, each cut again at 1.2 x target), ours
``ceil(bytes written / target)``; the two counts are reported side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tarfile
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
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table  # noqa: E402
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog  # noqa: E402
from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests  # noqa: E402
from airflow_lakeformat.core.iceberg.metadata.files import files_document  # noqa: E402
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable  # noqa: E402
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry  # noqa: E402
from bench.support.runs import wait_for_oracle_file  # noqa: E402


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
                SetSnapshotRefUpdate(snapshot_id=head_id, ref_name="main", type=SnapshotRefType.BRANCH),  # type: ignore[call-arg]
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


def live_files(table: IcebergTable, snapshot_id: int | None = None) -> list[tuple[str, int, int]]:
    """(path, records, bytes) of the live files at a snapshot (default: the current one), sorted."""
    files = files_document(table, snapshot_id=snapshot_id)["files"]
    return sorted((f["path"], f["recordCount"], f["fileSize"]) for f in files)


def java_live_files(files: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return sorted((f["file_path"], f["record_count"], f["file_size_in_bytes"]) for f in files)


def data_manifests(table: IcebergTable) -> list[Any]:
    snapshot = table.snapshot()
    assert snapshot is not None
    return [m for m in snapshot.manifests(table.table.io) if m.content == 0]


def archive(directory: Path, tarball: Path) -> None:
    with tarfile.open(tarball, "w") as out:
        out.add(directory, arcname=directory.name)


def restore(directory: Path, tarball: Path) -> None:
    """Put the pristine table back AT THE SAME PATH (metadata holds absolute paths)."""
    shutil.rmtree(directory, ignore_errors=True)
    with tarfile.open(tarball) as source:
        source.extractall(directory.parent, filter="tar")


#: The oracle's JVM runs with C1 only and the serial GC (fast start-ups for the tests); for the comparison
#: Java gets its defaults back: the full tiered JIT and G1 (appended options win).
JAVA_DEFAULT_JIT_AND_GC = "-XX:TieredStopAtLevel=4 -XX:-UseSerialGC -XX:+UseG1GC"


def compare_with_java(
    base: Path, root: Path, warehouse: Path, pristine: Path, ours_after: list[Any], repeat: int
) -> dict[str, Any]:
    """Our full compaction (``repeat`` runs) and Java's rewrite_manifests (one on a cold JVM, then ``repeat``
    on the warm JVM), each run on the pristine table restored in place."""
    o = _our_runs(root, pristine, repeat)
    restore(root, pristine)
    results, java_wall = _java_runs(base, root, warehouse, pristine, o["head"], repeat)
    cold_call, before, after, entries, manifests = results[:5]
    warm_calls = results[6:-1:2]
    warm_after = results[-1]
    java_data = [m for m in manifests if m["content"] == "DATA"]
    target, input_count, input_bytes = o["target"], o["input_count"], o["input_bytes"]
    before_files, before_entries, ours_files, ours_entries = (
        o["before_files"], o["before_entries"], o["ours_files"], o["ours_entries"]
    )  # fmt: skip
    ours_data, ours_bytes, ours_seconds, ours_runs, last = (
        o["ours_data"], o["ours_bytes"], o["ours_seconds"], o["ours_runs"], o["last"]
    )  # fmt: skip
    java_expected = math.ceil(input_bytes / target)
    java_entries = {
        e["file_path"]: (e["snapshot_id"], e["sequence_number"], e["file_sequence_number"])
        for e in entries
        if e["status"] != 2
    }
    checks = {
        "oursKeepsLiveFiles": ours_files == before_files,
        "oursKeepsIdsAndSequenceNumbers": ours_entries == before_entries,
        "oursEqualsOursAfterDryRun": ours_files == ours_after,
        "javaSawPristineLiveFiles": java_live_files(before) == before_files,
        "javaKeepsLiveFiles": java_live_files(after) == before_files,
        "javaLiveFilesEqualOurs": java_live_files(after) == ours_files,
        "javaEntriesEqualOurs": java_entries == ours_entries,
        "javaWarmRunKeepsLiveFiles": java_live_files(warm_after) == before_files,
        "javaRewroteEveryManifestEachRun": [
            r["rewritten_manifests_count"] for c in (cold_call, *warm_calls) for r in c["rows"]
        ]
        == [input_count] * (1 + repeat),
        # Java's cut rule: n = ceil(sum of the replaced lengths / target) range partitions, each rolled again
        # at 1.2 x target, so at least n manifests (more only if a partition overflows).
        "javaCountFollowsItsCutRule": len(java_data) >= java_expected,
        # Ours: cut at the target as written, so ceil(bytes written / target), one more at most for the
        # last entry that crossed it.
        "oursCountFollowsOurCutRule": math.ceil(ours_bytes / target)
        <= len(ours_data)
        <= math.ceil(ours_bytes / target) + 1,
    }
    java_cold = cold_call["seconds"]
    java_warm_runs = [c["seconds"] for c in warm_calls]
    java_warm = min(java_warm_runs)
    return {
        "seconds": {
            "oursFullCompactionBest": round(ours_seconds, 3),
            "oursRuns": [round(x, 3) for x in ours_runs],
            "javaRewriteManifestsColdJvm": java_cold,
            "javaRewriteManifestsWarmJvmBest": java_warm,
            "javaWarmRuns": java_warm_runs,
            "javaSessionStart": cold_call["session_seconds"],
            "javaOracleProcessWall": round(java_wall, 3),
        },
        "ratios": {
            "javaColdJvmOverOurs": round(java_cold / ours_seconds, 2),
            "javaWarmJvmOverOurs": round(java_warm / ours_seconds, 2),
            "javaColdJvmPlusSessionOverOurs": round(
                (java_cold + cold_call["session_seconds"]) / ours_seconds, 2
            ),
        },
        "javaJvmOptions": f"oracle defaults + {JAVA_DEFAULT_JIT_AND_GC}",
        "manifests": _manifest_counts(o, java_data, java_expected),
        "javaProcedureOutput": {"cold": cold_call["rows"], "warm": [c["rows"] for c in warm_calls]},
        "oursLastResult": last.to_json(),
        "checks": checks,
    }


def _manifest_counts(o: dict[str, Any], java_data: list[Any], java_expected: int) -> dict[str, Any]:
    """The data manifests before, ours after and Java's after, with Java's expected count by its cut rule."""
    input_count, input_bytes, target = o["input_count"], o["input_bytes"], o["target"]
    ours_data, ours_bytes = o["ours_data"], o["ours_bytes"]
    java_bytes = sum(m["length"] for m in java_data)
    return {
        "inputDataManifests": input_count,
        "inputBytes": input_bytes,
        "targetSizeBytes": target,
        "ours": len(ours_data),
        "oursBytes": ours_bytes,
        "java": len(java_data),
        "javaBytes": java_bytes,
        "javaExpectedByCutRule": java_expected,
        "difference": len(java_data) - len(ours_data),
        "note": "Java sizes its output from the INPUT manifests' lengths (one header and per-manifest "
        "overhead each), we cut the OUTPUT at the target: fewer, fuller manifests from us when the "
        "rewritten entries take less room than the inputs did",
    }


def _our_runs(root: Path, pristine: Path, repeat: int) -> dict[str, Any]:
    """The pristine table's live files, entries and data manifests, then ``repeat`` full compactions (each on
    the pristine table restored) and what the last one left."""
    restore(root, pristine)
    table = open_path_table(str(root))
    inputs = data_manifests(table)
    o: dict[str, Any] = {
        "head": table.metadata.current_snapshot_id,
        "before_files": live_files(table),
        "before_entries": live_entries(table),
        "input_count": len(inputs),
        "input_bytes": sum(m.manifest_length for m in inputs),
        "target": int(table.metadata.properties.get("commit.manifest.target-size-bytes", 8 * 1024 * 1024)),
    }
    ours_runs: list[float] = []
    for index in range(repeat):
        if index:
            restore(root, pristine)
            table = open_path_table(str(root))
        started = time.perf_counter()
        o["last"] = compact_manifests(table, "full")
        ours_runs.append(time.perf_counter() - started)
    ours_data = data_manifests(table)
    o.update(
        ours_runs=ours_runs,
        ours_seconds=min(ours_runs),
        ours_files=live_files(table),
        ours_entries=live_entries(table),
        ours_data=ours_data,
        ours_bytes=sum(m.manifest_length for m in ours_data),
    )
    return o


def _java_runs(
    base: Path, root: Path, warehouse: Path, pristine: Path, head: int, repeat: int
) -> tuple[list[Any], float]:
    """Java's results (one oracle batch) and the oracle process's wall time."""
    from tests.support.java_iceberg import start_oracle

    # One JVM: the procedure on the pristine table (JVM cold) and Java's views; then, each time after we
    # restored the pristine table again, the procedure on the warm JVM.
    signals = [(base / f"java-waiting-{i}", base / f"java-restored-{i}") for i in range(repeat)]
    for path in (p for pair in signals for p in pair):
        path.unlink(missing_ok=True)
    call = ["time-call", "--procedure", "rewrite_manifests", "--table", "db.bench"]
    commands = [
        call,
        ["files", "--table", "db.bench", "--snapshot", str(head)],  # the `files` metadata table
        ["files", "--table", "db.bench"],
        ["entries", "--table", "db.bench"],
        ["manifest-list", "--table", "db.bench"],
    ]
    for waiting, restored in signals:
        commands += [["wait-file", "--path", str(restored), "--signal", str(waiting)], call]
    commands.append(["files", "--table", "db.bench"])
    started = time.perf_counter()
    oracle = start_oracle(
        "batch",
        warehouse=warehouse,
        conf={"spark.driver.extraJavaOptions": JAVA_DEFAULT_JIT_AND_GC},
        stdin=json.dumps(commands),
    )
    try:
        for waiting, restored in signals:
            wait_for_oracle_file(waiting, oracle, timeout=900.0)
            restore(root, pristine)
            restored.touch()
        results = oracle.result(timeout=3600)
    finally:
        oracle.stop()
    return results, time.perf_counter() - started


def _timed(call: Any) -> tuple[Any, float]:
    """``call()`` and its wall seconds."""
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--files-per-manifest", type=int, default=5)
    parser.add_argument("--columns", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--root", help="build the table here and keep it (default: a temporary directory)")
    parser.add_argument(
        "--java", action="store_true", help="also run Java's rewrite_manifests (.venv-iceberg)"
    )
    parser.add_argument("--work", help="with --java: the work directory (default: a temporary directory)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="with --java: our runs and Java's warm-JVM runs (best counts)"
    )
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    if args.java and args.root:
        parser.error("--java builds its table under --work (a Hadoop-catalog warehouse), not --root")
    keep = args.root or (args.work if args.java else None)
    tmp = None if keep else tempfile.mkdtemp(prefix="bench-manifest-compaction-")
    base = Path(args.work or tmp or ".").resolve() if args.java else None
    if base is not None:
        warehouse = base / "warehouse"
        root = warehouse / "db" / "bench"
        shutil.rmtree(warehouse, ignore_errors=True)
    else:
        root = Path(args.root or tmp or ".") / ("" if args.root else "table")
    try:
        started = time.perf_counter()
        table = build_table(root, args.manifests, args.files_per_manifest, args.columns, args.partitions)
        build_seconds = time.perf_counter() - started
        pristine = None
        if base is not None:
            pristine = base / "pristine.tar"
            archive(root, pristine)
        files_before = files_document(table)["files"]
        entries_before = live_entries(table)

        (dry, dry_seconds), (real, real_seconds), (again, noop_seconds) = [
            _timed(lambda dry_run=dry_run: compact_manifests(table, "full", dry_run=dry_run))
            for dry_run in (True, False, False)
        ]

        checks = {
            "filesUnchanged": files_document(table)["files"] == files_before,
            "idsAndSequenceNumbersPreserved": live_entries(table) == entries_before,
            "dryRunMatchesRealRun": (dry.manifests_after, dry.bytes_after)
            == (real.manifests_after, real.bytes_after),
            "secondRunIsNoop": again.snapshot_id is None,
        }
        figures: dict[str, Any] = {
            "table": {"manifests": args.manifests, "filesPerManifest": args.files_per_manifest,
                      "columns": args.columns, "partitions": args.partitions, "entries": len(entries_before),
                      "root": str(root) if keep else None},
            "seconds": {"build": round(build_seconds, 3), "dryRun": round(dry_seconds, 3),
                        "fullCompaction": round(real_seconds, 3), "secondRunNoop": round(noop_seconds, 3)},
            "result": real.to_json(),
            "checks": checks,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "loadavg": [round(x, 2) for x in os.getloadavg()]},
        }  # fmt: skip
        if base is not None and pristine is not None:
            java = compare_with_java(base, root, base / "warehouse", pristine, live_files(table), args.repeat)
            figures["java"] = java
            checks.update({f"java.{k}": v for k, v in java["checks"].items()})
            figures["machine"]["loadavgAfter"] = [round(x, 2) for x in os.getloadavg()]
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
