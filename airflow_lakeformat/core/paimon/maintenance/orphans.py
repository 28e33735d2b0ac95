"""Orphan-file cleanup planned as a value, with the safety rules learned from other tools' bugs.

1. List candidates first (paimon#3074: a used set computed before the listing missed a commit made
   in between). Candidates are files older than ``older_than`` (default 1 day; under 1 hour refused
   without an explicit override) in ``manifest/``, ``index/``, ``statistics/``, the data tree
   (exactly one directory level per partition key, then ``bucket-*``), external data paths, and
   stray files (crashed temp files) in every branch's ``snapshot/`` and ``changelog/`` directories
   (:mod:`~airflow_lakeformat.core.paimon.maintenance.orphan_listing`). On a local filesystem the
   listing reads names only; the age of a file is read after step 2, and only for the files no
   snapshot uses (an age matters for nothing else).
2. Then collect the used set by *file name* (so path spellings cannot make live files look orphaned)
   from every snapshot, tag and long-lived changelog of every branch: manifest lists, manifests and
   their extra files, index manifests and index files, statistics files, and every ADD and DELETE
   entry's file and extra files. Metadata that cannot be read aborts with nothing deleted, unless the
   snapshot that referenced it has itself disappeared meanwhile (a concurrent expiry, paimon#7715).
   Each manifest list, index manifest and manifest is read once, and the blocks the snapshots'
   manifest lists share are decoded once (:class:`~airflow_lakeformat.core.paimon.maintenance.
   references.MetadataReader`), so many snapshots cost their distinct rows, not snapshots x rows.
   Data-file names are never collected into a set: the candidates' names are, and every manifest's
   names are struck from it as it is read, so what remains are the names nobody uses.
3. Right before each delete batch, new snapshots, tags and changelogs are folded into the used set
   and the batch is filtered again (against the names they use: the orphans are, by construction,
   in nothing used before).
4. Directories are never deleted, except old, empty bucket and partition directories (rmdir only).
5. Audit trail: the result lists the orphans' URIs (up to ``sample_limit``, plus the count); ``report``
   writes one JSON line per orphan, the lines Iceberg's cleanup writes
   (:mod:`~airflow_lakeformat.core.maintenance.orphan_report`): path, kind, size, last modification (local
   files; null on object stores, whose listing ages are not kept), what happened and why.

The building blocks (:func:`candidate_directories`, :func:`list_candidates`,
:func:`collect_used_metadata`, :func:`names_in_manifest`) are what the Spark job distributes.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.errors import (
    DeletionFailedError,
    MaintenanceRefusedError,
    MissingMetadataError,
    SnapshotNotFoundError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter, tally
from airflow_lakeformat.core.maintenance.orphan_age import PAIMON_ORPHAN_AGE
from airflow_lakeformat.core.maintenance.orphan_report import report_rows, write_orphan_report
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon import avro, paths
from airflow_lakeformat.core.paimon.maintenance.orphan_listing import (
    Candidate,
    CandidateDirectory,  # noqa: F401  (re-exported for the Spark job)
    Listing,
    branch_managers,
    candidate_directories,
    is_numbered,
    list_candidates,
    list_names,
    merge_listings,
    old_empty_directories,
    read_ages,
)
from airflow_lakeformat.core.paimon.maintenance.references import MetadataReader
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import SnapshotManager
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

# Candidate, CandidateDirectory, Listing, candidate_directories, list_candidates and
# old_empty_directories are imported from here by the Spark job: every block in one place.

Clock = Callable[[], float]

DEFAULT_OLDER_THAN = PAIMON_ORPHAN_AGE.default  # the values live in core/maintenance/orphan_age.py
MINIMUM_OLDER_THAN = PAIMON_ORPHAN_AGE.minimum


@dataclass
class UsedMetadata:
    """The used set's metadata part, and which manifests remain to be read for data-file names."""

    names: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)  # data and changelog manifests to read names from
    manifest_sizes: dict[str, int | None] = field(default_factory=dict)  # manifest -> its list's _FILE_SIZE
    owners: dict[str, tuple[str, ...]] = field(default_factory=dict)  # owner -> its manifest lists
    latest_ids: dict[str, int | None] = field(default_factory=dict)  # branch -> latest snapshot seen
    tags: dict[str, int] = field(default_factory=dict)  # "branch:tag" -> snapshot id
    changelogs: dict[str, int | None] = field(default_factory=dict)  # branch -> latest changelog seen
    skipped_vanished: int = 0


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
        if not is_numbered(name, "changelog-"):
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
    reader: MetadataReader,
    used: UsedMetadata,
    snapshot: Snapshot,
    owner: str,
    vanished: Callable[[], bool],
    seen_blocks: set[int],
) -> None:
    """Fold one snapshot's (tag's, changelog's) metadata into ``used``: the same names as
    ``snapshot_references(...).all_file_names()``, each shared manifest-list block only once."""
    lists = [n for n in (snapshot.base_manifest_list, snapshot.delta_manifest_list) if n]
    if snapshot.changelog_manifest_list:
        lists.append(snapshot.changelog_manifest_list)
    try:
        blocks = [reader.list_blocks(name, owner) for name in lists]
        index_files = reader.index_files(snapshot.index_manifest, owner) if snapshot.index_manifest else []
    except MissingMetadataError:
        if vanished():
            used.skipped_vanished += 1
            return
        raise
    used.owners[owner] = tuple(lists)
    names = used.names
    names.update(lists)
    if snapshot.index_manifest:
        names.add(snapshot.index_manifest)
        names.update(ref.file_name for ref in index_files)
    if snapshot.statistics:
        names.add(snapshot.statistics)
    new_rows = reader.lists.new_rows
    for ids in blocks:
        for block_id in ids:
            if block_id in seen_blocks:
                continue
            rows = new_rows(block_id, seen_blocks)
            seen_blocks.add(block_id)
            for ref in rows:
                used.manifests.add(ref.file_name)
                used.manifest_sizes[ref.file_name] = ref.file_size
                names.add(ref.file_name)
                names.update(ref.extra_files)


