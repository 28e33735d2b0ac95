"""The official Iceberg connection (issue 28 point 6): an ``iceberg`` connection of
apache-airflow-providers-apache-iceberg is the catalog of the hook, the operators and the snapshot sensor.

The catalog is a REST catalog this module starts locally (``tests/support/rest_catalog.py``: the REST protocol
over pyiceberg's SqlCatalog, with an OAuth2 token endpoint that every request's bearer token must come from), so
opening a table proves the whole path: the connection's host, client id and secret become pyiceberg's REST
catalog properties as the official ``IcebergHook`` builds them, the client trades the credential for a token,
and the table is read, watched and maintained through the catalog. The official provider is installed (its
``IcebergHook`` reads the same connection in the first test).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog

from airflow_lakeformat.hooks.lakeformat import ConnectionChoiceError, LakeformatHook
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor
from airflow_lakeformat.triggers.snapshot import LakeformatSnapshotTrigger, watched_table_asset
from tests.airflow.helpers import load_dag_module, set_connection, task_states, xcom_result
from tests.support.rest_catalog import RestCatalogServer

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]

CLIENT_ID, CLIENT_SECRET = "airflow-worker", "rest-secret-5f2a"
SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCatalogServer]:
    with RestCatalogServer(tmp_path_factory.mktemp("rest"), clients={CLIENT_ID: CLIENT_SECRET}) as server:
        yield server


def client(server: RestCatalogServer) -> Catalog:
    """Another engine's client of the same catalog (pyiceberg's own REST catalog)."""
    token_endpoint = {"oauth2-server-uri": f"{server.uri}/v1/oauth/tokens"}
    credential = f"{CLIENT_ID}:{CLIENT_SECRET}"
    return load_catalog("writer", type="rest", uri=server.uri, credential=credential, **token_endpoint)


def make_table(server: RestCatalogServer, name: str, batches: int) -> list[int]:
    """``sales.<name>`` with ``batches`` appends of 2 rows (by pyiceberg through the REST catalog)."""
    catalog = client(server)
    if not catalog.namespace_exists("sales"):
        catalog.create_namespace("sales")
    table = catalog.create_table(f"sales.{name}", schema=SCHEMA)
    for n in range(batches):
        table.append(pa.table({"id": [2 * n, 2 * n + 1], "region": ["eu", "us"]}, schema=SCHEMA))
    return [s.snapshot_id for s in table.snapshots()]


@pytest.fixture
def iceberg_connection(rest: RestCatalogServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """``iceberg_rest``: a connection of the official provider's type, as its form fills it in."""
    set_connection(
        monkeypatch,
        "iceberg_rest",
        conn_type="iceberg",
        host=rest.uri + "/",
        login=CLIENT_ID,
        password=CLIENT_SECRET,
        extra={"warehouse": "lake"},
    )
    return "iceberg_rest"


