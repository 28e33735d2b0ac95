"""Writing rewritten data manifests: full entries read back, EXISTING entries written, cut at a target size.

Reading: a manifest's bytes are fetched through pyiceberg's FileIO (``live_files.fetch_manifest``, on the
table's thread pool) and decoded with pyiceberg's own reader (what ``ManifestFile.fetch_manifest_entry``
does), which keeps every ``data_file`` field a rewrite must carry over (metrics, bounds, key metadata, sort
order) and applies inheritance (spec "Sequence Number Inheritance", reference 1.5): ``snapshot_id`` and
both sequence numbers come back *resolved*. One difference: pyiceberg converts each file's Avro schema and
resolves a reader tree for it on every file (about 3 ms, most of the time of a small manifest); here the
resolved reader is kept per distinct header schema (a table's manifests share a handful), as
:class:`_ReusingAvroFile`.

Writing (:class:`RollingManifestWriter`), like Java's ``RollingManifestWriter`` and
``ManifestWriter.existing(file, snapshotId, dataSeq, fileSeq)``:

1. Every entry is written with status EXISTING and its resolved ``snapshot_id``, data and file sequence
   numbers written explicitly (never left to inheritance, reference 1.5 "Writers must copy the inherited
   value").
2. The Avro container is pyiceberg's (``write_manifest(...).new_writer()``: header, schemas, field ids,
   codec from ``write.avro.compression-codec``), but blocks are framed here: entries are encoded one by one
   and grouped into blocks of about 64 KiB (pyiceberg writes one block per entry, which compresses badly).
3. Before a block goes into the current file, its exact framed size is known; if the file would pass the
   target size, the largest prefix of the block that fits is written (binary search over prefixes), the
   file is finished and the rest starts the next one. So every manifest stays at or under the target,
   except a manifest holding a single entry larger than the target on its own. (Java checks the length
   every 250 rows and may pass the target slightly.)
4. Finished manifests are handed to a :class:`ManifestStore`: in a real run it writes the bytes to the
   table's metadata location (pyiceberg's location provider, the file names pyiceberg's snapshot
   producer uses) and remembers them, so that a failed attempt can discard them; in a dry run it only
   counts, so a dry run reports exactly the sizes a real run writes.

Format v1 and v2 only: pyiceberg 0.12 cannot write v3 manifests (its v2 read schema would also drop the
v3 fields ``first_row_id``/``referenced_data_file``/``content_offset``).
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import _SCHEMA_KEY, META_SCHEMA, AvroFile, AvroFileHeader, AvroOutputFile
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import construct_reader, resolve_reader
from pyiceberg.io import InputFile, OutputFile, OutputStream
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    _inherit_from_manifest,
    construct_partition_summaries,
    write_manifest,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.metadata.avro_guard import check_container
from airflow_lakeformat.core.iceberg.metadata.live_files import BytesInputFile, fetch_manifest
from airflow_lakeformat.core.iceberg.metadata.manifests import AVRO_DECODE_ERRORS
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

UNASSIGNED_SEQ = -1
DEFAULT_BLOCK_BYTES = 64 * 1024
_SYNC_SIZE = 16
#: Position of ``split_offsets`` (field 132) in pyiceberg's ``DataFile`` records (read with the v2 schema).
SPLIT_OFFSETS_POSITION = next(
    i for i, f in enumerate(DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields) if f.field_id == 132
)


# -- reading ---------------------------------------------------------------------------------------


# What ``ManifestFile.fetch_manifest_entry`` reads with (pyiceberg 0.12).
_READ_SCHEMA = MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION]
_READ_TYPES: dict[int, Any] = {-1: ManifestEntry, 2: DataFile}
_READ_ENUMS: dict[int, Any] = {0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}
_HEADER_READER = construct_reader(META_SCHEMA, {-1: AvroFileHeader})
#: Header schema JSON -> the reader pyiceberg resolves for it against ``_READ_SCHEMA``. Readers hold no
#: per-file state (``Block`` keeps the position), so one serves every file with that schema.
_READERS: dict[str, Reader] = {}
_MAX_READERS = 512


class _ReusingAvroFile(AvroFile[ManifestEntry]):
    """pyiceberg's ``AvroFile`` with the manifest-entry read schema, reusing the reader resolved for a
    header schema it has seen before (pyiceberg converts and resolves it again for every file)."""

    def __init__(self, input_file: InputFile) -> None:
        super().__init__(input_file, _READ_SCHEMA, _READ_TYPES, _READ_ENUMS)

    def __enter__(self) -> _ReusingAvroFile:
        with self.input_file.open() as f:
            self.decoder = new_decoder(f.read())
        self.header = _HEADER_READER.read(self.decoder)
        key = self.header.meta.get(_SCHEMA_KEY)
        reader = None if key is None else _READERS.get(key)
        if reader is None:
            self.schema = self.header.get_schema()
            reader = resolve_reader(self.schema, _READ_SCHEMA, _READ_TYPES, _READ_ENUMS)
            if key is not None and len(_READERS) < _MAX_READERS:
                _READERS[key] = reader
        self.reader = reader
        self.block = None
        return self


def decode_entries(manifest: ManifestFile, data: bytes) -> list[ManifestEntry]:
    """The live (ADDED/EXISTING) entries of one manifest, inheritance applied (pyiceberg's reader, as
    ``ManifestFile.fetch_manifest_entry(discard_deleted=True)`` reads them).

    Raises:
        CorruptMetadataError: The bytes are not a readable manifest (its framing is checked first:
            ``avro_guard``).
    """
    check_container(data, manifest.manifest_path, "manifest")
    try:
        with _ReusingAvroFile(BytesInputFile(manifest.manifest_path, data)) as reader:
            return [
                _inherit_from_manifest(entry, manifest)
                for entry in reader
                if entry.status != ManifestEntryStatus.DELETED
            ]
    except AVRO_DECODE_ERRORS as exc:
        raise CorruptMetadataError(
            manifest.manifest_path, f"not a valid manifest ({type(exc).__name__}: {exc})"
        ) from exc


def read_entries(
    table: IcebergTable, manifests: Sequence[ManifestFile], referenced_by: str
) -> Iterator[tuple[ManifestFile, list[ManifestEntry]]]:
    """(manifest, its live entries) in input order; bytes fetched on the table's thread pool.

    Raises:
        MissingMetadataError: A manifest is missing.
        CorruptMetadataError: One cannot be decoded.
    """
    fetched = table.parallel_imap(lambda m: fetch_manifest(table, m, referenced_by), list(manifests))
    for manifest, data in zip(manifests, fetched, strict=True):
        yield manifest, decode_entries(manifest, data)


def existing_entry(entry: ManifestEntry) -> ManifestEntry:
    """The entry as EXISTING, with its resolved snapshot id and sequence numbers written explicitly."""
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.EXISTING,
        snapshot_id=entry.snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=entry.data_file,
    )


def clear_split_offsets(entry: ManifestEntry) -> None:
    """Set ``split_offsets`` of the entry's data file to null (Iceberg's fix for invalid lists, #8860)."""
    entry.data_file[SPLIT_OFFSETS_POSITION] = None


