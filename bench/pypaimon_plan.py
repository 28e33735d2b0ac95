"""pypaimon's side of the planning benchmark. Run ONLY by the pypaimon interpreter (.venv-pypaimon).

    python bench/pypaimon_plan.py WAREHOUSE DATABASE TABLE [--repeat N] [--warmup N] [--no-tracemalloc]

Each repetition opens the table from a fresh filesystem catalog and times
``table.new_read_builder().new_scan().plan()`` plus ``plan.splits()``, then counts the data files in
the splits. Prints one JSON document: the timings, the file count, a digest of the sorted file
names (to compare with ours), and memory (peak RSS delta of the first run in this fresh process,
tracemalloc peak of one extra run).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc
from importlib import metadata
from typing import Any

from pypaimon import CatalogFactory


def current_rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    """VmHWM since start or the last reset_peak() (ru_maxrss is inherited over exec on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        pass


def plan_once(warehouse: str, identifier: str, keep: bool = False) -> dict[str, Any]:
    """One timed planning; with ``keep`` the splits stay referenced (for the retained-memory figure)."""
    t0, c0 = time.perf_counter(), time.process_time()
    catalog = CatalogFactory.create({"warehouse": warehouse})
    table = catalog.get_table(identifier)
    t1 = time.perf_counter()
    plan = table.new_read_builder().new_scan().plan()
    splits = plan.splits()
    t2, c2 = time.perf_counter(), time.process_time()
    names = [meta.file_name for split in splits for meta in split.files]
    return {
        "seconds": t2 - t0,
        "cpu_seconds": c2 - c0,
        "plan_seconds": t2 - t1,
        "open_seconds": t1 - t0,
        "files": len(names),
        "splits": len(splits),
        "snapshot_id": plan.snapshot_id if hasattr(plan, "snapshot_id") else None,
        "names": names,
        "file_io": type(table.file_io).__name__,
        "splits_kept": splits if keep else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("warehouse")
    parser.add_argument("database")
    parser.add_argument("table")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-tracemalloc", action="store_true")
    args = parser.parse_args()
    identifier = f"{args.database}.{args.table}"

    # First run in this fresh process: the memory run (it also warms the OS page cache and imports).
    gc.collect()
    reset_peak()
    rss_before, peak_before = current_rss(), peak_rss()
    first = plan_once(args.warehouse, identifier)
    peak_after = peak_rss()
    first.pop("splits_kept")
    names = sorted(first.pop("names"))
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()
    unique = len(set(names))
    del names

    for _ in range(max(0, args.warmup - 1)):
        plan_once(args.warehouse, identifier)
    runs = []
    for _ in range(args.repeat):
        gc.collect()
        run = plan_once(args.warehouse, identifier)
        run.pop("names")
        run.pop("splits_kept")
        runs.append(run)

    traced = None
    if not args.no_tracemalloc:
        gc.collect()
        tracemalloc.start()
        result = plan_once(args.warehouse, identifier, keep=True)
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del result
        traced = {"peak_bytes": peak, "retained_bytes": current}

    seconds = [r["seconds"] for r in runs]
    document = {
        "python": sys.version.split()[0],
        "pypaimon": metadata.version("pypaimon"),
        "fastavro": metadata.version("fastavro"),
        "cpu_count": os.cpu_count(),
        "times": seconds,
        "median": statistics.median(seconds),
        "min": min(seconds),
        "cpu_times": [r["cpu_seconds"] for r in runs],
        "cpu_median": statistics.median(r["cpu_seconds"] for r in runs),
        "plan_only_median": statistics.median(r["plan_seconds"] for r in runs),
        "open_median": statistics.median(r["open_seconds"] for r in runs),
        "files": first["files"],
        "unique_files": unique,
        "splits": first["splits"],
        "snapshot_id": first["snapshot_id"],
        "file_io": first["file_io"],
        "digest": digest,
        "memory": {
            "rss_before_bytes": rss_before,
            "peak_rss_before_bytes": peak_before,
            "peak_rss_delta_bytes": peak_after - rss_before,
            "tracemalloc": traced,
        },
    }
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
