"""Iceberg orphan cleanup: our in-process dry run against Java's ``remove_orphan_files(dry_run => true)``.

    .venv/bin/python bench/bench_iceberg_orphans.py [--snapshots 2000] [--files-per-snapshot 10]
        [--orphans 500] [--repeat 3] [--work DIR] [--out bench/results/iceberg_orphans.json]

Needs ``.venv-iceberg`` (the Java Iceberg 1.10.2 oracle, ``tests/support/java_iceberg.py``). The table is the
one of the reference's anchor figures, built by Java in the oracle's Hadoop catalog at
``<work>/warehouse/db/bench``: ``--snapshots`` Java-API appends (``newAppend``: Java's commit-time manifest
merge) of ``--files-per-snapshot`` files each (one per ``category`` partition), a metadata-only SQL
``DELETE`` of half the partitions (half the files), then 3 SQL inserts. Then ``--orphans`` files are planted
(four in five under the partition directories, the rest as stray manifests and manifest lists in
``metadata/``) and every file is aged ten days.

Timed on the same table in the same run:

* ours: ``open_path_table`` + ``remove_orphan_files(dry_run=True)`` (list, valid set, join, the re-check of
  the dry-run batch), in this process, ``--repeat`` times (the first run and the best are reported), after
  the imports (timed apart, like Java's session start);
* Java: ``CALL hc.system.remove_orphan_files(table => 'db.bench', dry_run => true, older_than => ...)`` on
  Spark ``local[2]``, timed inside the session (the session start is reported apart), twice in one JVM
  (cold, then warm) with Java's default JIT and GC, then once more in a session with the oracle's test
  settings (C1 only, serial GC), the JVM the tests use;
* the Spark job ``remove_orphan_files --dry-run`` through ``spark-submit --master local[2]`` (unless
  ``--skip-spark``): its wall clock, JVM and session start included, against Java's procedure plus its
  session start (the job's own ``durationSeconds`` is reported too).

The ratios are Java's seconds over ours. Checks (any false one exits 1): our orphans (in-process and the
Spark job's) equal Java's (cold and warm) and equal exactly the planted ones. No timing threshold is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.iceberg.metadata.location import LocationNormaliser

CATEGORIES = 10
OLD = 10 * 86400
JAVA_DEFAULT_JIT_AND_GC = "-XX:TieredStopAtLevel=4 -XX:-UseSerialGC -XX:+UseG1GC"


def build(warehouse: Path, snapshots: int, files_per_snapshot: int) -> dict[str, Any]:
    """The table, built by Java (see the module docstring); returns the oracle's timings."""
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
    return {"buildSeconds": round(time.perf_counter() - started, 1)}


def plant(root: Path, count: int) -> set[str]:
    """``count`` orphans (local paths); then every file under ``root`` is aged ten days."""
    rng = random.Random(42)
    partitions = sorted(p for p in (root / "data").iterdir() if p.is_dir())
    planted = set()
    for i in range(count):
        if i % 5:
            path = rng.choice(partitions) / f"00000-{i}-orphan-{rng.getrandbits(64):016x}-00001.parquet"
        elif i % 10:
            path = root / "metadata" / f"{rng.getrandbits(64):016x}-orphan-{i}-m0.avro"
        else:
            path = root / "metadata" / f"snap-{rng.getrandbits(62)}-1-orphan-{i}.avro"
        path.write_bytes(b"PAR1 planted orphan PAR1")
        planted.add(str(path))
    stamp = time.time() - OLD
    for directory, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(directory, name), (stamp, stamp))
    return planted


def on_disk(root: Path) -> dict[str, int]:
    files = [Path(d) / n for d, _, names in os.walk(root) for n in names]
    return {"files": len(files), "hiddenCrc": sum(1 for f in files if f.name.startswith("."))}


