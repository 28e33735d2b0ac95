"""Where Paimon puts things: metadata names and data-file paths, computed as Paimon Java does.

A data file lives at ``<root>[/<data-file.path-directory>]/<k1=v1>/<k2=v2>/bucket-<b>/<name>``, or at
its ``_EXTERNAL_PATH`` (a full path) when the table writes to external paths. Partition
directory names use the legacy ``toString()`` of internal values (DATE as a day number) unless
``partition.legacy-name`` is false, map null and blank values to ``partition.default-name`` and
escape a fixed character set as ``%XX``.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import CHARACTER_ROOTS, DataType
from airflow_lakeformat.core.paimon.values import (
    cast_partition_string,
    legacy_partition_string,
    to_json_value,
)

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


PartitionSpec = dict[str, "str | None"]
"""A user's partition selection: key -> value as text, ``None`` (or the default partition name) for NULL."""


def parse_partition_spec(spec: Mapping[str, Any] | str | None) -> PartitionSpec | None:
    """A partition filter from ``"dt=2024-01-01,region=eu"``, a JSON object or a dict; ``"*"``, empty or None -> None.

    None means the whole table. In the ``k=v`` form keys and values are stripped of surrounding blanks,
    so values with blanks, commas or a leading ``{`` are written as a JSON object instead
    (``'{"p": " ", "q": null}'``), which keeps every value exactly; JSON ``null`` selects NULL, as the
    default partition name does. A part without ``=`` raises :class:`ValueError` naming the spec.
    """
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return {str(k): _spec_value(v) for k, v in spec.items()} or None
    text = str(spec).strip()
    if text in ("", "*"):
        return None
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"partition spec {text!r} is not a JSON object: {exc}") from None
        if not isinstance(document, dict):
            raise ValueError(f"partition spec {text!r} is not a JSON object")
        return parse_partition_spec(document)
    pairs: PartitionSpec = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"partition spec {text!r}: {part!r} is not of the form KEY=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs or None


def _spec_value(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ValueError(f"partition value {value!r} is not a scalar")
    return str(value)


def format_partition_spec(spec: Mapping[str, str | None] | None) -> str:
    """The text form :func:`parse_partition_spec` reads back to ``spec`` exactly (``"*"`` for None).

    ``k=v[,k=v]`` when every value survives that form unchanged, else a JSON object.
    """
    if not spec:
        return "*"
    plain = all(
        value is not None and "," not in key + value and "=" not in key and key.strip() == key != ""
        and value.strip() == value and not key.startswith("{")
        for key, value in spec.items()
    )  # fmt: skip
    if plain:
        return ",".join(f"{k}={v}" for k, v in spec.items())
    return json.dumps(dict(spec), ensure_ascii=False)


def parse_overwrite_spec(spec: Mapping[str, Any] | str) -> PartitionSpec | None:
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


class PartitionFilter:
    """Selects partitions by value, as Paimon does: never by directory name.

    Paimon turns a partition spec into a predicate (``PredicateBuilder.partition``, used by
    ``FileStoreCommitImpl.overwrite`` and pypaimon's ``_create_static_partition_filter``): the default
    partition name (or a null) means ``IS NULL``, any other value ``=`` the value. Directory names
    cannot be used to match: NULL, ``''`` and ``' '`` of a STRING key all live under the default
    partition's directory, and an overwrite of NULL must leave the other two alone.

    A spec value matches a character-typed value only when equal to it; for other types it may be
    written as the value's JSON rendering (``2024-01-01``) or its partition string (the legacy day
    number of a DATE, ``true``), each of which names exactly one value. ``specs`` is any of several
    partitions (OR); ``None`` or empty selects every partition.

    Example:
        >>> match = PartitionFilter(PartitionCodec(table.schema), [{"p": "__DEFAULT_PARTITION__"}])
        >>> [e for e in entries if match(e.partition)]  # only the files of p IS NULL
    """

    def __init__(
        self,
        codec: PartitionCodec,
        specs: Sequence[Mapping[str, str | None]] | None,
        where: str = "partition filter",
    ) -> None:
        self.codec = codec
        self.specs = [dict(spec) for spec in specs or [] if spec]
        for spec in self.specs:
            unknown = set(spec) - set(codec.keys)
            if unknown:
                raise ValueError(
                    f"{where}: {sorted(unknown)} are not partition keys "
                    f"(keys: {', '.join(codec.keys) or 'none'})"
                )
        self._positions = {key: i for i, key in enumerate(codec.keys)}
        self._cache: dict[bytes, bool] = {}

    @property
    def selects_all(self) -> bool:
        return not self.specs

    def __call__(self, partition: bytes) -> bool:
        if not self.specs:
            return True
        cached = self._cache.get(partition)
        if cached is None:
            values = self.codec.values(partition)
            cached = any(
                all(self._value_matches(values[self._positions[k]], k, v) for k, v in spec.items())
                for spec in self.specs
            )
            self._cache[partition] = cached
        return cached

    def _value_matches(self, value: Any, key: str, wanted: str | None) -> bool:
        if wanted is None or wanted == self.codec.default_name:
            return value is None
        if value is None:
            return False
        dtype = self.codec.types[self._positions[key]]
        return wanted in value_texts(value, dtype)


def value_texts(value: Any, dtype: DataType) -> set[str]:
    """Texts that name exactly this (non-null) internal value in a partition spec."""
    if dtype.root in CHARACTER_ROOTS:
        return {value}
    texts = {legacy_partition_string(value, dtype), cast_partition_string(value, dtype)}
    rendered = to_json_value(value, dtype)
    texts.add(("true" if rendered else "false") if isinstance(rendered, bool) else str(rendered))
    return texts


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
