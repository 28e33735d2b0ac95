"""The write half of the facade: exactly-once commits of staged files and of rows, for a Paimon and an Iceberg table.

``table_writes(table)`` gives the facade table's writer: :class:`PaimonWrites` or :class:`IcebergWrites`
(``core/table_writes_iceberg.py``; the arguments both share are ``core/write_options.py``). Both
commit *exactly once per commit user and identifier*: before committing they look for a snapshot that already
holds the commit (an Airflow retry whose earlier try failed *after* its commit landed finds it) and then report
``alreadyCommitted`` instead of committing again.

* Paimon keeps the commit user and identifier in the snapshot (``Committer.find_landed``); staged files are
  registered from their Parquet footers (``core/paimon/write/register.py``) or arrive as ADD entries through
  XCom (:func:`entries_to_xcom`); rows are written by ``write_data_files``; an overwrite replaces a partition.
* An Iceberg snapshot has neither field, so both go into its summary (``lakeformat.commit-user``,
  ``lakeformat.commit-identifier``; Iceberg keeps unknown summary properties, Java's ``SnapshotSummary``
  included); the commit is pyiceberg's ``Transaction`` through the core's retry loop
  (``core/iceberg/write/write.py``). Rows are partitioned by the current spec, identity or transform. An
  overwrite is one ``overwrite`` snapshot (``core/iceberg/write/overwrite.py``): ``overwrite=True`` (or
  ``"dynamic"``) replaces the partitions the rows fall into (Spark's dynamic ``INSERT OVERWRITE``),
  ``overwrite_filter="cat = 'a'"`` the rows a filter selects (every input row must match it), ``"*"`` the whole
  table and ``"k=v"`` the rows with those values (a filter too). Without a commit user and identifier (the
  CLI without ``--commit-user``/``--commit-identifier``) a write is not made exactly-once.

Every method returns the fields of the commit's JSON document (``snapshotId``, ``commitKind``, ``commitUser``,
``commitIdentifier``, ``alreadyCommitted``, record counts, file counts); the callers (operators) add
``operation``, ``table`` and ``format``. Each format's modules load when a method runs.

Example:
    >>> writes = table_writes(open_table("s3://lake/wh/db.db/orders"))  # doctest: +SKIP
    >>> writes.commit_files(["dt=1/bucket-0/a.parquet"], commit_user="etl", commit_identifier=42)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import RegisterError, UsageError
from airflow_lakeformat.core.table_writes_iceberg import IcebergWrites
from airflow_lakeformat.core.write_options import (
    COMMIT_IDENTIFIER_PROPERTY,
    DYNAMIC_OVERWRITE,
    EMPTY_WRITE,
    Overwrite,
    ReadRows,
    Staged,
    dry_run_fields,
    iceberg_overwrite,
    overwrite_filter,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
    from airflow_lakeformat.core.paimon.manifest import ManifestEntry
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable

_paimon_overwrite = overwrite_filter  # the function's name, inside methods whose parameter shadows it

__all__ = [
    "COMMIT_IDENTIFIER_PROPERTY",
    "DYNAMIC_OVERWRITE",
    "ENTRY_FORMAT",
    "IcebergWrites",
    "PaimonCommitted",
    "PaimonWrites",
    "entries_from_xcom",
    "entries_to_xcom",
    "iceberg_overwrite",
    "overwrite_filter",
    "overwrite_text",
    "partition_filters",
    "table_writes",
]

ENTRY_FORMAT = "lakeformat.manifest-entry.v1"


def table_writes(table: PaimonTable | IcebergLakeTable) -> PaimonWrites | IcebergWrites:
    """The writer of a facade table (``open_table(...)``): the one its class names (``table.writes()``)."""
    return table.writes()


def overwrite_text(value: Mapping[str, Any] | str | None) -> str | None:
    """The overwrite as a job's command line takes it back exactly (None: no overwrite)."""
    from airflow_lakeformat.core.paimon.paths import format_partition_spec

    overwrite, partition_filter = overwrite_filter(value)
    return format_partition_spec(partition_filter) if overwrite else None


