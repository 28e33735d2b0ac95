"""Exactly-once Iceberg commits for the commit and write operators: appends and registered files.

An Iceberg snapshot has no commit user or identifier of its own, so the operators write theirs into the
snapshot summary (``lakeformat.commit-user``, ``lakeformat.commit-identifier``; Iceberg keeps unknown summary
properties, Java's ``SnapshotSummary`` included). Before committing, :func:`find_landed` looks for a snapshot
of the branch's history with both: an Airflow retry whose earlier try failed *after* its commit landed finds
it and reports ``alreadyCommitted`` instead of appending the rows again. The commit itself is the core's
(``core/iceberg/write/write.py``: pyiceberg's ``Transaction`` through the one retry loop); a partition overwrite is
not implemented for Iceberg yet and is refused before anything is written.

Example:
    >>> commit_properties("airflow-ingest-write", 42)
    {'lakeformat.commit-user': 'airflow-ingest-write', 'lakeformat.commit-identifier': '42'}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table.snapshots import Snapshot

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

COMMIT_USER_PROPERTY = "lakeformat.commit-user"
COMMIT_IDENTIFIER_PROPERTY = "lakeformat.commit-identifier"
BRANCH = "main"


def commit_properties(commit_user: str, commit_identifier: int) -> dict[str, str]:
    """The snapshot summary properties that name the commit's user and identifier."""
    return {COMMIT_USER_PROPERTY: commit_user, COMMIT_IDENTIFIER_PROPERTY: str(commit_identifier)}


def snapshot_commit(snapshot: Snapshot) -> tuple[str | None, str | None]:
    """(commit user, commit identifier) recorded in a snapshot's summary, None where absent."""
    summary = snapshot.summary
    if summary is None:
        return None, None
    return summary.get(COMMIT_USER_PROPERTY), summary.get(COMMIT_IDENTIFIER_PROPERTY)


def find_landed(table: IcebergTable, commit_user: str, commit_identifier: int) -> Snapshot | None:
    """The snapshot on the branch's history holding this commit, or None (the table is reloaded first)."""
    table.refresh()
    metadata = table.metadata
    ref = metadata.refs.get(BRANCH)
    wanted = (commit_user, str(commit_identifier))
    snapshot_id = ref.snapshot_id if ref is not None else None
    seen: set[int] = set()
    while snapshot_id is not None and snapshot_id not in seen:
        seen.add(snapshot_id)
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:  # expired ancestors: the commit is older than anything a retry looks for
            return None
        if snapshot_commit(snapshot) == wanted:
            return snapshot
        snapshot_id = snapshot.parent_snapshot_id
    return None


def _int(summary: Any, key: str) -> int:
    try:
        return int(summary.get(key) or 0) if summary is not None else 0
    except (TypeError, ValueError):
        return 0


def snapshot_fields(snapshot: Snapshot) -> dict[str, Any]:
    """What a commit document says about the snapshot: id, kind, record counts and its commit."""
    summary = snapshot.summary
    user, identifier = snapshot_commit(snapshot)
    return {
        "snapshotId": snapshot.snapshot_id,
        "commitKind": summary.operation.value.upper() if summary is not None else None,
        "commitUser": user,
        "commitIdentifier": int(identifier)
        if identifier is not None and identifier.isdigit()
        else identifier,
        "deltaRecordCount": _int(summary, "added-records") - _int(summary, "deleted-records"),
        "totalRecordCount": _int(summary, "total-records"),
    }


def refuse_overwrite(table: IcebergTable, overwrite: bool) -> None:
    """A partition overwrite of an Iceberg table is not implemented yet: refused, nothing written."""
    if overwrite:
        from airflow_lakeformat.core.errors import UnsupportedFormatError

        raise UnsupportedFormatError(
            table.name, "a partition overwrite of Iceberg tables is not implemented yet"
        )


def append_rows(
    table: IcebergTable, data: pa.Table, commit_user: str, commit_identifier: int
) -> tuple[Snapshot, bool]:
    """Append ``data`` once: (the snapshot holding it, whether an earlier try had committed it already)."""
    from airflow_lakeformat.core.iceberg.write.write import append

    landed = find_landed(table, commit_user, commit_identifier)
    if landed is not None:
        return landed, True
    snapshot_id = append(table, data, snapshot_properties=commit_properties(commit_user, commit_identifier))
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    return snapshot, False


def add_data_files(
    table: IcebergTable, paths: Sequence[str], commit_user: str, commit_identifier: int
) -> tuple[Snapshot, bool]:
    """Register existing Parquet files once (pyiceberg's ``add_files``); paths relative to the table root
    are placed under it."""
    from airflow_lakeformat.core.iceberg.write.write import add_files

    landed = find_landed(table, commit_user, commit_identifier)
    if landed is not None:
        return landed, True
    root = table.uri.rstrip("/")
    full = [p if "://" in p or p.startswith("/") else f"{root}/{p.lstrip('/')}" for p in paths]
    snapshot_id = add_files(
        table, full, snapshot_properties=commit_properties(commit_user, commit_identifier)
    )
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    return snapshot, False
