"""The write half of the facade: exactly-once commits of staged files and of rows, for a Paimon and an Iceberg table.

``table_writes(table)`` gives the facade table's writer: :class:`PaimonWrites` or :class:`IcebergWrites`. Both
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from airflow_lakeformat.core.errors import RegisterError, UnsupportedFormatError, UsageError
from airflow_lakeformat.core.table_maintenance import COMMIT_USER_PROPERTY

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
    from airflow_lakeformat.core.paimon.manifest import ManifestEntry
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable

__all__ = [
    "COMMIT_IDENTIFIER_PROPERTY",
    "DYNAMIC_OVERWRITE",
    "ENTRY_FORMAT",
    "IcebergWrites",
    "PaimonCommitted",
    "PaimonWrites",
    "entries_from_xcom",
    "entries_to_xcom",
    "overwrite_filter",
    "overwrite_text",
    "partition_filters",
    "table_writes",
]

ENTRY_FORMAT = "lakeformat.manifest-entry.v1"
#: ``overwrite=DYNAMIC_OVERWRITE`` (or True): replace the partitions the written rows fall into (Iceberg).
DYNAMIC_OVERWRITE = "dynamic"
Overwrite = Mapping[str, Any] | str | bool | None
COMMIT_IDENTIFIER_PROPERTY = "lakeformat.commit-identifier"
Staged = str | Mapping[str, Any]
ReadRows = Callable[[], "pa.Table"]
_EMPTY = {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0}


def table_writes(table: PaimonTable | IcebergLakeTable) -> PaimonWrites | IcebergWrites:
    """The writer of a facade table (``open_table(...)``): the one its class names (``table.writes()``)."""
    return table.writes()


def overwrite_filter(value: Overwrite) -> tuple[bool, dict[str, str | None] | None]:
    """(overwrite?, partition filter): ``"*"`` is the whole table, ``"k=v,k2=v2"`` or a dict one partition.

    Raises:
        ValueError: a malformed spec, or a dynamic overwrite (``True``/``"dynamic"``), which names no partition.
    """
    from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec

    if value is None or value is False or value == {} or (isinstance(value, str) and not value.strip()):
        return False, None
    if _is_dynamic(value):
        raise UsageError(
            "overwrite: a dynamic partition overwrite (the partitions of the rows) is for Iceberg tables; name "
            "the Paimon partition (k=v[,k=v]) or '*'"
        )
    return True, parse_overwrite_spec(cast("Mapping[str, Any] | str", value))


_paimon_overwrite = overwrite_filter  # the function's name, inside methods whose parameter shadows it


def _is_dynamic(value: Overwrite) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == DYNAMIC_OVERWRITE)


def iceberg_overwrite(value: Overwrite, row_filter: str | None = None) -> tuple[bool, str | None]:
    """(overwrite?, Iceberg filter text or None for a dynamic overwrite) of an Iceberg write's arguments.

    Raises:
        ValueError: both an overwrite spec and a filter, or a malformed spec.
    """
    from airflow_lakeformat.core.iceberg.write.overwrite_scope import filter_from_values

    if row_filter is not None and not row_filter.strip():
        raise UsageError("overwrite_filter: an empty filter (use '*' for the whole table)")
    wanted = (
        value is not None
        and value is not False
        and value != {}
        and not (isinstance(value, str) and not value.strip())
    )
    if row_filter is not None:
        if wanted and not _is_dynamic(value):
            raise UsageError(
                "overwrite and overwrite_filter: give one of them (--overwrite or --overwrite-filter)"
            )
        return True, row_filter
    if not wanted:
        return False, None
    if _is_dynamic(value):
        return True, None
    replace, partition = overwrite_filter(value)
    return replace, "*" if partition is None else filter_from_values(partition)


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
    ) -> dict[str, Any]:
        """Write ``rows`` as data files and commit them once. ``rows`` may be a function returning them, not
        called when an earlier try's snapshot holds the write. A dry run reads and counts the rows, writes
        nothing. ``overwrite_filter`` is refused (``ValueError``: Iceberg only)."""
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
            return {**_EMPTY, "snapshotId": landed.id, "alreadyCommitted": True}
        data = rows() if callable(rows) else rows
        if dry_run:
            return _dry_run(data, started)
        entries = write_data_files(self.table, data)
        if not entries and not (replace and committer.overwrite_entries(partition_filter)):
            return {**_EMPTY, "snapshotId": None, "alreadyCommitted": False}
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
                **_EMPTY,
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


def _dry_run(data: pa.Table, started: float) -> dict[str, Any]:
    return {
        **_EMPTY,
        "snapshotId": None,
        "alreadyCommitted": False,
        "sourceRows": data.num_rows,
        "durationSeconds": round(time.monotonic() - started, 3),
    }


# -- Iceberg -----------------------------------------------------------------------------------------


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
            return {**_EMPTY, **_snapshot_fields(landed), "alreadyCommitted": True}
        data = rows() if callable(rows) else rows
        properties = _commit_properties(commit_user, commit_identifier)
        if not replace:
            if dry_run:
                return _dry_run(data, started)
            return self._written(append(self.table, data, snapshot_properties=properties), data, started)
        result = overwrite_rows(
            self.table, data, row_filter=row_filter, snapshot_properties=properties, dry_run=dry_run
        )
        if result.snapshot_id is None:
            nothing = (
                _dry_run(data, started)
                if dry_run
                else {**_EMPTY, "snapshotId": None, "alreadyCommitted": False}
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
