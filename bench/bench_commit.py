"""Commit latency vs table size, and manifest compaction throughput vs raw fastavro.

    .venv/bin/python bench/bench_commit.py [--sizes 1000,100000,1000000] [--repeat 20]

Two benchmarks, each method in its own fresh subprocess, on tables generated once and cached under
bench/.work/ (every measurement works on a hard-linked copy, so the cached tables never change):

* append    one commit of 10 new ADD entries (metadata only) with ``merge=False`` on append-only
            tables of 1k, 100k and 1M live files, in two manifest layouts: "compacted" (what
            Paimon's default merge policy converges to: manifests rolled at the 8 MB target, one
            partial manifest and a tail of 20 small per-commit manifests) and "fragmented" (100
            files per manifest, never merged). Medians and ratios to the 1k table of the same
            layout; the files a commit reads and writes are counted in a separate untimed run.
            A sequence of commits under the default merge policy (``merge=True``) is timed
            separately, with the merge mode each commit took.
* compact   ``compact_manifests(table, "full")`` on a table of 100k files in 1,000 small manifests
            against a raw fastavro pass over the same manifests (read every manifest into dicts,
            write every entry back into zstd files of about 8 MB): entries/s, MB/s, ours/raw, and a
            cProfile of ours.

Timings are never asserted: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import shutil
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.support.access import AccessCounter, link_copy  # noqa: E402
from bench.support.commit_tables import (  # noqa: E402
    APPEND_FILES,
    COMPACTION_FILES,
    FRAGMENT_FILES,
    RAW_BLOCK_RECORDS,
    TAIL_COMMITS,
    append_batches,
    ensure_table,
    raw_commit_floor,
    run_raw_compaction,
    table_facts,
)
from bench.support.runs import (  # noqa: E402
    DEFAULT_WORK_DIR,
    RESULTS_DIR,
    machine_facts,
    ours_package,
    run_json,
    write_result,
)

DEFAULT_SIZES = (1_000, 100_000, 1_000_000)
LAYOUTS = ("compacted", "fragmented")
MiB = 1024 * 1024


# ---- table generation ------------------------------------------------------------------------


# ---- file access counting (untimed runs only) ---------------------------------------------------


# ---- benchmark 1: append latency (worker) ------------------------------------------------------


def _merge_effect(table: Any, result: Any) -> dict[str, Any]:
    """What a merging commit rewrote: manifests it wrote beyond the delta, and their entries."""
    written = set(result.files_written)
    base, _ = table.data_manifests(result.snapshot)
    new = [m for m in base if m.file_name in written]
    return {"manifests_written": len(new), "entries_written": sum(m.num_added_files for m in new)}


def worker_append(
    table_dir: str, scratch: str, repeat: int, warmup: int, policy_commits: int
) -> dict[str, Any]:
    """merge=False commits against the raw floor, then (``policy_commits``) a merge=True sequence."""
    out: dict[str, Any] = {}
    source, scratch_dir = Path(table_dir), Path(scratch)
    try:
        out["no_merge"] = _append_no_merge(source, scratch_dir, repeat, warmup)
        if policy_commits:
            out["policy"] = _append_policy(source, scratch_dir, policy_commits)
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return out


def _append_no_merge(source: Path, scratch_dir: Path, repeat: int, warmup: int) -> dict[str, Any]:
    """merge=False (the protocol's own cost), alternating with the raw floor; then one counted commit."""
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.table import Table

    link_copy(source, scratch_dir / "a")
    table = Table.open(str(scratch_dir / "a"))
    committer = Committer(table, "bench-append")
    link_copy(source, scratch_dir / "raw")
    batches = append_batches(table, warmup + repeat + 1, seed=1)
    times, raw_times, modes = [], [], set()
    for i, batch in enumerate(batches[: warmup + repeat]):
        # ours and the raw floor alternate, so drift affects both alike
        gc.collect()
        t0 = time.perf_counter()
        result = committer.commit(batch, merge=False)
        elapsed = time.perf_counter() - t0
        records = [e.record for e in batch]
        gc.collect()
        t0 = time.perf_counter()
        raw_commit_floor(str(scratch_dir / "raw"), records, str(i))
        raw_elapsed = time.perf_counter() - t0
        if i >= warmup:
            times.append(elapsed)
            raw_times.append(raw_elapsed)
            modes.add(result.merge)
    counter = AccessCounter(table.io)
    committer.commit(batches[-1], merge=False)
    no_merge = {
        "times": times,
        "median": statistics.median(times),
        "min": min(times),
        "merge_modes": sorted(modes),
        "access": counter.snapshot(),
        "raw_floor": {"times": raw_times, "median": statistics.median(raw_times), "min": min(raw_times)},
        "vs_raw_floor": statistics.median(times) / statistics.median(raw_times),
    }
    counter.close()
    return no_merge


def _append_policy(source: Path, scratch_dir: Path, policy_commits: int) -> dict[str, Any]:
    """merge=True: a sequence of commits under the table's default policy, then the same sequence
    replayed on another fresh copy with access counting (untimed)."""
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.table import Table

    policy_batches = append_batches(Table.open(str(scratch_dir / "a")), policy_commits, seed=2)
    runs: list[dict[str, Any]] = []
    for label in ("timed", "counted"):
        link_copy(source, scratch_dir / label)
        ptable = Table.open(str(scratch_dir / label))
        pcommitter = Committer(ptable, "bench-policy")
        counter = AccessCounter(ptable.io) if label == "counted" else None
        for i, batch in enumerate(policy_batches):
            if counter:
                counter.reset()
            gc.collect()
            t0 = time.perf_counter()
            result = pcommitter.commit(batch, merge=True)
            elapsed = time.perf_counter() - t0
            if label == "timed":
                runs.append({"seconds": elapsed, "merge": result.merge})
                if result.merge != "none":
                    runs[-1].update(_merge_effect(ptable, result))
            elif counter:
                runs[i]["access"] = counter.snapshot()
                if runs[i]["merge"] != result.merge:
                    runs[i]["replay_merge_differs"] = result.merge
        if counter:
            counter.close()
    plain = [r["seconds"] for r in runs if r["merge"] == "none"]
    merged = [r for r in runs if r["merge"] != "none"]
    return {
        "commits": runs,
        "median_no_merge": statistics.median(plain) if plain else None,
        "merges": [{k: v for k, v in r.items() if k != "access"} for r in merged],
        "mean_of_sequence": statistics.fmean(r["seconds"] for r in runs),
    }


# ---- benchmark 2: manifest compaction (workers) -------------------------------------------------


def run_ours_compaction(table: Any) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests

    result = compact_manifests(table, "full")
    return dict(result.to_json())


def worker_compaction(method: str, table_dir: str, scratch: str, repeat: int, warmup: int) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.table import Table

    times, details = [], []
    target = Table.open(table_dir).schema.table_options.manifest_target_file_size
    for i in range(warmup + repeat):
        copy = Path(scratch) / f"run-{i}"
        link_copy(Path(table_dir), copy)
        try:
            gc.collect()
            if method == "raw":
                t0 = time.perf_counter()
                detail: dict[str, Any] = run_raw_compaction(str(copy), str(copy / "raw-out"), target)
                elapsed = time.perf_counter() - t0
                sizes = [f.stat().st_size for f in (copy / "raw-out").iterdir()]
                detail["bytes_after"] = sum(sizes)
            else:
                table = Table.open(str(copy))
                t0 = time.perf_counter()
                detail = run_ours_compaction(table)
                elapsed = time.perf_counter() - t0
                facts = table_facts(copy)  # untimed: the compacted snapshot still holds every file
                detail["live_files_after"] = facts["live_files"]
                detail["manifests_at_target"] = facts["manifests_at_target"]
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        if i >= warmup:
            times.append(elapsed)
            details.append(detail)
    return {"times": times, "median": statistics.median(times), "min": min(times), "detail": details[-1]}


def worker_profile(table_dir: str, scratch: str, out_path: str, top: int) -> dict[str, Any]:
    """cProfile one compaction (after a warm-up compaction in this process)."""
    from airflow_lakeformat.core.paimon.table import Table

    lines: list[str] = []
    for i, profiled in enumerate((False, True)):
        copy = Path(scratch) / f"profile-{i}"
        link_copy(Path(table_dir), copy)
        try:
            table = Table.open(str(copy))
            profiler = cProfile.Profile()
            if profiled:
                profiler.enable()
            run_ours_compaction(table)
            if profiled:
                profiler.disable()
                for sort in ("cumulative", "tottime"):
                    buffer = io.StringIO()
                    pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(sort).print_stats(top)
                    lines.append(f"==== sorted by {sort} ====")
                    lines.extend(ln for ln in buffer.getvalue().splitlines() if ln.strip())
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    Path(out_path).write_text("\n".join(lines) + "\n")
    return {"lines": lines}


# ---- orchestration ---------------------------------------------------------------------------


def _reads(access: dict[str, Any], category: str) -> int:
    return int(access["calls"].get("read_bytes", {}).get(category, 0))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:8.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.ours_root:
        sys.path.insert(0, str(Path(args.ours_root).resolve()))
    if args.worker:
        return _run_worker(args)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    layouts = [s for s in args.layouts.split(",") if s]
    if any(layout not in LAYOUTS for layout in layouts) or not sizes:
        parser.error(f"layouts must be among {LAYOUTS} and sizes non-empty")
    work_dir = Path(args.work_dir).resolve()
    default_run = sizes == list(DEFAULT_SIZES) and args.compaction_files == COMPACTION_FILES and not args.only
    output = (
        Path(args.output)
        if args.output
        else RESULTS_DIR / ("commit.json" if default_run else "commit-custom.json")
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    if args.ours_root:
        me += ["--ours-root", str(Path(args.ours_root).resolve())]
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "commit latency and manifest compaction",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_facts(),
        "ours_package": ours_package(),
    }
    failures: list[str] = []
    if args.only in (None, "append"):
        result["append"] = _benchmark_append(args, me, work_dir, sizes, layouts, failures)
    if args.only in (None, "compaction"):
        result["compaction"] = _benchmark_compaction(args, me, work_dir, output, failures)
    result["failures"] = failures
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    write_result(output, result)
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="live files of the append tables"
    )
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="compacted and/or fragmented")
    parser.add_argument("--repeat", type=int, default=20, help="timed merge=False commits per table")
    parser.add_argument("--warmup", type=int, default=3, help="untimed commits first")
    parser.add_argument(
        "--policy-commits",
        type=int,
        default=10,
        help="merge=True commits in sequence per compacted table (0 skips)",
    )
    parser.add_argument("--compaction-files", type=int, default=COMPACTION_FILES)
    parser.add_argument("--compaction-repeat", type=int, default=3)
    parser.add_argument("--compaction-warmup", type=int, default=1)
    parser.add_argument("--only", choices=("append", "compaction"), default=None)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached tables")
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--output", default=None, help="JSON result (default bench/results/commit*.json)")
    parser.add_argument(
        "--ours-root",
        default=None,
        help="directory holding an alternative airflow_lakeformat package to measure (a patched copy)",
    )
    parser.add_argument(
        "--candidate-root",
        default=None,
        help="also measure compaction with the airflow_lakeformat package in this directory "
        "('candidate', same run, so its ratio to ours is an optimization's measured effect)",
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


def _run_worker(args: argparse.Namespace) -> int:
    kind, *rest = args.worker
    if kind == "append":
        document = worker_append(rest[0], rest[1], args.repeat, args.warmup, args.policy_commits)
    elif kind == "profile":
        document = worker_profile(rest[0], rest[1], rest[2], 15)
    else:
        document = worker_compaction(
            rest[0], rest[1], rest[2], args.compaction_repeat, args.compaction_warmup
        )
    document["package"] = ours_package()
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")
    return 0


def _benchmark_append(
    args: argparse.Namespace,
    me: list[str],
    work_dir: Path,
    sizes: list[int],
    layouts: list[str],
    failures: list[str],
) -> dict[str, Any]:
    """Benchmark 1: every (layout, size) table's append worker; the rows and ratios to the smallest table."""
    scratch_root = work_dir / "scratch"
    tables: dict[str, dict[str, Any]] = {}
    for layout in layouts:
        for files in sizes:
            tables[f"{layout}-{files}"] = {"layout": layout, "files": files}
            tables[f"{layout}-{files}"]["dir"], tables[f"{layout}-{files}"]["facts"] = ensure_table(
                work_dir, layout, files, args.rebuild
            )
    common = ["--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    for key, info in tables.items():
        print(f"append: {key} ...", file=sys.stderr)
        policy = args.policy_commits if info["layout"] == "compacted" else 0
        scratch = scratch_root / f"append-{uuid.uuid4().hex[:8]}"
        info["result"] = run_json(
            [
                *me,
                *common,
                "--policy-commits",
                str(policy),
                "--worker",
                "append",
                str(info["dir"]),
                str(scratch),
            ]
        )
        access = info["result"]["no_merge"]["access"]
        if _reads(access, "manifest") != 0 or _reads(access, "manifest_list") != 2:
            failures.append(f"{key}: merge=False append read {access['calls'].get('read_bytes')}")
    append_rows = _append_rows(tables, layouts, sizes)
    return {
        "params": {
            "sizes": sizes,
            "layouts": layouts,
            "files_per_commit": APPEND_FILES,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "policy_commits": args.policy_commits,
            "tail_commits": TAIL_COMMITS,
            "fragment_files": FRAGMENT_FILES,
        },
        "tables": {
            k: {kk: (str(vv) if kk == "dir" else vv) for kk, vv in v.items()} for k, v in tables.items()
        },
        "rows": append_rows,
        "ratios": {
            layout: {
                f"{files}/{min(sizes)}": tables[f"{layout}-{files}"]["result"]["no_merge"]["median"]
                / tables[f"{layout}-{min(sizes)}"]["result"]["no_merge"]["median"]
                for files in sizes
                if files != min(sizes)
            }
            for layout in layouts
        },
        "append_reads_no_manifest": not any(f.startswith(tuple(tables)) for f in failures),
    }


def _append_rows(
    tables: dict[str, dict[str, Any]], layouts: list[str], sizes: list[int]
) -> list[dict[str, Any]]:
    """One row per table: its median, the raw floor, and the ratio to the smallest table of its layout."""
    append_rows = []
    for layout in layouts:
        smallest = tables[f"{layout}-{min(sizes)}"]["result"]["no_merge"]["median"]
        for files in sizes:
            info = tables[f"{layout}-{files}"]
            nm = info["result"]["no_merge"]
            append_rows.append(
                {
                    "layout": layout,
                    "files": files,
                    "manifests": info["facts"]["manifests"],
                    "manifest_bytes": info["facts"]["manifest_bytes"],
                    "median_seconds": nm["median"],
                    "min_seconds": nm["min"],
                    "raw_floor_median_seconds": nm["raw_floor"]["median"],
                    "vs_raw_floor": nm["vs_raw_floor"],
                    "vs_smallest": nm["median"] / smallest,
                    "reads": nm["access"]["calls"].get("read_bytes", {}),
                    "policy": info["result"].get("policy"),
                }
            )
    return append_rows


def _benchmark_compaction(
    args: argparse.Namespace, me: list[str], work_dir: Path, output: Path, failures: list[str]
) -> dict[str, Any]:
    """Benchmark 2: ours, raw (and a candidate package) compacting the fragmented table; a profile of ours."""
    scratch_root = work_dir / "scratch"
    comp_dir, comp_facts = ensure_table(work_dir, "fragmented", args.compaction_files, args.rebuild)
    common = [
        "--compaction-repeat",
        str(args.compaction_repeat),
        "--compaction-warmup",
        str(args.compaction_warmup),
    ]
    methods: dict[str, dict[str, Any]] = {}
    plan: list[tuple[str, str, list[str]]] = [("ours", "ours", me), ("raw", "raw", me)]
    if args.candidate_root:
        candidate = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--ours-root",
            str(Path(args.candidate_root).resolve()),
        ]
        plan.append(("candidate", "ours", candidate))
    for label, method, command in plan:
        print(f"compaction: {label} ...", file=sys.stderr)
        scratch = scratch_root / f"compact-{uuid.uuid4().hex[:8]}"
        methods[label] = run_json(
            [*command, *common, "--worker", "compact", method, str(comp_dir), str(scratch)]
        )
        shutil.rmtree(scratch, ignore_errors=True)
    entries = comp_facts["live_files"]
    mbytes = comp_facts["manifest_bytes"] / 1e6
    for label, m in methods.items():
        m["entries_per_second"] = entries / m["median"]
        m["input_mb_per_second"] = mbytes / m["median"]
        m["vs_raw"] = m["median"] / methods["raw"]["median"]
        if m["detail"].get("live_files_after", entries) != entries:
            failures.append(f"compaction {label}: {m['detail']} lost files")
    profile_path = output.with_suffix(".profile.txt")
    profile_lines: list[str] = []
    if not args.no_profile:
        print("compaction: profiling ours ...", file=sys.stderr)
        scratch = scratch_root / f"profile-{uuid.uuid4().hex[:8]}"
        profile_lines = run_json(
            [*me, "--worker", "profile", str(comp_dir), str(scratch), str(profile_path)]
        )["lines"]
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "params": {
            "files": args.compaction_files,
            "repeat": args.compaction_repeat,
            "warmup": args.compaction_warmup,
            "raw_block_records": RAW_BLOCK_RECORDS,
        },
        "table": {"dir": str(comp_dir), **comp_facts},
        "methods": methods,
        "ratios": {
            "ours/raw": methods["ours"]["median"] / methods["raw"]["median"],
            **(
                {"candidate/ours": methods["candidate"]["median"] / methods["ours"]["median"]}
                if "candidate" in methods
                else {}
            ),
        },
        "profile_file": str(profile_path) if profile_lines else None,
        "profile_top": profile_lines,
    }


