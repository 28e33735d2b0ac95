"""The health waiting rule, LakeformatHealthTrigger (deferred sensor and AssetWatcher) and LakeformatHealthSensor.

The tables are tiny (a few rows per file), so every data file is a small one: each ``append`` adds one small
file. Writes the trigger must see are made while it polls, once it has polled at least twice, so no assertion
depends on timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast, get_args

import pytest

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.health.model import Operation
from airflow_lakeformat.core.tables import open_table
from airflow_lakeformat.triggers.health import LakeformatHealthTrigger, health_asset_uri
from airflow_lakeformat.triggers.health_watch import METRICS, OPERATIONS, HealthRule
from tests.airflow.helpers import (
    append,
    load_dag_module,
    make_table,
    task_states,
    when,
    xcom_result,
)

pytestmark = [pytest.mark.airflow, pytest.mark.usefixtures("airflow_db")]

REPO = Path(__file__).resolve().parents[2]


# -- the rule ----------------------------------------------------------------------------------------------


def test_rule_crosses_when_the_small_files_reach_the_threshold(tmp_path: Path) -> None:
    uri = str(tmp_path / "db.db" / "events")
    writer = make_table(uri)
    table = open_table(uri)
    rule = HealthRule({"files.smallFiles": 3, "operations": "compact_data", "deleteRecords": 1})
    assert rule.poll(table) is None  # no snapshot yet
    append(writer, 2)
    append(writer, 2)
    assert rule.poll(table) is None  # 2 small files
    append(writer, 2)
    match = rule.poll(table)
    assert match is not None
    assert match.crossed == [
        {
            "condition": "files.smallFiles",
            "metric": "files.smallFiles",
            "comparison": ">=",
            "threshold": 3,
            "value": 3,
        }
    ]
    assert (match.table, match.format, match.snapshot_id, match.operations) == (uri, "paimon", 3, [])
    append(writer, 2)
    append(writer, 2)  # 5 small files in one partition: health recommends compact_data
    match = rule.poll(table)
    assert match is not None and match.operations == ["compact_data"]
    assert [(c["condition"], c["value"]) for c in match.crossed] == [
        ("files.smallFiles", 5),
        ("operations", ["compact_data"]),
    ]
    assert "5 small" in match.summary
    document = match.to_json()
    assert document["health"]["files"]["smallFiles"] == 5 and document["health"]["score"] == match.score < 100
    assert "partitions" not in document["health"] and "times" not in document["health"]["snapshots"]
    assert json.loads(json.dumps(document)) == document

    assert HealthRule({"smallFiles": 5, "score_below": 100}, require="all").poll(table) is not None
    assert HealthRule({"smallFiles": 6, "score_below": 100}, require="all").poll(table) is None
    assert HealthRule({"smallFiles": {"below": 5}}).poll(table) is None
    assert (
        HealthRule({"deletes.maxSortedRuns": 0}).poll(table) is None
    )  # null for an append table: never crosses


def test_rule_reloads_an_iceberg_table_between_polls(tmp_path: Path) -> None:
    from tests.airflow.iceberg_helpers import append_batch, path_table

    root = str(tmp_path / "iceberg_events")
    writer = path_table(root)
    table = open_table(root)
    rule = HealthRule({"smallFiles": 2})
    assert rule.poll(table) is None
    append_batch(writer, 2)
    append_batch(writer, 2)  # committed through another handle: the rule must reload the metadata
    match = rule.poll(table)
    assert match is not None and match.format == "iceberg" and match.crossed[0]["value"] == 2


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ({"smallfiles": 1}, "unknown health condition 'smallfiles'"),
        ({"count": 1}, "'count' is ambiguous: spell out one of snapshots.count, manifests.count"),
        ({"files.smallFiles": "500"}, "'files.smallFiles': the threshold must be a number"),
        ({"score_below": True}, "'score_below': the threshold must be a number"),
        ({"operations": ["compact"]}, "unknown operation(s) ['compact']"),
        ({"score": {"over": 1}}, "health condition 'score': give a number"),
        ({}, "health conditions must be a non-empty mapping"),
    ],
)
def test_bad_conditions_are_refused_naming_the_key(conditions: dict[str, Any], message: str) -> None:
    from airflow_lakeformat.sensors.health import LakeformatHealthSensor

    for build in (
        lambda: HealthRule(conditions),
        lambda: LakeformatHealthTrigger("db.events", conditions),
        lambda: LakeformatHealthSensor(task_id="wait", table="db.events", conditions=conditions),
    ):
        with pytest.raises(UsageError) as refused:
            build()
        assert message in str(refused.value)
    with pytest.raises(UsageError, match="require='most'"):
        HealthRule({"smallFiles": 1}, require="most")


def test_operations_and_metrics_are_the_health_documents(tmp_path: Path) -> None:
    assert get_args(Operation) == OPERATIONS
    writer = make_table(str(tmp_path / "t"))
    append(writer, 1)
    document = open_table(str(tmp_path / "t")).health().to_json()
    for path in METRICS:
        node: Any = document
        *sections, leaf = path.split(".")
        for section in sections:
            node = document[section] if section != "orphans" else {"files": 0, "bytes": 0}
        assert leaf in node, path


# -- the trigger -------------------------------------------------------------------------------------------


class FakeStateStore:
    """The Asset state store the triggerer gives a watcher (``aget``/``aset``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = value


def test_trigger_serializes_without_secrets_and_round_trips() -> None:
    from airflow.sdk._shared.module_loading import import_string

    trigger = LakeformatHealthTrigger(
        "db.events", {"smallFiles": 500, "operations": ["compact_data"]}, "prod_lake", poll_interval=60
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_lakeformat.triggers.health.LakeformatHealthTrigger"
    assert kwargs == {
        "table": "db.events",
        "conditions": {"smallFiles": 500, "operations": ["compact_data"]},
        "lakeformat_conn_id": "prod_lake",
        "require": "any",
        "poll_interval": 60.0,
        "table_format": None,
        "fire_once": False,
        "refire_after": None,
    }
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)


def test_a_policy_travels_with_the_trigger_and_decides_what_an_operations_condition_sees(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy that allows no compaction: the watch for a compact_data recommendation never matches, with
    the same table that matches without it; the policy is serialized with the trigger (no file, no Variable
    read in the triggerer) and checked when the trigger is built."""
    from airflow.sdk._shared.module_loading import import_string

    from airflow_lakeformat.core.errors import PolicyError
    from airflow_lakeformat.sensors.health import LakeformatHealthSensor

    writer = make_table(str(warehouse / "db.db" / "events"))
    for _ in range(5):
        append(writer, 1)
    no_compaction = {"tables": {"db.events": {"operations": ["expire_snapshots"]}}}
    trigger = LakeformatHealthTrigger(
        "db.events",
        {"operations": "compact_data"},
        fire_once=True,
        policy=no_compaction,
        policy_source="p.yaml",
    )
    classpath, kwargs = trigger.serialize()
    assert (kwargs["policy"], kwargs["policy_source"]) == (no_compaction, "p.yaml")
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)
    table = open_table(str(warehouse / "db.db" / "events"))
    assert trigger.rule.poll(table) is None
    assert HealthRule({"operations": "compact_data"}).poll(table) is not None
    with pytest.raises(PolicyError, match="min-smal-files"):
        LakeformatHealthTrigger(
            "db.events", {"smallFiles": 1}, policy={"defaults": {"thresholds": {"min-smal-files": 3}}}
        )

    # The sensor reads a policy from a Variable in the worker and hands its document to the trigger.
    monkeypatch.setenv("AIRFLOW_VAR_HEALTH_POLICY", json.dumps(no_compaction))
    sensor = LakeformatHealthSensor(
        task_id="wait",
        table="db.events",
        conditions={"operations": ["compact_data"]},
        policy_variable="health_policy",
        deferrable=True,
        check_before_defer=False,
    )
    assert sensor._check() is None
    assert sensor.rule.policy is not None and sensor.rule.policy.source == "Airflow Variable health_policy"
    deferred: dict[str, Any] = {}
    monkeypatch.setattr(sensor, "defer", lambda **kw: deferred.update(kw))
    sensor.execute({})
    assert deferred["trigger"].serialize()[1]["policy"] == no_compaction
    plain = LakeformatHealthSensor(
        task_id="wait", table="db.events", conditions={"operations": ["compact_data"]}
    )
    assert plain._check() is not None
    assert "policy" not in LakeformatHealthTrigger("db.events", {"smallFiles": 1}).serialize()[1]


class CountingRule(HealthRule):
    """The trigger's rule, counting its health computations."""

    polls = 0

    def poll(self, table: Any) -> Any:
        try:
            return super().poll(table)
        finally:
            self.polls += 1


async def until(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the condition never held")
        await asyncio.sleep(0.02)


def test_watcher_fires_once_per_crossing_and_remembers_it_across_restarts(warehouse: Path) -> None:
    uri = str(warehouse / "db.db" / "events")
    writer = make_table(uri)
    append(writer, 1)
    store = FakeStateStore()

    def watcher() -> tuple[CountingRule, list[dict[str, Any]], asyncio.Task[None]]:
        trigger = LakeformatHealthTrigger("db.events", {"smallFiles": 3}, poll_interval=0.02)
        cast(Any, trigger).asset_state_store = store
        trigger.rule = rule = CountingRule(trigger.conditions)
        events: list[dict[str, Any]] = []

        async def consume() -> None:
            async for event in trigger.run():
                events.append(dict(event.payload))

        return rule, events, asyncio.get_running_loop().create_task(consume())

    async def scenario() -> None:
        rule, events, task = watcher()
        await until(lambda: rule.polls >= 2)
        assert events == []
        await asyncio.to_thread(lambda: [append(writer, 1) for _ in range(2)])  # 3 small files: crosses
        await until(lambda: len(events) == 1)
        (event,) = events
        assert event["status"] == "success"
        assert [(c["metric"], c["value"]) for c in event["match"]["crossed"]] == [("files.smallFiles", 3)]
        assert event["match"]["table"] == uri and event["match"]["health"]["files"]["smallFiles"] == 3
        assert store.values["lakeformatHealthWatch"]["armed"] is False
        seen = rule.polls
        await until(lambda: rule.polls >= seen + 5)
        assert len(events) == 1, "still over the threshold: no second event"
        task.cancel()

        # A restarted triggerer: the state store says this crossing was reported.
        rule, events, task = watcher()
        await until(lambda: rule.polls >= 5)
        assert events == []
        compacted = await asyncio.to_thread(open_table(uri).maintenance.compact_data, min_file_count=2)
        assert compacted.to_json()["filesRewritten"] == 3
        await until(lambda: store.values["lakeformatHealthWatch"]["armed"] is True)  # 1 file: back under
        await asyncio.to_thread(lambda: [append(writer, 1) for _ in range(2)])  # 3 again
        await until(lambda: len(events) == 1)
        assert events[0]["match"]["snapshotId"] == writer.snapshot_manager.latest_snapshot_id()
        task.cancel()

    asyncio.run(asyncio.wait_for(scenario(), timeout=120))


def first_event(trigger: LakeformatHealthTrigger) -> dict[str, Any]:
    async def collect() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(collect(), timeout=60))


def test_sensor_trigger_fires_once_or_reports_the_error(warehouse: Path) -> None:
    writer = make_table(str(warehouse / "db.db" / "events"))
    append(writer, 1)
    success = first_event(LakeformatHealthTrigger("db.events", {"score_below": 101}, fire_once=True))
    assert success["status"] == "success" and success["match"]["crossed"][0]["value"] == 100
    missing = first_event(LakeformatHealthTrigger("db.other", {"smallFiles": 1}, fire_once=True))
    assert missing == {
        "status": "error",
        "table": "db.other",
        "message": f"{warehouse}/db.db/other: no Paimon or Iceberg table here (the path does not exist)",
    }


# -- the sensor --------------------------------------------------------------------------------------------


def test_deferrable_sensor_resumes_when_the_table_crosses(
    warehouse: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(warehouse / "db.db" / "events")
    writer = make_table(uri)
    append(writer, 1)
    append(writer, 1)
    module = load_dag_module("lakeformat_test_health")
    # The third file is written once the trigger has polled twice (the sensor does not look before deferring).
    # Not on the task's "deferred" state: dag.test() sets it and then QUEUED at once before running the trigger
    # in line, so a reader of the database may never see it, and the trigger then waited forever (the hung
    # CI run of stop 34).
    polls: list[int] = []
    poll = HealthRule.poll

    def counted(rule: HealthRule, table: Any) -> Any:
        try:
            return poll(rule, table)
        finally:
            polls.append(1)

    monkeypatch.setattr(HealthRule, "poll", counted)
    with when(lambda: len(polls) >= 2, lambda: append(writer, 1)):
        run = module.deferrable_dag.test(run_conf={"table": "db.events"})
    assert task_states(run)["wait"] == ("success", 1)
    assert any("[DAG TEST] running trigger in line" in r.getMessage() for r in caplog.records), "it deferred"
    match = xcom_result(run, "wait")
    assert match["crossed"] == [
        {
            "condition": "smallFiles",
            "metric": "files.smallFiles",
            "comparison": ">=",
            "threshold": 3,
            "value": 3,
        }
    ]
    assert (match["table"], match["snapshotId"]) == (uri, 3)


def test_poking_sensor_matches_a_recommended_operation_and_fails_on_a_missing_table(warehouse: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_lakeformat.sensors.health import LakeformatHealthSensor

    writer = make_table(str(warehouse / "db.db" / "events"))
    for _ in range(5):
        append(writer, 1)
    run = load_dag_module("lakeformat_test_health").poke_dag.test(run_conf={"table": "db.events"})
    match = xcom_result(run, "wait")
    assert match["operations"] == ["compact_data"] and match["crossed"][0]["value"] == ["compact_data"]
    sensor = LakeformatHealthSensor(task_id="wait", table="db.nothing", conditions={"smallFiles": 1})
    with pytest.raises(AirflowFailException, match=r"db\.db/nothing: no Paimon or Iceberg table here"):
        sensor._check()


# -- the example DAG ---------------------------------------------------------------------------------------


def load_health_watch(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    import importlib.util

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        f"lakeformat_example_health_watch_{len(sys.modules)}", REPO / "dags" / "lakeformat_health_watch.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_example_dag_is_scheduled_on_a_health_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    for name in [n for n in os.environ if n.startswith("LAKEFORMAT_")]:
        monkeypatch.delenv(name)
    dag = load_health_watch(monkeypatch)
    (asset,) = dag.timetable.asset_condition.objects
    assert (
        asset.uri
        == health_asset_uri("demo.events")
        == "x-lakeformat-health:lakeformat://lakeformat_default/demo.events"
    )
    (watcher,) = asset.watchers
    trigger = watcher.trigger
    assert isinstance(trigger, LakeformatHealthTrigger)
    assert (trigger.table, trigger.conditions, trigger.lakeformat_conn_id, trigger.fire_once) == (
        "demo.events",
        {"smallFiles": 500},
        "lakeformat_default",
        False,
    )
    assert dag.is_paused_upon_creation is True  # it changes the table: unpaused by the user
    assert dag.get_task("crossed").downstream_task_ids == {"compact_data"}
    assert dag.get_task("compact_data").downstream_task_ids == {"expire_snapshots"}
    # What the dag-processor stores: the watcher with its trigger's class path and keyword arguments.
    stored = json.dumps(DagSerialization.to_dict(dag))
    assert (
        "airflow_lakeformat.triggers.health.LakeformatHealthTrigger" in stored
        and '"smallFiles": 500' in stored
    )

    dag = load_health_watch(
        monkeypatch,
        LAKEFORMAT_CONN_ID="lake",
        LAKEFORMAT_HEALTH_WATCH_CONDITIONS='{"score_below": 60}',
        LAKEFORMAT_HEALTH_WATCH_POLL_INTERVAL="30",
    )
    (asset,) = dag.timetable.asset_condition.objects
    trigger = asset.watchers[0].trigger
    assert (asset.uri, trigger.conditions, trigger.poll_interval) == (
        "x-lakeformat-health:lakeformat://lake/demo.events",
        {"score_below": 60},
        30.0,
    )
    with pytest.raises(UsageError, match="unknown health condition 'small_files'"):
        load_health_watch(monkeypatch, LAKEFORMAT_HEALTH_WATCH_CONDITIONS='{"small_files": 1}')


def test_example_dag_reports_the_event_and_compacts_the_table(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    bundles = [
        {
            "name": "dags-folder",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {},
        },
        {
            "name": "lakeformat-examples",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(REPO / "dags")},
        },
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    monkeypatch.delenv("LAKEFORMAT_DEMO_TABLE", raising=False)
    dag = load_health_watch(monkeypatch, LAKEFORMAT_CONN_ID="lakeformat_default")
    (asset,) = dag.timetable.asset_condition.objects
    # What `crossed` reads: the trigger's event as Airflow records it (the Asset event's extra "payload").
    payload = {"status": "success", "match": {"table": "t", "score": 60, "crossed": [{"value": 612}]}}
    event = SimpleNamespace(extra={"from_trigger": True, "payload": payload})
    reported = dag.get_task("crossed").python_callable(triggering_asset_events={asset: [event]})
    assert reported == [
        {"table": "t", "score": 60, "crossed": [{"value": 612}], "operations": None, "summary": None}
    ]

    uri = str(warehouse / "demo.db" / "events")
    writer = make_table(uri)
    for _ in range(5):
        append(writer, 1)
    run = dag.test(run_conf={"execution": "local"})
    assert {task: state for task, (state, _) in task_states(run).items()} == dict.fromkeys(
        ("crossed", "compact_data", "expire_snapshots"), "success"
    )
    assert xcom_result(run, "crossed") == []
    assert open_table(uri).health().files["dataFiles"] == 1
