"""Where Paimon puts things: metadata names and data-file paths, computed as Paimon Java does.

A data file lives at ``<root>[/<data-file.path-directory>]/<k1=v1>/<k2=v2>/bucket-<b>/<name>``, or at
its ``_EXTERNAL_PATH`` (a full path) when the table writes to external paths. Partition
directory names use the legacy ``toString()`` of internal values (DATE as a day number) unless
``partition.legacy-name`` is false, map null and blank values to ``partition.default-name`` and
escape a fixed character set as ``%XX``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from airflow_lakeformat.core import binary_row
from airflow_lakeformat.core.manifest import ManifestEntry
from airflow_lakeformat.core.schema import TableSchema
from airflow_lakeformat.core.values import cast_partition_string, legacy_partition_string, to_json_value

SNAPSHOT_DIR = "snapshot"
SCHEMA_DIR = "schema"
MANIFEST_DIR = "manifest"
TAG_DIR = "tag"
CONSUMER_DIR = "consumer"
BRANCH_DIR = "branch"
CHANGELOG_DIR = "changelog"
INDEX_DIR = "index"
STATISTICS_DIR = "statistics"

SNAPSHOT_PREFIX = "snapshot-"
TAG_PREFIX = "tag-"
CONSUMER_PREFIX = "consumer-"
BRANCH_PREFIX = "branch-"
EARLIEST = "EARLIEST"
LATEST = "LATEST"
BUCKET_PREFIX = "bucket-"
POSTPONE_BUCKET = -2

# ASCII 0x00-0x1F, 0x7F and these characters are escaped in partition directory names (Paimon's
# PartitionPathUtils; the same set as Hive's).
_ESCAPED = frozenset([*map(chr, range(0x20)), "\x7f", *"\"#%'*/:=?\\{}[]^"])


def parse_partition_spec(spec: Mapping[str, Any] | str | None) -> dict[str, str] | None:
    """A partition filter from ``"dt=2024-01-01,region=eu"`` or a dict; ``"*"``, empty or None -> None.

    None means the whole table. Keys and values are stripped of surrounding blanks; a part without
    ``=`` raises :class:`ValueError` naming the spec.
    """
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()} or None
    text = str(spec).strip()
    if text in ("", "*"):
        return None
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"partition spec {text!r}: {part!r} is not of the form KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs or None


def parse_overwrite_spec(spec: Mapping[str, Any] | str) -> dict[str, str] | None:
    """The partition an overwrite replaces, None for the whole table.

    Only an explicit ``"*"`` means the whole table: a spec that names no partition (``","``, a
    template that rendered empty) is refused rather than read as "everything".
    """
    pairs = parse_partition_spec(spec)
    if pairs is None and str(spec).strip() != "*":
        raise ValueError(f"overwrite {spec!r}: expected '*' or k=v[,k=v]")
    return pairs


def escape_path_name(text: str) -> str:
    if not any(c in _ESCAPED for c in text):
        return text
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def bucket_directory_name(bucket: int) -> str:
    return BUCKET_PREFIX + ("postpone" if bucket == POSTPONE_BUCKET else str(bucket))


class PartitionCodec:
    """Decodes partition BinaryRows of one schema to values, JSON objects and directory names.

    Results are cached per distinct partition bytes: a table has far fewer partitions than entries.
    """

    def __init__(self, schema: TableSchema) -> None:
        self.keys = schema.partition_keys
        self.types = schema.partition_types
        options = schema.table_options
        self.default_name = options.partition_default_name
        self.legacy = options.partition_legacy_name
        self._values: dict[bytes, list[Any]] = {}
        self._paths: dict[bytes, str] = {}

    def values(self, partition: bytes) -> list[Any]:
        cached = self._values.get(partition)
        if cached is None:
            cached = binary_row.decode(partition, self.types)
            if len(cached) != len(self.keys):
                raise ValueError(
                    f"partition row has {len(cached)} fields, the table has {len(self.keys)} keys"
                )
            self._values[partition] = cached
        return cached

    def to_json(self, partition: bytes) -> dict[str, Any]:
        values = self.values(partition)
        return {k: to_json_value(v, t) for k, v, t in zip(self.keys, values, self.types, strict=True)}

    def spec(self, partition: bytes) -> dict[str, str]:
        """Partition key -> directory value before escaping (``partition.default-name`` for null/blank)."""
        spec = {}
        to_string = legacy_partition_string if self.legacy else cast_partition_string
        for key, value, dtype in zip(self.keys, self.values(partition), self.types, strict=True):
            text = None if value is None else to_string(value, dtype)
            spec[key] = self.default_name if text is None or not text.strip() else text
        return spec

    def path(self, partition: bytes) -> str:
        """``k1=v1/k2=v2`` (escaped), or ``""`` for an unpartitioned table."""
        cached = self._paths.get(partition)
        if cached is None:
            cached = "/".join(
                f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in self.spec(partition).items()
            )
            self._paths[partition] = cached
        return cached


class DataFilePaths:
    """Paths of a table's data files, relative to the table root unless the file is external."""

    def __init__(self, schema: TableSchema) -> None:
        self.partitions = PartitionCodec(schema)
        self.path_directory = schema.table_options.data_file_path_directory

    def bucket_directory(self, partition: bytes, bucket: int) -> str:
        parts = [p for p in (self.path_directory, self.partitions.path(partition)) if p]
        parts.append(bucket_directory_name(bucket))
        return posixpath.join(*parts)

    def relative_path(self, entry: ManifestEntry) -> str:
        """The path relative to the table root, or the full ``_EXTERNAL_PATH`` of an external file."""
        external = entry.file.external_path
        if external:
            return external
        return posixpath.join(self.bucket_directory(entry.partition, entry.bucket), entry.file.file_name)
