"""Iceberg snapshot expiry: ours in-process (and the Spark job) against Java's ``expire_snapshots(retain_last => 1)``.

    .venv/bin/python bench/bench_iceberg_expiry.py [--snapshots 2000] [--files-per-snapshot 10] [--repeat 3]
        [--skip-spark] [--work DIR] [--out bench/results/iceberg_expiry.json]

Needs ``.venv-iceberg`` (the Java Iceberg 1.10.2 oracle, ``tests/support/java_iceberg.py``). The table is the
reference's anchor table, built by Java in the oracle's Hadoop catalog at ``<work>/warehouse/db/bench``:
``--snapshots`` Java-API appends (``newAppend``) of ``--files-per-snapshot`` files each (one per ``category``
partition), a metadata-only SQL ``DELETE`` of half the partitions, then 3 SQL inserts: 2,004 snapshots and
10,003 live files at full size. It is tarred once; metadata holds absolute paths, so every run starts from the
SAME table restored at the SAME path.

Timed, each on the restored table, in the same run (``older_than`` = the start of the run, ``retain_last`` 1):

* Java: ``CALL hc.system.expire_snapshots(table => 'db.bench', older_than => ..., retain_last => 1)`` on Spark
  ``local[2]``, timed inside the session (the session start is reported apart), Java's default JIT and GC;
* ours: ``open_path_table`` + ``expire_snapshots(dry_run=False)`` (plan, re-check, journal, commit, deletes
  through the deletion module), in this process, ``--repeat`` times (first and best reported);
* the Spark job ``expire_snapshots`` through ``spark-submit --master local[2]``: wall clock (JVM and session
  start included) and the job's own duration.

Ratios are Java's seconds over ours. Checks (any false one exits 1): after each of our runs the files on disk
(all but metadata JSON files and their checksums) and the remaining snapshot ids and refs equal Java's, and
our per-kind counts equal Java's procedure output. No timing threshold is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots

JAVA_DEFAULT_JIT_AND_GC = "-XX:TieredStopAtLevel=4 -XX:-UseSerialGC -XX:+UseG1GC"


def build(warehouse: Path, snapshots: int, files_per_snapshot: int) -> float:
    """The table, built by Java (see the module docstring); returns the build's seconds."""
    from tests.support.java_iceberg import run_oracle_batch

    commits = [
        [{"id": s * files_per_snapshot + f, "category": f"c{f}"} for f in range(files_per_snapshot)]
        for s in range(snapshots)
    ]
    rows_file = warehouse.parent / "bench-rows.json"
    rows_file.write_text(json.dumps(commits), encoding="utf-8")
    half = ", ".join(f"'c{f}'" for f in range(0, files_per_snapshot, 2))
    started = time.perf_counter()
    run_oracle_batch(
        [
            ["sql", "--statement", "CREATE TABLE hc.db.bench (id bigint, category string) USING iceberg "
             "PARTITIONED BY (category) TBLPROPERTIES ('format-version' = '2', "
             "'write.metadata.delete-after-commit.enabled' = 'true')"],
            ["append", "--table", "db.bench", "--rows", str(rows_file), "--merge"],
            ["sql", "--statement", f"DELETE FROM hc.db.bench WHERE category IN ({half})"],
            *[["sql", "--statement", f"INSERT INTO hc.db.bench VALUES ({10**9 + i}, 'c1')"] for i in range(3)],
        ],
        warehouse=warehouse,
        timeout=7200,
    )  # fmt: skip
    rows_file.unlink()
    return time.perf_counter() - started


def restore(warehouse: Path, pristine: Path) -> None:
    shutil.rmtree(warehouse, ignore_errors=True)
    with tarfile.open(pristine) as archive:
        archive.extractall(warehouse.parent, filter="tar")


def disk(root: Path) -> set[str]:
    """Files under the table root, but metadata JSON files, their checksums and the version hint (each side
    names and checksums its own new metadata file)."""
    found = set()
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith((".metadata.json", ".metadata.json.crc")) or "version-hint" in name:
                continue
            found.add(os.path.join(directory, name))
    return found


def state(root: Path) -> dict[str, Any]:
    table = open_path_table(str(root))
    return {
        "snapshots": sorted(s.snapshot_id for s in table.metadata.snapshots),
        "refs": {name: ref.snapshot_id for name, ref in sorted(table.metadata.refs.items())},
    }


def java(warehouse: Path, cutoff_ms: int) -> dict[str, Any]:
    from tests.support.java_iceberg import run_oracle_batch

    arguments = json.dumps({"older_than": {"timestamp_ms": cutoff_ms}, "retain_last": 1})
    call = ["time-call", "--procedure", "expire_snapshots", "--table", "db.bench", "--args", arguments]
    (result,) = run_oracle_batch(
        [call],
        warehouse=warehouse,
        conf={"spark.driver.extraJavaOptions": JAVA_DEFAULT_JIT_AND_GC},
        timeout=3600,
    )
    return dict(result)


