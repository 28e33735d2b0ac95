"""Which table format a location holds: Paimon or Iceberg, told from the files alone.

A Paimon table root has ``snapshot/`` and/or ``schema/`` (``SnapshotManager``, ``SchemaManager``); an
Iceberg table root has ``metadata/*.metadata.json`` (Java's ``HadoopTableOperations`` layout), and a
``*.metadata.json`` file is an Iceberg table's metadata itself. This module is format-neutral: one
listing of the root (two for Iceberg), no format library imported, so a command can pick its format
before it loads either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from airflow_lakeformat.core.errors import UnknownTableFormatError
from airflow_lakeformat.core.io import FileIO

TableFormat = Literal["paimon", "iceberg"]
PAIMON_MARKERS = ("snapshot", "schema")
ICEBERG_METADATA_DIR = "metadata"
ICEBERG_METADATA_SUFFIX = ".metadata.json"


def is_metadata_file(uri: str) -> bool:
    """True for ``*.metadata.json`` (and gzip ``*.gz.metadata.json`` / legacy ``*.metadata.json.gz``)."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return name.endswith(ICEBERG_METADATA_SUFFIX) or name.endswith(ICEBERG_METADATA_SUFFIX + ".gz")


def _fs_path(uri: str, io: FileIO) -> str:
    if "://" in uri:
        rest = uri.split("://", 1)[1]
        return rest if io.protocol != "file" else "/" + rest.lstrip("/")
    return os.path.abspath(uri) if io.is_local else uri


def detect_format(
    uri: str, io: FileIO | None = None, storage_options: Mapping[str, Any] | None = None
) -> TableFormat:
    """Whether ``uri`` is a Paimon or an Iceberg table.

    Args:
        uri: Table root (or an Iceberg ``*.metadata.json`` file).
        io: The FileIO of the store (made from ``uri`` and ``storage_options`` if omitted).
        storage_options: fsspec options, used only when ``io`` is omitted.

    Returns:
        ``"paimon"`` when the root has ``snapshot/`` or ``schema/``; ``"iceberg"`` for a metadata file or a
        root with ``metadata/*.metadata.json``.

    Raises:
        UnknownTableFormatError: (a TableNotFoundError) neither, naming what was looked for.

    Example:
        >>> detect_format("/warehouse/events")  # doctest: +SKIP
        'iceberg'
    """
    if io is None:
        io, path = FileIO.for_uri(uri, storage_options)
    else:
        path = _fs_path(uri, io).rstrip("/") or "/"
    if is_metadata_file(path):
        if io.exists(path):
            return "iceberg"
        raise UnknownTableFormatError(uri, "the metadata file does not exist")
    names = set(io.list_names(path))
    if names.intersection(PAIMON_MARKERS):
        return "paimon"
    if ICEBERG_METADATA_DIR in names:
        metadata_names = io.list_names(io.join(path, ICEBERG_METADATA_DIR))
        if any(is_metadata_file(name) for name in metadata_names):
            return "iceberg"
    if not names and not io.exists(path):
        raise UnknownTableFormatError(uri, "the path does not exist")
    if "_delta_log" in names:
        raise UnknownTableFormatError(
            uri, "a Delta Lake table (_delta_log/): lakeformat maintains Paimon and Iceberg tables only"
        )
    if ".hoodie" in names:
        raise UnknownTableFormatError(
            uri, "an Apache Hudi table (.hoodie/): lakeformat maintains Paimon and Iceberg tables only"
        )
    raise UnknownTableFormatError(
        uri, "looked for Paimon snapshot/ or schema/ and for Iceberg metadata/*.metadata.json; found neither"
    )
