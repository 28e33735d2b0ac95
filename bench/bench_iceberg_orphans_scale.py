"""Iceberg orphan cleanup at scale: 1M files, or a many-snapshot table; files classified/s and peak RSS.

    .venv/bin/python bench/bench_iceberg_orphans_scale.py [--shape files|snapshots] [--repeat 3]
        [--profile] [--rebuild] [--output bench/results/iceberg_orphans_scale_<shape>.json]

Two shapes, each built once and cached under ``bench/.work/iceberg-orphans-<shape>-...`` (a Hadoop-layout
table: ``open_path_table`` opens it; ``--rebuild`` builds it again):

* ``files`` (issue 14 goal 1 at 1M files): ``--commits`` (200) fast appends of ``--files-per-commit``
  (4,500) empty data files over 50 identity partitions (900,000 referenced files), then old orphans up to
  ``--files`` (1,000,000) files in the tree: most in the partition directories, some in a partition no
  snapshot has, some in ``metadata/`` (stray manifests, manifest lists, metadata JSON files).
* ``snapshots`` (the many-snapshot table): 2,000 fast appends of 50 files, one per partition (100,000
  live files in 2,000 manifests; snapshot ``k``'s manifest list holds ``k`` manifests: about 2 million
  manifest-list rows), plus 20,000 old orphans.

The table is written the way ``bench_iceberg_planning.py`` does: pyiceberg's ``write_manifest`` /
``write_manifest_list`` with ``DataFile.from_args`` records (no Parquet), and ``AddSnapshotUpdate`` +
``SetSnapshotRefUpdate`` commits through ``commit_with_retry``. Every snapshot is a fast append (a new
manifest, the manifest list carries all earlier ones); ``--snapshots-per-commit`` snapshots go into one
metadata commit (default 1 for ``files``, 20 for ``snapshots``: 2,000 single-snapshot commits would write
2,000 metadata files of up to 1 MB). ``write.metadata.previous-versions-max`` is raised so every metadata
file stays in the metadata log (none is an orphan of the build). Data files get their commit time (30 days
ago onwards) as mtime, metadata files are aged to 30 days, orphans to 10 days; a few fresh orphans (mtime
now) and old hidden files (``_SUCCESS``, ``.crc``) are planted too and must not be orphans.

pyiceberg 0.12 writes every manifest entry as its own Avro block (each inflated on its own when read);
``--block-entries 400`` writes blocks of about Java's size (64 KB) instead, into a table cached apart.

Measured in one run, each in a fresh process:

* raw-walk  ``os.scandir`` over the table tree with ``stat`` of every file (and names only)
* raw-used  the current metadata JSON, then fastavro names-only (a reader schema of the path fields) over
            every snapshot's manifest list and every distinct manifest, file paths into a set
* plan      ``plan_orphan_cleanup(table, older_than=timedelta(days=1))`` (real clock), split with its
            ``progress`` / ``on_phase`` hooks into listing, refresh, manifest lists, manifests and
            classification; the process's RSS high-water mark (VmHWM, reset before the plan) and its delta
plan-memory the same plan once more, untimed, with the memory of its process and of the helper it forks
            sampled from outside (``bench/support/tree_memory.py``): the peak of their summed PSS, which is the physical
            memory the two hold together (the helper's pages are mostly the parent's, shared)

Files classified/s = files listed / plan seconds; ratios against the raw floors of the same run. Checks
(exit 1 if any fails): the plan's orphans are exactly the planted old orphans (by path and by kind), and the
plan's valid set holds every referenced data file. ``--profile`` writes a cProfile of one more plan.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.iceberg_orphan_table import ensure_table, local_path  # noqa: E402
from bench.support.memory import memory_around  # noqa: E402
from bench.support.orphan_table import PhaseClock, project, worker_walk  # noqa: E402
from bench.support.paimon_history import tree_digest  # noqa: E402
from bench.support.runs import DEFAULT_WORK_DIR, RESULTS_DIR, MiB, machine_facts, run_json, write_result  # noqa: E402
from bench.support.tree_memory import run_json_sampled  # noqa: E402

GOAL_FILES_PER_SECOND = 200_000
GOAL_PEAK_RSS_MIB = 500
SHAPES = {
    "files": {"commits": 200, "files_per_commit": 4500, "files": 1_000_000, "orphans": None, "per_commit": 1},
    "snapshots": {
        "commits": 2000,
        "files_per_commit": 50,
        "files": None,
        "orphans": 20_000,
        "per_commit": 20,
    },
}
LISTING_TASK = "start:listing the table's files"
LISTS_TASK = "start:reading manifest lists"
MANIFESTS_TASK = "start:reading manifests"


# ---- build (once, cached) ------------------------------------------------------------------------


# ---- the measured work (worker processes) --------------------------------------------------------


def _current_metadata(table_dir: str) -> dict[str, Any]:
    metadata_dir = os.path.join(table_dir, "metadata")
    with open(os.path.join(metadata_dir, "version-hint.text"), encoding="ascii") as handle:
        version = int(handle.read().strip())
    while os.path.exists(os.path.join(metadata_dir, f"v{version + 1}.metadata.json")):
        version += 1
    with open(os.path.join(metadata_dir, f"v{version}.metadata.json"), encoding="utf-8") as handle:
        return json.load(handle)  # type: ignore[no-any-return]


def raw_used_set(table_dir: str) -> dict[str, Any]:
    """The floor of the valid set: metadata JSON, then names-only fastavro over lists and manifests."""
    import fastavro

    readers: dict[str, Any] = {}

    def records(path: str, keep: dict[str, Any]) -> Any:
        with open(local_path(path), "rb") as handle:
            data = handle.read()
        writer = fastavro.reader(io.BytesIO(data)).writer_schema
        key = repr(writer)
        if key not in readers:
            readers[key] = project(writer, keep)
        return fastavro.reader(io.BytesIO(data), reader_schema=readers[key])

    cpu0, t0 = time.process_time(), time.perf_counter()
    metadata = _current_metadata(table_dir)
    lists = [s["manifest-list"] for s in metadata.get("snapshots", [])]
    names: set[str] = set(lists)
    names.update(e["metadata-file"] for e in metadata.get("metadata-log", []))
    manifests: set[str] = set()
    rows = 0
    for path in lists:
        for record in records(path, {"manifest_path": None}):
            manifests.add(record["manifest_path"])
            rows += 1
    t1 = time.perf_counter()
    names |= manifests
    entries = 0
    for path in manifests:
        for record in records(path, {"status": None, "data_file": {"file_path": None}}):
            if record["status"] != 2:
                names.add(record["data_file"]["file_path"])
            entries += 1
    t2 = time.perf_counter()
    return {
        "seconds": t2 - t0,
        "cpu_seconds": time.process_time() - cpu0,
        "lists_seconds": t1 - t0,
        "manifests_seconds": t2 - t1,
        "manifest_lists": len(lists),
        "manifest_list_rows": rows,
        "manifests": len(manifests),
        "entries": entries,
        "names": len(names),
    }


def worker_raw_used(table_dir: str) -> dict[str, Any]:
    out, memory = memory_around(lambda: raw_used_set(table_dir))
    out["memory"] = memory
    return out


def _phases(clock: PhaseClock, began: float, ended: float) -> tuple[dict[str, float], dict[str, float]]:
    listing_end = clock.finish_after(LISTING_TASK)
    listed, collected = clock.at("phase:listed"), clock.at("phase:collected")
    lists_end = clock.finish_after(LISTS_TASK) if any(n == LISTS_TASK for n, _, _ in clock.events) else listed
    bounds = {
        "guards_and_roots": (began, clock.at(LISTING_TASK)),
        "listing": (clock.at(LISTING_TASK), listing_end),
        "refresh": (listed, clock.at(LISTS_TASK) if lists_end != listed else listed),
        "manifest_lists": (clock.at(LISTS_TASK) if lists_end != listed else listed, lists_end),
        "manifests": (lists_end, collected),
        "classification": (collected, ended),
        "used_set": (listed, collected),
        "total": (began, ended),
    }
    wall = {name: b - a for name, (a, b) in bounds.items()}
    cpu = {name: clock.cpu[b] - clock.cpu[a] for name, (a, b) in bounds.items()}
    return wall, cpu


def worker_plan(table_dir: str, planted_file: str, profile_out: str | None) -> dict[str, Any]:
    """Open the table, plan in this fresh process (phases, RSS high-water), check the orphans."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import plan_orphan_cleanup

    planting = json.loads(Path(planted_file).read_text())
    t0 = time.perf_counter()
    table = open_path_table(table_dir)
    open_seconds = time.perf_counter() - t0
    clock = PhaseClock()
    marks: dict[str, float] = {}

    def run_plan() -> Any:
        marks["began"] = clock._now()
        plan = plan_orphan_cleanup(table, older_than=timedelta(days=1), progress=clock, on_phase=clock.phase)
        marks["ended"] = clock._now()
        return plan

    plan, memory = memory_around(run_plan)
    memory["rss_at"] = clock.rss
    # The helper process (and forked listing child) of the plan: its CPU and peak RSS count too.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    memory["children_max_rss_bytes"] = children.ru_maxrss * 1024
    memory["children_cpu_seconds"] = children.ru_utime + children.ru_stime
    phases, cpu = _phases(clock, marks["began"], marks["ended"])
    summary = plan.to_json(sample_limit=0)
    expected = {p for paths in planting["old"].values() for p in paths}
    found = {r.path for r in plan.orphans}
    kinds = {k: len(v) for k, v in planting["old"].items() if v}
    checks = {
        "orphans_are_exactly_the_planted_old_ones": found == expected,
        "planted_old_not_classified": len(expected - found),
        "unexpected_orphans": sorted(found - expected)[:10],
        "orphans_by_kind_match": summary["files"] == dict(sorted(kinds.items())),
        "no_prefix_mismatches": not plan.mismatches,
    }
    out: dict[str, Any] = {
        "open_seconds": open_seconds,
        "phases": phases,
        "cpu_phases": cpu,
        "plan": {k: v for k, v in summary.items() if k not in ("orphanPaths", "prefixMismatches")},
        "checks": checks,
        "memory": memory,
    }
    if profile_out:
        del plan
        profiler = cProfile.Profile()
        profiler.enable()
        plan_orphan_cleanup(table, older_than=timedelta(days=1))
        profiler.disable()
        profiler.dump_stats(profile_out)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
        out["profile_top"] = text.getvalue().splitlines()[:60]
    return out


