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
import os
import pstats
import random
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(1, str(BENCH_DIR))

from bench_planning import FIELDS, machine_facts, run_json  # noqa: E402

DEFAULT_WORK_DIR = BENCH_DIR / ".work"
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_SIZES = (1_000, 100_000, 1_000_000)
LAYOUTS = ("compacted", "fragmented")
GENERATOR_VERSION = 1  # bump when the generated tables change, to invalidate cached tables
PARTITIONS = 100
TAIL_COMMITS = 20  # small per-commit manifests after the rolled ones in the "compacted" layout
TAIL_FILES = 10
FRAGMENT_FILES = 100  # files per manifest in the "fragmented" layout
APPEND_FILES = 10  # files per timed commit
COMPACTION_FILES = 100_000
COMPACTION_MANIFESTS = 1_000
RAW_BLOCK_RECORDS = 1000
MiB = 1024 * 1024


# ---- table generation ------------------------------------------------------------------------


class EntryFactory:
    """Realistic ADD entries (as bench_planning writes them): 10k-2M rows, 20-60 bytes a row."""

    def __init__(self, partition_types: Any, seed: int) -> None:
        from airflow_lakeformat.core.paimon import binary_row
        from airflow_lakeformat.core.paimon.values import from_python

        self.rng = random.Random(seed)
        day0 = datetime(2025, 1, 1)
        self.partitions = [
            binary_row.encode(
                [from_python((day0 + timedelta(days=i)).strftime("%Y-%m-%d"), partition_types[0])],
                partition_types,
            )
            for i in range(PARTITIONS)
        ]
        self.sequence = 0
        self.epoch_ms = int(datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)

    def entries(self, count: int, partition_of: Callable[[int], int], commit_ms: int) -> Iterator[Any]:
        from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry

        rng = self.rng
        for j in range(count):
            rows = rng.randint(10_000, 2_000_000)
            meta = DataFileMeta.create(
                f"data-{uuid.UUID(int=rng.getrandbits(128), version=4)}-{j}.parquet",
                rows * rng.randint(20, 60),
                rows,
                min_sequence_number=self.sequence,
                max_sequence_number=self.sequence + rows - 1,
                creation_time=datetime.fromtimestamp((commit_ms - 5_000 + j) / 1000, tz=timezone.utc),
                file_source=FileSource.APPEND,
                value_stats_cols=[],
            )
            self.sequence += rows
            yield ManifestEntry.create(FileKind.ADD, self.partitions[partition_of(j)], 0, -1, meta)


def _new_builder(table_dir: Path) -> Any:
    from tests.support.tables import TableBuilder

    return TableBuilder(
        table_dir,
        FIELDS,
        partition_keys=["dt"],
        options={"bucket": "-1", "file.format": "parquet", "manifest.compression": "zstd"},
        compression="zstd",
    )


def _commit_written(builder: Any, delta: list[Any], delta_rows: int, time_millis: int) -> None:
    """TableBuilder.commit for manifests already written (here: by the rolling writer)."""
    builder.publish(delta, delta_rows, time_millis=time_millis)