# -- storing ---------------------------------------------------------------------------------------


class ManifestStore:
    """Where finished manifests (and the manifest list) go: the table's metadata location, or nowhere.

    Args:
        table: The table (pyiceberg FileIO and location provider).
        metadata: The metadata the attempt is based on (its properties choose the location provider).
        dry_run: Only name and count the files; write nothing.

    Attributes:
        written: Locations written so far (empty in a dry run), for discarding a failed attempt.
    """

    def __init__(self, table: IcebergTable, metadata: TableMetadata, *, dry_run: bool) -> None:
        from pyiceberg.table.locations import load_location_provider

        self._io = table.table.io
        self._locations = load_location_provider(metadata.location, metadata.properties)
        self.dry_run = dry_run
        self.commit_uuid = uuid.uuid4()
        self._counter = 0
        self.written: list[str] = []

    def manifest_location(self) -> str:
        """A new manifest's location: ``<metadata>/<commit-uuid>-m<N>.avro`` (pyiceberg/Java naming)."""
        location = self._locations.new_metadata_location(f"{self.commit_uuid}-m{self._counter}.avro")
        self._counter += 1
        return location

    def manifest_list_location(self, snapshot_id: int, attempt: int) -> str:
        """``<metadata>/snap-<id>-<attempt>-<commit-uuid>.avro`` (Java ``SnapshotProducer`` naming)."""
        return self._locations.new_metadata_location(f"snap-{snapshot_id}-{attempt}-{self.commit_uuid}.avro")

    def put(self, location: str, data: bytes) -> None:
        """Write ``data`` at ``location`` (nothing in a dry run); refuses to overwrite."""
        if self.dry_run:
            return
        self.written.append(location)
        with self._io.new_output(location).create(overwrite=False) as stream:
            stream.write(data)


