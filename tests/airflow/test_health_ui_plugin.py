"""The "Table health" UI plugin without a server: its FastAPI app through TestClient, its registration.

A warehouse with a Paimon table of many small files (compaction recommended) and a healthy Iceberg table
in the Hadoop layout, reached through a ``lakeformat`` connection of the environment: the page lists both
with the score and the recommendations ``health()`` computes, one SVG per chart per table, and a link to the
manual-maintenance DAG's trigger form with the table filled in; the form holds the DAG's real Params. The
browser check against a running api-server is in test_compose_runtime.py.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.tables import open_table
from tests.airflow.helpers import append, make_table, set_connection
from tests.airflow.iceberg_helpers import append_batch, path_table

pytestmark = pytest.mark.airflow


@pytest.fixture
def two_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> Path:
    root = tmp_path / "wh"
    paimon = make_table(str(root / "demo.db" / "small_files"))
    for _ in range(8):
        append(paimon, 3)
    iceberg = path_table(str(root / "demo.db" / "healthy"))
    append_batch(iceberg, 10)
    (root / "demo.db" / "not_a_table").mkdir()
    set_connection(monkeypatch, "lake_ui", host=str(root))
    monkeypatch.delenv("AIRFLOW_CONN_LAKEFORMAT_DEFAULT", raising=False)
    return root


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Any:
    from fastapi.testclient import TestClient

    from airflow_lakeformat.plugins import health_app, health_tables

    health_tables.CACHE.clear()
    app = health_app.create_app()
    app.dependency_overrides[health_app.read_connections] = lambda: None
    return TestClient(app)


def sections(html: str) -> dict[str, str]:
    return dict(
        re.findall(r'<section class="table" id="[^"]+" data-table="([^"]+)">(.*?)</section>', html, re.S)
    )


def test_the_page_lists_each_table_with_its_score_charts_recommendations_and_trigger_link(
    two_tables: Path, client: Any
) -> None:
    response = client.get("/")
    assert response.status_code == 200
    html = response.text
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<link" not in html, "the page fetches nothing"
    found = sections(html)
    assert set(found) == {"demo.small_files", "demo.healthy"}
    for name, section in found.items():
        expected = open_table(str(two_tables / "demo.db" / name.split(".")[1])).health().to_json()
        assert f'">{expected["score"]}</span>' in section
        assert section.count("<svg") == 3, name
        for rec in expected["recommendations"]:
            assert unescape(rec["reason"]) in unescape(section)
        [href] = re.findall(r'<a class="trigger" href="([^"]+)"', section)
        assert unescape(href) == f"trigger?dag_id=lakeformat_manual_maintenance&table={name}&conn_id=lake_ui"
    small = open_table(str(two_tables / "demo.db" / "small_files")).health()
    assert "compact_data" in small.operations
    assert "Healthy: no maintenance needed." in found["demo.healthy"]
    summary = re.search(r'<table class="summary">(.*?)</table>', html, re.S)
    assert summary is not None and "compact_data" in summary.group(1)
    assert client.get("/health.json").json()[0]["health"]["score"] in (small.score, 100)


def test_the_trigger_form_holds_the_dags_params_with_the_table_filled_in(
    monkeypatch: pytest.MonkeyPatch, client: Any
) -> None:
    import importlib.util

    from airflow_lakeformat.plugins import health_app

    path = Path(__file__).resolve().parents[2] / "dags" / "lakeformat_manual_maintenance.py"
    spec = importlib.util.spec_from_file_location("ui_manual_maintenance", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = module.dag.params
    real = {
        name: {"value": p.value, "schema": p.schema, "description": p.description}
        for name, p in ((n, params.get_param(n)) for n in params)
    }
    monkeypatch.setattr(
        health_app, "dag_params", lambda dag_id: real if dag_id == module.dag.dag_id else None
    )
    html = client.get("/trigger", params={"dag_id": module.dag.dag_id, "table": "demo.small_files"}).text
    assert 'name="table" id="p-table"' in html and 'value="demo.small_files"' in html
    assert re.search(r'name="dry_run"[^>]* checked', html), "dry run stays ticked by default"
    assert set(re.findall(r'name="([a-z_]+)" id="p-', html)) == set(real)
    assert "api/v2/dags/" in html
    assert "is not known" in client.get("/trigger", params={"dag_id": "nope", "table": "t"}).text


def test_the_page_needs_a_signed_in_user() -> None:
    from fastapi.testclient import TestClient

    from airflow_lakeformat.plugins import health_ui

    # Through the plugin's mounted (lazy) app, as the api-server serves it.
    [mounted] = health_ui.LakeformatHealthPlugin.fastapi_apps
    assert TestClient(mounted["app"]).get("/").status_code == 401


def test_the_provider_registers_the_plugin_with_a_nav_view() -> None:
    from airflow._shared.plugins_manager import is_valid_plugin

    from airflow_lakeformat.get_provider_info import get_provider_info
    from airflow_lakeformat.plugins.health_ui import URL_PREFIX, LakeformatHealthPlugin

    [entry] = get_provider_info()["plugins"]
    assert entry["plugin-class"] == "airflow_lakeformat.plugins.health_ui.LakeformatHealthPlugin"
    assert is_valid_plugin(LakeformatHealthPlugin)
    [view] = LakeformatHealthPlugin.external_views
    assert view["destination"] == "nav" and view["href"].startswith(URL_PREFIX)
    [app] = LakeformatHealthPlugin.fastapi_apps
    assert app["url_prefix"] == URL_PREFIX
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'lakeformat_health = "airflow_lakeformat.plugins.health_ui:LakeformatHealthPlugin"' in pyproject