# ---- orchestration -------------------------------------------------------------------------------


def figures(
    run: dict[str, Any], walk: dict[str, Any], raw_used: dict[str, Any], tree: dict[str, Any]
) -> dict[str, Any]:
    phases, listed = run["phases"], run["plan"]["filesListed"]
    raw_stat = walk["stat"]["median"]
    floor = raw_stat + raw_used["seconds"]
    memory = run["memory"]
    together_mib = tree["peak_pss_bytes"] / MiB
    return {
        "files_listed": listed,
        "plan_seconds": phases["total"],
        "files_classified_per_second": listed / phases["total"],
        "raw_floor_seconds": floor,
        "raw_floor_files_per_second": listed / floor,
        "plan/raw_floor": phases["total"] / floor,
        "listing_seconds": phases["listing"],
        "listing/raw_walk_stat": phases["listing"] / raw_stat,
        "listing/raw_walk_names": phases["listing"] / walk["names"]["median"],
        "used_set_seconds": phases["used_set"],
        "used_set/raw_used_names_only": phases["used_set"] / raw_used["seconds"],
        "classification_seconds": phases["classification"],
        "plan_cpu_seconds": run["cpu_phases"]["total"],
        "helper_cpu_seconds": memory.get("children_cpu_seconds", 0.0),
        "peak_rss_mib": memory["high_water_bytes"] / MiB,
        "helper_peak_rss_mib": memory.get("children_max_rss_bytes", 0) / MiB,
        "plan_and_helper_peak_pss_mib": together_mib,
        "plan_and_helper_peak_rss_sum_mib": tree["peak_rss_sum_bytes"] / MiB,
        "memory_samples": tree["samples"],
        "plan_high_water_delta_mib": memory["high_water_delta_bytes"] / MiB,
        "raw_used_high_water_delta_mib": raw_used["memory"]["high_water_delta_bytes"] / MiB,
        "goals": {
            "files_classified_per_second": GOAL_FILES_PER_SECOND,
            "peak_rss_mib": GOAL_PEAK_RSS_MIB,
            "met": listed / phases["total"] >= GOAL_FILES_PER_SECOND
            and max(memory["high_water_bytes"] / MiB, together_mib) <= GOAL_PEAK_RSS_MIB,
        },
    }


