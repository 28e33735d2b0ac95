"""The example DAGs driven through the compose stack's REST API, as ``test_compose_runtime.py`` runs them.

Helpers to trigger a DAG run, wait for it, read its XCom and the warehouse's keys on SeaweedFS, and two
scenarios the stack test calls after the Paimon ingest: :func:`manual_maintenance_of_both_formats` (the
manual maintenance of the Paimon table and of the Iceberg example's table, dry run then real, then bad input
stopped by the validation task) and :func:`iceberg_ingest_and_downstream` (``lakeformat_iceberg_ingest``
writing to the Iceberg table on S3, the Asset-scheduled ``lakeformat_iceberg_downstream_asset`` run because
of the triggerer's watcher event, and the deferred ``lakeformat_iceberg_downstream_sensor`` completing after a
second ingest). ``stack`` is ``test_compose_runtime.Stack``: its services run, every request is an admin's.

Example:
    >>> appended = manual_maintenance_of_both_formats(stack)  # doctest: +SKIP
    >>> iceberg_ingest_and_downstream(stack, appended)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.airflow.test_compose_runtime import Stack

# The example DAGs' tables under the compose connection's warehouse.
DEMO_TABLE = "demo.db/events"
ICEBERG_DEMO_TABLE = "demo.db/events_iceberg"


def compose_connection(stack: Stack, service: str = "airflow-scheduler") -> dict[str, Any]:
    return dict(json.loads(stack.service(service)["environment"]["AIRFLOW_CONN_LAKEFORMAT_DEFAULT"]))


def wait_for(what: str, probe: Any, stack: Stack, deadline_seconds: float = 600, interval: float = 2) -> Any:
    deadline = time.monotonic() + deadline_seconds
    while True:
        for name, process in stack.processes.items():
            assert process.poll() is None, f"{name} exited with {process.returncode}: {stack.tail(name)}"
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {name}\n{stack.tail(name)}" for name in stack.processes)
            task_logs = sorted((stack.home / "airflow-scheduler" / "airflow" / "logs").rglob("*.log"))
            tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}" for p in task_logs[-4:])
            pytest.fail(f"timed out waiting for {what}\n{logs}\n{tails}")
        time.sleep(interval)


def trigger(stack: Stack, dag_id: str, conf: dict[str, Any] | None = None) -> str:
    run_ = stack.api("POST", f"dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
    return str(run_["dag_run_id"])


def ended(stack: Stack, dag_id: str, run_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The run's final state and its task instances."""

    def probe() -> str | None:
        state = stack.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")["state"]
        return state if state in ("success", "failed") else None

    state = wait_for(f"{dag_id} {run_id}", probe, stack)
    tasks = stack.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return state, tasks


def finished(stack: Stack, dag_id: str, run_id: str) -> Any:
    state, tasks = ended(stack, dag_id, run_id)
    assert state == "success", {t["task_id"]: t["state"] for t in tasks}
    return tasks


def xcom(stack: Stack, dag_id: str, run_id: str, task_id: str) -> Any:
    return stack.api(
        "GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
    )["value"]


def s3_client(stack: Stack) -> tuple[Any, str, str]:
    """A boto3 client on the stack's SeaweedFS with the connection's keys; the warehouse's bucket and prefix."""
    import boto3
    from botocore.config import Config

    connection = compose_connection(stack)
    bucket, _, key_prefix = connection["host"].removeprefix("s3://").partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{stack.ports[('seaweedfs', 8333)]}",
        aws_access_key_id=connection["login"],
        aws_secret_access_key=connection["password"],
        region_name=connection["extra"]["region"],
        config=Config(s3={"addressing_style": "path"}),
    )
    return client, bucket, key_prefix


def s3_keys(stack: Stack, prefix: str) -> list[str]:
    """The keys under ``<warehouse>/<prefix>`` (full keys, the warehouse's prefix included)."""
    client, bucket, key_prefix = s3_client(stack)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{key_prefix}/{prefix}")
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


