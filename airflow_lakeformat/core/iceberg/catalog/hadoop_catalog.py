"""A committable pyiceberg ``Catalog`` for path-based tables in the Hadoop layout.

pyiceberg 0.12 can only *read* Hadoop-layout tables (``StaticTable``); this catalog makes them
committable, following Java's ``org.apache.iceberg.hadoop.HadoopTableOperations`` (reference 2.1):

1. ``load_table(root)``: find the current ``v<N>.metadata.json`` (``metadata_files.find_current_version``:
   version hint, listing fallback, walk forward past a stale hint) and decode it with typed errors.
2. ``commit_table``: re-read the current metadata, validate the transaction's requirements against it
   (``TableRequirement.validate`` raises ``CommitFailedException``), apply the updates with pyiceberg's
   ``update_table_metadata`` (which also appends the previous file to ``metadata-log``, capped by
   ``write.metadata.previous-versions-max``), serialise exactly as pyiceberg does, and publish
   ``v<N+1>.metadata.json`` with the core FileIO's ``create_exclusive`` (``os.link`` locally,
   ``If-None-Match: *`` on S3). Java renames a temp file to the final name and fails if it exists; the
   exclusive create is the same guarantee without a rename (which S3 lacks). A file already there means
   another writer committed ``N+1`` first: ``CommitFailedException``, so pyiceberg's retry (or ours in
   ``commit.py``) refreshes and re-applies on the new base.
3. Rewrite ``version-hint.text`` with ``N+1``. Best-effort, as in Java (``writeVersionHint``): the commit
   is already published by step 2; readers walk forward past a stale hint.

Format v3 commits are refused (:class:`UnsupportedWriteVersionError`): pyiceberg 0.12 cannot serialise v3.
``write.metadata.compression-codec=gzip`` names the file ``v<N>.gz.metadata.json`` (Java's naming, which
pyiceberg's serialiser compresses by name); other codecs are refused.

Old metadata files are never deleted here: pyiceberg's ``Table._do_commit`` calls the catalog's
``_delete_old_metadata`` (``write.metadata.delete-after-commit.enabled``); this catalog overrides it with a
no-op, because every table-file deletion belongs to the maintenance deletion module.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchTableError,
)
from pyiceberg.io import FileIO as PyIcebergFileIO
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, CreateTableTransaction, StagedTable, Table, TableProperties
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from airflow_lakeformat.core.iceberg.errors import (
    MAX_WRITE_FORMAT_VERSION,
    IcebergTableNotFoundError,
    ReadOnlyTableError,
    UnsupportedWriteVersionError,
)
from airflow_lakeformat.core.iceberg.metadata import metadata_files
from airflow_lakeformat.core.iceberg.metadata.fileio import (
    pyiceberg_io_properties,
    storage_options_from_properties,
)
from airflow_lakeformat.core.io import FileIO

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def normalise_root(identifier: str | Identifier) -> str:
    """The table root URI for an identifier: the path itself (a tuple is re-joined on dots).

    pyiceberg splits string identifiers on ``.`` (``Catalog.identifier_to_tuple``), so a path comes back
    as a tuple on refresh; joining restores it. Local paths become absolute; trailing slashes go.
    """
    root = identifier if isinstance(identifier, str) else ".".join(identifier)
    root = root.rstrip("/") or "/"
    if "://" not in root:
        root = os.path.abspath(root)
    return root


def hadoop_checksum(data: bytes, bytes_per_checksum: int = 512) -> bytes:
    """The ``.crc`` file Hadoop's ``ChecksumFileSystem`` keeps beside ``data``: ``crc\\0``, the chunk size, then
    one big-endian CRC-32 per chunk (``ChecksumFileSystem.CHECKSUM_VERSION``, ``DataChecksum.Type.CRC32``).

    Example:
        >>> hadoop_checksum(b"1").hex()
        '637263000000020083dcefb7'
    """
    import struct
    import zlib

    chunks = [data[i : i + bytes_per_checksum] for i in range(0, len(data), bytes_per_checksum)] or [b""]
    sums = b"".join(struct.pack(">I", zlib.crc32(chunk)) for chunk in chunks if chunk)
    return b"crc\x00" + struct.pack(">i", bytes_per_checksum) + sums


class HadoopLayoutCatalog(NoopCatalog):
    """Path-identified Iceberg tables in the Hadoop layout, readable and committable.

    The identifier of a table is its root URI (local path, ``file://`` or ``s3://``). Catalog
    properties are pyiceberg FileIO properties (``s3.endpoint``, ...); ``storage_options`` are the core's
    fsspec options and, when given, also fill in the matching pyiceberg properties.

    Args:
        name: The catalog name (only used in messages).
        storage_options: fsspec options for the core FileIO (default: derived from ``properties``).
        **properties: pyiceberg catalog/FileIO properties.

    Example:
        >>> catalog = HadoopLayoutCatalog(storage_options={"key": "k", "secret": "s"})  # doctest: +SKIP
        >>> table = catalog.create_table("s3://bucket/wh/events", schema=arrow_schema)  # doctest: +SKIP
        >>> table.append(arrow_table)  # commits metadata/v2.metadata.json  # doctest: +SKIP
    """

    def __init__(
        self, name: str = "hadoop", storage_options: Mapping[str, Any] | None = None, **properties: str
    ) -> None:
        super().__init__(name, **properties)
        self.storage_options: dict[str, Any] = (
            dict(storage_options)
            if storage_options is not None
            else storage_options_from_properties(properties)
        )
        self._ios: dict[str, tuple[FileIO, str]] = {}
        self._lock = threading.Lock()

    # -- storage --------------------------------------------------------------------------------

    def file_io(self, root: str) -> tuple[FileIO, str]:
        """The core FileIO for a table root and the root's fsspec path (cached per root)."""
        with self._lock:
            if root not in self._ios:
                self._ios[root] = FileIO.for_uri(root, self.storage_options)
            return self._ios[root]

    def _pyiceberg_properties(
        self, root: str, table_properties: Mapping[str, str] = EMPTY_DICT
    ) -> Properties:
        return {
            **pyiceberg_io_properties(root, self.storage_options),
            **self.properties,
            **table_properties,
        }

    def _pyiceberg_io(self, root: str, location: str, table_properties: Mapping[str, str]) -> PyIcebergFileIO:
        return load_file_io(self._pyiceberg_properties(root, table_properties), location=location)

    def _metadata_dir(self, root: str) -> tuple[FileIO, str]:
        io, path = self.file_io(root)
        return io, io.join(path, metadata_files.METADATA_DIR)

    # -- loading --------------------------------------------------------------------------------

    def _load_current(self, root: str) -> tuple[TableMetadata, str, int] | None:
        """(metadata, metadata URI, version) of the current version, or None if there is no table."""
        io, metadata_dir = self._metadata_dir(root)
        current = metadata_files.find_current_version(io, metadata_dir)
        if current is None:
            return None
        location = io.uri(current.path)
        try:
            data = io.read_bytes(current.path)
        except FileNotFoundError:
            # Deleted between listing and reading: only a concurrent drop does that.
            return None
        return metadata_files.parse_table_metadata(data, location), location, current.version

    def _table(self, root: str, metadata: TableMetadata, location: str) -> Table:
        return Table(
            identifier=(root,),
            metadata=metadata,
            metadata_location=location,
            io=self._pyiceberg_io(root, location, metadata.properties),
            catalog=self,
        )

    def load_table(self, identifier: str | Identifier) -> Table:
        """Load the current version of the table rooted at ``identifier``.

        Raises:
            IcebergTableNotFoundError: No ``metadata/v<N>.metadata.json`` under the root (a FileNotFoundError).
            CorruptMetadataError: The current metadata file cannot be decoded.
            UnsupportedFormatError: Its format version is unknown.
        """
        root = normalise_root(identifier)
        loaded = self._load_current(root)
        if loaded is None:
            io, metadata_dir = self._metadata_dir(root)
            why = "the path does not exist" if not io.exists(self.file_io(root)[1]) else None
            raise IcebergTableNotFoundError(
                root,
                why or f"no v<N>.metadata.json in {io.uri(metadata_dir)} and no usable version-hint.text",
            )
        metadata, location, _version = loaded
        return self._table(root, metadata, location)

    def table_exists(self, identifier: str | Identifier) -> bool:
        try:
            self.load_table(identifier)
        except (IcebergTableNotFoundError, NoSuchTableError):
            return False
        return True

    # -- creating -------------------------------------------------------------------------------

    def create_table(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> Table:
        """Create the table at the root ``identifier`` by publishing ``metadata/v1.metadata.json``.

        Args:
            identifier: The table root (``location`` must be omitted or equal to it).
            schema: An Iceberg or Arrow schema.
            location: Ignored unless given, then it must equal the root (Hadoop tables live at their path).
            partition_spec: The partition spec.
            sort_order: The sort order.
            properties: Table properties (``format-version`` 1 or 2).

        Raises:
            TableAlreadyExistsError: (pyiceberg's) a metadata file already exists at the root.
            UnsupportedWriteVersionError: ``format-version`` 3.
        """
        self.create_table_transaction(
            identifier, schema, location, partition_spec, sort_order, properties
        ).commit_transaction()
        return self.load_table(identifier)

    def create_table_transaction(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> CreateTableTransaction:
        root = normalise_root(identifier)
        if location is not None and normalise_root(location) != root:
            raise ValueError(f"a Hadoop-layout table lives at its path: location {location!r} != {root!r}")
        version = int(properties.get(TableProperties.FORMAT_VERSION, TableProperties.DEFAULT_FORMAT_VERSION))
        if version > MAX_WRITE_FORMAT_VERSION:
            raise UnsupportedWriteVersionError(root, version)
        iceberg_schema: Schema = self._convert_schema_if_needed(schema, version)  # type: ignore[arg-type]
        metadata = new_table_metadata(
            location=root,
            schema=iceberg_schema,
            partition_spec=partition_spec,
            sort_order=sort_order,
            properties=properties,
        )
        io, metadata_dir = self._metadata_dir(root)
        staged_location = io.uri(io.join(metadata_dir, metadata_files.hadoop_metadata_name(1)))
        staged = StagedTable(
            identifier=(root,),
            metadata=metadata,
            metadata_location=staged_location,
            io=self._pyiceberg_io(root, staged_location, properties),
            catalog=self,
        )
        return CreateTableTransaction(staged)

    # -- committing -----------------------------------------------------------------------------

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        """Publish ``v<N+1>.metadata.json`` if ``requirements`` hold on the current ``v<N>`` (module docstring).

        Raises:
            CommitFailedException: A requirement does not hold, or another writer published ``v<N+1>`` first.
            CommitStateUnknownException: The S3 write failed in a way that may have published the file.
            UnsupportedWriteVersionError: The result would be a v3 table.
        """
        root = normalise_root(table.name())
        loaded = self._load_current(root)
        base_metadata = loaded[0] if loaded else None
        for requirement in requirements:
            requirement.validate(base_metadata)
        if loaded is None:
            updated = update_table_metadata(
                MetastoreCatalog._empty_table_metadata(), updates, enforce_validation=True
            )
            next_version = 1
        else:
            base_metadata, base_location, base_version = loaded
            updated = update_table_metadata(base_metadata, updates, metadata_location=base_location)
            if updated == base_metadata:
                return CommitTableResponse(metadata=base_metadata, metadata_location=base_location)  # type: ignore[call-arg]
            next_version = base_version + 1
        if updated.format_version > MAX_WRITE_FORMAT_VERSION:
            raise UnsupportedWriteVersionError(root, int(updated.format_version))

        io, metadata_dir = self._metadata_dir(root)
        codec = metadata_files.metadata_codec(updated.properties, root)
        path = io.join(metadata_dir, metadata_files.hadoop_metadata_name(next_version, codec))
        location = io.uri(path)
        data = metadata_files.serialize_table_metadata(updated, location)
        if metadata_files.metadata_file_for_version(io, metadata_dir, next_version) is not None:
            raise CommitFailedException(f"{root}: version {next_version} was committed concurrently")
        try:
            io.create_exclusive(path, data)
        except FileExistsError as exc:
            raise CommitFailedException(
                f"{root}: {location} was created by a concurrent commit; refresh and retry"
            ) from exc
        except OSError as exc:
            if io.is_local:
                raise  # a failed link(2) published nothing
            raise CommitStateUnknownException(f"{location}: publishing failed with {exc!r}") from exc
        self._write_version_hint(io, metadata_dir, next_version)
        return CommitTableResponse(metadata=updated, metadata_location=location)  # type: ignore[call-arg]

    @staticmethod
    def _write_version_hint(io: FileIO, metadata_dir: str, version: int) -> None:
        hint = io.join(metadata_dir, metadata_files.VERSION_HINT)
        data = str(version).encode("ascii")
        try:
            io.write_atomic(hint, data)
            # Hadoop's local file system (Java's HadoopTableOperations writes through it) keeps a checksum
            # beside the hint; left stale, every later Java load logs a ChecksumException and lists metadata/.
            checksum = io.join(metadata_dir, f".{metadata_files.VERSION_HINT}.crc")
            if io.exists(checksum):
                io.write_atomic(checksum, hadoop_checksum(data))
        except Exception as exc:  # the commit has landed; readers walk forward past a stale hint
            log.warning("committed version %d but could not update %s: %r", version, io.uri(hint), exc)

    @staticmethod
    def _delete_old_metadata(io: PyIcebergFileIO, base: TableMetadata, metadata: TableMetadata) -> None:
        """Never delete metadata files on commit (deletion belongs to the maintenance deletion module)."""

    def drop_table(self, identifier: str | Identifier) -> None:
        raise NotImplementedError("dropping a path table deletes files; use the maintenance deletion module")

    def supports_server_side_planning(self) -> bool:
        return False


class ReadOnlyCatalog(NoopCatalog):
    """The catalog of a table opened from a ``*.metadata.json`` file: every commit is refused."""

    def __init__(self, metadata_location: str) -> None:
        super().__init__("read-only")
        self.metadata_location = metadata_location

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        raise ReadOnlyTableError(self.metadata_location)

    def load_table(self, identifier: str | Identifier) -> Table:
        raise ReadOnlyTableError(self.metadata_location)
