"""The ``remove_orphan_files`` Spark job on Paimon tables: listing, used set and deletes on executors.

The same safety rules as the in-process operation
(:func:`~airflow_lakeformat.core.paimon.maintenance.orphans.remove_orphan_files`), built from its blocks; the job
(``spark/jobs/remove_orphan_files.py``) opened the table through the facade and resolved ``--older-than``
(``table.maintenance.orphan_older_than``: 1 day when not given):

1. The driver refuses a short ``--older-than`` and finds the directories to list (it walks the
   partition levels); executors list the bucket, manifest, index, statistics, snapshot and changelog
   directories. The listing is persisted and counted before anything else happens: the used set
   must be collected *after* the listing (paimon#3074), and a listing recomputed later is covered
   by step 4.
2. The driver collects the used metadata of every snapshot, tag and changelog of every branch.
3. Executors read the manifests for the data and extra file names straight into the anti-join: the
   candidates, the used names and the metadata names are shuffled on file name together, and each
   partition keeps the candidates no used name matches. A missing manifest comes back as a mark;
   the driver applies the core's rule (abort, unless every snapshot that referenced it vanished
   meanwhile) before anything is deleted. The orphans are persisted and counted.
4. The driver folds snapshots, tags and changelogs committed since into the used set and broadcasts
   the state; each executor re-checks every delete batch against the table again, as the driver-side
   operation does, then deletes its share with the core's :class:`FileDeleter` (dry run honoured).
5. Failed deletes fail the job (exit 10) before the driver removes old, empty bucket and partition
   directories (local filesystems only).

The result is the driver-side ``OrphanCleanupResult`` JSON plus ``"job"`` and ``"mode": "spark"``.
"""

from __future__ import annotations

import copy
import posixpath
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import DeletionFailedError, MissingMetadataError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter
from airflow_lakeformat.core.paimon.maintenance.orphans import (
    DEFAULT_SAMPLE_LIMIT,
    Candidate,
    CandidateDirectory,
    Listing,
    OrphanCleanupPlan,
    OrphanCleanupResult,
    UsedMetadata,
    candidate_directories,
    check_older_than,
    classify,
    collect_used_metadata,
    list_candidates,
    names_in_manifest,
    old_empty_directories,
    read_manifest_names,
    refresh_used,
)
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS
from airflow_lakeformat.spark.deleting import chain_guards, fail_after_deletes, merge_reports, task_deleter
from airflow_lakeformat.spark.runtime import JobContext

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import PaimonTable

# Directory listings and manifest fetches are IO-bound: a few threads per task keep an object store busy.
_TASK_IO_THREADS = 8

# (filesListed, tooRecent, withoutModificationTime, directoriesListed, candidates) of one directory
ListingCounts = tuple[int, int, int, int, int]
# What travels through the shuffle, keyed by file name: a candidate (its directory's index, its path
# unless that is <directory>/<name>, its size), a used name (None), or a missing manifest (MISSING).
Row = tuple[str, tuple[int, str | None, int] | str | None]
MISSING = "missing"


# -- executors -----------------------------------------------------------------------------------


def list_directories(
    uri: str, options: dict[str, Any], cutoff: float, directories: Iterator[tuple[int, CandidateDirectory]]
) -> Iterator[tuple[ListingCounts, list[Row]]]:
    """Executor body: list each directory; one (counts, candidate rows) per directory."""
    io, _ = FileIO.for_uri(uri, options)
    batch = list(directories)

    def listed(item: tuple[int, CandidateDirectory]) -> tuple[ListingCounts, list[Row]]:
        index, directory = item
        listing = list_candidates(io, directory, cutoff)
        counts = (
            listing.files_listed,
            listing.too_recent,
            listing.no_mtime,
            listing.directories_listed,
            len(listing.candidates),
        )
        # The path is sent only when it is not simply <directory>/<name>: less to shuffle.
        rows: list[Row] = [
            (c.name, (index, None if c.path == posixpath.join(directory.path, c.name) else c.path, c.size))
            for c in listing.candidates
        ]
        return counts, rows

    with ThreadPoolExecutor(max_workers=max(1, min(_TASK_IO_THREADS, len(batch)))) as pool:
        yield from pool.map(listed, batch)


def read_used_names(
    uri: str, options: dict[str, Any], manifests: Iterator[tuple[str, int | None]]
) -> Iterator[Row]:
    """Executor body: (file name, None) for every name the manifests mention, (manifest, MISSING) if absent.

    ``manifests`` are (name, the manifest list's size for it): a manifest of another size is
    CorruptMetadataError, failing the job (a truncated manifest would hide live files).
    """
    table = Table.open(uri, options, read_parallelism=_TASK_IO_THREADS)

    def names_or_none(item: tuple[str, int | None]) -> tuple[str, set[str] | None]:
        name, size = item
        try:
            return name, names_in_manifest(table, name, size)
        except MissingMetadataError:
            return name, None  # the driver decides: vanished owners, or abort

    names: set[str] = set()
    for manifest, found in table.parallel_imap(names_or_none, list(manifests)):
        if found is None:
            yield manifest, MISSING
        else:
            names |= found
    for name in names:
        yield name, None


