"""OpenLineage from the Lakeformat operators, checked with the OpenLineage provider's and client's own code.

* Real DAG runs of every operator (``dags/lakeformat_test_openlineage.py``) on a Paimon table. In this
  process their XCom results go through the provider's ``ExtractorManager`` (which calls the operator's
  ``get_openlineage_facets_on_complete``); in a separate Airflow process with OpenLineage enabled, the
  provider's listener emits the events itself through the client's file transport, and we read them back.
* Iceberg results from the core (SQLite catalog, real expiry, orphan cleanup, manifest compaction) through
  the same method.
* Dataset names against the client's naming classes and the provider's translation of the table Asset.
* Every event and facet is serialized with the client's ``Serde``; the custom facet is validated against
  the JSON Schema that ships with the package.
* Without the OpenLineage packages the operators still import.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.operators.lineage import dataset_name, maintenance_fields, output_statistics
from tests.airflow.helpers import TEST_DAGS, append, load_dag_module, make_table, task_states, xcom_result

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "lakeformat_test_openlineage"
TASKS = ("write", "stage", "commit", "compact_data", "compact_manifests", "expire", "remove_orphans")
MAINTENANCE = {
    "compact_data": "compact-data",
    "compact_manifests": "compact-manifests",
    "expire": "expire-snapshots",
    "remove_orphans": "remove-orphan-files",
}
# The OpenLineage spec's base facet definitions (2-0-2) that the custom facet's schema references.
OPENLINEAGE_SPEC = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://openlineage.io/spec/2-0-2/OpenLineage.json",
    "$defs": {
        "BaseFacet": {
            "type": "object",
            "properties": {
                "_producer": {"type": "string", "format": "uri"},
                "_schemaURL": {"type": "string", "format": "uri"},
            },
            "additionalProperties": True,
            "required": ["_producer", "_schemaURL"],
        },
        "DatasetFacet": {
            "type": "object",
            "allOf": [
                {"$ref": "#/$defs/BaseFacet"},
                {"type": "object", "properties": {"_deleted": {"type": "boolean"}}},
            ],
        },
    },
}


# -- helpers ---------------------------------------------------------------------------------------


def build_table(root: Path, landing: Path) -> tuple[Path, Path]:
    """Two small appends (3 and 4 rows), a 5-row Parquet source, and a two-day-old orphan file."""
    table = make_table(str(root))
    append(table, 3)
    append(table, 4)
    landing.mkdir(parents=True, exist_ok=True)
    source = landing / "batch.parquet"
    pq.write_table(pa.table({"dt": ["2024-01-01"] * 5, "v": pa.array(range(5), pa.int64())}), source)
    orphan = root / "dt=2024-01-01" / "bucket-0" / "data-orphan-0.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    old = time.time() - 2 * 86400
    os.utime(orphan, (old, old))
    return source, orphan


def facet_validator() -> Any:
    import jsonschema
    from referencing import Registry, Resource

    from airflow_lakeformat.operators.lineage_facets import SCHEMA_ID, maintenance_facet_schema

    schema = maintenance_facet_schema()
    assert schema["$id"] == SCHEMA_ID
    registry = Registry().with_resources(
        [
            (OPENLINEAGE_SPEC["$id"], Resource.from_contents(OPENLINEAGE_SPEC)),
            (SCHEMA_ID, Resource.from_contents(schema)),
        ]
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        {"$ref": SCHEMA_ID}, registry=registry, format_checker=jsonschema.FormatChecker()
    )


def check_maintenance_facet(facets: dict[str, Any]) -> dict[str, Any]:
    """The serialized ``lakeformatMaintenance`` facet, after validating it against the shipped schema."""
    from airflow_lakeformat.operators.lineage_facets import SCHEMA_URL

    facet = facets["lakeformatMaintenance"]
    assert facet["_schemaURL"] == SCHEMA_URL
    facet_validator().validate({"lakeformatMaintenance": facet})
    return dict(facet)


def run_event(lineage: Any, job_name: str) -> dict[str, Any]:
    """A COMPLETE RunEvent of the client around the extracted lineage, serialized by the client's Serde."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.serde import Serde
    from openlineage.client.uuid import generate_new_uuid

    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=dt.datetime.now(dt.timezone.utc).isoformat(),
        run=Run(runId=str(generate_new_uuid())),
        job=Job(namespace="lakeformat-test", name=job_name),
        inputs=lineage.inputs,
        outputs=lineage.outputs,
    )
    return dict(json.loads(Serde.to_json(event)))