def collect_used_metadata(
    table: Table, used: UsedMetadata | None = None, reader: MetadataReader | None = None
) -> UsedMetadata:
    """Fold every snapshot, tag and long-lived changelog of every branch into ``used``.

    Called again with the same ``used``, it only reads what appeared since (new snapshots, tags
    and changelogs), which is how execution re-checks a plan before each delete batch.
    """
    used = used or UsedMetadata()
    reader = reader or MetadataReader(table)
    seen_blocks: set[int] = set()
    io = table.io
    for manager in branch_managers(table):
        branch = manager.branch
        seen = used.latest_ids.get(branch)
        for snapshot in _snapshots_of(manager, used, after=seen):
            path = manager.snapshot_path(snapshot.id)
            owner = f"{branch} snapshot {snapshot.id}"
            _add_references(reader, used, snapshot, owner, _gone(io, path), seen_blocks)
            used.latest_ids[branch] = max(used.latest_ids.get(branch) or 0, snapshot.id)
        used.latest_ids.setdefault(branch, None)
        for name in manager.tag_names():
            key = f"{branch}:{name}"
            if key in used.tags:
                continue
            tag = manager.tag(name)
            _add_references(reader, used, tag, f"{branch} tag {name}", lambda: False, seen_blocks)
            used.tags[key] = tag.id
        for changelog in _changelogs_of(manager, io, after=used.changelogs.get(branch)):
            path = io.join(manager.branch_root, paths.CHANGELOG_DIR, f"changelog-{changelog.id}")
            owner = f"{branch} changelog {changelog.id}"
            _add_references(reader, used, changelog, owner, _gone(io, path), seen_blocks)
            used.changelogs[branch] = max(used.changelogs.get(branch) or 0, changelog.id)
    return used


def names_in_manifest(table: Table, name: str, expected_size: int | None = None) -> set[str]:
    """Data, changelog and extra file names a manifest mentions (ADD and DELETE entries alike); a
    manifest whose size is not its list's ``expected_size`` is CorruptMetadataError (truncated)."""
    return set(table.manifest_file_names(name, expected_size=expected_size))


def manifest_name_lists(
    table: Table, used: UsedMetadata, manifests: list[str], progress: Progress
) -> Iterator[list[str]]:
    """The file names of each of ``manifests``, in order, applying the missing-manifest rule.

    Bytes are fetched on ``read_parallelism`` threads from object stores and in order from a local
    disk (where threads only contend for the GIL); names are decoded in the calling thread.
    """
    progress.start("reading manifests for the used set", len(manifests))
    try:
        if table.io.is_local:
            fetched: Iterable[tuple[str, bytes | None]] = ((n, _fetch_or_none(table, n)) for n in manifests)
        else:
            fetched = table.parallel_imap(lambda n: (n, _fetch_or_none(table, n)), manifests)
        from airflow_lakeformat.core.paimon import manifest_scan

        # Paused: each collection would walk the listing's candidates (bench/README.md).
        with gc_paused():
            for name, data in fetched:
                if data is None:
                    owners = _owners_of(table, used, name)
                    if owners and all(_owner_vanished(table, owner) for owner in owners):
                        used.skipped_vanished += 1
                        progress.advance()
                        continue
                    raise MissingMetadataError(table.io.uri(table.manifest_path(name)), ", ".join(owners[:3]))
                uri = table.io.uri(table.manifest_path(name))
                avro.check_manifest_size(data, uri, used.manifest_sizes.get(name))
                yield manifest_scan.manifest_file_names(data, uri)
                progress.advance()
    finally:
        progress.finish()


