"""The exceptions the core raises.

Every error names the file or object it is about, so that a message read in a task log or on a
terminal is enough to find the problem. Each subclass also derives from the builtin a caller would
naturally catch (``FileNotFoundError``, ``ValueError``, ``LookupError``).
"""

from __future__ import annotations

from datetime import datetime, timezone


class LakeformatError(Exception):
    """Base class of every error raised by airflow-lakeformat."""


class TableNotFoundError(LakeformatError, FileNotFoundError):
    """The path is not the root of a Paimon table (it has no ``schema/schema-N`` file)."""

    def __init__(self, location: str, reason: str = "no schema/schema-<N> file found") -> None:
        self.location = location
        super().__init__(f"{location}: not a Paimon table ({reason})")


class UnknownTableFormatError(TableNotFoundError):
    """Neither a Paimon nor an Iceberg table at the location (``core.formats.detect_format``)."""

    def __init__(self, location: str, reason: str) -> None:
        self.location = location
        self.reason = reason
        FileNotFoundError.__init__(self, f"{location}: no Paimon or Iceberg table here ({reason})")

    def __str__(self) -> str:
        return f"{self.location}: no Paimon or Iceberg table here ({self.reason})"


class CorruptMetadataError(LakeformatError, ValueError):
    """A metadata file exists but cannot be decoded, or decodes to something Paimon would reject."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class MissingMetadataError(CorruptMetadataError, FileNotFoundError):
    """A metadata file that the table's metadata refers to does not exist."""

    def __init__(self, path: str, referenced_by: str | None = None) -> None:
        problem = "file does not exist"
        if referenced_by:
            problem += f" (referenced by {referenced_by})"
        super().__init__(path, problem)


class UnsupportedFormatError(LakeformatError, ValueError):
    """The table uses a format version or feature this release refuses to touch."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: unsupported format: {problem}")


class SnapshotNotFoundError(LakeformatError, LookupError):
    """The requested snapshot (by id or time) does not exist in the table."""


class TagNotFoundError(LakeformatError, LookupError):
    """The requested tag does not exist in the table."""


class BranchNotFoundError(LakeformatError, LookupError):
    """The requested branch does not exist in the table (the message lists the ones that do)."""


class DuplicateFileError(CorruptMetadataError):
    """A manifest adds a data file that an earlier manifest of the same snapshot already added.

    Paimon Java refuses such a table ("Trying to add file ... which is already added"); so do we.
    """


class CodecUnavailableError(LakeformatError, RuntimeError):
    """A manifest uses a compression codec whose Python library is not installed."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: cannot decompress: {detail}")


class UnsupportedStorageError(LakeformatError, OSError):
    """The store cannot create a file only if absent, so concurrent commits could overwrite each other."""

    def __init__(self, protocol: str) -> None:
        super().__init__(
            f"{protocol}:// has no create-if-absent primitive, so two writers could publish the same "
            "snapshot id; pass an explicit unsafe opt-in (single writer only) or use a local or S3 path"
        )


class TableAlreadyExistsError(LakeformatError, FileExistsError):
    """``create_table`` found a schema at the location."""

    def __init__(self, location: str) -> None:
        self.location = location
        super().__init__(f"{location}: a Paimon table already exists here")


class UsageError(LakeformatError, ValueError):
    """The request is wrong as given (conflicting flags, a malformed schema or partition spec, a name that
    needs a catalog): refused before anything was created or changed. Exit code 2, as a usage mistake."""


class PolicyError(UsageError):
    """A health policy (``core/health/policy.py``) is refused: unreadable, unparsable, or a key that is wrong.

    The message names the policy's source and the key path (``/tables/db.events/thresholds/min-small-files``)."""

    def __init__(self, source: str, message: str, path: str = "") -> None:
        self.source = source
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"health policy {source}: {where}{message}")


class TagAlreadyExistsError(UsageError, FileExistsError):
    """A tag of that name exists (create with ``ignore_if_exists`` or ``replace`` to accept it); nothing
    was changed. A usage mistake (exit code 2), as Java's "Tag name already exists"."""


class CommitConflictError(LakeformatError):
    """The commit contradicts the current table (a DELETE of a file that is not live, a duplicate ADD).

    Retrying cannot help: the caller's view of the table is stale. Nothing was published.
    """


class CompactionConflictError(CommitConflictError):
    """A compaction's buckets changed under it (Paimon's section 4.3 rules): an input is no longer live, a
    concurrent compaction added a file above level 0, a new level-0 file is not newer than the inputs, or the
    partition's bucket count changed. ``buckets`` maps ``(partition, bucket)`` to the reason. Nothing of
    those buckets was published."""

    def __init__(self, message: str, buckets: dict[tuple[bytes, int], str] | None = None) -> None:
        super().__init__(message)
        self.buckets = dict(buckets or {})


class CommitRetriesExhaustedError(LakeformatError):
    """Other writers kept taking the snapshot id; nothing of this commit was published."""


class CommitStateUnknownError(LakeformatError):
    """Publishing failed in a way that leaves it unknown whether the snapshot landed.

    Re-run the commit with the same commit user and identifier: it finds a landed snapshot and
    does not commit twice. Files written for the commit are kept, because they may be live.
    """