def extract(run: Any, dag: Any, task_id: str, result: dict[str, Any], inputs: list[str] | None) -> Any:
    """What the provider's ExtractorManager gets from the operator once execute() recorded ``result``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    operator = dag.get_task(task_id)
    assert callable(getattr(operator, "get_openlineage_facets_on_complete", None))
    # What execute() records (the run itself happened on Airflow's copy of the operator).
    operator._lineage_result = result
    operator._lineage_table_uri = result["table"]
    operator._lineage_inputs = inputs
    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(
                TaskInstance.dag_id == run.dag_id,
                TaskInstance.run_id == run.run_id,
                TaskInstance.task_id == task_id,
            )
        ).one()
        return ExtractorManager().extract_metadata(run, operator, TaskInstanceState.SUCCESS, ti)


def names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


# -- naming ----------------------------------------------------------------------------------------


def test_dataset_names_follow_the_openlineage_naming_spec(tmp_path: Path) -> None:
    from airflow.providers.common.compat.openlineage.utils.utils import translate_airflow_asset
    from openlineage.client.naming.dataset import GCS, HDFS, S3, LocalFileSystem

    from airflow_lakeformat.hooks.lakeformat import table_asset

    def spec(naming: Any) -> tuple[str, str]:
        return naming.get_namespace(), naming.get_name()

    cases = {
        "/data/wh/db.db/events": LocalFileSystem("/data/wh/db.db/events"),
        "/data/wh/db.db/events/": LocalFileSystem("/data/wh/db.db/events"),
        "file:///data/wh/db.db/events": LocalFileSystem("/data/wh/db.db/events"),
        "s3://lake/wh/db.db/events": S3("lake", "wh/db.db/events"),
        "s3a://lake/wh/db.db/events/": S3("lake", "wh/db.db/events"),
        "s3://lake/landing/batch%201.parquet": S3("lake", "landing/batch 1.parquet"),
        "gs://lake/wh/t": GCS("lake", "wh/t"),
        "hdfs://nn:8020/wh/t": HDFS("nn", "8020", "/wh/t"),
    }
    for uri, naming in cases.items():
        assert dataset_name(uri) == spec(naming), uri
    assert dataset_name("relative/t") == ("file", str(Path.cwd() / "relative" / "t"))
    # The table's Airflow Asset, translated by the provider, names the same dataset.
    root = tmp_path / "wh" / "db.db" / "events"
    translated = translate_airflow_asset(table_asset(str(root)), None)
    assert translated is not None and (translated.namespace, translated.name) == dataset_name(str(root))


def test_result_fields_are_read_under_old_and_new_names() -> None:
    base = {"operation": "write", "format": "paimon", "dryRun": False}
    assert output_statistics({**base, "rowsWritten": 5, "bytesWritten": 900, "filesWritten": 1}) == {
        "rowCount": 5,
        "size": 900,
        "fileCount": 1,
    }
    assert output_statistics({**base, "rowsAdded": 5}) == {"rowCount": 5}  # the CLI's Iceberg write
    assert output_statistics({**base, "recordCount": 4, "bytes": 10}) == {"rowCount": 4, "size": 10}
    assert output_statistics({**base, "dryRun": True, "rowsWritten": 5}) is None
    commit = {**base, "operation": "commit", "filesAdded": 2, "deltaRecordCount": 6}
    assert output_statistics(commit) == {"rowCount": 6, "fileCount": 2}
    # An overwrite's delta is net of the rows it replaced: not a count of rows written.
    assert output_statistics({**commit, "filesDeleted": 1}) == {"fileCount": 2}
    expiry = {"operation": "expire_snapshots", "dryRun": "true", "snapshotsExpired": 3}
    fields = maintenance_fields(
        {**expiry, "filesDeleted": {"data-file": 2}, "bytesDeleted": {"data-file": 9}}
    )
    assert fields is not None
    assert (fields["operation"], fields["dryRun"]) == ("expire-snapshots", True)
    assert fields["snapshotsExpired"] == 3
    assert (fields["filesDeleted"], fields["bytesDeleted"]) == ({"data-file": 2}, {"data-file": 9})
    assert maintenance_fields(base) is None and maintenance_fields(None) is None


# -- Paimon, in this process through the ExtractorManager --------------------------------------------


def test_every_operator_in_a_dry_run_through_the_extractor_manager(warehouse: Path, tmp_path: Path) -> None:
    root = warehouse / "db.db" / "events"
    source, orphan = build_table(root, tmp_path / "landing")
    module = load_dag_module("lakeformat_test_openlineage")
    run = module.lineage_dag.test(run_conf={"table": "db.events", "source": str(source), "dry_run": True})
    assert task_states(run) == {task_id: ("success", 1) for task_id in TASKS}
    results = {task_id: xcom_result(run, task_id) for task_id in TASKS if task_id != "stage"}
    table = ("file", str(root))

    events = {}
    for task_id, result in results.items():
        inputs = [str(source)] if task_id == "write" else None
        lineage = extract(run, module.lineage_dag, task_id, result, inputs)
        events[task_id] = run_event(lineage, f"{DAG_ID}.{task_id}")
        outputs = events[task_id]["outputs"]
        assert names(outputs) == [table], task_id
        assert outputs[0]["facets"]["storage"]["storageLayer"] == "paimon"

    write = events["write"]
    assert names(write["inputs"]) == [("file", str(source))]
    stats = write["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 5 == results["write"]["rowsWritten"]
    assert stats["size"] == results["write"]["bytesWritten"] > 0
    assert stats["fileCount"] == results["write"]["filesWritten"] == 1
    assert "lakeformatMaintenance" not in write["outputs"][0]["facets"]

    commit = events["commit"]
    assert commit["inputs"] == []
    stats = commit["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["fileCount"]) == (2, 1)

    for task_id, operation in MAINTENANCE.items():
        event = events[task_id]
        assert names(event["inputs"]) == [table], "maintenance reads the table it rewrites"
        assert not event["outputs"][0].get("outputFacets"), "a dry run writes nothing"
        facet = check_maintenance_facet(event["outputs"][0]["facets"])
        assert (facet["operation"], facet["format"], facet["dryRun"]) == (operation, "paimon", True)
        assert (facet["table"], facet["execution"]) == (str(root), "local")

    compact = check_maintenance_facet(events["compact_data"]["outputs"][0]["facets"])
    # 4 files: the two appends, the write and the commit
    assert compact["filesRewritten"] == results["compact_data"]["filesRewritten"] == 4
    assert compact["rowsRewritten"] == 3 + 4 + 5 + 2
    manifests = check_maintenance_facet(events["compact_manifests"]["outputs"][0]["facets"])
    assert (manifests["manifestsBefore"], manifests["manifestsAfter"]) == (4, 1)
    expire = check_maintenance_facet(events["expire"]["outputs"][0]["facets"])
    assert expire["snapshotsExpired"] == len(results["expire"]["snapshotsExpired"]) == 3
    assert expire["filesDeleted"] == results["expire"]["files"] and sum(expire["filesDeleted"].values()) > 0
    assert expire["bytesDeleted"] == results["expire"]["bytes"]
    orphans = check_maintenance_facet(events["remove_orphans"]["outputs"][0]["facets"])
    assert orphans["orphans"] == 1 and orphans["filesDeleted"] == results["remove_orphans"]["files"]
    assert orphan.exists(), "a dry run deletes nothing"


def test_no_recorded_table_gives_no_table_dataset() -> None:
    from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator

    operator = load_dag_module("lakeformat_test_openlineage").with_lineage(LakeformatExpireSnapshotsOperator)(
        task_id="expire", table="db.events"
    )
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert (lineage.inputs, lineage.outputs) == ([], [])
    # A catalog table's result names it "db.t": without its location there is nothing to name it by.
    operator._lineage_result = {"operation": "expire-snapshots", "format": "iceberg", "table": "db.t"}
    assert operator.get_openlineage_facets_on_complete(None).outputs == []


# -- Paimon, end to end: the provider's listener emits the events -----------------------------------

DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
from airflow.utils import db
db.resetdb()
from tests.airflow.run_dag_process import main
main(sys.argv[2:])
"""


