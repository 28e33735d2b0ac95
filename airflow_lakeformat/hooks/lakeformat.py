"""``LakeformatHook``: an Airflow connection of type ``lakeformat`` turned into tables of either format.

The connection's host is a warehouse (``s3://bucket/warehouse``, ``/data/warehouse``) or one table's root.
Tables are then named by a full URI, or relative to the warehouse as ``db.table`` or ``db.db/table`` (Paimon's
``<warehouse>/<db>.db/<table>`` layout; an Iceberg table in the Hadoop layout may live there too). Credentials
come from login/password (access key id and secret) or the extras ``aws_access_key_id``/``aws_secret_access_key``,
plus ``session_token``, ``endpoint_url``, ``region`` and ``storage_options`` (any other fsspec options, a JSON
object). Extras may also carry the ``extra__lakeformat__`` prefix older connection forms wrote.

Iceberg: the connection may name a pyiceberg catalog (``hooks/iceberg_catalog.py``: ``iceberg_catalog``,
``iceberg_catalog_properties`` and secret fields). Then a relative ``namespace.table`` is a table of that
catalog, unless the format asked for is Paimon (extra ``format``, or an operator's ``table_format``). A full URI
is a table root of either format, told apart by its files (``core/formats.py``) unless a format is given.
:meth:`LakeformatHook.open_lake_table` returns the core's format-neutral table (``core/tables.py``).

A connection of the official Iceberg provider (type ``iceberg``) is a catalog by itself: give its id as
``iceberg_conn_id`` (or as the connection id; the type is recognised) and ``namespace.table`` names its tables,
the catalog built as that provider's ``IcebergHook`` builds it (``hooks/iceberg_catalog.py``).

Spark jobs get the storage options through environment variables only (:meth:`LakeformatHook.spark_env`), so
secrets never appear on a command line.

Example:
    >>> hook = LakeformatHook("lakeformat_default")  # doctest: +SKIP
    >>> hook.open_lake_table("db.events").maintenance.expire_snapshots(retain_min=5).summary()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseHook

from airflow_lakeformat.hooks.assets import DEFAULT_CONN_ID, root_asset_uri
from airflow_lakeformat.hooks.iceberg_catalog import (
    OFFICIAL_CONN_TYPE,
    CatalogSettingsError,
    IcebergCatalogSettings,
    official_catalog_settings,
    parse_catalog_settings,
)

if TYPE_CHECKING:
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable

CONN_TYPE = "lakeformat"
DEFAULT_COMMIT_USER_PREFIX = "airflow"
_S3_PROTOCOLS = ("s3", "s3a")
_NAME = re.compile(r"^[^/\s][^/]*$")
FORMATS = ("paimon", "iceberg")


class LakeformatConnectionError(ValueError):
    """The connection's settings cannot be used (missing host, bad JSON, a table name it cannot place)."""


class ConnectionChoiceError(LakeformatConnectionError):
    """Both a ``lakeformat`` and an ``iceberg`` connection were given (or neither), or the wrong type."""


def choose_conn_id(lakeformat_conn_id: str | None, iceberg_conn_id: str | None) -> str:
    """The connection to read: ``iceberg_conn_id`` when given, else ``lakeformat_conn_id``.

    Raises:
        ConnectionChoiceError: both given (a ``lakeformat_conn_id`` other than the default), or neither.

    Example:
        >>> choose_conn_id("lakeformat_default", "iceberg_default")
        'iceberg_default'
    """
    iceberg = (iceberg_conn_id or "").strip()
    lakeformat = (lakeformat_conn_id or "").strip()
    if iceberg and lakeformat and lakeformat != DEFAULT_CONN_ID:
        raise ConnectionChoiceError(
            f"give one connection: lakeformat_conn_id={lakeformat!r} (type {CONN_TYPE}) or "
            f"iceberg_conn_id={iceberg!r} (type {OFFICIAL_CONN_TYPE}), not both"
        )
    if not iceberg and not lakeformat:
        raise ConnectionChoiceError("give a connection: lakeformat_conn_id or iceberg_conn_id")
    return iceberg or lakeformat


def protocol_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else "file"


