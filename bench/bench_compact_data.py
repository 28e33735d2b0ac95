"""Throughput of data compaction (driver-side and the Spark job) against a plain pyarrow read+write.

    .venv/bin/python bench/bench_compact_data.py [--rows 5000000] [--small-file-size "1 mb"] [--rebuild]

Builds once (cached under bench/.work/) an append table partitioned by 4 dates whose rows
(bench_spark_write's generator, about 60 bytes per row on disk) were written rolling at
``--small-file-size``: a few hundred small Parquet files. Every method works on a hard-linked copy
(compaction only adds files, so the cached table never changes) and, each in its own fresh
subprocess, in this order:

* pyarrow   for every group of the plan (planned untimed with our planner, so the same files and
            the same grouping): ``pq.read_table`` of each input, one ``pq.write_table`` of their
            concatenation, zstd level 1; sequential, like the driver-side mode
* driver    ``compact_data(table, target_file_size=..., min_file_count=...)`` in one process:
            plan, stream every group through the rewrite (cast, roll, footer statistics), commit
* spark     ``spark-submit --master local[2] compact_data.py``: the same plan on the driver, the
            groups rewritten by two Python tasks, one COMPACT commit

Throughput is the bytes of the input files rewritten per second. The driver and Spark runs must
agree on the groups, the files rewritten and written and the rows (exit 1 otherwise).
Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.access import link_copy  # noqa: E402
from bench.support.runs import load_average, machine_facts  # noqa: E402
from bench.support.spark import FIELDS, rows_table, spark_submit  # noqa: E402

DEFAULT_WORK_DIR = BENCH_DIR / ".work"
RESULT_PATH = BENCH_DIR / "results" / "compact_data.json"
GENERATOR_VERSION = 1
METHODS = ("pyarrow", "driver", "spark")
BATCH_ROWS = 500_000


def ensure_table(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The cached table of small files for these parameters, built if missing."""
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
    from airflow_lakeformat.core.paimon.options import parse_memory_size
    from airflow_lakeformat.core.paimon.write.data_files import write_data_files

    small = parse_memory_size(args.small_file_size)
    key = f"compact-data-v{GENERATOR_VERSION}-r{args.rows}-s{small}"
    root = Path(args.work_dir).resolve() / key
    table_dir = root / "table"
    marker = root / "params.json"
    if marker.exists() and not args.rebuild:
        return table_dir, json.loads(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    print(f"building {table_dir} ...", file=sys.stderr)
    table = create_table(str(table_dir), schema_from_fields(FIELDS, ["dt"]))
    committer = Committer(table, "bench-build")
    files = 0
    for index, start in enumerate(range(0, args.rows, BATCH_ROWS)):
        rows = rows_table(start, min(BATCH_ROWS, args.rows - start), seed=index)
        entries = write_data_files(table, rows, target_file_size=small)
        committer.commit(entries)
        files += len(entries)
    facts = {
        "rows": args.rows,
        "files": files,
        "bytes": sum(p.stat().st_size for p in table_dir.rglob("*.parquet")),
        "small_file_size": small,
    }
    marker.write_text(json.dumps(facts))
    return table_dir, facts


def worker(method: str, table_dir: str, target_file_size: int, min_file_count: int) -> dict[str, Any]:
    """One method, timed in this (fresh) process."""
    from airflow_lakeformat.core.paimon.maintenance.data_compaction import compact_data, plan_data_compaction
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(table_dir)
    if method == "pyarrow":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from airflow_lakeformat.core.paimon.paths import DataFilePaths

        plan = plan_data_compaction(table, target_file_size=target_file_size, min_file_count=min_file_count)
        paths = DataFilePaths(table.schema)
        inputs = [[os.path.join(table_dir, paths.relative_path(e)) for e in g.entries] for g in plan.groups]
        out = Path(table_dir) / "pyarrow-out"
        out.mkdir()
        started = time.perf_counter()
        rows = 0
        for index, group in enumerate(inputs):
            data = pa.concat_tables([pq.read_table(path) for path in group])
            pq.write_table(data, out / f"group-{index}.parquet", compression="zstd", compression_level=1)
            rows += data.num_rows
        seconds = time.perf_counter() - started
        written = list(out.iterdir())
        return {
            "seconds": seconds,
            "groups": len(inputs),
            "filesRewritten": sum(len(g) for g in inputs),
            "bytesRewritten": plan.bytes_to_rewrite,
            "filesWritten": len(written),
            "bytesWritten": sum(p.stat().st_size for p in written),
            "rowsRewritten": rows,
        }
    if method == "driver":
        started = time.perf_counter()
        result = compact_data(table, target_file_size=target_file_size, min_file_count=min_file_count)
        seconds = time.perf_counter() - started
        return {**result.to_json(), "seconds": seconds}
    raise ValueError(method)


def run_worker(method: str, table_dir: Path, target_file_size: int, min_file_count: int) -> dict[str, Any]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from bench.bench_compact_data import worker; "
        "print(json.dumps(worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))))"
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(REPO_ROOT),
            method,
            str(table_dir),
            str(target_file_size),
            str(min_file_count),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{method} failed:\n{completed.stderr[-3000:]}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


COMPARED = ("groups", "filesRewritten", "filesWritten", "bytesRewritten", "rowsRewritten")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--small-file-size", default="1 mb")
    parser.add_argument("--target-file-size", default="128 mb")
    parser.add_argument("--min-file-count", type=int, default=5)
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--output", default=str(RESULT_PATH))
    args = parser.parse_args(argv)
    from airflow_lakeformat.core.paimon.options import parse_memory_size

    target = parse_memory_size(args.target_file_size)
    table_dir, facts = ensure_table(args)
    print(f"table: {facts}", file=sys.stderr)
    results: dict[str, dict[str, Any]] = {}
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-compact-", dir=args.work_dir) as scratch:
        for method in METHODS:
            copy = Path(scratch) / method
            link_copy(table_dir, copy)
            print(f"running {method} ...", file=sys.stderr)
            if method == "spark":
                document = spark_submit(
                    "compact_data",
                    str(copy),
                    ["--target-file-size", str(target), "--min-file-count", str(args.min_file_count)],
                    Path(scratch),
                )
                results[method] = {
                    **{k: document[k] for k in (*COMPARED, "bytesWritten", "snapshotId")},
                    "seconds": document["wallSeconds"],
                    "jobSeconds": document["durationSeconds"],
                }
            else:
                results[method] = run_worker(method, copy, target, args.min_file_count)
    driver, spark = results["driver"], results["spark"]
    if {k: driver[k] for k in COMPARED} != {k: spark[k] for k in COMPARED} or driver[
        "rowsRewritten"
    ] != facts["rows"]:
        print(f"driver and spark disagree: {driver} vs {spark}", file=sys.stderr)
        return 1
    base = results["pyarrow"]["seconds"]
    for measured in results.values():
        for key, prefix in (("seconds", ""), ("jobSeconds", "job")):
            if key in measured:
                seconds = measured[key]
                measured[key] = round(seconds, 2)
                measured[prefix + "MBPerSecond"] = round(measured["bytesRewritten"] / 1e6 / seconds, 1)
                measured[prefix + ("VsBaseline" if prefix else "vsBaseline")] = round(seconds / base, 2)
    report = {
        "benchmark": "compact_data",
        "machine": machine_facts(),
        "loadAverage": {"before": load_before, "after": load_average()},
        "table": facts,
        "targetFileSize": target,
        "minFileCount": args.min_file_count,
        "results": results,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'method':10} {'seconds':>8} {'MB/s':>7} {'in files':>8} {'out files':>9} {'x base':>7}")
    for method, m in results.items():
        print(
            f"{method:10} {m['seconds']:8.2f} {m['MBPerSecond']:7.1f} {m['filesRewritten']:8d} "
            f"{m['filesWritten']:9d} {m['vsBaseline']:7.2f}"
        )
        if "jobSeconds" in m:
            print(
                f"{'  (job)':10} {m['jobSeconds']:8.2f} {m['jobMBPerSecond']:7.1f} {'':8} {'':9} {m['jobVsBaseline']:7.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
