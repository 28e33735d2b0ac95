"""Fetching one manifest list or manifest's bytes, for every reader of Iceberg metadata files.

A file of a table on local disk (a ``file:`` or scheme-less location) is read with ``open``, far cheaper
per file than a pyarrow stream; every other location through pyiceberg's FileIO, so every scheme the
metadata names is read. A missing file is :class:`MissingMetadataError` naming it and what referenced it
(``FileNotFoundError``, or an ``OSError`` whose text says the object is missing, as object stores' clients
raise it); other errors propagate unchanged.

A manifest whose length its manifest list records (``manifest_length``), passed as ``expected_length``,
must have exactly that many bytes, or it is :class:`CorruptMetadataError`: a manifest cut at an Avro block
boundary is still a valid, shorter container (Avro has no end marker), and its lost entries would vanish
silently (their data files would look orphaned to cleanup). Writers that record a wrong length
(iceberg-go#439, Java's rewrite_table_path #16905) are refused too: the safe direction for deletions.
Manifest lists have no recorded length.

Example::

    data = fetch_metadata_file(table, snapshot.manifest_list, "the current snapshot")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_lakeformat.core.iceberg.metadata.location import split_location

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def fetch_metadata_file(
    table: IcebergTable, location: str, referenced_by: str, expected_length: int | None = None
) -> bytes:
    """A manifest list's or manifest's bytes through pyiceberg's FileIO (every scheme of the metadata),
    checked against ``expected_length`` (the manifest list's ``manifest_length``) when given.

    Raises:
        MissingMetadataError: The file does not exist.
        CorruptMetadataError: Its size is not ``expected_length`` (truncated or replaced).
    """
    data = _read(table, location, referenced_by)
    check_length(data, location, expected_length)
    return data


def check_length(data: bytes, location: str, expected_length: int | None) -> None:
    """Refuse a manifest whose byte count is not the length its manifest list records (module docstring).

    Raises:
        CorruptMetadataError: The sizes differ.
    """
    if expected_length is not None and len(data) != expected_length:
        raise CorruptMetadataError(location, length_problem(len(data), expected_length))


def length_problem(size: int, expected_length: int) -> str:
    """The problem :func:`check_length` reports (also for sizes read elsewhere, e.g. on Spark executors)."""
    return f"is {size} bytes, the manifest list records {expected_length} (truncated or replaced)"


def _read(table: IcebergTable, location: str, referenced_by: str) -> bytes:
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


__all__ = ["check_length", "fetch_metadata_file", "length_problem", "local_path"]
