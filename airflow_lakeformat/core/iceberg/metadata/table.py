"""An Iceberg table opened for reading and committing: pyiceberg's ``Table`` plus the core's FileIO.

pyiceberg does the catalog work (loading, commits with requirements) and owns the metadata model;
this wrapper adds what the core needs around it: a display name for messages and documents, the
core's fsspec :class:`~airflow_lakeformat.core.io.FileIO` on the table root (listings and exclusive
creates, which pyiceberg's FileIO lacks), snapshot/ref resolution with typed errors, a read-only flag
for tables opened from a ``*.metadata.json`` file, and the thread pool manifest reads fan out on
(the same shape as the Paimon ``core/paimon/table.py`` ``parallel_map``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pyiceberg.table import Table as PyIcebergTable
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.errors import SnapshotNotFoundError, TagNotFoundError
from airflow_lakeformat.core.iceberg.errors import (
    MAX_WRITE_FORMAT_VERSION,
    ReadOnlyTableError,
    UnsupportedWriteVersionError,
)
from airflow_lakeformat.core.io import FileIO

T = TypeVar("T")
DEFAULT_READ_PARALLELISM = 16


class IcebergTable:
    """One Iceberg table: the pyiceberg ``Table``, the core FileIO on its root, and a name for messages.

    Create it with :func:`airflow_lakeformat.core.iceberg.catalog.catalog.open_table` (or ``open_path_table`` /
    ``open_catalog_table``), not directly.

    Attributes:
        table: The pyiceberg table (its ``io`` reads manifests and data files).
        io: The core FileIO on the table's storage.
        root: The fsspec path of the table root (``<root>/metadata`` holds the metadata files).
        name: What documents and messages call the table (the URI typed, or ``catalog:namespace.table``).
        read_only: True for tables opened from a ``*.metadata.json`` file.

    Example:
        >>> table = open_table("/warehouse/db/events")  # doctest: +SKIP
        >>> table.snapshot(ref="nightly").snapshot_id  # doctest: +SKIP
    """

    def __init__(
        self,
        table: PyIcebergTable,
        io: FileIO,
        root: str,
        name: str,
        *,
        read_only: bool = False,
        read_parallelism: int = DEFAULT_READ_PARALLELISM,
    ) -> None:
        self.table = table
        self.io = io
        self.root = root
        self.name = name
        self.read_only = read_only
        self.read_parallelism = max(1, read_parallelism)

    def __repr__(self) -> str:
        return f"IcebergTable({self.name!r}, metadata={self.metadata_location!r})"

    # -- metadata -------------------------------------------------------------------------------

    @property
    def metadata(self) -> TableMetadata:
        return self.table.metadata

    @property
    def metadata_location(self) -> str:
        return self.table.metadata_location

    @property
    def format_version(self) -> int:
        return int(self.table.metadata.format_version)

    @property
    def uri(self) -> str:
        """The table root as a user would type it."""
        return self.io.uri(self.root)

    def refresh(self) -> IcebergTable:
        """Reload the current metadata from the catalog (a no-op for read-only tables)."""
        if not self.read_only:
            self.table.refresh()
        return self

    def check_writable(self) -> None:
        """Raise unless a commit to this table can succeed in principle.

        Raises:
            ReadOnlyTableError: The table was opened from a metadata file.
            UnsupportedWriteVersionError: A v3 table (pyiceberg 0.12 cannot write v3 manifests or metadata).
        """
        if self.read_only:
            raise ReadOnlyTableError(self.metadata_location)
        if self.format_version > MAX_WRITE_FORMAT_VERSION:
            raise UnsupportedWriteVersionError(self.metadata_location, self.format_version)

    # -- snapshots and refs ---------------------------------------------------------------------

    def snapshot(self, snapshot_id: int | None = None, ref: str | None = None) -> Snapshot | None:
        """The snapshot by id, the head of a branch or tag, or the current one (None for an empty table).

        Args:
            snapshot_id: A snapshot id (exclusive with ``ref``).
            ref: A branch or tag name.

        Raises:
            SnapshotNotFoundError: No snapshot with that id, or the ref points to a missing snapshot.
            TagNotFoundError: No branch or tag of that name.
            ValueError: Both arguments given.
        """
        metadata = self.metadata
        if snapshot_id is not None and ref is not None:
            raise ValueError("give a snapshot id or a ref, not both")
        if ref is not None:
            target = metadata.refs.get(ref)
            if target is None:
                if ref == "main" and metadata.current_snapshot_id is None:
                    return None
                known = ", ".join(sorted(metadata.refs)) or "none"
                raise TagNotFoundError(f"{self.name}: no branch or tag named {ref!r} (refs: {known})")
            snapshot_id = target.snapshot_id
        elif snapshot_id is None:
            if metadata.current_snapshot_id is None or metadata.current_snapshot_id == -1:
                return None
            snapshot_id = metadata.current_snapshot_id
        found = metadata.snapshot_by_id(snapshot_id)
        if found is None:
            raise SnapshotNotFoundError(f"{self.name}: snapshot {snapshot_id} does not exist")
        return found

    # -- parallel reads -------------------------------------------------------------------------

    def parallel_imap(self, fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]:
        """``map`` over a thread pool, lazily and in input order (sequential for one worker)."""
        if len(items) <= 1 or self.read_parallelism == 1:
            yield from map(fn, items)
            return
        with ThreadPoolExecutor(max_workers=min(self.read_parallelism, len(items))) as pool:
            yield from pool.map(fn, items)

    def parallel_map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """Like :meth:`parallel_imap`, collected into a list."""
        return list(self.parallel_imap(fn, items))