def test_an_official_iceberg_connection_opens_a_table_of_a_local_rest_catalog(
    rest: RestCatalogServer, iceberg_connection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.apache.iceberg.hooks.iceberg import IcebergHook

    snapshots = make_table(rest, "orders", batches=2)
    official = IcebergHook(iceberg_connection)
    assert official.list_tables("sales") == ["sales.orders"]
    assert official.get_token() in rest.tokens, "the provider's own token call reaches the same endpoint"

    hook = LakeformatHook(iceberg_conn_id=iceberg_connection)
    settings = hook.settings
    assert settings.root is None and settings.catalog.name == iceberg_connection
    assert dict(settings.catalog_properties()) == {
        "warehouse": "lake",
        "uri": rest.uri,
        "type": "rest",
        "credential": f"{CLIENT_ID}:{CLIENT_SECRET}",
    }
    assert settings.catalog.secrets() == [f"{CLIENT_ID}:{CLIENT_SECRET}"]
    tokens_before = len(rest.tokens)
    table = hook.open_lake_table("sales.orders")
    assert len(rest.tokens) > tokens_before, "our catalog traded the connection's credential for a token"
    assert (table.format, table.uri) == ("iceberg", f"{iceberg_connection}:sales.orders")
    assert [s.id for s in table.snapshots()] == snapshots
    files = [f for f in table.files() if f.content == "data"]
    assert sum(f.record_count for f in files) == 4 and all(f.path.startswith("file:") for f in files)
    rows = table.native.table.scan().to_arrow().sort_by("id")
    assert rows.column("id").to_pylist() == [0, 1, 2, 3]
    namespaces = hook.load_iceberg_catalog().list_tables("sales")
    assert ("sales", "orders") in namespaces
    ok, message = hook.test_connection()
    assert ok and message.startswith(f"Iceberg catalog {iceberg_connection!r} (rest) at {rest.uri}"), message
    # The id alone is enough: the connection's type says it is the official provider's.
    assert LakeformatHook(iceberg_connection).open_lake_table("sales.orders").uri == table.uri

    # A wrong secret fails at the token endpoint, with the catalog's answer.
    set_connection(
        monkeypatch, "iceberg_bad", conn_type="iceberg", host=rest.uri, login=CLIENT_ID, password="x"
    )
    with pytest.raises(Exception, match="invalid_client"):
        LakeformatHook(iceberg_conn_id="iceberg_bad").open_lake_table("sales.orders")


def test_one_connection_is_given_and_iceberg_conn_id_must_be_of_the_official_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConnectionChoiceError, match="not both"):
        LakeformatExpireSnapshotsOperator(
            task_id="both", table="sales.orders", lakeformat_conn_id="lake", iceberg_conn_id="iceberg_rest"
        )
    with pytest.raises(ConnectionChoiceError, match="not both"):
        LakeformatSnapshotSensor(
            task_id="both", table="sales.orders", lakeformat_conn_id="lake", iceberg_conn_id="iceberg_rest"
        )
    with pytest.raises(ConnectionChoiceError, match="give a connection"):
        LakeformatHook("", iceberg_conn_id=None)
    set_connection(monkeypatch, "lake", host=str(tmp_path))  # a lakeformat connection
    with pytest.raises(ConnectionChoiceError, match="type 'lakeformat', not 'iceberg'"):
        _ = LakeformatHook(iceberg_conn_id="lake").settings
    # The default lakeformat_conn_id is no choice: the iceberg connection is the one used.
    operator = LakeformatExpireSnapshotsOperator(task_id="ok", table="sales.orders", iceberg_conn_id="ice")
    assert (operator.conn_id_in_use, operator.hook.lakeformat_conn_id) == ("ice", "ice")
    assert watched_table_asset("sales.orders", iceberg_conn_id="ice").uri == "lakeformat://ice/sales.orders"


def test_sensor_trigger_and_expiry_run_through_the_iceberg_connection(
    rest: RestCatalogServer, iceberg_connection: str, caplog: pytest.LogCaptureFixture
) -> None:
    snapshots = make_table(rest, "events", batches=3)

    trigger = LakeformatSnapshotTrigger(
        "sales.events", iceberg_conn_id=iceberg_connection, after_snapshot_id=snapshots[0], poll_interval=0.05
    )
    _, kwargs = trigger.serialize()
    assert kwargs["iceberg_conn_id"] == iceberg_connection and json.loads(json.dumps(kwargs)) == kwargs
    event = asyncio.run(asyncio.wait_for(first_event(trigger), timeout=60))
    assert event["status"] == "success", event
    assert (event["snapshot"]["id"], event["snapshot"]["newRecords"]) == (snapshots[2], 4)

    module = load_dag_module("lakeformat_test_iceberg_connection")
    commits_before = rest.requests.count(("POST", "/v1/namespaces/sales/tables/events"))
    run = module.connection_dag.test(
        run_conf={"table": "sales.events", "after": snapshots[1], "dry_run": False}
    )
    assert set(task_states(run).values()) == {("success", 1)}
    assert any("running trigger in line" in r.getMessage() for r in caplog.records), "the sensor deferred"
    assert xcom_result(run, "wait")["id"] == snapshots[2]
    expired = xcom_result(run, "expire_snapshots")
    assert (expired["table"], expired["format"], expired["dryRun"], expired["committed"]) == (
        f"{iceberg_connection}:sales.events",
        "iceberg",
        False,
        True,
    )
    assert sorted(expired["snapshotsExpired"]) == sorted(snapshots[:2])
    # One commit, through the catalog's REST endpoint (whose requirements pyiceberg's SqlCatalog checked).
    assert rest.requests.count(("POST", "/v1/namespaces/sales/tables/events")) == commits_before + 1
    reread = client(rest).load_table("sales.events")
    assert [s.snapshot_id for s in reread.snapshots()] == [snapshots[2]]
    assert reread.scan().to_arrow().num_rows == 6


async def first_event(trigger: LakeformatSnapshotTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")
