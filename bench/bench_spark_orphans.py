"""Orphan cleanup of a 1M-file table directory: driver-side ``remove_orphan_files`` vs the Spark job (local[2]).

    .venv/bin/python bench/bench_spark_orphans.py [--files 1000000] [--snapshots 200] [--rebuild]

The table and the orphans are bench_orphans.py's (bench/support/orphan_table.py, imported, not copied): a partitioned, bucketed
append table with a 200-snapshot history committed through the core's commit path, 90 % of the
directory's files referenced, the rest planted as old orphans in every location cleanup lists, plus
0.1 % fresh orphans and a few old, empty bucket directories. This benchmark works on a hard-linked
copy of bench_orphans' cached table (``cp -al``: instant, and deleting in the copy never touches the
cache), so both benchmarks can run at the same time.

Measured in one run, each in a fresh subprocess, in this order, with the default ``older_than`` (1 d):

* core-dry    ``remove_orphan_files(table, dry_run=True)``: the driver-side operation, one process
* spark-dry   ``spark-submit --master local[2] remove_orphan_files.py --dry-run``
* core        ``remove_orphan_files(table, dry_run=False)``; then the same orphans are planted again
* spark       ``spark-submit --master local[2] remove_orphan_files.py``

Both modes must report the same result (less table, duration, job and mode) and leave the same files;
the orphans must be exactly the planted old ones (exit 1 otherwise). Spark is reported as the wall
time of ``spark-submit`` (JVM and session start included) and as the job's own ``durationSeconds``
(from argument parsing; session start included). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for entry in (str(REPO_ROOT), str(BENCH_DIR)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from bench.support.orphan_table import (  # noqa: E402
    DEFAULT_FILES,
    DEFAULT_SNAPSHOTS,
    ensure_table,
    plan_planting,
    plant,
    remove_planted,
)
from bench.support.paimon_history import DAY, tree_digest  # noqa: E402
from bench.support.runs import DEFAULT_WORK_DIR, machine_facts, write_result  # noqa: E402

RESULT_PATH = BENCH_DIR / "results" / "spark_orphans.json"
PLANTING_SEED = 20261122  # the same orphans in every run and before both real runs
# What the two modes may differ in: the table path, the timing and the Spark job's own labels.
VOLATILE = frozenset({"table", "durationSeconds", "job", "mode"})
METHODS = ("core-dry", "spark-dry", "core", "spark")
MiB = 1024 * 1024


# ---- the table -----------------------------------------------------------------------------------


def linked_copy(cached: Path, facts: dict[str, Any], work_dir: Path) -> Path:
    """A hard-linked copy of bench_orphans' pristine cached table, made once and reused."""
    copy = work_dir / f"spark-orphans-of-{cached.parents[2].name}" / "table"
    if copy.exists() and tree_digest(str(copy)) == (facts["files_in_tree"], facts["tree_digest"]):
        return copy
    if tree_digest(str(cached)) != (facts["files_in_tree"], facts["tree_digest"]):
        raise RuntimeError(f"{cached} holds planted files (is bench_orphans.py running?); try again after it")
    if copy.parent.exists():
        subprocess.run(["rm", "-rf", str(copy.parent)], check=True)  # our own scratch copy, never the cache
    copy.parent.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(cached), str(copy)], check=True)
    return copy


# ---- the workers (each in its own subprocess) ------------------------------------------------------


def worker(method: str, table_dir: str) -> dict[str, Any]:
    dry_run = method.endswith("-dry")
    if method.startswith("core"):
        from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files
        from airflow_lakeformat.core.paimon.table import Table

        started = time.perf_counter()
        document = remove_orphan_files(Table.open(table_dir), dry_run=dry_run).to_json()
        seconds = time.perf_counter() - started
        job_seconds = seconds
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    else:
        from tests.support.spark import run_job

        with tempfile.TemporaryDirectory(prefix="bench-spark-orphans-") as work:
            started = time.perf_counter()
            args = ["--dry-run"] if dry_run else []
            run = run_job("remove_orphan_files", table_dir, *args, work_dir=Path(work), timeout=7200)
            seconds = time.perf_counter() - started
        if run.returncode != 0 or run.result is None:
            raise RuntimeError(run.describe())
        document = run.result
        job_seconds = float(document["durationSeconds"])
        # The largest single process of the run (the JVM, the Python driver or a Python worker).
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"seconds": seconds, "jobSeconds": job_seconds, "peakRssBytes": rss, "result": document}


def run_worker(method: str, table_dir: Path) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--table", str(table_dir)]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{method} failed (exit {completed.returncode}):\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ---- the run -------------------------------------------------------------------------------------


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in VOLATILE}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=DEFAULT_FILES, help="files in the table directory")
    parser.add_argument("--snapshots", type=int, default=DEFAULT_SNAPSHOTS, help="snapshots of the history")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where generated tables are cached")
    parser.add_argument("--rebuild", action="store_true", help="regenerate bench_orphans' cached table")
    parser.add_argument(
        "--output", default=None, help="result JSON (default bench/results/spark_orphans*.json)"
    )
    parser.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    return parser


