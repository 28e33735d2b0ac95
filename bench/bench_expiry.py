"""Snapshot expiry: 1,000 snapshots of a 100k-file table; manifests read scale with the expired snapshots.

    .venv/bin/python bench/bench_expiry.py [--sizes 10000,100000] [--expire 100,1000]

Builds once per size (cached under bench/.work/) a partitioned, bucketed append table with the
core's own commit path (``create_table`` + ``Committer``, default manifest merge policy, clock
injected 30 days in the past, one commit a minute): snapshot 1 loads ``size`` files over 100
partitions x 4 buckets, then ``--commits`` commits follow. In every block of 4 commits, 3 append 8
files each to the current partition and the 4th is a compaction that DELETEs those 24 files and
ADDs 4; every 100th commit is instead an INSERT OVERWRITE of an older partition (DELETE every live
file of it, ADD as many). Data files exist on disk (empty).

Then, for every size and every expired count K, on a fresh hard-linked copy, in a fresh process:

* plan      ``plan_snapshot_expiry(retain_min=10, older_than=1 h, max_deletes=K)`` with the real
            clock (every snapshot is old, so the expire limit K decides: snapshots 1..K expire);
            the plan's own counters (manifests, manifest lists read) and the reads counted on the
            table's FileIO by kind of file
* execute   ``execute_snapshot_expiry(dry_run=False)``: deletes by kind, deletes/s
* checks    (untimed, exit 1 on failure) exactly snapshots 1..K are gone and EARLIEST = K + 1; the
            data files DELETEd by snapshots 2..K+1 are gone and every other data file is still
            there; every file of every retained snapshot exists (``live_files`` of the first retained
            snapshot, the ADDs of the later ones, all their manifests and lists) and ``manifest/``
            holds exactly the retained snapshots' metadata

and the same plan once more with a tag on a retained snapshot (tags protect files by name, so the
plan reads the tag's live files). Timings are never asserted; the manifest counts are deterministic
and the scaling property (same manifests read across table sizes, growing with K) is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.access import AccessCounter, link_copy  # noqa: E402
from bench.support.memory import memory_around  # noqa: E402
from bench.support.paimon_history import DAY, PARTITIONS, HistoryWriter, walk_files  # noqa: E402
from bench.support.runs import DEFAULT_WORK_DIR, RESULTS_DIR, machine_facts, run_json, write_result  # noqa: E402

DEFAULT_SIZES = (10_000, 100_000)
DEFAULT_EXPIRE = (100, 1_000)
DEFAULT_COMMITS = 1_100
GENERATOR_VERSION = 1  # bump when the generated tables change, to invalidate cached tables
APPEND_FILES = 8
COMPACT_EVERY = 4
OVERWRITE_EVERY = 100
RETAIN_MIN = 10
OLDER_THAN = timedelta(hours=1)
MiB = 1024 * 1024


# ---- tables ---------------------------------------------------------------------------------------


def build_table(table_dir: Path, size: int, commits: int) -> dict[str, Any]:
    start = time.time() - 30 * DAY
    history = HistoryWriter(table_dir, seed=20260401 + size, start=start, step=60.0, track_live=True)
    history.bulk(size)
    kinds = {"append": 0, "compact": 0, "overwrite": 0}
    for c in range(commits):
        current = (c * PARTITIONS // commits + PARTITIONS // 2) % PARTITIONS
        if c % OVERWRITE_EVERY == OVERWRITE_EVERY - 1:
            history.overwrite((c // OVERWRITE_EVERY * 7) % PARTITIONS)
            kinds["overwrite"] += 1
        elif c % COMPACT_EVERY == COMPACT_EVERY - 1:
            history.compact()
            kinds["compact"] += 1
        else:
            history.append([(current, j % 4) for j in range(APPEND_FILES)])
            kinds["append"] += 1
    manager = history.table.snapshot_manager
    return {
        "size": size,
        "snapshots": len(manager.list_snapshot_ids()),
        "latest": manager.latest_snapshot_id(),
        "commits": kinds,
        "live_files": history.live_count(),
        "data_files_written": history.data_files,
        "manifest_merges": len(history.merges),
        "merge_seconds": round(sum(m["seconds"] for m in history.merges), 1),
        "manifest_dir_files": len(os.listdir(table_dir / "manifest")),
        "deleted_by_snapshot": {str(k): v for k, v in history.deleted_by_snapshot.items()},
    }


def ensure_table(work_dir: Path, size: int, commits: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    root = work_dir / f"expiry-v{GENERATOR_VERSION}-f{size}-c{commits}"
    table_dir = root / "warehouse" / "bench.db" / "t"
    marker = root / "history.json"
    if marker.exists() and not rebuild:
        print(f"using cached table {table_dir}", file=sys.stderr)
        return table_dir, json.loads(marker.read_text())
    if root.exists():
        shutil.rmtree(root)
    print(f"building table with {size:,} files and {commits:,} commits ...", file=sys.stderr)
    t0 = time.perf_counter()
    facts = build_table(table_dir, size, commits)
    facts["build_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"  built in {facts['build_seconds']} s ({facts['manifest_merges']} merges)", file=sys.stderr)
    marker.write_text(json.dumps(facts))
    return table_dir, facts


def write_tag(table_dir: Path, name: str, snapshot: Any) -> None:
    """A tag file as Paimon writes one: the snapshot's JSON plus the tag's own fields."""
    document = {**snapshot.to_json(), "tagCreateTime": [2026, 1, 1, 0, 0, 0, 0], "tagTimeRetained": None}
    (table_dir / "tag").mkdir(exist_ok=True)
    (table_dir / "tag" / f"tag-{name}").write_text(
        json.dumps({k: v for k, v in document.items() if v is not None})
    )


# ---- the measured work (worker subprocess) ----------------------------------------------------------


def _data_files(root: str) -> set[str]:
    prefix = len(root.rstrip("/")) + 1
    return {e.path[prefix:] for e in walk_files(root) if e.path[prefix:].startswith("dt=")}


def verify(table: Any, source: str, facts: dict[str, Any], end: int, latest: int) -> dict[str, Any]:
    """Untimed checks after a real expiry of snapshots [earliest, end)."""
    from airflow_lakeformat.core.paimon.live_files import live_entries
    from airflow_lakeformat.core.paimon.maintenance.references import snapshot_references
    from airflow_lakeformat.core.paimon.manifest import FileKind
    from airflow_lakeformat.core.paimon.paths import DataFilePaths

    root = table.root
    manager = table.snapshot_manager
    checks: dict[str, Any] = {}
    ids = manager.list_snapshot_ids()
    checks["snapshots_left_are_end_to_latest"] = ids == list(range(end, latest + 1))
    checks["earliest_hint_is_end"] = manager.read_hint("EARLIEST") == end
    gone = {p for s in range(2, end + 1) for p in facts["deleted_by_snapshot"].get(str(s), [])}
    present = _data_files(root)
    pristine = _data_files(source)
    checks["expected_data_files_gone"] = len(gone)
    checks["expired_data_files_all_gone"] = not (gone & present)
    checks["every_other_data_file_kept"] = present == pristine - gone
    # Every file a retained snapshot needs: the first retained one's live files, later ADDs, metadata.
    paths = DataFilePaths(table.schema)
    needed = {paths.relative_path(e) for e in live_entries(table, manager.snapshot(end))}
    metadata: set[str] = set()
    for snapshot_id in range(end, latest + 1):
        snapshot = manager.snapshot(snapshot_id)
        refs = snapshot_references(table, snapshot)
        metadata |= refs.manifest_file_names()
        if snapshot_id > end:
            for entries in table.read_manifests(table.manifest_list(snapshot.delta_manifest_list), "check"):
                needed.update(paths.relative_path(e) for e in entries if e.kind is FileKind.ADD)
    checks["retained_data_files_missing"] = len(needed - present)
    checks["retained_snapshots_data_intact"] = needed <= present
    manifest_dir = set(os.listdir(posixpath.join(root, "manifest")))
    checks["retained_metadata_missing"] = len(metadata - manifest_dir)
    checks["manifest_dir_is_exactly_retained_metadata"] = manifest_dir == metadata
    checks["leftover_metadata_files"] = sorted(manifest_dir - metadata)[:5]
    return checks


def worker_expire(source: str, copy: str, facts_file: str, expire: int, tag: bool) -> dict[str, Any]:
    """Plan an expiry of ``expire`` snapshots on a hard-linked copy (with a tag 5 below the latest: plan
    only), counting every file read; then execute it and verify the table against the facts."""
    from airflow_lakeformat.core.paimon.table import Table

    facts = json.loads(Path(facts_file).read_text())
    link_copy(Path(source), Path(copy))
    table = Table.open(copy)
    latest = int(facts["latest"])
    if tag:
        write_tag(Path(copy), "bench", table.snapshot_manager.snapshot(latest - 5))
    counter = AccessCounter(table.io)
    plan, out = _counted_plan(table, counter, expire)
    out["tag"] = tag
    if tag:
        shutil.rmtree(copy)
        return out
    out.update(_execute_and_verify(table, plan, counter, source, copy, facts, latest))
    shutil.rmtree(copy)
    return out


def _counted_plan(table: Any, counter: AccessCounter, expire: int) -> tuple[Any, dict[str, Any]]:
    """The plan, timed, with its memory and the files it read; a snapshot, manifest list or manifest read
    twice by one plan is counted (the benchmark exits 1 then)."""
    from airflow_lakeformat.core.paimon.maintenance.expiry import plan_snapshot_expiry

    per_path: dict[str, int] = {}
    counted_read = table.io.read_bytes

    def read_once(path: str) -> bytes:
        per_path[path] = per_path.get(path, 0) + 1
        return counted_read(path)  # type: ignore[no-any-return]

    table.io.read_bytes = read_once
    timing: dict[str, float] = {}

    def run_plan() -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_snapshot_expiry(table, retain_min=RETAIN_MIN, older_than=OLDER_THAN, max_deletes=expire)
        timing["plan"] = time.perf_counter() - t0
        timing["plan_cpu"] = time.process_time() - c0
        return plan

    plan, memory = memory_around(run_plan)
    plan_reads = counter.snapshot()
    counter.reset()
    table.io.read_bytes = counted_read
    read_twice = {
        p: n for p, n in per_path.items() if n > 1 and ("/manifest/" in p or "/snapshot/snapshot-" in p)
    }
    files, _ = plan.counts()
    return plan, {
        "expire": expire,
        "expired": len(plan.expired_ids),
        "begin": plan.begin,
        "end": plan.end,
        "plan_seconds": timing["plan"],
        "plan_cpu_seconds": timing["plan_cpu"],
        "plan_memory": memory,
        "manifests_read": plan.manifests_read,
        "manifest_lists_read": plan.manifest_lists_read,
        "counted_reads": plan_reads["calls"].get("read_bytes", {}),
        "counted_read_bytes": plan_reads["read_bytes"],
        "counted_exists": plan_reads["calls"].get("exists", {}),
        "files_read_more_than_once": len(read_twice),
        "read_more_than_once_sample": sorted(read_twice.items())[:5],
        "planned_files": files,
        "kept_by_tags_or_branches": plan.kept_by_tags_or_branches,
        "decisions": plan.decisions,
    }


def _execute_and_verify(
    table: Any, plan: Any, counter: AccessCounter, source: str, copy: str, facts: dict[str, Any], latest: int
) -> dict[str, Any]:
    """The real run, timed, and the checks of the table it leaves against the plan and the source."""
    from airflow_lakeformat.core.paimon.maintenance.expiry import execute_snapshot_expiry
    from airflow_lakeformat.core.paimon.table import Table

    files, _ = plan.counts()
    t0, c0 = time.perf_counter(), time.process_time()
    result = execute_snapshot_expiry(table, plan, dry_run=False)
    execute_seconds = time.perf_counter() - t0
    execute_cpu = time.process_time() - c0
    counter.close()
    report = result.to_json()
    deleted = sum(report["files"].values())
    assert plan.end is not None
    checks = verify(Table.open(copy), source, facts, plan.end, latest)
    checks["deleted_counts_match_plan"] = report["files"] == files and not report["failed"]
    checks["data_deleted_equals_expected"] = (
        report["files"].get("data-file", 0) == checks["expected_data_files_gone"]
    )
    return {
        "execute_seconds": execute_seconds,
        "execute_cpu_seconds": execute_cpu,
        "deleted": deleted,
        "deleted_by_kind": report["files"],
        "deletes_per_second": deleted / execute_seconds,
        "failed": report["failed"],
        "already_missing": report["alreadyMissing"],
        "checks": checks,
    }


# ---- orchestration ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.worker:
        source, copy, facts_file, expire, tag = args.worker
        json.dump(worker_expire(source, copy, facts_file, int(expire), tag == "tag"), sys.stdout)
        sys.stdout.write("\n")
        return 0

    sizes = [int(s) for s in args.sizes.split(",")]
    counts = sorted(int(k) for k in args.expire.split(","))
    if counts[-1] + RETAIN_MIN > args.commits:
        parser.error("--commits must exceed the largest --expire by at least 10 (retain-min)")
    default = (
        sizes == list(DEFAULT_SIZES) and counts == list(DEFAULT_EXPIRE) and args.commits == DEFAULT_COMMITS
    )
    output = (
        Path(args.output)
        if args.output
        else RESULTS_DIR
        / (
            "expiry.json"
            if default
            else f"expiry-{'-'.join(map(str, sizes))}-k{'-'.join(map(str, counts))}.json"
        )
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    work_dir = Path(args.work_dir).resolve()
    started = time.perf_counter()
    load_start = os.getloadavg()  # other work on the machine skews every timing
    me = [sys.executable, str(Path(__file__).resolve())]
    tables: dict[int, dict[str, Any]] = {}
    for size in sizes:
        table_dir, facts = ensure_table(work_dir, size, args.commits, args.rebuild)
        tables[size] = {
            "dir": table_dir,
            "facts": facts,
            "facts_file": table_dir.parent.parent.parent / "history.json",
        }

    scratch = work_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    plan_list = [(size, k, False) for size in sizes for k in counts]
    if not args.no_tag:
        plan_list += [(size, counts[-1], True) for size in sizes]
    runs, failures = _run_expiries(me, tables, plan_list, scratch)
    scaling = _scaling(runs, sizes, counts, failures)
    result = {
        "benchmark": "snapshot expiry",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "params": {
            "sizes": sizes,
            "expire": counts,
            "commits": args.commits,
            "retain_min": RETAIN_MIN,
            "older_than_seconds": OLDER_THAN.total_seconds(),
            "append_files": APPEND_FILES,
            "compact_every": COMPACT_EVERY,
            "overwrite_every": OVERWRITE_EVERY,
        },
        "tables": {
            str(size): {k: v for k, v in info["facts"].items() if k != "deleted_by_snapshot"}
            | {"dir": str(info["dir"])}
            for size, info in tables.items()
        },
        "runs": runs,
        "scaling": scaling,
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "failures": failures,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    write_result(output, result)
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="live files per table")
    parser.add_argument("--expire", default=",".join(map(str, DEFAULT_EXPIRE)), help="snapshots to expire")
    parser.add_argument("--commits", type=int, default=DEFAULT_COMMITS, help="commits after the bulk load")
    parser.add_argument("--no-tag", action="store_true", help="skip the plans with a tag")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR), help="where generated tables are cached")
    parser.add_argument("--output", default=None, help="JSON result (default bench/results/expiry*.json)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached tables")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    return parser


def _run_expiries(
    me: list[str], tables: dict[int, dict[str, Any]], plan_list: list[tuple[int, int, bool]], scratch: Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """One worker per (table size, snapshots to expire, with a tag); the runs and the checks they failed."""
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    for size, k, tag in plan_list:
        print(f"expire {k:,} of the {size:,}-file table{' with a tag' if tag else ''} ...", file=sys.stderr)
        info = tables[size]
        copy = scratch / f"expiry-{size}-{k}-{os.getpid()}"
        shutil.rmtree(copy, ignore_errors=True)
        run = run_json(
            [
                *me,
                "--worker",
                str(info["dir"]),
                str(copy),
                str(info["facts_file"]),
                str(k),
                "tag" if tag else "-",
            ]
        )
        run["size"] = size
        runs.append(run)
        if run["files_read_more_than_once"]:
            failures.append(f"{size}/{k}: {run['files_read_more_than_once']} files read more than once")
        if run["expired"] != k:
            failures.append(f"{size}/{k}: expired {run['expired']} snapshots")
        for check, value in run.get("checks", {}).items():
            if value is False:
                failures.append(f"{size}/{k}: {check}")
        if run.get("checks", {}).get("retained_data_files_missing") or run.get("checks", {}).get(
            "retained_metadata_missing"
        ):
            failures.append(f"{size}/{k}: a retained snapshot lost files")
    return runs, failures


def _scaling(
    runs: list[dict[str, Any]], sizes: list[int], counts: list[int], failures: list[str]
) -> dict[str, Any]:
    """Manifests read by expired count and table size: the same across sizes, growing with the count."""
    plain = {(r["size"], r["expire"]): r for r in runs if not r["tag"]}
    scaling: dict[str, Any] = {"manifests_read": {}, "manifest_lists_read": {}, "counted_manifest_reads": {}}
    for k in counts:
        for key, get in (
            ("manifests_read", lambda r: r["manifests_read"]),
            ("manifest_lists_read", lambda r: r["manifest_lists_read"]),
            ("counted_manifest_reads", lambda r: r["counted_reads"].get("manifest", 0)),
        ):
            scaling[key][str(k)] = {str(size): get(plain[(size, k)]) for size in sizes}
    same_across_sizes = all(
        max(v.values()) <= 1.1 * min(v.values()) for v in scaling["counted_manifest_reads"].values()
    )
    grows = (
        all(
            scaling["counted_manifest_reads"][str(counts[-1])][str(s)]
            > scaling["counted_manifest_reads"][str(counts[0])][str(s)]
            for s in sizes
        )
        if len(counts) > 1
        else True
    )
    scaling["same_across_table_sizes"] = same_across_sizes
    scaling["grows_with_expired_count"] = grows
    if not same_across_sizes:
        failures.append("manifests read differ across table sizes for the same expired count")
    if not grows:
        failures.append("manifests read do not grow with the expired count")

    return scaling


def print_summary(result: dict[str, Any]) -> None:
    print()
    header = (
        f"{'files':>8} {'expired':>7} {'tag':>3} {'plan s':>7} {'manifests':>9} {'lists':>6} "
        f"{'counted m/l':>11} {'m MiB':>6} {'exec s':>7} {'deleted':>8} {'deletes/s':>9} {'data':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in result["runs"]:
        reads = r["counted_reads"]
        mib = r["counted_read_bytes"].get("manifest", 0) / MiB
        exec_s = f"{r['execute_seconds']:7.2f}" if "execute_seconds" in r else f"{'-':>7}"
        deleted = f"{r['deleted']:8,}" if "deleted" in r else f"{'-':>8}"
        rate = f"{r['deletes_per_second']:9,.0f}" if "deletes_per_second" in r else f"{'-':>9}"
        data = f"{r['deleted_by_kind'].get('data-file', 0):6,}" if "deleted_by_kind" in r else f"{'-':>6}"
        counted = f"{reads.get('manifest', 0)}/{reads.get('manifest_list', 0)}"
        print(
            f"{r['size']:>8,} {r['expired']:>7,} {'yes' if r['tag'] else 'no':>3} {r['plan_seconds']:7.2f} "
            f"{r['manifests_read']:>9,} {r['manifest_lists_read']:>6,} {counted:>11} {mib:6.2f} {exec_s} "
            f"{deleted} {rate} {data}"
        )
    s = result["scaling"]
    print()
    print(f"manifests read by expired count and table size: {s['counted_manifest_reads']}")
    print(
        f"same across table sizes: {s['same_across_table_sizes']}; grows with expired: {s['grows_with_expired_count']}"
    )
    if result["failures"]:
        print(f"FAILURES: {result['failures']}")


if __name__ == "__main__":
    sys.exit(main())
