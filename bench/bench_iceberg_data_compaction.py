"""Iceberg data compaction: ours in-process against Java's ``rewrite_data_files``, the raw pyarrow floor and the
Spark job, on identical tables; peak RSS over one 2 GiB group (no timing assertions).

    .venv/bin/python bench/bench_iceberg_data_compaction.py [--files 2000] [--partitions 20] [--rows 2000]
        [--commits 100] [--mor-files 1000] [--mor-rows 2000] [--mor-commits 50] [--delete-rounds 2]
        [--big-gib 2] [--big-files 256] [--repeat 3] [--java-warm 1] [--skip-java] [--skip-spark]
        [--skip-memory] [--no-profile] [--rebuild] [--out bench/results/iceberg_data_compaction.json]

Needs ``.venv-iceberg`` (the Java oracle, ``tests/support/java_iceberg.py``). The tables
(``bench/support/iceberg_compaction_tables.py``) are written by Java Iceberg 1.10.2 through Spark SQL, cached
under ``bench/.work/iceberg-data-compaction/`` and restored at the same path before every run:

* ``small``: ``--files`` small files in ``--partitions`` partitions from ``--commits`` inserts;
* ``mor``: merge-on-read, ``--mor-files`` data files, each with one position-delete file after
  ``--delete-rounds`` SQL DELETEs (Java merges a file's earlier deletes into the new one);
* ``big``: one partition of ``--big-files`` files, ``--big-gib`` GiB together (the memory run).

Measured for ``small`` and ``mor``, in one run:

* ``java``: ``rewrite_data_files`` on ``local[2]``, one cold-JVM run and ``--java-warm`` warm runs, timed inside
  the JVM (session start excluded, reported apart; ``bench/support/iceberg_compaction_table_runs.py``);
* ``ours``: ``open_table(root).maintenance.compact_data(options=...)`` in this process, measured last (its result
  stays for Java to read), after one untimed run under cProfile (``bench/results/iceberg_data_compaction.profile.txt``);
* ``floor``: pyarrow reading the same input files (position deletes applied) and writing one file per partition;
  ``--repeat`` rounds of (floor, ours), interleaved so both see the same load, the best of each counts;
* ``spark``: the ``compact_data`` Spark job (``spark-submit --master local[2]``), if it handles Iceberg tables.

The same options go to both sides (``remove-dangling-deletes`` on the merge-on-read table). Ratios:
``javaOverOurs`` (target >= 3), ``floorOverOurs`` (target >= 0.7), ``javaOverSparkJob`` (target >= 1).
The memory run compacts ``big`` in a subprocess with ``max-file-group-size-bytes`` above its size (one group) and
reports its peak RSS (VmHWM, ``bench/support/memory.py``; target <= 600 MiB); its live copy is removed after.

Checks (any false one exits 1): every table, before and after every run of every side, holds exactly the rows its
generation left (count, sum of ids, sum of mixed ids: before-minus-deleted), read through pyiceberg; ours leaves
one data file per partition and no delete file, no more than Java leaves; Java reads our result (count and sum of
ids); the floor wrote every live row.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.iceberg_compaction_table_runs import java_reads, java_runs, raw_floor
from bench.support.iceberg_compaction_tables import (
    WORK,
    TableShape,
    drop_live,
    ensure_tables,
    expected_checksum,
    file_facts,
    restore,
    table_checksum,
)
from bench.support.runs import REPO_ROOT, RESULTS_DIR, MiB, load_average, machine_facts, write_result

RESULT_PATH = RESULTS_DIR / "iceberg_data_compaction.json"
PROFILE_PATH = RESULTS_DIR / "iceberg_data_compaction.profile.txt"
TARGETS = {"javaOverOurs": 3.0, "floorOverOurs": 0.7, "javaOverSparkJob": 1.0, "peakRssMiB": 600}
SPARK_JOB = REPO_ROOT / "airflow_lakeformat" / "spark" / "jobs" / "compact_data.py"


def options_for(shape: TableShape) -> dict[str, str]:
    """The options both sides get: Java's defaults, plus removing the deletes a rewrite leaves dangling."""
    return {"remove-dangling-deletes": "true"} if shape.kind == "mor" else {}


def table_facts(shape: TableShape) -> dict[str, Any]:
    """The live table's row checksum and file counts (read after a run, untimed)."""
    from bench.support.iceberg_compaction_tables import live_root

    root = live_root(shape)
    return {"checksum": table_checksum(root), **file_facts(root)}


