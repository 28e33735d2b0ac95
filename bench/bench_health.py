"""Table health against the live-file plan on the 100k-file planning benchmark tables (issue 28: health takes at
most 1.2x the live-file plan, same run).

    .venv/bin/python bench/bench_health.py [--repeat 7] [--formats paimon,iceberg] [--out bench/results/health.json]

The tables are the planning benchmarks' own, built by their builders and cached as they cache them:

* Paimon: ``bench_planning.py``'s default table (``bench/support/pypaimon_table.py``: written by pypaimon 2.1,
  2,000 commits of one file in each of 50 partitions, so 100,000 live files in 2,000 manifests and 2,000
  snapshots; cached under bench/.work/ and shared with ``bench_planning.py`` and ``bench_orphans_snapshots.py``).
  Its live-file plan is that benchmark's ``ours``: ``Table.open`` (read_parallelism 16) + the latest snapshot +
  ``live_entries``.
* Iceberg: ``bench_iceberg_planning.py``'s table (``bench/support/iceberg_planning_table.py``: one snapshot whose manifest list holds
  ``--iceberg-manifests`` manifests of 20 files with full metrics for 10 columns) at 5,000 manifests, so 100,000
  live files; cached under bench/.work/iceberg-planning-m5000-f20-c10. Its live-file plan is that benchmark's
  ``ours``: ``files_document`` (after opening the table).

``health`` is ``open_table(path).health()``: everything the report reads (the live files, the manifests, every
snapshot's time, the snapshot expiry plan's dry run with the table's own retention, the partition expiry plan
when ``partition.expiration-time`` is set, the metadata listing). Both are timed in this process, interleaved
(plan, health, plan, health, ...) after one untimed run of each, a full GC before each call, ``--repeat``
rounds; the figure is the ratio of the wall-time medians (the CPU-time ratio is recorded beside it: on a
loaded machine it moves less). The benchmark checks its own answers (exit 1 otherwise): health counts exactly the data files
and bytes the plan lists, which is the number the table was built with (100,000).

The Paimon table's snapshots carry their real commit times: once the table is older than its
``snapshot.time-retained`` (1 h), the expiry plan has 50 snapshots to expire (``snapshot.expire.limit``) and
health reads what it reads. The result records the expirable count.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.runs import (  # noqa: E402
    DEFAULT_WORK_DIR,
    RESULTS_DIR,
    load_average,
    machine_facts,
    write_result,
)

TARGET_RATIO = 1.2
ICEBERG_FILES_PER_MANIFEST, ICEBERG_COLUMNS = 20, 10


def paimon_table(work_dir: Path) -> tuple[Path, int]:
    """The planning benchmark's default pypaimon table (built once, cached): its path and live file count."""
    from bench.support.pypaimon_table import ensure_pypaimon_table

    _, _, table_dir, facts = ensure_pypaimon_table(work_dir, 2000, 50, 2, rebuild=False)
    return table_dir, int(facts["live_files"])


def iceberg_table(work_dir: Path, manifests: int) -> tuple[Path, int]:
    """The Iceberg planning benchmark's table at ``manifests`` x 20 files (built once under ``work_dir``)."""
    from bench.support.iceberg_planning_table import ensure_table

    table_dir = ensure_table(work_dir, manifests, ICEBERG_FILES_PER_MANIFEST, ICEBERG_COLUMNS)
    return table_dir, manifests * ICEBERG_FILES_PER_MANIFEST


def paimon_plan(table_dir: Path, facts: bool = False) -> tuple[int, int]:
    """bench_planning.py's ``ours``: ``Table.open`` (read_parallelism 16) + the latest snapshot +
    ``live_entries``; (live files, their bytes when ``facts``, which the timed runs do not ask: it decodes
    a field the plan leaves undecoded)."""
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(table_dir), read_parallelism=16)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    entries = live_entries(table, snapshot)
    return len(entries), sum(e.file.file_size for e in entries) if facts else -1