class RegisterError(LakeformatError, ValueError):
    """The input does not fit the table (exit code 11): a file in the wrong place, a column the table lacks,
    a type that could change values if converted, a value its column cannot hold (``SourceValueError``),
    a table this write cannot serve. Raised before anything is committed; nothing the write made is kept."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class SourceValueError(RegisterError):
    """A value of an input file cannot be stored in its column without changing it (exit code 11).

    Raised by ``core/sources`` before anything is written. ``row`` counts data rows from 1 (a CSV header is
    not a row); in a JSON-lines file it is the line number, and the message says ``line``; None where the
    row is not known (rows Spark read).
    """

    def __init__(self, path: str, row: int | None, column: str, problem: str, *, unit: str = "row") -> None:
        self.row = row
        self.column = column
        where = f"column {column!r}" if row is None else f"{unit} {row}, column {column!r}"
        if column == "-":
            where = f"{unit} {row}"
        super().__init__(path, f"{where}: {problem}")


class MaintenanceRefusedError(LakeformatError, ValueError):
    """A maintenance request that would be unsafe (or that this release cannot do safely) was refused.

    Raised before anything is deleted: a too-short ``older_than``, retention settings Paimon rejects, or a
    table feature (decoupled changelogs, index files in bucket directories) the deletion code does not
    handle yet. Never half-handled.
    """

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(f"{location}: refused: {problem}")
        self.location = location
        self.problem = problem


class PlanOutdatedError(LakeformatError):
    """The table changed since a maintenance plan was made, in a way that invalidates the plan.

    Nothing was deleted; make a new plan.
    """


class DeletionFailedError(LakeformatError, OSError):
    """Some files could not be deleted after retries. ``report`` says what was and was not deleted."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class LockHeldError(LakeformatError):
    """Another process holds the table's maintenance lock (``core/maintenance/lock.py``).

    Nothing was done. Wait for the holder to finish (or its lease to expire) and run again.
    """

    def __init__(
        self,
        location: str,
        owner: str,
        expires_at_millis: int | None,
        lease_path: str,
        *,
        expired: bool = False,
    ) -> None:
        self.location = location
        self.owner = owner
        self.expires_at_millis = expires_at_millis
        self.lease_path = lease_path
        if expires_at_millis is None:
            until = ""
        else:
            stamp = datetime.fromtimestamp(expires_at_millis / 1000, tz=timezone.utc).isoformat(
                timespec="seconds"
            )
            until = f" (lease expired at {stamp})" if expired else f" until {stamp} unless released earlier"
        what = "lost its maintenance lease" if expired else "maintenance lock is held"
        super().__init__(f"{location}: {what} by {owner!r}{until}; lease file {lease_path}")


class AmbiguousSequenceError(MaintenanceRefusedError):
    """Two records of one primary key have the same sequence (sequence fields and ``_SEQUENCE_NUMBER``).

    Paimon 1.x breaks such ties arbitrarily (by heap order), so readers may have shown either record; a
    compaction would freeze one answer. Refused before anything is written. ``key`` names the key.
    """

    def __init__(self, location: str, key: str, sequence: str) -> None:
        self.key = key
        self.sequence = sequence
        super().__init__(
            location,
            f"two records of key {key} share the sequence {sequence}; which one wins is undefined in Paimon",
        )


# Process exit codes, shared by the `lakeformat` CLI and the Spark jobs so scripts and the Airflow
# operators can tell failures apart the same way whichever runs the operation.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_TABLE, EXIT_CORRUPT, EXIT_UNSUPPORTED, EXIT_NOT_FOUND = (
    0,
    1,
    2,
    3,
    4,
    5,
    6,
)
EXIT_COMMIT_REFUSED, EXIT_COMMIT_UNKNOWN, EXIT_MAINTENANCE_REFUSED, EXIT_DELETE_FAILED = 7, 8, 9, 10
EXIT_INPUT_REFUSED = 11  # the input does not fit the table (a value, a column, a file): nothing written

# Checked in order, so a subclass listed before its base wins (UnsupportedFormatError is no
# CorruptMetadataError, but MissingMetadataError is one).
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (UsageError, EXIT_USAGE),
    (TableNotFoundError, EXIT_NO_TABLE),
    (UnsupportedFormatError, EXIT_UNSUPPORTED),
    (CorruptMetadataError, EXIT_CORRUPT),
    (SnapshotNotFoundError, EXIT_NOT_FOUND),
    (TagNotFoundError, EXIT_NOT_FOUND),
    (BranchNotFoundError, EXIT_NOT_FOUND),
    (CommitConflictError, EXIT_COMMIT_REFUSED),
    (CommitRetriesExhaustedError, EXIT_COMMIT_REFUSED),
    (CommitStateUnknownError, EXIT_COMMIT_UNKNOWN),
    (MaintenanceRefusedError, EXIT_MAINTENANCE_REFUSED),
    (PlanOutdatedError, EXIT_MAINTENANCE_REFUSED),
    (DeletionFailedError, EXIT_DELETE_FAILED),
    (RegisterError, EXIT_INPUT_REFUSED),
)


def exit_code_for(kind: type[BaseException]) -> int:
    """The exit code for an error class (1 for anything not listed)."""
    for cls, code in EXIT_CODES:
        if issubclass(kind, cls):
            return code
    return EXIT_ERROR
