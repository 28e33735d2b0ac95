"""The Iceberg catalog a ``lakeformat`` connection names: a pyiceberg catalog name and/or its properties.

A connection may carry, besides its storage settings, the catalog that Iceberg tables named
``namespace.table`` live in, exactly as pyiceberg's ``load_catalog(name, **properties)`` takes it:

* extra ``iceberg_catalog``: a catalog name. Alone, pyiceberg looks it up in ``~/.pyiceberg.yaml`` and the
  ``PYICEBERG_CATALOG__<NAME>__*`` variables; with properties it is the name the catalog goes by (an SQL
  catalog keys its rows by it, so use the name the table's writers use; pyiceberg's default is ``default``).
* extra ``iceberg_catalog_properties``: a JSON object of properties, e.g. ``{"type": "sql", "uri":
  "sqlite:////data/catalog.db", "warehouse": "file:///data/wh"}``, ``{"type": "rest", "uri":
  "https://catalog.example.com", "warehouse": "prod"}``, ``{"type": "glue", "glue.region": "eu-west-1"}``,
  ``{"type": "hive", "uri": "thrift://metastore:9083"}``.
* secrets go in password fields, never in the plain properties: ``iceberg_catalog_credential`` (REST
  ``credential``, ``client_id:client_secret``), ``iceberg_catalog_token`` (REST ``token``) and
  ``iceberg_catalog_secret_properties`` (a JSON object merged over the properties, for anything else:
  ``glue.secret-access-key``, an SQL ``uri`` with a password, ``s3.secret-access-key``, ...).

A connection of the official Iceberg provider (``apache-airflow-providers-apache-iceberg``, type ``iceberg``)
names a catalog too, in that provider's own way, which :func:`official_catalog_settings` reads as its
``IcebergHook.catalog`` (2.1) does: the extra is the catalog's properties, the host its ``uri``, ``type`` is
``rest`` unless the extra says otherwise, and for a REST catalog login and password are the OAuth2 client
credentials, ``credential = "<client id>:<client secret>"`` (pyiceberg's REST client trades them for a token at
the catalog's ``v1/oauth/tokens`` unless an ``oauth2-server-uri`` property points elsewhere). The catalog's
name is the connection id, as that hook's ``load_catalog(conn_id, ...)`` names it.

Every secret value, and every property whose key says it is one (``secret``, ``token``, ``credential``,
``password``) or a URI's password, is handed to Airflow's secret masker by the hook, so it never shows in a
task log; the properties are excluded from ``repr``, and triggers serialize only the connection id.

Example:
    >>> settings = parse_catalog_settings("lake", {"iceberg_catalog_properties": '{"type": "sql"}'}.get)
    >>> settings.properties["type"], settings.configured
    ('sql', True)
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

CATALOG_EXTRA = "iceberg_catalog"
PROPERTIES_EXTRA = "iceberg_catalog_properties"
SECRET_PROPERTIES_EXTRA = "iceberg_catalog_secret_properties"
CREDENTIAL_EXTRA = "iceberg_catalog_credential"
TOKEN_EXTRA = "iceberg_catalog_token"
SECRET_KEY_WORDS = ("secret", "token", "credential", "password")
OFFICIAL_CONN_TYPE = "iceberg"  # apache-airflow-providers-apache-iceberg's IcebergHook.conn_type


class CatalogSettingsError(ValueError):
    """The connection's catalog extras cannot be used (bad JSON, not an object)."""


def _property_value(value: Any) -> str:
    """pyiceberg properties are strings; JSON booleans and numbers are written as pyiceberg parses them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _json_object(conn_id: str, name: str, value: Any) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise CatalogSettingsError(
                f"connection {conn_id!r}: extra {name!r} is not valid JSON ({exc.msg} at character {exc.pos})"
            ) from None
    if not isinstance(value, Mapping):
        raise CatalogSettingsError(
            f"connection {conn_id!r}: extra {name!r} must be a JSON object of catalog properties, "
            f"not {type(value).__name__}"
        )
    return {str(k): _property_value(v) for k, v in value.items() if v is not None}


def is_secret_key(key: str) -> bool:
    """True for property names that hold secrets (``s3.secret-access-key``, ``token``, ``credential``, ...)."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_KEY_WORDS)


def uri_password(value: str) -> str | None:
    """The password of ``scheme://user:password@host/...`` (an SQL catalog's URI), else None."""
    if "://" not in value or "@" not in value:
        return None
    try:
        return urllib.parse.urlsplit(value).password or None
    except ValueError:
        return None


