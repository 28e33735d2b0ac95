"""Paimon primary-key full compaction: ours in-process against the raw pyarrow floor, peak RSS per bucket, and the
Spark job when it takes primary-key tables (issue 27's benchmark; no timing assertions).

    .venv/bin/python bench/bench_paimon_pk_compaction.py [--rows 2000000] [--files 400] [--buckets 8]
        [--repeat 5] [--quick] [--skip-spark] [--no-profile] [--rebuild] [--out PATH]

The table (``bench/support/pk_compaction_table.py``): a deduplicate primary-key table of ``--rows`` rows in
``--files`` level-0 files over ``--buckets`` buckets (inserts, several updates of a hot key set across files, 6 %
deletes of the updates), written with the compaction's KV writer, one APPEND snapshot per round of files, cached
under ``bench/.work/paimon-pk-compaction/`` and copied afresh before every round. ``--quick``: 200,000 rows in 40
files over 4 buckets, 2 rounds.

Each measurement runs in its own child process (``--worker``), timed inside it after its imports (the
compaction's modules are imported before the clock starts, as in a long-lived worker), with its peak RSS
(VmHWM reset before the run, ``bench/support/memory.py``):

* ``floor``: per bucket, pyarrow reads every file, sorts by key and sequence number, keeps the last row per key,
  drops -U/-D rows and writes one Parquet file (zstd 1, the table's codec); no metadata;
* ``ours``: ``open_table(path).maintenance.compact_data(mode="full")``: plan, per bucket read_kv -> merge_kv ->
  write_kv at the max level, the COMPACT commit;
* ``spark``: ``spark-submit --master local[2]`` of the ``compact_data`` job, only if the job handles primary-key
  tables (else reported as not available, with the reason).

``--repeat`` rounds of (floor, ours) on the same fresh copy, interleaved so that both see the same load; the
medians count, ``oursOverFloor`` = median(ours) / median(floor) (issue 27: <= 1.5). One more run of ours under
cProfile writes ``bench/results/paimon_pk_compaction.profile.txt``.

Checks (any false one exits 1): the floor's rows and every compacted table's rows equal the answer computed from
the generated events (sha256 over key, sequence number, kind and values of the live rows); the compacted table
has one sorted run at the max level per bucket, no -U/-D row left, and as many rows as distinct live keys.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.memory import memory_around
from bench.support.pk_compaction_table import (
    WORK,
    Shape,
    bucket_files,
    compacted_facts,
    ensure_table,
    floor_checksum,
    raw_floor,
    restore,
)
from bench.support.runs import (
    REPO_ROOT,
    RESULTS_DIR,
    MiB,
    load_average,
    machine_facts,
    run_json,
    write_result,
)

RESULT_PATH = RESULTS_DIR / "paimon_pk_compaction.json"
PROFILE_PATH = RESULTS_DIR / "paimon_pk_compaction.profile.txt"
TARGET_OURS_OVER_FLOOR = 1.5
LIVE = WORK / "live"
FLOOR_OUT = WORK / "floor-out"
SPARK_JOB = REPO_ROOT / "airflow_lakeformat" / "spark" / "jobs" / "compact_data.py"


# -- workers (child processes) ---------------------------------------------------------------------


def _import_ours() -> None:
    """The compaction's modules, imported before the clock starts (a worker process has them loaded)."""
    import airflow_lakeformat.core.paimon.merge_tree.compaction
    import airflow_lakeformat.core.paimon.merge_tree.kv_files
    import airflow_lakeformat.core.paimon.merge_tree.merge_engines
    import airflow_lakeformat.core.paimon.merge_tree.merge_spec
    import airflow_lakeformat.core.tables  # noqa: F401


def _compact(live: str) -> dict[str, Any]:
    from airflow_lakeformat.core.tables import open_table

    document: dict[str, Any] = open_table(live).maintenance.compact_data(mode="full").to_json()
    return document


def _import_pandas() -> float:
    """Import pandas before the clock, in every worker alike; its seconds. pyarrow imports it lazily on the first
    ``pa.array`` of a NumPy array (the merge does that), and in a venv without byte code (PYTHONDONTWRITEBYTECODE)
    that costs seconds, once per process, whatever the table's size: reported apart, not timed."""
    started = time.perf_counter()
    import pandas  # noqa: F401

    return round(time.perf_counter() - started, 3)


def _arrow_peak() -> int:
    """The most bytes pyarrow's memory pool held at once in this process (the Arrow data, without the allocator's
    cached pages that RSS also counts)."""
    import pyarrow as pa

    return int(pa.default_memory_pool().max_memory() or 0)


