"""The ``expire_snapshots`` Spark job on Iceberg tables: storage IO on executors, commit and plan on the driver.

Same job, same arguments as for Paimon tables where the concepts match (``--older-than``, ``--retain-min`` =
Iceberg's ``--retain-last``, ``--dry-run``, ``--parallelism``); Iceberg also takes ``--retain-last``,
``--snapshot-id`` (repeatable), ``--clean-expired-metadata`` and an ISO-8601 ``--older-than``. The job
(``spark/jobs/expire_snapshots.py``) opened the table through the facade and checked the arguments
(``table.maintenance.check_expire_snapshots``: Paimon's options refused by name). The rules and
the result are the in-process run's (:mod:`airflow_lakeformat.core.iceberg.maintenance.expiry`, Java's
``expire_snapshots``), built from the same blocks:

1. The driver resolves the options and selects the snapshots and refs to remove (``expiry_rules``).
2. Manifest lists and manifests are fetched and decoded on executors (``reachability.load_one`` through the
   reader's bulk ``loader``); the driver keeps the per-run cache, so each file is still read once, and
   computes the deletion set (``expiry_files``).
3. The driver re-checks the plan, writes the journal and commits through the one retry loop.
4. Each phase (content files, manifests, manifest lists, statistics) is deleted on executors with the core's
   ``FileDeleter``; every task re-loads the table before its batches (at most once a second) and keeps any
   file a snapshot committed since the driver's re-check reaches, exactly the in-process re-check. A
   failed delete fails the job (exit 10) before the next phase; the journal stays for the re-run.

The result is the in-process ``IcebergExpiryResult`` JSON, plus ``"job"`` and ``"mode": "spark"``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.expiry import (
    execute_snapshot_expiry,
    plan_snapshot_expiry,
    refresh_if_changed,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_files import RetainedSide
from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import check_gc_enabled
from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader, load_one
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport
from airflow_lakeformat.spark.deleting import chain_guards, fail_after_deletes, merge_reports, task_deleter
from airflow_lakeformat.spark.runtime import JobContext

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import IcebergLakeTable

_TASK_IO_THREADS = 8
RECHECK_INTERVAL_SECONDS = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The Iceberg-only flags of the job (Java's ``expire_snapshots`` arguments)."""
    parser.add_argument("--retain-last", type=int, metavar="N", help="Iceberg: ancestors kept per branch")
    parser.add_argument(
        "--snapshot-id", type=int, action="append", metavar="ID", help="Iceberg: expire this too"
    )
    parser.add_argument(
        "--clean-expired-metadata",
        action="store_true",
        help="Iceberg: drop specs and schemas no snapshot uses",
    )


# -- executors -----------------------------------------------------------------------------------


def load_partition(
    uri: str, options: dict[str, Any], kind: str, items: Iterator[tuple[str, str]]
) -> Iterator[tuple[str, int, Any]]:
    """Executor body: fetch and decode manifest lists or manifests: (location, size, rows or missing)."""
    table = open_path_table(uri, options)
    batch = list(items)

    def one(item: tuple[str, str]) -> tuple[str, int, Any]:
        size, value = load_one(table, kind, item[0], item[1])
        return item[0], size, value

    with ThreadPoolExecutor(max_workers=max(1, min(_TASK_IO_THREADS, len(batch)))) as pool:
        yield from pool.map(one, batch)


def delete_partition(
    uri: str,
    options: dict[str, Any],
    dry_run: bool,
    fail_after: int,
    state: Any,
    task: str,
    requests: Iterator[DeleteRequest],
) -> Iterator[dict[str, Any]]:
    """Executor body: delete this task's share, re-checking every batch against the re-loaded table for
    snapshots the driver had not folded into the retained side."""
    known = state.value
    table = open_path_table(uri, options)
    retained = RetainedSide(table, ReachabilityReader(table, workers=4), [], table.metadata)
    retained.snapshot_ids = set(known["snapshots"])
    retained.manifests = dict.fromkeys(known["manifests"])  # type: ignore[assignment]  # keys: already folded
    retained._content_read = set(known["manifests"])
    retained.content = set() if known["content"] else None
    simulated_gone = set(known["expired"])
    last = 0.0

    def still_unreachable(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        nonlocal last
        if time.monotonic() - last >= RECHECK_INTERVAL_SECONDS:
            refresh_if_changed(table)
            metadata = table.metadata
            check_gc_enabled(metadata.properties, table.name)
            retained.fold([s for s in metadata.snapshots if s.snapshot_id not in simulated_gone], metadata)
            last = time.monotonic()
        return [r for r in batch if not retained.reaches(r.path)]

    batch = list(requests)
    deleter, fault = task_deleter(table.io, dry_run, fail_after)
    guard = chain_guards(still_unreachable, fault)
    yield deleter.delete(batch, task=task, total=len(batch), before_batch=guard).to_json()


# -- the driver ----------------------------------------------------------------------------------


def run(context: JobContext, lake_table: IcebergLakeTable) -> dict[str, Any]:
    """The job on an Iceberg table (the module docstring); the arguments were checked by the facade."""
    started = time.monotonic()
    args, table = context.args, lake_table.native
    uri, options = args.table, context.executor_options
    retain_last = args.retain_last if args.retain_last is not None else args.retain_min
    sc = context.spark.sparkContext

    def loader(kind: str, wanted: list[tuple[str, str]]) -> list[tuple[int, Any]]:
        body = partial(load_partition, uri, options, kind)
        rows = (
            sc.parallelize(wanted, context.parallelism(len(wanted), per_core=4)).mapPartitions(body).collect()
        )
        found = {location: (size, value) for location, size, value in rows}
        return [found[location] for location, _ in wanted]

    plan = plan_snapshot_expiry(
        table,
        older_than=args.older_than,
        retain_last=retain_last,
        snapshot_ids=args.snapshot_id or (),
        clean_expired_metadata=args.clean_expired_metadata,
        loader=loader,
    )
    fail_after = fail_after_deletes()

    def phase(task: str, requests: list[DeleteRequest], retained: RetainedSide) -> DeletionReport:
        if not requests:
            return DeletionReport(dry_run=args.dry_run)
        state = sc.broadcast(
            {
                "snapshots": sorted(retained.snapshot_ids),
                "manifests": sorted(retained.manifests),
                "content": retained.content is not None,
                "expired": list(plan.expired) if args.dry_run else [],
            }
        )
        body = partial(delete_partition, uri, options, args.dry_run, fail_after, state, task)
        slices = context.parallelism(len(requests), per_core=2)
        return merge_reports(args.dry_run, sc.parallelize(requests, slices).mapPartitions(body).collect())

    result = execute_snapshot_expiry(table, plan, dry_run=args.dry_run, phase_runner=phase)
    result.duration_seconds = time.monotonic() - started
    return result.to_json()