def partition_filters(value: Any) -> list[dict[str, str | None]] | None:
    """Partition filters from a dict, a ``"k=v[,k=v]"`` string (or a JSON object) or a list of them; None,
    an empty list or ``"*"`` mean the whole table (None).

    Raises:
        ValueError: a spec that names no partition (other than ``"*"``), or a part without ``=``.

    Example:
        >>> partition_filters(["dt=2024-01-01", {"dt": "2024-01-02"}])
        [{'dt': '2024-01-01'}, {'dt': '2024-01-02'}]
    """
    from airflow_lakeformat.core.paimon.paths import parse_partition_spec

    if value is None or value == [] or (isinstance(value, str) and not value.strip()):
        return None
    items = [value] if isinstance(value, (str, Mapping)) else list(value)
    specs: list[dict[str, str | None]] = []
    for item in items:
        spec = parse_partition_spec(item)
        if spec is None:
            if str(item).strip() != "*":
                raise ValueError(f"partitions: {item!r} names no partition (use '*' for the whole table)")
            return None
        specs.append(spec)
    return specs


# -- staged Paimon entries through XCom ------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        if set(value) == {"$datetime"}:
            return datetime.fromisoformat(value["$datetime"])
        return {str(k): _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def entries_to_xcom(entries: Iterable[ManifestEntry]) -> list[dict[str, Any]]:
    """ADD entries (e.g. from ``write_data_files``) as JSON for XCom, losslessly (bytes and times tagged)."""
    return [{"format": ENTRY_FORMAT, "entry": _encode(entry.record)} for entry in entries]


def _entry(document: Mapping[str, Any]) -> ManifestEntry:
    from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry

    if document.get("format") != ENTRY_FORMAT or not isinstance(document.get("entry"), Mapping):
        raise RegisterError("<xcom>", f"not a staged file or {ENTRY_FORMAT} document: {str(document)[:200]}")
    record = _decode(document["entry"])
    file_record = record.get("_FILE")
    missing = [
        k
        for k in ("_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT")
        if not isinstance(file_record, dict) or k not in file_record
    ]
    if missing or not isinstance(record.get("_PARTITION"), bytes):
        raise RegisterError(
            "<xcom>", f"staged entry lacks {missing or ['_PARTITION']}: {str(document)[:200]}"
        )
    try:
        entry = ManifestEntry(record)
    except (KeyError, ValueError) as exc:
        raise RegisterError(str(file_record.get("_FILE_NAME")), f"not a valid staged entry ({exc})") from exc
    if entry.kind is not FileKind.ADD:
        raise RegisterError(entry.file.file_name, "a staged entry must ADD a file")
    return entry


def entries_from_xcom(documents: Iterable[Mapping[str, Any]]) -> list[ManifestEntry]:
    """The ADD entries back from :func:`entries_to_xcom`; anything else is refused with the reason."""
    return [_entry(document) for document in documents]


# -- Paimon ------------------------------------------------------------------------------------------


class PaimonWrites:
    """Exactly-once commits to one Paimon table (the commit user and identifier are the snapshot's own)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def check_overwrite(self, overwrite: Overwrite, row_filter: str | None = None) -> None:
        """Paimon overwrites named partitions: a malformed spec, a dynamic overwrite or a filter is refused
        (``ValueError``)."""
        if row_filter is not None:
            raise UsageError(
                "overwrite_filter: only for Iceberg tables (a Paimon overwrite names its partition)"
            )
        overwrite_filter(overwrite)

    def commit_files(
        self,
        staged: Sequence[Staged],
        *,
        commit_user: str,
        commit_identifier: int,
        overwrite: Overwrite = None,
    ) -> dict[str, Any]:
        """Register staged Parquet paths and XCom entries as one APPEND (or OVERWRITE) snapshot, once.

        Args:
            staged: table-relative or full paths of Parquet files in the table's layout, and/or documents
                from :func:`entries_to_xcom`.
            commit_user, commit_identifier: the commit's identity; a snapshot holding it means "done".
            overwrite: ``"*"`` or a partition whose live files the staged ones replace.
        """
        from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
        from airflow_lakeformat.core.paimon.snapshot import CommitKind
        from airflow_lakeformat.core.paimon.write.register import register_files

        replace, partition_filter = _paimon_overwrite(overwrite)
        kind = CommitKind.OVERWRITE if replace else CommitKind.APPEND
        committer = Committer(self.table, commit_user)
        landed = committer.find_landed(commit_identifier, kind)
        if landed is not None:  # an earlier try published this very commit and failed afterwards
            again = CommitResult(landed, 0, already_committed=True)
            return {**again.to_json(), "filesAdded": len(staged), "filesDeleted": 0}
        paths = [item for item in staged if isinstance(item, str)]
        entries = entries_from_xcom([item for item in staged if not isinstance(item, str)])
        self._check_staged_files(entries)
        adds = register_files(self.table, paths) + entries
        done = _commit_registered(committer, adds, replace, partition_filter, commit_identifier)
        return {**done.result.to_json(), "filesAdded": len(adds), "filesDeleted": len(done.deletes)}

    def check_files(self, paths: Sequence[str]) -> tuple[int, int]:
        """The dry run of :meth:`commit` with ``paths``: each file's place in the layout, schema and bucket
        checked, nothing committed. Returns (rows, files)."""
        from airflow_lakeformat.core.paimon.write.register import register_files

        added = register_files(self.table, list(paths))
        return sum(e.file.row_count for e in added), len(added)

    @staticmethod
    def default_identifier() -> int:
        """The commit identifier of a write without one (Paimon's batch identifier)."""
        from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER

        return BATCH_COMMIT_IDENTIFIER

    def commit(
        self,
        rows: pa.Table | None,
        paths: Sequence[str] = (),
        *,
        commit_user: str | None,
        commit_identifier: int | None,
        overwrite: Overwrite = None,
        row_kind_column: str | None = None,
    ) -> PaimonCommitted:
        """Write ``rows`` as data files (or register ``paths``, files already in the table's layout) and commit
        them as one APPEND or OVERWRITE snapshot: the CLI's ``write`` and ``commit``. Exactly once per commit user
        and identifier, by the committer's own replay check (a re-run reports the landed snapshot and discards
        the files it wrote; files a user placed are never discarded).

        Args:
            rows: the rows (None: register ``paths``).
            paths: table-relative or full paths of Parquet files placed in the table's layout.
            commit_user: the commit user (None: a new ``lakeformat-<uuid>``).
            commit_identifier: the commit identifier (None: Paimon's batch identifier).
            overwrite: ``"*"`` or a partition (``k=v[,k=v]`` or a dict) the new files replace.
            row_kind_column: primary-key tables only: the input column holding each row's kind (``+I``,
                ``-U``, ``+U``, ``-D``); the table's ``rowkind.field`` is used without it. The rows of a
                primary-key table are written as Paimon's writer does (``core/paimon/write/pk_writes.py``).

        Example:
            >>> table.writes().commit(rows, commit_user="etl", commit_identifier=7).to_json()  # doctest: +SKIP
        """
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER
        from airflow_lakeformat.core.paimon.write.data_files import write_data_files
        from airflow_lakeformat.core.paimon.write.register import register_files
        from airflow_lakeformat.core.paimon.written_files import commit_written_files

        self.check_overwrite(overwrite)
        replace, partition_filter = _paimon_overwrite(overwrite)
        identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
        self._check_row_kinds(rows, row_kind_column)
        if rows is not None and self.table.schema.is_primary_key_table:
            from airflow_lakeformat.core.paimon.write.pk_writes import write_primary_key_rows

            done = write_primary_key_rows(
                self.table,
                rows,
                commit_user=commit_user,
                commit_identifier=identifier,
                overwrite=replace,
                partition_filter=partition_filter,
                row_kind_column=row_kind_column,
                commit_empty=True,
            )
            assert done.result is not None  # commit_empty
            return PaimonCommitted(done.result, done.added, done.deletes, done.discarded)
        committer = Committer(self.table, commit_user)
        if rows is not None:
            added = write_data_files(self.table, rows)
            written = commit_written_files(
                committer,
                added,
                overwrite=replace,
                partition_filter=partition_filter,
                commit_identifier=identifier,
            )
            return PaimonCommitted(written.result, list(added), list(written.deletes), written.discarded)
        added = register_files(self.table, list(paths))  # placed by the user: never ours to discard
        return _commit_registered(committer, added, replace, partition_filter, identifier)

    def _check_staged_files(self, entries: Sequence[ManifestEntry]) -> None:
        """A staged entry must describe a file that is there, at its size: never commit a dangling file."""
        from airflow_lakeformat.core.paimon.paths import DataFilePaths

        table = self.table
        paths = DataFilePaths(table.schema)
        for entry in entries:
            if entry.file.external_path:
                continue  # outside the table; its writer vouches for it
            path = table.io.join(table.root, paths.relative_path(entry))
            try:
                size = table.io.size(path)
            except FileNotFoundError:
                raise RegisterError(table.io.uri(path), "staged file does not exist") from None
            if size != entry.file.file_size:
                raise RegisterError(
                    table.io.uri(path),
                    f"staged file has {size} bytes, its DataFileMeta says {entry.file.file_size}",
                )

    def write_rows(
        self,
        rows: pa.Table | ReadRows,
        *,
        commit_user: str,
        commit_identifier: int,
        overwrite: Overwrite = None,
        dry_run: bool = False,
        overwrite_filter: str | None = None,
        row_kind_column: str | None = None,
    ) -> dict[str, Any]:
        """Write ``rows`` as data files and commit them once. ``rows`` may be a function returning them, not
        called when an earlier try's snapshot holds the write. A dry run reads and counts the rows, writes
        nothing. ``overwrite_filter`` is refused (``ValueError``: Iceberg only). On a primary-key table the
        rows are upserted as Paimon's writer does (level-0 files, ``core/paimon/write/pk_writes.py``);
        ``row_kind_column`` names the input column holding each row's kind (``+I``, ``-U``, ``+U``, ``-D``)."""
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.snapshot import CommitKind
        from airflow_lakeformat.core.paimon.write.data_files import write_data_files
        from airflow_lakeformat.core.paimon.written_files import commit_written_files

        started = time.monotonic()
        self.check_overwrite(overwrite, overwrite_filter)
        replace, partition_filter = _paimon_overwrite(overwrite)
        committer = Committer(self.table, commit_user)
        landed = committer.find_landed(
            commit_identifier, CommitKind.OVERWRITE if replace else CommitKind.APPEND
        )
        if landed is not None:
            return {**EMPTY_WRITE, "snapshotId": landed.id, "alreadyCommitted": True}
        data = rows() if callable(rows) else rows
        self._check_row_kinds(data, row_kind_column)
        if self.table.schema.is_primary_key_table:
            return self._write_pk_rows(
                data, committer, commit_identifier, overwrite, row_kind_column, dry_run
            )
        if dry_run:
            return dry_run_fields(data, started)
        entries = write_data_files(self.table, data)
        if not entries and not (replace and committer.overwrite_entries(partition_filter)):
            return {**EMPTY_WRITE, "snapshotId": None, "alreadyCommitted": False}
        done = commit_written_files(
            committer,
            entries,
            overwrite=replace,
            partition_filter=partition_filter,
            commit_identifier=commit_identifier,
        )
        result = done.result
        if result.already_committed:
            return {
                **EMPTY_WRITE,
                "snapshotId": result.snapshot.id,
                "alreadyCommitted": True,
                "discarded": done.discarded,
            }
        return {
            "filesWritten": len(entries),
            "rowsWritten": sum(e.file.row_count for e in entries),
            "bytesWritten": sum(e.file.file_size for e in entries),
            "filesDeleted": len(done.deletes),
            "snapshotId": result.snapshot.id,
            "alreadyCommitted": False,
            "commitKind": result.snapshot.commit_kind.value,
            "durationSeconds": round(time.monotonic() - started, 3),
        }

    def merges_rows_by_key(self) -> bool:
        """Whether written rows are merged by primary key (a primary-key table): what an engine that only
        appends files cannot write."""
        return self.table.schema.is_primary_key_table

    def check_rows_table(self) -> None:
        """What a write of rows refuses of the table itself (a primary-key table the writer cannot serve:
        ``pk_writes.pk_write_table``); nothing is read or written."""
        if self.table.schema.is_primary_key_table:
            from airflow_lakeformat.core.paimon.write.pk_writes import pk_write_table

            pk_write_table(self.table)

    def _check_row_kinds(self, rows: pa.Table | None, row_kind_column: str | None) -> None:
        """Row kinds are for primary-key tables' rows only."""
        if row_kind_column is not None and (rows is None or not self.table.schema.is_primary_key_table):
            raise UsageError(
                f"{self.table.uri}: row_kind_column is for rows written into a primary-key table"
            )

    def _write_pk_rows(
        self,
        data: pa.Table,
        committer: Committer,
        identifier: int,
        overwrite: Overwrite,
        row_kind_column: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        """:meth:`write_rows` on a primary-key table (a dry run checks the table and counts the rows)."""
        from airflow_lakeformat.core.paimon.write.pk_writes import write_fields, write_primary_key_rows

        started = time.monotonic()
        if dry_run:
            self.check_rows_table()
            return dry_run_fields(data, started)
        replace, partition_filter = _paimon_overwrite(overwrite)
        done = write_primary_key_rows(
            self.table,
            data,
            commit_user=committer.commit_user,
            commit_identifier=identifier,
            overwrite=replace,
            partition_filter=partition_filter,
            row_kind_column=row_kind_column,
        )
        return write_fields(done, time.monotonic() - started)

    def catalog_identifier(self) -> None:
        """A Paimon table is named by its root URI, never by a catalog."""
        return None


@dataclass(frozen=True)
class PaimonCommitted:
    """A Paimon commit of :meth:`PaimonWrites.commit`: the committer's result, the ADD and DELETE entries it
    committed, and how many of this run's files were discarded (the commit had already landed)."""

    result: CommitResult
    added: list[ManifestEntry]
    deletes: list[ManifestEntry]
    discarded: int = 0

    def to_json(self) -> dict[str, Any]:
        """The CLI's document fields: the shared keys (0 added when already committed), then the committer's."""
        landed = self.result.to_json()
        again = self.result.already_committed
        return {
            "snapshotId": landed.pop("snapshotId"),
            "commitKind": landed.pop("commitKind"),
            "commitUser": landed.pop("commitUser"),
            "alreadyCommitted": landed.pop("alreadyCommitted"),
            "filesAdded": 0 if again else len(self.added),
            "filesDeleted": 0 if again else len(self.deletes),
            "rowsAdded": 0 if again else sum(e.file.row_count for e in self.added),
            "filesDiscarded": self.discarded,
            **landed,
        }


def _commit_registered(
    committer: Committer,
    adds: list[ManifestEntry],
    replace: bool,
    partition_filter: Mapping[str, str | None] | None,
    identifier: int,
) -> PaimonCommitted:
    """Commit registered files (APPEND, or OVERWRITE of ``partition_filter``); an overwrite's added files go
    along, so one with rows outside its partition is refused (Paimon does too)."""
    from airflow_lakeformat.core.paimon.snapshot import CommitKind

    kind = CommitKind.OVERWRITE if replace else CommitKind.APPEND
    deletes = committer.overwrite_entries(partition_filter, adds) if replace else []
    result = committer.commit(
        [*deletes, *adds], kind=kind, commit_identifier=identifier, check_conflicts=True
    )
    return PaimonCommitted(result, adds, deletes, 0)
