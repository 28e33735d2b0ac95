"""Orphan-file cleanup planned as a value, with the safety rules learned from other tools' bugs.

1. List candidates first (paimon#3074: a used set computed before the listing missed a commit made
   in between). Candidates are files older than ``older_than`` (default 1 day; under 1 hour refused
   without an explicit override) in ``manifest/``, ``index/``, ``statistics/``, the data tree
   (exactly one directory level per partition key, then ``bucket-*``), external data paths, and
   stray files (crashed temp files) in every branch's ``snapshot/`` and ``changelog/`` directories.
2. Then collect the used set by *file name* (so path spellings cannot make live files look orphaned)
   from every snapshot, tag and long-lived changelog of every branch: manifest lists, manifests and
   their extra files, index manifests and index files, statistics files, and every ADD and DELETE
   entry's file and extra files. Metadata that cannot be read aborts with nothing deleted, unless the
   snapshot that referenced it has itself disappeared meanwhile (a concurrent expiry, paimon#7715).
3. Right before each delete batch, new snapshots, tags and changelogs are folded into the used set
   and the batch is filtered again.
4. Directories are never deleted, except old, empty bucket and partition directories (rmdir only).

The building blocks (:func:`candidate_directories`, :func:`list_candidates`,
:func:`collect_used_metadata`, :func:`names_in_manifest`) are what the Spark job distributes.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    DeletionFailedError,
    MaintenanceRefusedError,
    MissingMetadataError,
    SnapshotNotFoundError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter, tally
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.live_files import gc_paused
from airflow_lakeformat.core.paimon.maintenance.references import resolve_table_path, snapshot_references
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import MAIN_BRANCH, SnapshotManager
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

Clock = Callable[[], float]

DEFAULT_OLDER_THAN = timedelta(days=1)
MINIMUM_OLDER_THAN = timedelta(hours=1)
_NEVER_CANDIDATE_SUFFIXES = (".managed.blob",)
_HINTS = frozenset({paths.EARLIEST, paths.LATEST})


@dataclass(frozen=True, slots=True)
class CandidateDirectory:
    """A directory whose files are orphan candidates; ``kind`` names what lives there."""

    path: str
    kind: str  # manifest | index | statistics | data | snapshot-dir | changelog-dir


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    path: str
    size: int
    kind: str


@dataclass
class Listing:
    """Old-enough candidate files, plus what the listing saw for reporting and directory cleanup."""

    candidates: list[Candidate] = field(default_factory=list)
    files_listed: int = 0
    too_recent: int = 0
    no_mtime: int = 0
    directories_listed: int = 0
    empty_directories: list[str] = field(default_factory=list)


@dataclass
class UsedMetadata:
    """The used set's metadata part, and which manifests remain to be read for data-file names."""

    names: set[str] = field(default_factory=set)
    manifests: dict[str, list[str]] = field(default_factory=dict)  # manifest -> owners (for messages)
    latest_ids: dict[str, int | None] = field(default_factory=dict)  # branch -> latest snapshot seen
    tags: dict[str, int] = field(default_factory=dict)  # "branch:tag" -> snapshot id
    changelogs: dict[str, int | None] = field(default_factory=dict)  # branch -> latest changelog seen
    skipped_vanished: int = 0


def _branch_managers(table: Table) -> list[SnapshotManager]:
    managers = [SnapshotManager(table.io, table.root, MAIN_BRANCH)]
    for branch in managers[0].branches():
        manager = SnapshotManager(table.io, table.root, branch)
        schema_dir = table.io.join(manager.branch_root, paths.SCHEMA_DIR)
        if not any(n.startswith("schema-") for n in table.io.list_names(schema_dir)):
            # Paimon aborts here too: a branch without a schema is half-created or half-deleted.
            raise CorruptMetadataError(table.io.uri(schema_dir), f"branch {branch!r} has no schema")
        managers.append(manager)
    return managers


