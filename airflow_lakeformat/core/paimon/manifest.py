"""Manifest-list entries (ManifestFileMeta), manifest entries (ManifestEntry) and DataFileMeta.

Each model wraps the Avro record it was decoded from and reads fields from it on access. That keeps
decoding close to raw fastavro speed, and it means fields a newer Paimon added (which we do not
model) stay in the record and are written back unchanged by a rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import Any

from airflow_lakeformat.core.errors import DuplicateFileError

# A serialized BinaryRow of arity 0: stats and keys of tables without such fields.
EMPTY_STATS_ROW = bytes(12)

# The permanent on-disk identifier of data manifests and manifest lists (not a schema version).
MANIFEST_VERSION = 2


class FileKind(IntEnum):
    ADD = 0
    DELETE = 1


# Looked up per entry: a dict is several times cheaper than the enum's constructor.
_KINDS = {0: FileKind.ADD, 1: FileKind.DELETE}


class FileSource(IntEnum):
    APPEND = 0
    COMPACT = 1


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Min/max BinaryRows and per-field null counts (``_KEY_STATS``, ``_VALUE_STATS``, ``_PARTITION_STATS``)."""

    min_values: bytes
    max_values: bytes
    null_counts: list[int | None] | None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SimpleStats:
        return cls(record["_MIN_VALUES"], record["_MAX_VALUES"], record.get("_NULL_COUNTS"))

    def to_record(self) -> dict[str, Any]:
        return {
            "_MIN_VALUES": self.min_values,
            "_MAX_VALUES": self.max_values,
            "_NULL_COUNTS": self.null_counts,
        }


class DataFileMeta:
    """A data (or changelog) file as a manifest entry describes it: the ``_FILE`` record."""

    __slots__ = ("record",)

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    @classmethod
    def create(
        cls,
        file_name: str,
        file_size: int,
        row_count: int,
        *,
        min_key: bytes = EMPTY_STATS_ROW,
        max_key: bytes = EMPTY_STATS_ROW,
        key_stats: SimpleStats | None = None,
        value_stats: SimpleStats | None = None,
        min_sequence_number: int = 0,
        max_sequence_number: int = 0,
        schema_id: int = 0,
        level: int = 0,
        extra_files: list[str] | None = None,
        creation_time: datetime | None = None,
        delete_row_count: int | None = 0,
        embedded_index: bytes | None = None,
        file_source: FileSource | None = FileSource.APPEND,
        value_stats_cols: list[str] | None = None,
        external_path: str | None = None,
        first_row_id: int | None = None,
        write_cols: list[str] | None = None,
    ) -> DataFileMeta:
        empty = SimpleStats(EMPTY_STATS_ROW, EMPTY_STATS_ROW, [])
        return cls(
            {
                "_FILE_NAME": file_name,
                "_FILE_SIZE": file_size,
                "_ROW_COUNT": row_count,
                "_MIN_KEY": min_key,
                "_MAX_KEY": max_key,
                "_KEY_STATS": (key_stats or empty).to_record(),
                "_VALUE_STATS": (value_stats or empty).to_record(),
                "_MIN_SEQUENCE_NUMBER": min_sequence_number,
                "_MAX_SEQUENCE_NUMBER": max_sequence_number,
                "_SCHEMA_ID": schema_id,
                "_LEVEL": level,
                "_EXTRA_FILES": list(extra_files or []),
                "_CREATION_TIME": creation_time,
                "_DELETE_ROW_COUNT": delete_row_count,
                "_EMBEDDED_FILE_INDEX": embedded_index,
                "_FILE_SOURCE": None if file_source is None else int(file_source),
                "_VALUE_STATS_COLS": value_stats_cols,
                "_EXTERNAL_PATH": external_path,
                "_FIRST_ROW_ID": first_row_id,
                "_WRITE_COLS": write_cols,
                "_WRITE_COLS_SEQUENCES": None,
            }
        )

    @property
    def file_name(self) -> str:
        return self.record["_FILE_NAME"]  # type: ignore[no-any-return]

    @property
    def file_size(self) -> int:
        return self.record["_FILE_SIZE"]  # type: ignore[no-any-return]

    @property
    def row_count(self) -> int:
        return self.record["_ROW_COUNT"]  # type: ignore[no-any-return]

    @property
    def min_key(self) -> bytes:
        return self.record["_MIN_KEY"]  # type: ignore[no-any-return]

    @property
    def max_key(self) -> bytes:
        return self.record["_MAX_KEY"]  # type: ignore[no-any-return]

    @property
    def key_stats(self) -> SimpleStats:
        return SimpleStats.from_record(self.record["_KEY_STATS"])

    @property
    def value_stats(self) -> SimpleStats:
        return SimpleStats.from_record(self.record["_VALUE_STATS"])

    @property
    def min_sequence_number(self) -> int:
        return self.record["_MIN_SEQUENCE_NUMBER"]  # type: ignore[no-any-return]

    @property
    def max_sequence_number(self) -> int:
        return self.record["_MAX_SEQUENCE_NUMBER"]  # type: ignore[no-any-return]

    @property
    def schema_id(self) -> int:
        return self.record["_SCHEMA_ID"]  # type: ignore[no-any-return]

    @property
    def level(self) -> int:
        return self.record["_LEVEL"]  # type: ignore[no-any-return]

    @property
    def extra_files(self) -> list[str]:
        return self.record.get("_EXTRA_FILES") or []

    @property
    def creation_time(self) -> datetime | None:
        return self.record.get("_CREATION_TIME")

    @property
    def delete_row_count(self) -> int | None:
        return self.record.get("_DELETE_ROW_COUNT")

    @property
    def embedded_index(self) -> bytes | None:
        return self.record.get("_EMBEDDED_FILE_INDEX")

    @property
    def file_source(self) -> FileSource | None:
        value = self.record.get("_FILE_SOURCE")
        return None if value is None else FileSource(value)

    @property
    def value_stats_cols(self) -> list[str] | None:
        return self.record.get("_VALUE_STATS_COLS")

    @property
    def external_path(self) -> str | None:
        return self.record.get("_EXTERNAL_PATH")

    @property
    def first_row_id(self) -> int | None:
        return self.record.get("_FIRST_ROW_ID")

    def __repr__(self) -> str:
        return f"DataFileMeta({self.file_name!r}, rows={self.row_count}, level={self.level})"