def normalize_format(value: str | None, what: str = "table_format") -> str | None:
    """``"paimon"``, ``"iceberg"``, or None for "detect it" (None, blank, ``"auto"``)."""
    text = (value or "").strip().lower()
    if text in ("", "auto", "none", "null"):
        return None
    if text not in FORMATS:
        raise LakeformatConnectionError(
            f"{what} must be 'paimon', 'iceberg' or empty (detect), not {value!r}"
        )
    return text


@dataclass(frozen=True)
class TableRef:
    """Where a table named through a connection lives: a root URI, or an identifier in the Iceberg catalog."""

    name: str
    location: str | None = None
    identifier: str | None = None
    format: str | None = None  # None: detected from the files when the table is opened
    catalog: str | None = None

    @property
    def target(self) -> str:
        """What opens the table again: the catalog identifier or the root URI."""
        return self.identifier or self.location or self.name

    @property
    def asset_uri(self) -> str:
        """The Asset URI standing for the table: its root, or ``iceberg://<catalog>/<namespace>/<table>``."""
        if self.identifier is not None:
            namespace, _, table = self.identifier.rpartition(".")
            return f"iceberg://{self.catalog or 'default'}/{namespace.replace('.', '/')}/{table}"
        return table_asset(self.target).uri


def table_asset(table_uri: str) -> Asset:
    """The Airflow Asset that stands for a table root: its URI, ``file://`` for local paths.

    A table named relative to a connection is :func:`~airflow_lakeformat.hooks.assets.connection_table_asset`
    (``lakeformat://<conn_id>/<db>.<table>``), which reads no connection.
    """
    try:
        return Asset(uri=root_asset_uri(table_uri))
    except ValueError as exc:
        raise LakeformatConnectionError(str(exc)) from None


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class LakeformatConnectionSettings:
    """What a ``lakeformat`` connection says, parsed and checked (no IO)."""

    conn_id: str
    root: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    endpoint_url: str | None = None
    region: str | None = None
    extra_storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    commit_user_prefix: str = DEFAULT_COMMIT_USER_PREFIX
    format: str | None = None
    catalog: IcebergCatalogSettings = field(default_factory=IcebergCatalogSettings)

    @classmethod
    def from_connection(
        cls,
        conn_id: str,
        host: str | None,
        login: str | None,
        password: str | None,
        extra: Mapping[str, Any],
    ) -> LakeformatConnectionSettings:
        def get(name: str) -> Any:
            for key in (name, f"extra__{CONN_TYPE}__{name}"):
                value = extra.get(key)
                if value not in (None, ""):
                    return value
            return None

        root = (host or "").strip() or None
        if root is not None:
            root = root.rstrip("/") or "/"
            if "://" not in root and not root.startswith("/"):
                raise LakeformatConnectionError(
                    f"connection {conn_id!r}: host {host!r} must be a URI (s3://bucket/warehouse) or an "
                    "absolute local path"
                )
        options = get("storage_options") or {}
        if isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError as exc:
                raise LakeformatConnectionError(
                    f"connection {conn_id!r}: extra 'storage_options' is not valid JSON ({exc})"
                ) from exc
        if not isinstance(options, dict):
            raise LakeformatConnectionError(
                f"connection {conn_id!r}: extra 'storage_options' must be a JSON object, not {type(options).__name__}"
            )
        prefix = str(get("commit_user_prefix") or DEFAULT_COMMIT_USER_PREFIX)
        try:
            catalog = parse_catalog_settings(conn_id, get)
        except CatalogSettingsError as exc:
            raise LakeformatConnectionError(str(exc)) from None
        return cls(
            conn_id=conn_id,
            root=root,
            access_key_id=login or get("aws_access_key_id"),
            secret_access_key=password or get("aws_secret_access_key"),
            session_token=get("session_token"),
            endpoint_url=get("endpoint_url"),
            region=get("region") or get("region_name"),
            extra_storage_options=options,
            commit_user_prefix=prefix,
            format=normalize_format(get("format"), f"connection {conn_id!r}: extra 'format'"),
            catalog=catalog,
        )

    @classmethod
    def from_official_iceberg(
        cls, conn_id: str, host: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
    ) -> LakeformatConnectionSettings:
        """An ``iceberg`` connection: no warehouse or storage settings, its catalog (``namespace.table``)."""
        try:
            catalog = official_catalog_settings(conn_id, host, login, password, extra)
        except CatalogSettingsError as exc:
            raise LakeformatConnectionError(str(exc)) from None
        return cls(conn_id=conn_id, catalog=catalog)

    # -- naming tables -----------------------------------------------------------------------------

    def table_uri(self, table: str | None) -> str:
        """The root URI of ``table``: a full URI or absolute path as given, else placed under the warehouse."""
        name = (table or "").strip()
        if not name:
            if self.root is None:
                raise LakeformatConnectionError(
                    f"connection {self.conn_id!r} has no host, so a table must be named by its full URI"
                )
            return self.root
        if "://" in name or name.startswith("/"):
            return name.rstrip("/") or "/"
        if self.root is None:
            raise LakeformatConnectionError(
                f"table {name!r} is relative, but connection {self.conn_id!r} has no host (warehouse URI); "
                "set the host or give the table's full URI"
            )
        if "/" in name:
            database, _, table_name = name.partition("/")
            if not database.endswith(".db"):
                raise LakeformatConnectionError(f"table {name!r}: the database directory must end in '.db'")
            database = database[: -len(".db")]
        else:
            database, _, table_name = name.partition(".")
        if not database or not table_name or not _NAME.match(database) or not _NAME.match(table_name):
            raise LakeformatConnectionError(
                f"table {name!r}: name a table as 'db.table', 'db.db/table' or by its full URI"
            )
        return f"{self.root.rstrip('/')}/{database}.db/{table_name}"

    def resolve(self, table: str | None, table_format: str | None = None) -> TableRef:
        """Where ``table`` is: a catalog table (``namespace.table`` with a catalog configured and a format other
        than Paimon asked for) or a root URI (:meth:`table_uri`); ``table_format`` overrides the connection's."""
        fmt = normalize_format(table_format) or self.format
        name = (table or "").strip()
        relative = bool(name) and "://" not in name and not name.startswith("/")
        # Format branch: a connection's format setting decides whether a bare name is a catalog identifier
        # (Iceberg) or a path under the warehouse (Paimon): there is no table yet to ask.
        if relative and self.catalog.configured and fmt != "paimon":
            namespace, _, table_name = name.rpartition(".")
            if not namespace or not table_name or "/" in name or not _NAME.match(namespace):
                raise LakeformatConnectionError(
                    f"table {name!r}: name a table of {self.catalog.describe()} as 'namespace.table'"
                )
            return TableRef(name, identifier=name, format="iceberg", catalog=self.catalog.display_name)
        return TableRef(name, location=self.table_uri(name), format=fmt)

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg ``load_catalog`` properties: the connection's S3 settings as ``s3.*`` FileIO properties
        (when the warehouse is on S3), overridden by the catalog's own properties."""
        derived: dict[str, str] = {}
        if self.root is not None and protocol_of(self.root) in _S3_PROTOCOLS:
            from airflow_lakeformat.core.iceberg.metadata.fileio import pyiceberg_io_properties

            derived = pyiceberg_io_properties(self.root, self.storage_options(self.root))
        return {**derived, **self.catalog.properties}

    # -- storage options ---------------------------------------------------------------------------

    def storage_options(self, uri: str | None = None) -> dict[str, Any]:
        """fsspec storage options for ``uri`` (default: the host); S3 credentials only for S3 URIs."""
        protocol = protocol_of(uri or self.root or "")
        options: dict[str, Any] = {}
        if protocol in _S3_PROTOCOLS:
            if self.access_key_id:
                options["key"] = self.access_key_id
            if self.secret_access_key:
                options["secret"] = self.secret_access_key
            if self.session_token:
                options["token"] = self.session_token
            client_kwargs: dict[str, Any] = {}
            if self.endpoint_url:
                client_kwargs["endpoint_url"] = self.endpoint_url
            if self.region:
                client_kwargs["region_name"] = self.region
            if client_kwargs:
                options["client_kwargs"] = client_kwargs
        return _deep_merge(options, self.extra_storage_options)

    def spark_env(self, uri: str | None = None) -> dict[str, str]:
        """Environment for a Spark job: the storage options as JSON and the AWS variables SDKs read."""
        env = {"LAKEFORMAT_STORAGE_OPTIONS": json.dumps(self.storage_options(uri), sort_keys=True)}
        if protocol_of(uri or self.root or "") in _S3_PROTOCOLS:
            for name, value in (
                ("AWS_ACCESS_KEY_ID", self.access_key_id),
                ("AWS_SECRET_ACCESS_KEY", self.secret_access_key),
                ("AWS_SESSION_TOKEN", self.session_token),
                ("AWS_REGION", self.region),
                ("AWS_DEFAULT_REGION", self.region),
                ("AWS_ENDPOINT_URL", self.endpoint_url),
            ):
                if value:
                    env[name] = str(value)
        return env

    def commit_user(self, *parts: str) -> str:
        """A stable Paimon commit user for one writer (e.g. a DAG's task): the prefix and the parts."""
        return "-".join([self.commit_user_prefix, *(re.sub(r"[^\w.\-]", "_", p) for p in parts if p)])


