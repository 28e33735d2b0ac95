"""The ``remove_orphan_files`` Spark job on Iceberg tables: listing and deleting on executors, the plan on the driver.

Same job, same arguments as for Paimon tables (``--older-than``, ``--allow-short-older-than``, ``--dry-run``,
``--parallelism``; Iceberg also takes ``--equal-scheme``, ``--equal-authority``, ``--prefix-mismatch``), the
same rules as the in-process run (:mod:`airflow_lakeformat.core.iceberg.maintenance.orphans`, Java's
``DeleteOrphanFilesSparkAction``), built from the core's blocks:

1. The driver applies the core's opening checks (``orphan_plan.start_orphan_cleanup``: the ``older_than``
   floor, a real run on a read-only table, ``gc.enabled``, the listing roots), lists the first two
   directory levels of every root with a delimiter (``orphan_listing.expand``) and hands the subtrees to
   executors, which list them recursively (``orphan_listing.list_subtree``: the ``<root>/`` boundary,
   hidden paths, the age cutoff). The listing is persisted and counted before anything else.
2. Then the driver re-loads the table and reads the valid set (``orphan_valid.collect_valid``: every
   snapshot of every ref, metadata files, statistics) and broadcasts its normalised paths.
3. Executors join their candidates against it (normalised paths; a prefix mismatch comes back as a mark,
   and in ``error`` mode the driver aborts before anything is deleted). The orphans stay on the executors,
   persisted; the driver takes a sample and the count.
4. Each executor deletes its share with the core's ``FileDeleter``, re-loading the table before every batch
   and folding in only what is new since the driver's valid set (the driver broadcasts which snapshots,
   manifests and metadata files it already read), exactly the in-process re-check.

The job (``spark/jobs/remove_orphan_files.py``) opened the table through the facade and resolved
``--older-than`` (``table.maintenance.orphan_older_than``: 3 days when not given). The result is the
in-process ``IcebergOrphanResult`` JSON, plus ``"job"`` and ``"mode": "spark"``.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import DeletionFailedError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import (
    HiddenFilter,
    TreeListing,
    actual_uri,
    expand,
    list_subtree,
)
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import (
    DEFAULT_SAMPLE_LIMIT,
    OrphanStart,
    PrefixMismatchError,
    candidates_decision,
    check_gc_enabled,
    kind_of,
    plan_warnings,
    start_orphan_cleanup,
    start_plan,
)
from airflow_lakeformat.core.iceberg.maintenance.orphan_valid import (
    ValidSet,
    collect_valid,
    refresh_if_changed,
)
from airflow_lakeformat.core.iceberg.maintenance.orphans import IcebergOrphanResult
from airflow_lakeformat.core.iceberg.metadata.location import (
    LocationNormaliser,
    PrefixMismatch,
    ValidLocations,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport
from airflow_lakeformat.core.progress import NO_PROGRESS
from airflow_lakeformat.spark.deleting import chain_guards, fail_after_deletes, merge_reports, task_deleter
from airflow_lakeformat.spark.runtime import JobContext

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.tables import IcebergLakeTable

# (filesListed, hidden, tooRecent, withoutModificationTime, outsideBoundary) of one subtree
Counts = tuple[int, int, int, int, int]
# A candidate on its way through the join: (fsspec path, size, mtime)
CandidateRow = tuple[str, int, float]
_TASK_IO_THREADS = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The Iceberg-only flags of the job (Java's ``remove_orphan_files`` arguments)."""
    parser.add_argument("--equal-scheme", action="append", metavar="FROM=TO", help="Iceberg: equal schemes")
    parser.add_argument(
        "--equal-authority", action="append", metavar="FROM=TO", help="Iceberg: equal authorities"
    )
    parser.add_argument(
        "--prefix-mismatch", choices=("error", "ignore"), default="error", help="Iceberg: error or ignore"
    )


def _pairs(values: list[str] | None) -> dict[str, str]:
    pairs = {}
    for value in values or []:
        source, sep, target = value.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ValueError(f"{value!r} is not of the form FROM=TO")
        pairs[source.strip()] = target.strip()
    return pairs


def _counts(listing: TreeListing) -> Counts:
    return (
        listing.files_listed,
        listing.hidden,
        listing.too_recent,
        listing.no_mtime,
        listing.outside_boundary,
    )


def _sum(a: Counts, b: Counts) -> Counts:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


# -- executors -----------------------------------------------------------------------------------