def read_manifest_names(table: Table, used: UsedMetadata, manifests: list[str], progress: Progress) -> int:
    """Add the file names of ``manifests`` to ``used``; returns how many manifests were read."""
    for names in manifest_name_lists(table, used, manifests, progress):
        used.names.update(names)
    return len(manifests)


def _fetch_or_none(table: Table, name: str) -> bytes | None:
    try:
        return table.io.read_bytes(table.manifest_path(name))
    except FileNotFoundError:
        return None


def _owners_of(table: Table, used: UsedMetadata, manifest: str) -> list[str]:
    """Owners (snapshots, tags, changelogs) whose manifest lists name ``manifest``; an owner whose
    lists cannot be read any more counts too (whether it vanished decides)."""
    reader = MetadataReader(table)
    owners = []
    for owner, lists in used.owners.items():
        try:
            if any(ref.file_name == manifest for name in lists for ref in reader.manifest_list(name, owner)):
                owners.append(owner)
        except MissingMetadataError:
            owners.append(owner)
    return owners


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
    candidates_in_use: int = 0

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
            "candidates": self.listing.candidate_count,
            "agesRead": "all files" if self.listing.ages_read else "unused files",
            "tooRecent": self.listing.too_recent,
            "withoutModificationTime": self.listing.no_mtime,
            "usedMetadataNames": len(self.used.names),
            "candidatesInUse": self.candidates_in_use,
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


#: How many orphan URIs a result document lists (``orphanPaths``; the report file has them all).
DEFAULT_SAMPLE_LIMIT = 1000
_REASON = "no snapshot, tag or changelog of any branch uses its name"


