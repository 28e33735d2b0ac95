"""Orphan-file cleanup over a table directory of 1M files: phases, files classified/s, memory, deletes/s.

    .venv/bin/python bench/bench_orphans.py [--files 1000000] [--snapshots 200]

Builds once (cached under bench/.work/) a partitioned, bucketed append table with the core's own
commit path (``create_table`` + ``Committer`` with the default manifest merge policy and an injected
clock 30 days in the past): a bulk load of 80 % of the referenced data files, then ``--snapshots``
- 1 commits, appends and every 5th a compaction that DELETEs the files the preceding appends wrote
into one partition and ADDs one file per bucket. Data files exist on disk (empty, mtime = their
commit time); metadata files are aged to 30 days. 90 % of ``--files`` are referenced data files.

Each run then plants the rest up to ``--files``: old orphans (mtime 10 days ago) in every location
cleanup lists (bucket directories, new partitions, ``manifest/``, ``index/``, ``statistics/``, stale
temp files in ``snapshot/``), 0.1 % fresh orphans (mtime now) and a few old empty bucket
directories, and measures, in one run:

* raw-walk    ``os.scandir`` over the table tree with ``stat`` (size, mtime) of every file, and
              names only: the floor for the listing phase
* raw-used    fastavro over every snapshot's manifest lists and every distinct manifest, collecting
              ``_FILE_NAME`` into a set: the floor for the used-set phase
* plan        ``plan_orphan_cleanup`` (default ``older_than`` = 1 day, real clock), split with the
              progress and ``on_phase`` hooks into candidate directories, listing, empty-directory
              scan, used metadata (snapshots, manifest lists), manifest reading, classification;
              peak RSS in a fresh process
* plan-gc-off the same plan with the cyclic GC paused (what pausing it inside the core would give)
* execute     ``execute_orphan_cleanup`` with ``dry_run=True``, then for real (deletes/s)

Correctness is checked in the same run (exit 1 otherwise): the plan's orphans are exactly the
planted old orphans, its empty directories exactly the planted ones, the dry run deletes nothing,
and afterwards the tree is exactly the pristine table plus the fresh orphans (which the benchmark
then removes through the core's FileDeleter, so the cached table is reused). Timings are never
asserted: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
# A worker measures the airflow_lakeformat package found here instead (--baseline-root: "before").
PACKAGE_ROOT_ENV = "LAKEFORMAT_BENCH_PACKAGE_ROOT"
if os.environ.get(PACKAGE_ROOT_ENV):
    sys.path.insert(0, os.environ[PACKAGE_ROOT_ENV])

from bench.support.memory import memory_around  # noqa: E402
from bench.support.orphan_table import (  # noqa: E402
    DEFAULT_FILES,
    DEFAULT_SNAPSHOTS,
    PhaseClock,
    ensure_table,
    plan_planting,
    plant,
    raw_used_set,
    remove_planted,
    worker_walk,
)
from bench.support.paimon_history import DAY, tree_digest  # noqa: E402
from bench.support.runs import (  # noqa: E402
    DEFAULT_WORK_DIR,
    RESULTS_DIR,
    MiB,
    machine_facts,
    run_json,
    run_json_env,
    write_result,
)


def worker_raw_used(table_dir: str, full: bool = True) -> dict[str, Any]:
    """The names-only raw used set with the cyclic GC enabled (as a user's process runs), then paused;
    then (``full``) the full decode with the GC enabled."""
    out, memory = memory_around(lambda: raw_used_set(table_dir))
    out["memory"] = memory
    gc.collect()
    gc.disable()
    try:
        out["gc_off"] = raw_used_set(table_dir)
    finally:
        gc.enable()
    if full:
        out["full"] = raw_used_set(table_dir, names_only=False)
    return out


def _split_phases(clock: PhaseClock, began: float, ended: float) -> tuple[dict[str, float], dict[str, float]]:
    """Wall seconds and CPU seconds (process-wide) of each phase of the plan."""
    listing = "start:listing candidate directories"
    reading = "start:reading manifests for the used set"
    listing_start, listing_end = clock.at(listing), clock.finish_after(listing)
    listed = clock.at("phase:listed")
    reading_start, reading_end = clock.at(reading), clock.finish_after(reading)
    collected = clock.at("phase:collected")
    bounds = {
        "candidate_directories": (began, listing_start),
        "listing": (listing_start, listing_end),
        "empty_directory_scan": (listing_end, listed),
        "used_metadata": (listed, reading_start),
        "manifest_reading": (reading_start, reading_end),
        "classification": (collected, ended),
        "total": (began, ended),
    }
    wall = {name: b - a for name, (a, b) in bounds.items()}
    cpu = {name: clock.cpu[b] - clock.cpu[a] for name, (a, b) in bounds.items()}
    return wall, cpu


def _expected(planting: dict[str, Any]) -> tuple[set[str], dict[str, int]]:
    paths = {p for ps in planting["old"].values() for p in ps}
    return paths, {kind: len(ps) for kind, ps in planting["old"].items() if ps}


def worker_plan(table_dir: str, planting_file: str, mode: str) -> dict[str, Any]:
    """Plan (and, in mode "execute", dry-run and then really execute) in this fresh process.

    Modes: "execute" (plan, checks, dry run, real run); plan only: "plan", "gc-off" (cyclic GC
    paused), "p1" (read_parallelism 1), "p1-gc-off" (both), "tracemalloc" (under tracemalloc).
    """
    from airflow_lakeformat.core.paimon.table import Table

    planting = json.loads(Path(planting_file).read_text())
    expected_paths, expected_kinds = _expected(planting)
    # "p1": one listing/reading thread instead of the default read_parallelism (16).
    table = Table.open(table_dir, read_parallelism=1) if mode.startswith("p1") else Table.open(table_dir)
    plan, memory, phases, cpu_phases = _measured_plan(table, mode)
    summary = plan.to_json()
    orphan_paths = {r.path for r in plan.orphans}
    checks = {
        "orphans_are_exactly_the_planted_old_ones": orphan_paths == expected_paths,
        "planted_old_not_classified": len(expected_paths - orphan_paths),
        "unexpected_orphans": sorted(orphan_paths - expected_paths)[:10],
        "orphans_by_kind_match": summary["files"] == dict(sorted(expected_kinds.items())),
        "empty_directories_are_exactly_the_planted_ones": sorted(plan.empty_directories)
        == sorted(planting["empty_dirs"]),
    }
    out: dict[str, Any] = {
        "mode": mode,
        "phases": phases,
        "cpu_phases": cpu_phases,
        "plan": summary,
        "checks": checks,
        "memory": memory,
    }
    ok = (
        checks["orphans_are_exactly_the_planted_old_ones"]
        and checks["orphans_by_kind_match"]
        and checks["empty_directories_are_exactly_the_planted_ones"]
    )
    if mode != "execute":
        return out
    if not ok:
        out["executed"] = False
        return out
    out.update(_execute_checked(table, plan, summary, expected_paths, planting, checks))
    return out


def _measured_plan(table: Any, mode: str) -> tuple[Any, dict[str, Any], dict[str, float], dict[str, float]]:
    """The plan with its memory (under tracemalloc in that mode) and its phases' wall and CPU seconds."""
    from airflow_lakeformat.core.collector import gc_paused
    from airflow_lakeformat.core.paimon.maintenance.orphans import plan_orphan_cleanup

    clock = PhaseClock()
    marks: dict[str, float] = {}

    def run_plan() -> Any:
        if mode == "tracemalloc":
            tracemalloc.start()
        marks["began"] = clock._now()
        if mode.endswith("gc-off"):
            with gc_paused():
                plan = plan_orphan_cleanup(table, progress=clock, on_phase=clock.phase)
        else:
            plan = plan_orphan_cleanup(table, progress=clock, on_phase=clock.phase)
        marks["ended"] = clock._now()
        return plan

    plan, memory = memory_around(run_plan)
    memory["rss_at"] = clock.rss
    memory["tracemalloc"] = None
    if mode == "tracemalloc":
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        memory["tracemalloc"] = {"peak_bytes": peak, "retained_bytes": current}
    phases, cpu_phases = _split_phases(clock, marks["began"], marks["ended"])
    return plan, memory, phases, cpu_phases


def _execute_checked(
    table: Any,
    plan: Any,
    summary: dict[str, Any],
    expected_paths: set[str],
    planting: dict[str, Any],
    checks: dict[str, Any],
) -> dict[str, Any]:
    """A dry run (must delete nothing), then the real run (must delete exactly the planted old orphans);
    adds its checks to ``checks``."""
    from airflow_lakeformat.core.paimon.maintenance.orphans import execute_orphan_cleanup

    present_before = sum(1 for p in expected_paths if os.path.exists(p))
    t0 = time.perf_counter()
    dry = execute_orphan_cleanup(table, plan, dry_run=True)
    dry_seconds = time.perf_counter() - t0
    present_after_dry = sum(1 for p in expected_paths if os.path.exists(p))
    dry_json = dry.to_json()
    checks["dry_run_deleted_nothing"] = present_before == present_after_dry == len(expected_paths)
    checks["dry_run_counts_match"] = dry_json["files"] == summary["files"] and dry_json["keptByRecheck"] == 0
    if not (checks["dry_run_deleted_nothing"] and checks["dry_run_counts_match"]):
        return {"executed": False}
    t0 = time.perf_counter()
    real = execute_orphan_cleanup(table, plan, dry_run=False)
    real_seconds = time.perf_counter() - t0
    real_json = real.to_json()
    checks["real_run_deleted_all_planted_old"] = not any(os.path.exists(p) for p in expected_paths)
    checks["real_run_counts_match"] = (
        real_json["files"] == summary["files"]
        and real_json["alreadyMissing"] == 0
        and not real_json["failed"]
    )
    checks["empty_directories_removed"] = not any(os.path.exists(d) for d in planting["empty_dirs"])
    deleted = sum(real_json["files"].values())
    return {
        "executed": True,
        "dry_run": {"seconds": dry_seconds, "result": dry_json},
        "real_run": {
            "seconds": real_seconds,
            "deleter_seconds": real.report.duration_seconds,
            "deleted": deleted,
            "deletes_per_second": deleted / real_seconds,
            "result": real_json,
        },
    }


# ---- orchestration -------------------------------------------------------------------------------


def _fmt_s(seconds: float) -> str:
    return f"{seconds:8.2f}"


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=3, help="timed raw walks (median reported)")
    parser.add_argument(
        "--variants", action="store_true", help="also plan with the cyclic GC paused around the whole plan"
    )
    parser.add_argument(
        "--baseline-root",
        default=None,
        help="directory holding another airflow_lakeformat package (e.g. `git archive` of an earlier "
        "commit): its plan is measured in the same run as 'baseline'",
    )
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also run the plan under tracemalloc (slow)"
    )
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where generated tables are cached")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached table")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)