def _run_methods(
    table_dir: Path, planting: dict[str, Any], pristine: tuple[int, str], planted_old: int
) -> tuple[tuple[int, str], dict[str, dict[str, Any]], dict[str, tuple[int, str]]]:
    """Plant the orphans, run every method (planting again before the real Spark run); the planted tree's
    digest, each method's run and the tree each left."""

    def replant() -> tuple[int, str]:
        remove_planted(table_dir, planting)  # what a previous run (or the last method) left
        if tree_digest(str(table_dir)) != pristine:
            raise RuntimeError(f"{table_dir} is not the pristine table after tidying; delete it to re-copy")
        plant(planting, old_mtime=time.time() - 10 * DAY)
        return tree_digest(str(table_dir))  # also warms the dentry cache for the method after it

    planted_state = replant()
    print(f"{planted_state[0]:,} files in {table_dir} ({planted_old:,} old orphans)", file=sys.stderr)
    runs: dict[str, dict[str, Any]] = {}
    after: dict[str, tuple[int, str]] = {}
    for method in METHODS:
        if method == "spark" and replant() != planted_state:
            raise RuntimeError("planting again did not give the same tree")
        print(f"running {method} ...", file=sys.stderr)
        runs[method] = run_worker(method, table_dir)
        after[method] = tree_digest(str(table_dir))
        print(f"  {method}: {runs[method]['seconds']:.1f} s", file=sys.stderr)
    return planted_state, runs, after


def _problems(
    runs: dict[str, dict[str, Any]],
    after: dict[str, tuple[int, str]],
    planted_state: tuple[int, str],
    planted_old: int,
) -> list[str]:
    """Where the Spark job and the core disagree, a dry run changed the table, or a method missed orphans."""
    problems = []
    for core, spark in (("core-dry", "spark-dry"), ("core", "spark")):
        if comparable(runs[core]["result"]) != comparable(runs[spark]["result"]):
            problems.append(f"{core} and {spark} report different results")
    if after["core"] != after["spark"]:
        problems.append("core and spark left different files")
    if after["core-dry"] != planted_state or after["spark-dry"] != planted_state:
        problems.append("a dry run changed the table")
    for method in METHODS:
        if runs[method]["result"]["orphans"] != planted_old:
            problems.append(f"{method} found {runs[method]['result']['orphans']} orphans, not {planted_old}")

    return problems


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.table)))
        return 0
    output = Path(
        args.output
        or (
            RESULT_PATH
            if args.files == DEFAULT_FILES
            else RESULT_PATH.with_name(f"spark_orphans-f{args.files}.json")
        )
    )

    started = time.perf_counter()
    load_before = os.getloadavg()
    _, cached, facts = ensure_table(args)
    table_dir = linked_copy(cached, facts, Path(args.work_dir).resolve())
    pristine = (facts["files_in_tree"], facts["tree_digest"])
    planting = plan_planting(table_dir, args.files, facts["files_in_tree"], seed=PLANTING_SEED)
    planted_old = sum(len(paths) for paths in planting["old"].values())

    planted_state, runs, after = _run_methods(table_dir, planting, pristine, planted_old)
    remove_planted(table_dir, planting)

    problems = _problems(runs, after, planted_state, planted_old)

    result = runs["core"]["result"]
    seconds = {m: runs[m]["seconds"] for m in METHODS}
    summary = {
        "benchmark": "orphan cleanup of a table directory: driver-side remove_orphan_files vs the Spark job",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        # Other work on the machine skews both modes; the 1-minute load average says how much.
        "loadAverage": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
        "spark": {"master": "local[2]", "submit": "tests/support/spark.py run_job"},
        "params": {"files": args.files, "snapshots": args.snapshots, "olderThan": "1 d (default)"},
        "table": {"cached": str(cached), "copy": str(table_dir), **facts},
        "filesInTableDirectory": planted_state[0],
        "filesListed": result["filesListed"],
        "candidates": result["candidates"],
        "orphans": result["orphans"],
        "manifestsRead": result["manifestsRead"],
        "directoriesRemoved": result["directoriesRemoved"],
        "seconds": {m: round(s, 2) for m, s in seconds.items()},
        "jobSeconds": {m: round(runs[m]["jobSeconds"], 2) for m in METHODS},
        "peakRssMiB": {m: round(runs[m]["peakRssBytes"] / MiB) for m in METHODS},
        "filesListedPerSecond": {m: round(result["filesListed"] / s) for m, s in seconds.items()},
        "ratios": {
            "spark-dry/core-dry": round(seconds["spark-dry"] / seconds["core-dry"], 2),
            "spark/core": round(seconds["spark"] / seconds["core"], 2),
            "spark-dry job/core-dry": round(runs["spark-dry"]["jobSeconds"] / seconds["core-dry"], 2),
            "spark job/core": round(runs["spark"]["jobSeconds"] / seconds["core"], 2),
        },
        "sameResults": not problems,
        "problems": problems,
        "results": {m: runs[m]["result"] for m in METHODS},
        "wallSeconds": round(time.perf_counter() - started, 1),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    write_result(output, summary)
    print(f"\n{'method':<10} {'wall s':>8} {'job s':>8} {'listed/s':>10} {'peak RSS MiB':>13}")
    for m in METHODS:
        print(
            f"{m:<10} {seconds[m]:8.1f} {runs[m]['jobSeconds']:8.1f} "
            f"{summary['filesListedPerSecond'][m]:>10,} {summary['peakRssMiB'][m]:13}"
        )
    print(f"ratios: {summary['ratios']}")
    print(f"results: {output}")
    for problem in problems:
        print(f"MISMATCH: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
