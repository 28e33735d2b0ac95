"""Airflow Assets that stand for tables, named without reading any connection.

A table named relative to a connection (``db.table`` under its warehouse, ``db.db/table``, or ``namespace.table``
of its Iceberg catalog) is the Asset ``lakeformat://<conn_id>/<name>``: the scheme is this provider's, registered
in ``get_provider_info`` (``asset-uris``) with :func:`sanitize_uri` as its normaliser, as providers register
``s3://``. Building that URI reads nothing, so a DAG file that names its tables this way parses before the
connection exists and without a query to the connection store; operators, the ``AssetWatcher``'s trigger and
the OpenLineage converter resolve the connection when they run. A table named by its full URI or an absolute
path keeps the root-URI Asset (``s3://bucket/wh/db.db/t``, ``file:///data/wh/db.db/t``; ``s3a`` becomes ``s3``).

Normalisation (the same name, the same Asset): the connection id is kept as written (it is case-sensitive in
Airflow); the path is one table name without slashes at either end, and Paimon's directory spelling
``db.db/table`` becomes ``db.table``. A URI with no connection id, no table or more than one ``/`` inside the
name is refused with ``ValueError`` (Airflow reports it as an invalid Asset URI).

Example:
    >>> table_asset_uri("demo.events", "lakeformat_default")
    'lakeformat://lakeformat_default/demo.events'
    >>> table_asset_uri("demo.db/events", "lake")
    'lakeformat://lake/demo.events'
    >>> table_asset_uri("s3a://bucket/wh/demo.db/events/", "lake")
    's3://bucket/wh/demo.db/events'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, quote, unquote, urlsplit

if TYPE_CHECKING:
    from airflow.sdk import Asset

SCHEME = "lakeformat"
DEFAULT_CONN_ID = "lakeformat_default"

__all__ = [
    "SCHEME",
    "connection_table_asset",
    "convert_asset_to_openlineage",
    "create_asset",
    "is_relative_name",
    "root_asset_uri",
    "sanitize_uri",
    "split_asset_uri",
    "table_asset_uri",
]


def is_relative_name(table: str) -> bool:
    """True for a name the connection places (``db.table``), False for a full URI or an absolute path."""
    name = table.strip()
    return bool(name) and "://" not in name and not name.startswith("/")


def root_asset_uri(table_uri: str) -> str:
    """The Asset URI of a table root: the URI without trailing slashes, ``file://`` for local paths."""
    uri = table_uri.strip().rstrip("/")
    if "://" not in uri:
        if not uri.startswith("/"):
            raise ValueError(f"{table_uri!r}: a table asset needs an absolute path or a URI")
        return "file://" + uri
    if uri.startswith("s3a://"):
        return "s3://" + uri[len("s3a://") :]
    return uri


def _canonical_name(name: str, what: str) -> str:
    """``db.table`` for ``db.db/table``; other names as given; refuses empty or nested names."""
    text = name.strip().strip("/")
    if "/" in text:
        database, _, table = text.partition("/")
        if not database.endswith(".db") or not table or "/" in table:
            raise ValueError(f"{what}: name one table, as 'db.table', 'db.db/table' or 'namespace.table'")
        text = f"{database[: -len('.db')]}.{table}"
    if not text or text.startswith(".") or text.endswith("."):
        raise ValueError(f"{what}: name one table, as 'db.table', 'db.db/table' or 'namespace.table'")
    return text


def table_asset_uri(table: str, lakeformat_conn_id: str = DEFAULT_CONN_ID) -> str:
    """The Asset URI of ``table`` as an operator of connection ``lakeformat_conn_id`` names it (no IO).

    Args:
        table: a full URI or absolute path (the root-URI Asset), else a name the connection places.
        lakeformat_conn_id: the connection that places a relative name.

    Example:
        >>> table_asset_uri("analytics.events", "prod")
        'lakeformat://prod/analytics.events'
    """
    if not is_relative_name(table):
        return root_asset_uri(table)
    conn_id = lakeformat_conn_id.strip()
    if not conn_id or any(c in conn_id for c in "/@?#"):
        raise ValueError(f"connection id {lakeformat_conn_id!r} cannot name an Asset")
    name = _canonical_name(table, f"table {table!r}")
    return f"{SCHEME}://{conn_id}/{quote(name, safe='.-_~!$&()*+,;=:')}"


def connection_table_asset(table: str, lakeformat_conn_id: str = DEFAULT_CONN_ID) -> Asset:
    """The ``airflow.sdk.Asset`` of :func:`table_asset_uri`, for a DAG's ``schedule`` or ``outlets``.

    Example:
        >>> connection_table_asset("demo.events").uri  # doctest: +SKIP
        'lakeformat://lakeformat_default/demo.events'
    """
    from airflow.sdk import Asset

    return Asset(uri=table_asset_uri(table, lakeformat_conn_id))


def split_asset_uri(uri: str) -> tuple[str, str]:
    """``(conn_id, table name)`` of a ``lakeformat://`` Asset URI; ValueError for another URI."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != SCHEME:
        raise ValueError(f"{uri!r} is not a {SCHEME}:// Asset URI")
    if not parts.netloc:
        raise ValueError(
            f"{uri!r}: a {SCHEME}:// Asset URI names its connection: {SCHEME}://<conn_id>/<table>"
        )
    return parts.netloc, _canonical_name(unquote(parts.path), f"Asset URI {uri!r}")


def sanitize_uri(parts: SplitResult) -> SplitResult:
    """Airflow's normaliser of ``lakeformat://`` URIs (``asset-uris`` handler in ``get_provider_info``)."""
    if not parts.netloc:
        raise ValueError(f"{SCHEME}:// Asset URIs name a connection: {SCHEME}://<conn_id>/<table>")
    if parts.query:
        raise ValueError(f"{SCHEME}:// Asset URIs take no query")
    name = _canonical_name(unquote(parts.path), f"{SCHEME}://{parts.netloc}{parts.path}")
    return parts._replace(path="/" + quote(name, safe=".-_~!$&()*+,;=:"))


def create_asset(
    *, table: str, lakeformat_conn_id: str = DEFAULT_CONN_ID, extra: dict[str, Any] | None = None
) -> Asset:
    """The Asset factory registered for the scheme: ``create_asset(table="db.t", lakeformat_conn_id="c")``."""
    from airflow.sdk import Asset

    return Asset(uri=table_asset_uri(table, lakeformat_conn_id), extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The OpenLineage dataset of a ``lakeformat://`` Asset, named as the operators' lineage names the table.

    Runs when lineage is extracted (a task's run), so it may read the connection: a table under the warehouse
    is its root (``dataset_name``); a table of the connection's Iceberg catalog ``iceberg://<catalog>`` with
    ``namespace.table``. Returns None when the connection cannot place the table (missing, no warehouse).
    """
    from airflow.providers.common.compat.openlineage.facet import Dataset

    from airflow_lakeformat.hooks.lakeformat import LakeformatHook
    from airflow_lakeformat.operators.lineage import dataset_name

    conn_id, name = split_asset_uri(asset.uri)
    try:
        ref = LakeformatHook(conn_id).resolve(name)
    except Exception:  # a missing or unusable connection: no dataset rather than a failed extraction
        return None
    if ref.identifier is not None:
        return Dataset(namespace=f"iceberg://{ref.catalog or 'default'}", name=ref.identifier)
    namespace, path = dataset_name(ref.target)
    return Dataset(namespace=namespace, name=path)