def run_worker(args: argparse.Namespace) -> int:
    kind, *rest = args.worker
    if kind == "walk":
        document = worker_walk(rest[0], args.repeat)
    elif kind == "raw-used":
        document = worker_raw_used(rest[0])
    else:
        document = worker_plan(rest[0], rest[1], kind)
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=DEFAULT_FILES, help="files in the table directory")
    parser.add_argument("--snapshots", type=int, default=DEFAULT_SNAPSHOTS, help="snapshots of the history")
    parser.add_argument("--output", default=None, help="JSON result (default bench/results/orphans*.json)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args)
    if args.files < 1000 or args.snapshots < 2:
        parser.error("need --files >= 1000 and --snapshots >= 2")
    output = (
        Path(args.output)
        if args.output
        else RESULTS_DIR / ("orphans.json" if args.files == DEFAULT_FILES else f"orphans-f{args.files}.json")
    )
    started = time.perf_counter()
    load_start = os.getloadavg()  # other work on the machine skews every timing
    root, table_dir, facts = ensure_table(args)
    return run_benchmark(
        args,
        root,
        table_dir,
        facts,
        output,
        {"files": args.files, "snapshots": args.snapshots, "repeat": args.repeat},
        lambda pristine: plan_planting(table_dir, args.files, pristine, seed=int(time.time())),
        started,
        load_start,
    )


def run_benchmark(
    args: argparse.Namespace,
    root: Path,
    table_dir: Path,
    facts: dict[str, Any],
    output: Path,
    params: dict[str, Any],
    planner: Callable[[int], dict[str, Any]],
    started: float,
    load_start: tuple[float, float, float],
    script: Path | None = None,
) -> int:
    """Plant, measure every method in its own process, check, tidy; write ``output``. The exit code."""
    output.parent.mkdir(parents=True, exist_ok=True)
    state = root / "planted.json"
    failures: list[str] = []

    if state.exists():
        print("removing what an interrupted run planted ...", file=sys.stderr)
        remove_planted(table_dir, json.loads(state.read_text()))
        state.unlink()
    count, digest = tree_digest(str(table_dir))
    if (count, digest) != (facts["files_in_tree"], facts["tree_digest"]):
        print(f"the cached table changed ({count} files); use --rebuild", file=sys.stderr)
        return 1

    planting = planner(count)
    state.write_text(json.dumps(planting))  # first, so an interrupted run can be tidied up
    t0 = time.perf_counter()
    plant(planting, old_mtime=time.time() - 10 * DAY)
    plant_seconds = time.perf_counter() - t0
    planted_old = sum(len(v) for v in planting["old"].values())
    files_now, _ = tree_digest(str(table_dir))
    print(
        f"planted {planted_old:,} old and {len(planting['fresh']):,} fresh orphans in {plant_seconds:.1f} s: "
        f"{files_now:,} files",
        file=sys.stderr,
    )

    me = [sys.executable, str((script or Path(__file__)).resolve())]
    walk, raw_used, extra, run = _run_methods(args, me, table_dir, state)

    failures += _failed_checks(run, extra)
    tidy = remove_planted(table_dir, planting)
    count_after, digest_after = tree_digest(str(table_dir))
    pristine_after = (count_after, digest_after) == (facts["files_in_tree"], facts["tree_digest"])
    if not pristine_after:
        failures.append("after cleanup and tidying the tree is not the pristine table")
    else:
        state.unlink()

    result: dict[str, Any] = {
        "benchmark": "orphan-file cleanup",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "params": params,
        "table": {"path": str(table_dir), **facts},
        "planted": {
            "old_by_kind": {k: len(v) for k, v in planting["old"].items()},
            "old": planted_old,
            "fresh": len(planting["fresh"]),
            "empty_directories": len(planting["empty_dirs"]),
            "files_in_tree": files_now,
            "plant_seconds": round(plant_seconds, 2),
        },
        "raw_walk": walk,
        "raw_used": raw_used,
        "run": run,
        "extra": extra,
        "figures": figures(run, walk, raw_used, extra),
        "tidy": tidy,
        "pristine_after": pristine_after,
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "failures": failures,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    write_result(output, result)
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def _failed_checks(run: dict[str, Any], extra: dict[str, Any]) -> list[str]:
    """The checks the workers reported failed, and a real run that did not happen."""
    failures = []
    for label, document in [("execute", run), *extra.items()]:
        for check, value in document["checks"].items():
            if value is False or (check == "planted_old_not_classified" and value):
                failures.append(f"{label}: {check}")
    if not run.get("executed"):
        failures.append("execute: not executed (checks failed before deleting)")
    return failures


def _run_methods(
    args: argparse.Namespace, me: list[str], table_dir: Path, state: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Every method in its own worker process: (raw walk, raw used set, the plan variants, the real run)."""
    print("raw walk ...", file=sys.stderr)
    walk = run_json([*me, "--repeat", str(args.repeat), "--worker", "walk", str(table_dir)])
    print("raw used set ...", file=sys.stderr)
    raw_used = run_json([*me, "--worker", "raw-used", str(table_dir)])
    extra: dict[str, Any] = {}
    if args.baseline_root:
        print(f"baseline plan ({args.baseline_root}) ...", file=sys.stderr)
        env = {PACKAGE_ROOT_ENV: str(Path(args.baseline_root).resolve())}
        extra["baseline"] = run_json_env([*me, "--worker", "plan", str(table_dir), str(state)], env)
    if args.variants:
        print("plan with the GC paused ...", file=sys.stderr)
        extra["gc-off"] = run_json([*me, "--worker", "gc-off", str(table_dir), str(state)])
    if args.tracemalloc:
        print("plan under tracemalloc ...", file=sys.stderr)
        extra["tracemalloc"] = run_json([*me, "--worker", "tracemalloc", str(table_dir), str(state)])
    print("plan, dry run, real run ...", file=sys.stderr)
    run = run_json([*me, "--worker", "execute", str(table_dir), str(state)])
    return walk, raw_used, extra, run


def figures(
    run: dict[str, Any], walk: dict[str, Any], raw_used: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """The ratios of one run: the plan against the raw floors measured in the same run."""
    phases, cpu = run["phases"], run["cpu_phases"]
    listed = run["plan"]["filesListed"]
    raw_stat = walk["stat"]["median"]
    used_set = phases["used_metadata"] + phases["manifest_reading"]
    floor = raw_stat + raw_used["seconds"]
    out: dict[str, Any] = {
        "files_listed": listed,
        "plan_seconds": phases["total"],
        "files_classified_per_second": listed / phases["total"],
        "raw_floor_seconds": floor,
        "raw_floor_files_per_second": listed / floor,
        "plan/raw_floor": phases["total"] / floor,
        "listing_seconds": phases["listing"],
        "listing_files_per_second": listed / phases["listing"],
        "raw_walk_stat_files_per_second": walk["stat"]["files"] / raw_stat,
        "raw_walk_names_files_per_second": walk["names"]["files"] / walk["names"]["median"],
        "listing/raw_walk_stat": phases["listing"] / raw_stat,
        "listing/raw_walk_names": phases["listing"] / walk["names"]["median"],
        "used_set_seconds": used_set,
        "raw_used_names_only_seconds": raw_used["seconds"],
        "used_set/raw_used_names_only": used_set / raw_used["seconds"],
        "raw_used_full_seconds": raw_used.get("full", {}).get("seconds"),
        "used_set/raw_used_full": used_set / raw_used["full"]["seconds"] if "full" in raw_used else None,
        "classification_seconds": phases["classification"],
        "manifest_entries_per_second": raw_used["entries"] / max(phases["manifest_reading"], 1e-9),
        "cpu": {
            "plan_seconds": cpu["total"],
            "listing_seconds": cpu["listing"],
            "raw_walk_stat_seconds": walk["stat"]["cpu_median"],
            "used_set_seconds": cpu["used_metadata"] + cpu["manifest_reading"],
            "raw_used_names_only_seconds": raw_used["cpu_seconds"],
            "plan/raw_floor": cpu["total"] / (walk["stat"]["cpu_median"] + raw_used["cpu_seconds"]),
        },
        "plan_high_water_delta_mib": run["memory"]["high_water_delta_bytes"] / MiB,
        "raw_used_high_water_delta_mib": raw_used["memory"]["high_water_delta_bytes"] / MiB,
        "dry_run_seconds": run.get("dry_run", {}).get("seconds"),
        "real_run_seconds": run.get("real_run", {}).get("seconds"),
        "deletes_per_second": run.get("real_run", {}).get("deletes_per_second"),
        "variants": {
            label: {
                "plan_seconds": doc["phases"]["total"],
                "plan/plan_default": doc["phases"]["total"] / phases["total"],
                "listing_seconds": doc["phases"]["listing"],
                "used_set_seconds": doc["phases"]["used_metadata"] + doc["phases"]["manifest_reading"],
                "cpu_seconds": doc["cpu_phases"]["total"],
                "files_classified_per_second": listed / doc["phases"]["total"],
                "high_water_delta_mib": doc["memory"]["high_water_delta_bytes"] / MiB,
            }
            for label, doc in extra.items()
            if label != "tracemalloc"
        },
        "tracemalloc_peak_mib": (
            extra["tracemalloc"]["memory"]["tracemalloc"]["peak_bytes"] / MiB
            if "tracemalloc" in extra
            else None
        ),
    }
    if "baseline" in extra:
        out["plan/baseline"] = phases["total"] / extra["baseline"]["phases"]["total"]
    return out


def print_summary(result: dict[str, Any]) -> None:
    table, f, run = result["table"], result["figures"], result["run"]
    print()
    print(
        f"table: {result['planted']['files_in_tree']:,} files ({result['planted']['old']:,} old + "
        f"{result['planted']['fresh']:,} fresh orphans), {table['snapshots']} snapshots, "
        f"{table['distinct_manifests']} manifests with {table['manifest_entries']:,} entries "
        f"({table['manifest_bytes'] / MiB:.1f} MiB), {table['distinct_manifest_lists']} manifest lists"
    )
    print(f"{'phase':<24} {'seconds':>8} {'cpu s':>8}")
    for name, seconds in run["phases"].items():
        print(f"{name:<24} {_fmt_s(seconds)} {_fmt_s(run['cpu_phases'][name])}")
    print()
    print(
        f"plan {f['plan_seconds']:.2f} s = {f['files_classified_per_second']:,.0f} files classified/s; "
        f"raw floor (scandir+stat walk {result['raw_walk']['stat']['median']:.2f} s + names-only fastavro "
        f"{f['raw_used_names_only_seconds']:.2f} s) {f['raw_floor_seconds']:.2f} s = "
        f"{f['raw_floor_files_per_second']:,.0f} files/s; plan/raw floor = {f['plan/raw_floor']:.2f}"
    )
    print(
        f"listing {f['listing_seconds']:.2f} s: /raw walk with stat {f['listing/raw_walk_stat']:.2f}, "
        f"/names-only walk {f['listing/raw_walk_names']:.2f}"
    )
    full = f["used_set/raw_used_full"]
    print(
        f"used set {f['used_set_seconds']:.2f} s: /raw names-only {f['used_set/raw_used_names_only']:.2f}"
        + (f", /raw full decode {full:.2f} ({f['raw_used_full_seconds']:.2f} s)" if full else "")
    )
    for label, v in f["variants"].items():
        print(
            f"plan {label}: {v['plan_seconds']:.2f} s ({v['files_classified_per_second']:,.0f} files/s; "
            f"listing {v['listing_seconds']:.2f} s, used set {v['used_set_seconds']:.2f} s, "
            f"+{v['high_water_delta_mib']:.0f} MiB)"
        )
    if "plan/baseline" in f:
        print(f"plan / baseline plan = {f['plan/baseline']:.3f}")
    print(
        f"RSS high-water of the plan: +{f['plan_high_water_delta_mib']:.0f} MiB "
        f"(raw names-only used set: +{f['raw_used_high_water_delta_mib']:.0f} MiB); RSS at: "
        + ", ".join(f"{k} {v / MiB:.0f}" for k, v in run["memory"]["rss_at"].items())
    )
    if f["tracemalloc_peak_mib"]:
        print(f"tracemalloc peak: {f['tracemalloc_peak_mib']:.0f} MiB")
    if run.get("executed"):
        print(
            f"dry run {f['dry_run_seconds']:.2f} s; real run {f['real_run_seconds']:.2f} s, "
            f"{run['real_run']['deleted']:,} deleted ({f['deletes_per_second']:,.0f}/s)"
        )
    print(f"checks: {run['checks']}")
    print(f"pristine after: {result['pristine_after']}")
    if result["failures"]:
        print(f"FAILURES: {result['failures']}")


if __name__ == "__main__":
    sys.exit(main())