def _ours_once(shape: TableShape) -> tuple[float, dict[str, Any]]:
    from airflow_lakeformat.core.tables import open_table

    root = restore(shape)
    started = time.perf_counter()
    result = open_table(str(root)).maintenance.compact_data(options=options_for(shape))
    seconds = time.perf_counter() - started
    return seconds, result.to_json()


def _profile(shape: TableShape) -> str:
    """One more run of ours under cProfile: the top functions by cumulative and by internal time."""
    from airflow_lakeformat.core.tables import open_table

    root = restore(shape)
    profiler = cProfile.Profile()
    profiler.enable()
    open_table(str(root)).maintenance.compact_data(options=options_for(shape))
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    text.write(f"==== {shape.name}: by cumulative time ====\n")
    stats.sort_stats("cumulative").print_stats(30)
    text.write(f"==== {shape.name}: by internal time ====\n")
    stats.sort_stats("tottime").print_stats(25)
    return text.getvalue()


def measure_ours_and_floor(
    shape: TableShape, repeat: int, expected: dict[str, int]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, bool]]:
    """``repeat`` rounds of one floor run then one run of ours, each on the restored table; ours checked after
    each run. Interleaved, so that both sides see the same load; the best of each counts."""
    ours_runs, floor_runs, ours_loads = [], [], []
    checks: dict[str, bool] = {}
    document: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    floor: dict[str, Any] = {}
    for attempt in range(repeat):
        print(f"{shape.name}: round {attempt + 1}/{repeat}: floor, ours", file=sys.stderr)
        floor = raw_floor(restore(shape), WORK / "floor-out")
        floor_runs.append(round(floor["seconds"], 3))
        ours_loads.append(load_average())
        seconds, document = _ours_once(shape)
        ours_runs.append(round(seconds, 3))
        facts = table_facts(shape)
        checks[f"ours{attempt}RowsAsGenerated"] = facts["checksum"] == expected
        checks[f"ours{attempt}OneDataFilePerPartition"] = facts["dataFiles"] == shape.partitions
        checks[f"ours{attempt}NoDeleteFileLeft"] = facts["deleteFiles"] == 0
    checks["floorWroteEveryLiveRow"] = floor["rows"] == expected["count"]
    keep = (
        "groupsCommitted",
        "filesRewritten",
        "filesAdded",
        "bytesAdded",
        "rowsPurged",
        "deleteFilesRemoved",
    )
    ours = {"seconds": ours_runs, "best": min(ours_runs), "result": {k: document.get(k) for k in keep},
            "after": facts, "loadAverage": ours_loads}  # fmt: skip
    floor_figures = {"seconds": floor_runs, "best": min(floor_runs), "bytes": floor["bytes"],
                     "files": floor["files"]}  # fmt: skip
    return ours, floor_figures, checks


def measure_java(
    shape: TableShape, warm: int, expected: dict[str, int]
) -> tuple[dict[str, Any], dict[str, bool]]:
    """Java's cold and warm runs, each result checked before the table is restored."""
    print(f"{shape.name}: Java rewrite_data_files, 1 cold + {warm} warm", file=sys.stderr)
    loads = [load_average()]
    java = java_runs(shape, options_for(shape), warm, lambda _: table_facts(shape), WORK / "signals")
    loads.append(load_average())
    checks = {}
    for index, run in enumerate(java["runs"]):
        checks[f"java{index}RowsAsGenerated"] = run["facts"]["checksum"] == expected
    seconds = [r["seconds"] for r in java["runs"]]
    java.update(cold=seconds[0], warmBest=min(seconds[1:]) if warm else None, loadAverage=loads)
    return java, checks


