"""Throughput of the Spark ``write`` job against pyarrow writing the same rows, in one run.

    .venv/bin/python bench/bench_spark_write.py [--rows 5000000] [--files 8] [--rebuild]

The source (``--files`` Parquet files, ``--rows`` rows over 4 dates, about 60 bytes per row on
disk) is generated once and cached under bench/.work/. Each method then writes all of it into a
fresh output, each in its own fresh subprocess, in this order:

* pyarrow   ``pyarrow.dataset.write_dataset`` of the source, Hive-partitioned by ``dt``, zstd level 1
            (the table's codec), multi-threaded: the floor for "read Parquet, split by partition,
            write Parquet" on this machine
* core      the driver-side path (``lakeformat write``): per source file ``pq.read_table`` +
            ``write_data_files`` (cast to the table's types, split by partition, roll at
            ``target-file-size``, DataFileMeta with value statistics from each footer), then one commit
* spark     ``spark-submit --master local[2] write.py`` with the default reader (``auto``: for
            Parquet the two Python tasks read their byte-balanced share of the source with
            pyarrow), stream the rows into the table's layout, the driver commits one snapshot
* spark-read-by-spark  the same job with ``--source-reader spark``: Spark's Parquet reader, its
            rows handed to the tasks as Arrow batches (``mapInArrow``); the default before
            issue 14, kept to show where the time went

Spark is reported as the wall time of ``spark-submit`` (JVM start, Python driver start, session
start and the job), the job's own ``durationSeconds`` (from argument parsing: session start
included), ``sessionSeconds`` (starting the SparkSession) and **scaling** = ``durationSeconds -
sessionSeconds``: listing and planning the source, the tasks (Python worker start included) and
the commit, i.e. everything that is not a fixed cost of starting Spark. The goal (issue 14) is
scaling <= 3x pyarrow at 5M rows. Each task also reports where its own time went (waiting for its
input vs writing). Throughput is the source's in-memory Arrow size (and its rows) per second.
Every method must write every row and the default must have chosen the Python reader (checked:
exit 1 otherwise). Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import json
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

from bench.support.runs import load_average, machine_facts  # noqa: E402
from bench.support.spark import FIELDS, rows_table, spark_submit  # noqa: E402

DEFAULT_WORK_DIR = BENCH_DIR / ".work"
RESULT_PATH = BENCH_DIR / "results" / "spark_write.json"
GENERATOR_VERSION = 1
METHODS = ("pyarrow", "core", "spark", "spark-read-by-spark")


def ensure_source(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The cached source files for these parameters, generated if missing."""
    import pyarrow.parquet as pq

    key = f"spark-write-v{GENERATOR_VERSION}-r{args.rows}-f{args.files}"
    root = Path(args.work_dir).resolve() / key
    source = root / "source"
    marker = root / "params.json"
    if marker.exists() and not args.rebuild:
        return source, json.loads(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    source.mkdir(parents=True)
    per_file = -(-args.rows // args.files)
    arrow_bytes = 0
    for index in range(args.files):
        start = index * per_file
        count = min(per_file, args.rows - start)
        table = rows_table(start, count, seed=index)
        arrow_bytes += table.nbytes
        pq.write_table(
            table, source / f"part-{index:03d}.parquet", compression="zstd", row_group_size=256_000
        )
    facts = {
        "rows": args.rows,
        "files": args.files,
        "arrow_bytes": arrow_bytes,
        "parquet_bytes": sum(p.stat().st_size for p in source.iterdir()),
    }
    marker.write_text(json.dumps(facts))
    return source, facts


# ---- spark-submit ----------------------------------------------------------------------------------


# ---- the methods -------------------------------------------------------------------------------------


def new_table(path: Path, target_file_size: str) -> Any:
    from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields

    options = {"target-file-size": target_file_size}
    return create_table(str(path), schema_from_fields(FIELDS, ["dt"], options=options))


def worker(method: str, source: str, out: str, target_file_size: str) -> dict[str, Any]:
    """One method, timed in this (fresh) process."""
    import pyarrow.parquet as pq

    files = sorted(str(p) for p in Path(source).iterdir())
    if method == "pyarrow":
        import pyarrow as pa
        import pyarrow.dataset as ds

        started = time.perf_counter()
        dataset = ds.dataset(files, format="parquet")
        options = ds.ParquetFileFormat().make_write_options(compression="zstd", compression_level=1)
        ds.write_dataset(
            dataset,
            out,
            format="parquet",
            partitioning=ds.partitioning(pa.schema([("dt", pa.date32())]), flavor="hive"),
            file_options=options,
            existing_data_behavior="overwrite_or_ignore",
        )
        seconds = time.perf_counter() - started
        written = list(Path(out).rglob("*.parquet"))
        rows = sum(pq.ParquetFile(p).metadata.num_rows for p in written)
        return {
            "seconds": seconds,
            "rows": rows,
            "files": len(written),
            "bytes": sum(p.stat().st_size for p in written),
        }
    if method == "core":
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.write.data_files import write_data_files

        table = new_table(Path(out), target_file_size)
        started = time.perf_counter()
        entries = []
        for path in files:
            entries += write_data_files(table, pq.read_table(path))
        snapshot = Committer(table, "bench").commit(entries).snapshot
        seconds = time.perf_counter() - started
        return {
            "seconds": seconds,
            "rows": snapshot.total_record_count,
            "files": len(entries),
            "bytes": sum(e.file.file_size for e in entries),
        }
    raise ValueError(method)


def run_worker(method: str, source: Path, out: Path, target_file_size: str) -> dict[str, Any]:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from bench.bench_spark_write import worker; "
        "print(json.dumps(worker(*sys.argv[2:])))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code, str(REPO_ROOT), method, str(source), str(out), target_file_size],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{method} failed:\n{completed.stderr[-3000:]}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def rates(measured: dict[str, Any], facts: dict[str, Any], base_seconds: float) -> None:
    """Add rows/s, MB/s (of the source's Arrow size) and the ratio to the baseline, in place."""
    for key, prefix in (("seconds", ""), ("jobSeconds", "job"), ("scalingSeconds", "scaling")):
        if key not in measured:
            continue
        seconds = measured[key]
        measured[key] = round(seconds, 2)
        measured[prefix + ("RowsPerSecond" if prefix else "rowsPerSecond")] = round(facts["rows"] / seconds)
        measured[prefix + "MBPerSecond"] = round(facts["arrow_bytes"] / 1e6 / seconds, 1)
        measured[prefix + ("VsBaseline" if prefix else "vsBaseline")] = round(seconds / base_seconds, 2)


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(f"{'method':20} {'seconds':>8} {'MB/s':>7} {'rows/s':>10} {'files':>6} {'x base':>7}")
    for method, m in results.items():
        print(
            f"{method:20} {m['seconds']:8.2f} {m['MBPerSecond']:7.1f} {m['rowsPerSecond']:10d} "
            f"{m['files']:6d} {m['vsBaseline']:7.2f}"
        )
        for label, prefix in (("  (job)", "job"), ("  (scaling)", "scaling")):
            if prefix + "Seconds" in m:
                print(
                    f"{label:20} {m[prefix + 'Seconds']:8.2f} {m[prefix + 'MBPerSecond']:7.1f} "
                    f"{m[prefix + 'RowsPerSecond']:10d} {'':6} {m[prefix + 'VsBaseline']:7.2f}"
                )
        for task in m.get("tasks", []):
            print(
                f"{'  task ' + str(task['task']):20} input {task['inputSeconds']:6.2f} s, "
                f"write {task['writeSeconds']:6.2f} s, {task['rows']} rows in {task['batches']} batches"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--target-file-size", default="128 mb")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--output", default=str(RESULT_PATH))
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated; pyarrow is the baseline"
    )
    args = parser.parse_args(argv)

    source, facts = ensure_source(args)
    print(f"source: {facts}", file=sys.stderr)
    results: dict[str, dict[str, Any]] = {}
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-write-", dir=args.work_dir) as scratch:
        for method in args.methods.split(","):
            out = Path(scratch) / method
            print(f"running {method} ...", file=sys.stderr)
            if method.startswith("spark"):
                new_table(out, args.target_file_size)
                reader = "spark" if method == "spark-read-by-spark" else "auto"
                job_args = ["--source", str(source), "--source-format", "parquet", "--source-reader", reader]
                document = spark_submit("write", str(out), job_args, Path(scratch))
                measured = {
                    "seconds": document["wallSeconds"],
                    "jobSeconds": document["durationSeconds"],
                    "sessionSeconds": document["sessionSeconds"],
                    "scalingSeconds": document["durationSeconds"] - document["sessionSeconds"],
                    "tasksSeconds": document["writeSeconds"],
                    "commitSeconds": document["commitSeconds"],
                    "sourceReader": document["sourceReader"],
                    "tasks": document["tasks"],
                    "rows": document["rowsWritten"],
                    "files": document["filesWritten"],
                    "bytes": document["bytesWritten"],
                }
                if method == "spark" and document["sourceReader"] != "python":
                    print(f"the default reader was {document['sourceReader']}, not python", file=sys.stderr)
                    return 1
            else:
                measured = run_worker(method, source, out, args.target_file_size)
            if measured["rows"] != facts["rows"]:
                print(f"{method} wrote {measured['rows']} rows, expected {facts['rows']}", file=sys.stderr)
                return 1
            results[method] = measured
    base = results["pyarrow"]["seconds"]
    for measured in results.values():
        rates(measured, facts, base)
    report = {
        "benchmark": "spark_write",
        "machine": machine_facts(),
        "loadAverage": {"before": load_before, "after": load_average()},
        "source": facts,
        "targetFileSize": args.target_file_size,
        "results": results,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
