"""Fetching one manifest list or manifest: the unit of work of a reachability read.

A file of a table on local disk (a ``file:`` or scheme-less location) is read with ``open``, far cheaper
per file than a pyarrow stream; every other location through pyiceberg's FileIO, so every scheme the
metadata names is read. A missing file is :class:`MissingMetadataError` naming it and what referenced it;
other errors propagate unchanged. :func:`load_one` adds the decode (``reach_decode``), the unit a
distributed :data:`Loader` (the Spark jobs' executors) runs.

Example::

    size, rows = load_one(table, "manifest-list", snapshot.manifest_list, "the current snapshot")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import MissingMetadataError
from airflow_lakeformat.core.iceberg.location import split_location
from airflow_lakeformat.core.iceberg.reach_decode import decode_manifest_list, decode_manifest_paths

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.table import IcebergTable

# A bulk loader: (kind "manifest-list" | "manifest", [(location, referenced_by)]) -> [(size, rows or
# MissingMetadataError)] in input order. The default fetches on threads; the Spark jobs load on executors.
Loader = Callable[[str, list[tuple[str, str]]], list[tuple[int, Any]]]


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


def load_one(table: IcebergTable, kind: str, location: str, referenced_by: str) -> tuple[int, Any]:
    """Fetch and decode one manifest list (``kind="manifest-list"``) or manifest: ``(size, rows)``, or
    ``(0, MissingMetadataError)`` for a missing file. The unit of work a distributed :data:`Loader` runs."""
    try:
        data = fetch_metadata_file(table, location, referenced_by)
    except MissingMetadataError as exc:
        return 0, exc
    decode = decode_manifest_list if kind == "manifest-list" else decode_manifest_paths
    return len(data), decode(data, location)


__all__ = ["Loader", "fetch_metadata_file", "load_one", "local_path"]