def anti_join(rows: Iterator[Row]) -> Iterator[Row]:
    """Executor body after the shuffle on file name: the candidates no used name matches, and the
    missing-manifest marks (first), for the driver to decide on."""
    used: set[str] = set()
    candidates: list[Row] = []
    for name, value in rows:
        if value is None:
            used.add(name)
        elif value == MISSING:
            yield name, value
        else:
            candidates.append((name, value))
    for name, value in candidates:
        if name not in used:
            yield name, value


def _recheck_plan(uri: str, used: UsedMetadata, manifests_read: set[str]) -> OrphanCleanupPlan:
    """A plan that carries only what :func:`refresh_used` reads and updates."""
    return OrphanCleanupPlan(
        table_uri=uri,
        planned_at=0.0,
        older_than=timedelta(0),
        cutoff=0.0,
        listing=Listing(),
        used=used,
        manifests_read=manifests_read,
        orphans=[],
        empty_directories=[],
    )


def orphan_candidates(
    directories: list[CandidateDirectory], manifest_dir: str, decided: frozenset[str], rows: Iterable[Row]
) -> Iterator[Candidate]:
    """The anti-join's rows as candidates again. A missing-manifest mark the driver did not decide on
    (a partition recomputed after a lost executor, the manifest gone since) aborts: its names are unknown."""
    for name, value in rows:
        if value is None or isinstance(value, str):
            if name not in decided:
                raise MissingMetadataError(posixpath.join(manifest_dir, name), "a snapshot (read again)")
            continue
        index, path, size = value
        directory = directories[index]
        yield Candidate(name, path or posixpath.join(directory.path, name), size, directory.kind)