def s3_json(stack: Stack, key: str) -> Any:
    """The JSON document at a full key of the warehouse's bucket."""
    client, bucket, _ = s3_client(stack)
    return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def stopped_at_validation(stack: Stack, dag_id: str, run_id: str, before: tuple[str, ...] = ()) -> str:
    """The run failed in ``validate_inputs`` (first try, no retry) after the tasks ``before`` it succeeded,
    every other task is upstream_failed; returns the one message the task's log shows, exactly once."""
    state, tasks = ended(stack, dag_id, run_id)
    states = {t["task_id"]: (t["state"], t["try_number"]) for t in tasks}
    assert state == "failed", states
    assert {task: states.pop(task) for task in before} == {task: ("success", 1) for task in before}
    assert states.pop("validate_inputs") == ("failed", 1), states
    assert states and {s for s, _ in states.values()} == {"upstream_failed"}, states
    path = f"dags/{dag_id}/dagRuns/{run_id}/taskInstances/validate_inputs/logs/1?full_content=true"
    log = stack.api("GET", path)["content"]

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            yield from (s for v in value.values() for s in strings(v))
        elif isinstance(value, list):
            yield from (s for v in value for s in strings(v))

    said = [m for text in strings(log) for m in re.findall(r"\d+ invalid inputs?, nothing was run: .*", text)]
    assert len(said) == 1, (said, log)
    errors = [e for event in log if isinstance(event, dict) for e in event.get("error_detail") or []]
    assert [e["exc_type"] for e in errors] == ["AirflowFailException"], errors  # no chained exception
    return said[0]


PAIMON_MAINTENANCE = "lakeformat_manual_maintenance"
ICEBERG_MAINTENANCE = "lakeformat_iceberg_maintenance"


def iceberg_metadata(stack: Stack) -> tuple[list[str], Any]:
    """The Iceberg table's ``metadata/`` keys and its latest ``v<N>.metadata.json``."""
    keys = s3_keys(stack, f"{ICEBERG_DEMO_TABLE}/metadata/")
    versions = [k for k in keys if re.search(r"/v\d+\.metadata\.json$", k)]
    latest = max(versions, key=lambda k: int(re.findall(r"/v(\d+)\.", k)[-1]))
    return keys, s3_json(stack, latest)


