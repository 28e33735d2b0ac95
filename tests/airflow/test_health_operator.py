"""``LakeformatHealthOperator`` and the steps of ``lakeformat_auto_maintenance``, without a DAG run (cheap).

* The XCom document is the health document (``table.health().to_json()``) headed by ``operation``/``dryRun``,
  JSON as it is (a duration argument as text), and the OpenLineage facet ``lakeformatHealth`` on the table as
  the input dataset validates against the schema that ships with the package.
* A policy from a mapping or an Airflow Variable changes the recommendations; an invalid one fails the task
  without retry naming the key.
* The orphan cleanup's ``older_than`` goes through XCom as text and back to a ``timedelta``: the recommended
  cleanup then runs and deletes the planted orphan.
* A namespace lists the catalog's tables and the warehouse's (each once); the table list is deduplicated by
  where the connection resolves each name; a healthy table's maintenance takes no lock, and a held lock fails
  the maintenance with nothing run.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.tables import open_table
from tests.airflow.helpers import append, make_table, set_connection
from tests.airflow.iceberg_helpers import append_batch, catalog_connection, catalog_table

pytestmark = pytest.mark.airflow


class FakeTI:
    dag_id, task_id, map_index, try_number = "lakeformat_auto_maintenance", "maintain", 0, 1


CONTEXT: dict[str, Any] = {"ti": FakeTI(), "run_id": "manual__test"}


def small_files_table(root: Path, files: int = 5) -> Any:
    table = make_table(str(root))
    for i in range(files):
        append(table, 1 + i)
    return table


def stable(document: dict[str, Any]) -> dict[str, Any]:
    """The document without what moves with the clock (the report's time, the oldest snapshot's age)."""
    snapshots = {k: v for k, v in document["snapshots"].items() if k not in ("nowMs", "oldestAgeMs")}
    return {**document, "snapshots": snapshots}


def facet_validator() -> Any:
    import jsonschema
    from referencing import Registry, Resource

    from airflow_lakeformat.operators.health_facet import SCHEMA_ID, health_facet_schema
    from tests.airflow.test_openlineage import OPENLINEAGE_SPEC

    schema = health_facet_schema()
    registry = Registry().with_resources(
        [
            (OPENLINEAGE_SPEC["$id"], Resource.from_contents(OPENLINEAGE_SPEC)),
            (SCHEMA_ID, Resource.from_contents(schema)),
        ]
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator({"$ref": SCHEMA_ID}, registry=registry)


def test_xcom_is_the_health_document_and_lineage_carries_the_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openlineage.client.serde import Serde

    from airflow_lakeformat.operators.health import LakeformatHealthOperator
    from airflow_lakeformat.operators.health_facet import SCHEMA_URL

    warehouse = tmp_path / "wh"
    root = warehouse / "db.db" / "events"
    small_files_table(root)
    set_connection(monkeypatch, "lake", host=str(warehouse))
    operator = LakeformatHealthOperator(task_id="health", table="db.events", conn_id="lake")
    assert operator.lakeformat_conn_id == operator.conn_id == "lake"

    document = operator.execute({})
    expected = open_table(str(root)).health().to_json()
    assert list(document)[:4] == ["operation", "table", "format", "dryRun"]
    assert (document["operation"], document["dryRun"]) == ("health", False)
    assert stable({k: v for k, v in document.items() if k not in ("operation", "dryRun")}) == stable(expected)
    assert document["score"] == 60 and [r["operation"] for r in document["recommendations"]] == [
        "compact_data"
    ]
    json.dumps(document)  # XCom's JSON, as it is

    lineage = operator.get_openlineage_facets_on_complete(None)
    assert lineage.outputs == []
    [dataset] = lineage.inputs
    assert (dataset.namespace, dataset.name) == ("file", str(root))
    facets = json.loads(Serde.to_json(dataset))["facets"]
    assert facets["storage"]["storageLayer"] == "paimon"
    facet = facets["lakeformatHealth"]
    assert facet["_schemaURL"] == SCHEMA_URL
    facet_validator().validate({"lakeformatHealth": facet})
    assert (facet["score"], facet["dataFiles"], facet["smallFiles"]) == (60, 5, 5)
    assert facet["penalties"]["smallFiles"] == 40
    assert facet["recommendations"] == [
        {"operation": "compact_data", "metric": "smallFilesPerPartition", "value": 5, "threshold": 5}
    ]
    with pytest.raises(ValueError, match="differ"):
        LakeformatHealthOperator(task_id="x", table="t", conn_id="a", lakeformat_conn_id="b")


def test_a_policy_from_a_mapping_or_a_variable_changes_what_is_recommended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_lakeformat.operators.health import LakeformatHealthOperator

    root = tmp_path / "wh" / "db.db" / "events"
    small_files_table(root)
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    allowed_none = {"defaults": {"operations": ["expire_snapshots"]}}
    document = LakeformatHealthOperator(task_id="h", table="db.events", policy=allowed_none).execute({})
    assert document["recommendations"] == []
    assert [s["operation"] for s in document["policy"]["suppressed"]] == ["compact_data"]

    monkeypatch.setenv(
        "AIRFLOW_VAR_HEALTH_POLICY",
        json.dumps({"tables": {"db.events": {"thresholds": {"min-small-files": 6}}}}),
    )
    document = LakeformatHealthOperator(
        task_id="h", table="db.events", policy_variable="health_policy"
    ).execute({})
    assert (
        document["recommendations"] == [] and document["policy"]["source"] == "Airflow Variable health_policy"
    )

    bad = {"defaults": {"thresholds": {"min-smal-files": 3}}}
    with pytest.raises(AirflowFailException, match="min-smal-files"):
        LakeformatHealthOperator(task_id="h", table="db.events", policy=bad).execute({})


def test_orphan_cleanup_arguments_go_through_xcom_and_the_recommendation_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.operators.auto_maintenance import facade_arguments, maintain_table
    from airflow_lakeformat.operators.health import LakeformatHealthOperator

    root = tmp_path / "wh" / "db.db" / "events"
    small_files_table(root, files=1)
    orphan = root / "dt=2024-01-01" / "bucket-0" / "data-orphan-0.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))

    document = LakeformatHealthOperator(
        task_id="h", table="db.events", orphans="true", orphan_older_than="2 d"
    ).execute({})
    [recommendation] = document["recommendations"]
    assert recommendation["operation"] == "remove_orphan_files"
    assert recommendation["arguments"] == {"dry_run": False, "older_than": "172800000 ms"}
    assert facade_arguments("remove_orphan_files", recommendation["arguments"])["older_than"] == timedelta(
        days=2
    )

    outcome = maintain_table("lakeformat_default", "db.events", json.loads(json.dumps(document)), CONTEXT)
    assert outcome["ran"] == ["remove_orphan_files"] and not orphan.exists()
    assert outcome["changes"]["remove_orphan_files"]["result"]["orphans"] == 1


def test_namespace_listing_table_dedup_healthy_tables_and_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.core.errors import LockHeldError
    from airflow_lakeformat.hooks.lakeformat import LakeformatHook
    from airflow_lakeformat.hooks.table_listing import list_namespace_tables
    from airflow_lakeformat.operators.auto_maintenance import maintain_table, resolve_tables, summarize_runs

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    append_batch(catalog_table(warehouse, "db.events"), 3)
    paimon_root = warehouse / "db.db" / "orders"
    small_files_table(paimon_root, files=1)
    (warehouse / "db.db" / "not_a_table").mkdir()
    hook = LakeformatHook("lakeformat_default")
    assert list_namespace_tables(hook, "db") == ["db.events", str(paimon_root)]
    assert list_namespace_tables(hook, "nowhere") == []
    assert resolve_tables("lakeformat_default", ["db.events", str(paimon_root)], "db") == [
        "db.events",
        str(paimon_root),
    ]

    healthy = {"score": 100, "recommendations": []}
    outcome = maintain_table("lakeformat_default", "db.events", healthy, CONTEXT)
    assert outcome == {"table": "db.events", "score": 100, "ran": [], "changes": {}}
    summary, text = summarize_runs([outcome])
    assert summary == {"db.events": {"score": 100, "ran": [], "changes": {}}}
    assert "nothing (healthy)" in text

    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    document = open_table(str(paimon_root)).health().to_json()
    document["recommendations"] = [{"operation": "compact_manifests", "arguments": {}}]
    lock = open_table(str(paimon_root)).maintenance.lock("someone else", timedelta(hours=1))
    lock.acquire()
    try:
        with pytest.raises(LockHeldError, match="someone else"):
            maintain_table("lakeformat_default", "db.orders", document, CONTEXT)
    finally:
        lock.release()
    outcome = maintain_table("lakeformat_default", "db.orders", document, CONTEXT)
    assert outcome["ran"] == ["compact_manifests"]