def list_subtrees(
    uri: str,
    options: dict[str, Any],
    cutoff: float,
    partition_names: tuple[str, ...],
    tasks: Iterator[tuple[str, str]],
) -> Iterator[tuple[Counts, list[CandidateRow]]]:
    """Executor body: list each (root, subtree) recursively; one (counts, candidates) per subtree."""
    from concurrent.futures import ThreadPoolExecutor

    io, _ = FileIO.for_uri(uri, options)
    hidden = HiddenFilter(partition_names)
    batch = list(tasks)

    def listed(task: tuple[str, str]) -> tuple[Counts, list[CandidateRow]]:
        listing = list_subtree(io, task[0], task[1], cutoff, hidden)
        return _counts(listing), [(c.path, c.size, c.mtime) for c in listing.candidates]

    with ThreadPoolExecutor(max_workers=max(1, min(_TASK_IO_THREADS, len(batch)))) as pool:
        yield from pool.map(listed, batch)


def join_candidates(
    uri: str,
    options: dict[str, Any],
    valid: Any,
    metadata_dir: str,
    data_dirs: tuple[str, ...],
    rows: Iterator[CandidateRow],
) -> Iterator[tuple[str, Any]]:
    """Executor body: ("orphan", (kind, path, size, mtime)) or ("mismatch", (actual, valid)) per candidate."""
    io, _ = FileIO.for_uri(uri, options)
    locations: ValidLocations = valid.value
    for path, size, mtime in rows:
        uri_ = actual_uri(io, path)
        verdict = locations.classify(uri_)
        if verdict == "orphan":
            yield "orphan", (kind_of(path, metadata_dir, data_dirs), path, size, mtime)
        elif verdict == "mismatch":
            prefixes = locations.prefixes_of(uri_.path)
            scheme, authority = prefixes[0]
            spelled = f"{scheme}://{authority}{uri_.path}" if authority else f"{scheme}:{uri_.path}"
            yield "mismatch", (uri_.render(), spelled)