def delete_orphans(
    uri: str,
    options: dict[str, Any],
    dry_run: bool,
    fail_after: int,
    recheck: Any,
    rows: Iterator[Row],
) -> Iterator[dict[str, Any]]:
    """Executor body: delete this task's orphans in batches, re-checking each batch; yields the report."""
    table = Table.open(uri, options)
    directories, decided, used, manifests_read = copy.deepcopy(recheck.value)  # never shared between tasks
    plan = _recheck_plan(uri, used, manifests_read)

    def still_orphaned(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        current = refresh_used(table, plan)
        return [r for r in batch if posixpath.basename(r.path) not in current]

    manifest_dir = table.io.uri(table.manifest_dir)
    requests = classify(orphan_candidates(directories, manifest_dir, decided, rows), set())
    deleter, fault = task_deleter(table.io, dry_run, fail_after)
    # The re-check first: a batch the table still uses is never sent, and never counts as deleted.
    guard = chain_guards(still_orphaned, fault)
    report = deleter.delete(requests, task="deleting orphan files", total=len(requests), before_batch=guard)
    yield report.to_json()


# -- the driver ----------------------------------------------------------------------------------


def _orphan_path(directories: list[CandidateDirectory], row: Row) -> str:
    """An orphan row's path (sent only when it is not ``<directory>/<name>``)."""
    name, value = row
    assert isinstance(value, tuple)
    index, path, _ = value
    return path or posixpath.join(directories[index].path, name)


def _sample(orphans: Any, directories: list[CandidateDirectory]) -> list[str]:
    """The first orphan paths by name, for the result's ``orphanPaths`` (the orphans stay on executors)."""
    rows = orphans.filter(lambda row: row[1] != MISSING)
    return sorted(rows.map(partial(_orphan_path, directories)).takeOrdered(DEFAULT_SAMPLE_LIMIT))


def _sum_counts(a: ListingCounts, b: ListingCounts) -> ListingCounts:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


@dataclass
class _Listed:
    """Step 1's outcome: the directories, the persisted listing (an RDD) and its counts."""

    directories: list[CandidateDirectory]
    rdd: Any
    counts: ListingCounts
    empty: list[str]


def _list(context: JobContext, table: Table, cutoff: float) -> _Listed:
    """1. List first, and finish listing (persisted, counted) before the used set is read."""
    from pyspark import StorageLevel

    uri, options = context.args.table, context.executor_options
    directories, tree_dirs = candidate_directories(table)
    rdd = (
        context.spark.sparkContext.parallelize(
            list(enumerate(directories)), context.parallelism(len(directories), per_core=4)
        )
        .mapPartitions(partial(list_directories, uri, options, cutoff))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    counts = rdd.map(lambda d: d[0]).fold((0, 0, 0, 0, 0), _sum_counts)
    return _Listed(directories, rdd, counts, old_empty_directories(table, tree_dirs, cutoff))


def _anti_join(
    context: JobContext, table: Table, listed: _Listed, used: UsedMetadata
) -> tuple[Any, int, list[str], set[str]]:
    """2.-3. The used names read by executors, straight into one shuffle on file name with the candidates;
    (the orphans RDD, their count, the missing manifests, the manifests read) after the core's
    missing-manifest rule."""
    from pyspark import StorageLevel

    uri, options = context.args.table, context.executor_options
    sc = context.spark.sparkContext
    manifests = sorted(used.manifests)
    sized = [(name, used.manifest_sizes.get(name)) for name in manifests]
    used_rows = sc.parallelize(sized, context.parallelism(len(manifests), per_core=4)).mapPartitions(
        partial(read_used_names, uri, options)
    )
    metadata_rows = sc.parallelize([(name, None) for name in used.names], 1)
    orphans = (
        listed.rdd.flatMap(lambda d: d[1])
        .union(used_rows)
        .union(metadata_rows)
        .partitionBy(context.parallelism(max(1, listed.counts[4]), per_core=2))
        .mapPartitions(anti_join)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    rows = orphans.count()
    missing = sorted(orphans.filter(lambda row: row[1] == MISSING).keys().collect())
    if missing:
        # The core's rule, on the core's code: skipped if every owner vanished, else MissingMetadataError.
        read_manifest_names(table, used, missing, NO_PROGRESS)
    return orphans, rows - len(missing), missing, set(manifests)


def _plan(
    table: Table,
    now: float,
    older_than: timedelta,
    cutoff: float,
    listed: _Listed,
    used: UsedMetadata,
    manifests_read: set[str],
) -> OrphanCleanupPlan:
    files_listed, too_recent, no_mtime, directories_listed, _ = listed.counts
    return OrphanCleanupPlan(
        table_uri=table.uri,
        planned_at=now,
        older_than=older_than,
        cutoff=cutoff,
        listing=Listing(
            files_listed=files_listed,
            too_recent=too_recent,
            no_mtime=no_mtime,
            directories_listed=directories_listed,
            empty_directories=listed.empty,
        ),
        used=used,
        manifests_read=manifests_read,
        orphans=[],
        empty_directories=listed.empty,
    )


def _delete(
    context: JobContext,
    table: Table,
    plan: OrphanCleanupPlan,
    listed: _Listed,
    orphans: Any,
    count: int,
    missing: list[str],
) -> DeletionReport:
    """4. Fold in what was committed since, and let every executor re-check each batch again."""
    args, used = context.args, plan.used
    before = set(used.names)
    refresh_used(table, plan)
    # Executors need the names that appeared after the anti-join, and the state to read only what is new.
    state = UsedMetadata(
        names=used.names - before,
        manifests=used.manifests,
        manifest_sizes=used.manifest_sizes,
        latest_ids=used.latest_ids,
        tags=used.tags,
        changelogs=used.changelogs,
    )
    recheck = context.spark.sparkContext.broadcast(
        (listed.directories, frozenset(missing), state, plan.manifests_read)
    )
    body = partial(
        delete_orphans, args.table, context.executor_options, args.dry_run, fail_after_deletes(), recheck
    )
    reports = orphans.mapPartitions(body).collect() if count else []
    return merge_reports(args.dry_run, reports)


def run(context: JobContext, lake_table: PaimonTable) -> dict[str, Any]:
    """The job on a Paimon table (the module docstring); ``--older-than`` is resolved already."""
    args, table = context.args, lake_table.native
    check_older_than(table.uri, args.older_than, args.allow_short_older_than)
    now = time.time()
    cutoff = now - args.older_than.total_seconds()
    listed = _list(context, table, cutoff)
    used = collect_used_metadata(table)
    orphans, orphan_count, missing, manifests_read = _anti_join(context, table, listed, used)
    plan = _plan(table, now, args.older_than, cutoff, listed, used, manifests_read)
    report = _delete(context, table, plan, listed, orphans, orphan_count, missing)
    # 5. Directories only after every file went.
    if report.failed:
        raise DeletionFailedError(
            f"{table.uri}: {len(report.failed)} orphan file(s) could not be deleted "
            f"(first: {report.failed[0].path}: {report.failed[0].error})",
            report,
        )
    directories_report = FileDeleter(table.io, dry_run=args.dry_run).remove_empty_directories(listed.empty)
    document = OrphanCleanupResult(plan, report, directories_report, 0.0).to_json()
    # The plan holds counts, not the candidates and orphans themselves: those stayed on the executors.
    sample = _sample(orphans, listed.directories) if orphan_count else []
    document.update(
        candidates=listed.counts[4],
        orphans=orphan_count,
        orphanPaths=[table.io.uri(path) for path in sample],
        orphanPathsTruncated=orphan_count > len(sample),
    )
    return document