def measure_spark(shape: TableShape, expected: dict[str, int]) -> tuple[dict[str, Any], dict[str, bool]]:
    """The Spark job on the restored table, when it handles Iceberg tables; else a labelled 'not measured'."""
    if "iceberg" not in SPARK_JOB.read_text(encoding="utf-8").lower():
        return {"notMeasured": "job not available: spark/jobs/compact_data.py handles Paimon tables only"}, {}
    from bench.support.spark import spark_submit

    root = restore(shape)
    args = [a for k, v in options_for(shape).items() for a in ("--option", f"{k}={v}")]
    print(f"{shape.name}: Spark job", file=sys.stderr)
    try:
        document = spark_submit("compact_data", str(root), args, WORK)
    except RuntimeError as exc:
        return {"notMeasured": f"job not available: it failed on this table: {str(exc)[-1500:]}"}, {}
    facts = table_facts(shape)
    job, session = document.get("durationSeconds"), document.get("sessionSeconds")
    figures = {
        "wallSeconds": round(document["wallSeconds"], 3),
        "jobSeconds": job,
        "sessionSeconds": session,
        # the job's work after its Spark session is up: what Java's time-call measures on its side
        "jobWithoutSessionSeconds": round(job - session, 3) if job and session is not None else job,
        "after": facts,
        "loadAverage": load_average(),
    }
    checks = {
        "sparkRowsAsGenerated": facts["checksum"] == expected,
        "sparkOneDataFilePerPartition": facts["dataFiles"] == shape.partitions,
    }
    return figures, checks


def measure_table(shape: TableShape, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, bool], str]:
    """Every side on one table: figures, checks and the profile text."""
    expected = expected_checksum(shape)
    restore(shape)
    before = table_facts(shape)
    checks = {"pristineRowsAsGenerated": before["checksum"] == expected}
    figures: dict[str, Any] = {"before": before, "expected": expected, "options": options_for(shape)}
    if not args.skip_java:
        figures["java"], more = measure_java(shape, args.java_warm, expected)
        checks |= more
    if not args.skip_spark:
        figures["spark"], more = measure_spark(shape, expected)
        checks |= more
    profile = "" if args.no_profile else _profile(shape)
    if args.no_profile:
        _ours_once(shape)  # untimed warm-up (the profiled run is one): first imports, compiled regexes
    # ours last: its last result stays on disk for Java to read (java_reads, at the end of the run)
    figures["ours"], figures["floor"], more = measure_ours_and_floor(shape, args.repeat, expected)
    checks |= more
    figures["ratios"] = ratios(figures)
    if "java" in figures:
        java_after = figures["java"]["runs"][-1]["facts"]
        after = figures["ours"]["after"]
        checks["oursNoMoreDataFilesThanJava"] = after["dataFiles"] <= java_after["dataFiles"]
        checks["oursNoMoreDeleteFilesThanJava"] = after["deleteFiles"] <= java_after["deleteFiles"]
    return figures, checks, profile


def ratios(figures: dict[str, Any]) -> dict[str, Any]:
    ours = figures["ours"]["best"]
    found: dict[str, Any] = {"floorOverOurs": round(figures["floor"]["best"] / ours, 3)}
    java = figures.get("java")
    if java:
        found["javaOverOurs"] = round((java["warmBest"] or java["cold"]) / ours, 2)
        found["javaColdOverOurs"] = round(java["cold"] / ours, 2)
        found["javaColdPlusSessionOverOurs"] = round((java["cold"] + java["sessionSeconds"]) / ours, 2)
        spark = figures.get("spark", {})
        if spark.get("jobWithoutSessionSeconds"):
            # both on a fresh JVM, session start excluded on both sides
            found["javaOverSparkJob"] = round(java["cold"] / spark["jobWithoutSessionSeconds"], 2)
            found["javaWarmOverSparkJob"] = round(
                (java["warmBest"] or java["cold"]) / spark["jobWithoutSessionSeconds"], 2
            )
            found["javaPlusSessionOverSparkJobWithSession"] = round(
                (java["cold"] + java["sessionSeconds"]) / spark["jobSeconds"], 2
            )
    return found


def worker_memory(root: str, options: str) -> None:
    """The memory run's subprocess: compact the table, print peak RSS (VmHWM) around the run as JSON."""
    from airflow_lakeformat.core.tables import open_table
    from bench.support.memory import memory_around

    table = open_table(root)
    started = time.perf_counter()
    result, memory = memory_around(lambda: table.maintenance.compact_data(options=json.loads(options)))
    seconds = time.perf_counter() - started
    print(
        json.dumps({"seconds": round(seconds, 3), "memory": memory, "result": result.to_json()}, default=str)
    )