@dataclass(frozen=True)
class IcebergCatalogSettings:
    """A connection's Iceberg catalog: pyiceberg catalog ``name`` and ``properties`` (secrets included)."""

    name: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    secret_keys: frozenset[str] = field(default_factory=frozenset, repr=False)

    @property
    def configured(self) -> bool:
        """Whether relative table names of the connection are catalog tables."""
        return bool(self.name or self.properties)

    @property
    def display_name(self) -> str:
        """The catalog's name as tables opened from it are called (``<name>:<namespace>.<table>``)."""
        return self.name or "default"

    def secrets(self) -> list[str]:
        """Every value that must not appear in a log: secret fields, secret-looking keys, URI passwords."""
        found: list[str] = []
        for key, value in self.properties.items():
            if key in self.secret_keys or is_secret_key(key):
                found.append(value)
            password = uri_password(value)
            if password:
                found.append(password)
        return [value for value in found if value]

    def describe(self) -> str:
        """A loggable one-liner: name, type and URI (password removed); no other property."""
        kind = self.properties.get("type") or ("from pyiceberg's configuration" if self.name else "sql")
        uri = self.properties.get("uri")
        if uri and uri_password(uri):
            parts = urllib.parse.urlsplit(uri)
            host = parts.netloc.rsplit("@", 1)[1]
            user = parts.username or ""
            uri = urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
        where = f" at {uri}" if uri else ""
        return f"Iceberg catalog {self.display_name!r} ({kind}){where}"


def parse_catalog_settings(conn_id: str, get: Callable[[str], Any]) -> IcebergCatalogSettings:
    """The catalog settings from a connection's extras (``get(name)`` reads one extra, None when unset).

    Args:
        conn_id: the connection id, for messages.
        get: reads an extra by name (the hook also accepts the ``extra__lakeformat__`` prefix).

    Returns:
        The settings; ``configured`` is False when the connection names no catalog.

    Raises:
        CatalogSettingsError: a properties extra that is not a JSON object.
    """
    name = get(CATALOG_EXTRA)
    properties = _json_object(conn_id, PROPERTIES_EXTRA, get(PROPERTIES_EXTRA))
    secret = _json_object(conn_id, SECRET_PROPERTIES_EXTRA, get(SECRET_PROPERTIES_EXTRA))
    for key, extra in (("credential", CREDENTIAL_EXTRA), ("token", TOKEN_EXTRA)):
        value = get(extra)
        if value not in (None, ""):
            secret[key] = str(value)
    return IcebergCatalogSettings(
        name=str(name).strip() if name not in (None, "") else None,
        properties={**properties, **secret},
        secret_keys=frozenset(secret),
    )


def official_catalog_settings(
    conn_id: str, host: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> IcebergCatalogSettings:
    """The catalog of a connection of the official Iceberg provider (type ``iceberg``), as its hook reads it.

    The mapping of ``IcebergHook.catalog`` (apache-airflow-providers-apache-iceberg 2.1): properties are the
    extra's, overridden by ``uri`` from the host (trailing ``/`` dropped); ``type`` defaults to ``rest``; a REST
    catalog with both login and password gets ``credential = "login:password"`` (OAuth2 client credentials);
    the catalog is named after the connection; only one of login and password sets no credential (that hook
    warns; ours too, :class:`~airflow_lakeformat.hooks.lakeformat.LakeformatHook`). Reading the connection
    needs no provider installed.

    Args:
        conn_id: the connection id (the catalog's name, and for messages).
        host: the catalog URI, e.g. ``https://catalog.example.com/api/catalog``.
        login: the OAuth2 client id.
        password: the OAuth2 client secret.
        extra: the connection's extra (any catalog property: ``warehouse``, ``s3.endpoint``, ``scope``, ...).

    Returns:
        The settings; ``credential`` and every secret-looking property are secrets.

    Raises:
        CatalogSettingsError: a REST catalog without a URI (host empty and no ``uri`` in the extra).

    Example:
        >>> settings = official_catalog_settings("ice", "http://127.0.0.1:8181/", "id", "s3cr3t", {"warehouse": "wh"})
        >>> settings.name, settings.properties["uri"], settings.properties["credential"]
        ('ice', 'http://127.0.0.1:8181', 'id:s3cr3t')
    """
    properties = {str(k): _property_value(v) for k, v in extra.items() if v is not None}
    uri = (host or "").strip().rstrip("/")
    if uri:
        properties["uri"] = uri
    properties.setdefault("type", "rest")
    secret_keys: set[str] = set()
    if properties["type"] == "rest":
        if not properties.get("uri"):
            raise CatalogSettingsError(
                f"connection {conn_id!r} (type {OFFICIAL_CONN_TYPE}): set its host to the REST catalog's URI"
            )
        if login and password:
            properties["credential"] = f"{login}:{password}"
            secret_keys.add("credential")
    return IcebergCatalogSettings(name=conn_id, properties=properties, secret_keys=frozenset(secret_keys))
