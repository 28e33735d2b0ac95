"""Deleting from Spark tasks, shared by the jobs that delete (``expire_snapshots``, ``remove_orphan_files``).

Each task deletes its share of a plan with the core's :class:`~airflow_lakeformat.core.maintenance.deletion.FileDeleter`
(the one module that deletes) and returns its :class:`DeletionReport` as JSON; the driver merges the
reports. Jobs import this module, never each other.

The test suite injects task failures through ``$LAKEFORMAT_TEST_FAIL_AFTER_DELETES``: a task then deletes
one file per batch and dies before the batch past its budget, which is how crash-convergence of the
Spark jobs is tested.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import (
    BatchGuard,
    DeleteRequest,
    DeletionReport,
    FileDeleter,
)
from airflow_lakeformat.spark.runtime import InjectedFailureError

# Fault injection for the test suite only: a delete task raises once it has deleted this many files.
FAIL_AFTER_DELETES_ENV = "LAKEFORMAT_TEST_FAIL_AFTER_DELETES"


def fail_after_deletes(environ: dict[str, str] | None = None) -> int:
    """The test-only delete budget per task from the driver's environment (0: never fail)."""
    environ = dict(os.environ) if environ is None else environ
    return int(environ.get(FAIL_AFTER_DELETES_ENV) or 0)


def task_deleter(io: FileIO, dry_run: bool, fail_after: int) -> tuple[FileDeleter, BatchGuard | None]:
    """The task's deleter and, under test-only fault injection, a guard that kills the task.

    With a budget of ``fail_after`` files, every file is its own batch and the guard raises before
    the batch past the budget: the task dies after exactly that many deletes (in-flight ones finish).
    """
    if not fail_after:
        return FileDeleter(io, dry_run=dry_run), None
    sent = 0

    def die_after_budget(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        nonlocal sent
        if sent + len(batch) > fail_after:
            raise InjectedFailureError(
                f"injected failure after {sent} deletes (${FAIL_AFTER_DELETES_ENV}={fail_after})"
            )
        sent += len(batch)
        return batch

    return FileDeleter(io, dry_run=dry_run, batch_size=1), die_after_budget


def chain_guards(*guards: BatchGuard | None) -> BatchGuard | None:
    """One guard running ``guards`` in order (None when there is none)."""
    present = [g for g in guards if g is not None]
    if not present:
        return None

    def chained(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        for guard in present:
            batch = guard(batch)
        return batch

    return chained


def merge_reports(dry_run: bool, documents: Iterable[dict[str, Any]]) -> DeletionReport:
    """One report from the tasks' JSON reports."""
    total = DeletionReport(dry_run=dry_run)
    for document in documents:
        total.merge(DeletionReport.from_json(document))
    return total