class LakeformatHook(BaseHook):
    """Interact with Apache Paimon and Apache Iceberg tables through a ``lakeformat`` connection.

    :param lakeformat_conn_id: the connection to use (type ``lakeformat``; one of type ``iceberg`` is read as
        ``iceberg_conn_id`` is). Afterwards, the id of the connection read.
    :param iceberg_conn_id: a connection of the official Iceberg provider (type ``iceberg``) as the catalog,
        instead of a ``lakeformat`` connection (:func:`choose_conn_id`).

    Example:
        >>> hook = LakeformatHook("lakeformat_default")  # doctest: +SKIP
        >>> hook.open_lake_table("analytics.events").format  # a catalog table when a catalog is configured
        'iceberg'
        >>> LakeformatHook(iceberg_conn_id="iceberg_default").open_lake_table("sales.orders")  # doctest: +SKIP
    """

    conn_name_attr = "lakeformat_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Lakeformat (Apache Paimon and Iceberg tables)"

    def __init__(
        self,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        *,
        iceberg_conn_id: str | None = None,
        settings: LakeformatConnectionSettings | None = None,
    ) -> None:
        super().__init__()
        self.lakeformat_conn_id = choose_conn_id(lakeformat_conn_id, iceberg_conn_id)
        self.iceberg_conn_id = iceberg_conn_id or None
        self._settings = settings

    @classmethod
    async def async_for_conn(
        cls, lakeformat_conn_id: str = DEFAULT_CONN_ID, *, iceberg_conn_id: str | None = None
    ) -> LakeformatHook:
        """Build the hook inside an event loop (a trigger): fetch the connection without blocking it."""
        hook = cls(lakeformat_conn_id, iceberg_conn_id=iceberg_conn_id)
        connection = await cls.aget_connection(hook.lakeformat_conn_id)
        hook._settings = hook._read_settings(connection, await connection.aextra_dejson())
        return hook

    @property
    def settings(self) -> LakeformatConnectionSettings:
        if self._settings is None:
            connection = self.get_connection(self.lakeformat_conn_id)
            self._settings = self._read_settings(connection, connection.extra_dejson)
        return self._settings

    def _read_settings(self, connection: Any, extra: Mapping[str, Any]) -> LakeformatConnectionSettings:
        """The settings of ``connection`` by its type (``iceberg``: the official provider's), secrets masked."""
        conn_id, kind = self.lakeformat_conn_id, connection.conn_type
        parts = (connection.host, connection.login, connection.password, extra)
        if kind == OFFICIAL_CONN_TYPE:
            if bool(connection.login) != bool(connection.password):
                self.log.warning("connection %r: OAuth2 needs client id and secret; no credential", conn_id)
            settings = LakeformatConnectionSettings.from_official_iceberg(conn_id, *parts)
        elif self.iceberg_conn_id is not None:
            raise ConnectionChoiceError(
                f"iceberg_conn_id={conn_id!r} is a connection of type {kind!r}, not {OFFICIAL_CONN_TYPE!r} "
                f"(apache-airflow-providers-apache-iceberg); a {CONN_TYPE!r} connection is lakeformat_conn_id"
            )
        else:
            settings = LakeformatConnectionSettings.from_connection(conn_id, *parts)
        self._mask_secrets(settings)
        return settings

    @staticmethod
    def _mask_secrets(settings: LakeformatConnectionSettings) -> None:
        from airflow.sdk.log import mask_secret

        for secret in (settings.secret_access_key, settings.session_token, *settings.catalog.secrets()):
            if secret:
                mask_secret(secret)

    def get_conn(self) -> LakeformatConnectionSettings:
        return self.settings

    def table_uri(self, table: str | None) -> str:
        return self.settings.table_uri(table)

    def storage_options(self, uri: str | None = None) -> dict[str, Any]:
        return self.settings.storage_options(uri)

    def spark_env(self, uri: str | None = None) -> dict[str, str]:
        env = self.settings.spark_env(uri)
        from airflow.sdk.log import mask_secret

        mask_secret(env["LAKEFORMAT_STORAGE_OPTIONS"])
        return env

    def commit_user(self, *parts: str) -> str:
        return self.settings.commit_user(*parts)

    def resolve(self, table: str | None, table_format: str | None = None) -> TableRef:
        """Where ``table`` lives (see :meth:`LakeformatConnectionSettings.resolve`); no IO."""
        return self.settings.resolve(table, table_format)

    def open_table(self, table: str | None) -> Table:
        """Open a Paimon table (see :meth:`table_uri`); raises the core's typed errors for missing or bad tables."""
        from airflow_lakeformat.core.paimon.table import Table

        uri = self.table_uri(table)
        return Table.open(uri, self.storage_options(uri))

    def open_lake_table(
        self, table: str | TableRef | None, table_format: str | None = None, *, branch: str = "main"
    ) -> PaimonTable | IcebergLakeTable:
        """Open a Paimon or Iceberg table as the core's format-neutral table (``core/tables.py``).

        Args:
            table: a root URI, ``db.table`` under the warehouse, ``namespace.table`` of the connection's
                Iceberg catalog, or a :class:`TableRef` from :meth:`resolve`.
            table_format: ``"paimon"`` or ``"iceberg"`` (default: the connection's ``format`` extra, else
                detected from the files).
            branch: the Paimon branch to open (Iceberg refs are chosen per read).

        Returns:
            A table with ``.format``, ``.uri``, ``.native`` and ``.maintenance``.

        Raises:
            TableNotFoundError: no table (of the format asked for) there.
            LakeformatConnectionError: the connection cannot place the name.

        Example:
            >>> LakeformatHook("lake").open_lake_table("db.events", "iceberg").format  # doctest: +SKIP
            'iceberg'
        """
        from airflow_lakeformat.core.tables import open_table

        ref = table if isinstance(table, TableRef) else self.resolve(table, table_format)
        if ref.identifier is not None:
            catalog = self.settings.catalog
            return open_table(
                ref.identifier,
                format="iceberg",
                catalog=catalog.name,
                catalog_properties=self.settings.catalog_properties() or None,
            )
        assert ref.location is not None
        return open_table(
            ref.location,
            format=ref.format,  # type: ignore[arg-type]
            storage_options=self.storage_options(ref.location),
            branch=branch,
        )

    def load_iceberg_catalog(self) -> Any:
        """The connection's pyiceberg catalog (``load_catalog`` with :meth:`catalog_properties`)."""
        from airflow_lakeformat.core.iceberg.catalog.catalog import load_catalog_from_properties

        catalog = self.settings.catalog
        if not catalog.configured:
            raise LakeformatConnectionError(
                f"connection {self.lakeformat_conn_id!r} names no Iceberg catalog "
                "(extras 'iceberg_catalog' / 'iceberg_catalog_properties')"
            )
        return load_catalog_from_properties(catalog.name, self.settings.catalog_properties())

    def create_iceberg_table(
        self,
        table: str,
        schema: Any,
        *,
        properties: Mapping[str, str] | None = None,
        exist_ok: bool = False,
    ) -> IcebergLakeTable:
        """Create an Iceberg table (format v2): in the connection's catalog for ``namespace.table`` (the
        namespace is created when missing), else in the Hadoop layout at the table's root URI.

        Args:
            table: ``namespace.table`` of the catalog, or a root URI / ``db.table`` under the warehouse.
            schema: a ``pyarrow.Schema`` or a pyiceberg ``Schema``.
            properties: table properties.
            exist_ok: an existing Iceberg table is returned as it is (never changed, whatever its schema),
                also when another writer created it in the meantime.

        Raises:
            pyiceberg's TableAlreadyExistsError: a table is already there (unless ``exist_ok``).

        Example:
            >>> hook.create_iceberg_table("demo.events", pa.schema([("id", pa.int64())]), exist_ok=True)  # doctest: +SKIP
        """
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

        from airflow_lakeformat.core.errors import TableNotFoundError
        from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog

        ref = self.resolve(table, "iceberg")
        if exist_ok:
            with contextlib.suppress(TableNotFoundError):
                return self.open_lake_table(ref)  # type: ignore[return-value]
        props = dict(properties or {})
        try:
            if ref.identifier is not None:
                catalog = self.load_iceberg_catalog()
                with contextlib.suppress(NamespaceAlreadyExistsError):
                    catalog.create_namespace(ref.identifier.rpartition(".")[0])
                catalog.create_table(ref.identifier, schema=schema, properties=props)
            else:
                assert ref.location is not None
                HadoopLayoutCatalog(storage_options=self.storage_options(ref.location)).create_table(
                    ref.location, schema=schema, properties=props
                )
        except TableAlreadyExistsError:
            if not exist_ok:
                raise
        else:
            self.log.info("created Iceberg table %s", ref.identifier or ref.location)
        opened = self.open_lake_table(ref)
        return opened  # type: ignore[return-value]

    def test_connection(self) -> tuple[bool, str]:
        """Check that the catalog (if any) answers and the host can be listed, and say what is there."""
        try:
            catalog = self._probe_catalog()
            if catalog is not None and self.settings.root is None:
                return True, catalog
            ok, message = self._probe()
            return ok, f"{catalog}; {message}" if catalog is not None else message
        except Exception as exc:  # the UI shows the message; any failure means the connection is unusable
            return False, f"{type(exc).__name__}: {exc}"

    def _probe_catalog(self) -> str | None:
        if not self.settings.catalog.configured:
            return None
        namespaces = [".".join(n) for n in self.load_iceberg_catalog().list_namespaces()]
        shown = ", ".join(sorted(namespaces)[:20]) or "-"
        return f"{self.settings.catalog.describe()} answers with {len(namespaces)} namespace(s): {shown}"

    def _probe(self) -> tuple[bool, str]:
        from airflow_lakeformat.core.formats import ICEBERG_METADATA_DIR
        from airflow_lakeformat.core.io import FileIO
        from airflow_lakeformat.core.paimon.table import Table

        root = self.settings.root
        if root is None:
            return False, "the connection has no host: set it to a warehouse or table URI"
        io, path = FileIO.for_uri(root, self.storage_options(root))
        names = io.list_names(path)  # raises on bad credentials or an unreachable endpoint
        if io.protocol == "s3":
            bucket = path.split("/", 1)[0]
            if not io.exists(bucket):
                return (
                    False,
                    f"bucket {bucket!r} does not exist (endpoint {self.settings.endpoint_url or 'AWS'})",
                )
        if "schema" in names:
            table = Table(io, path)
            latest = table.snapshot_manager.latest_snapshot_id()
            return True, f"{root} is a Paimon table (schema {table.schema.id}, latest snapshot {latest})"
        if ICEBERG_METADATA_DIR in names:
            from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table

            iceberg = open_path_table(root, self.storage_options(root))
            current = iceberg.snapshot()
            return True, (
                f"{root} is an Iceberg table (format v{iceberg.format_version}, current snapshot "
                f"{current.snapshot_id if current is not None else None})"
            )
        databases = sorted(n for n in names if n.endswith(".db"))
        if not names and not io.exists(path):
            return True, f"{root} is reachable but empty (a new warehouse)"
        return True, f"{root} is a warehouse with {len(databases)} database(s): {', '.join(databases) or '-'}"