def spark_job(root: Path, cutoff_ms: int, work: Path) -> tuple[float, dict[str, Any]]:
    from tests.support.spark import run_job

    started = time.perf_counter()
    run = run_job(
        "expire_snapshots", str(root), "--older-than", _iso(cutoff_ms), "--retain-last", "1", work_dir=work,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if run.returncode != 0 or run.result is None:
        raise RuntimeError(run.describe())
    return seconds, run.result


def _iso(millis: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d}Z"


def _ours(
    repeat: int,
    warehouse: Path,
    pristine: Path,
    root: Path,
    cutoff_ms: int,
    java_disk: set[str],
    java_state: dict[str, Any],
    java_counts: Any,
) -> tuple[list[float], dict[str, bool], dict[str, Any]]:
    """``repeat`` real expiries, each on the restored pristine table, each checked against Java's: the
    seconds, the checks and the last result document."""
    our_seconds: list[float] = []
    checks: dict[str, bool] = {}
    document: dict[str, Any] = {}
    for attempt in range(repeat):
        restore(warehouse, pristine)
        started = time.perf_counter()
        result = expire_snapshots(
            open_path_table(str(root)), dry_run=False, older_than=cutoff_ms, retain_last=1
        )
        our_seconds.append(time.perf_counter() - started)
        document = result.to_json()
        checks[f"ours{attempt}FilesEqualJava"] = disk(root) == java_disk
        checks[f"ours{attempt}SnapshotsAndRefsEqualJava"] = state(root) == java_state
        checks[f"ours{attempt}CountsEqualJava"] = document["javaCounts"] == java_counts

    return our_seconds, checks, document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--files-per-snapshot", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true", help="do not time the Spark job")
    parser.add_argument("--work", type=Path, help="build here (default: a temporary directory)")
    parser.add_argument("--reuse", action="store_true", help="reuse the pristine table already in --work")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-iceberg-expiry-"))
    warehouse = work / "warehouse"
    pristine = work / "pristine.tar"
    root = warehouse / "db" / "bench"
    build_seconds = None
    if not (args.reuse and pristine.exists()):
        shutil.rmtree(warehouse, ignore_errors=True)
        warehouse.mkdir(parents=True)
        build_seconds = round(build(warehouse, args.snapshots, args.files_per_snapshot), 1)
        with tarfile.open(pristine, "w") as archive:
            archive.add(warehouse, arcname=warehouse.name)
    restore(warehouse, pristine)
    cutoff_ms = int(time.time() * 1000)
    table = open_path_table(str(root))
    shape = {
        "snapshots": len(table.metadata.snapshots),
        "filesOnDisk": len(disk(root)),
        "metadataJsonBytes": os.path.getsize(table.metadata_location.removeprefix("file:")),
    }

    java_run = java(warehouse, cutoff_ms)
    java_disk, java_state = disk(root), state(root)
    java_counts = java_run["rows"][0]

    our_seconds, checks, document = _ours(
        args.repeat, warehouse, pristine, root, cutoff_ms, java_disk, java_state, java_counts
    )

    spark: dict[str, Any] = {}
    if not args.skip_spark:
        restore(warehouse, pristine)
        wall, job = spark_job(root, cutoff_ms, work / "spark")
        spark = {"wallSeconds": round(wall, 3), "jobSeconds": job["durationSeconds"]}
        checks["sparkFilesEqualJava"] = disk(root) == java_disk
        checks["sparkSnapshotsAndRefsEqualJava"] = state(root) == java_state
        checks["sparkCountsEqualJava"] = job["javaCounts"] == java_counts

    first, best = our_seconds[0], min(our_seconds)
    java_total = java_run["seconds"] + java_run["session_seconds"]
    figures: dict[str, Any] = {
        "table": {**shape, "expired": len(document["snapshotsExpired"]), "deleted": document["files"],
                  "manifestListsRead": document["manifestListsRead"], "manifestsRead": document["manifestsRead"],
                  "javaCounts": java_counts},
        "seconds": {
            "oursFirst": round(first, 3),
            "oursBest": round(best, 3),
            "oursMedian": round(statistics.median(our_seconds), 3),
            "java": java_run["seconds"],
            "javaSessionStart": java_run["session_seconds"],
            "spark": spark,
            "build": build_seconds,
        },
        "ratios": {
            "javaOverOursFirst": round(java_run["seconds"] / first, 2),
            "javaOverOursBest": round(java_run["seconds"] / best, 2),
        },
        "checks": checks,
        "repeat": args.repeat,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadAverage": [round(x, 2) for x in os.getloadavg()]},
    }  # fmt: skip
    if spark:
        figures["ratios"]["javaWithSessionOverSparkWall"] = round(java_total / spark["wallSeconds"], 2)
        figures["ratios"]["javaOverSparkJob"] = round(java_run["seconds"] / spark["jobSeconds"], 2)
    print(json.dumps(figures, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