def worker(kind: str, live: str) -> dict[str, Any]:
    """One measurement in this (child) process: seconds and the memory figures."""
    pandas_seconds = _import_pandas()
    if kind == "floor":
        files = bucket_files(Path(live))  # planning is not part of the floor
        started = time.perf_counter()
        floor, memory = memory_around(lambda: raw_floor(files, FLOOR_OUT))
        memory["arrow_pool_max_bytes"] = _arrow_peak()
        return {"seconds": time.perf_counter() - started, "floor": floor, "memory": memory,
                "pandasImportSeconds": pandas_seconds}  # fmt: skip
    _import_ours()
    if kind == "profile":
        profiler = cProfile.Profile()
        profiler.enable()
        _compact(live)
        profiler.disable()
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        text.write("==== by cumulative time ====\n")
        stats.sort_stats("cumulative").print_stats(35)
        text.write("==== by internal time ====\n")
        stats.sort_stats("tottime").print_stats(30)
        PROFILE_PATH.write_text(text.getvalue(), encoding="utf-8")
        return {}
    started = time.perf_counter()
    result, memory = memory_around(lambda: _compact(live))
    memory["arrow_pool_max_bytes"] = _arrow_peak()
    return {"seconds": time.perf_counter() - started, "result": result, "memory": memory,
            "pandasImportSeconds": pandas_seconds}  # fmt: skip


def _child(kind: str, live: Path) -> dict[str, Any]:
    return run_json([sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(live)])


# -- the parent ------------------------------------------------------------------------------------


def input_facts(root: Path) -> dict[str, Any]:
    """Files, bytes on disk and bytes in Arrow of every bucket (untimed): what "bounded per bucket" compares."""
    import pyarrow.parquet as pq

    per_bucket = []
    for bucket, paths in sorted(bucket_files(root).items()):
        arrow = sum(pq.read_table(p).nbytes for p in paths)
        per_bucket.append({"bucket": bucket, "files": len(paths), "bytes": sum(p.stat().st_size for p in paths),
                           "arrowBytes": arrow})  # fmt: skip
    largest = max(per_bucket, key=lambda b: b["arrowBytes"])
    return {
        "files": sum(b["files"] for b in per_bucket),
        "bytes": sum(b["bytes"] for b in per_bucket),
        "arrowBytes": sum(b["arrowBytes"] for b in per_bucket),
        "largestBucket": largest,
        "buckets": per_bucket,
    }


def _memory_figures(memory: dict[str, Any]) -> dict[str, float]:
    return {
        "arrowPoolPeakMiB": round(memory["arrow_pool_max_bytes"] / MiB, 1),
        "peakRssMiB": round(memory["high_water_bytes"] / MiB, 1),
        "peakOverStartMiB": round(memory["high_water_delta_bytes"] / MiB, 1),
        "rssBeforeMiB": round(memory["rss_before_bytes"] / MiB, 1),
    }


def measure_rounds(
    shape: Shape, repeat: int, facts: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, bool]]:
    """``repeat`` rounds of (floor, ours) on a fresh copy each; every result checked against the answer."""
    floor_s, ours_s, loads, ours_mem, floor_mem, pandas_s = [], [], [], [], [], []
    checks: dict[str, bool] = {}
    after: dict[str, Any] = {}
    result: dict[str, Any] = {}
    for attempt in range(repeat):
        print(f"round {attempt + 1}/{repeat}: floor, ours", file=sys.stderr)
        live = restore(shape, LIVE)
        loads.append(load_average())
        floor = _child("floor", live)
        floor_s.append(round(floor["seconds"], 3))
        floor_mem.append(_memory_figures(floor["memory"]))
        checks[f"floor{attempt}RowsAsGenerated"] = floor_checksum(FLOOR_OUT) == facts["checksum"]
        ours = _child("ours", live)
        ours_s.append(round(ours["seconds"], 3))
        ours_mem.append(_memory_figures(ours["memory"]))
        pandas_s.append(ours["pandasImportSeconds"])
        result = ours["result"]
        after = compacted_facts(live)
        checks[f"ours{attempt}RowsAsGenerated"] = after["checksum"] == facts["checksum"]
        checks[f"ours{attempt}OneSortedRunAtMaxLevelPerBucket"] = after["oneSortedRunAtMaxLevelPerBucket"]
        checks[f"ours{attempt}RowsEqualLiveKeys"] = after["rows"] == facts["liveKeys"]
        checks[f"ours{attempt}NoRetractionLeft"] = after["retractionsLeft"] == 0
    ours_median, floor_median = statistics.median(ours_s), statistics.median(floor_s)
    keep = ("groups", "filesRewritten", "filesUpgraded", "filesWritten", "bytesRewritten", "bytesWritten",
            "rowsRewritten", "rowsWritten", "deletesDropped", "durationSeconds")  # fmt: skip
    figures = {
        "floor": {"seconds": floor_s, "median": floor_median, "memory": floor_mem},
        "ours": {"seconds": ours_s, "median": ours_median, "memory": ours_mem,
                 "result": {k: result.get(k) for k in keep}, "after": {k: v for k, v in after.items() if k != "checksum"}},
        "oursOverFloor": round(ours_median / floor_median, 3),
        "oursOverFloorPerRound": [round(o / f, 3) for o, f in zip(ours_s, floor_s, strict=True)],
        "loadAverageAtRounds": loads,
        "pandasImportSecondsUntimed": pandas_s,
    }  # fmt: skip
    return figures, checks