def manual_maintenance_of_both_formats(stack: Stack) -> list[int]:
    """Maintenance of the Paimon demo table (2 snapshots, one file each) and of the Iceberg example's table,
    triggered with Params, dry run then real; then bad input stops each run in its validation task. The two
    DAGs' runs go side by side (each DAG runs one at a time). Returns the ids of the 3 snapshots the Iceberg
    dry run appended."""
    table = f"{compose_connection(stack)['host']}/{DEMO_TABLE}"
    paimon = {"table": "demo.events", "min_file_count": 2, "retain_min": 1, "older_than": "1 ms"}
    iceberg = {"batches": 3, "rows": 10, "retain_min": 1, "older_than": "1 ms"}

    # Dry runs: each step reports what it would do; the Paimon table keeps every key, the Iceberg table
    # gets its 3 appends (which always happen) and nothing else.
    paimon_keys = s3_keys(stack, f"{DEMO_TABLE}/")
    dry = trigger(stack, PAIMON_MAINTENANCE, {**paimon, "dry_run": True})
    iceberg_dry = trigger(stack, ICEBERG_MAINTENANCE, {**iceberg, "dry_run": True})
    finished(stack, PAIMON_MAINTENANCE, dry)
    assert xcom(stack, PAIMON_MAINTENANCE, dry, "validate_inputs")["table"] == table
    planned = xcom(stack, PAIMON_MAINTENANCE, dry, "compact_data")
    assert (planned["dryRun"], planned["filesRewritten"], planned["snapshotId"]) == (True, 2, None)
    planned = xcom(stack, PAIMON_MAINTENANCE, dry, "expire_snapshots")
    assert (planned["dryRun"], planned["snapshotsExpired"]) == (True, [1])
    assert s3_keys(stack, f"{DEMO_TABLE}/") == paimon_keys, "a dry run changed the Paimon table"
    finished(stack, ICEBERG_MAINTENANCE, iceberg_dry)
    appended = xcom(stack, ICEBERG_MAINTENANCE, iceberg_dry, "append_batches")
    assert len(appended) == 3
    keys, metadata = iceberg_metadata(stack)
    assert [s["snapshot-id"] for s in metadata["snapshots"]] == appended
    assert len([k for k in keys if k.endswith(".metadata.json")]) == 1 + 3, "create, 3 appends, no more"
    planned = xcom(stack, ICEBERG_MAINTENANCE, iceberg_dry, "expire_snapshots")
    assert (planned["dryRun"], sorted(planned["snapshotsExpired"])) == (True, sorted(appended[:2]))

    # Real runs: Paimon compacts the two files (a COMPACT snapshot) and expires snapshots 1 and 2 with the
    # files only they used; Iceberg compacts its three small files into one (a replace snapshot), expires the
    # three appends (the compaction's snapshot is the one kept) and compacts the manifests.
    real = trigger(stack, PAIMON_MAINTENANCE, {**paimon, "dry_run": False})
    iceberg_real = trigger(stack, ICEBERG_MAINTENANCE, {**iceberg, "batches": 0, "dry_run": False})
    finished(stack, PAIMON_MAINTENANCE, real)
    compacted = xcom(stack, PAIMON_MAINTENANCE, real, "compact_data")
    assert (compacted["dryRun"], compacted["filesRewritten"], compacted["snapshotId"]) == (False, 2, 3)
    assert xcom(stack, PAIMON_MAINTENANCE, real, "expire_snapshots")["snapshotsExpired"] == [1, 2]
    snapshots = [k.rsplit("/", 1)[1] for k in s3_keys(stack, f"{DEMO_TABLE}/snapshot/snapshot-")]
    assert "snapshot-1" not in snapshots and "snapshot-2" not in snapshots and "snapshot-3" in snapshots
    [compaction] = s3_keys(stack, f"{DEMO_TABLE}/snapshot/snapshot-3")
    assert s3_json(stack, compaction)["commitKind"] == "COMPACT"
    data_before = {k for k in paimon_keys if k.endswith(".parquet")}
    data_after = {k for k in s3_keys(stack, f"{DEMO_TABLE}/") if k.endswith(".parquet")}
    assert len(data_before) == 2 and len(data_after) == 1 and not data_before & data_after
    finished(stack, ICEBERG_MAINTENANCE, iceberg_real)
    data = xcom(stack, ICEBERG_MAINTENANCE, iceberg_real, "compact_data")
    assert (data["dryRun"], data["filesRewritten"], data["filesAdded"]) == (False, 3, 1)
    expired = xcom(stack, ICEBERG_MAINTENANCE, iceberg_real, "expire_snapshots")
    assert (expired["dryRun"], sorted(expired["snapshotsExpired"])) == (False, sorted(appended))
    assert xcom(stack, ICEBERG_MAINTENANCE, iceberg_real, "compact_manifests")["merge"] == "full"
    after, metadata = iceberg_metadata(stack)
    new = [k for k in after if k.endswith(".metadata.json") and k not in keys]
    assert len(new) == 3, "the data compaction's, the expiry's and the manifest compaction's commits"
    assert metadata["snapshots"][0]["snapshot-id"] == data["snapshotId"], "the compaction's snapshot is kept"
    assert [s["summary"]["operation"] for s in metadata["snapshots"]] == ["replace", "replace"]

    # Bad input: each run stops in its validation task with one message; nothing else runs.
    paimon_keys = s3_keys(stack, f"{DEMO_TABLE}/")
    iceberg_keys = s3_keys(stack, f"{ICEBERG_DEMO_TABLE}/")
    missing = trigger(stack, PAIMON_MAINTENANCE, {"table": "demo.nope", "dry_run": False})
    iceberg_short = trigger(stack, ICEBERG_MAINTENANCE, {"orphan_older_than": "2 h", "dry_run": False})
    message = stopped_at_validation(stack, PAIMON_MAINTENANCE, missing)
    assert message.startswith(
        "1 invalid input, nothing was run: table 'demo.nope' does not exist at "
        f"{compose_connection(stack)['host']}/demo.db/nope"
    ), message
    assert message.endswith("under the warehouse of connection 'lakeformat_default'"), message
    assert s3_keys(stack, "demo.db/nope") == []
    short = trigger(stack, PAIMON_MAINTENANCE, {**paimon, "orphan_older_than": "10 m", "dry_run": False})
    message = stopped_at_validation(stack, ICEBERG_MAINTENANCE, iceberg_short, before=("ensure_table",))
    assert message.startswith(
        "1 invalid input, nothing was run: orphan_older_than '2 h' is under the 24 h floor for Iceberg tables"
    ), message
    message = stopped_at_validation(stack, PAIMON_MAINTENANCE, short)
    assert message.startswith(
        "1 invalid input, nothing was run: orphan_older_than '10 m' is under the 1 h floor for Paimon tables"
    ), message
    assert s3_keys(stack, f"{DEMO_TABLE}/") == paimon_keys
    assert s3_keys(stack, f"{ICEBERG_DEMO_TABLE}/") == iceberg_keys
    # A duration the parser refuses cannot even be triggered: the Param's pattern refuses it (the form's check).
    dag_ids = (PAIMON_MAINTENANCE, ICEBERG_MAINTENANCE)
    runs = {dag_id: stack.api("GET", f"dags/{dag_id}/dagRuns")["total_entries"] for dag_id in dag_ids}
    for dag_id in dag_ids:
        for param, bad in (("older_than", "soon"), ("orphan_older_than", "2 weeks")):
            body = {"logical_date": None, "conf": {param: bad, "dry_run": False}}
            status, answer = stack.request("POST", f"dags/{dag_id}/dagRuns", body)
            assert status == 400 and f"Invalid input for param {param}:" in str(answer), (status, answer)
    assert {dag_id: stack.api("GET", f"dags/{dag_id}/dagRuns")["total_entries"] for dag_id in dag_ids} == runs
    return list(appended)


