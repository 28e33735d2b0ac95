"""Opening Iceberg tables (catalog, Hadoop-layout path, metadata file) and telling Iceberg from Paimon.

Three ways in, all returning an :class:`~airflow_lakeformat.core.iceberg.metadata.table.IcebergTable`:

* a catalog table: ``open_catalog_table("db.events", catalog_properties={...})`` loads a catalog with
  pyiceberg's ``load_catalog(name, **properties)`` (which merges ``.pyiceberg.yaml`` and
  ``PYICEBERG_CATALOG__<NAME>__*`` variables), SQL on an SQLite file being the embedded default;
* a table root in the Hadoop layout (``<root>/metadata/v<N>.metadata.json``), through
  :class:`~airflow_lakeformat.core.iceberg.catalog.hadoop_catalog.HadoopLayoutCatalog`: readable and committable;
* a ``*.metadata.json`` file: read-only (pyiceberg's ``StaticTable`` with a catalog that refuses commits).

:func:`detect_format` says whether a location holds a Paimon or an Iceberg table: Paimon roots have
``snapshot/`` and/or ``schema/`` directories (Paimon ``SnapshotManager``/``SchemaManager``), Iceberg roots
``metadata/*.metadata.json`` (Iceberg spec, "Table Metadata"; Hadoop tables ``metadata/v<N>.metadata.json``).

pyiceberg exceptions are translated here: ``NoSuchTableError``/``NoSuchNamespaceError`` become
:class:`IcebergTableNotFoundError`, metadata decode failures ``CorruptMetadataError`` naming the file.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.exceptions import ValidationError as PyIcebergValidationError
from pyiceberg.io import load_file_io
from pyiceberg.table import StaticTable
from pyiceberg.table import Table as PyIcebergTable

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    LakeformatError,
    MissingMetadataError,
    UsageError,
)
from airflow_lakeformat.core.formats import is_metadata_file
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import (
    HadoopLayoutCatalog,
    ReadOnlyCatalog,
    normalise_root,
)
from airflow_lakeformat.core.iceberg.errors import IcebergTableNotFoundError
from airflow_lakeformat.core.iceberg.metadata import metadata_files
from airflow_lakeformat.core.iceberg.metadata.fileio import (
    pyiceberg_io_properties,
    storage_options_from_properties,
)
from airflow_lakeformat.core.iceberg.metadata.table import DEFAULT_READ_PARALLELISM, IcebergTable
from airflow_lakeformat.core.io import FileIO

SQLITE_CATALOG_FILE = "iceberg_catalog.db"


def open_path_table(
    uri: str,
    storage_options: Mapping[str, Any] | None = None,
    read_parallelism: int = DEFAULT_READ_PARALLELISM,
) -> IcebergTable:
    """Open a Hadoop-layout table root (committable) or a ``*.metadata.json`` file (read-only).

    Args:
        uri: Local path, ``file://`` or ``s3://`` URI of the table root or of one metadata file.
        storage_options: fsspec options for the store (also mapped to pyiceberg's FileIO properties).
        read_parallelism: Threads used to read manifests.

    Returns:
        The opened table.

    Raises:
        IcebergTableNotFoundError: Nothing Iceberg at the location.
        CorruptMetadataError: The metadata file cannot be decoded.
        UnsupportedFormatError: Unknown ``format-version``.

    Example:
        >>> table = open_path_table("s3://bucket/wh/events", {"endpoint_url": "http://127.0.0.1:8333"})  # doctest: +SKIP
    """
    if is_metadata_file(uri):
        return _open_metadata_file(uri, storage_options, read_parallelism)
    catalog = HadoopLayoutCatalog(storage_options=storage_options)
    root = normalise_root(uri)
    table = catalog.load_table(root)
    io, path = catalog.file_io(root)
    return IcebergTable(table, io, path, name=uri, read_parallelism=read_parallelism)


def _open_metadata_file(
    uri: str, storage_options: Mapping[str, Any] | None, read_parallelism: int
) -> IcebergTable:
    io, path = FileIO.for_uri(uri, storage_options)
    location = io.uri(path)
    try:
        data = io.read_bytes(path)
    except FileNotFoundError as exc:
        raise IcebergTableNotFoundError(uri, "the metadata file does not exist") from exc
    metadata = metadata_files.parse_table_metadata(data, location)
    properties = {**pyiceberg_io_properties(uri, storage_options), **metadata.properties}
    table = StaticTable(
        identifier=("static-table", location),
        metadata=metadata,
        metadata_location=location,
        io=load_file_io(properties, location=location),
        catalog=ReadOnlyCatalog(location),
    )
    parent = posixpath.dirname(path)
    root = posixpath.dirname(parent) if posixpath.basename(parent) == metadata_files.METADATA_DIR else parent
    return IcebergTable(table, io, root, name=uri, read_only=True, read_parallelism=read_parallelism)


def load_catalog_from_properties(
    catalog_name: str | None = None, catalog_properties: Mapping[str, str] | None = None
) -> Catalog:
    """Load a pyiceberg catalog; an SQLite catalog in the warehouse when nothing selects a type.

    Args:
        catalog_name: A catalog name (looked up in pyiceberg's config file and environment).
        catalog_properties: Properties as ``load_catalog`` takes them (``type``, ``uri``, ``warehouse``, ...).

    Returns:
        The catalog.
    """
    properties = dict(catalog_properties or {})
    selects_type = any(key in properties for key in ("type", "uri", "py-catalog-impl"))
    warehouse = properties.get("warehouse")
    if (
        not selects_type
        and catalog_name is None
        and warehouse
        and "://" not in warehouse.replace("file://", "")
    ):
        local = warehouse.removeprefix("file://")
        os.makedirs(local, exist_ok=True)
        properties.update(
            type="sql", uri=f"sqlite:///{os.path.join(os.path.abspath(local), SQLITE_CATALOG_FILE)}"
        )
    name = catalog_name or "default"
    try:
        return load_catalog(name, **properties)
    except ValueError as exc:
        if "URI missing" not in str(exc):
            raise
        # pyiceberg's own words name a --uri flag lakeformat does not have.
        variable = f"PYICEBERG_CATALOG__{name.upper()}__URI"
        raise UsageError(
            f"no Iceberg catalog {name!r} is configured: none in ~/.pyiceberg.yaml or ${variable}, "
            "and no --catalog-property uri=... or type=... given"
        ) from exc


def open_catalog_table(
    identifier: str,
    catalog_name: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    read_parallelism: int = DEFAULT_READ_PARALLELISM,
    catalog: Catalog | None = None,
) -> IcebergTable:
    """Open ``namespace.table`` from a catalog (SQL, REST, Glue, Hive, or a named catalog from config).

    Args:
        identifier: ``namespace.table``.
        catalog_name: A catalog configured in ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*``.
        catalog_properties: Properties for ``pyiceberg.catalog.load_catalog``.
        storage_options: fsspec options for the core FileIO (default: from the catalog's ``s3.*`` properties).
        read_parallelism: Threads used to read manifests.
        catalog: An already loaded catalog (overrides name and properties).

    Returns:
        The opened table (committable through the catalog).

    Raises:
        IcebergTableNotFoundError: No such table or namespace.
        CorruptMetadataError: The catalog's current metadata file cannot be decoded.

    Example:
        >>> table = open_catalog_table("db.events", catalog_properties={"type": "sql",
        ...     "uri": "sqlite:////tmp/c.db", "warehouse": "file:///tmp/wh"})  # doctest: +SKIP
    """
    catalog = catalog or load_catalog_from_properties(catalog_name, catalog_properties)
    display = f"{catalog.name}:{identifier}"
    try:
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise IcebergTableNotFoundError(display, f"the catalog has no such table: {exc}") from exc
    except LakeformatError:
        raise
    except FileNotFoundError as exc:
        raise MissingMetadataError(str(exc.filename or display), f"catalog table {display}") from exc
    except (PyIcebergValidationError, ValueError, json.JSONDecodeError) as exc:
        raise CorruptMetadataError(display, f"the current metadata file cannot be decoded ({exc})") from exc
    options = dict(storage_options) if storage_options is not None else {}
    if storage_options is None:
        options = storage_options_from_properties({**catalog.properties, **table.io.properties})
    io, root = FileIO.for_uri(table.location(), options)
    return IcebergTable(table, io, root, name=display, read_parallelism=read_parallelism)


def wrap_table(table: PyIcebergTable, storage_options: Mapping[str, Any] | None = None) -> IcebergTable:
    """Wrap a pyiceberg table already at hand (tests, callers with their own catalog)."""
    options = dict(storage_options or storage_options_from_properties(table.io.properties))
    io, root = FileIO.for_uri(table.location(), options)
    if isinstance(table.catalog, HadoopLayoutCatalog):
        name = normalise_root(table.name())
    else:
        name = f"{table.catalog.name}:{'.'.join(table.name())}"
    return IcebergTable(table, io, root, name=name, read_only=isinstance(table.catalog, ReadOnlyCatalog))


def open_table(
    uri_or_identifier: str,
    *,
    catalog_name: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    read_parallelism: int = DEFAULT_READ_PARALLELISM,
) -> IcebergTable:
    """Open a table from a catalog (when a catalog is named or configured) or from a path.

    Args:
        uri_or_identifier: ``namespace.table`` with a catalog, else a table root or ``*.metadata.json``.
        catalog_name: Named catalog from pyiceberg's configuration.
        catalog_properties: Catalog properties (``load_catalog`` keyword arguments).
        storage_options: fsspec storage options.
        read_parallelism: Threads used to read manifests.

    Returns:
        The opened table.

    Example:
        >>> open_table("/warehouse/events").snapshot().snapshot_id  # doctest: +SKIP
        >>> open_table("db.events", catalog_name="prod")  # doctest: +SKIP
    """
    if catalog_name is not None or catalog_properties:
        return open_catalog_table(
            uri_or_identifier, catalog_name, catalog_properties, storage_options, read_parallelism
        )
    return open_path_table(uri_or_identifier, storage_options, read_parallelism)