@short_repr
@dataclass
class OrphanCleanupResult:
    plan: OrphanCleanupPlan
    report: DeletionReport
    directories: DeletionReport
    duration_seconds: float
    report_path: str | None = None
    sample_limit: int = DEFAULT_SAMPLE_LIMIT
    uri_of: Callable[[str], str] = str

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
            "candidates": self.plan.listing.candidate_count,
            "tooRecent": self.plan.listing.too_recent,
            "orphans": len(self.plan.orphans),
            "orphanPaths": [self.uri_of(r.path) for r in self.plan.orphans[: max(0, self.sample_limit)]],
            "orphanPathsTruncated": len(self.plan.orphans) > max(0, self.sample_limit),
            "files": dict(sorted(self.report.files.items())),
            "bytes": dict(sorted(self.report.bytes.items())),
            "bytesFreed": 0 if self.report.dry_run else self.report.total_bytes,  # Iceberg's rule
            "keptByRecheck": self.report.skipped_by_guard,
            "alreadyMissing": self.report.already_missing,
            "failed": [f.path for f in self.report.failed],
            "directoriesRemoved": self.directories.files.get("directory", 0),
            "manifestsRead": len(self.plan.manifests_read),
            "report": self.report_path,
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
    concurrently at the most dangerous moment) and ``"collected"`` after the second.
    """
    check_older_than(table.uri, older_than, allow_short_older_than)
    now = clock()
    cutoff = now - older_than.total_seconds()
    directories, tree_dirs = candidate_directories(table)
    progress.start("listing candidate directories", len(directories))
    if table.io.is_local:
        # One thread: the per-file work holds the GIL, threads only convoy (bench/README.md).
        listing = list_names(table.io, directories, cutoff)
        progress.advance(len(directories))
    else:
        parts = []
        for part in table.parallel_imap(lambda d: list_candidates(table.io, d, cutoff), directories):
            parts.append(part)
            progress.advance()
        listing = merge_listings(parts)
    progress.finish()
    empty = old_empty_directories(table, tree_dirs, cutoff)
    if on_phase:
        on_phase("listed")
    # The candidates' names no snapshot is known to use yet; every name read strikes one out.
    unclaimed = set(listing.names)
    used = collect_used_metadata(table)
    unclaimed.difference_update(used.names)
    manifests = sorted(used.manifests)
    for names in manifest_name_lists(table, used, manifests, progress):
        unclaimed.difference_update(names)
    if on_phase:
        on_phase("collected")
    unused = [i for i, name in enumerate(listing.names) if name in unclaimed]
    orphans = [
        DeleteRequest(
            _KIND_OF_LOCATION[listing.directories[listing.where[i]].kind], listing.path(i), listing.sizes[i]
        )
        for i in read_ages(listing, unused, cutoff)
    ]
    return OrphanCleanupPlan(
        table_uri=table.uri,
        planned_at=now,
        older_than=older_than,
        cutoff=cutoff,
        listing=listing,
        used=used,
        manifests_read=set(manifests),
        orphans=orphans,
        empty_directories=empty,
        candidates_in_use=len(listing.names) - len(unused),
    )


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
    report: str | None = None,
) -> OrphanCleanupResult:
    """Delete the plan's orphans, re-checking each batch against the table's current metadata.

    Args:
        table: the table the plan was made for.
        plan: from :func:`plan_orphan_cleanup`.
        dry_run: go through the batches and re-checks, delete nothing (default).
        deleter: the deleter to use (default: the table's FileIO, batches of 1,000).
        progress: progress reporter.
        report: write one JSON line per orphan here (local path or fsspec URL), as Iceberg's cleanup does:
            path, kind, size, lastModified, action (``deleted``, ``would-delete``, ``kept``, ``failed``,
            ``submitted``, ``not-attempted``), reason. Written even when the run stops.

    Example:
        >>> execute_orphan_cleanup(table, plan, report="/tmp/orphans.jsonl")  # doctest: +SKIP
    """
    started = time.monotonic()
    deleter = deleter or FileDeleter(table.io, dry_run=dry_run, progress=progress)
    if deleter.dry_run != dry_run:
        raise ValueError("the deleter's dry_run does not match the call's")
    kept: dict[str, str] = {}
    passed: list[str] = []

    def still_orphaned(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        used = refresh_used(table, plan)
        allowed = [r for r in batch if posixpath.basename(r.path) not in used]
        kept.update((r.path, _KEPT) for r in batch if posixpath.basename(r.path) in used)
        passed.extend(r.path for r in allowed)
        return allowed

    outcome: DeletionReport | None = None
    mtimes = _local_mtimes(table, plan) if report is not None else {}  # read before anything goes
    try:
        outcome = deleter.delete(
            plan.orphans, task="deleting orphan files", total=len(plan.orphans), before_batch=still_orphaned
        )
    finally:
        if report is not None:
            rows = report_rows(
                plan.orphans,
                uri_of=table.io.uri,
                mtimes=mtimes,
                cutoff=plan.cutoff,
                outcome=outcome,
                kept=kept,
                passed=passed,
                dry_run=dry_run,
                reason=_REASON,
            )
            write_orphan_report(report, rows)
    assert outcome is not None  # delete() returned
    if outcome.failed:
        raise DeletionFailedError(
            f"{table.uri}: {len(outcome.failed)} orphan file(s) could not be deleted "
            f"(first: {outcome.failed[0].path}: {outcome.failed[0].error})",
            outcome,
        )
    directories = deleter.remove_empty_directories(plan.empty_directories)
    return OrphanCleanupResult(
        plan, outcome, directories, time.monotonic() - started, report_path=report, uri_of=table.io.uri
    )


_KEPT = "became used after planning (a concurrent commit references it)"


def _local_mtimes(table: Table, plan: OrphanCleanupPlan) -> dict[str, float]:
    """The orphans' last-modified times for the report: local files only (object-store listing ages are
    not kept in the plan; the report says null there)."""
    mtimes: dict[str, float] = {}
    if table.io.is_local:
        for request in plan.orphans:
            with contextlib.suppress(OSError):  # gone since planning: its age is no longer known
                mtimes[request.path] = os.stat(request.path).st_mtime
    return mtimes


def remove_orphan_files(
    table: Table,
    *,
    dry_run: bool = True,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    allow_short_older_than: bool = False,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    deleter: FileDeleter | None = None,
    report: str | None = None,
) -> OrphanCleanupResult:
    """Plan and execute in one call (dry run unless told otherwise); ``report`` as for
    :func:`execute_orphan_cleanup`."""
    started = time.monotonic()
    plan = plan_orphan_cleanup(
        table,
        older_than=older_than,
        allow_short_older_than=allow_short_older_than,
        clock=clock,
        progress=progress,
    )
    result = execute_orphan_cleanup(
        table, plan, dry_run=dry_run, deleter=deleter, progress=progress, report=report
    )
    result.duration_seconds = time.monotonic() - started
    return result