def build_compacted(table_dir: Path, files: int, seed: int) -> None:
    """Rolled 8 MB manifests (one commit) + a tail of TAIL_COMMITS commits of TAIL_FILES files each."""
    from airflow_lakeformat.core.paimon.manifest_writer import RollingManifestWriter

    builder = _new_builder(table_dir)
    factory = EntryFactory(builder.schema.partition_types, seed)
    tail = min(TAIL_COMMITS, files // TAIL_FILES // 2)
    bulk = files - tail * TAIL_FILES
    options = builder.schema.table_options

    def store(name: str, data: bytes) -> None:
        (builder.root / "manifest" / name).write_bytes(data)

    writer = RollingManifestWriter(
        store,
        partition_types=builder.schema.partition_types,
        schema_id=builder.schema.id,
        target_file_size=options.manifest_target_file_size,
        compression="zstd",
    )
    rows = [0]

    def counted() -> Iterator[Any]:
        # Older files first, partition by partition, as a history merged in commit order looks.
        for entry in factory.entries(bulk, lambda j: j * PARTITIONS // bulk, factory.epoch_ms):
            rows[0] += entry.file.row_count
            yield entry

    metas = writer.write(counted())
    _commit_written(builder, metas, rows[0], factory.epoch_ms)
    for c in range(tail):
        ms = factory.epoch_ms + (c + 1) * 60_000
        entries = list(factory.entries(TAIL_FILES, lambda j: PARTITIONS - 1 - j % 3, ms))
        builder.commit(entries, manifests=1, time_millis=ms)


def build_fragmented(table_dir: Path, files: int, seed: int) -> None:
    """FRAGMENT_FILES files per manifest, 100 manifests per commit, no merging (like bench_planning)."""
    builder = _new_builder(table_dir)
    factory = EntryFactory(builder.schema.partition_types, seed)
    manifests = max(1, files // FRAGMENT_FILES)
    commits = max(1, manifests // 100)
    for c in range(commits):
        count = files * (c + 1) // commits - files * c // commits
        ms = factory.epoch_ms + c * 60_000
        start = c * PARTITIONS // commits
        entries = list(factory.entries(count, lambda j, s=start: (s + j % 3) % PARTITIONS, ms))
        builder.commit(entries, manifests=max(1, count // FRAGMENT_FILES), time_millis=ms)


def table_facts(table_dir: Path) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.table import Table

    table = Table.open(str(table_dir))
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    base, delta = table.data_manifests(snapshot)
    metas = base + delta
    target = table.schema.table_options.manifest_target_file_size
    return {
        "snapshot_id": snapshot.id,
        "live_files": sum(m.num_added_files - m.num_deleted_files for m in metas),
        "manifests": len(metas),
        "base_manifests": len(base),
        "delta_manifests": len(delta),
        "manifests_at_target": sum(1 for m in metas if m.file_size >= target),
        "largest_manifest_bytes": max(m.file_size for m in metas),
        "manifest_bytes": sum(m.file_size for m in metas),
        "manifest_list_bytes": (snapshot.base_manifest_list_size or 0)
        + (snapshot.delta_manifest_list_size or 0),
        "manifest_target_file_size": target,
    }


def ensure_table(work_dir: Path, layout: str, files: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    """The cached table for (layout, files), built if missing; returns (table_dir, facts)."""
    key = f"commit-v{GENERATOR_VERSION}-{layout}-f{files}"
    root = work_dir / key
    table_dir = root / "warehouse" / "bench.db" / "t"
    marker = root / "params.json"
    if marker.exists() and not rebuild:
        return table_dir, json.loads(marker.read_text())["facts"]
    if root.exists():
        shutil.rmtree(root)
    print(f"building {layout} table with {files:,} files ...", file=sys.stderr)
    t0 = time.perf_counter()
    build = build_compacted if layout == "compacted" else build_fragmented
    build(table_dir, files, seed=20260101 + files)
    facts = table_facts(table_dir)
    facts["build_seconds"] = round(time.perf_counter() - t0, 2)
    assert facts["live_files"] == files, facts
    print(f"  built in {facts['build_seconds']} s: {facts}", file=sys.stderr)
    marker.write_text(json.dumps({"layout": layout, "files": files, "facts": facts}, indent=2))
    return table_dir, facts


def link_copy(source: Path, target: Path) -> None:
    """A copy whose files are hard links: commits only create files (and replace LATEST by rename)."""
    try:
        shutil.copytree(source, target, copy_function=os.link)
    except OSError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)


# ---- file access counting (untimed runs only) ---------------------------------------------------


def _category(path: str) -> str:
    name = os.path.basename(path)
    if name in ("LATEST", "EARLIEST"):
        return "hint"
    if name.startswith("snapshot-"):
        return "snapshot"
    if name.startswith("manifest-list-"):
        return "manifest_list"
    if name.startswith("manifest-"):
        return "manifest"
    return "other"


class AccessCounter:
    """Counts FileIO calls of one table by kind of file, by wrapping the instance's methods."""

    def __init__(self, file_io: Any) -> None:
        self.calls: dict[str, dict[str, int]] = {}
        self.read_bytes_total: dict[str, int] = {}
        self._io = file_io
        self._originals = {}
        for method in ("read_bytes", "exists", "list_dir", "write_bytes", "write_atomic", "create_exclusive"):
            original = getattr(file_io, method)
            self._originals[method] = original
            setattr(file_io, method, self._wrap(method, original))

    def _wrap(self, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(path: str, *args: Any, **kwargs: Any) -> Any:
            category = _category(path)
            per = self.calls.setdefault(method, {})
            per[category] = per.get(category, 0) + 1
            result = original(path, *args, **kwargs)
            if method == "read_bytes":
                self.read_bytes_total[category] = self.read_bytes_total.get(category, 0) + len(result)
            return result

        return counted

    def reset(self) -> None:
        self.calls, self.read_bytes_total = {}, {}

    def snapshot(self) -> dict[str, Any]:
        return {"calls": self.calls, "read_bytes": self.read_bytes_total}

    def close(self) -> None:
        for method in self._originals:
            delattr(self._io, method)


# ---- benchmark 1: append latency (worker) ------------------------------------------------------


def _append_batches(table: Any, count: int, seed: int) -> list[list[Any]]:
    factory = EntryFactory(table.schema.partition_types, seed)
    factory.sequence = 10**15  # far above the generated history
    ms = factory.epoch_ms + 10**8
    return [
        list(factory.entries(APPEND_FILES, lambda j: PARTITIONS - 1 - j % 3, ms + i * 1000))
        for i in range(count)
    ]


def _merge_effect(table: Any, result: Any) -> dict[str, Any]:
    """What a merging commit rewrote: manifests it wrote beyond the delta, and their entries."""
    written = set(result.files_written)
    base, _ = table.data_manifests(result.snapshot)
    new = [m for m in base if m.file_name in written]
    return {"manifests_written": len(new), "entries_written": sum(m.num_added_files for m in new)}


def raw_commit_floor(table_dir: str, records: list[dict[str, Any]], tag: str) -> int:
    """The same I/O as a merge=False commit with plain fastavro, json and open(), no protocol logic.

    Reads the LATEST hint, the snapshot JSON and both manifest lists into dicts, then writes the new
    manifest (``records``), the new base list (every previous row), a one-row delta list and a
    snapshot JSON, under ``raw-*`` names that no reader looks at. Returns the base list's rows.
    """
    import fastavro

    from airflow_lakeformat.core.paimon import avro

    manifest_dir = os.path.join(table_dir, "manifest")

    def read(name: str) -> list[dict[str, Any]]:
        with open(os.path.join(manifest_dir, name), "rb") as handle:
            data = handle.read()
        return list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]

    def write(name: str, schema: dict[str, Any], rows: list[dict[str, Any]]) -> int:
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(schema), rows, codec="zstandard")
        with open(os.path.join(manifest_dir, name), "wb") as handle:
            handle.write(buffer.getvalue())
        return buffer.tell()

    with open(os.path.join(table_dir, "snapshot", "LATEST"), encoding="ascii") as handle:
        latest = handle.read().strip()
    with open(os.path.join(table_dir, "snapshot", f"snapshot-{latest}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    rows = read(snapshot["baseManifestList"]) + read(snapshot["deltaManifestList"])
    size = write(f"raw-manifest-{tag}", avro.manifest_entry_schema(), records)
    delta_row = {**rows[-1], "_FILE_NAME": f"raw-manifest-{tag}", "_FILE_SIZE": size}
    write(f"raw-list-base-{tag}", avro.manifest_file_meta_schema(), rows)
    write(f"raw-list-delta-{tag}", avro.manifest_file_meta_schema(), [delta_row])
    snapshot.update(id=snapshot["id"] + 1, baseManifestList=f"raw-list-base-{tag}")
    with open(os.path.join(table_dir, "snapshot", f"raw-snapshot-{tag}"), "w", encoding="utf-8") as handle:
        json.dump(snapshot, handle)
    return len(rows)


def worker_append(
    table_dir: str, scratch: str, repeat: int, warmup: int, policy_commits: int
) -> dict[str, Any]:
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.table import Table

    out: dict[str, Any] = {}
    source, scratch_dir = Path(table_dir), Path(scratch)
    try:
        # merge=False: the protocol's own cost.
        link_copy(source, scratch_dir / "a")
        table = Table.open(str(scratch_dir / "a"))
        committer = Committer(table, "bench-append")
        link_copy(source, scratch_dir / "raw")
        batches = _append_batches(table, warmup + repeat + 1, seed=1)
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
        out["no_merge"] = {
            "times": times,
            "median": statistics.median(times),
            "min": min(times),
            "merge_modes": sorted(modes),
            "access": counter.snapshot(),
            "raw_floor": {
                "times": raw_times,
                "median": statistics.median(raw_times),
                "min": min(raw_times),
            },
            "vs_raw_floor": statistics.median(times) / statistics.median(raw_times),
        }
        counter.close()

        # merge=True: a sequence of commits under the table's default policy, then the same
        # sequence replayed on another fresh copy with access counting (untimed).
        if policy_commits:
            policy_batches = _append_batches(table, policy_commits, seed=2)
            runs = []
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
            out["policy"] = {
                "commits": runs,
                "median_no_merge": statistics.median(plain) if plain else None,
                "merges": [{k: v for k, v in r.items() if k != "access"} for r in merged],
                "mean_of_sequence": statistics.fmean(r["seconds"] for r in runs),
            }
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return out


# ---- benchmark 2: manifest compaction (workers) -------------------------------------------------


def run_raw_compaction(table_dir: str, out_dir: str, target: int) -> dict[str, int]:
    """Read every manifest of the latest snapshot into dicts; write all entries to ~target-byte zstd files."""
    import fastavro
    from fastavro import write as fastavro_write

    from airflow_lakeformat.core.paimon import avro

    def read(path: str) -> list[dict[str, Any]]:
        with open(path, "rb") as handle:
            data = handle.read()
        return list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]

    manifest_dir = os.path.join(table_dir, "manifest")
    with open(os.path.join(table_dir, "snapshot", "LATEST"), encoding="ascii") as handle:
        latest = handle.read().strip()
    with open(os.path.join(table_dir, "snapshot", f"snapshot-{latest}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    metas = read(os.path.join(manifest_dir, snapshot["baseManifestList"]))
    metas += read(os.path.join(manifest_dir, snapshot["deltaManifestList"]))

    parsed = fastavro.parse_schema(avro.manifest_entry_schema())
    os.makedirs(out_dir, exist_ok=True)
    files = records = 0
    buffer = io.BytesIO()
    writer = fastavro_write.Writer(buffer, parsed, codec="zstandard", sync_interval=1 << 62)
    pending = 0

    def close() -> None:
        nonlocal buffer, writer, files, pending
        writer.flush()
        with open(os.path.join(out_dir, f"raw-manifest-{files}"), "wb") as handle:
            handle.write(buffer.getvalue())
        files += 1
        pending = 0
        buffer = io.BytesIO()
        writer = fastavro_write.Writer(buffer, parsed, codec="zstandard", sync_interval=1 << 62)

    for meta in metas:
        for record in read(os.path.join(manifest_dir, meta["_FILE_NAME"])):
            writer.write(record)
            records += 1
            pending += 1
            if pending % RAW_BLOCK_RECORDS == 0:
                writer.flush()
                if buffer.tell() >= target:
                    close()
    if pending:
        close()
    return {"manifests_read": len(metas), "entries_written": records, "files_written": files}


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


def _ours_package() -> str:
    import airflow_lakeformat

    return str(Path(airflow_lakeformat.__file__).parent)


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    if args.ours_root:
        sys.path.insert(0, str(Path(args.ours_root).resolve()))

    if args.worker:
        kind, *rest = args.worker
        if kind == "append":
            document = worker_append(rest[0], rest[1], args.repeat, args.warmup, args.policy_commits)
        elif kind == "profile":
            document = worker_profile(rest[0], rest[1], rest[2], 15)
        else:
            document = worker_compaction(
                rest[0], rest[1], rest[2], args.compaction_repeat, args.compaction_warmup
            )
        document["package"] = _ours_package()
        json.dump(document, sys.stdout)
        sys.stdout.write("\n")
        return 0

    sizes = [int(s) for s in args.sizes.split(",") if s]
    layouts = [s for s in args.layouts.split(",") if s]
    if any(layout not in LAYOUTS for layout in layouts) or not sizes:
        parser.error(f"layouts must be among {LAYOUTS} and sizes non-empty")
    work_dir = Path(args.work_dir).resolve()
    scratch_root = work_dir / "scratch"
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
        "ours_package": _ours_package(),
    }
    failures: list[str] = []

    # ---- benchmark 1
    if args.only in (None, "append"):
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
        result["append"] = {
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

    # ---- benchmark 2
    if args.only in (None, "compaction"):
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
        result["compaction"] = {
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
    result["failures"] = failures
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


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
