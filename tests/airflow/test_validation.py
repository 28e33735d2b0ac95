"""The example DAGs explain themselves and check their inputs first.

Every Param of every example DAG has a title and a description, every DAG a ``doc_md``; duration Params carry
a pattern that accepts exactly what ``parse_duration`` reads, so the trigger form refuses a bad duration.
Runs with real Airflow (``dag.test()``) show that bad input (a missing table, a bad duration from the
environment, an orphan age under the format's floor without the override) fails in the validation task,
once, with one message, and that no other task runs; good input passes and the run goes on, the override
reaching the orphan cleanup.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.units import DURATION_UNITS, parse_duration
from tests.airflow.helpers import append, make_table, set_connection, task_states

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "dags"
EXAMPLE_DAG_IDS = (  # every example DAG: each says it starts paused and how to unpause it
    "lakeformat_ingest",
    "lakeformat_downstream_asset",
    "lakeformat_downstream_sensor",
    "lakeformat_manual_maintenance",
    "lakeformat_maintenance",
    "lakeformat_iceberg_maintenance",
    "lakeformat_iceberg_ingest",
    "lakeformat_iceberg_downstream_asset",
    "lakeformat_iceberg_downstream_sensor",
    "lakeformat_auto_maintenance",
    "lakeformat_health_watch",
)


@pytest.fixture
def examples(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dags/`` as a bundle of its own, beside the session's dags folder (as in test_example_dags.py)."""
    bundles = [
        {
            "name": "dags-folder",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {},
        },
        {
            "name": "lakeformat-examples",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(EXAMPLE_DAGS)},
        },
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"lakeformat_example_{name}_{uuid.uuid4().hex}", EXAMPLE_DAGS / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def run_example(name: str, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Run a DAG with ``dag.test()``; the run and its task states: id -> (state, try number)."""
    run = load_example(name).test(**kwargs)
    return run, task_states(run)


def assert_stopped_at_validation(
    states: dict[str, Any], capsys: pytest.CaptureFixture[str], validation: str = "validate_inputs"
) -> str:
    """Only the validation task ran (failed on its first try, no retry), every other task upstream_failed;
    returns the one message it failed with, which the task log shows once, with no chained exception."""
    assert states.pop(validation) == ("failed", 1), states
    assert states and {state for state, _ in states.values()} == {"upstream_failed"}, states
    assert {tries for _, tries in states.values()} == {0}, states
    log = capsys.readouterr().out
    raised = re.findall(r"^(?:airflow\.\S+\.)?(\w+(?:Error|Exception)): (.*)$", log, re.MULTILINE)
    assert len(raised) == 1, raised
    [(kind, message)] = raised
    assert kind == "AirflowFailException", raised
    assert "During handling of the above exception" not in log
    assert "The above exception was the direct cause" not in log
    return str(message)


def orders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``db.orders`` with 3 appends under a warehouse ``lakeformat_default`` points at."""
    uri = str(tmp_path / "wh" / "db.db" / "orders")
    table = make_table(uri)
    for i in range(3):
        append(table, 10 + i)
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    return uri


def plant_orphan(uri: str, age_seconds: float) -> Path:
    path = Path(uri, "dt=2024-01-01", "bucket-0", f"data-{uuid.uuid4()}-0.parquet")
    path.write_bytes(b"not referenced by any snapshot")
    old = time.time() - age_seconds
    os.utime(path, (old, old))
    return path


# -- the trigger form ------------------------------------------------------------------------------


def test_every_param_has_a_title_and_a_description_and_every_dag_a_doc(
    airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    # The ingest and Asset DAGs read the connection when parsed.
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    bag = DagBag(dag_folder=str(EXAMPLE_DAGS))
    assert bag.import_errors == {}
    assert set(bag.dags) == set(EXAMPLE_DAG_IDS)
    assert {Path(dag.fileloc).name for dag in bag.dags.values()} == {
        p.name for p in EXAMPLE_DAGS.glob("*.py")
    }
    for dag_id, dag in bag.dags.items():
        doc = dag.doc_md or ""
        assert "Connection" in doc and "Environment" in doc, dag_id
        assert "starts paused" in doc.lower() and f"airflow dags unpause {dag_id}" in doc, dag_id
        for name in dag.params:
            param = dag.params.get_param(name)
            assert param.schema.get("title"), (dag_id, name)
            assert param.description and len(param.description) > 20, (dag_id, name)
    assert set(bag.dags["lakeformat_manual_maintenance"].params) == {
        "table",
        "dry_run",
        "execution",
        "min_file_count",
        "compaction_mode",
        "partition_expiration_time",
        "partition_time_format",
        "partition_time_template",
        "retain_min",
        "older_than",
        "orphan_older_than",
        "allow_short_orphan_older_than",
    }
    assert set(bag.dags["lakeformat_downstream_sensor"].params) == {"after_snapshot_id"}

    params = bag.dags["lakeformat_manual_maintenance"].params
    for name in ("older_than", "orphan_older_than"):
        assert params.get_param(name).schema["pattern"]
    for name, minimum in (("retain_min", 1), ("min_file_count", 2)):
        schema = params.get_param(name).schema
        assert "integer" in schema["type"] and schema["minimum"] == minimum, name
    # Empty retention falls back to the table's options, and the orphan floor and its override are named.
    for name in ("retain_min", "older_than"):
        assert "Empty (the default): the table's own option" in str(params.get_param(name).description)
    assert "at least 1 h for Paimon tables and 24 h for Iceberg" in str(
        params.get_param("orphan_older_than").description
    )
    assert params.get_param("allow_short_orphan_older_than").schema["type"] == "boolean"
    assert params["allow_short_orphan_older_than"] is False

    # The Iceberg DAG's durations carry the same pattern, and it has the same override.
    iceberg = bag.dags["lakeformat_iceberg_maintenance"].params
    from airflow_lakeformat.operators.validate import DURATION_PATTERN

    for name in ("older_than", "orphan_older_than"):
        assert iceberg.get_param(name).schema["pattern"] == DURATION_PATTERN, name
    assert iceberg.get_param("allow_short_orphan_older_than").schema["type"] == "boolean"
    assert iceberg["allow_short_orphan_older_than"] is False
    order = bag.dags["lakeformat_iceberg_maintenance"].topological_sort()
    assert [t.task_id for t in order][:3] == ["ensure_table", "validate_inputs", "append_batches"]


def test_the_duration_pattern_accepts_exactly_what_parse_duration_reads() -> None:
    from airflow_lakeformat.operators.validate import DURATION_PATTERN

    samples = ["soon", "1 week", "1.5 h", "-1 h", "h", "1 h 30 min", "1hh", "d1", "1 fortnight", "0x10 s"]
    for unit in DURATION_UNITS:
        samples += [f"5 {unit}", f"5{unit.upper()}", f" 12 {unit.capitalize()} "]
    samples += ["100", "0 ms", "7d"]
    for text in samples:
        try:
            parse_duration(text)
            parses = True
        except ValueError:
            parses = False
        assert (re.search(DURATION_PATTERN, text) is not None) is parses, text
    # Blank is allowed by the pattern: it means "not set" (the table's option), as for the operators.
    assert re.search(DURATION_PATTERN, "") and re.search(DURATION_PATTERN, "  ")


def test_the_trigger_form_refuses_a_bad_duration_and_a_zero_retention(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    uri = orders(tmp_path, monkeypatch)
    dag = load_example("lakeformat_manual_maintenance")
    for conf in ({"older_than": "soon"}, {"orphan_older_than": "2 weeks"}, {"retain_min": 0}):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf={"table": uri, **conf})


# -- bad input stops the run in the validation task ------------------------------------------------


def test_a_missing_table_fails_validation_and_nothing_else_runs(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(tmp_path, monkeypatch)
    run, states = run_example(
        "lakeformat_manual_maintenance", run_conf={"table": "db.ordrs", "dry_run": False}
    )
    assert run.state == "failed"
    message = assert_stopped_at_validation(states, capsys)
    missing = str(tmp_path / "wh" / "db.db" / "ordrs")
    assert message == (
        f"1 invalid input, nothing was run: table 'db.ordrs' does not exist at {missing} (the path does not "
        "exist); name it by its URI or as db.table under the warehouse of connection 'lakeformat_default'"
    )
    assert not Path(missing).exists()


def test_a_short_orphan_age_without_the_override_fails_validation(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = orders(tmp_path, monkeypatch)
    orphan = plant_orphan(uri, age_seconds=20 * 60)
    conf = {"table": uri, "dry_run": False, "orphan_older_than": "10 min"}
    run, states = run_example("lakeformat_manual_maintenance", run_conf=conf)
    assert run.state == "failed"
    message = assert_stopped_at_validation(states, capsys)
    assert "orphan_older_than '10 min' is under the 1 h floor for Paimon tables" in message
    assert "set allow_short_orphan_older_than" in message
    assert orphan.exists() and Table.open(uri).snapshot_manager.latest_snapshot_id() == 3


def test_every_problem_is_named_in_the_one_message(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    orders(tmp_path, monkeypatch)
    conf = {"table": "db.nope", "orphan_older_than": "5 min"}
    _, states = run_example("lakeformat_manual_maintenance", run_conf=conf)
    message = assert_stopped_at_validation(states, capsys)
    assert "2 invalid inputs, nothing was run: table 'db.nope' does not exist" in message
    assert "; orphan_older_than '5 min' is under the 1 h floor" in message


def test_a_bad_duration_from_the_environment_stops_scheduled_maintenance(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = orders(tmp_path, monkeypatch)
    orphan = plant_orphan(uri, age_seconds=3 * 86400)
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_TABLES", "db.orders")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_RETAIN_MIN", "1")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_OLDER_THAN", "1 msec")
    run, states = run_example("lakeformat_maintenance")
    assert run.state == "failed"
    message = assert_stopped_at_validation(states, capsys, validation="validate_settings")
    assert set(states) == {
        "maintain.expire_partitions[0]",
        "maintain.expire_snapshots[0]",
        "maintain.compact_manifests[0]",
        "maintain.remove_orphan_files[0]",
    }
    assert "older_than: unknown duration unit 'msec' in '1 msec'" in message
    table = Table.open(uri)
    assert table.snapshot_manager.earliest_snapshot_id() == 1 and orphan.exists()


def test_an_iceberg_table_has_the_24_hour_orphan_floor(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
    from airflow_lakeformat.core.iceberg.write import write
    from tests.iceberg.scenarios import SCHEMA, SPEC, rows

    warehouse = tmp_path / "wh"
    root = warehouse / "db.db" / "ice"  # where the connection places db.ice
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC)
    write.append(open_path_table(str(root)), rows([1], "a", datetime.date(2024, 1, 1)))
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    _, states = run_example(
        "lakeformat_manual_maintenance", run_conf={"table": "db.ice", "orphan_older_than": "2 h"}
    )
    message = assert_stopped_at_validation(states, capsys)
    assert "orphan_older_than '2 h' is under the 24 h floor for Iceberg tables" in message


def test_the_iceberg_dag_stops_a_short_orphan_age_in_validation_before_any_append(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.airflow.iceberg_helpers import append_batch, catalog_connection, catalog_table, plant_old_file

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog_connection(monkeypatch, warehouse)
    table = catalog_table(warehouse, "demo.events_iceberg")
    for rows in (2, 3):
        append_batch(table, rows)
    orphan = plant_old_file(table, days=2)  # older than the 2 h asked for: a run past validation deletes it
    before = [s.snapshot_id for s in table.metadata.snapshots]
    conf = {"batches": 2, "dry_run": False, "retain_min": 1, "older_than": "1 ms", "orphan_older_than": "2 h"}
    run, states = run_example("lakeformat_iceberg_maintenance", run_conf=conf)
    assert run.state == "failed"
    # ensure_table found the table and left it alone; validation failed; nothing after it ran.
    assert states.pop("ensure_table") == ("success", 1)
    message = assert_stopped_at_validation(states, capsys)
    assert set(states) == {
        "append_batches",
        "compact_data",
        "expire_snapshots",
        "compact_manifests",
        "remove_orphan_files",
    }
    assert message == (
        "1 invalid input, nothing was run: orphan_older_than '2 h' is under the 24 h floor for Iceberg tables: "
        "a younger file may belong to a commit still being written; give at least 24 h, or set "
        "allow_short_orphan_older_than if no writer runs"
    )
    table.refresh()
    assert [s.snapshot_id for s in table.metadata.snapshots] == before and os.path.exists(orphan)

    # The override lets the same age through validation and reaches the orphan cleanup.
    run, states = run_example(
        "lakeformat_iceberg_maintenance",
        run_conf={**conf, "batches": 0, "allow_short_orphan_older_than": True},
    )
    assert run.state == "success", states
    cleaned = run.get_task_instance("remove_orphan_files").xcom_pull(task_ids="remove_orphan_files")
    assert cleaned["files"] == {"data-file": 1} and not os.path.exists(orphan)


def test_a_table_of_the_connections_iceberg_catalog_is_found_and_checked(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": warehouse.as_uri(),
    }
    catalog = SqlCatalog("default", **properties)
    catalog.create_namespace("db")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    catalog.create_table("db.events", schema=rows.schema).append(rows)
    extra = {"iceberg_catalog_properties": properties}
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse), extra=extra)

    _, states = run_example(
        "lakeformat_manual_maintenance", run_conf={"table": "db.events", "orphan_older_than": "12 h"}
    )
    message = assert_stopped_at_validation(states, capsys)
    assert message.startswith(
        "1 invalid input, nothing was run: orphan_older_than '12 h' is under the 24 h floor for Iceberg"
    )

    _, states = run_example("lakeformat_manual_maintenance", run_conf={"table": "db.evnts"})
    message = assert_stopped_at_validation(states, capsys)
    assert message.startswith(
        "1 invalid input, nothing was run: table 'db.evnts' does not exist in the Iceberg catalog of "
        "connection 'lakeformat_default' ("
    )


# -- good input runs -------------------------------------------------------------------------------


def test_good_input_passes_validation_and_the_override_reaches_orphan_cleanup(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = orders(tmp_path, monkeypatch)
    orphan = plant_orphan(uri, age_seconds=20 * 60)
    conf = {
        "table": "db.orders",
        "dry_run": False,
        "retain_min": 1,
        "older_than": "1 ms",
        "orphan_older_than": "10 min",
        "allow_short_orphan_older_than": True,
        "execution": "local",
    }
    run, states = run_example("lakeformat_manual_maintenance", run_conf=conf)
    assert run.state == "success", states
    assert {task: state for task, (state, _) in states.items()} == {
        "validate_inputs": "success",
        "expire_partitions": "skipped",  # the table sets no partition.expiration-time
        "compact_data": "success",
        "expire_snapshots": "success",
        "compact_manifests": "success",
        "remove_orphan_files": "success",
    }
    checked = run.get_task_instance("validate_inputs").xcom_pull(task_ids="validate_inputs")
    assert checked == {
        "table": uri,
        "format": "paimon",
        "retainMin": 1,
        "olderThanMs": 1,
        "orphanOlderThanMs": 600_000,
        "allowShortOrphanOlderThan": True,
        "minFileCount": None,  # empty: the table's compaction.min.file-num (primary-key tables refuse one)
        "execution": "local",
    }
    cleaned = run.get_task_instance("remove_orphan_files").xcom_pull(task_ids="remove_orphan_files")
    assert cleaned["olderThanSeconds"] == 600 and cleaned["orphans"] == 1
    assert not orphan.exists()
    assert Table.open(uri).snapshot_manager.earliest_snapshot_id() == 3  # retain_min=1 reached expiry


# -- the checks themselves, on the strings templates render ----------------------------------------


def test_rendered_empty_values_mean_not_set_and_every_bad_value_is_named() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_lakeformat.operators.validate import validate_maintenance_inputs

    unset = validate_maintenance_inputs(
        None,
        retain_min="None",
        older_than="None",
        orphan_older_than="",
        allow_short_orphan_older_than="False",
        min_file_count="None",
        execution="None",
    )
    assert set(unset.values()) == {None, False}
    read = validate_maintenance_inputs(
        None,
        retain_min="3",
        older_than="2 H",
        orphan_older_than="1 d",
        min_file_count=" 7 ",
        execution="spark",
    )
    assert (read["retainMin"], read["olderThanMs"], read["orphanOlderThanMs"], read["minFileCount"]) == (
        3,
        7_200_000,
        86_400_000,
        7,
    )
    with pytest.raises(AirflowFailException) as failed:
        validate_maintenance_inputs(
            None,
            retain_min="0",
            older_than="soon",
            orphan_older_than="59 min",
            allow_short_orphan_older_than="maybe",
            min_file_count="1.5",
            execution="cloud",
        )
    message = str(failed.value)
    assert message.startswith("6 invalid inputs, nothing was run: retain_min must be at least 1, not 0; ")
    for part in (
        "older_than: not a duration: 'soon'",
        "allow_short_orphan_older_than must be true or false, not 'maybe'",
        "min_file_count must be a whole number, not '1.5'",
        "execution must be one of auto, local, spark, not 'cloud'",
        "orphan_older_than '59 min' is under the 1 h floor for Paimon tables",
    ):
        assert part in message, part
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
