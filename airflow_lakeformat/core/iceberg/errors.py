"""Iceberg flavours of the core's typed errors, and the one place pyiceberg's exceptions are translated.

The core's :mod:`airflow_lakeformat.core.errors` classes were written for Paimon (``TableNotFoundError``
says "not a Paimon table"). The subclasses here keep the class hierarchy, so exit codes
(``errors.exit_code_for``) and ``except`` clauses that catch the base classes keep working, and only
change the wording. Nothing here imports a Paimon module.
"""

from __future__ import annotations

from airflow_lakeformat.core.errors import (
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFormatError,
)

#: The highest Iceberg ``format-version`` this release reads (the spec's v1, v2 and v3).
MAX_READ_FORMAT_VERSION = 3
#: The highest ``format-version`` pyiceberg 0.12 can commit to (it refuses to write v3 metadata).
MAX_WRITE_FORMAT_VERSION = 2


class IcebergTableNotFoundError(TableNotFoundError):
    """The location or catalog identifier does not name an Iceberg table."""

    def __init__(self, location: str, reason: str) -> None:
        # Bypass TableNotFoundError's Paimon wording, keep its attributes.
        self.location = location
        self.reason = reason
        FileNotFoundError.__init__(self, f"{location}: not an Iceberg table ({reason})")

    def __str__(self) -> str:
        return f"{self.location}: not an Iceberg table ({self.reason})"


class IcebergTableAlreadyExistsError(TableAlreadyExistsError):
    """``create_table`` found an Iceberg table at the location or under the catalog identifier."""

    def __init__(self, location: str, reason: str = "an Iceberg table already exists here") -> None:
        # Bypass TableAlreadyExistsError's Paimon wording, keep its attribute.
        self.location = location
        self.reason = reason
        FileExistsError.__init__(self, f"{location}: {reason}")

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


class ReadOnlyTableError(UnsupportedFormatError):
    """A commit was attempted on a table opened read-only (from a ``*.metadata.json`` file)."""

    def __init__(self, path: str) -> None:
        super().__init__(
            path,
            "the table was opened from a metadata file and is read-only; open the table root "
            "(Hadoop layout) or the catalog table to commit",
        )


class UnsupportedWriteVersionError(UnsupportedFormatError):
    """The table's format version can be read but not written by this release (v3 under pyiceberg 0.12)."""

    def __init__(self, path: str, format_version: int) -> None:
        self.format_version = format_version
        super().__init__(
            path,
            f"format-version {format_version} tables are read-only here (pyiceberg 0.12 writes "
            f"format versions 1 and {MAX_WRITE_FORMAT_VERSION} only)",
        )


class MissingWriteDependencyError(UnsupportedFormatError):
    """pyiceberg needs an optional package this installation lacks to write to this table: nothing was written.

    The ``bucket``, ``truncate``, ``year``, ``month``, ``day`` and ``hour`` transforms of Arrow rows are
    ``pyiceberg-core``'s (a dependency of this package; missing only where it has no wheel); identity
    partitions need nothing more.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.detail = detail
        super().__init__(
            path,
            f"this append needs an optional pyiceberg package ({detail}); nothing was written. Install "
            "pyiceberg-core, or register Parquet files that each hold one partition with `commit --add`",
        )
