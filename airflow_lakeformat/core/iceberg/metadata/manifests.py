"""Manifest lists: read one with typed errors, and the ``manifests`` JSON document.

A snapshot's ``manifest-list`` (Iceberg spec "Manifest Lists", reference section 1.3) is read with
pyiceberg's ``read_manifest_list`` (which projects by field id to its v2 read schema, so ``content`` reads
as 0 and sequence numbers as 0 for v1 lists), after its framing is checked (``avro_guard``: pyiceberg
0.12's decoder reads past the buffer of a truncated file). pyiceberg's process-wide ``_manifests`` cache is bypassed:
a maintenance run must see what is in storage now. v1's legacy inline ``manifests`` array (a snapshot
without a manifest list) is not supported by pyiceberg's model and is refused with a typed error.
"""

from __future__ import annotations

import zlib
from typing import Any

from fastavro.schema import SchemaParseException
from pyiceberg.manifest import ManifestContent, ManifestFile, read_manifest_list
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.iceberg.metadata.avro_guard import CheckedInputFile
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.table_info import ManifestInfo

# What a truncated or garbage Avro file raises inside pyiceberg's/fastavro's decoders (SystemError: pyiceberg's
# Cython decoder given a negative length; SchemaParseException: fastavro given a garbage writer schema).
AVRO_DECODE_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    EOFError,
    KeyError,
    IndexError,
    TypeError,
    AssertionError,
    UnicodeDecodeError,
    zlib.error,
    SystemError,
    SchemaParseException,
)


def read_manifests(table: IcebergTable, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifest list of ``snapshot``, in file order.

    Args:
        table: The table.
        snapshot: One of its snapshots.

    Returns:
        pyiceberg ``ManifestFile`` rows (path, length, spec id, content, sequence numbers, counts).

    Raises:
        MissingMetadataError: The manifest list file does not exist.
        CorruptMetadataError: It cannot be decoded (or its Avro framing is broken).

    Example:
        >>> [m.manifest_path for m in read_manifests(table, table.snapshot())]  # doctest: +SKIP
    """
    location = snapshot.manifest_list
    if not location:
        raise UnsupportedFormatError(
            table.metadata_location,
            f"snapshot {snapshot.snapshot_id} has no manifest-list (legacy v1 inline manifests)",
        )
    referenced_by = f"snapshot {snapshot.snapshot_id} of {table.metadata_location}"
    try:
        return list(read_manifest_list(CheckedInputFile(table.table.io.new_input(location), "manifest list")))
    except CorruptMetadataError:
        raise
    except FileNotFoundError as exc:
        raise MissingMetadataError(location, referenced_by) from exc
    except AVRO_DECODE_ERRORS as exc:
        raise CorruptMetadataError(
            location, f"not a valid manifest list ({type(exc).__name__}: {exc})"
        ) from exc
    except OSError as exc:
        if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
            raise MissingMetadataError(location, referenced_by) from exc
        raise


def manifest_content_name(content: ManifestContent | int | None) -> str:
    """``"data"`` or ``"deletes"`` (a v1 list has no content column: data)."""
    return "deletes" if content is not None and int(content) == int(ManifestContent.DELETES) else "data"


def manifest_info(manifest: ManifestFile) -> ManifestInfo:
    """One manifest-list row as the facade's record."""
    return ManifestInfo(
        path=manifest.manifest_path,
        content=manifest_content_name(manifest.content),
        file_size=manifest.manifest_length,
        added_files_count=manifest.added_files_count,
        deleted_files_count=manifest.deleted_files_count,
        extra={
            "specId": manifest.partition_spec_id,
            "sequenceNumber": manifest.sequence_number,
            "minSequenceNumber": manifest.min_sequence_number,
            "addedSnapshotId": manifest.added_snapshot_id,
            "existingFilesCount": manifest.existing_files_count,
            "addedRowsCount": manifest.added_rows_count,
            "existingRowsCount": manifest.existing_rows_count,
            "deletedRowsCount": manifest.deleted_rows_count,
        },
    )


def manifest_row(manifest: ManifestFile) -> dict[str, Any]:
    """One manifest-list row as a JSON object (camelCase keys), the record's ``to_json()``."""
    return manifest_info(manifest).to_json()


def manifests_document(
    table: IcebergTable, snapshot_id: int | None = None, ref: str | None = None
) -> dict[str, Any]:
    """The manifest list of a snapshot (default: current) as a JSON document.

    Args:
        table: The table.
        snapshot_id: A snapshot id; default the current snapshot.
        ref: A branch or tag instead of ``snapshot_id``.

    Returns:
        ``{"table", "format": "iceberg", "snapshot", "manifests": [{path, content, fileSize,
        addedFilesCount, deletedFilesCount, specId, sequenceNumber, minSequenceNumber, addedSnapshotId,
        existingFilesCount, added/existing/deletedRowsCount}]}`` in manifest-list order; ``snapshot`` is None for an empty table.

    Example:
        >>> manifests_document(open_table("/wh/events"))["manifests"][0]["content"]  # doctest: +SKIP
        'data'
    """
    snapshot = table.snapshot(snapshot_id, ref)
    rows = [] if snapshot is None else [manifest_row(m) for m in read_manifests(table, snapshot)]
    return {
        "table": table.name,
        "format": "iceberg",
        "snapshot": None if snapshot is None else snapshot.snapshot_id,
        "manifests": rows,
    }
