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
