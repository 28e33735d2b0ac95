"""The orphan-cleanup benchmarks' table, the orphans planted in it, and the raw floors they are measured against.

The table (:func:`ensure_table`, cached under bench/.work/): a bulk load of 80 % of the referenced data
files, then appends and every 5th commit a compaction (:class:`~bench.support.paimon_history.HistoryWriter`),
metadata aged to 30 days. Each run plants old orphans in every location cleanup lists, a few fresh ones
and old empty bucket directories (:func:`plan_planting`, :func:`plant`), and removes what is left after
it through the core's FileDeleter (:func:`remove_planted`). The floors: :func:`worker_walk` (os.scandir
with and without stat) and :func:`raw_used_set` (fastavro over every manifest list and manifest).
:class:`PhaseClock` records the plan's phases through its progress and ``on_phase`` hooks.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.support.memory import current_rss
from bench.support.paimon_history import (
    BUCKETS,
    DAY,
    PARTITIONS,
    HistoryWriter,
    age_metadata,
    distinct_manifests,
    tree_digest,
    walk_files,
)

DEFAULT_FILES = 1_000_000
DEFAULT_SNAPSHOTS = 200
GENERATOR_VERSION = 2  # bump when the generated table changes, to invalidate cached tables
REFERENCED_SHARE = 0.9  # of --files: data files the table's snapshots reference
BULK_SHARE = 0.8  # of the referenced files: the first snapshot (an initial load)
FRESH_PER_MILLE = 1  # of --files: orphans younger than older_than (must stay)
COMPACT_EVERY = 5
EMPTY_DIRECTORIES = 8  # old, empty bucket directories planted in new partitions


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
        self.rss[f"after {self._task}"] = current_rss()

    def phase(self, name: str) -> None:
        self.events.append((f"phase:{name}", self._now(), None))
        self.rss[f"phase {name}"] = current_rss()

    def at(self, label: str, after: float = 0.0) -> float:
        return next(t for name, t, _ in self.events if name == label and t >= after)

    def finish_after(self, label: str) -> float:
        started = self.at(label)
        return next(t for name, t, _ in self.events if name == "finish" and t >= started)