def warm_imports() -> float:
    """Import what opening a table imports (pyiceberg's pyarrow FileIO pulls in pyarrow.dataset and pandas)
    before the timed runs: the analogue of the Spark session start, reported apart. Without byte-code
    caches (``PYTHONDONTWRITEBYTECODE``) this alone takes seconds."""
    started = time.perf_counter()
    import pyiceberg.io.pyarrow  # noqa: F401

    from airflow_lakeformat.core.iceberg.reach import reachability  # noqa: F401

    return time.perf_counter() - started


def ours(root: Path, now: float, repeat: int) -> tuple[list[float], dict[str, Any]]:
    seconds, document = [], {}
    for _ in range(repeat):
        started = time.perf_counter()
        table = open_path_table(str(root))
        result = remove_orphan_files(table, clock=lambda: now, sample_limit=10**9)
        seconds.append(time.perf_counter() - started)
        document = result.to_json()
    return seconds, document


def java(warehouse: Path, cutoff_ms: int, default_jvm: bool = True, calls: int = 2) -> list[dict[str, Any]]:
    """Java's dry run ``calls`` times in one session: with Java's default JIT and GC, or with the oracle's
    test settings (C1 only, serial GC: quicker to start, the JVM the tests and the reference figure used)."""
    from tests.support.java_iceberg import run_oracle_batch

    arguments = json.dumps({"dry_run": True, "older_than": {"timestamp_ms": cutoff_ms}})
    call = ["time-call", "--procedure", "remove_orphan_files", "--table", "db.bench", "--args", arguments]
    conf = {"spark.driver.extraJavaOptions": JAVA_DEFAULT_JIT_AND_GC} if default_jvm else None
    result: list[dict[str, Any]] = run_oracle_batch(
        [call] * calls, warehouse=warehouse, conf=conf, timeout=3600
    )
    return result


def spark_job(root: Path, work: Path) -> tuple[float, dict[str, Any]]:
    """The ``remove_orphan_files`` Spark job's dry run on ``local[2]``: (wall seconds, its result)."""
    from tests.support.spark import run_job

    started = time.perf_counter()
    run = run_job("remove_orphan_files", str(root), "--dry-run", "--older-than", "3 d", work_dir=work)
    seconds = time.perf_counter() - started
    if run.returncode != 0 or run.result is None:
        raise RuntimeError(run.describe())
    return seconds, run.result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--files-per-snapshot", type=int, default=10)
    parser.add_argument("--orphans", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, help="build here (default: a temporary directory)")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--skip-spark", action="store_true", help="do not time the Spark job")
    parser.add_argument(
        "--reuse", action="store_true", help="use the table already built in --work (for quick re-runs)"
    )
    return parser


def _others(
    skip_spark: bool, warehouse: Path, root: Path, work: Path, cutoff: float
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, set[str]]]:
    """Java's procedure (a cold and a warm call, and a cold call in the oracle's JVM) and the Spark job
    (unless skipped): their runs, and the orphan paths each found (as the store sees them)."""
    normaliser = LocationNormaliser()
    cold, warm = java(warehouse, int(cutoff * 1000))
    (oracle_jvm,) = java(warehouse, int(cutoff * 1000), default_jvm=False, calls=1)
    found = {
        "javaCold": {normaliser.parse(r["orphan_file_location"]).path for r in cold["rows"]},
        "javaWarm": {normaliser.parse(r["orphan_file_location"]).path for r in warm["rows"]},
        "javaOracle": {normaliser.parse(r["orphan_file_location"]).path for r in oracle_jvm["rows"]},
    }
    spark: dict[str, Any] = {}
    if not skip_spark:
        wall, job = spark_job(root, work / "spark")
        spark = {"wallSeconds": round(wall, 3), "jobSeconds": job.get("durationSeconds")}
        found["spark"] = {normaliser.parse(p).path for p in job["orphanPaths"]}
    return cold, warm, oracle_jvm, spark, found