def _data_roots(table: Table) -> list[tuple[FileIO, str, str]]:
    """(io, root, kind) of every tree data files live in: the table's and each external path."""
    options = table.schema.table_options
    base = table.root
    if options.data_file_path_directory:
        base = table.io.join(base, options.data_file_path_directory)
    roots = [(table.io, base, "data")]
    external = options.raw.get("data-file.external-paths")
    for uri in filter(None, (u.strip() for u in (external or "").split(","))):
        roots.append((table.io, resolve_table_path(table, uri), "data"))
    return roots


def candidate_directories(table: Table) -> tuple[list[CandidateDirectory], list[str]]:
    """Directories to list, and the partition/bucket directories (for empty-directory cleanup).

    The data tree is walked exactly as deep as the table has partition keys, through directories
    named ``key=value`` only, so nothing outside Paimon's layout is ever a candidate.
    """
    io = table.io
    directories = [
        CandidateDirectory(io.join(table.root, paths.MANIFEST_DIR), "manifest"),
        CandidateDirectory(io.join(table.root, paths.INDEX_DIR), "index"),
        CandidateDirectory(io.join(table.root, paths.STATISTICS_DIR), "statistics"),
    ]
    for manager in _branch_managers(table):
        directories.append(CandidateDirectory(manager.snapshot_dir, "snapshot-dir"))
        directories.append(
            CandidateDirectory(io.join(manager.branch_root, paths.CHANGELOG_DIR), "changelog-dir")
        )
    depth = len(table.schema.partition_keys)
    tree_dirs: list[str] = []
    for _, root, kind in _data_roots(table):
        level = [root]
        for _ in range(depth):
            level = [s.path for d in level for s in io.list_dir(d) if s.is_dir and "=" in s.name]
            tree_dirs.extend(level)
        for directory in level:
            for status in io.list_dir(directory):
                if status.is_dir and status.name.startswith(paths.BUCKET_PREFIX):
                    directories.append(CandidateDirectory(status.path, kind))
                    tree_dirs.append(status.path)
    return directories, tree_dirs


def _is_candidate_name(name: str, kind: str) -> bool:
    if name.endswith(_NEVER_CANDIDATE_SUFFIXES):
        return False
    if kind == "snapshot-dir":
        return not (name in _HINTS or _is_numbered(name, paths.SNAPSHOT_PREFIX))
    if kind == "changelog-dir":
        return not (name in _HINTS or _is_numbered(name, "changelog-"))
    return True


