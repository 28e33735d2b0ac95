"""Manifest writers that frame Avro blocks of about 64 KB, as Java's writers do, instead of one block per entry.

pyiceberg 0.12's ``ManifestWriter.add_entry`` hands each entry to ``AvroOutputFile.write_block`` on its own: a
manifest of 2,000 entries becomes 2,000 Avro blocks, each with its own count, length, compressor call and 16-byte
sync marker (slow to write, badly compressed). Java's ``DataFileWriter`` cuts a block once its buffered,
uncompressed records pass the sync interval (Avro's ``DEFAULT_SYNC_INTERVAL``, 64,000 bytes), as the project's
own rolling writer for manifest compaction does (``manifest_writer.RollingManifestWriter``, same block size).

Algorithm (:class:`BlockedAvroOutputFile`, the ``AvroOutputFile`` the writers below open):

1. The header is pyiceberg's (schema with field ids, codec from ``write.avro.compression-codec``, metadata),
   unchanged, so the file stays the manifest pyiceberg and Java read.
2. ``write_block(objects)`` encodes the records with pyiceberg's resolved writer tree into a pending buffer;
   nothing is framed yet. The encoder (:class:`PendingEncoder`) writes the same bytes as pyiceberg's
   ``BinaryEncoder`` (zig-zag varints, length-prefixed bytes and strings) with one buffer write per value instead
   of one per varint byte, and the one-byte varints (-64 to 63: counts, ids, statuses, most lengths) looked up.
3. Once the pending bytes reach ``block_bytes``, or when the file is closed without an error, they are framed as
   one block: record count, byte length of the (compressed) content, the content, the file's sync marker; the
   codec is pyiceberg's (deflate, zstd, snappy or none).
4. A writer left with an exception writes no further block: the file is discarded by its caller anyway.

The ``ManifestWriter`` bookkeeping (added/existing/deleted counts and rows, partition summaries, minimum sequence
number) is pyiceberg's, untouched: only the framing of the records differs.

Example:
    >>> with blocked_manifest_writer(2, ManifestContent.DATA, spec, schema, output, snapshot_id, "gzip") as w:  # doctest: +SKIP
    ...     w.existing(entry)
    >>> w.to_manifest_file()  # doctest: +SKIP
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    ManifestContent,
    ManifestEntry,
    ManifestWriter,
    ManifestWriterV1,
    ManifestWriterV2,
)
from pyiceberg.typedef import StructProtocol

from airflow_lakeformat.core.iceberg.write.manifest_writer import DEFAULT_BLOCK_BYTES

if TYPE_CHECKING:
    from pyiceberg.avro.codecs import AvroCompressionCodec
    from pyiceberg.io import OutputFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

D = TypeVar("D", bound=StructProtocol)

#: The zig-zag varint of every value that takes one byte.
_ONE_BYTE = {value: bytes([((value << 1) ^ (value >> 63)) & 0x7F]) for value in range(-64, 64)}


class PendingEncoder(BinaryEncoder):
    """pyiceberg's ``BinaryEncoder`` into a ``BytesIO``, the same bytes with fewer calls (step 2)."""

    def __init__(self, output_stream: io.BytesIO) -> None:
        super().__init__(output_stream)
        self._write = output_stream.write

    def write(self, b: bytes) -> None:
        self._write(b)

    def write_int(self, integer: int) -> None:
        one = _ONE_BYTE.get(integer)
        if one is not None:
            self._write(one)
            return
        datum = (integer << 1) ^ (integer >> 63)
        out = bytearray()
        while datum & ~0x7F:
            out.append((datum & 0x7F) | 0x80)
            datum >>= 7
        out.append(datum)
        self._write(out)

    def write_bytes(self, b: bytes) -> None:
        self.write_int(len(b))
        self._write(b)

    def write_utf8(self, s: str) -> None:
        self.write_bytes(s.encode("utf-8"))