class _KeptOpenBytesIO(io.BytesIO):
    """A BytesIO that ``close`` leaves readable (pyiceberg's Avro writers close their stream on exit)."""

    def close(self) -> None:
        pass


class MemoryOutputFile(OutputFile):
    """An OutputFile writing into memory (pyiceberg's Avro writers write headers and lists to it)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.buffer = _KeptOpenBytesIO()

    def __len__(self) -> int:
        return len(self.buffer.getbuffer())

    def exists(self) -> bool:
        return False

    def to_input_file(self) -> InputFile:
        return BytesInputFile(self.location, self.buffer.getvalue())

    def create(self, overwrite: bool = False) -> OutputStream:
        return self.buffer


def _varint(n: int) -> bytes:
    """Avro ``long``: zig-zag, then base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def writer_schema(spec: PartitionSpec, metadata: TableMetadata) -> Schema:
    """The schema to write a manifest of ``spec`` with: the current schema, else the newest one that still
    has every source column of the spec (a spec on a since-dropped column)."""
    current = metadata.schema()
    candidates = [current, *sorted(metadata.schemas, key=lambda s: -s.schema_id)]
    for schema in candidates:
        try:
            spec.partition_type(schema)
        except (ValueError, KeyError):
            continue
        return schema
    return current


class _OpenManifest:
    """One manifest being written into memory: header written, blocks appended, counts kept."""

    def __init__(self, writer: ManifestWriter, output: MemoryOutputFile) -> None:
        self.location = output.location
        self.writer = writer
        self.output = output
        self.avro: AvroOutputFile[ManifestEntry] = writer.new_writer()
        self.avro.__enter__()  # writes the header into the buffer
        self.codec = self.avro.compression_codec()
        self.entries = 0
        self.existing_files = 0
        self.existing_rows = 0
        self.min_sequence_number: int | None = None
        self.partitions: list[Record] = []

    @property
    def size(self) -> int:
        return len(self.output)

    def frame(self, encoded: Sequence[bytes]) -> bytes:
        """One Avro block of pre-encoded records: count, byte length, (compressed) content, sync marker."""
        content = b"".join(encoded)
        if self.codec is not None:
            content, _length = self.codec.compress(content)
        return b"".join((_varint(len(encoded)), _varint(len(content)), content, self.avro.sync_bytes))

    def append(self, block: bytes, entries: Sequence[ManifestEntry]) -> None:
        self.output.buffer.write(block)
        for entry in entries:
            self.entries += 1
            self.existing_files += 1
            self.existing_rows += entry.data_file.record_count
            self.partitions.append(entry.data_file.partition)
            seq = entry.sequence_number
            if seq is not None and (self.min_sequence_number is None or seq < self.min_sequence_number):
                self.min_sequence_number = seq