ICEBERG_INGEST = "lakeformat_iceberg_ingest"
ICEBERG_WATCHED = "lakeformat_iceberg_downstream_asset"
ICEBERG_SENSOR = "lakeformat_iceberg_downstream_sensor"


def watched_run(stack: Stack, snapshot_id: int) -> dict[str, Any]:
    """The one successful run of the Asset-scheduled Iceberg DAG whose ``report`` names ``snapshot_id``."""

    def probe() -> list[dict[str, Any]]:
        runs = stack.api("GET", f"dags/{ICEBERG_WATCHED}/dagRuns")["dag_runs"]
        return [
            r
            for r in runs
            if r["state"] == "success"
            and snapshot_id in xcom(stack, ICEBERG_WATCHED, r["dag_run_id"], "report")
        ]

    runs = wait_for(f"the watcher's event for snapshot {snapshot_id} to run {ICEBERG_WATCHED}", probe, stack)
    assert len(runs) == 1, f"snapshot {snapshot_id} ran {ICEBERG_WATCHED} more than once: {runs}"
    return dict(runs[0])


def watcher_payload_ids(events: list[dict[str, Any]]) -> list[int]:
    """The snapshot ids of Asset events the watcher recorded (``from_trigger``, no task): asserted."""
    for event in events:
        assert event["extra"]["from_trigger"] is True, event
        assert (event["source_dag_id"], event["source_task_id"]) == (None, None), event
    return [int(event["extra"]["payload"]["snapshot"]["id"]) for event in events]


def ingested(stack: Stack, run_id: str, table: str, rows: int) -> int:
    """The snapshot a successful ``lakeformat_iceberg_ingest`` run appended, checked against its XCom."""
    finished(stack, ICEBERG_INGEST, run_id)
    assert xcom(stack, ICEBERG_INGEST, run_id, "ensure_table") == table, "the table existed: found, not made"
    staged = xcom(stack, ICEBERG_INGEST, run_id, "stage_batch")
    assert staged.startswith(f"{compose_connection(stack)['host']}/_staging/iceberg-batch-"), staged
    written = xcom(stack, ICEBERG_INGEST, run_id, "write_batch")
    assert (written["format"], written["table"], written["execution"]) == ("iceberg", table, "local")
    assert (written["rowsWritten"], written["alreadyCommitted"], written["dryRun"]) == (rows, False, False)
    return int(written["snapshotId"])