def print_summary(result: dict[str, Any]) -> None:
    f, run, t = result["figures"], result["run"], result["table"]
    print()
    print(
        f"table ({result['params']['shape']}): {t['files_in_tree']:,} files, {t['commits']} snapshots, "
        f"{t['manifests']} manifests, {t['referenced_data_files']:,} live data files, "
        f"{result['planted']['old']:,} planted old orphans; open {run['open_seconds']:.2f} s"
    )
    print(f"{'phase':<18} {'seconds':>8} {'cpu s':>8}")
    for name, seconds in run["phases"].items():
        print(f"{name:<18} {seconds:8.2f} {run['cpu_phases'][name]:8.2f}")
    goal = f["goals"]
    print(
        f"plan {f['plan_seconds']:.2f} s = {f['files_classified_per_second']:,.0f} files classified/s "
        f"(goal >= {goal['files_classified_per_second']:,}); raw floor {f['raw_floor_seconds']:.2f} s = "
        f"{f['raw_floor_files_per_second']:,.0f} files/s; plan/raw floor {f['plan/raw_floor']:.2f}"
    )
    print(
        f"listing {f['listing_seconds']:.2f} s (/raw walk with stat {f['listing/raw_walk_stat']:.2f}, "
        f"/names only {f['listing/raw_walk_names']:.2f}); used set {f['used_set_seconds']:.2f} s "
        f"(/raw names-only fastavro {f['used_set/raw_used_names_only']:.2f})"
    )
    print(
        f"peak RSS {f['peak_rss_mib']:.0f} MiB, helper process {f['helper_peak_rss_mib']:.0f} MiB (goal <= "
        f"{goal['peak_rss_mib']}); the two together {f['plan_and_helper_peak_pss_mib']:.0f} MiB PSS "
        f"({f['plan_and_helper_peak_rss_sum_mib']:.0f} MiB RSS summed, {f['memory_samples']} samples); plan delta +{f['plan_high_water_delta_mib']:.0f} MiB (raw used set "
        f"+{f['raw_used_high_water_delta_mib']:.0f} MiB); CPU {f['plan_cpu_seconds']:.2f} s here + "
        f"{f['helper_cpu_seconds']:.2f} s in the helper"
    )
    print(f"goals met: {goal['met']}; checks: {run['checks']}")
    if result["failures"]:
        print(f"FAILURES: {result['failures']}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        if kind == "walk":
            document = worker_walk(rest[0], args.repeat)
        elif kind == "raw-used":
            document = worker_raw_used(rest[0])
        else:
            document = worker_plan(rest[0], rest[1], rest[2] if len(rest) > 2 else None)
        print(json.dumps(document))
        return 0
    shape = SHAPES[args.shape]
    args.commits = args.commits or shape["commits"]
    args.files_per_commit = args.files_per_commit or shape["files_per_commit"]
    args.snapshots_per_commit = args.snapshots_per_commit or shape["per_commit"]
    if args.files is None and args.orphans is None:
        args.files, args.orphans = shape["files"], shape["orphans"]
    suffix = f"_b{args.block_entries}" if args.block_entries > 1 else ""
    output = (
        Path(args.output) if args.output else RESULTS_DIR / f"iceberg_orphans_scale_{args.shape}{suffix}.json"
    )
    started, load_start = time.perf_counter(), os.getloadavg()
    root, table_dir, facts = ensure_table(args)
    count, digest = tree_digest(str(table_dir))
    if (count, digest) != (facts["files_in_tree"], facts["tree_digest"]):
        print(f"the cached table changed ({count} files); use --rebuild", file=sys.stderr)
        return 1
    planted = root / "planted.json"
    planting = json.loads(planted.read_text())
    walk, raw_used, run, sampled, tree = _run_methods(args, table_dir, planted, output)
    failures = [
        f"{label}{name}"
        for label, checks in (("", run["checks"]), ("memory run: ", sampled["checks"]))
        for name, value in checks.items()
        if value is False or (name in ("planted_old_not_classified", "unexpected_orphans") and value)
    ]
    if (
        raw_used["names"] - raw_used["manifest_lists"] - raw_used["manifests"]
        < facts["referenced_data_files"]
    ):
        failures.append("raw used set misses referenced data files")
    result: dict[str, Any] = {
        "benchmark": "iceberg orphan-file cleanup at scale",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "params": {
            "shape": args.shape,
            "commits": args.commits,
            "files_per_commit": args.files_per_commit,
            "files": args.files,
            "orphans": args.orphans,
            "repeat": args.repeat,
            "block_entries": args.block_entries,
        },
        "table": {"path": str(table_dir), **facts},
        "planted": {
            "old": sum(len(v) for v in planting["old"].values()),
            "old_by_kind": {k: len(v) for k, v in planting["old"].items()},
            "fresh": len(planting["fresh"]),
            "hidden": len(planting["hidden"]),
        },
        "raw_walk": walk,
        "raw_used": raw_used,
        "run": run,
        "memory_run": {"tree": tree, "memory": sampled["memory"], "checks": sampled["checks"]},
        "figures": figures(run, walk, raw_used, tree),
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "failures": failures,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    write_result(output, result)
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="files")
    parser.add_argument("--commits", type=int, default=None, help="fast appends (snapshots)")
    parser.add_argument("--files-per-commit", type=int, default=None)
    parser.add_argument("--files", type=int, default=None, help="files in the tree (files shape)")
    parser.add_argument("--orphans", type=int, default=None, help="old orphans (snapshots shape)")
    parser.add_argument(
        "--snapshots-per-commit", type=int, default=None, help="snapshots per metadata commit"
    )
    parser.add_argument(
        "--block-entries",
        type=int,
        default=1,
        help="manifest entries per Avro block: 1 is what pyiceberg 0.12 writes; Java's writer fills blocks "
        "of about 64 KB (about 400 of these entries)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed raw walks (median reported)")
    parser.add_argument("--profile", action="store_true", help="cProfile one more plan")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--output", default=None)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


def _run_methods(
    args: argparse.Namespace, table_dir: Path, planted: Path, output: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Every method in its own worker: raw walk, raw used set, the plan, and the plan with sampled memory."""
    me = [sys.executable, str(Path(__file__).resolve())]
    print("raw walk ...", file=sys.stderr)
    walk = run_json([*me, "--repeat", str(args.repeat), "--worker", "walk", str(table_dir)])
    print("raw used set ...", file=sys.stderr)
    raw_used = run_json([*me, "--worker", "raw-used", str(table_dir)])
    print("plan ...", file=sys.stderr)
    worker = [*me, "--worker", "plan", str(table_dir), str(planted)]
    if args.profile:
        worker.append(str(output.with_suffix(".prof")))
    run = run_json(worker)
    print("plan, memory sampled ...", file=sys.stderr)
    sampled, tree = run_json_sampled([*me, "--worker", "plan", str(table_dir), str(planted)])
    return walk, raw_used, run, sampled, tree


if __name__ == "__main__":
    sys.exit(main())
