"""Live-file planning benchmark: ours vs pypaimon vs raw fastavro decoding of the same manifests.

    .venv/bin/python bench/bench_planning.py                      # the pypaimon table: 2,000 commits x 50 files
    .venv/bin/python bench/bench_planning.py --table generated --files 100000 --manifests 1000

By default the table is written by pypaimon 2.1 itself (``bench/support/pypaimon_table.py``, cached under
bench/.work/ and shared with ``bench_orphans_snapshots.py``): 2,000 commits of one file in each of
50 partitions, never merged, so 100,000 live files in 2,000 manifests. ``--table generated`` builds
the earlier table with the project's own codecs instead. Measured in one run, each method in its
own fresh subprocess:

* ours      ``Table.open`` + latest snapshot + ``live_entries`` (read_parallelism 16 and 1)
* ours-full the same, then every entry's full record read (what a consumer of statistics pays)
* raw       fastavro.reader over the same manifest lists and manifests into lists of dicts,
            sequential, no folding: the floor for a pure-Python reader
* raw-t16   the same raw decoding on a 16-thread pool (does threading help at all?)
* pypaimon  ``new_read_builder().new_scan().plan()`` in the pypaimon venv (bench/pypaimon_plan.py)

Reports medians, ratios (ours/raw, ours/pypaimon), entries per second and memory (the RSS
high-water mark of the first run in a fresh process, tracemalloc peak of one extra run), writes a
JSON result file and a cProfile of our path. Every method must find the same live files (exit 1
otherwise). Timings are never asserted: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import io
import json
import os
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.memory import current_rss, high_water, reset_high_water  # noqa: E402
from bench.support.planning_table import DATABASE, TABLE, ensure_table  # noqa: E402
from bench.support.runs import (  # noqa: E402
    DEFAULT_WORK_DIR,
    PYPAIMON_ENV_VAR,
    RESULTS_DIR,
    MiB,
    machine_facts,
    ours_package,
    pypaimon_python,
    run_json,
    write_result,
)

PYPAIMON_SCRIPT = BENCH_DIR / "pypaimon_plan.py"
DEFAULT_FILES = 100_000
DEFAULT_MANIFESTS = 1_000


# ---- table generation ------------------------------------------------------------------------


# ---- the measured functions (run inside worker subprocesses) -----------------------------------


def run_ours(table_dir: str, parallelism: int, full: bool = False) -> list[Any]:
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(table_dir, read_parallelism=parallelism)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    entries = live_entries(table, snapshot)
    if full:
        for entry in entries:
            entry.record  # noqa: B018  (reading it decodes the rest of the record)
    return entries


def _read_avro(path: str) -> list[dict[str, Any]]:
    import fastavro

    with open(path, "rb") as handle:
        data = handle.read()
    records: list[dict[str, Any]] = list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]
    return records


def run_raw(table_dir: str, threads: int = 1) -> list[list[dict[str, Any]]]:
    """Snapshot JSON, both manifest lists, then every manifest, decoded to dicts. No folding."""
    manifest_dir = os.path.join(table_dir, "manifest")
    with open(os.path.join(table_dir, "snapshot", "LATEST"), encoding="ascii") as handle:
        latest = handle.read().strip()
    with open(os.path.join(table_dir, "snapshot", f"snapshot-{latest}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    metas = _read_avro(os.path.join(manifest_dir, snapshot["baseManifestList"]))
    metas += _read_avro(os.path.join(manifest_dir, snapshot["deltaManifestList"]))
    paths = [os.path.join(manifest_dir, m["_FILE_NAME"]) for m in metas]
    if threads <= 1:
        return [_read_avro(p) for p in paths]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(_read_avro, paths))


def _names_of(method: str, result: Any) -> list[str]:
    if method.startswith("ours"):
        return [e.file.file_name for e in result]
    return [r["_FILE"]["_FILE_NAME"] for records in result for r in records if r["_KIND"] == 0]


def worker(
    method: str, table_dir: str, parallelism: int, repeat: int, warmup: int, trace: bool
) -> dict[str, Any]:
    """Time one method in this (fresh) process; the first run doubles as the memory run."""
    fn: Callable[[], Any]
    if method in ("ours", "ours-full"):

        def fn() -> Any:
            return run_ours(table_dir, parallelism, full=method == "ours-full")

        import airflow_lakeformat.core.paimon.live_files  # noqa: F401  (imports are not part of the timing)
    else:

        def fn() -> Any:
            return run_raw(table_dir, parallelism)

        import fastavro  # noqa: F401

    gc.collect()
    reset_high_water()
    rss_before, peak_before = current_rss(), high_water()
    result = fn()
    peak_after = high_water()
    names = sorted(_names_of(method, result))
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()
    files, unique = len(names), len(set(names))
    records = len(result) if method.startswith("ours") else sum(len(r) for r in result)
    del result, names

    for _ in range(max(0, warmup - 1)):
        fn()
    times, cpu_times = [], []
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        del result

    traced = None
    if trace:
        gc.collect()
        tracemalloc.start()
        result = fn()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del result
        traced = {"peak_bytes": peak, "retained_bytes": current}
    return {
        "times": times,
        "median": statistics.median(times),
        "min": min(times),
        "cpu_times": cpu_times,
        "cpu_median": statistics.median(cpu_times),
        "files": files,
        "unique_files": unique,
        "records": records,
        "digest": digest,
        "memory": {
            "rss_before_bytes": rss_before,
            "peak_rss_before_bytes": peak_before,
            "peak_rss_delta_bytes": peak_after - rss_before,
            "tracemalloc": traced,
        },
    }


def profile_ours(table_dir: str, out_path: Path, top: int) -> list[str]:
    """cProfile one run of our path with read_parallelism=1 (cProfile sees only the calling thread)."""
    run_ours(table_dir, 1)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    run_ours(table_dir, 1)
    profiler.disable()
    lines = []
    for sort in ("cumulative", "tottime"):
        buffer = io.StringIO()
        stats = pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(sort)
        stats.print_stats(top)
        lines.append(f"==== sorted by {sort} ====")
        lines.extend(line for line in buffer.getvalue().splitlines() if line.strip())
    out_path.write_text("\n".join(lines) + "\n")
    return lines


# ---- orchestration ---------------------------------------------------------------------------


def _fmt_mib(value: int | None) -> str:
    return "-" if value is None else f"{value / MiB:8.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.ours_root:
        sys.path.insert(0, str(Path(args.ours_root).resolve()))
    if args.worker:
        method, table_dir, parallelism = args.worker
        document = worker(
            method, table_dir, int(parallelism), args.repeat, args.warmup, not args.no_tracemalloc
        )
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
        return 0

    name, warehouse, table_dir, stats = _prepare_table(args, parser)
    output = Path(args.output) if args.output else RESULTS_DIR / name
    output.parent.mkdir(parents=True, exist_ok=True)
    methods = _measure(args, warehouse, table_dir)
    expected = methods["ours"]
    mismatches = [
        label
        for label, m in methods.items()
        if (m["files"], m["unique_files"], m["digest"])
        != (expected["files"], expected["files"], expected["digest"])
    ]
    if expected["files"] != stats["added_entries"] - stats["deleted_entries"]:
        mismatches.append("table-stats")

    profile_lines: list[str] = []
    if not args.no_profile:
        print("profiling ours (read_parallelism=1) ...", file=sys.stderr)
        profile_lines = profile_ours(str(table_dir), output.with_suffix(".profile.txt"), 15)
    result = _result(args, methods, table_dir, stats, mismatches, profile_lines)
    write_result(output, result)
    _print_summary(args, result, stats)
    print(f"results: {output}")
    return 0 if not mismatches else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--table",
        choices=["pypaimon", "generated"],
        default="pypaimon",
        help="pypaimon: written by pypaimon (--commits x --partitions files, one manifest per commit); "
        "generated: written with the project's codecs (--files, --manifests, --commits)",
    )
    parser.add_argument(
        "--files", type=int, default=DEFAULT_FILES, help="generated: ADD entries (data files) in the table"
    )
    parser.add_argument(
        "--manifests", type=int, default=DEFAULT_MANIFESTS, help="generated: manifest files in total"
    )
    parser.add_argument(
        "--commits", type=int, default=None, help="snapshots (pypaimon: 2000; generated: manifests / 10)"
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="distinct dt partition values (pypaimon 50, generated 100)",
    )
    parser.add_argument("--rows", type=int, default=2, help="pypaimon: rows per partition per commit")
    parser.add_argument(
        "--compression", default="zstd", help="manifest compression (zstd, snappy, deflate, none)"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed repetitions per method (median reported)"
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed runs first (the first is the memory run)"
    )
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where generated tables are cached")
    parser.add_argument(
        "--output", default=None, help="JSON result file (default bench/results/planning*.json)"
    )
    parser.add_argument(
        "--pypaimon-python", default=None, help=f"pypaimon interpreter (else ${PYPAIMON_ENV_VAR})"
    )
    parser.add_argument("--skip-pypaimon", action="store_true")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the extra tracemalloc runs")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached table")
    parser.add_argument(
        "--ours-root",
        default=None,
        help="directory holding an alternative airflow_lakeformat package to measure as 'ours' "
        "(e.g. a patched copy, to measure an optimization); default: this repository",
    )
    parser.add_argument(
        "--worker", nargs=3, metavar=("METHOD", "TABLE_DIR", "PARALLELISM"), help=argparse.SUPPRESS
    )
    return parser


def _prepare_table(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> tuple[str, Path, Path, dict[str, Any]]:
    """The table of ``--table`` (built or taken from the cache): (result file name, warehouse, table, stats)."""
    if args.table == "pypaimon":
        from bench.support.pypaimon_table import ensure_pypaimon_table

        args.commits = args.commits or 2000
        args.partitions = args.partitions or 50
        default_size = (args.commits, args.partitions, args.rows) == (2000, 50, 2)
        name = (
            "planning.json" if default_size else f"planning-pypaimon-c{args.commits}-p{args.partitions}.json"
        )
        _, warehouse, table_dir, facts = ensure_pypaimon_table(
            Path(args.work_dir), args.commits, args.partitions, args.rows, args.rebuild, args.pypaimon_python
        )
        stats = {
            "snapshots": facts["snapshots"],
            "manifests": facts["distinct_manifests"],
            "manifest_bytes": facts["manifest_bytes"],
            "added_entries": facts["live_files"],
            "deleted_entries": 0,
            "writer": facts["build"],
        }
    else:
        args.partitions = args.partitions or 100
        if args.commits is None:
            args.commits = max(1, args.manifests // 10)
        if (
            args.files < 1
            or args.manifests < 1
            or args.commits > args.manifests
            or args.manifests > args.files
        ):
            parser.error("need 1 <= commits <= manifests <= files")
        name = f"planning-generated-f{args.files}-m{args.manifests}.json"
        warehouse, table_dir, stats = ensure_table(args)
    return name, warehouse, table_dir, stats


def _measure(args: argparse.Namespace, warehouse: Path, table_dir: Path) -> dict[str, dict[str, Any]]:
    """Every method in its own fresh worker process (pypaimon in its venv, unless skipped)."""
    common = ["--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    if args.no_tracemalloc:
        common.append("--no-tracemalloc")
    me = [sys.executable, str(Path(__file__).resolve())]
    if args.ours_root:
        me += ["--ours-root", str(Path(args.ours_root).resolve())]
    methods: dict[str, dict[str, Any]] = {}
    plan = [
        ("ours", "ours", 16),
        ("ours-p1", "ours", 1),
        ("ours-full", "ours-full", 16),
        ("raw", "raw", 1),
        ("raw-t16", "raw", 16),
    ]
    for label, method, parallelism in plan:
        print(f"measuring {label} ...", file=sys.stderr)
        methods[label] = run_json([*me, *common, "--worker", method, str(table_dir), str(parallelism)])
        methods[label]["method"] = method
        methods[label]["parallelism"] = parallelism

    pypaimon = pypaimon_python(args.pypaimon_python)
    if args.skip_pypaimon:
        print("pypaimon skipped (--skip-pypaimon)", file=sys.stderr)
    elif pypaimon is None:
        print(
            f"pypaimon skipped: no interpreter (set ${PYPAIMON_ENV_VAR} or run scripts/setup.sh)",
            file=sys.stderr,
        )
    else:
        print(f"measuring pypaimon ({pypaimon}) ...", file=sys.stderr)
        document = run_json([str(pypaimon), str(PYPAIMON_SCRIPT), str(warehouse), DATABASE, TABLE, *common])
        document["method"] = "pypaimon"
        document["interpreter"] = str(pypaimon)
        methods["pypaimon"] = document

    return methods


def _result(
    args: argparse.Namespace,
    methods: dict[str, dict[str, Any]],
    table_dir: Path,
    stats: dict[str, Any],
    mismatches: list[str],
    profile_lines: list[str],
) -> dict[str, Any]:
    """The result document: every method's ratios to raw and pypaimon, and the issue's targets."""
    expected = methods["ours"]
    raw = methods["raw"]["median"]
    pyp = methods.get("pypaimon", {}).get("median")
    raw_cpu = methods["raw"]["cpu_median"]
    pyp_cpu = methods.get("pypaimon", {}).get("cpu_median")
    for m in methods.values():
        m["vs_raw"] = m["median"] / raw
        m["vs_pypaimon"] = m["median"] / pyp if pyp else None
        m["cpu_vs_raw"] = m["cpu_median"] / raw_cpu
        m["cpu_vs_pypaimon"] = m["cpu_median"] / pyp_cpu if pyp_cpu else None
        m["entries_per_second"] = expected["files"] / m["median"]
    ours = methods["ours"]["median"]
    return {
        "benchmark": "live-file planning",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "params": {
            k: getattr(args, k)
            for k in (
                "table",
                "files",
                "manifests",
                "commits",
                "partitions",
                "rows",
                "compression",
                "repeat",
                "warmup",
            )
        },
        "table": {"path": str(table_dir), **stats},
        "ours_package": ours_package(),
        "memory_method": (
            "peak_rss_delta = the RSS high-water mark (VmHWM, reset right before) after the first "
            "(untimed) run in a fresh worker process minus the RSS just before it; tracemalloc = peak "
            "and retained (result still alive) Python allocations of one extra run under tracemalloc"
        ),
        "methods": methods,
        "ratios": {
            "ours/raw": ours / raw,
            "ours/pypaimon": ours / pyp if pyp else None,
            "ours-p1/raw": methods["ours-p1"]["median"] / raw,
            "ours-p1/pypaimon": methods["ours-p1"]["median"] / pyp if pyp else None,
            "ours-full/raw": methods["ours-full"]["median"] / raw,
            "pypaimon/ours": pyp / ours if pyp else None,
            "cpu: ours/raw": methods["ours"]["cpu_median"] / raw_cpu,
            "cpu: pypaimon/ours": pyp_cpu / methods["ours"]["cpu_median"] if pyp_cpu else None,
            "cpu: ours-full/raw": methods["ours-full"]["cpu_median"] / raw_cpu,
            "pypaimon/raw": pyp / raw if pyp else None,
            "raw-t16/raw": methods["raw-t16"]["median"] / raw,
        },
        "targets": {
            "at_least_5x_faster_than_pypaimon": (pyp >= 5 * ours) if pyp else None,
            "no_slower_than_raw_1_thread": ours <= raw,
            "peak_rss_at_most_300_MB": methods["ours"]["memory"]["peak_rss_delta_bytes"] <= 300 * 10**6,
        },
        "file_sets_agree": not mismatches,
        "mismatches": mismatches,
        "profile_top": profile_lines,
    }


def _print_summary(args: argparse.Namespace, result: dict[str, Any], stats: dict[str, Any]) -> None:
    methods, mismatches = result["methods"], result["mismatches"]
    expected = methods["ours"]
    pyp = methods.get("pypaimon", {}).get("median")
    print()
    print(
        f"table: {expected['files']:,} live files in {stats['manifests']:,} manifests "
        f"({stats['manifest_bytes'] / MiB:.1f} MiB of Avro), {stats['snapshots']} snapshots, written by "
        f"{'pypaimon' if args.table == 'pypaimon' else 'this project'}"
    )
    header = (
        f"{'method':<10} {'median s':>9} {'min s':>8} {'/raw':>6} {'/pypaimon':>9} {'cpu s':>7} {'cpu/raw':>7} "
        f"{'entries/s':>11} {'peakRSS+ MiB':>12} {'tm peak MiB':>11} {'tm kept MiB':>11}"
    )
    print(header)
    print("-" * len(header))
    for label, m in methods.items():
        traced = m["memory"]["tracemalloc"] or {}
        vs_pyp = f"{m['vs_pypaimon']:9.2f}" if m["vs_pypaimon"] else f"{'-':>9}"
        print(
            f"{label:<10} {m['median']:9.3f} {m['min']:8.3f} {m['vs_raw']:6.2f} {vs_pyp} "
            f"{m['cpu_median']:7.3f} {m['cpu_vs_raw']:7.2f} {m['entries_per_second']:11,.0f} {_fmt_mib(m['memory']['peak_rss_delta_bytes']):>12} "
            f"{_fmt_mib(traced.get('peak_bytes')):>11} {_fmt_mib(traced.get('retained_bytes')):>11}"
        )
    print()
    ratios = result["ratios"]
    print(
        f"ours/raw = {ratios['ours/raw']:.2f} (target <= 1)   "
        + (f"pypaimon/ours = {ratios['pypaimon/ours']:.2f} (target >= 5)" if pyp else "pypaimon not measured")
        + f"   ours-full/raw = {ratios['ours-full/raw']:.2f}"
    )
    print(f"file sets agree: {not mismatches}" + (f" (mismatch: {mismatches})" if mismatches else ""))


if __name__ == "__main__":
    sys.exit(main())