def emitting_env(home: Path, warehouse: Path, events: Path) -> dict[str, str]:
    """A private Airflow installation with OpenLineage on: the client's file transport, one event a line."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "OPENLINEAGE"))
    }
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS),
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW_CONN_LAKEFORMAT_DEFAULT": json.dumps(
                {"conn_type": "lakeformat", "host": str(warehouse)}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "lakeformat-test",
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(events), "append": True}
            ),
            # Emit from a thread of the task process instead of a forked child.
            "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        }
    )
    return env


@pytest.mark.slow
def test_the_listener_emits_every_operators_lineage(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    root = warehouse / "db.db" / "events"
    source, orphan = build_table(root, tmp_path / "landing")
    home = tmp_path / "home"
    home.mkdir()
    events_file = tmp_path / "events.jsonl"
    conf = {"table": "db.events", "source": str(source), "dry_run": False}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(REPO), "lakeformat_test_openlineage", "lineage", json.dumps(conf)],
        env=emitting_env(home, warehouse, events_file),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("LAKEFORMAT_TEST_RUN ")]
    assert done.returncode == 0 and len(lines) == 1, (done.stdout + done.stderr)[-5000:]
    report = json.loads(lines[0][len("LAKEFORMAT_TEST_RUN ") :])
    assert report["tasks"] == {task_id: ["success", 1] for task_id in TASKS}, report
    results = report["xcoms"]

    # The events as the client's transport wrote them, one JSON document a line.
    emitted = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    complete = {
        e["job"]["name"].removeprefix(f"{DAG_ID}."): e
        for e in emitted
        if e.get("eventType") == "COMPLETE" and e["job"]["name"].startswith(f"{DAG_ID}.")
    }
    assert set(TASKS) <= set(complete), sorted(complete)
    table = ("file", str(root))
    for task_id in TASKS:
        assert complete[task_id]["job"]["namespace"] == "lakeformat-test"
        if task_id == "stage":
            continue
        outputs = complete[task_id]["outputs"]
        assert names(outputs) == [table], task_id
        assert outputs[0]["facets"]["storage"]["storageLayer"] == "paimon"

    write = complete["write"]
    assert names(write["inputs"]) == [("file", str(source))]
    stats = write["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["size"], stats["fileCount"]) == (
        5, results["write"]["bytesWritten"], 1,
    )  # fmt: skip
    stats = complete["commit"]["outputs"][0]["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["fileCount"]) == (2, 1)

    for task_id, operation in MAINTENANCE.items():
        event = complete[task_id]
        assert names(event["inputs"]) == [table]
        facet = check_maintenance_facet(event["outputs"][0]["facets"])
        assert (facet["operation"], facet["format"], facet["dryRun"]) == (operation, "paimon", False)
        assert facet.get("snapshotId") == results[task_id].get("snapshotId")

    # Data compaction wrote one file of all 14 rows; its statistics are the result's.
    compact = complete["compact_data"]["outputs"][0]
    stats = compact["outputFacets"]["outputStatistics"]
    assert (stats["rowCount"], stats["fileCount"]) == (3 + 4 + 5 + 2, 1)
    assert stats["size"] == results["compact_data"]["bytesWritten"] > 0
    facet = check_maintenance_facet(compact["facets"])
    assert (facet["filesRewritten"], facet["filesWritten"]) == (4, 1)
    facet = check_maintenance_facet(complete["compact_manifests"]["outputs"][0]["facets"])
    assert facet["manifestsAfter"] == 1 < facet["manifestsBefore"]
    assert "outputStatistics" not in complete["compact_manifests"]["outputs"][0].get("outputFacets", {})
    # Expiry kept only the latest of snapshots 1-6 and deleted what only the others used.
    facet = check_maintenance_facet(complete["expire"]["outputs"][0]["facets"])
    assert facet["snapshotsExpired"] == 5 == len(results["expire"]["snapshotsExpired"])
    assert facet["filesDeleted"] == results["expire"]["files"] and facet["filesDeleted"]["data-file"] == 4
    assert facet["bytesFreed"] == results["expire"]["bytesFreed"] > 0
    assert facet.get("deleteFailures", 0) == 0
    facet = check_maintenance_facet(complete["remove_orphans"]["outputs"][0]["facets"])
    assert (facet["orphans"], facet["filesDeleted"]) == (1, results["remove_orphans"]["files"])
    assert not orphan.exists()


# -- Iceberg: the core's results through the same method ---------------------------------------------


def test_iceberg_maintenance_lineage_names_the_table_by_its_location(tmp_path: Path) -> None:
    from airflow_lakeformat.core.tables import IcebergLakeTable
    from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
    from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
    from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
    from tests.iceberg.helpers import local_path
    from tests.iceberg.scenarios import build

    scenario = build("sql", 2, tmp_path)  # a table db.t in a SQLite catalog
    location, name = scenario.table.uri, scenario.table.name
    assert "://" not in name and not name.startswith("/"), "results name a catalog table, not its location"
    table = IcebergLakeTable(scenario.table)
    orphan = Path(local_path(location)) / "data" / "orphan-0.parquet"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"no snapshot reaches this file")
    old = time.time() - 5 * 86400
    os.utime(orphan, (old, old))

    with_lineage = load_dag_module("lakeformat_test_openlineage").with_lineage
    runs = [
        (LakeformatCompactManifestsOperator, table.maintenance.compact_manifests("full", dry_run=False)),
        (
            LakeformatExpireSnapshotsOperator,
            table.maintenance.expire_snapshots(dry_run=False, older_than=dt.timedelta(0), retain_last=1),
        ),
        (LakeformatRemoveOrphanFilesOperator, table.maintenance.remove_orphan_files(dry_run=False)),
    ]
    facets = {}
    for cls, outcome in runs:
        result = {**outcome.to_json(), "execution": "local"}
        assert (result["format"], result["table"]) == ("iceberg", name)
        operator = with_lineage(cls)(task_id="maintain", table="db.t")
        operator._lineage_result, operator._lineage_table_uri = result, location
        event = run_event(operator.get_openlineage_facets_on_complete(None), f"{DAG_ID}.maintain")
        assert names(event["inputs"]) == names(event["outputs"]) == [("file", local_path(location))]
        assert event["outputs"][0]["facets"]["storage"]["storageLayer"] == "iceberg"
        facet = check_maintenance_facet(event["outputs"][0]["facets"])
        assert (facet["format"], facet["table"], facet["dryRun"]) == ("iceberg", name, False)
        facets[facet["operation"]] = (facet, result)

    facet, result = facets["compact-manifests"]
    assert facet["manifestsRewritten"] == result["manifestsRewritten"] > 0
    assert (facet["manifestsBefore"], facet["manifestsAfter"]) == (
        result["manifestsBefore"], result["manifestsAfter"],
    )  # fmt: skip
    assert facet["snapshotId"] == result["snapshotId"] is not None
    facet, result = facets["expire-snapshots"]
    assert facet["snapshotsExpired"] == len(result["snapshotsExpired"]) > 0
    assert facet["refsRemoved"] == sorted(result["refsRemoved"])
    assert facet["filesDeleted"] == result["files"] and sum(facet["filesDeleted"].values()) > 0
    assert facet["bytesFreed"] == result["bytesFreed"] > 0
    facet, result = facets["remove-orphan-files"]
    assert (facet["orphans"], sum(facet["filesDeleted"].values())) == (1, 1)
    assert not orphan.exists()


# -- without OpenLineage ---------------------------------------------------------------------------

# As if the OpenLineage packages were not installed: neither their modules nor their distributions (so
# neither Airflow's provider discovery nor its plugin manager finds their entry points).
WITHOUT_OPENLINEAGE = """
import importlib.abc, importlib.metadata, sys