class RollingManifestWriter:
    """Writes EXISTING entries of one spec into manifests of at most ``target_size_bytes`` each.

    Args:
        metadata: The table metadata (format version, schemas, properties).
        spec: The partition spec every entry belongs to.
        snapshot_id: The id of the snapshot that will commit the manifests (``added_snapshot_id``).
        store: Where finished manifests go.
        target_size_bytes: Cut manifests at this size (None: never cut, one manifest).
        block_bytes: Uncompressed bytes per Avro block.

    Example:
        >>> writer = RollingManifestWriter(metadata, spec, snapshot_id, store, target_size_bytes=8 << 20)  # doctest: +SKIP
        >>> for entry in entries:  # doctest: +SKIP
        ...     writer.add(existing_entry(entry))
        >>> manifests = writer.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        metadata: TableMetadata,
        spec: PartitionSpec,
        snapshot_id: int,
        store: ManifestStore,
        *,
        target_size_bytes: int | None,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
    ) -> None:
        version = int(metadata.format_version)
        if version not in (1, 2):
            raise ValueError(f"cannot write format-version {version} manifests")
        self.format_version = version
        self.spec = spec
        self.schema = writer_schema(spec, metadata)
        self.snapshot_id = snapshot_id
        self.store = store
        self.target = target_size_bytes
        self.block_bytes = max(
            1, block_bytes if target_size_bytes is None else min(block_bytes, target_size_bytes)
        )
        self.codec_name: Any = metadata.properties.get("write.avro.compression-codec", "gzip")
        self.manifests: list[ManifestFile] = []
        self._current: _OpenManifest | None = None
        self._pending: list[tuple[bytes, ManifestEntry]] = []
        self._pending_bytes = 0
        self._encoder_buffer = io.BytesIO()
        self._encoder = BinaryEncoder(self._encoder_buffer)

    def _open(self) -> _OpenManifest:
        if self._current is None:
            output = MemoryOutputFile(self.store.manifest_location())
            writer = write_manifest(
                self.format_version,  # type: ignore[arg-type]
                self.spec,
                self.schema,
                output,
                self.snapshot_id,
                self.codec_name,
            )
            self._current = _OpenManifest(writer, output)
        return self._current

    def add(self, entry: ManifestEntry) -> None:
        """Queue one entry (status EXISTING, explicit sequence numbers; see :func:`existing_entry`)."""
        current = self._open()
        prepared = current.writer.prepare_entry(entry)
        self._encoder_buffer.seek(0)
        self._encoder_buffer.truncate()
        current.avro.writer.write(self._encoder, prepared)
        encoded = self._encoder_buffer.getvalue()
        self._pending.append((encoded, entry))
        self._pending_bytes += len(encoded)
        if self._pending_bytes >= self.block_bytes:
            self._flush()

    def _fits(self, current: _OpenManifest, block: bytes) -> bool:
        return self.target is None or current.size + len(block) <= self.target

    def _flush(self) -> None:
        pending = self._pending
        while pending:
            current = self._open()
            block = current.frame([e for e, _ in pending])
            if self._fits(current, block):
                current.append(block, [entry for _, entry in pending])
                pending = []
                break
            lo, hi = 0, len(pending)  # the largest prefix that fits: lo fits, hi does not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._fits(current, current.frame([e for e, _ in pending[:mid]])):
                    lo = mid
                else:
                    hi = mid
            if lo == 0 and current.entries == 0:
                lo = 1  # a single entry larger than the target gets a manifest of its own
            if lo > 0:
                current.append(
                    current.frame([e for e, _ in pending[:lo]]), [entry for _, entry in pending[:lo]]
                )
                pending = pending[lo:]
            self._finish()
        self._pending = []
        self._pending_bytes = 0

    def _finish(self) -> None:
        current, self._current = self._current, None
        if current is None or current.entries == 0:
            return
        data = current.output.buffer.getvalue()
        self.store.put(current.location, data)
        self.manifests.append(
            ManifestFile.from_args(
                manifest_path=current.location,
                manifest_length=len(data),
                partition_spec_id=self.spec.spec_id,
                content=ManifestContent.DATA,
                sequence_number=UNASSIGNED_SEQ,
                min_sequence_number=(
                    current.min_sequence_number if current.min_sequence_number is not None else UNASSIGNED_SEQ
                ),
                added_snapshot_id=self.snapshot_id,
                added_files_count=0,
                existing_files_count=current.existing_files,
                deleted_files_count=0,
                added_rows_count=0,
                existing_rows_count=current.existing_rows,
                deleted_rows_count=0,
                partitions=construct_partition_summaries(self.spec, self.schema, current.partitions),
                key_metadata=None,
            )
        )

    def close(self) -> list[ManifestFile]:
        """Flush and finish; the manifest-list rows of every manifest written, in order."""
        self._flush()
        self._finish()
        return self.manifests


def sort_key_of_partition(partition: Record) -> tuple[tuple[Any, ...], ...]:
    """A total order on partition tuples of one spec: field by field, nulls first (Spark's range sort)."""
    return tuple((0,) if v is None else (1, v) for v in (partition[i] for i in range(len(partition))))
