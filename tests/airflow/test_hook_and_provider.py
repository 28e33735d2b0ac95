"""LakeformatHook (settings, table names, storage options, Spark env, test_connection) and provider registration."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.get_provider_info import get_provider_info
from airflow_lakeformat.hooks.lakeformat import (
    LakeformatConnectionError,
    LakeformatConnectionSettings,
    LakeformatHook,
    table_asset,
)
from tests.airflow.helpers import append, make_table, set_connection
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.airflow

S3_EXTRA = {
    "endpoint_url": "http://127.0.0.1:8333",
    "region": "eu-west-1",
    "session_token": "the-token",
    "storage_options": json.dumps({"config_kwargs": {"s3": {"addressing_style": "path"}}}),
    "commit_user_prefix": "nightly",
}


def s3_settings(**extra: Any) -> LakeformatConnectionSettings:
    return LakeformatConnectionSettings.from_connection(
        "lake", "s3://bucket/warehouse/", "AKIA-ID", "the-secret", {**S3_EXTRA, **extra}
    )


def test_s3_settings_become_storage_options_and_spark_env() -> None:
    settings = s3_settings()
    assert settings.storage_options() == {
        "key": "AKIA-ID",
        "secret": "the-secret",
        "token": "the-token",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:8333", "region_name": "eu-west-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    env = settings.spark_env("s3://bucket/warehouse/db.db/t")
    assert json.loads(env.pop("LAKEFORMAT_STORAGE_OPTIONS")) == settings.storage_options()
    assert env == {
        "AWS_ACCESS_KEY_ID": "AKIA-ID",
        "AWS_SECRET_ACCESS_KEY": "the-secret",
        "AWS_SESSION_TOKEN": "the-token",
        "AWS_REGION": "eu-west-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
    }
    assert "the-secret" not in repr(settings) and "the-token" not in repr(settings)
    assert settings.commit_user("my_dag", "commit task") == "nightly-my_dag-commit_task"


def test_explicit_storage_options_win_and_prefixed_extras_are_read() -> None:
    settings = LakeformatConnectionSettings.from_connection(
        "lake",
        "s3://bucket",
        None,
        None,
        {
            "extra__lakeformat__aws_access_key_id": "from-extra",
            "aws_secret_access_key": "secret-from-extra",
            "extra__lakeformat__region": "us-west-2",
            "storage_options": {"client_kwargs": {"region_name": "override"}, "anon": False},
        },
    )
    assert settings.storage_options() == {
        "key": "from-extra",
        "secret": "secret-from-extra",
        "client_kwargs": {"region_name": "override"},
        "anon": False,
    }
    # S3 credentials are not handed to other stores.
    assert settings.storage_options("/local/table") == {
        "client_kwargs": {"region_name": "override"},
        "anon": False,
    }
    assert settings.spark_env("/local/table") == {
        "LAKEFORMAT_STORAGE_OPTIONS": json.dumps(settings.storage_options("/x"), sort_keys=True)
    }


@pytest.mark.parametrize(
    ("table", "uri"),
    [
        ("db.events", "s3://bucket/warehouse/db.db/events"),
        ("db.db/events", "s3://bucket/warehouse/db.db/events"),
        ("sales.orders.v2", "s3://bucket/warehouse/sales.db/orders.v2"),
        ("s3://other/t/", "s3://other/t"),
        ("/data/t", "/data/t"),
        ("", "s3://bucket/warehouse"),
        (None, "s3://bucket/warehouse"),
    ],
)
def test_table_names(table: str | None, uri: str) -> None:
    assert s3_settings().table_uri(table) == uri


@pytest.mark.parametrize(
    ("host", "table", "message"),
    [
        ("s3://b/wh", "events", "name a table as 'db.table', 'db.db/table' or by its full URI"),
        ("s3://b/wh", "db/events", "the database directory must end in '.db'"),
        ("s3://b/wh", "db.", "name a table as"),
        (None, "db.events", "table 'db.events' is relative, but connection 'lake' has no host"),
        (None, None, "connection 'lake' has no host, so a table must be named by its full URI"),
        ("relative/path", "db.t", "host 'relative/path' must be a URI"),
    ],
)
def test_table_name_errors(host: str | None, table: str | None, message: str) -> None:
    with pytest.raises(LakeformatConnectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LakeformatConnectionSettings.from_connection("lake", host, None, None, {}).table_uri(table)


@pytest.mark.parametrize(
    ("options", "message"),
    [("{not json", "is not valid JSON"), ("[1, 2]", "must be a JSON object, not list")],
)
def test_bad_storage_options(options: str, message: str) -> None:
    with pytest.raises(LakeformatConnectionError, match=message):
        LakeformatConnectionSettings.from_connection(
            "lake", "s3://b", None, None, {"storage_options": options}
        )


def test_table_asset_uris() -> None:
    assert table_asset("/data/wh/db.db/t/").uri == "file:///data/wh/db.db/t"
    assert table_asset("s3a://b/wh/db.db/t").uri == "s3://b/wh/db.db/t"
    with pytest.raises(LakeformatConnectionError, match="absolute path"):
        table_asset("db.t")


def test_open_table_and_test_connection_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = tmp_path / "wh"
    table = make_table(str(warehouse / "db.db" / "events"))
    append(table, 2)
    set_connection(monkeypatch, "lake", host=str(warehouse))
    hook = LakeformatHook("lake")
    assert hook.open_table("db.events").snapshot_manager.latest_snapshot_id() == 1
    assert hook.test_connection() == (True, f"{warehouse} is a warehouse with 1 database(s): db.db")
    set_connection(monkeypatch, "lake_table", host=str(warehouse / "db.db" / "events"))
    assert LakeformatHook("lake_table").test_connection() == (
        True,
        f"{warehouse}/db.db/events is a Paimon table (schema 0, latest snapshot 1)",
    )
    set_connection(monkeypatch, "no_host")
    assert LakeformatHook("no_host").test_connection() == (
        False,
        "the connection has no host: set it to a warehouse or table URI",
    )
    set_connection(monkeypatch, "bad_json", host=str(warehouse), extra={"storage_options": "{"})
    ok, message = LakeformatHook("bad_json").test_connection()
    assert not ok and message.startswith(
        "LakeformatConnectionError: connection 'bad_json': extra 'storage_options'"
    )


@pytest.mark.s3
def test_test_connection_on_s3(
    seaweedfs: SeaweedFSServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = {"endpoint_url": seaweedfs.endpoint_url, "region": seaweedfs.region}
    make_table(f"{s3_bucket}/wh/db.db/events", seaweedfs.storage_options())
    set_connection(
        monkeypatch,
        "s3",
        host=f"{s3_bucket}/wh",
        login=seaweedfs.access_key,
        password=seaweedfs.secret_key,
        extra=extra,
    )
    assert LakeformatHook("s3").test_connection() == (
        True,
        f"{s3_bucket}/wh is a warehouse with 1 database(s): db.db",
    )
    set_connection(
        monkeypatch,
        "s3_bad",
        host=f"{s3_bucket}/wh",
        login=seaweedfs.access_key,
        password="wrong",
        extra=extra,
    )
    ok, message = LakeformatHook("s3_bad").test_connection()
    assert not ok and message.startswith("PermissionError")
    set_connection(
        monkeypatch,
        "s3_nobucket",
        host="s3://no-such-bucket-here/wh",
        login=seaweedfs.access_key,
        password=seaweedfs.secret_key,
        extra=extra,
    )
    ok, message = LakeformatHook("s3_nobucket").test_connection()
    assert (ok, message) == (
        False,
        f"bucket 'no-such-bucket-here' does not exist (endpoint {seaweedfs.endpoint_url})",
    )


# -- provider registration ---------------------------------------------------------------------------


def test_provider_info_is_valid_and_names_importable_code() -> None:
    import jsonschema
    from airflow import providers_manager

    info = get_provider_info()
    schema_path = Path(providers_manager.__file__).parent / "provider_info.schema.json"
    jsonschema.validate(info, json.loads(schema_path.read_text()))
    assert info["package-name"] == "airflow-lakeformat"
    for section in ("hooks", "operators", "sensors", "triggers"):
        for group in info[section]:
            assert group["integration-name"] == info["integrations"][0]["integration-name"]
            for module in group["python-modules"]:
                importlib.import_module(module)
    listed = {m for group in info["operators"] for m in group["python-modules"]}
    present = {
        f"airflow_lakeformat.operators.{path.stem}"
        for path in (Path(__file__).resolve().parents[2] / "airflow_lakeformat" / "operators").glob("*.py")
        # shared plumbing (the base, argument coercion, Spark submission, Iceberg commits, lineage), no operator
        if path.stem
        not in (
            "__init__",
            "base",
            "templated",
            "spark_submit",
            "iceberg_commits",
            "lineage",
            "lineage_facets",
            "health_facet",
            "auto_maintenance",
        )
    }
    assert listed == present, "every operator module is registered with Airflow"
    [connection] = info["connection-types"]
    module_name, _, class_name = connection["hook-class-name"].rpartition(".")
    hook_class = getattr(importlib.import_module(module_name), class_name)
    assert hook_class.conn_type == connection["connection-type"] == "lakeformat"
    assert hook_class.default_conn_name == "lakeformat_default"
    secret_fields = {
        k for k, v in connection["conn-fields"].items() if v["schema"].get("format") == "password"
    }
    assert secret_fields == {
        "session_token",
        "iceberg_catalog_credential",
        "iceberg_catalog_token",
        "iceberg_catalog_secret_properties",
    }


def test_airflow_discovers_the_provider_and_its_connection_form() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert "airflow-lakeformat" in manager.providers
    assert manager.hooks["lakeformat"] is not None
    assert manager.hooks["lakeformat"].hook_class_name == "airflow_lakeformat.hooks.lakeformat.LakeformatHook"
    widgets = manager.connection_form_widgets
    assert widgets["extra__lakeformat__session_token"].is_sensitive
    assert not widgets["extra__lakeformat__endpoint_url"].is_sensitive
    behaviour = manager.field_behaviours["lakeformat"]
    assert behaviour["hidden_fields"] == ["schema", "port"]
    assert behaviour["relabeling"]["host"] == "Warehouse or table URI"


def test_airflow_providers_list_shows_the_package() -> None:
    registered = [
        e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_lakeformat.")
    ]
    if not registered:
        pytest.fail("the apache_airflow_provider entry point is not installed (pip install -e .)")
    output = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "providers", "list", "--output", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = {row["package_name"]: row for row in json.loads(output[output.index("[") :])}
    assert packages["airflow-lakeformat"]["version"] == get_provider_info()["versions"][0]