def hidden(name):
    name = (name or "").lower().replace("_", "-")
    return name.startswith("openlineage") or name == "apache-airflow-providers-openlineage"

class NoOpenLineage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "openlineage" or name.startswith("airflow.providers.openlineage"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOpenLineage())
import importlib_metadata  # Airflow reads entry points through the backport

for module in (importlib.metadata, importlib_metadata):
    module.distributions = lambda every=module.distributions, **kw: (
        d for d in every(**kw) if not hidden(d.metadata["Name"])
    )
    assert not any(hidden(d.metadata["Name"]) for d in module.distributions())
from airflow_lakeformat.operators.commit import LakeformatCommitOperator
from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.lineage import LakeformatLineageMixin, output_statistics
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.write import LakeformatWriteOperator

class Write(LakeformatWriteOperator, LakeformatLineageMixin):
    pass

operator = Write(task_id="w", table="/wh/db.db/t", source="/landing/batch.parquet")
assert output_statistics({"operation": "write", "rowsWritten": 1}) == {"rowCount": 1}
try:
    operator.get_openlineage_facets_on_complete(None)
except ModuleNotFoundError as exc:
    print("NEEDS", exc.name)
print("LOADED", sorted(m for m in sys.modules if "openlineage" in m))
"""


def test_the_operators_import_and_run_without_openlineage() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENLINEAGE], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # Only asking for lineage needs the provider; importing and building the operators does not.
    needs = [line for line in lines if line.startswith("NEEDS ")]
    assert needs == ["NEEDS airflow.providers.openlineage"], done.stdout[-3000:]
    assert "LOADED []" in lines
