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
import hashlib
import io
import json
import os
import random
import resource
import shutil
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(1, str(BENCH_DIR))
# A worker measures the airflow_lakeformat package found here instead (--baseline-root: "before").
PACKAGE_ROOT_ENV = "LAKEFORMAT_BENCH_PACKAGE_ROOT"
if os.environ.get(PACKAGE_ROOT_ENV):
    sys.path.insert(0, os.environ[PACKAGE_ROOT_ENV])

from bench_planning import machine_facts, run_json  # noqa: E402

DEFAULT_WORK_DIR = BENCH_DIR / ".work"
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_FILES = 1_000_000
DEFAULT_SNAPSHOTS = 200
GENERATOR_VERSION = 2  # bump when the generated table changes, to invalidate cached tables
REFERENCED_SHARE = 0.9  # of --files: data files the table's snapshots reference
BULK_SHARE = 0.8  # of the referenced files: the first snapshot (an initial load)
FRESH_PER_MILLE = 1  # of --files: orphans younger than older_than (must stay)
COMPACT_EVERY = 5
PARTITIONS = 100
BUCKETS = 4
EMPTY_DIRECTORIES = 8  # old, empty bucket directories planted in new partitions
DAY = 86_400
FIELDS = [
    {"name": "dt", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "ts", "type": "TIMESTAMP(3)"},
]
MiB = 1024 * 1024


# ---- a table with a history, through the core's commit path (shared with bench_expiry) ----------