def measure_memory(shape: TableShape) -> tuple[dict[str, Any], dict[str, bool]]:
    """Compact the one-group table in a subprocess; its peak RSS, then the checks; the live copy removed."""
    from bench.support.runs import run_json

    root = restore(shape)
    before = file_facts(root)
    options = {"max-file-group-size-bytes": str(max(3 * 2**30, int(before["dataBytes"] * 1.5)))}
    print(f"{shape.name}: memory run over {before['dataBytes'] / MiB:.0f} MiB in one group", file=sys.stderr)
    load = load_average()
    document = run_json([sys.executable, __file__, "--worker-memory", str(root), json.dumps(options)])
    facts = table_facts(shape)
    drop_live(shape)
    groups = document["result"].get("groups") or []
    memory = document["memory"]
    figures = {
        "inputBytes": before["dataBytes"], "inputFiles": before["dataFiles"], "options": options,
        "groups": len(groups) if isinstance(groups, list) else groups, "seconds": document["seconds"],
        "peakRssMiB": round(memory["high_water_bytes"] / MiB, 1),
        "peakRssAboveStartMiB": round(memory["high_water_delta_bytes"] / MiB, 1),
        "rssBeforeMiB": round(memory["rss_before_bytes"] / MiB, 1), "after": facts, "loadAverage": [load, load_average()],
    }  # fmt: skip
    checks = {
        "memoryRowsAsGenerated": facts["checksum"] == expected_checksum(shape),
        "memoryOneGroup": figures["groups"] == 1,
        "memoryPeakReset": bool(memory["high_water_reset"]),
    }
    return figures, checks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add = parser.add_argument
    add("--files", type=int, default=2000)
    add("--partitions", type=int, default=20)
    add("--rows", type=int, default=2000, help="rows per small file")
    add("--commits", type=int, default=100)
    add("--mor-files", type=int, default=1000)
    add("--mor-rows", type=int, default=2000)
    add("--mor-commits", type=int, default=50)
    add("--delete-rounds", type=int, default=2)
    add("--big-gib", type=float, default=2.0)
    add("--big-files", type=int, default=256)
    add("--repeat", type=int, default=3, help="rounds of (floor, ours)")
    add("--java-warm", type=int, default=1)
    add("--only", choices=("small", "mor", "memory"), action="append", help="measure only these (repeatable)")
    for flag in ("--skip-java", "--skip-spark", "--skip-memory", "--no-profile", "--rebuild"):
        add(flag, action="store_true")
    add("--out", type=Path, help=f"result file (the full run's: {RESULT_PATH.relative_to(REPO_ROOT)})")
    add("--worker-memory", nargs=2, metavar=("ROOT", "OPTIONS"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def shapes(args: argparse.Namespace) -> tuple[list[TableShape], TableShape]:
    small = TableShape("small", args.files, args.partitions, args.rows, args.commits)
    mor = TableShape(
        "mor", args.mor_files, args.partitions, args.mor_rows, args.mor_commits, args.delete_rounds
    )
    tables = [s for s in (small, mor) if not args.only or s.kind in args.only]
    return tables, TableShape("big", args.big_files, partitions=1, gib=args.big_gib)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker_memory:
        worker_memory(*args.worker_memory)
        return 0
    tables, big = shapes(args)
    args.skip_memory = args.skip_memory or bool(args.only and "memory" not in args.only)
    started_load = load_average()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    built = ensure_tables([*tables, *([] if args.skip_memory else [big])], rebuild=args.rebuild)
    figures: dict[str, Any] = {"tables": {}, "targets": TARGETS, "built": built}
    checks: dict[str, bool] = {}
    profiles = []
    for shape in tables:
        table_figures, table_checks, profile = measure_table(shape, args)
        figures["tables"][shape.kind] = table_figures
        checks |= {f"{shape.kind}.{k}": v for k, v in table_checks.items()}
        profiles.append(profile)
    if not args.skip_java and tables:
        seen = java_reads(tables)
        for shape in tables:
            expected = figures["tables"][shape.kind]["expected"]
            checks[f"{shape.kind}.javaReadsOurResult"] = seen[shape.name] == {
                "count": expected["count"], "idSum": expected["idSum"]
            }  # fmt: skip
        figures["javaReadsOurs"] = seen
    if not args.skip_memory:
        figures["memory"], more = measure_memory(big)
        checks |= more
    figures |= {"checks": checks, "machine": {**machine_facts(), "uptimeAtStart": uptime,
                "loadAverageAtStart": started_load, "loadAverageAtEnd": load_average()}}  # fmt: skip
    print(json.dumps(figures, indent=2))
    out = args.out
    if out:
        write_result(out, figures)
    if profiles and any(profiles) and out:
        out.with_name(out.stem + ".profile.txt").write_text("\n".join(profiles), encoding="utf-8")
    failed = [k for k, v in checks.items() if not v]
    if failed:
        print(f"bench_iceberg_data_compaction: checks failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