def iceberg_ingest_and_downstream(stack: Stack, maintenance_appends: list[int]) -> None:
    """After :func:`manual_maintenance_of_both_formats` (its table: the data compaction's ``replace`` under the
    manifest compaction's):
    ingest into the Iceberg table on S3; the watcher in the triggerer records the commit as an Asset event,
    which runs the Asset-scheduled DAG; the deferred sensor completes on a second ingest's snapshot. Every
    event of the table's Asset comes from the watcher, one per data commit, never for the ``replace``."""
    table = f"{compose_connection(stack)['host']}/{ICEBERG_DEMO_TABLE}"
    # The Asset is named through the connection, not by the table's root (issue 28: DAGs parse without it).
    asset_uri = "lakeformat://lakeformat_default/demo.events_iceberg"
    rows = int(stack.env("airflow-scheduler").get("LAKEFORMAT_INGEST_ROWS", "1000"))
    keys, metadata = iceberg_metadata(stack)
    versions = [k for k in keys if k.endswith(".metadata.json")]
    # the head is the manifest compaction's replace, on top of the data compaction's replace
    replaced = metadata["current-snapshot-id"]
    [head] = [s for s in metadata["snapshots"] if s["snapshot-id"] == replaced]
    assert head["summary"]["operation"] == "replace"

    # Ingest: one append on top of the replace, one more metadata file on SeaweedFS.
    first = ingested(stack, trigger(stack, ICEBERG_INGEST), table, rows)
    keys, metadata = iceberg_metadata(stack)
    assert len([k for k in keys if k.endswith(".metadata.json") and k not in versions]) == 1
    assert metadata["current-snapshot-id"] == first
    [snapshot] = [s for s in metadata["snapshots"] if s["snapshot-id"] == first]
    assert snapshot["parent-snapshot-id"] == replaced and snapshot["summary"]["operation"] == "append"
    assert snapshot["summary"]["added-records"] == str(rows)
    assert snapshot["summary"]["lakeformat.commit-user"] == "airflow-lakeformat_iceberg_ingest-write_batch"

    # The triggerer's watcher saw the commit: its Asset event (no task emitted one) ran the scheduled DAG.
    run = watched_run(stack, first)
    assert run["run_type"] == "asset_triggered", run
    path = f"dags/{ICEBERG_WATCHED}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents"
    consumed = stack.api("GET", path)["asset_events"]
    assert {event["uri"] for event in consumed} == {asset_uri}
    assert watcher_payload_ids(consumed) == xcom(stack, ICEBERG_WATCHED, run["dag_run_id"], "report")

    # The sensor waits in the triggerer for a snapshot above the one it saw first (the ingest's); a second
    # ingest ends the wait with its snapshot.
    sensed = trigger(stack, ICEBERG_SENSOR)
    wait_for(
        "the Iceberg sensor to defer",
        lambda: (
            stack.api("GET", f"dags/{ICEBERG_SENSOR}/dagRuns/{sensed}/taskInstances/wait_for_snapshot")[
                "state"
            ]
            == "deferred"
        ),
        stack,
    )
    second = ingested(stack, trigger(stack, ICEBERG_INGEST), table, rows)
    finished(stack, ICEBERG_SENSOR, sensed)
    matched = xcom(stack, ICEBERG_SENSOR, sensed, "wait_for_snapshot")
    assert (matched["format"], matched["afterSnapshotId"], matched["id"], matched["commitKind"]) == (
        "iceberg",
        first,
        second,
        "APPEND",
    )
    assert (matched["newRecords"], matched["snapshotsMatched"]) == (rows, 1)
    assert xcom(stack, ICEBERG_SENSOR, sensed, "use_snapshot") == second
    watched_run(stack, second)

    # One producer, one event per commit: every event of the table's Asset is the watcher's, each ingest's
    # snapshot has exactly one, and the others are appends of the maintenance DAG (whichever the watcher saw
    # as the newest between two polls), never the manifest compaction's replace.
    [asset] = [a for a in stack.api("GET", "assets")["assets"] if a["uri"] == asset_uri]
    events = stack.api("GET", f"assets/events?asset_id={asset['id']}&limit=100")["asset_events"]
    ids = watcher_payload_ids(events)
    assert (ids.count(first), ids.count(second)) == (1, 1), ids
    assert set(ids) <= {first, second, *maintenance_appends} and replaced not in ids, (ids, replaced)
    runs = stack.api("GET", f"dags/{ICEBERG_WATCHED}/dagRuns")["dag_runs"]
    assert {(r["run_type"], r["state"]) for r in runs} == {("asset_triggered", "success")}, runs
