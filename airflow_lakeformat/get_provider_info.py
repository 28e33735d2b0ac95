"""What Airflow learns about this provider through the ``apache_airflow_provider`` entry point.

Airflow calls :func:`get_provider_info` while it discovers providers, before it imports any hook,
so this module imports nothing but the package version. The connection form is declared here
(``conn-fields`` and ``ui-field-behaviour``), the Airflow 3.2+ way: the hook classmethods that used
to build it are ignored when flask-appbuilder/wtforms are absent, as they are in a base 3.3 install.
"""

from __future__ import annotations

from typing import Any

from airflow_lakeformat.version import __version__

INTEGRATION = "Apache Paimon and Apache Iceberg (lakeformat)"

_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}
_SECRET_STRING: dict[str, Any] = {"type": ["string", "null"], "format": "password"}


def _connection_type() -> dict[str, Any]:
    """The ``lakeformat`` connection type: the form's standard fields, then its extras."""
    return {
        "connection-type": "lakeformat",
        "hook-class-name": "airflow_lakeformat.hooks.lakeformat.LakeformatHook",
        "hook-name": "Lakeformat (Apache Paimon and Iceberg tables)",
        "ui-field-behaviour": _ui_field_behaviour(),
        "conn-fields": {**_storage_fields(), **_table_fields(), **_iceberg_catalog_fields()},
    }


def _ui_field_behaviour() -> dict[str, Any]:
    """The standard fields: host is the warehouse, login and password the S3 keys."""
    return {
        "hidden-fields": ["schema", "port"],
        "relabeling": {
            "host": "Warehouse or table URI",
            "login": "Access key ID",
            "password": "Secret access key",
        },
        "placeholders": {
            "host": "s3://bucket/warehouse  (or /data/warehouse, or s3://bucket/warehouse/db.db/table)",
            "login": "optional; falls back to the environment (AWS_ACCESS_KEY_ID, instance role, ...)",
            "password": "optional",
        },
    }


def _storage_fields() -> dict[str, Any]:
    """Extras for the object store (fsspec/S3 settings beyond the keys)."""
    return {
        "endpoint_url": {
            "label": "S3 endpoint URL",
            "description": "For S3-compatible stores (MinIO, SeaweedFS, Ceph): e.g. http://seaweedfs:8333",
            "schema": _NULLABLE_STRING,
        },
        "region": {
            "label": "Region",
            "description": "Object-store region, e.g. eu-west-1",
            "schema": _NULLABLE_STRING,
        },
        "session_token": {
            "label": "Session token",
            "description": "Temporary-credential session token (kept secret)",
            "schema": _SECRET_STRING,
        },
        "storage_options": {
            "label": "Other storage options (JSON)",
            "description": 'fsspec storage options as a JSON object, e.g. {"config_kwargs": {"s3": '
            '{"addressing_style": "path"}}}',
            "schema": _NULLABLE_STRING,
        },
    }


def _table_fields() -> dict[str, Any]:
    """Extras for the tables: the commit user's prefix and the format."""
    return {
        "commit_user_prefix": {
            "label": "Commit user prefix",
            "description": "Prefix of the commit user of every commit the operators make through this "
            "connection (Paimon's commit user; the lakeformat.commit-user of Iceberg snapshot summaries)",
            "schema": _NULLABLE_STRING,
        },
        "format": {
            "label": "Table format",
            "description": "paimon or iceberg; empty: detected from each table's files",
            "schema": {"type": ["string", "null"], "enum": ["", "paimon", "iceberg", None]},
        },
    }


def _iceberg_catalog_fields() -> dict[str, Any]:
    """Extras for an Iceberg catalog (its name, properties and secrets)."""
    return {
        "iceberg_catalog": {
            "label": "Iceberg catalog name",
            "description": "A pyiceberg catalog (from .pyiceberg.yaml / PYICEBERG_CATALOG__*), or the name "
            "the catalog below goes by (default: default); namespace.table names are then its tables",
            "schema": _NULLABLE_STRING,
        },
        "iceberg_catalog_properties": {
            "label": "Iceberg catalog properties (JSON)",
            "description": 'pyiceberg load_catalog properties, e.g. {"type": "sql", "uri": '
            '"sqlite:////data/catalog.db", "warehouse": "file:///data/wh"} or {"type": "rest", "uri": '
            '"https://catalog:8181"}; no secrets here (use the fields below)',
            "schema": _NULLABLE_STRING,
        },
        "iceberg_catalog_credential": {
            "label": "Iceberg REST credential",
            "description": "The REST catalog's credential (client_id:client_secret; kept secret)",
            "schema": _SECRET_STRING,
        },
        "iceberg_catalog_token": {
            "label": "Iceberg REST token",
            "description": "The REST catalog's bearer token (kept secret)",
            "schema": _SECRET_STRING,
        },
        "iceberg_catalog_secret_properties": {
            "label": "Secret Iceberg catalog properties (JSON)",
            "description": 'Merged over the properties and kept secret, e.g. {"glue.secret-access-key": '
            '"...", "uri": "postgresql+psycopg2://user:password@db/catalog"}',
            "schema": _SECRET_STRING,
        },
    }


_ASSETS = "airflow_lakeformat.hooks.assets"
_ASSET_URIS: dict[str, Any] = {
    "schemes": ["lakeformat"],
    "handler": f"{_ASSETS}.sanitize_uri",
    "factory": f"{_ASSETS}.create_asset",
    "to_openlineage_converter": f"{_ASSETS}.convert_asset_to_openlineage",
}


def get_provider_info() -> dict[str, Any]:
    """The provider metadata dict (schema: ``airflow/provider_info.schema.json``)."""
    return {
        "package-name": "airflow-lakeformat",
        "name": "Lakeformat",
        "description": "Maintain Apache Paimon and Apache Iceberg tables from Airflow: commits, snapshot "
        "sensors and Asset watchers, manifest compaction, snapshot expiry and orphan cleanup, in-process or "
        "on Spark.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://paimon.apache.org/",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_lakeformat.hooks.lakeformat"]}
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_lakeformat.operators.commit",
                    "airflow_lakeformat.operators.compact_data",
                    "airflow_lakeformat.operators.compact_manifests",
                    "airflow_lakeformat.operators.create_tag",
                    "airflow_lakeformat.operators.expire_partitions",
                    "airflow_lakeformat.operators.expire_snapshots",
                    "airflow_lakeformat.operators.health",
                    "airflow_lakeformat.operators.remove_orphan_files",
                    "airflow_lakeformat.operators.validate",
                    "airflow_lakeformat.operators.write",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_lakeformat.sensors.health",
                    "airflow_lakeformat.sensors.snapshot",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_lakeformat.triggers.health",
                    "airflow_lakeformat.triggers.snapshot",
                ],
            }
        ],
        # lakeformat://<conn_id>/<db>.<table>: a table named through a connection, without reading it.
        "asset-uris": [_ASSET_URIS],
        "dataset-uris": [_ASSET_URIS],
        "connection-types": [_connection_type()],
        # The "Table health" page of the Airflow UI (also the airflow.plugins entry point, see pyproject.toml).
        "plugins": [
            {
                "name": "lakeformat_health",
                "plugin-class": "airflow_lakeformat.plugins.health_ui.LakeformatHealthPlugin",
            }
        ],
    }