class BlockedAvroOutputFile(AvroOutputFile[D]):
    """pyiceberg's Avro container writer, records gathered into blocks of about ``block_bytes`` (steps 2-4)."""

    def __init__(self, *args: Any, block_bytes: int = DEFAULT_BLOCK_BYTES, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.block_bytes = max(1, block_bytes)
        self._pending = io.BytesIO()
        self._pending_encoder = PendingEncoder(self._pending)
        self._pending_count = 0
        self.blocks_written = 0

    def write_block(self, objects: list[D]) -> None:
        """Encode ``objects`` into the pending block; frame it once it holds ``block_bytes``."""
        for obj in objects:
            self.writer.write(self._pending_encoder, obj)
        self._pending_count += len(objects)
        if self._pending.tell() >= self.block_bytes:
            self.flush_block()

    def flush_block(self) -> None:
        """Frame the pending records as one block (nothing when none are pending)."""
        if not self._pending_count:
            return
        content = self._pending.getvalue()
        self.encoder.write_int(self._pending_count)
        if codec := self.compression_codec():
            content, _length = codec.compress(content)
        self.encoder.write_int(len(content))
        self.encoder.write(content)
        self.encoder.write(self.sync_bytes)
        self.blocks_written += 1
        self._pending.seek(0)
        self._pending.truncate()
        self._pending_count = 0

    def __exit__(
        self, exctype: type[BaseException] | None, excinst: BaseException | None, exctb: TracebackType | None
    ) -> None:
        try:
            if exctype is None:
                self.flush_block()
        finally:
            super().__exit__(exctype, excinst, exctb)


class _BlockedEntries(ManifestWriter):
    """A manifest writer whose entries go through a :class:`BlockedAvroOutputFile`."""

    def new_writer(self) -> AvroOutputFile[ManifestEntry]:
        return BlockedAvroOutputFile[ManifestEntry](
            output_file=self._output_file,
            file_schema=self._with_partition(self.version),
            record_schema=self._with_partition(DEFAULT_READ_VERSION),
            schema_name="manifest_entry",
            metadata=self._meta,
        )


class BlockedManifestWriterV1(_BlockedEntries, ManifestWriterV1):
    """pyiceberg's v1 data manifest writer, with ~64 KB Avro blocks."""


class BlockedManifestWriterV2(_BlockedEntries, ManifestWriterV2):
    """pyiceberg's v2 data manifest writer, with ~64 KB Avro blocks."""


class BlockedDeleteManifestWriter(BlockedManifestWriterV2):
    """A v2 delete manifest (pyiceberg 0.12 writes data manifests only; a delete manifest differs in its
    ``content``), with ~64 KB Avro blocks."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def blocked_manifest_writer(
    format_version: int,
    content: ManifestContent,
    spec: PartitionSpec,
    schema: Schema,
    output: OutputFile,
    snapshot_id: int,
    codec: AvroCompressionCodec,
) -> ManifestWriter:
    """A data or delete manifest writer of ``spec`` for the snapshot ``snapshot_id``, framing ~64 KB blocks.

    Args:
        format_version: the table's (1 or 2; delete manifests need 2).
        content: data or deletes.
        spec: the manifest's partition spec.
        schema: the schema its partition type is computed with.
        output: where it goes.
        snapshot_id: the snapshot that commits it (``added_snapshot_id``; the snapshot id of ADDED entries).
        codec: the table's ``write.avro.compression-codec``.

    Raises:
        ValueError: another format version, or a delete manifest for a v1 table.
    """
    if content == ManifestContent.DELETES:
        if format_version != 2:
            raise ValueError(f"cannot write a delete manifest for format-version {format_version}")
        return BlockedDeleteManifestWriter(spec, schema, output, snapshot_id, codec)
    if format_version == 1:
        return BlockedManifestWriterV1(spec, schema, output, snapshot_id, codec)
    if format_version == 2:
        return BlockedManifestWriterV2(spec, schema, output, snapshot_id, codec)
    raise ValueError(f"cannot write a manifest for format-version {format_version}")