def iceberg_plan(table_dir: Path, facts: bool = False) -> tuple[int, int]:
    """bench_iceberg_planning.py's ``ours``, ``files_document`` of the opened table: (data files, their bytes
    when ``facts``)."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.metadata.files import files_document

    files = files_document(open_path_table(str(table_dir)))["files"]
    data = [f for f in files if f["content"] == "data"] if facts else files
    return len(data), sum(f["fileSize"] for f in data) if facts else -1


def health_of(table_dir: Path) -> tuple[int, int, dict[str, Any]]:
    """``open_table(path).health()``: (data files, bytes, the document)."""
    from airflow_lakeformat.core.tables import open_table

    document = open_table(str(table_dir)).health().to_json()
    return document["files"]["dataFiles"], document["files"]["dataBytes"], document


def interleaved(methods: dict[str, Callable[[], Any]], repeat: int) -> dict[str, dict[str, Any]]:
    """One untimed run of each, then ``repeat`` rounds of one timed call of each (a full GC before each, as
    bench_planning's workers do); wall and CPU times and the last answer."""
    answers = {label: method() for label, method in methods.items()}
    wall: dict[str, list[float]] = {label: [] for label in methods}
    cpu: dict[str, list[float]] = {label: [] for label in methods}
    for _ in range(repeat):
        for label, method in methods.items():
            gc.collect()
            started, cpu_started = time.perf_counter(), time.process_time()
            answers[label] = method()
            wall[label].append(time.perf_counter() - started)
            cpu[label].append(time.process_time() - cpu_started)
    return {
        label: {"times": [round(t, 4) for t in wall[label]], "median": statistics.median(wall[label]),
                "cpu_times": [round(t, 4) for t in cpu[label]], "cpu_median": statistics.median(cpu[label]),
                "answer": answers[label]}
        for label in methods
    }  # fmt: skip


def measure(fmt: str, table_dir: Path, files: int, repeat: int) -> dict[str, Any]:
    """Plan and health of one table, interleaved; the ratio of the medians and the checks."""
    plan = paimon_plan if fmt == "paimon" else iceberg_plan
    load_before = load_average()
    runs = interleaved({"plan": lambda: plan(table_dir), "health": lambda: health_of(table_dir)}, repeat)
    plan_files, plan_bytes = plan(table_dir, True)  # untimed: the files and bytes to check health against
    health_files, health_bytes, document = runs["health"]["answer"]
    checks = {
        "healthCountsThePlansFiles": health_files == plan_files,
        "healthCountsThePlansBytes": health_bytes == plan_bytes,
        "planListsTheBuiltFiles": plan_files == files == runs["plan"]["answer"][0],
        "snapshotTimesOnePerSnapshot": len(document["snapshots"].get("times", [])) == document["snapshots"]["count"],
    }  # fmt: skip
    ratio = runs["health"]["median"] / runs["plan"]["median"]
    cpu_ratio = runs["health"]["cpu_median"] / runs["plan"]["cpu_median"]
    print(
        f"{fmt}: plan {runs['plan']['median']:.3f} s, health {runs['health']['median']:.3f} s -> {ratio:.2f}x "
        f"(CPU {cpu_ratio:.2f}x; target {TARGET_RATIO}x); {plan_files} files; checks {checks}",
        file=sys.stderr,
    )
    return {
        "table": str(table_dir),
        "files": files,
        "snapshots": document["snapshots"]["count"],
        "expirableSnapshots": document["snapshots"]["expirable"],
        "manifests": document["manifests"]["count"],
        "planSeconds": _seconds(runs["plan"]),
        "healthSeconds": _seconds(runs["health"]),
        "ratio": round(ratio, 3),
        "cpuRatio": round(cpu_ratio, 3),
        "targetRatio": TARGET_RATIO,
        "met": ratio <= TARGET_RATIO,
        "recommendations": [r["operation"] for r in document["recommendations"]],
        "checks": checks,
        "loadavgBefore": load_before,
        "loadavgAfter": load_average(),
    }


def _seconds(run: dict[str, Any]) -> dict[str, Any]:
    return {"median": round(run["median"], 4), "times": run["times"],
            "cpuMedian": round(run["cpu_median"], 4), "cpuTimes": run["cpu_times"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds (median reported)")
    parser.add_argument("--formats", default="paimon,iceberg", help="comma-separated: paimon, iceberg")
    parser.add_argument("--iceberg-manifests", type=int, default=5000, help="x 20 files each (100,000)")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where the tables are cached")
    parser.add_argument("--out", default=str(RESULTS_DIR / "health.json"), help="JSON result file")
    args = parser.parse_args(argv)
    work_dir = Path(args.work_dir)
    results: dict[str, Any] = {}
    for fmt in [f.strip() for f in args.formats.split(",") if f.strip()]:
        if fmt == "paimon":
            table_dir, files = paimon_table(work_dir)
        elif fmt == "iceberg":
            table_dir, files = iceberg_table(work_dir, args.iceberg_manifests)
        else:
            parser.error(f"unknown format {fmt!r}")
        results[fmt] = measure(fmt, table_dir, files, args.repeat)
    document = {
        "benchmark": "table health against the live-file plan",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "repeat": args.repeat,
        "formats": results,
    }
    write_result(args.out, document)
    print(
        json.dumps(
            {fmt: {k: r[k] for k in ("ratio", "met", "checks")} for fmt, r in results.items()}, indent=2
        )
    )
    failed = [fmt for fmt, r in results.items() if not all(r["checks"].values())]
    if failed:
        print(f"bench_health: a correctness check failed for {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