class ManifestEntry:
    """One ADD or DELETE of a data file in a partition and bucket."""

    __slots__ = ("bucket", "file", "kind", "partition", "record", "total_buckets")

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        kind = _KINDS.get(record["_KIND"])
        if kind is None:
            raise ValueError(f"unknown _KIND {record['_KIND']!r}")
        self.kind = kind
        self.partition: bytes = record["_PARTITION"]
        self.bucket: int = record["_BUCKET"]
        self.total_buckets: int | None = record.get("_TOTAL_BUCKETS")
        self.file = DataFileMeta(record["_FILE"])

    @classmethod
    def create(
        cls, kind: FileKind, partition: bytes, bucket: int, total_buckets: int, file: DataFileMeta
    ) -> ManifestEntry:
        return cls(
            {
                "_VERSION": MANIFEST_VERSION,
                "_KIND": int(kind),
                "_PARTITION": partition,
                "_BUCKET": bucket,
                "_TOTAL_BUCKETS": total_buckets,
                "_FILE": file.record,
            }
        )

    def to_delete(self) -> ManifestEntry:
        """The DELETE entry that removes this file: the same record (bytes, buckets, fields) with kind DELETE."""
        return ManifestEntry({**self.record, "_KIND": int(FileKind.DELETE), "_FILE": dict(self.file.record)})

    def identifier(self) -> tuple[Any, ...]:
        """Paimon's ``FileEntry.Identifier``: what ADD and DELETE entries are matched on.

        The partition is compared as bytes (Java compares BinaryRows by their memory), so a
        partition re-encoded differently would stop matching.
        """
        f = self.file.record
        extra = f.get("_EXTRA_FILES")
        return (
            self.partition,
            self.bucket,
            f["_LEVEL"],
            f["_FILE_NAME"],
            tuple(extra) if extra else (),
            f.get("_EMBEDDED_FILE_INDEX"),
            f.get("_EXTERNAL_PATH"),
        )

    def __repr__(self) -> str:
        return f"ManifestEntry({self.kind.name}, bucket={self.bucket}, {self.file!r})"


class ManifestFileMeta:
    """One row of a manifest list: a manifest file with its counts and partition statistics."""

    __slots__ = ("record",)

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    @property
    def file_name(self) -> str:
        return self.record["_FILE_NAME"]  # type: ignore[no-any-return]

    @property
    def file_size(self) -> int:
        return self.record["_FILE_SIZE"]  # type: ignore[no-any-return]

    @property
    def num_added_files(self) -> int:
        return self.record["_NUM_ADDED_FILES"]  # type: ignore[no-any-return]

    @property
    def num_deleted_files(self) -> int:
        return self.record["_NUM_DELETED_FILES"]  # type: ignore[no-any-return]

    @property
    def partition_stats(self) -> SimpleStats:
        return SimpleStats.from_record(self.record["_PARTITION_STATS"])

    @property
    def schema_id(self) -> int:
        return self.record["_SCHEMA_ID"]  # type: ignore[no-any-return]

    @property
    def min_bucket(self) -> int | None:
        return self.record.get("_MIN_BUCKET")

    @property
    def max_bucket(self) -> int | None:
        return self.record.get("_MAX_BUCKET")

    @property
    def min_level(self) -> int | None:
        return self.record.get("_MIN_LEVEL")

    @property
    def max_level(self) -> int | None:
        return self.record.get("_MAX_LEVEL")

    @property
    def extra_files(self) -> list[str]:
        """Files owned by this manifest (sidecars), kept and deleted together with it."""
        return self.record.get("_EXTRA_FILES") or []

    def __repr__(self) -> str:
        return (
            f"ManifestFileMeta({self.file_name!r}, size={self.file_size}, "
            f"added={self.num_added_files}, deleted={self.num_deleted_files})"
        )


def merge_entries(
    entries: Iterable[ManifestEntry], into: dict[tuple[Any, ...], ManifestEntry] | None = None
) -> dict[tuple[Any, ...], ManifestEntry]:
    """Fold entries in order with Paimon's ``FileEntry.mergeEntries`` rule.

    An ADD of an identity already present is an error. A DELETE removes its ADD when the ADD is in
    the map; otherwise the DELETE is kept, because its ADD lives in an older manifest that is not
    part of this fold — dropping it would bring a deleted file back.
    """
    merged: dict[tuple[Any, ...], ManifestEntry] = {} if into is None else into
    for entry in entries:
        key = entry.identifier()
        if entry.kind is FileKind.ADD:
            if key in merged:
                raise DuplicateFileError(
                    entry.file.file_name,
                    f"added twice (bucket {entry.bucket}, level {entry.file.level}); "
                    "Paimon refuses such a table",
                )
            merged[key] = entry
        elif key in merged:
            del merged[key]
        else:
            merged[key] = entry
    return merged


def iter_added(merged: Mapping[tuple[Any, ...], ManifestEntry]) -> Iterator[ManifestEntry]:
    return (e for e in merged.values() if e.kind is FileKind.ADD)
