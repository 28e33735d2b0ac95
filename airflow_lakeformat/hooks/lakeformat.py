"""``LakeformatHook``: an Airflow connection of type ``lakeformat`` turned into table URIs and storage options.

The connection's host is a warehouse (``s3://bucket/warehouse``, ``/data/warehouse``) or one table's root.
Tables are then named by a full URI, or relative to the warehouse as ``db.table`` or ``db.db/table`` (Paimon's
``<warehouse>/<db>.db/<table>`` layout). Credentials come from login/password (access key id and secret) or
the extras ``aws_access_key_id``/``aws_secret_access_key``, plus ``session_token``, ``endpoint_url``,
``region`` and ``storage_options`` (any other fsspec options, a JSON object). Extras may also carry the
``extra__lakeformat__`` prefix older connection forms wrote.

Spark jobs get the same options through environment variables only (:meth:`LakeformatHook.spark_env`), so
secrets never appear on a command line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseHook

if TYPE_CHECKING:
    from airflow_lakeformat.core.paimon.table import Table

CONN_TYPE = "lakeformat"
DEFAULT_CONN_ID = "lakeformat_default"
DEFAULT_COMMIT_USER_PREFIX = "airflow"
_S3_PROTOCOLS = ("s3", "s3a")
_NAME = re.compile(r"^[^/\s][^/]*$")


class LakeformatConnectionError(ValueError):
    """The connection's settings cannot be used (missing host, bad JSON, a table name it cannot place)."""


def protocol_of(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else "file"


def table_asset(table_uri: str) -> Asset:
    """The Airflow Asset that stands for a table: its root URI, ``file://`` for local paths."""
    uri = table_uri.rstrip("/")
    if "://" not in uri:
        if not uri.startswith("/"):
            raise LakeformatConnectionError(f"{table_uri!r}: a table asset needs an absolute path or a URI")
        uri = "file://" + uri
    elif uri.startswith("s3a://"):
        uri = "s3://" + uri[len("s3a://") :]
    return Asset(uri=uri)


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
        )

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
    """Interact with Apache Paimon tables through a ``lakeformat`` connection.

    :param lakeformat_conn_id: the connection to use (type ``lakeformat``).
    """

    conn_name_attr = "lakeformat_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Lakeformat (Apache Paimon tables)"

    def __init__(
        self,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        *,
        settings: LakeformatConnectionSettings | None = None,
    ) -> None:
        super().__init__()
        self.lakeformat_conn_id = lakeformat_conn_id
        self._settings = settings

    @classmethod
    async def async_for_conn(cls, lakeformat_conn_id: str) -> LakeformatHook:
        """Build the hook inside an event loop (a trigger): fetch the connection without blocking it."""
        connection = await cls.aget_connection(lakeformat_conn_id)
        extra = await connection.aextra_dejson()
        settings = LakeformatConnectionSettings.from_connection(
            lakeformat_conn_id, connection.host, connection.login, connection.password, extra
        )
        return cls(lakeformat_conn_id, settings=settings)

    @property
    def settings(self) -> LakeformatConnectionSettings:
        if self._settings is None:
            connection = self.get_connection(self.lakeformat_conn_id)
            self._settings = LakeformatConnectionSettings.from_connection(
                self.lakeformat_conn_id,
                connection.host,
                connection.login,
                connection.password,
                connection.extra_dejson,
            )
            self._mask_secrets(self._settings)
        return self._settings

    @staticmethod
    def _mask_secrets(settings: LakeformatConnectionSettings) -> None:
        from airflow.sdk.log import mask_secret

        for secret in (settings.secret_access_key, settings.session_token):
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

    def open_table(self, table: str | None) -> Table:
        """Open ``table`` (see :meth:`table_uri`); raises the core's typed errors for missing or bad tables."""
        from airflow_lakeformat.core.paimon.table import Table

        uri = self.table_uri(table)
        return Table.open(uri, self.storage_options(uri))

    def test_connection(self) -> tuple[bool, str]:
        """Check that the host can be listed with these credentials, and say what is there."""
        try:
            return self._probe()
        except Exception as exc:  # the UI shows the message; any failure means the connection is unusable
            return False, f"{type(exc).__name__}: {exc}"

    def _probe(self) -> tuple[bool, str]:
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
        databases = sorted(n for n in names if n.endswith(".db"))
        if not names and not io.exists(path):
            return True, f"{root} is reachable but empty (a new warehouse)"
        return True, f"{root} is a warehouse with {len(databases)} database(s): {', '.join(databases) or '-'}"