def delete_orphans(
    uri: str,
    options: dict[str, Any],
    dry_run: bool,
    fail_after: int,
    recheck: Any,
    rows: Iterator[tuple[str, Any]],
) -> Iterator[dict[str, Any]]:
    """Executor body: delete this task's orphans in batches, re-checking each against the re-loaded table."""
    table = open_path_table(uri, options)
    state = copy.deepcopy(recheck.value)  # never shared between tasks
    normaliser = LocationNormaliser(state["equal_schemes"], state["equal_authorities"])
    valid = ValidSet(table.io, normaliser, state["metadata_dir"])  # only what appears from now on
    valid.snapshots = set(state["snapshots"])
    valid.manifests = set(state["manifests"])
    valid.metadata_seen = set(state["metadata_seen"])
    mode = state["prefix_mismatch"]

    def still_orphaned(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        refresh_if_changed(table)
        check_gc_enabled(table)
        collect_valid(table, valid, NO_PROGRESS)
        allowed = []
        for request in batch:
            found = actual_uri(table.io, request.path)
            verdict = valid.locations.classify(found)
            if verdict == "mismatch" and mode == "error":
                raise PrefixMismatchError(
                    table.name, [PrefixMismatch(found.render(), valid.spelling(found.path))]
                )
            if verdict == "orphan":
                allowed.append(request)
        return allowed

    requests = [DeleteRequest(kind, path, size) for _, (kind, path, size, _mtime) in rows]
    deleter, fault = task_deleter(table.io, dry_run, fail_after)
    guard = chain_guards(still_orphaned, fault)
    report = deleter.delete(requests, task="deleting orphan files", total=len(requests), before_batch=guard)
    yield report.to_json()


# -- the driver ----------------------------------------------------------------------------------


def _list(
    context: JobContext, table: IcebergTable, start: OrphanStart
) -> tuple[Any, Counts, list[CandidateRow]]:
    """1. Two levels on the driver, the subtrees on executors; persisted and counted before the valid set."""
    from pyspark import StorageLevel

    metadata = table.metadata
    partition_names = tuple(sorted({f.name for spec in metadata.partition_specs for f in spec.fields}))
    head = TreeListing()
    tasks: list[tuple[str, str]] = []
    for root in start.roots:
        part, subtrees = expand(table.io, root.path, start.cutoff, start.hidden, 2, table.parallel_imap)
        head.merge(part)
        tasks.extend((root.path, subtree) for subtree in subtrees)
    body = partial(list_subtrees, context.args.table, context.executor_options, start.cutoff, partition_names)
    listed = (
        context.spark.sparkContext.parallelize(tasks, context.parallelism(max(1, len(tasks)), per_core=4))
        .mapPartitions(body)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    # (fold's zero value goes into every partition: the driver's own counts are added once, after)
    counts = _sum(_counts(head), listed.map(lambda item: item[0]).fold((0, 0, 0, 0, 0), _sum))
    return listed, counts, [(c.path, c.size, c.mtime) for c in head.candidates]


def _join(
    context: JobContext, table: IcebergTable, start: OrphanStart, listed: Any, head_rows: list[CandidateRow]
) -> tuple[ValidSet, Any, int, list[PrefixMismatch]]:
    """2.-3. The valid set from the table re-loaded after the listing, broadcast; the join on executors.
    (valid set, orphans RDD, candidate count, mismatches); ``error`` mode aborts on a mismatch."""
    from pyspark import StorageLevel

    refresh_if_changed(table)
    check_gc_enabled(table)
    valid = ValidSet(table.io, start.normaliser, start.metadata_dir)
    collect_valid(table, valid, NO_PROGRESS)
    sc = context.spark.sparkContext
    roots = start.roots
    data_dirs = tuple(r.path if r.kind == "data" else table.io.join(r.path, "data") for r in roots)
    broadcast_valid = sc.broadcast(valid.locations)
    candidates = listed.flatMap(lambda item: item[1]).union(sc.parallelize(head_rows, 1))
    body = partial(
        join_candidates,
        context.args.table,
        context.executor_options,
        broadcast_valid,
        start.metadata_dir,
        data_dirs,
    )
    joined = candidates.mapPartitions(body).persist(StorageLevel.MEMORY_AND_DISK)
    candidate_count = candidates.count()
    mismatches = [PrefixMismatch(*m) for m in joined.filter(lambda r: r[0] == "mismatch").values().collect()]
    if mismatches and context.args.prefix_mismatch == "error":
        raise PrefixMismatchError(table.name, mismatches)
    return valid, joined.filter(lambda r: r[0] == "orphan"), candidate_count, mismatches


def _delete(
    context: JobContext, start: OrphanStart, valid: ValidSet, orphans: Any, orphan_count: int
) -> DeletionReport:
    """4. Delete on executors, each batch re-checked against what is new since the valid set."""
    args = context.args
    recheck = context.spark.sparkContext.broadcast(
        {
            "snapshots": sorted(valid.snapshots),
            "manifests": sorted(valid.manifests),
            "metadata_seen": sorted(valid.metadata_seen),
            "metadata_dir": start.metadata_dir,
            "equal_schemes": _pairs(args.equal_scheme),
            "equal_authorities": _pairs(args.equal_authority),
            "prefix_mismatch": args.prefix_mismatch,
        }
    )
    body = partial(
        delete_orphans, args.table, context.executor_options, args.dry_run, fail_after_deletes(), recheck
    )
    slices = context.parallelism(max(1, orphan_count), per_core=2)
    reports = orphans.coalesce(slices).mapPartitions(body).collect() if orphan_count else []
    return merge_reports(args.dry_run, reports)


def run(context: JobContext, lake_table: IcebergLakeTable) -> dict[str, Any]:
    """The job on an Iceberg table (the module docstring); returns the result document."""
    args, table = context.args, lake_table.native
    start = start_orphan_cleanup(
        table,
        older_than=args.older_than,
        allow_short_older_than=args.allow_short_older_than,
        equal_schemes=_pairs(args.equal_scheme),
        equal_authorities=_pairs(args.equal_authority),
        prefix_mismatch=args.prefix_mismatch,
        dry_run=args.dry_run,
    )
    listed, counts, head_rows = _list(context, table, start)
    valid, orphans, candidate_count, mismatches = _join(context, table, start, listed, head_rows)
    orphan_count = orphans.count()
    sample = [row[1] for row in orphans.values().takeOrdered(DEFAULT_SAMPLE_LIMIT, key=lambda r: r[1])]
    report = _delete(context, start, valid, orphans, orphan_count)
    if report.failed:
        raise DeletionFailedError(
            f"{table.name}: {len(report.failed)} orphan file(s) could not be deleted "
            f"(first: {report.failed[0].path}: {report.failed[0].error})",
            report,
        )
    listing = TreeListing(
        files_listed=counts[0], hidden=counts[1], too_recent=counts[2], no_mtime=counts[3],
        outside_boundary=counts[4],
    )  # fmt: skip
    start.warnings.extend(plan_warnings(listing, orphan_count, len(mismatches)))
    start.decisions.append(candidates_decision(start.cutoff, start.older_than, start.roots))
    plan = start_plan(table.name, start, listing, valid, mismatches, args.prefix_mismatch)
    document = IcebergOrphanResult(plan, report, [], None, 0.0).to_json()
    # The plan holds counts, not the candidates and orphans themselves: those stayed on the executors.
    document.update(
        candidates=candidate_count,
        orphans=orphan_count,
        orphanPaths=[table.io.uri(path) for path in sample],
        orphanPathsTruncated=orphan_count > len(sample),
    )
    return document