def measure_spark(shape: Shape, facts: dict[str, Any], skip: bool) -> tuple[dict[str, Any], dict[str, bool]]:
    """The Spark job on a fresh copy, when it handles primary-key tables; else 'not available' and why."""
    if skip:
        return {"notAvailable": "skipped (--skip-spark)"}, {}
    job = SPARK_JOB.read_text(encoding="utf-8")
    if "--full" not in job:
        return {"notAvailable": "the compact_data Spark job does not take primary-key tables yet (no --full; "
                "the operator refuses execution='spark' for them)"}, {}  # fmt: skip
    from bench.support.spark import spark_submit

    live = restore(shape, LIVE)
    args = ["--full"]
    print("spark: compact_data job on local[2]", file=sys.stderr)
    load = load_average()
    try:
        document = spark_submit("compact_data", str(live), args, WORK)
    except RuntimeError as exc:
        return {"notAvailable": f"the job failed on this table: {str(exc)[-1500:]}"}, {}
    after = compacted_facts(live)
    figures = {
        "args": args,
        "wallSeconds": round(document["wallSeconds"], 3),
        "jobSeconds": document.get("durationSeconds"),
        "sessionSeconds": document.get("sessionSeconds"),
        "result": {k: document.get(k) for k in ("groups", "filesRewritten", "filesWritten", "rowsWritten")},
        "loadAverage": load,
    }
    checks = {
        "sparkRowsAsGenerated": after["checksum"] == facts["checksum"],
        "sparkOneSortedRunAtMaxLevelPerBucket": after["oneSortedRunAtMaxLevelPerBucket"],
    }
    return figures, checks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 40 files, 4 buckets, 2 rounds")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="build the cached table again")
    parser.add_argument(
        "--out", type=Path, help=f"result file (default {RESULT_PATH.relative_to(REPO_ROOT)})"
    )
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "TABLE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.files, args.buckets, args.repeat = 200_000, 40, 4, 2
        args.out = args.out or RESULTS_DIR / "paimon_pk_compaction_quick.json"
    args.out = args.out or RESULT_PATH
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    shape = Shape(rows=args.rows, files=args.files, buckets=args.buckets)
    started_load = load_average()
    root, facts = ensure_table(shape, rebuild=args.rebuild)
    inputs = input_facts(root)
    figures, checks = measure_rounds(shape, args.repeat, facts)
    spark, spark_checks = measure_spark(shape, facts, args.skip_spark)
    checks.update(spark_checks)
    if "wallSeconds" in spark:
        spark["wallOverOursMedian"] = round(spark["wallSeconds"] / figures["ours"]["median"], 2)
    if not args.no_profile:
        _child("profile", restore(shape, LIVE))
    peak = max(m["peakOverStartMiB"] for m in figures["ours"]["memory"])
    document = {
        "benchmark": "paimon_pk_compaction",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_facts(),
        "loadAverage": {"start": started_load, "end": load_average()},
        "table": {**shape.__dict__, "expected": facts, "input": inputs},
        **figures,
        "peakRssOverLargestBucketArrow": round(peak * MiB / inputs["largestBucket"]["arrowBytes"], 2),
        "peakRssOverTableArrow": round(peak * MiB / inputs["arrowBytes"], 2),
        "spark": spark,
        "target": {"oursOverFloor": TARGET_OURS_OVER_FLOOR},
        "checks": checks,
    }
    write_result(args.out, document)
    for leftover in (LIVE, FLOOR_OUT):
        shutil.rmtree(leftover, ignore_errors=True)
    print(
        json.dumps(
            {k: document[k] for k in ("oursOverFloor", "oursOverFloorPerRound", "spark", "checks")}, indent=1
        )
    )
    print(f"floor median {figures['floor']['median']} s, ours median {figures['ours']['median']} s; "
          f"ours peak RSS over start {peak} MiB; largest bucket {inputs['largestBucket']['arrowBytes'] / MiB:.1f} "
          f"MiB in Arrow of {inputs['arrowBytes'] / MiB:.1f} MiB")  # fmt: skip
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
