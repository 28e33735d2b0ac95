"""The tables of a namespace, as a ``lakeformat`` connection names them: its Iceberg catalog and its warehouse.

A connection reaches tables two ways (``hooks/lakeformat.py``), so a namespace is listed in both:

* the connection's Iceberg catalog (when it names one): the catalog's ``list_tables(namespace)``, each table
  named ``namespace.table`` (what the hook resolves to that catalog);
* the connection's warehouse (its host): the directory ``<warehouse>/<namespace>.db/`` (Paimon's layout, where
  Hadoop-layout Iceberg tables may live too), each subdirectory that holds a table (Paimon's ``schema/`` or
  ``snapshot/``, Iceberg's ``metadata/``; ``core/formats.py``'s markers) named ``namespace.table``, or by its
  root URI when the connection also has a catalog (a bare name would then mean the catalog's table).

Names come back sorted and without duplicates (a warehouse directory named as a catalog table of the namespace
is that table, kept at pyiceberg's default location, and listed once by its catalog name). Nothing is opened:
the catalog's listing, one listing of the namespace directory and one per entry.

Example:
    >>> list_namespace_tables(LakeformatHook("lakeformat_default"), "db")  # doctest: +SKIP
    ['db.events', 'db.orders']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_lakeformat.core.formats import ICEBERG_METADATA_DIR, PAIMON_MARKERS

if TYPE_CHECKING:
    from airflow_lakeformat.hooks.lakeformat import LakeformatHook

TABLE_MARKERS = frozenset({*PAIMON_MARKERS, ICEBERG_METADATA_DIR})


def catalog_tables(hook: LakeformatHook, namespace: str) -> list[str]:
    """``namespace.table`` of every table of ``namespace`` in the connection's Iceberg catalog ([] without one)."""
    if not hook.settings.catalog.configured:
        return []
    catalog = hook.load_iceberg_catalog()
    try:
        identifiers = catalog.list_tables(namespace)
    except Exception as exc:  # pyiceberg's NoSuchNamespaceError (not imported here: hooks reach no format)
        if type(exc).__name__ == "NoSuchNamespaceError":
            return []
        raise
    return sorted(".".join(identifier) for identifier in identifiers)


def warehouse_tables(hook: LakeformatHook, namespace: str) -> list[str]:
    """The tables under ``<warehouse>/<namespace>.db/`` ([] when the connection has no warehouse or the
    directory does not exist): ``namespace.table``, or root URIs when the connection also has a catalog."""
    from airflow_lakeformat.core.io import FileIO

    root = hook.settings.root
    if root is None:
        return []
    directory = f"{root.rstrip('/')}/{namespace}.db"
    io, path = FileIO.for_uri(directory, hook.storage_options(directory))
    found = []
    for entry in io.list_dir(path):
        if entry.is_dir and TABLE_MARKERS.intersection(io.list_names(entry.path)):
            found.append(entry.name)
    by_root = hook.settings.catalog.configured
    return sorted(f"{directory}/{name}" if by_root else f"{namespace}.{name}" for name in found)


def list_namespace_tables(hook: LakeformatHook, namespace: str) -> list[str]:
    """Every table of ``namespace`` the connection reaches (catalog tables first), each once.

    Args:
        hook: the connection's hook.
        namespace: a catalog namespace (``db``; nested ``a.b`` for catalogs that have them), which is also the
            warehouse database ``<namespace>.db``.

    Returns:
        Names the operators take (``namespace.table`` or a root URI), sorted within each source.

    Raises:
        LakeformatConnectionError: an empty namespace or one with a ``/``.

    Example:
        >>> list_namespace_tables(LakeformatHook("lake"), "db")  # doctest: +SKIP
        ['db.events', '/data/wh/db.db/orders']
    """
    from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionError

    name = (namespace or "").strip()
    if not name or "/" in name:
        raise LakeformatConnectionError(f"namespace {namespace!r}: name a catalog namespace or database (db)")
    catalog = catalog_tables(hook, name)
    # A catalog keeps its tables at <warehouse>/<namespace>.db/<table> (pyiceberg's default location): the same
    # directory name in the warehouse is that table, listed once by its catalog name.
    in_catalog = {identifier.rpartition(".")[2] for identifier in catalog}
    others = [t for t in warehouse_tables(hook, name) if t.rpartition("/")[2] not in in_catalog]
    return list(dict.fromkeys([*catalog, *others]))
