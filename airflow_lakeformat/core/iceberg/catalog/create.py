"""Create an Iceberg table in a catalog or at a Hadoop-layout path, and nothing anywhere else.

:func:`create_table` publishes a :class:`~airflow_lakeformat.core.iceberg.catalog.table_definition.TableDefinition`
(already checked by ``define_table``) in steps, each of which can refuse before the next one acts:

1. the name must fit the target: with a catalog ``namespace.table``; without one a table root (a local path,
   ``file://``, ``s3://``). A dotted name without ``/`` and no catalog reads as a catalog identifier given
   without its catalog and is refused (``./demo.t`` is the path), as is a ``*.metadata.json`` path;
2. the catalog is loaded (pyiceberg's ``load_catalog``; one it cannot load is a usage error);
3. an existing table there is refused: an Iceberg table in the catalog or at the path, or a Paimon table at
   the path (:class:`~airflow_lakeformat.core.errors.TableAlreadyExistsError`);
4. a missing namespace is created, then the table (format v2 unless the definition says 1). A namespace
   created here is dropped again when the table cannot be created, so a refusal leaves the catalog as it
   was (a catalog that cannot place the table, e.g. one without a ``warehouse``, is a usage error). A Hadoop-layout table is created by publishing ``metadata/v1.metadata.json`` exclusively
   (:class:`~airflow_lakeformat.core.iceberg.catalog.hadoop_catalog.HadoopLayoutCatalog`), so a concurrent creator
   of the same table makes this one fail rather than overwrite it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NotInstalledError,
)
from pyiceberg.exceptions import TableAlreadyExistsError as PyIcebergTableAlreadyExistsError
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table as PyIcebergTable

from airflow_lakeformat.core.errors import (
    LakeformatError,
    TableAlreadyExistsError,
    UnknownTableFormatError,
    UsageError,
)
from airflow_lakeformat.core.formats import detect_format, is_metadata_file
from airflow_lakeformat.core.iceberg.catalog.catalog import load_catalog_from_properties
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog, normalise_root
from airflow_lakeformat.core.iceberg.catalog.table_definition import TableDefinition
from airflow_lakeformat.core.iceberg.errors import IcebergTableAlreadyExistsError


@dataclass(frozen=True)
class CreatedTable:
    """A table :func:`create_table` created, as its metadata says.

    Attributes:
        name: ``namespace.table`` in a catalog, else the table root.
        catalog: The catalog's name, or None for a Hadoop-layout table.
        location: The table location.
        metadata_location: Its first metadata file.
        format_version: The table's format version.
        schema: The schema (ids as the catalog assigned them).
        spec: The partition spec.
        properties: The table properties.
    """

    name: str
    catalog: str | None
    location: str
    metadata_location: str
    format_version: int
    schema: Schema
    spec: PartitionSpec
    properties: dict[str, str]

    @classmethod
    def of(cls, table: PyIcebergTable, name: str, catalog: str | None) -> CreatedTable:
        metadata = table.metadata
        return cls(
            name=name,
            catalog=catalog,
            location=metadata.location,
            metadata_location=table.metadata_location,
            format_version=int(metadata.format_version),
            schema=metadata.schema(),
            spec=metadata.spec(),
            properties=dict(metadata.properties),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``create-table --json`` document (schema and spec in the Iceberg spec's JSON form)."""
        return {
            "table": self.name,
            "format": "iceberg",
            "catalog": self.catalog,
            "location": self.location,
            "metadataLocation": self.metadata_location,
            "formatVersion": self.format_version,
            "schema": json.loads(self.schema.model_dump_json()),
            "partitionSpec": json.loads(self.spec.model_dump_json()),
            "properties": self.properties,
        }

    def summary(self) -> str:
        """One line: ``created db.t (iceberg, format v2, 3 fields, metadata <file>)``."""
        return (
            f"created {self.name} (iceberg, format v{self.format_version}, {len(self.schema.fields)} fields, "
            f"metadata {self.metadata_location})"
        )


def check_target(table: str, in_catalog: bool) -> None:
    """Refuse a name that does not fit its target (step 1 of the module docstring).

    Args:
        table: ``namespace.table`` (with a catalog) or a table root (without).
        in_catalog: Whether a catalog is given.

    Raises:
        UsageError: A path given with a catalog, an identifier without one, a metadata file.

    Example:
        >>> check_target("demo.events", in_catalog=True)
        >>> check_target("/warehouse/demo/events", in_catalog=False)
    """
    looks_like_path = "/" in table or "://" in table or table.startswith("~")
    if in_catalog:
        parts = table.split(".")
        if looks_like_path or len(parts) < 2 or not all(p.strip() for p in parts):
            raise UsageError(
                f"{table}: with --catalog/--catalog-property the table is namespace.table, not a path"
            )
        return
    if is_metadata_file(table):
        raise UsageError(f"{table}: a metadata file cannot be created as a table; give the table root")
    if not looks_like_path and "." in table:
        raise UsageError(
            f"{table}: reads as namespace.table, which needs a catalog (--catalog NAME or --catalog-property "
            f"type=... uri=... warehouse=...); for a Hadoop-layout table at a path write ./{table}"
        )