def _is_numbered(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and name[len(prefix) :].isdigit()


def list_candidates(io: FileIO, directory: CandidateDirectory, cutoff: float) -> Listing:
    """Old-enough files of one directory (mtime strictly before ``cutoff``, epoch seconds).

    A file without a modification time is never a candidate: its age is unknown.
    """
    listing = Listing(directories_listed=1)
    for status in io.list_dir(directory.path):
        if status.is_dir:
            continue
        listing.files_listed += 1
        if not _is_candidate_name(status.name, directory.kind):
            continue
        if status.mtime is None:
            listing.no_mtime += 1
        elif status.mtime >= cutoff:
            listing.too_recent += 1
        else:
            listing.candidates.append(Candidate(status.name, status.path, status.size, directory.kind))
    return listing


def _merge_listings(parts: Iterable[Listing]) -> Listing:
    total = Listing()
    for part in parts:
        total.candidates.extend(part.candidates)
        total.files_listed += part.files_listed
        total.too_recent += part.too_recent
        total.no_mtime += part.no_mtime
        total.directories_listed += part.directories_listed
    return total


def _snapshots_of(manager: SnapshotManager, used: UsedMetadata, after: int | None = None) -> list[Snapshot]:
    """Every readable snapshot of a branch (newer than ``after``), tolerating concurrent expiry."""
    result = []
    for snapshot_id in manager.list_snapshot_ids():
        if after is not None and snapshot_id <= after:
            continue
        try:
            result.append(manager.snapshot(snapshot_id))
        except SnapshotNotFoundError:
            used.skipped_vanished += 1  # expired between listing and reading
    return result


def _changelogs_of(manager: SnapshotManager, io: FileIO, after: int | None = None) -> list[Snapshot]:
    directory = io.join(manager.branch_root, paths.CHANGELOG_DIR)
    result = []
    for name in io.list_names(directory):
        if not _is_numbered(name, "changelog-"):
            continue
        if after is not None and int(name[len("changelog-") :]) <= after:
            continue
        try:
            result.append(manager.read_snapshot_file(io.join(directory, name)))
        except FileNotFoundError:
            continue
    return result


def _gone(io: FileIO, path: str) -> Callable[[], bool]:
    return lambda: not io.exists(path)


def _add_references(
    table: Table, used: UsedMetadata, snapshot: Snapshot, owner: str, vanished: Callable[[], bool]
) -> None:
    try:
        refs = snapshot_references(table, snapshot, owner=owner)
    except MissingMetadataError:
        if vanished():
            used.skipped_vanished += 1
            return
        raise
    used.names |= refs.all_file_names()
    for meta in (*refs.manifests, *refs.changelog_manifests):
        used.manifests.setdefault(meta.file_name, []).append(owner)


def collect_used_metadata(table: Table, used: UsedMetadata | None = None) -> UsedMetadata:
    """Fold every snapshot, tag and long-lived changelog of every branch into ``used``.

    Called again with the same ``used``, it only reads what appeared since (new snapshots, tags
    and changelogs), which is how execution re-checks a plan before each delete batch.
    """
    used = used or UsedMetadata()
    io = table.io
    for manager in _branch_managers(table):
        branch = manager.branch
        seen = used.latest_ids.get(branch)
        for snapshot in _snapshots_of(manager, used, after=seen):
            path = manager.snapshot_path(snapshot.id)
            _add_references(table, used, snapshot, f"{branch} snapshot {snapshot.id}", _gone(io, path))
            used.latest_ids[branch] = max(used.latest_ids.get(branch) or 0, snapshot.id)
        used.latest_ids.setdefault(branch, None)
        for name in manager.tag_names():
            key = f"{branch}:{name}"
            if key in used.tags:
                continue
            tag = manager.tag(name)
            _add_references(table, used, tag, f"{branch} tag {name}", lambda: False)
            used.tags[key] = tag.id
        for changelog in _changelogs_of(manager, io, after=used.changelogs.get(branch)):
            path = io.join(manager.branch_root, paths.CHANGELOG_DIR, f"changelog-{changelog.id}")
            _add_references(table, used, changelog, f"{branch} changelog {changelog.id}", _gone(io, path))
            used.changelogs[branch] = max(used.changelogs.get(branch) or 0, changelog.id)
    return used


def names_in_manifest(table: Table, name: str) -> set[str]:
    """Data, changelog and extra file names a manifest mentions (ADD and DELETE entries alike)."""
    return set(table.manifest_file_names(name))


def read_manifest_names(table: Table, used: UsedMetadata, manifests: list[str], progress: Progress) -> int:
    """Add the file names of ``manifests`` to ``used``; returns how many manifests were read."""
    progress.start("reading manifests for the used set", len(manifests))
    try:
        fetched = table.parallel_imap(lambda n: (n, _fetch_or_none(table, n)), manifests)
        from airflow_lakeformat.core.paimon import avro

        # Paused: each collection would walk the listing's million candidates (bench/README.md).
        with gc_paused():
            for name, data in fetched:
                if data is None:
                    owners = used.manifests.get(name, [])
                    if owners and all(_owner_vanished(table, owner) for owner in owners):
                        used.skipped_vanished += 1
                        progress.advance()
                        continue
                    raise MissingMetadataError(table.io.uri(table.manifest_path(name)), ", ".join(owners[:3]))
                used.names.update(avro.manifest_file_names(data, table.io.uri(table.manifest_path(name))))
                progress.advance()
        return len(manifests)
    finally:
        progress.finish()


def _fetch_or_none(table: Table, name: str) -> bytes | None:
    try:
        return table.io.read_bytes(table.manifest_path(name))
    except FileNotFoundError:
        return None


def _owner_vanished(table: Table, owner: str) -> bool:
    """Whether the snapshot/changelog named by ``owner`` ("<branch> snapshot <id>") no longer exists."""
    branch, kind, ident = owner.split(" ", 2)
    if kind == "tag":
        return False  # tags are never removed by expiry
    manager = SnapshotManager(table.io, table.root, branch)
    if kind == "snapshot":
        return not manager.snapshot_exists(int(ident))
    return not table.io.exists(table.io.join(manager.branch_root, paths.CHANGELOG_DIR, f"changelog-{ident}"))


@dataclass
class OrphanCleanupPlan:
    table_uri: str
    planned_at: float
    older_than: timedelta
    cutoff: float
    listing: Listing
    used: UsedMetadata
    manifests_read: set[str]
    orphans: list[DeleteRequest]
    empty_directories: list[str]

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        return tally(self.orphans)

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        files, sizes = self.counts()
        out: dict[str, Any] = {
            "table": self.table_uri,
            "olderThanSeconds": self.older_than.total_seconds(),
            "cutoff": self.cutoff,
            "filesListed": self.listing.files_listed,
            "directoriesListed": self.listing.directories_listed,
            "candidates": len(self.listing.candidates),
            "tooRecent": self.listing.too_recent,
            "withoutModificationTime": self.listing.no_mtime,
            "usedNames": len(self.used.names),
            "manifestsRead": len(self.manifests_read),
            "snapshotsSeen": self.used.latest_ids,
            "tags": len(self.used.tags),
            "orphans": len(self.orphans),
            "files": files,
            "bytes": sizes,
            "emptyDirectories": len(self.empty_directories),
        }
        if include_files:
            out["paths"] = [r.path for r in self.orphans]
        return out


@dataclass
class OrphanCleanupResult:
    plan: OrphanCleanupPlan
    report: DeletionReport
    directories: DeletionReport
    duration_seconds: float

    def summary(self) -> str:
        """One line: what was listed, found orphaned and (or would be) deleted."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "remove-orphan-files",
            "format": "paimon",
            "table": self.plan.table_uri,
            "dryRun": self.report.dry_run,
            "olderThanSeconds": self.plan.older_than.total_seconds(),
            "filesListed": self.plan.listing.files_listed,
            "candidates": len(self.plan.listing.candidates),
            "orphans": len(self.plan.orphans),
            "files": dict(sorted(self.report.files.items())),
            "bytes": dict(sorted(self.report.bytes.items())),
            "bytesFreed": self.report.total_bytes,
            "keptByRecheck": self.report.skipped_by_guard,
            "alreadyMissing": self.report.already_missing,
            "failed": [f.path for f in self.report.failed],
            "directoriesRemoved": self.directories.files.get("directory", 0),
            "manifestsRead": len(self.plan.manifests_read),
            "durationSeconds": round(self.duration_seconds, 3),
        }


def check_older_than(location: str, older_than: timedelta, allow_short: bool) -> None:
    if older_than < timedelta(0):
        raise MaintenanceRefusedError(location, "older_than must not be negative (files from the future)")
    if older_than < MINIMUM_OLDER_THAN and not allow_short:
        raise MaintenanceRefusedError(
            location,
            f"older_than {older_than} is under {MINIMUM_OLDER_THAN}: files of running writers could be "
            "deleted; pass the explicit override (allow_short_older_than / --allow-short-older-than) if "
            "no writer is running",
        )


_KIND_OF_LOCATION = {
    "manifest": "manifest",
    "index": "index-file",
    "statistics": "statistics",
    "data": "data-file",
    "snapshot-dir": "stale-temp-file",
    "changelog-dir": "stale-temp-file",
}


def classify(candidates: Iterable[Candidate], used_names: set[str]) -> list[DeleteRequest]:
    """The anti-join: candidates whose file name no snapshot, tag or changelog uses."""
    return [
        DeleteRequest(_KIND_OF_LOCATION[c.kind], c.path, c.size)
        for c in candidates
        if c.name not in used_names
    ]


def plan_orphan_cleanup(
    table: Table,
    *,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    allow_short_older_than: bool = False,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    on_phase: Callable[[str], None] | None = None,
) -> OrphanCleanupPlan:
    """List candidates, then collect the used set, then classify. Deletes nothing.

    ``on_phase`` is called with ``"listed"`` between the two steps (tests use it to commit
    concurrently at the most dangerous moment).
    """
    check_older_than(table.uri, older_than, allow_short_older_than)
    now = clock()
    cutoff = now - older_than.total_seconds()
    directories, tree_dirs = candidate_directories(table)
    progress.start("listing candidate directories", len(directories))
    parts = []
    for part in table.parallel_imap(lambda d: list_candidates(table.io, d, cutoff), directories):
        parts.append(part)
        progress.advance()
    progress.finish()
    listing = _merge_listings(parts)
    empty = old_empty_directories(table, tree_dirs, cutoff)
    if on_phase:
        on_phase("listed")
    used = collect_used_metadata(table)
    manifests = sorted(used.manifests)
    read_manifest_names(table, used, manifests, progress)
    if on_phase:
        on_phase("collected")
    return OrphanCleanupPlan(
        table_uri=table.uri,
        planned_at=now,
        older_than=older_than,
        cutoff=cutoff,
        listing=listing,
        used=used,
        manifests_read=set(manifests),
        orphans=classify(listing.candidates, used.names),
        empty_directories=empty,
    )


def old_empty_directories(table: Table, tree_dirs: list[str], cutoff: float) -> list[str]:
    """Bucket and partition directories that hold nothing and were last changed before ``cutoff``."""
    if not table.io.is_local:
        return []
    import os

    empty = []
    for directory in tree_dirs:
        try:
            if not os.listdir(directory) and os.stat(directory).st_mtime < cutoff:
                empty.append(directory)
        except FileNotFoundError:
            continue
    return empty


def refresh_used(table: Table, plan: OrphanCleanupPlan) -> set[str]:
    """Fold snapshots, tags and changelogs committed since planning into the plan's used set."""
    before = set(plan.used.manifests)
    collect_used_metadata(table, plan.used)
    new = sorted(set(plan.used.manifests) - before - plan.manifests_read)
    if new:
        read_manifest_names(table, plan.used, new, NO_PROGRESS)
        plan.manifests_read.update(new)
    return plan.used.names


def execute_orphan_cleanup(
    table: Table,
    plan: OrphanCleanupPlan,
    *,
    dry_run: bool = True,
    deleter: FileDeleter | None = None,
    progress: Progress = NO_PROGRESS,
) -> OrphanCleanupResult:
    """Delete the plan's orphans, re-checking each batch against the table's current metadata."""
    started = time.monotonic()
    deleter = deleter or FileDeleter(table.io, dry_run=dry_run, progress=progress)
    if deleter.dry_run != dry_run:
        raise ValueError("the deleter's dry_run does not match the call's")

    def still_orphaned(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        used = refresh_used(table, plan)
        return [r for r in batch if posixpath.basename(r.path) not in used]

    report = deleter.delete(
        plan.orphans, task="deleting orphan files", total=len(plan.orphans), before_batch=still_orphaned
    )
    if report.failed:
        raise DeletionFailedError(
            f"{table.uri}: {len(report.failed)} orphan file(s) could not be deleted "
            f"(first: {report.failed[0].path}: {report.failed[0].error})",
            report,
        )
    directories = deleter.remove_empty_directories(plan.empty_directories)
    return OrphanCleanupResult(plan, report, directories, time.monotonic() - started)


def remove_orphan_files(
    table: Table,
    *,
    dry_run: bool = True,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    allow_short_older_than: bool = False,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    deleter: FileDeleter | None = None,
) -> OrphanCleanupResult:
    """Plan and execute in one call (dry run unless told otherwise)."""
    started = time.monotonic()
    plan = plan_orphan_cleanup(
        table,
        older_than=older_than,
        allow_short_older_than=allow_short_older_than,
        clock=clock,
        progress=progress,
    )
    result = execute_orphan_cleanup(table, plan, dry_run=dry_run, deleter=deleter, progress=progress)
    result.duration_seconds = time.monotonic() - started
    return result
