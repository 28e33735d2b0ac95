"""A live manifest entry as every reader of manifests returns it: :class:`LiveFile`, the entry status and
content codes, and sequence-number inheritance.

Both decoders (``live_files.PyIcebergDecoder`` and ``manifest_decode.FastavroDecoder``) build these rows;
they live here, below both, so neither decoder module imports the other's.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.manifest import ManifestFile

STATUS_EXISTING, STATUS_ADDED, STATUS_DELETED = 0, 1, 2
CONTENT_DATA, CONTENT_POSITION_DELETES, CONTENT_EQUALITY_DELETES = 0, 1, 2
CONTENT_NAMES = {
    CONTENT_DATA: "data",
    CONTENT_POSITION_DELETES: "position-deletes",
    CONTENT_EQUALITY_DELETES: "equality-deletes",
}


@dataclass(frozen=True, slots=True)
class LiveFile:
    """One live manifest entry, inheritance applied.

    ``partition`` holds the raw Iceberg partition values (days as int, bytes as bytes, ...) in the order
    of the fields of spec ``spec_id``; ``partition_json`` renders them.
    """

    path: str
    content: int
    file_format: str
    spec_id: int
    partition: tuple[object, ...]
    record_count: int
    file_size: int
    data_sequence_number: int | None
    file_sequence_number: int | None
    snapshot_id: int | None
    status: int
    manifest_path: str
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size: int | None = None

    @property
    def content_name(self) -> str:
        return CONTENT_NAMES.get(self.content, str(self.content))


def inherit_sequence_number(value: int | None, status: int, manifest: ManifestFile) -> int | None:
    """Spec "Sequence Number Inheritance": null and (ADDED or a v1 manifest) -> the manifest's number."""
    if value is None and (status == STATUS_ADDED or manifest.sequence_number == 0):
        return manifest.sequence_number
    return value


__all__ = [
    "CONTENT_DATA",
    "CONTENT_EQUALITY_DELETES",
    "CONTENT_NAMES",
    "CONTENT_POSITION_DELETES",
    "STATUS_ADDED",
    "STATUS_DELETED",
    "STATUS_EXISTING",
    "LiveFile",
    "inherit_sequence_number",
]
