"""The Iceberg half of the write facade (``core/table_writes.py``): :class:`IcebergWrites`.

An Iceberg snapshot has no commit user or identifier, so both go into its summary (``lakeformat.commit-user``,
``lakeformat.commit-identifier``; Iceberg keeps unknown summary properties, Java's ``SnapshotSummary``
included), and a write finds its earlier landing by walking ``main``'s ancestry. Appends and overwrites are
``core/iceberg/write/write.py`` (rows partitioned by the current spec, identity or transform; an overwrite is one
``overwrite`` snapshot, dynamic or by a filter); staged Parquet files are pyiceberg's ``add_files``.

Example:
    >>> IcebergWrites(table).write_rows(rows, commit_user="etl", commit_identifier=7, overwrite=True)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import RegisterError, UnsupportedFormatError
from airflow_lakeformat.core.table_maintenance import COMMIT_USER_PROPERTY
from airflow_lakeformat.core.write_options import (
    COMMIT_IDENTIFIER_PROPERTY,
    EMPTY_WRITE,
    Overwrite,
    ReadRows,
    Staged,
    dry_run_fields,
    iceberg_overwrite,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

__all__ = ["IcebergWrites"]


class IcebergWrites:
    """Commits to one Iceberg table, exactly once per commit user and identifier when both are given (they go into
    the snapshot summary)."""

    branch = "main"

    def __init__(self, table: IcebergTable) -> None:
        self.table = table

    def check_overwrite(self, overwrite: Overwrite, row_filter: str | None = None) -> None:
        """Refuse malformed overwrite arguments (``ValueError``) and a filter that does not parse
        (``UsageError``), before anything is read or written."""
        from airflow_lakeformat.core.iceberg.write.overwrite_scope import parse_filter

        replace, text = iceberg_overwrite(overwrite, row_filter)
        if replace and text is not None:
            parse_filter(self.table.metadata, text)

    def find_landed(self, commit_user: str | None, commit_identifier: int | None) -> Any | None:
        """The snapshot on the branch's history holding this commit, or None (the table is reloaded first; None
        too without a commit user and identifier: such a write is not made exactly-once)."""
        if commit_user is None or commit_identifier is None:
            return None
        self.table.refresh()
        metadata = self.table.metadata
        ref = metadata.refs.get(self.branch)
        wanted = (commit_user, str(commit_identifier))
        snapshot_id = ref.snapshot_id if ref is not None else None
        seen: set[int] = set()
        while snapshot_id is not None and snapshot_id not in seen:
            seen.add(snapshot_id)
            snapshot = metadata.snapshot_by_id(snapshot_id)
            if snapshot is None:  # expired ancestors: the commit is older than anything a retry looks for
                return None
            if _snapshot_commit(snapshot) == wanted:
                return snapshot
            snapshot_id = snapshot.parent_snapshot_id
        return None

    def commit_files(
        self,
        staged: Sequence[Staged],
        *,
        commit_user: str | None,
        commit_identifier: int | None,
        overwrite: Overwrite = None,
    ) -> dict[str, Any]:
        """Register staged Parquet files once (pyiceberg's ``add_files``); paths relative to the table root are
        placed under it. Staged Paimon entries and an overwrite are refused (:class:`RegisterError`,
        :class:`UnsupportedFormatError`: an overwrite of Iceberg tables writes rows, ``write_rows``)."""
        from airflow_lakeformat.core.iceberg.write.write import add_files

        if iceberg_overwrite(overwrite)[0]:
            raise UnsupportedFormatError(
                self.table.name,
                "registering files with an overwrite is not implemented for Iceberg tables; write the rows "
                "with an overwrite instead (write --overwrite)",
            )
        documents = [item for item in staged if not isinstance(item, str)]
        if documents:
            raise RegisterError(
                self.table.name,
                f"{len(documents)} staged Paimon manifest entries cannot be committed to an Iceberg table; "
                "stage Parquet file paths instead",
            )
        paths = [item for item in staged if isinstance(item, str)]
        landed = self.find_landed(commit_user, commit_identifier)
        if landed is None:
            root = self.table.uri.rstrip("/")
            full = [p if "://" in p or p.startswith("/") else f"{root}/{p.lstrip('/')}" for p in paths]
            properties = _commit_properties(commit_user, commit_identifier)
            snapshot = self._snapshot(add_files(self.table, full, snapshot_properties=properties))
        else:
            snapshot = landed
        fields = _snapshot_fields(snapshot)
        return {**fields, "alreadyCommitted": landed is not None, "filesAdded": len(paths), "filesDeleted": 0}

    def write_rows(
        self,
        rows: pa.Table | ReadRows,
        *,
        commit_user: str | None,
        commit_identifier: int | None,
        overwrite: Overwrite = None,
        dry_run: bool = False,
        overwrite_filter: str | None = None,
    ) -> dict[str, Any]:
        """Append ``rows`` once, or overwrite with them (module docstring): a function returning them is not
        called when an earlier try's snapshot holds them. A dry run reads and checks the rows and, for an
        overwrite, reports what it would replace (``overwrite``); it writes nothing."""
        from airflow_lakeformat.core.iceberg.write.write import append
        from airflow_lakeformat.core.iceberg.write.write import overwrite as overwrite_rows

        started = time.monotonic()
        replace, row_filter = iceberg_overwrite(overwrite, overwrite_filter)
        self.check_overwrite(overwrite, overwrite_filter)
        landed = self.find_landed(commit_user, commit_identifier)
        if landed is not None:
            return {**EMPTY_WRITE, **_snapshot_fields(landed), "alreadyCommitted": True}
        data = rows() if callable(rows) else rows
        properties = _commit_properties(commit_user, commit_identifier)
        if not replace:
            if dry_run:
                return dry_run_fields(data, started)
            return self._written(append(self.table, data, snapshot_properties=properties), data, started)
        result = overwrite_rows(
            self.table, data, row_filter=row_filter, snapshot_properties=properties, dry_run=dry_run
        )
        if result.snapshot_id is None:
            nothing = (
                dry_run_fields(data, started)
                if dry_run
                else {**EMPTY_WRITE, "snapshotId": None, "alreadyCommitted": False}
            )
            return {**nothing, "overwrite": result.to_json()}
        return {**self._written(result.snapshot_id, data, started), "overwrite": result.to_json()}

    def _written(self, snapshot_id: int, data: pa.Table, started: float) -> dict[str, Any]:
        snapshot = self._snapshot(snapshot_id)
        summary = snapshot.summary
        return {
            "filesWritten": _int(summary, "added-data-files"),
            "rowsWritten": data.num_rows,
            "bytesWritten": _int(summary, "added-files-size"),
            "filesDeleted": _int(summary, "deleted-data-files"),
            **_snapshot_fields(snapshot),
            "alreadyCommitted": False,
            "durationSeconds": round(time.monotonic() - started, 3),
        }

    def _snapshot(self, snapshot_id: int) -> Any:
        snapshot = self.table.metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise RegisterError(
                self.table.name, f"snapshot {snapshot_id} just committed is not in the metadata"
            )
        return snapshot

    def merges_rows_by_key(self) -> bool:
        """Iceberg writes append or overwrite rows; none is merged by key."""
        return False

    def catalog_identifier(self) -> tuple[str, list[str], str] | None:
        """(catalog, namespace, name) of a table opened from a catalog; None for one opened by its root."""
        from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import (
            HadoopLayoutCatalog,
            ReadOnlyCatalog,
        )

        native = self.table.table
        if isinstance(native.catalog, (HadoopLayoutCatalog, ReadOnlyCatalog)):
            return None
        *namespace, name = native.name()
        return native.catalog.name, namespace, name


def _commit_properties(commit_user: str | None, commit_identifier: int | None) -> dict[str, str]:
    """The snapshot summary properties that name the commit's user and identifier (those given)."""
    properties = {} if commit_user is None else {COMMIT_USER_PROPERTY: commit_user}
    if commit_identifier is not None:
        properties[COMMIT_IDENTIFIER_PROPERTY] = str(commit_identifier)
    return properties


def _snapshot_commit(snapshot: Any) -> tuple[str | None, str | None]:
    """(commit user, commit identifier) recorded in a snapshot's summary, None where absent."""
    summary = snapshot.summary
    if summary is None:
        return None, None
    return summary.get(COMMIT_USER_PROPERTY), summary.get(COMMIT_IDENTIFIER_PROPERTY)


def _int(summary: Any, key: str) -> int:
    try:
        return int(summary.get(key) or 0) if summary is not None else 0
    except (TypeError, ValueError):
        return 0


def _snapshot_fields(snapshot: Any) -> dict[str, Any]:
    """What a commit document says about an Iceberg snapshot: id, kind, record counts and its commit."""
    summary = snapshot.summary
    user, identifier = _snapshot_commit(snapshot)
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