def create_table(
    table: str,
    definition: TableDefinition,
    *,
    catalog_name: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> CreatedTable:
    """Create the table ``definition`` describes, in the catalog when one is given, else at the path.

    Args:
        table: ``namespace.table`` with a catalog; else the table root (local path, ``file://``, ``s3://``).
        definition: The checked definition (``table_definition.define_table``).
        catalog_name: A catalog from pyiceberg's configuration (``.pyiceberg.yaml``, environment).
        catalog_properties: Catalog properties as ``load_catalog`` takes them (``type``, ``uri``, ``warehouse``).
        storage_options: fsspec options for a Hadoop-layout table's store.

    Returns:
        The created table.

    Raises:
        UsageError: The name does not fit the target, or the catalog cannot be loaded.
        TableAlreadyExistsError: A table (Iceberg, or Paimon at a path) is already there; nothing changed.

    Example:
        >>> definition = define_table("demo.events", [SqlColumn("id", "BIGINT")])  # doctest: +SKIP
        >>> create_table("demo.events", definition, catalog_properties={"type": "sql",
        ...     "uri": "sqlite:////tmp/c.db", "warehouse": "file:///tmp/wh"}).metadata_location  # doctest: +SKIP
    """
    in_catalog = catalog_name is not None or bool(catalog_properties)
    check_target(table, in_catalog)
    if in_catalog:
        catalog = _load_catalog(catalog_name, catalog_properties)
        created = _create_in_catalog(catalog, table, definition)
        return CreatedTable.of(created, table, catalog.name)
    return _create_at_path(table, definition, storage_options)


def _load_catalog(name: str | None, properties: Mapping[str, str] | None) -> Catalog:
    try:
        return load_catalog_from_properties(name, properties)
    except (ValueError, TypeError, NotInstalledError) as exc:
        raise UsageError(f"catalog {name or 'default'!r} cannot be loaded: {exc}") from exc


def _create_in_catalog(catalog: Catalog, identifier: str, definition: TableDefinition) -> PyIcebergTable:
    display = f"{catalog.name}:{identifier}"
    if catalog.table_exists(identifier):
        raise IcebergTableAlreadyExistsError(display, "the catalog already has this table")
    namespace = Catalog.namespace_from(identifier)
    created_namespace = _ensure_namespace(catalog, namespace)
    try:
        return catalog.create_table(
            identifier,
            schema=definition.schema,
            partition_spec=definition.spec,
            properties=definition.properties,
        )
    except BaseException as exc:
        if created_namespace:
            with contextlib.suppress(NoSuchNamespaceError, NamespaceNotEmptyError):
                catalog.drop_namespace(namespace)
        if isinstance(exc, PyIcebergTableAlreadyExistsError):
            raise IcebergTableAlreadyExistsError(display, "another writer created this table first") from exc
        if isinstance(exc, ValueError) and not isinstance(exc, LakeformatError):
            # pyiceberg's word for a catalog that cannot place the table (no warehouse, a bad location)
            raise UsageError(f"{display}: the catalog cannot create this table: {exc}") from exc
        raise


def _ensure_namespace(catalog: Catalog, namespace: tuple[str, ...]) -> bool:
    """Create the namespace if missing; True when this call created it."""
    if catalog.namespace_exists(namespace):
        return False
    try:
        catalog.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        return False  # another writer created it meanwhile: theirs, never ours to drop
    return True


def _create_at_path(
    table: str, definition: TableDefinition, storage_options: Mapping[str, Any] | None
) -> CreatedTable:
    root = normalise_root(table)
    _refuse_existing_table_at(root, storage_options)
    catalog = HadoopLayoutCatalog(storage_options=storage_options)
    try:
        created = catalog.create_table(
            root, schema=definition.schema, partition_spec=definition.spec, properties=definition.properties
        )
    except CommitFailedException as exc:  # v1.metadata.json appeared meanwhile: another creator won
        raise IcebergTableAlreadyExistsError(root, "another writer created this table first") from exc
    return CreatedTable.of(created, root, None)


def _refuse_existing_table_at(root: str, storage_options: Mapping[str, Any] | None) -> None:
    try:
        found = detect_format(root, storage_options=storage_options)
    except UnknownTableFormatError:
        return  # no table there (an empty or missing directory)
    if found == "paimon":
        raise TableAlreadyExistsError(root)
    raise IcebergTableAlreadyExistsError(root)