def _ratios(
    cold: dict[str, Any],
    warm: dict[str, Any],
    oracle_jvm: dict[str, Any],
    spark: dict[str, Any],
    first: float,
    best: float,
) -> dict[str, Any]:
    """Java's seconds over ours (and, with the Spark job, Java with its session start over the job's wall time)."""
    return {
        "javaColdOverOursFirst": round(cold["seconds"] / first, 2),
        "javaColdOverOursBest": round(cold["seconds"] / best, 2),
        "javaWarmOverOursBest": round(warm["seconds"] / best, 2),
        "javaColdOracleJvmOverOursFirst": round(oracle_jvm["seconds"] / first, 2),
        **(
            {"javaWithSessionOverSparkJobWall": round(
                (cold["seconds"] + cold["session_seconds"]) / spark["wallSeconds"], 2)}
            if spark else {}
        ),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.files_per_snapshot > CATEGORIES * 100:
        parser.error("--files-per-snapshot is at most 1000")

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-iceberg-orphans-"))
    warehouse = work / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    root = warehouse / "db" / "bench"
    if args.reuse and (root / "metadata").is_dir():
        built = {"buildSeconds": None}
    else:
        built = build(warehouse, args.snapshots, args.files_per_snapshot)
    planted = plant(root, args.orphans)
    imports = warm_imports()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    now = time.time()
    cutoff = now - 3 * 86400
    table = open_path_table(str(root))
    shape = {
        "snapshots": len(table.metadata.snapshots),
        "metadataJsonBytes": os.path.getsize(table.metadata_location.removeprefix("file:")),
        **on_disk(root),
        "plantedOrphans": len(planted),
    }

    our_seconds, document = ours(root, now, args.repeat)
    cold, warm, oracle_jvm, spark, found = _others(args.skip_spark, warehouse, root, work, cutoff)
    ours_set = {LocationNormaliser().parse(p).path for p in document["orphanPaths"]}
    java_cold, java_warm, java_oracle = found["javaCold"], found["javaWarm"], found["javaOracle"]
    checks = {
        "oursEqualsJavaCold": ours_set == java_cold,
        "oursEqualsJavaWarm": ours_set == java_warm,
        "oursEqualsJavaOracleJvm": ours_set == java_oracle,
        "oursEqualsPlanted": ours_set == planted,
        "exactlyThePlantedCount": len(ours_set) == args.orphans,
    }
    if spark:
        checks["sparkJobEqualsJavaCold"] = found["spark"] == java_cold
    first, best = our_seconds[0], min(our_seconds)
    figures = {
        "table": {**shape, "liveFiles": None, "validFiles": document["validFiles"],
                  "manifestsRead": document["manifestsRead"], "manifestListsRead": document["manifestListsRead"],
                  "filesListed": document["filesListed"]},
        "seconds": {
            "oursFirst": round(first, 3),
            "oursBest": round(best, 3),
            "oursMedian": round(statistics.median(our_seconds), 3),
            "javaColdJvm": cold["seconds"],
            "javaWarmJvm": warm["seconds"],
            "javaColdOracleJvm": oracle_jvm["seconds"],
            "javaSessionStart": cold["session_seconds"],
            "oursImports": round(imports, 3),
            "sparkJob": spark,
            **built,
        },
        "ratios": _ratios(cold, warm, oracle_jvm, spark, first, best),
        "checks": checks,
        "repeat": args.repeat,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadAverageAtStart": load_at_start,
            "loadAverageAtEnd": [round(x, 2) for x in os.getloadavg()],
        },
    }  # fmt: skip
    figures["table"]["liveFiles"] = _live_files(root)
    print(json.dumps(figures, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0 if all(checks.values()) else 1


def _live_files(root: Path) -> int:
    from airflow_lakeformat.core.iceberg.metadata.files import files_document

    return len(files_document(open_path_table(str(root)))["files"])


if __name__ == "__main__":
    sys.exit(main())
