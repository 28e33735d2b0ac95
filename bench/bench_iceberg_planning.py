"""Iceberg live-file planning: ours against pyiceberg's ``plan_files()`` and ``inspect.files()`` on one table.

    .venv/bin/python bench/bench_iceberg_planning.py [--manifests 2000] [--files-per-manifest 20]
        [--columns 10] [--repeat 3] [--out bench/results/iceberg_planning.json]

It writes (``bench/support/iceberg_planning_table.py``) one snapshot whose manifest list holds ``--manifests`` manifests (pyiceberg's ``write_manifest``),
each with ``--files-per-manifest`` data entries carrying full per-column metrics for ``--columns`` columns,
then times, best of ``--repeat`` in this process: ``files_document`` with our fastavro decoder (the
default), the same with pyiceberg's decoder inside our reader, pyiceberg's ``inspect.files()`` and
``scan().plan_files()``. The repetitions are interleaved (one of each method per round), so that a load
change on a shared machine hits all methods alike. The ratios are against the pyiceberg baselines of the
same run. It checks its own answer: the multiset of (path, record count) ours returns must equal
pyiceberg's ``plan_files()`` and ``inspect.files()``, and hold every file written exactly once; a mismatch
exits 1 whatever the timings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.live_files import PyIcebergDecoder

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.iceberg_planning_table import build  # noqa: E402  (the table, shared with bench_health.py)

Files = Counter[tuple[str, int]]


def timed_rounds(methods: dict[str, Callable[[], Files]], repeat: int) -> dict[str, tuple[float, Files]]:
    """Best time and last answer of each method, over ``repeat`` rounds of one call of each."""
    best = dict.fromkeys(methods, float("inf"))
    answers: dict[str, Files] = {}
    for _ in range(repeat):
        for label, method in methods.items():
            started = time.perf_counter()
            answers[label] = method()
            best[label] = min(best[label], time.perf_counter() - started)
    for label in methods:
        print(f"{label:45s} {best[label]:8.3f} s")
    return {label: (best[label], answers[label]) for label in methods}


def _time_methods(table: Any, repeat: int) -> dict[str, tuple[float, Files]]:
    """Each way of listing the live files, timed in rounds: (best seconds, the files it found)."""
    pyt = table.table

    def ours() -> Files:
        return Counter((f["path"], f["recordCount"]) for f in files_document(table)["files"])

    def ours_pyiceberg_decoder() -> Files:
        document = files_document(table, decoder=PyIcebergDecoder())
        return Counter((f["path"], f["recordCount"]) for f in document["files"])

    def inspect_files() -> Files:
        arrow = pyt.inspect.files()
        return Counter(zip(arrow["file_path"].to_pylist(), arrow["record_count"].to_pylist(), strict=True))

    def plan_files() -> Files:
        return Counter((t.file.file_path, t.file.record_count) for t in pyt.scan().plan_files())

    return timed_rounds(
        {
            "ours: files_document (fastavro, projected)": ours,
            "ours with pyiceberg's manifest decoder": ours_pyiceberg_decoder,
            "pyiceberg inspect.files()": inspect_files,
            "pyiceberg scan().plan_files()": plan_files,
        },
        repeat,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--files-per-manifest", type=int, default=20)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        started = time.perf_counter()
        build(root, args.manifests, args.files_per_manifest, args.columns)
        built = time.perf_counter() - started
        print(
            f"built {args.manifests} manifests x {args.files_per_manifest} files x {args.columns} columns in {built:.1f} s"
        )
        table = open_path_table(str(root))
        location = table.metadata.location
        load_before = os.getloadavg()
        timings = _time_methods(table, args.repeat)
        (t_ours, r_ours), (t_dec, r_dec), (t_inspect, r_inspect), (t_plan, r_plan) = timings.values()
    expected = args.manifests * args.files_per_manifest
    written = Counter(
        (f"{location}/data/part={m % 50}/file-{m}-{f}.parquet", 1000 + f)
        for m in range(args.manifests)
        for f in range(args.files_per_manifest)
    )
    checks = {
        "oursEqualsPlanFiles": r_ours == r_plan,
        "oursEqualsInspectFiles": r_ours == r_inspect,
        "decodersAgree": r_ours == r_dec,
        "fileCount": sum(r_ours.values()) == expected,
        "oursEqualsWhatWasWritten": r_ours == written,
    }
    figures = {
        "table": {"manifests": args.manifests, "filesPerManifest": args.files_per_manifest, "columns": args.columns,
                  "files": expected},
        "seconds": {"ours": round(t_ours, 3), "oursWithPyicebergDecoder": round(t_dec, 3),
                    "pyicebergInspectFiles": round(t_inspect, 3), "pyicebergPlanFiles": round(t_plan, 3)},
        "ratios": {"planFilesOverOurs": round(t_plan / t_ours, 2), "inspectFilesOverOurs": round(t_inspect / t_ours, 2)},
        "checks": checks,
        "repeat": args.repeat,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavgBefore": [round(x, 2) for x in load_before],
                    "loadavgAfter": [round(x, 2) for x in os.getloadavg()]},
    }  # fmt: skip
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    if not all(checks.values()):
        print(f"bench_iceberg_planning: a correctness check failed: {checks}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
