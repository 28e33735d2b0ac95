"""Fetching one manifest list or manifest's bytes, for every reader of Iceberg metadata files.

A file of a table on local disk (a ``file:`` or scheme-less location) is read with ``open``, far cheaper
per file than a pyarrow stream; every other location through pyiceberg's FileIO, so every scheme the
metadata names is read. A missing file is :class:`MissingMetadataError` naming it and what referenced it
(``FileNotFoundError``, or an ``OSError`` whose text says the object is missing, as object stores' clients
raise it); other errors propagate unchanged.

Example::

    data = fetch_metadata_file(table, snapshot.manifest_list, "the current snapshot")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lakeformat.core.errors import MissingMetadataError
from airflow_lakeformat.core.iceberg.location import split_location

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.table import IcebergTable


def fetch_metadata_file(table: IcebergTable, location: str, referenced_by: str) -> bytes:
    """A manifest list's or manifest's bytes through pyiceberg's FileIO (every scheme of the metadata).

    Raises:
        MissingMetadataError: The file does not exist.
    """
    try:
        local = local_path(table, location)
        if local is not None:
            with open(local, "rb") as handle:
                return handle.read()
        with table.table.io.new_input(location).open() as stream:
            return bytes(stream.read())
    except FileNotFoundError as exc:
        raise MissingMetadataError(location, referenced_by) from exc
    except OSError as exc:
        text = str(exc).lower()
        if "not found" in text or "no such file" in text or "does not exist" in text or "nosuchkey" in text:
            raise MissingMetadataError(location, referenced_by) from exc
        raise


def local_path(table: IcebergTable, location: str) -> str | None:
    """The local path of a ``file:`` or scheme-less location of a table on local disk (read with ``open``:
    far cheaper per file than a pyarrow stream), else None."""
    if not table.io.is_local:
        return None
    scheme, authority, path = split_location(location)
    if scheme not in (None, "file") or authority not in (None, "", "localhost") or not path.startswith("/"):
        return None
    return path


__all__ = ["fetch_metadata_file", "local_path"]
