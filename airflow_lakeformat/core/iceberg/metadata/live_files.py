"""The live files of a snapshot: data and delete files whose manifest entry is ADDED or EXISTING.

Algorithm (Iceberg spec "Scan Planning"; Java ``ManifestGroup``/``ManifestReader``; reference 1.7):

1. Read the snapshot's manifest list (``manifests.read_manifests``).
2. Fetch every manifest's bytes on a thread pool (IO overlaps on object stores) and decode each one
   once, in the calling thread (Avro decoding holds the GIL; decoding threads would only contend).
3. Keep entries with status != DELETED and apply inheritance from the manifest-list row (spec "Sequence
   Number Inheritance", Java ``InheritableMetadataFactory``, reference 1.5): a null ``snapshot_id`` takes
   the manifest's ``added_snapshot_id``; a null data/file sequence number takes the manifest's
   ``sequence_number`` when the entry is ADDED or the manifest is v1 (``sequence_number == 0``).

Decoding is pluggable (:class:`ManifestDecoder`): :class:`PyIcebergDecoder` uses pyiceberg's own Avro
reader (v2 read schema: v3 deletion-vector fields are dropped); ``manifest_decode.FastavroDecoder``
(the default) decodes with fastavro and a reader schema projected by field id, which skips the
per-column metric maps and keeps the v3 fields ``referenced_data_file``/``content_offset``/
``content_size_in_bytes``. Both produce identical :class:`LiveFile` rows for v1/v2 manifests.
"""

from __future__ import annotations

import gc
import io
from collections.abc import Sequence
from typing import Protocol

from pyiceberg.io import InputFile, InputStream
from pyiceberg.manifest import ManifestEntryStatus, ManifestFile
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_lakeformat.core.iceberg.metadata.avro_guard import check_container
from airflow_lakeformat.core.iceberg.metadata.entries import LiveFile
from airflow_lakeformat.core.iceberg.metadata.fetch import fetch_metadata_file
from airflow_lakeformat.core.iceberg.metadata.manifests import AVRO_DECODE_ERRORS, read_manifests
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress


class ManifestDecoder(Protocol):
    """Turns one manifest's bytes into its live files (inheritance applied)."""

    def decode(self, table: IcebergTable, manifest: ManifestFile, data: bytes) -> list[LiveFile]: ...


class BytesInputFile(InputFile):
    """An in-memory InputFile, so pyiceberg's Avro reader decodes bytes we already fetched."""

    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


class PyIcebergDecoder:
    """Decode with pyiceberg's ``ManifestFile.fetch_manifest_entry`` reader (the reference decoder)."""

    def decode(self, table: IcebergTable, manifest: ManifestFile, data: bytes) -> list[LiveFile]:
        check_container(data, manifest.manifest_path, "manifest")  # avro_guard: pyiceberg 0.12 overreads
        reader_io = _SingleFileIO(BytesInputFile(manifest.manifest_path, data))
        entries = manifest.fetch_manifest_entry(reader_io, discard_deleted=True)  # type: ignore[arg-type]
        result = []
        for entry in entries:
            df = entry.data_file
            status = int(entry.status)
            partition = df.partition
            result.append(
                LiveFile(
                    path=df.file_path,
                    content=int(df.content),
                    file_format=str(
                        df.file_format.value if hasattr(df.file_format, "value") else df.file_format
                    ),
                    spec_id=manifest.partition_spec_id,
                    partition=tuple(partition[i] for i in range(len(partition))),
                    record_count=df.record_count,
                    file_size=df.file_size_in_bytes,
                    data_sequence_number=entry.sequence_number,
                    file_sequence_number=entry.file_sequence_number,
                    snapshot_id=entry.snapshot_id,
                    status=status,
                    manifest_path=manifest.manifest_path,
                    split_offsets=None if df.split_offsets is None else tuple(df.split_offsets),
                    equality_ids=None if df.equality_ids is None else tuple(df.equality_ids),
                )
            )
        return result


class _SingleFileIO:
    """Just enough of pyiceberg's FileIO for ``fetch_manifest_entry``: ``new_input`` of one file."""

    def __init__(self, input_file: InputFile) -> None:
        self._input = input_file

    def new_input(self, location: str) -> InputFile:
        return self._input


def fetch_manifest(table: IcebergTable, manifest: ManifestFile, referenced_by: str) -> bytes:
    """A manifest's bytes (``fetch.fetch_metadata_file``: every scheme in the metadata), checked
    against the length its manifest list records.

    Raises:
        MissingMetadataError: The manifest does not exist.
        CorruptMetadataError: Its size is not the recorded ``manifest_length`` (truncated or replaced).
    """
    return fetch_metadata_file(table, manifest.manifest_path, referenced_by, manifest.manifest_length)


def default_decoder() -> ManifestDecoder:
    """The decoder :func:`live_files` uses when none is given (fastavro with a projected schema)."""
    from airflow_lakeformat.core.iceberg.metadata.manifest_decode import FastavroDecoder  # fastavro on use

    return FastavroDecoder()


def decode_manifests(
    table: IcebergTable,
    manifests: Sequence[ManifestFile],
    referenced_by: str,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> list[list[LiveFile]]:
    """Live files of each manifest, in input order: fetched in parallel, each decoded once.

    Args:
        table: The table.
        manifests: Manifest-list rows.
        referenced_by: What refers to the manifests (for error messages).
        decoder: The Avro decoder (default :func:`default_decoder`).
        progress: Progress reporter, advanced per manifest.

    Raises:
        MissingMetadataError: A manifest is missing.
        CorruptMetadataError: A manifest cannot be decoded.
    """
    decoder = decoder or default_decoder()
    progress.start(f"reading manifests of {referenced_by}", len(manifests))
    # Decoding allocates millions of small, long-lived objects; the cyclic GC would rescan them over and
    # over (none of them form cycles), so it is paused for the duration, as on the Paimon side.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = []
        fetched = table.parallel_imap(lambda m: fetch_manifest(table, m, referenced_by), manifests)
        for manifest, data in zip(manifests, fetched, strict=True):
            try:
                result.append(decoder.decode(table, manifest, data))
            except (MissingMetadataError, CorruptMetadataError):
                raise
            except AVRO_DECODE_ERRORS as exc:
                raise CorruptMetadataError(
                    manifest.manifest_path, f"not a valid manifest ({type(exc).__name__}: {exc})"
                ) from exc
            progress.advance()
        return result
    finally:
        if gc_was_enabled:
            gc.enable()
        progress.finish()


def live_files(
    table: IcebergTable,
    snapshot: Snapshot,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> list[LiveFile]:
    """Every live data and delete file of ``snapshot``, in manifest-list then manifest order.

    Args:
        table: The table.
        snapshot: The snapshot (``table.snapshot(snapshot_id, ref)``).
        decoder: The Avro decoder (default: fastavro, projected).
        progress: Progress reporter.

    Returns:
        The live files, sequence numbers and snapshot ids inherited.

    Example:
        >>> files = live_files(table, table.snapshot(ref="main"))  # doctest: +SKIP
        >>> sum(f.record_count for f in files if f.content == 0)  # doctest: +SKIP
    """
    manifests = read_manifests(table, snapshot)
    referenced_by = f"snapshot {snapshot.snapshot_id}"
    per_manifest = decode_manifests(table, manifests, referenced_by, decoder, progress)
    return [f for files in per_manifest for f in files]


__all__ = [
    "BytesInputFile",
    "ManifestDecoder",
    "ManifestEntryStatus",
    "PyIcebergDecoder",
    "decode_manifests",
    "default_decoder",
    "fetch_manifest",
    "live_files",
]
