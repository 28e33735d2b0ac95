"""The orphan cleanup's audit trail, one format for Paimon and Iceberg: one JSON object per line per orphan.

Each line has ``path`` (the URI a user would type), ``kind`` (``data-file``, ``manifest``, ...), ``size``
(bytes), ``lastModified`` (ISO-8601 UTC, or null when the listing did not read it), ``action`` and
``reason``. The action says what happened to the file in this run:

==============  ================================================================================
action          meaning
==============  ================================================================================
deleted         deleted
would-delete    a dry run: ``--apply`` (``dry_run=False``) would delete it
kept            the re-check before its batch found it in use again (a concurrent commit): kept
failed          the delete failed after retries (the reason is the store's error)
submitted       its batch was sent, then a later batch stopped the run: its outcome is unknown
not-attempted   the run stopped before its batch
==============  ================================================================================

The report is written even when the run stops (a failed batch, a refusal of a later batch), so it always
accounts for every orphan of the plan. Both formats' executors call :func:`write_orphan_report` with
their own ``reason`` (what "no snapshot uses it" means for the format).

Example:
    >>> from airflow_lakeformat.core.maintenance.deletion import DeleteRequest
    >>> rows = report_rows([DeleteRequest("data-file", "/t/a.parquet", 7)], uri_of=str, mtimes={},
    ...                    cutoff=0.0, outcome=None, kept={}, passed=["/t/a.parquet"], dry_run=True,
    ...                    reason="unused")
    >>> next(rows)["action"]
    'would-delete'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport


def utc_iso(epoch: float) -> str:
    """Epoch seconds as ISO-8601 UTC to the second (``2026-11-28T13:50:01+00:00``)."""
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds")


def report_rows(
    orphans: Sequence[DeleteRequest],
    *,
    uri_of: Callable[[str], str],
    mtimes: Mapping[str, float],
    cutoff: float,
    outcome: DeletionReport | None,
    kept: Mapping[str, str],
    passed: Iterable[str],
    dry_run: bool,
    reason: str,
) -> Iterator[dict[str, Any]]:
    """One report row per orphan of the plan, in the plan's order.

    Args:
        orphans: the plan's orphans (``DeleteRequest.path`` as the deleter sees it).
        uri_of: the path as a user would type it (the deleter reports failures by this URI).
        mtimes: last-modified times (epoch seconds) by path, where known.
        cutoff: the plan's cutoff (epoch seconds): only files modified before it were candidates.
        outcome: what the deleter did, or None when the run stopped before it returned.
        kept: paths the re-check kept, with why.
        passed: paths whose batch passed the re-check (and was deleted, or would be).
        dry_run: whether the run was a dry run.
        reason: why the format holds these files orphaned.
    """
    failed = {f.path: f.error for f in (outcome.failed if outcome else [])}
    passed_set = set(passed)
    age = f"last modified before the cutoff {utc_iso(cutoff)}"
    for request in orphans:
        uri = uri_of(request.path)
        mtime = mtimes.get(request.path)
        row: dict[str, Any] = {
            "path": uri,
            "kind": request.kind,
            "size": request.size,
            "lastModified": None if mtime is None else utc_iso(mtime),
        }
        if request.path in kept:
            row.update(action="kept", reason=kept[request.path])
        elif uri in failed:
            row.update(action="failed", reason=failed[uri])
        elif request.path in passed_set:
            if dry_run:
                row.update(action="would-delete", reason=f"{reason}; {age}")
            elif outcome is None:  # the run stopped later: this batch was sent, its outcome is unknown
                row.update(action="submitted", reason=f"{reason}; {age}; sent before the run stopped")
            else:
                row.update(action="deleted", reason=f"{reason}; {age}")
        else:
            row.update(action="not-attempted", reason="the run stopped before this file's batch")
        yield row


def write_orphan_report(destination: str, rows: Iterable[dict[str, Any]]) -> None:
    """Write the rows as JSON lines to ``destination`` (a local path or an fsspec URL).

    Args:
        destination: where the report goes; an existing file is replaced.
        rows: from :func:`report_rows`.
    """
    import fsspec

    with fsspec.open(destination, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