class HistoryWriter:
    """Commits a realistic history with ``Committer`` (default merge policy) and writes empty data files.

    Time is injected: every commit happens ``step`` seconds after the previous one, starting at
    ``start`` (epoch seconds); data files get their commit time as mtime. ``track_live`` keeps every
    live entry by partition (needed for overwrites); otherwise only the files appended since the
    last compaction of each partition are kept (what compactions rewrite).
    """

    def __init__(self, table_dir: Path, *, seed: int, start: float, step: float, track_live: bool) -> None:
        from airflow_lakeformat.core.paimon import binary_row
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
        from airflow_lakeformat.core.paimon.paths import DataFilePaths
        from airflow_lakeformat.core.paimon.values import from_python

        table_dir.mkdir(parents=True, exist_ok=True)
        schema = schema_from_fields(
            FIELDS,
            partition_keys=["dt"],
            options={"bucket": str(BUCKETS), "bucket-key": "id", "file.format": "parquet"},
            time_millis=int(start * 1000),
        )
        self.root = table_dir
        self.table = create_table(str(table_dir), schema)
        self.now = start
        self.step = step
        self.committer = Committer(self.table, "bench-history", clock=lambda: self.now)
        self.paths = DataFilePaths(self.table.schema)
        types = self.table.schema.partition_types
        day0 = datetime(2025, 1, 1)
        self.partitions = [
            binary_row.encode([from_python((day0 + timedelta(days=i)).strftime("%Y-%m-%d"), types[0])], types)
            for i in range(PARTITIONS)
        ]
        self.rng = random.Random(seed)
        self.sequence = 0
        self.track_live = track_live
        self.live: dict[int, dict[str, Any]] = {}  # partition -> file name -> live entry (track_live only)
        self.pending: dict[int, list[Any]] = {}  # partition -> files appended since its last compaction
        self.deleted_by_snapshot: dict[int, list[str]] = {}  # snapshot id -> relative paths it DELETEd
        self.data_files = 0
        self.merges: list[dict[str, Any]] = []
        self._partition_index = {p: i for i, p in enumerate(self.partitions)}

    def _entry(self, partition: int, bucket: int, source: Any) -> Any:
        from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry

        rng = self.rng
        rows = rng.randint(10_000, 2_000_000)
        meta = DataFileMeta.create(
            f"data-{uuid.UUID(int=rng.getrandbits(128), version=4)}-0.parquet",
            rows * rng.randint(20, 60),
            rows,
            min_sequence_number=self.sequence,
            max_sequence_number=self.sequence + rows - 1,
            creation_time=datetime.fromtimestamp(self.now, tz=timezone.utc),
            file_source=source,
            value_stats_cols=[],
        )
        self.sequence += rows
        return ManifestEntry.create(FileKind.ADD, self.partitions[partition], bucket, BUCKETS, meta)

    def new_files(self, groups: Sequence[tuple[int, int]], compacted: bool = False) -> list[Any]:
        """One ADD entry per (partition, bucket) in ``groups``, its (empty) data file written."""
        from airflow_lakeformat.core.paimon.manifest import FileSource

        source = FileSource.COMPACT if compacted else FileSource.APPEND
        entries = [self._entry(p, b, source) for p, b in groups]
        stamp = (self.now, self.now)
        for entry in entries:
            path = os.path.join(self.root, self.paths.relative_path(entry))
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            try:
                os.utime(fd, stamp)
            finally:
                os.close(fd)
        self.data_files += len(entries)
        if self.track_live:
            for entry in entries:
                self.live.setdefault(self._partition_index[entry.partition], {})[entry.file.file_name] = entry
        return entries

    def _commit(self, entries: list[Any], kind: Any) -> int:
        from airflow_lakeformat.core.paimon.manifest import FileKind

        deletes = [e for e in entries if e.kind is FileKind.DELETE]
        started = time.perf_counter()
        # The benchmark knows its DELETEs match live files; the conflict check would re-read the table.
        result = self.committer.commit(entries, kind=kind, check_conflicts=False if deletes else None)
        if result.merge != "none":
            self.merges.append(
                {
                    "snapshot": result.snapshot.id,
                    "mode": result.merge,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
        if deletes:
            self.deleted_by_snapshot[result.snapshot.id] = [self.paths.relative_path(e) for e in deletes]
            if self.track_live:
                for entry in deletes:
                    del self.live[self._partition_index[entry.partition]][entry.file.file_name]
        self.now += self.step
        return int(result.snapshot.id)

    def append(self, groups: Sequence[tuple[int, int]]) -> int:
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        entries = self.new_files(groups)
        for entry in entries:
            self.pending.setdefault(self._partition_index[entry.partition], []).append(entry)
        return self._commit(entries, CommitKind.APPEND)

    def compact(self, partition: int | None = None) -> int:
        """Rewrite the files appended to a partition since its last compaction into one file per bucket
        (default: the partition with the most such files)."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        if partition is None:
            partition = max(self.pending, key=lambda p: len(self.pending[p]), default=0)
        victims = self.pending.pop(partition, [])
        added = self.new_files([(partition, b) for b in range(BUCKETS)], compacted=True)
        return self._commit([*(v.to_delete() for v in victims), *added], CommitKind.COMPACT)

    def overwrite(self, partition: int) -> int:
        """INSERT OVERWRITE of one partition: DELETE every live file, ADD as many new ones."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        if not self.track_live:
            raise ValueError("overwrite needs track_live")
        victims = list(self.live.get(partition, {}).values())
        self.pending.pop(partition, None)
        added = self.new_files([(partition, i % BUCKETS) for i in range(max(BUCKETS, len(victims)))])
        return self._commit([*(v.to_delete() for v in victims), *added], CommitKind.OVERWRITE)

    def bulk(self, count: int) -> int:
        """An initial load of ``count`` files over every partition and bucket, in one snapshot."""
        from airflow_lakeformat.core.paimon.snapshot import CommitKind

        groups = [(i % PARTITIONS, (i // PARTITIONS) % BUCKETS) for i in range(count)]
        return self._commit(self.new_files(groups), CommitKind.APPEND)

    def live_count(self) -> int:
        return sum(len(files) for files in self.live.values())


def age_metadata(table_dir: Path, when: float) -> int:
    """Set the mtime of every metadata file (schema, snapshot, manifest directories) to ``when``."""
    count = 0
    for sub in ("schema", "snapshot", "manifest"):
        with os.scandir(table_dir / sub) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    os.utime(entry.path, (when, when))
                    count += 1
    return count


def walk_files(root: str) -> Iterator[os.DirEntry[str]]:
    """Every regular file under ``root`` (os.scandir, depth first, no symlinks followed)."""
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    yield entry


def tree_digest(root: str, exclude: set[str] | None = None) -> tuple[int, str]:
    """(file count, sha256 of the sorted relative paths) of the tree, without ``exclude`` (full paths)."""
    prefix = len(root.rstrip("/")) + 1
    exclude = exclude or set()
    paths = sorted(e.path[prefix:] for e in walk_files(root) if e.path not in exclude)
    return len(paths), hashlib.sha256("\n".join(paths).encode()).hexdigest()


def distinct_manifests(table: Any) -> tuple[list[Any], int]:
    """Every distinct manifest any snapshot references (metas), and the manifest lists read."""
    metas: dict[str, Any] = {}
    lists: set[str] = set()
    for snapshot in table.snapshot_manager.snapshots():
        for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            lists.add(name)
            for meta in table.manifest_list(name):
                metas.setdefault(meta.file_name, meta)
    return list(metas.values()), len(lists)


def build_table(table_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    referenced = int(args.files * REFERENCED_SHARE)
    bulk = int(referenced * BULK_SHARE)
    start = time.time() - 30 * DAY
    history = HistoryWriter(table_dir, seed=20260301, start=start, step=600.0, track_live=False)
    commits = args.snapshots - 1
    compactions = commits // COMPACT_EVERY
    appends = commits - compactions
    per_append = (referenced - bulk - compactions * BUCKETS) // max(1, appends)
    leftover = referenced - bulk - compactions * BUCKETS - per_append * appends
    history.bulk(bulk + leftover)
    for c in range(commits):
        # The write window moves through the partitions over the history (3 recent days at a time).
        first = c * PARTITIONS // max(1, commits)
        if c % COMPACT_EVERY == COMPACT_EVERY - 1:
            history.compact()
        else:
            history.append([((first + j % 3) % PARTITIONS, (j // 3) % BUCKETS) for j in range(per_append)])
    age_metadata(table_dir, start)
    metas, lists = distinct_manifests(history.table)
    count, digest = tree_digest(str(table_dir))
    return {
        "snapshots": len(history.table.snapshot_manager.list_snapshot_ids()),
        "referenced_data_files": history.data_files,
        "bulk_files": bulk + leftover,
        "appends": appends,
        "files_per_append": per_append,
        "compactions": compactions,
        "data_files_deleted_by_compactions": sum(len(v) for v in history.deleted_by_snapshot.values()),
        "manifest_merges": history.merges,
        "distinct_manifests": len(metas),
        "manifest_entries": sum(m.num_added_files + m.num_deleted_files for m in metas),
        "manifest_bytes": sum(m.file_size for m in metas),
        "distinct_manifest_lists": lists,
        "files_in_tree": count,
        "tree_digest": digest,
    }


def ensure_table(args: argparse.Namespace) -> tuple[Path, Path, dict[str, Any]]:
    """The cached table for these parameters, built if missing; returns (root, table_dir, facts)."""
    key = f"orphans-v{GENERATOR_VERSION}-f{args.files}-s{args.snapshots}"
    root = Path(args.work_dir).resolve() / key
    table_dir = root / "warehouse" / "bench.db" / "t"
    marker = root / "params.json"
    if marker.exists() and not args.rebuild:
        print(f"using cached table {table_dir}", file=sys.stderr)
        return root, table_dir, json.loads(marker.read_text())["facts"]
    if root.exists():
        shutil.rmtree(root)
    print(f"building table {table_dir} ...", file=sys.stderr)
    t0 = time.perf_counter()
    facts = build_table(table_dir, args)
    facts["build_seconds"] = round(time.perf_counter() - t0, 1)
    print(f"built in {facts['build_seconds']} s", file=sys.stderr)
    marker.write_text(
        json.dumps({"files": args.files, "snapshots": args.snapshots, "facts": facts}, indent=2)
    )
    return root, table_dir, facts


# ---- planting (each run) -------------------------------------------------------------------------


def _touch(path: str, mtime: float) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.utime(fd, (mtime, mtime))
    finally:
        os.close(fd)


def plan_planting(
    table_dir: Path, files: int, pristine: int, seed: int, old: int | None = None, fresh: int | None = None
) -> dict[str, Any]:
    """Where this run plants what: ``{"old": {kind: [paths]}, "fresh": [...], "empty_dirs": [...]}``.

    By default enough to make ``files`` files in all, 0.1 % of them fresh; ``old`` and ``fresh``
    give the counts instead.
    """
    rng = random.Random(seed)
    fresh_count = max(4, files * FRESH_PER_MILLE // 1000) if fresh is None else max(2, fresh)
    orphans = max(16, files - pristine - fresh_count) if old is None else old
    root = str(table_dir)

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    buckets = sorted(
        os.path.join(p.path, b.name)
        for p in os.scandir(root)
        if p.is_dir() and "=" in p.name
        for b in os.scandir(p.path)
        if b.is_dir() and b.name.startswith("bucket-")
    )
    new_partitions = [os.path.join(root, f"dt=2099-12-{i + 1:02d}") for i in range(4)]
    manifest = orphans // 100
    index = orphans // 200
    stats = max(1, orphans // 1000)
    temps = max(1, min(100, orphans // 1000))
    in_new = orphans // 100
    data = orphans - manifest - index - stats - temps - in_new
    old: dict[str, list[str]] = {
        "data-file": [f"{rng.choice(buckets)}/data-{uid()}-0.parquet" for _ in range(data)]
        + [
            f"{new_partitions[i % 4]}/bucket-{i % BUCKETS}/data-{uid()}-{i % 3}.parquet"
            for i in range(in_new)
        ],
        "manifest": [
            os.path.join(root, "manifest", f"manifest-{'list-' if i % 3 == 0 else ''}{uid()}-0")
            for i in range(manifest)
        ],
        "index-file": [os.path.join(root, "index", f"index-{uid()}-0") for _ in range(index)],
        "statistics": [os.path.join(root, "statistics", f"stat-{uid()}-0") for _ in range(stats)],
        "stale-temp-file": [
            os.path.join(root, "snapshot", f".snapshot-{1_000_000 + i}.{uid()}.tmp") for i in range(temps)
        ],
    }
    fresh = [f"{rng.choice(buckets)}/data-{uid()}-0.parquet" for _ in range(fresh_count - 2)]
    fresh += [
        os.path.join(root, "manifest", f"manifest-{uid()}-0"),
        os.path.join(root, "snapshot", f".snapshot-{2_000_000}.{uid()}.tmp"),
    ]
    empty = [os.path.join(root, f"dt=2099-11-{i + 1:02d}", "bucket-0") for i in range(EMPTY_DIRECTORIES)]
    return {"old": old, "fresh": fresh, "empty_dirs": empty}


def plant(planting: dict[str, Any], old_mtime: float) -> None:
    for paths in planting["old"].values():
        for path in paths:
            try:
                _touch(path, old_mtime)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                _touch(path, old_mtime)
    now = time.time()
    for path in planting["fresh"]:
        _touch(path, now)
    for directory in planting["empty_dirs"]:
        os.makedirs(directory, exist_ok=True)
        os.utime(directory, (old_mtime, old_mtime))


def remove_planted(table_dir: Path, planting: dict[str, Any]) -> dict[str, Any]:
    """Remove what a run planted and left (fresh orphans; everything after an interrupted run).

    Through the core's FileDeleter: the one module that deletes table files.
    """
    from airflow_lakeformat.core.io import FileIO
    from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter

    io_, _ = FileIO.for_uri(str(table_dir))
    deleter = FileDeleter(io_, dry_run=False)
    requests = [DeleteRequest("planted", p) for p in planting["fresh"]]
    requests += [DeleteRequest(kind, p) for kind, paths in planting["old"].items() for p in paths]
    report = deleter.delete(requests)
    dirs = deleter.remove_empty_directories(planting["empty_dirs"])
    if report.failed:
        raise RuntimeError(f"could not remove planted files: {report.failed[:3]}")
    return {
        "removed": report.total_files,
        "already_missing": report.already_missing,
        "dirs": dirs.total_files,
    }


# ---- the measured work (worker subprocesses) -----------------------------------------------------


def _current_rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss() -> int:
    """ru_maxrss. Caution: Linux carries it over exec from the forking parent, so a worker starts at
    its parent's peak; :func:`high_water` is the process's own."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_high_water() -> bool:
    """Reset this process's RSS high-water mark (VmHWM), so the next reading covers what follows."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def high_water() -> int:
    """VmHWM: this process's peak resident set size since start or the last reset, in bytes."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return _peak_rss()


def memory_around(fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` and report RSS before, the high-water mark during it, and ru_maxrss."""
    gc.collect()
    reset = reset_high_water()
    before = _current_rss()
    value = fn()
    peak = high_water()
    return value, {
        "rss_before_bytes": before,
        "high_water_bytes": peak,
        "high_water_delta_bytes": peak - before,
        "high_water_reset": reset,
        "rss_after_bytes": _current_rss(),
        "ru_maxrss_bytes": _peak_rss(),
    }


def worker_walk(table_dir: str, repeat: int) -> dict[str, Any]:
    """Raw ``os.scandir`` walks of the tree: with stat of every file (what listing needs), names only."""

    def with_stat() -> int:
        count = 0
        for entry in walk_files(table_dir):
            st = entry.stat(follow_symlinks=False)
            if st.st_mtime and st.st_size >= 0:
                count += 1
        return count

    def names_only() -> int:
        return sum(1 for _ in walk_files(table_dir))

    out: dict[str, Any] = {}
    for label, fn in (("stat", with_stat), ("names", names_only)):
        fn()  # warm-up (dentry and inode caches)
        times, cpu, files = [], [], 0
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            files = fn()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out[label] = {
            "times": times,
            "median": statistics.median(times),
            "cpu_times": cpu,
            "cpu_median": statistics.median(cpu),
            "files": files,
        }
    return out


def project(schema: Any, keep: dict[str, Any]) -> Any:
    """A reader schema: ``schema``'s record (through a ["null", record] union) with only ``keep``'s fields."""
    if isinstance(schema, list):
        return [project(s, keep) if isinstance(s, dict) else s for s in schema]
    fields = []
    for field in schema["fields"]:
        if field["name"] in keep:
            nested = keep[field["name"]]
            fields.append({**field, "type": project(field["type"], nested)} if nested else field)
    return {**schema, "fields": fields}


def raw_used_set(table_dir: str, names_only: bool = True) -> dict[str, Any]:
    """The used-set floor: every snapshot's manifest lists, then every distinct manifest, with fastavro.

    ``names_only``: fastavro resolves each file against a reader schema of just the file-name fields
    (it skips the rest), the floor for a names-only reader; otherwise everything is decoded.
    """
    import fastavro

    cpu0 = time.process_time()
    readers: dict[str, Any] = {}
    list_keep = {"_FILE_NAME": None}
    entry_keep = {"_FILE": {"_FILE_NAME": None}}

    def records(path: str, keep: dict[str, Any]) -> Any:
        with open(path, "rb") as handle:
            data = handle.read()
        if not names_only:
            return fastavro.reader(io.BytesIO(data))
        writer = fastavro.reader(io.BytesIO(data)).writer_schema
        key = repr(writer)
        if key not in readers:
            readers[key] = project(writer, keep)
        return fastavro.reader(io.BytesIO(data), reader_schema=readers[key])

    t0 = time.perf_counter()
    manifest_dir = os.path.join(table_dir, "manifest")
    snapshot_dir = os.path.join(table_dir, "snapshot")
    lists: list[str] = []
    for name in os.listdir(snapshot_dir):
        if name.startswith("snapshot-") and name[9:].isdigit():
            with open(os.path.join(snapshot_dir, name), encoding="utf-8") as handle:
                snapshot = json.load(handle)
            lists.extend(n for n in (snapshot["baseManifestList"], snapshot["deltaManifestList"]) if n)
    manifests: set[str] = set()
    rows = 0
    for name in lists:
        for record in records(os.path.join(manifest_dir, name), list_keep):
            manifests.add(record["_FILE_NAME"])
            rows += 1
    t1 = time.perf_counter()
    names: set[str] = set(lists) | manifests
    entries = 0
    for name in sorted(manifests):
        for record in records(os.path.join(manifest_dir, name), entry_keep):
            names.add(record["_FILE"]["_FILE_NAME"])
            entries += 1
    t2 = time.perf_counter()
    return {
        "names_only": names_only,
        "seconds": t2 - t0,
        "cpu_seconds": time.process_time() - cpu0,
        "lists_seconds": t1 - t0,
        "manifests_seconds": t2 - t1,
        "manifest_lists": len(set(lists)),
        "manifest_list_rows": rows,
        "manifests": len(manifests),
        "entries": entries,
        "names": len(names),
    }


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


class PhaseClock:
    """A Progress that records when each task starts and finishes, plus ``on_phase`` marks."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float, int | None]] = []
        self.rss: dict[str, int] = {}  # RSS when each task finished / each phase was reached
        self.cpu: dict[float, float] = {}  # wall time of an event -> process CPU time (all threads)
        self.advanced = 0

    def _now(self) -> float:
        wall = time.perf_counter()
        self.cpu[wall] = time.process_time()
        return wall

    def start(self, task: str, total: int | None) -> None:
        self.events.append((f"start:{task}", self._now(), total))
        self._task = task

    def advance(self, count: int = 1) -> None:
        self.advanced += count

    def finish(self) -> None:
        self.events.append(("finish", self._now(), None))
        self.rss[f"after {self._task}"] = _current_rss()

    def phase(self, name: str) -> None:
        self.events.append((f"phase:{name}", self._now(), None))
        self.rss[f"phase {name}"] = _current_rss()

    def at(self, label: str, after: float = 0.0) -> float:
        return next(t for name, t, _ in self.events if name == label and t >= after)

    def finish_after(self, label: str) -> float:
        started = self.at(label)
        return next(t for name, t, _ in self.events if name == "finish" and t >= started)


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
    from airflow_lakeformat.core.collector import gc_paused
    from airflow_lakeformat.core.paimon.maintenance.orphans import execute_orphan_cleanup, plan_orphan_cleanup
    from airflow_lakeformat.core.paimon.table import Table

    planting = json.loads(Path(planting_file).read_text())
    expected_paths, expected_kinds = _expected(planting)
    # "p1": one listing/reading thread instead of the default read_parallelism (16).
    table = Table.open(table_dir, read_parallelism=1) if mode.startswith("p1") else Table.open(table_dir)
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
    began, ended = marks["began"], marks["ended"]
    phases, cpu_phases = _split_phases(clock, began, ended)
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
    present_before = sum(1 for p in expected_paths if os.path.exists(p))
    t0 = time.perf_counter()
    dry = execute_orphan_cleanup(table, plan, dry_run=True)
    dry_seconds = time.perf_counter() - t0
    present_after_dry = sum(1 for p in expected_paths if os.path.exists(p))
    dry_json = dry.to_json()
    checks["dry_run_deleted_nothing"] = present_before == present_after_dry == len(expected_paths)
    checks["dry_run_counts_match"] = dry_json["files"] == summary["files"] and dry_json["keptByRecheck"] == 0
    if not (checks["dry_run_deleted_nothing"] and checks["dry_run_counts_match"]):
        out["executed"] = False
        return out
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
    out.update(
        executed=True,
        dry_run={"seconds": dry_seconds, "result": dry_json},
        real_run={
            "seconds": real_seconds,
            "deleter_seconds": real.report.duration_seconds,
            "deleted": deleted,
            "deletes_per_second": deleted / real_seconds,
            "result": real_json,
        },
    )
    return out


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

    for label, document in [("execute", run), *extra.items()]:
        for check, value in document["checks"].items():
            if value is False or (check == "planted_old_not_classified" and value):
                failures.append(f"{label}: {check}")
    if not run.get("executed"):
        failures.append("execute: not executed (checks failed before deleting)")
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
    output.write_text(json.dumps(result, indent=2) + "\n")
    print_summary(result)
    print(f"results: {output}")
    return 0 if not failures else 1


def run_json_env(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``run_json`` with extra environment variables for the child."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return run_json(command)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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
