"""The example DAGs in ``dags/`` parse on a fresh deployment: no connection defined, and none looked up.

Issue 28, point 7: the ingest and maintenance examples used to read ``lakeformat_default`` at parse time to name
their table's Asset by its URI, so before a user had created the connection the dag-processor listed them as
broken (``AirflowNotFoundException``), and every parse queried the connection store. Tables named through a
connection are now the Assets ``lakeformat://<conn_id>/<db>.<table>`` (``airflow_lakeformat/hooks/assets.py``).

The connection store is made empty and watched: no ``AIRFLOW_CONN_*`` variable (the conftest sets some), and
the task SDK's connection lookup (``airflow.sdk.execution_time.context._get_connection`` and its async twin,
what ``BaseHook.get_connection`` ends in) records the id asked for and answers "not defined", as an empty store
does. A ``DagBag`` of ``dags/`` then has no import error, every example DAG, the new Asset URIs, and asked the
store nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.airflow

EXAMPLE_DAGS = Path(__file__).resolve().parents[2] / "dags"
DEFAULT_ASSET = "lakeformat://lakeformat_default/demo.events"
ICEBERG_ASSET = "lakeformat://lakeformat_default/demo.events_iceberg"


@pytest.fixture
def empty_connection_store(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No connection anywhere; the ids looked up are returned (and every lookup fails)."""
    from airflow.sdk.exceptions import AirflowNotFoundException
    from airflow.sdk.execution_time import context as sdk_context

    for name in list(os.environ):
        if name.startswith("AIRFLOW_CONN_") or name.startswith("LAKEFORMAT_"):
            monkeypatch.delenv(name)
    asked: list[str] = []

    def lookup(conn_id: str) -> Any:
        asked.append(conn_id)
        raise AirflowNotFoundException(f"The conn_id `{conn_id}` isn't defined")

    async def async_lookup(conn_id: str) -> Any:
        return lookup(conn_id)

    monkeypatch.setattr(sdk_context, "_get_connection", lookup)
    monkeypatch.setattr(sdk_context, "_async_get_connection", async_lookup)
    return asked


def scheduled_on(dag: Any) -> list[Any]:
    """The Assets of a DAG scheduled on a list of Assets (``AssetAll`` of them)."""
    return list(dag.timetable.asset_condition.objects)


def test_example_dags_import_with_no_connection_and_name_assets_by_the_lakeformat_scheme(
    empty_connection_store: list[str],
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    # The store really is empty: the way the DAGs used to name their Asset fails as the dag-processor saw it.
    from airflow_lakeformat.hooks.lakeformat import LakeformatHook

    with pytest.raises(Exception, match="isn't defined"):
        LakeformatHook("lakeformat_default").table_uri("demo.events")
    assert empty_connection_store == ["lakeformat_default"]
    empty_connection_store.clear()

    bag = DagBag(dag_folder=EXAMPLE_DAGS, safe_mode=False, bundle_path=EXAMPLE_DAGS, bundle_name="examples")

    assert bag.import_errors == {}
    assert empty_connection_store == [], "parsing dags/ looked up a connection"
    files = {Path(dag.fileloc).name for dag in bag.dags.values()}
    assert files == {p.name for p in EXAMPLE_DAGS.glob("*.py")}
    assert [a.uri for a in scheduled_on(bag.dags["lakeformat_downstream_asset"])] == [DEFAULT_ASSET]
    write = bag.dags["lakeformat_ingest"].get_task("write_batch")
    assert [outlet.uri for outlet in write.outlets] == [DEFAULT_ASSET]
    (asset,) = scheduled_on(bag.dags["lakeformat_iceberg_downstream_asset"])
    assert asset.uri == ICEBERG_ASSET
    assert [w.trigger.lakeformat_conn_id for w in asset.watchers] == ["lakeformat_default"]


def test_the_lakeformat_scheme_is_registered_normalised_and_resolved_at_run_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers.common.compat.openlineage.utils.utils import translate_airflow_asset
    from airflow.sdk import Asset
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from airflow_lakeformat.hooks.assets import split_asset_uri, table_asset_uri
    from airflow_lakeformat.operators.lineage import dataset_name
    from tests.airflow.helpers import set_connection

    # Airflow's own Asset normalises through the provider's handler: one table, one Asset.
    assert "lakeformat" in ProvidersManagerTaskRuntime().asset_uri_handlers
    assert Asset(uri="lakeformat://lake/demo.db/events/").uri == "lakeformat://lake/demo.events"
    assert Asset(uri="lakeformat://lake/ns.sub.events").uri == "lakeformat://lake/ns.sub.events"
    for bad in (
        "lakeformat:///demo.events",
        "lakeformat://lake/",
        "lakeformat://lake/a/b/c",
        "lakeformat://lake/x?y=1",
    ):
        with pytest.raises(ValueError):
            Asset(uri=bad)
    assert table_asset_uri("demo.db/events", "lake") == "lakeformat://lake/demo.events"
    assert table_asset_uri("s3a://b/wh/demo.db/events/", "lake") == "s3://b/wh/demo.db/events"
    assert split_asset_uri("lakeformat://lake/demo.events") == ("lake", "demo.events")
    # OpenLineage names the Asset as the operators name the table, reading the connection only then.
    asset = Asset(uri=table_asset_uri("demo.events", "lake"))
    assert translate_airflow_asset(asset, None) is None  # no connection "lake" yet: no dataset, no failure
    set_connection(monkeypatch, "lake", host="/data/wh")
    translated = translate_airflow_asset(asset, None)
    assert translated is not None
    assert (translated.namespace, translated.name) == dataset_name("/data/wh/demo.db/events")
