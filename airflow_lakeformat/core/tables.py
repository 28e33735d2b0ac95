"""One entry point for both formats: ``open_table(...)`` and ``table.maintenance``.

The shape follows pyiceberg's ``table.maintenance.expire_snapshots()`` and delta-rs's
``dt.vacuum(dry_run=True)`` / ``dt.optimize.compact()``: open a table, then call its maintenance
operations, each of which has a ``plan_*`` twin that computes and returns the plan as a value and
changes nothing. Every operation returns one result type per operation with ``to_json()`` (the
document the CLI prints and the Airflow operators push to XCom) and ``summary()`` (the line both log).

``dry_run`` means the same everywhere: plan and report, write and delete nothing. The operations that
delete (``expire_snapshots``, ``remove_orphan_files``) default to ``dry_run=True``; the ones that
only add files and commit (``compact_manifests``, ``compact_data``) default to ``False``, because
what they replace stays on disk until an expiry deletes it.

Example:
    >>> table = open_table("/warehouse/db.db/events")                # Paimon, detected
    >>> table.maintenance.expire_snapshots(retain_min=5).summary()   # a dry run
    >>> table.maintenance.compact_manifests(mode="full")
    >>> iceberg = open_table("db.events", catalog_properties={"type": "sql", "uri": "sqlite:///c.db"})
    >>> iceberg.format
    'iceberg'

This module imports neither format at import time; each is loaded when a table of it is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.formats import TableFormat, detect_format
from airflow_lakeformat.core.table_maintenance import IcebergMaintenance, ManifestMode, PaimonMaintenance

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.sources import WriteSchema

__all__ = [
    "IcebergLakeTable",
    "IcebergMaintenance",
    "ManifestMode",
    "PaimonMaintenance",
    "PaimonTable",
    "open_table",
]


def open_table(
    uri_or_identifier: str,
    *,
    format: TableFormat | None = None,
    storage_options: Mapping[str, Any] | None = None,
    catalog: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    branch: str = "main",
) -> PaimonTable | IcebergLakeTable:
    """Open a Paimon or an Iceberg table.

    Args:
        uri_or_identifier: a table root (local path, ``file://``, ``s3://``, any fsspec URL), an Iceberg
            ``*.metadata.json`` (read-only), or ``namespace.table`` in an Iceberg catalog.
        format: ``"paimon"`` or ``"iceberg"``; detected from the files when omitted (Paimon has
            ``snapshot/`` and ``schema/``, Iceberg ``metadata/*.metadata.json``). A catalog implies Iceberg.
        storage_options: fsspec options for the table's store (S3 keys, endpoint, ...).
        catalog: an Iceberg catalog name from pyiceberg's configuration (``~/.pyiceberg.yaml``).
        catalog_properties: Iceberg catalog properties as pyiceberg's ``load_catalog`` takes them.
        branch: the Paimon branch to open (Iceberg refs are chosen per read).

    Returns:
        A table with ``.format``, ``.uri`` and ``.maintenance``.

    Raises:
        TableNotFoundError: no table of either format there (exit code 3 in the CLI).

    Example:
        >>> open_table("s3://lake/db.db/events", storage_options={"endpoint_url": "http://127.0.0.1:8333"})
    """
    if format is None:
        if catalog or catalog_properties:
            format = "iceberg"
        else:
            format = detect_format(uri_or_identifier, storage_options=storage_options)
    if format == "iceberg":
        from airflow_lakeformat.core.iceberg.catalog.catalog import open_table as open_iceberg

        return IcebergLakeTable(
            open_iceberg(
                uri_or_identifier,
                catalog_name=catalog,
                catalog_properties=catalog_properties,
                storage_options=storage_options,
            )
        )
    if format != "paimon":
        raise ValueError(f"format must be 'paimon' or 'iceberg', not {format!r}")
    from airflow_lakeformat.core.paimon.table import Table

    return PaimonTable(Table.open(uri_or_identifier, storage_options, branch=branch))


class PaimonTable:
    """A Paimon table behind the common facade; ``.native`` is the core's :class:`Table`."""

    format: TableFormat = "paimon"

    def __init__(self, native: Table) -> None:
        self.native = native
        self.maintenance = PaimonMaintenance(native)

    @property
    def uri(self) -> str:
        return self.native.uri

    def write_schema(self) -> WriteSchema:
        """The columns a write must deliver, for ``core.sources.read_source`` (Paimon's types and names)."""
        from airflow_lakeformat.core.paimon.write.rows import write_schema

        return write_schema(self.native.schema)

    def __repr__(self) -> str:
        return f"PaimonTable({self.uri!r})"


class IcebergLakeTable:
    """An Iceberg table behind the common facade; ``.native`` is the core's :class:`IcebergTable`."""

    format: TableFormat = "iceberg"

    def __init__(self, native: IcebergTable) -> None:
        self.native = native
        self.maintenance = IcebergMaintenance(native)

    @property
    def uri(self) -> str:
        return self.native.name

    def write_schema(self) -> WriteSchema:
        """The columns a write must deliver, for ``core.sources.read_source`` (the current schema's)."""
        from airflow_lakeformat.core.iceberg.write.write import write_schema

        return write_schema(self.native)

    def __repr__(self) -> str:
        return f"IcebergLakeTable({self.uri!r})"