def print_summary(result: dict[str, Any]) -> None:
    append = result.get("append")
    if append:
        print()
        print(f"10-file append (merge=False), median of {append['params']['repeat']} commits")
        header = (
            f"{'layout':<11} {'files':>9} {'manifests':>9} {'median ms':>9} {'min ms':>8} {'/smallest':>9} "
            f"{'floor ms':>8} {'/floor':>6} {'reads: hint snap list manifest':>30}"
        )
        print(header)
        print("-" * len(header))
        for row in append["rows"]:
            reads = row["reads"]
            print(
                f"{row['layout']:<11} {row['files']:>9,} {row['manifests']:>9,} {_ms(row['median_seconds'])} "
                f"{_ms(row['min_seconds'])} {row['vs_smallest']:9.2f} {_ms(row['raw_floor_median_seconds'])} "
                f"{row['vs_raw_floor']:6.2f} "
                f"{reads.get('hint', 0):>10} {reads.get('snapshot', 0):>4} {reads.get('manifest_list', 0):>4} "
                f"{reads.get('manifest', 0):>8}"
            )
        print()
        print("default merge policy (merge=True), commits in sequence on the compacted tables")
        for row in append["rows"]:
            policy = row["policy"]
            if not policy:
                continue
            modes = "".join(c["merge"][0] for c in policy["commits"])
            merges = ", ".join(
                f"{m['merge']} {m['seconds'] * 1000:.0f} ms ({m.get('manifests_written', 0)} manifests, "
                f"{m.get('entries_written', 0):,} entries written)"
                for m in policy["merges"]
            )
            print(
                f"  {row['files']:>9,} files: modes {modes}; no-merge median "
                f"{_ms(policy['median_no_merge']).strip()} ms; merges: {merges or 'none'}"
            )
        print()
        for layout, ratios in append["ratios"].items():
            print(f"  {layout}: " + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items()))
        print(f"  merge=False appends read no manifest: {append['append_reads_no_manifest']}")
    comp = result.get("compaction")
    if comp:
        table = comp["table"]
        print()
        print(
            f"full manifest compaction of {table['live_files']:,} entries in {table['manifests']:,} manifests "
            f"({table['manifest_bytes'] / 1e6:.1f} MB)"
        )
        header = f"{'method':<10} {'median s':>9} {'min s':>8} {'/raw':>6} {'entries/s':>11} {'MB/s':>7} {'out files':>9} {'out MB':>7}"
        print(header)
        print("-" * len(header))
        for label, m in comp["methods"].items():
            d = m["detail"]
            files_out = d.get("manifestsAfter", d.get("files_written"))
            bytes_out = d.get("bytesAfter", d.get("bytes_after", 0))
            print(
                f"{label:<10} {m['median']:9.3f} {m['min']:8.3f} {m['vs_raw']:6.2f} {m['entries_per_second']:11,.0f} "
                f"{m['input_mb_per_second']:7.2f} {files_out:>9} {bytes_out / 1e6:7.2f}"
            )
        print("  " + ", ".join(f"{k} = {v:.2f}" for k, v in comp["ratios"].items()))
    if result["failures"]:
        print(f"FAILURES: {result['failures']}")


if __name__ == "__main__":
    sys.exit(main())
