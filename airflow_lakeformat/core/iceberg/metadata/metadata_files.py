"""Table metadata files: decode with typed errors, encode exactly as pyiceberg does, Hadoop version files.

Decoding (:func:`parse_table_metadata`) accepts plain or gzip JSON (sniffed by the gzip magic, so the
``.gz.metadata.json`` and legacy ``.metadata.json.gz`` names both work), checks ``format-version`` before
pydantic sees the document (an unknown version gets :class:`UnsupportedFormatError`, not a validation
dump), and turns every parse failure into :class:`CorruptMetadataError` naming the file.

Encoding (:func:`serialize_table_metadata`) is pyiceberg's own ``serializers.ToOutputFile.table_metadata``
without the output file: ``model_dump_json(exclude_none=not legacy-current-snapshot-id)``, gzip when
the name says ``.gz.metadata.json``.

Hadoop layout (Java ``org.apache.iceberg.hadoop.HadoopTableOperations`` and ``hadoop/Util.java``;
reference section 1.1): ``<root>/metadata/v<N>.metadata.json`` (``v<N>.gz.metadata.json`` with
``write.metadata.compression-codec=gzip``) and ``<root>/metadata/version-hint.text`` holding ``N``.
:func:`find_current_version` follows Java's ``findVersion`` + ``refresh``: read the hint; if it is
missing, unreadable or names a missing file, list ``metadata/`` and take the highest ``N``; then walk
forward while ``v<N+1>`` exists (a stale hint: the writer crashed between the two writes, or its hint
write failed, which Java treats as best-effort too).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

from pyiceberg.exceptions import ValidationError as PyIcebergValidationError
from pyiceberg.serializers import Compressor
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.utils.config import Config

from airflow_lakeformat.core.errors import CorruptMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.iceberg.errors import MAX_READ_FORMAT_VERSION
from airflow_lakeformat.core.io import FileIO

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
METADATA_SUFFIX = ".metadata.json"
COMPRESSION_CODEC_PROPERTY = "write.metadata.compression-codec"

# v12.metadata.json, v12.gz.metadata.json, and the legacy v12.metadata.json.gz
HADOOP_METADATA_NAME = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json(\.gz)?$")
_GZIP_MAGIC = b"\x1f\x8b"


def parse_table_metadata(data: bytes, location: str) -> TableMetadata:
    """Decode a ``*.metadata.json`` document (plain or gzip) into pyiceberg's ``TableMetadata``.

    Args:
        data: The file's bytes.
        location: The file's URI, for error messages.

    Returns:
        The validated metadata model (``TableMetadataV1``/``V2``/``V3``).

    Raises:
        CorruptMetadataError: Not gzip/UTF-8/JSON, not an object, or rejected by the Iceberg model.
        UnsupportedFormatError: A ``format-version`` this release does not read.

    Example:
        >>> metadata = parse_table_metadata(io.read_bytes(path), io.uri(path))  # doctest: +SKIP
    """
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptMetadataError(location, f"not a valid gzip file ({exc})") from exc
    try:
        text = data.decode("utf-8")
        document: Any = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptMetadataError(location, f"not a valid table metadata JSON document ({exc})") from exc
    if not isinstance(document, dict):
        raise CorruptMetadataError(location, "table metadata is not a JSON object")
    version = document.get("format-version")
    if version is None:
        raise CorruptMetadataError(location, "table metadata has no format-version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptMetadataError(location, f"format-version {version!r} is not an integer")
    if not 1 <= version <= MAX_READ_FORMAT_VERSION:
        raise UnsupportedFormatError(
            location, f"format-version {version} (this release reads 1 to {MAX_READ_FORMAT_VERSION})"
        )
    try:
        return TableMetadataUtil.parse_raw(text)
    except (PyIcebergValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # pydantic's ValidationError is a ValueError; pyiceberg wraps it in its own ValidationError.
        detail = " ".join(str(exc).split())
        if len(detail) > 500:
            detail = detail[:500] + "..."
        raise CorruptMetadataError(location, f"invalid table metadata ({detail})") from exc


def serialize_table_metadata(metadata: TableMetadata, location: str) -> bytes:
    """Encode metadata exactly as pyiceberg's ``ToOutputFile.table_metadata`` writes it to ``location``.

    Args:
        metadata: The metadata to write.
        location: Where it goes; a ``.gz.metadata.json`` name selects gzip, as in pyiceberg.

    Returns:
        The file content.
    """
    exclude_none = not Config().get_bool("legacy-current-snapshot-id")
    json_bytes = metadata.model_dump_json(exclude_none=exclude_none).encode("utf-8")
    return Compressor.get_compressor(location).bytes_compressor()(json_bytes)


def metadata_codec(properties: dict[str, str], location: str) -> str:
    """The ``write.metadata.compression-codec`` of a table: ``"none"`` or ``"gzip"`` (Java's two codecs).

    Raises:
        UnsupportedFormatError: Any other codec (Java rejects it too: ``TableMetadataParser.Codec``).
    """
    codec = (properties.get(COMPRESSION_CODEC_PROPERTY) or "none").strip().lower()
    if codec not in ("none", "gzip"):
        raise UnsupportedFormatError(location, f"{COMPRESSION_CODEC_PROPERTY}={codec!r} (only none and gzip)")
    return codec


def hadoop_metadata_name(version: int, codec: str = "none") -> str:
    """``v<N>.metadata.json``, or ``v<N>.gz.metadata.json`` for gzip (Java ``metadataFilePath``)."""
    return f"v{version}.gz{METADATA_SUFFIX}" if codec == "gzip" else f"v{version}{METADATA_SUFFIX}"


def hadoop_version_of(name: str) -> int | None:
    """The ``N`` of a Hadoop metadata file name, or None for any other name."""
    match = HADOOP_METADATA_NAME.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class HadoopVersion:
    """The current metadata file of a Hadoop-layout table."""

    version: int
    path: str  # fsspec path of the metadata file
    hint_was_current: bool  # False when the hint was missing, unreadable or stale


def read_version_hint(io: FileIO, metadata_dir: str) -> int | None:
    """The version in ``version-hint.text`` (``N``, ``vN`` or a ``vN...metadata.json`` name), or None."""
    try:
        text = io.read_text(io.join(metadata_dir, VERSION_HINT)).strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if text.isdigit():
        return int(text)
    if text.startswith("v") and text[1:].isdigit():
        return int(text[1:])
    return hadoop_version_of(text)


def metadata_file_for_version(io: FileIO, metadata_dir: str, version: int) -> str | None:
    """The existing metadata file of ``version`` (any codec naming), or None (Java ``getMetadataFile``)."""
    for name in (
        hadoop_metadata_name(version),
        hadoop_metadata_name(version, "gzip"),
        f"v{version}.metadata.json.gz",
    ):
        path = io.join(metadata_dir, name)
        if io.exists(path):
            return path
    return None


def listed_versions(io: FileIO, metadata_dir: str) -> dict[int, str]:
    """Every ``v<N>`` metadata file in ``metadata_dir`` by version (first name wins per version)."""
    versions: dict[int, str] = {}
    for status in io.list_dir(metadata_dir):
        version = hadoop_version_of(status.name)
        if version is not None and not status.is_dir:
            versions.setdefault(version, status.path)
    return versions


def find_current_version(io: FileIO, metadata_dir: str) -> HadoopVersion | None:
    """Locate the current metadata file of a Hadoop-layout table; None if there is none.

    Args:
        io: The table's FileIO.
        metadata_dir: fsspec path of ``<root>/metadata``.

    Returns:
        The highest committed version, found as described in the module docstring.
    """
    hinted = read_version_hint(io, metadata_dir)
    version: int | None = None
    path: str | None = None
    if hinted is not None:
        path = metadata_file_for_version(io, metadata_dir, hinted)
        if path is not None:
            version = hinted
    if version is None or path is None:
        listed = listed_versions(io, metadata_dir)
        if not listed:
            return None
        version = max(listed)
        path = listed[version]
    hint_was_current = version == hinted
    while (following := metadata_file_for_version(io, metadata_dir, version + 1)) is not None:
        version, path, hint_was_current = version + 1, following, False
    return HadoopVersion(version=version, path=path, hint_was_current=hint_was_current)
