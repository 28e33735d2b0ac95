"""The example DAGs in ``dags/`` run to success with ``dag.test()``: in the worker, on SeaweedFS S3 and with a
real ``spark-submit``; the sensor DAGs defer and resume; no DAG file imports PySpark when parsed. The Iceberg
ingest appends one snapshot per run, and a re-run of the same run (what a retry or a cleared task does)
appends nothing; it emits no Asset event itself (the downstream DAG's watcher is the table's one producer,
driven in the compose stack's triggerer by ``test_compose_runtime.py``).

``dag.test()`` needs the DAG in a bundle, so each test adds ``dags/`` as a second local bundle next to the
session's dags folder. The DAG files read their tables from the environment at parse time; each test sets
it before loading the file.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from tests.airflow.helpers import append, make_table, set_connection

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "dags"
DAG_FILES = sorted(p.name for p in EXAMPLE_DAGS.glob("*.py"))


@pytest.fixture
def examples(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dags/`` as a bundle of its own, beside the session's dags folder."""
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


def load_example_module(name: str) -> Any:
    """``dags/<name>.py`` as a module, parsed with the current environment."""
    spec = importlib.util.spec_from_file_location(
        f"lakeformat_example_{name}_{uuid.uuid4().hex}", EXAMPLE_DAGS / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example(name: str) -> Any:
    """The DAG of ``dags/<name>.py``, parsed with the current environment."""
    return load_example_module(name).dag


def run_dag(name: str, **kwargs: Any) -> Any:
    dag = load_example(name)
    run = dag.test(**kwargs)
    states = {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    return run, states


def plant_orphan(table: Table, age_seconds: float | None) -> str:
    """A data file no snapshot references, in the table's first bucket directory."""
    path = table.io.join(table.root, "dt=2024-01-01", "bucket-0", f"data-{uuid.uuid4()}-0.parquet")
    table.io.fs.pipe_file(path, b"not referenced by any snapshot")
    if age_seconds is not None:
        old = time.time() - age_seconds
        os.utime(path, (old, old))
    return path


def build_tables(uris: list[str], options: dict[str, Any] | None = None) -> None:
    for uri in uris:
        table = make_table(uri, options)
        for i in range(4):
            append(table, 10 + i)


def orders_with_old_orphan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """``db.orders`` (4 appends) under a warehouse ``lakeformat_default`` points at, plus a 3-day-old orphan."""
    uri = str(tmp_path / "wh" / "db.db" / "orders")
    build_tables([uri])
    orphan = plant_orphan(Table.open(uri), age_seconds=3 * 86400)
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    return uri, orphan


def live_names(uri: str) -> list[str]:
    table = Table.open(uri)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    return sorted(e.file.file_name for e in live_entries(table, latest))


def check_maintained(uri: str, options: dict[str, Any] | None, orphan: str) -> None:
    table = Table.open(uri, options)
    manager = table.snapshot_manager
    latest = manager.latest_snapshot()
    assert latest is not None
    # retain_min=1 with a tiny older_than expired every snapshot before the last append...
    assert manager.earliest_snapshot_id() == 4
    # ...then the full manifest compaction committed one COMPACT snapshot on top...
    assert latest.id == 5 and latest.commit_kind is CommitKind.COMPACT
    assert latest.total_record_count == 10 + 11 + 12 + 13
    # ...and the old unreferenced file is gone.
    assert not table.io.exists(orphan)


# -- parsing ---------------------------------------------------------------------------------------


def test_example_dag_files_parse_without_pyspark(tmp_path: Path) -> None:
    assert DAG_FILES, "no example DAGs in dags/"
    script = (
        "import runpy, sys\n"
        f"for name in {DAG_FILES!r}:\n"
        f"    ns = runpy.run_path({str(EXAMPLE_DAGS)!r} + '/' + name)\n"
        "    assert 'dag' in ns, name\n"
        "bad = sorted(m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.'))\n"
        "print('PYSPARK', bad)\n"
    )
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    # A deployment's connection (the DAGs parse without one too: test_dags_parse_without_connection.py).
    env["AIRFLOW_CONN_LAKEFORMAT_DEFAULT"] = json.dumps({"conn_type": "lakeformat", "host": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "PYSPARK []" in done.stdout, done.stdout


# -- maintenance -----------------------------------------------------------------------------------


def test_maintenance_dag_maps_over_local_tables(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uris = [str(tmp_path / "wh" / "db.db" / name) for name in ("orders", "clicks")]
    build_tables(uris)
    orphans = [plant_orphan(Table.open(uri), age_seconds=3 * 86400) for uri in uris]
    fresh = plant_orphan(Table.open(uris[0]), age_seconds=None)  # younger than 1 day: kept
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_TABLES", ",".join([uris[0], "db.clicks"]))
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_RETAIN_MIN", "1")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_OLDER_THAN", "1 ms")
    _, states = run_dag("lakeformat_maintenance")
    for step in ("expire_snapshots", "compact_manifests", "remove_orphan_files"):
        assert {i for (t, i), s in states.items() if t == f"maintain.{step}" and s == "success"} == {0, 1}
    for uri, orphan in zip(uris, orphans, strict=True):
        check_maintained(uri, None, orphan)
    assert Path(fresh).exists()


@pytest.mark.s3
def test_maintenance_dag_on_seaweedfs(
    examples: None, seaweedfs: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = seaweedfs.storage_options()
    uri = f"{s3_bucket}/wh/db.db/orders"
    build_tables([uri], options)
    orphan = plant_orphan(Table.open(uri, options), age_seconds=None)
    time.sleep(2.5)  # S3 keeps its own modification times; let the orphan age past older_than
    set_connection(
        monkeypatch,
        "lakeformat_default",
        host=f"{s3_bucket}/wh",
        login=seaweedfs.access_key,
        password=seaweedfs.secret_key,
        extra={
            "endpoint_url": seaweedfs.endpoint_url,
            "region": seaweedfs.region,
            "storage_options": {"config_kwargs": {"s3": {"addressing_style": "path"}}},
        },
    )
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_TABLES", "db.orders")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_RETAIN_MIN", "1")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_OLDER_THAN", "1 ms")
    monkeypatch.setenv("LAKEFORMAT_ORPHAN_OLDER_THAN", "2 s")
    monkeypatch.setenv("LAKEFORMAT_ORPHAN_ALLOW_SHORT", "true")
    run_dag("lakeformat_maintenance")
    check_maintained(uri, options, orphan)


@pytest.mark.spark
@pytest.mark.slow
def test_maintenance_dag_with_spark_submit(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, orphan = orders_with_old_orphan(tmp_path, monkeypatch)
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_TABLES", "db.orders")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_EXECUTION", "spark")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_RETAIN_MIN", "1")
    monkeypatch.setenv("LAKEFORMAT_MAINTENANCE_OLDER_THAN", "1 ms")
    run, _ = run_dag("lakeformat_maintenance")
    executions = {
        step: run.get_task_instance(f"maintain.{step}", map_index=0).xcom_pull(
            task_ids=f"maintain.{step}", map_indexes=0
        )["execution"]
        for step in ("expire_snapshots", "compact_manifests", "remove_orphan_files")
    }
    assert executions == {
        "expire_snapshots": "spark",
        "compact_manifests": "local",
        "remove_orphan_files": "spark",
    }
    check_maintained(uri, None, orphan)


def test_manual_maintenance_dry_run_then_for_real(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, orphan = orders_with_old_orphan(tmp_path, monkeypatch)
    small_files = [Path(uri, "dt=2024-01-01", "bucket-0", name) for name in live_names(uri)]
    assert len(small_files) == 4
    conf = {"table": uri, "retain_min": 1, "older_than": "1 ms", "min_file_count": 2}
    run, _ = run_dag("lakeformat_manual_maintenance", run_conf=conf)  # dry_run defaults to True
    planned = run.get_task_instance("compact_data").xcom_pull(task_ids="compact_data")
    assert (planned["dryRun"], planned["filesRewritten"], planned["snapshotId"]) == (True, 4, None)
    table = Table.open(uri)
    assert (
        table.snapshot_manager.latest_snapshot_id() == 4
        and table.snapshot_manager.earliest_snapshot_id() == 1
    )
    assert Path(orphan).exists() and all(p.exists() for p in small_files)

    run_dag("lakeformat_manual_maintenance", run_conf={**conf, "dry_run": False})
    manager = Table.open(uri).snapshot_manager
    latest = manager.latest_snapshot()
    # compact data -> snapshot 5 (one file), expire down to it, full manifest compaction -> snapshot 6.
    assert latest is not None and latest.id == 6 and latest.total_record_count == 10 + 11 + 12 + 13
    assert manager.earliest_snapshot_id() == 5
    assert len(live_names(uri)) == 1
    assert not any(p.exists() for p in small_files), "expiry deleted the files compaction replaced"
    assert not Path(orphan).exists()


def test_manual_maintenance_fully_compacts_a_primary_key_table(
    examples: None, sample_tables: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Primary-key tables are compacted by key since issue 27 (they were skipped): the form's
    # compaction_mode "full" reaches the compaction, which commits one COMPACT snapshot.
    uri = str(sample_tables / "pk_tbl")  # written by pypaimon
    before = Table.open(uri).snapshot_manager
    latest_id = before.latest_snapshot_id()
    assert latest_id is not None and latest_id > 1
    set_connection(monkeypatch, "lakeformat_default", host=str(sample_tables.parent))
    conf = {"table": uri, "retain_min": 1, "older_than": "1 ms", "dry_run": False, "compaction_mode": "full"}
    run, states = run_dag("lakeformat_manual_maintenance", run_conf=conf)
    assert states[("expire_partitions", -1)] == "skipped"  # no partition.expiration-time
    compacted = run.get_task_instance("compact_data").xcom_pull(task_ids="compact_data")
    assert (compacted["primaryKey"], compacted["mode"], compacted["snapshotId"]) == (
        True,
        "full",
        latest_id + 1,
    )
    assert {states[(t, -1)] for t in ("expire_snapshots", "compact_manifests", "remove_orphan_files")} == {
        "success"
    }
    assert Table.open(uri).snapshot_manager.earliest_snapshot_id() == latest_id + 1


# -- ingest and downstream -------------------------------------------------------------------------


def _asset_events(uri: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
        ).all()
        return [dict(row.extra or {}) for row in rows]


def _ingest_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    warehouse = tmp_path / "wh"
    uri = str(warehouse / "demo.db" / "events")
    monkeypatch.setenv("LAKEFORMAT_INGEST_ROWS", "250")
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    return uri


def test_ingest_creates_writes_emits_asset_and_schedules_downstream(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _ingest_env(monkeypatch, tmp_path)
    # One Asset for every test naming demo.events through lakeformat_default: count this test's events.
    earlier = len(_asset_events("lakeformat://lakeformat_default/demo.events"))
    run_dag("lakeformat_ingest")
    run_dag("lakeformat_ingest")
    table = Table.open(uri)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == 2 and latest.total_record_count == 500
    # The table's Asset is named through the connection (issue 28: the DAG parses without it), not by its root.
    events = _asset_events("lakeformat://lakeformat_default/demo.events")[earlier:]
    assert sorted(e["snapshotId"] for e in events) == [1, 2]
    assert _asset_events("file://" + uri) == []
    run_dag("lakeformat_downstream_asset")


@pytest.mark.spark
@pytest.mark.slow
def test_ingest_with_spark_submit(examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _ingest_env(monkeypatch, tmp_path)
    monkeypatch.setenv("LAKEFORMAT_INGEST_EXECUTION", "spark")
    run, _ = run_dag("lakeformat_ingest")
    result = run.get_task_instance("write_batch").xcom_pull(task_ids="write_batch")
    assert result["execution"] == "spark" and result["rowsWritten"] == 250
    latest = Table.open(uri).snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == result["snapshotId"] == 1
    assert (
        latest.commit_user == result["commitUser"] and latest.commit_identifier == result["commitIdentifier"]
    )


def sensed_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The sensor DAG's table, with snapshots 1-3 of 5, 6 and 7 rows."""
    uri = str(tmp_path / "wh" / "demo.db" / "events")
    table = make_table(uri)
    for i in range(3):
        append(table, 5 + i)
    monkeypatch.setenv("LAKEFORMAT_DEMO_TABLE", uri)
    return uri


def test_sensor_dag_defers_ignores_compact_and_resumes(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    uri = sensed_table(tmp_path, monkeypatch)
    monkeypatch.setenv("LAKEFORMAT_SENSOR_POLL_INTERVAL", "0.5")
    monkeypatch.setenv("LAKEFORMAT_SENSOR_TIMEOUT", "300")
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    seen: dict[str, Any] = {}

    def baseline_recorded() -> bool:
        with create_session() as session:
            rows = session.scalars(
                select(Variable).where(
                    Variable.key.like("lakeformat_snapshot_sensor.lakeformat_downstream_sensor.%")
                )
            ).all()
            return any(json.loads(row.val).get("table") == uri for row in rows)

    def commit_while_deferred() -> None:
        # The sensor records its baseline at its first look, right before it defers; commit only after.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not baseline_recorded():
            time.sleep(0.2)
        time.sleep(2)
        writer = Table.open(uri)
        seen["compact"] = compact_manifests(writer, "full").snapshot_id  # ignored by the sensor
        data = pa.table({"dt": ["2024-01-02"] * 7, "v": list(range(7))})
        seen["append"] = Committer(writer, "late-writer").commit(write_data_files(writer, data)).snapshot.id

    thread = threading.Thread(target=commit_while_deferred, daemon=True)
    thread.start()
    with caplog.at_level("INFO", logger="airflow.sdk.definitions.dag"):
        run, _ = run_dag("lakeformat_downstream_sensor")
    thread.join(timeout=60)
    assert "running trigger in line" in caplog.text and "Trigger completed" in caplog.text
    assert seen["compact"] == 4 and seen["append"] == 5
    matched = run.get_task_instance("use_snapshot").xcom_pull(task_ids="use_snapshot")
    assert matched == 5


def test_sensor_dag_with_an_explicit_snapshot_id_matches_at_once(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = sensed_table(tmp_path, monkeypatch)
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    run, _ = run_dag("lakeformat_downstream_sensor", run_conf={"after_snapshot_id": 1})
    matched = run.get_task_instance("wait_for_snapshot").xcom_pull(task_ids="wait_for_snapshot")
    # The newest matching snapshot, with the records of every snapshot after the given id (6 + 7).
    assert (matched["id"], matched["afterSnapshotId"], matched["newRecords"]) == (3, 1, 13)
    assert matched["table"] == uri


# -- Iceberg ---------------------------------------------------------------------------------------


def test_iceberg_maintenance_dag_on_a_sqlite_catalog(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table
    from tests.airflow.iceberg_helpers import catalog_connection, plant_old_file

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    properties = catalog_connection(monkeypatch, warehouse, commit_user_prefix="demo")
    run, states = run_dag("lakeformat_iceberg_maintenance", run_conf={"batches": 3, "rows": 10})
    assert set(states.values()) == {"success"}
    table = open_catalog_table("demo.events_iceberg", catalog_properties=properties)
    assert len(table.metadata.snapshots) == 3, "created and appended; the maintenance was a dry run"
    planned = run.get_task_instance("expire_snapshots").xcom_pull(task_ids="expire_snapshots")
    assert (planned["operation"], planned["format"], planned["dryRun"]) == (
        "expire-snapshots",
        "iceberg",
        True,
    )
    current = table.snapshot()
    assert current is not None and current.summary is not None
    assert current.summary["lakeformat.commit-user"] == "demo-lakeformat_iceberg_maintenance-append_batches"
    orphan = plant_old_file(table, days=4)

    conf = {"batches": 1, "rows": 10, "dry_run": False, "retain_min": 1, "older_than": "1 ms"}
    run, states = run_dag("lakeformat_iceberg_maintenance", run_conf=conf)
    assert set(states.values()) == {"success"}
    table.refresh()
    snapshots = table.metadata.snapshots
    # 4 appends, the data compaction's replace snapshot (4 files into 1), the 4 appends expired, then the
    # manifest compaction's replace snapshot on top.
    assert len(snapshots) == 2 and snapshots[1].summary is not None
    assert snapshots[0].summary is not None and snapshots[0].summary["deleted-data-files"] == "4"
    assert snapshots[1].summary.operation.value == "replace"
    compacted = run.get_task_instance("compact_data").xcom_pull(task_ids="compact_data")
    assert (compacted["filesRewritten"], compacted["filesAdded"]) == (4, 1)
    live = [f for f in table.table.inspect.files().to_pylist() if f["content"] == 0]
    assert len(live) == 1
    assert table.table.scan().to_arrow().num_rows == 40
    assert not os.path.exists(orphan)
    removed = run.get_task_instance("remove_orphan_files").xcom_pull(task_ids="remove_orphan_files")
    assert (removed["files"], removed["table"]) == ({"data-file": 1}, "default:demo.events_iceberg")


def test_iceberg_maintenance_dag_without_a_catalog_keeps_a_hadoop_layout_table_under_the_warehouse(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table

    warehouse = tmp_path / "wh"
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    conf = {"batches": 2, "rows": 5, "dry_run": False, "retain_min": 1, "older_than": "1 ms"}
    run, _ = run_dag("lakeformat_iceberg_maintenance", run_conf=conf)
    root = warehouse / "demo.db" / "events_iceberg"
    assert (root / "metadata" / "version-hint.text").exists()
    table = open_path_table(str(root))
    assert len(table.metadata.snapshots) == 2 and table.table.scan().to_arrow().num_rows == 10
    expired = run.get_task_instance("expire_snapshots").xcom_pull(task_ids="expire_snapshots")
    # both appends expire: the data compaction's replace snapshot is the one kept
    assert (expired["table"], len(expired["snapshotsExpired"])) == (str(root), 2)


def _iceberg_ingest_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """``lakeformat_default`` without a catalog: the Iceberg DAGs' table is a Hadoop-layout root under it."""
    warehouse = tmp_path / "wh"
    monkeypatch.setenv("LAKEFORMAT_INGEST_ROWS", "50")
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    return str(warehouse / "demo.db" / "events_iceberg")


def _written(run: Any) -> dict[str, Any]:
    return dict(run.get_task_instance("write_batch").xcom_pull(task_ids="write_batch"))


def test_iceberg_ingest_appends_once_per_run_and_a_rerun_writes_nothing(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from tests.airflow.iceberg_helpers import live_rows

    root = _iceberg_ingest_env(monkeypatch, tmp_path)
    when = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
    run, _ = run_dag("lakeformat_iceberg_ingest", logical_date=when, run_after=when)
    first = _written(run)
    assert (first["operation"], first["format"], first["table"], first["dryRun"]) == (
        "write",
        "iceberg",
        root,
        False,
    )
    assert (first["rowsWritten"], first["alreadyCommitted"]) == (50, False)
    staged = run.get_task_instance("stage_batch").xcom_pull(task_ids="stage_batch")
    assert staged.startswith(f"{tmp_path / 'wh'}/_staging/iceberg-batch-")
    table = open_path_table(root)
    [snapshot] = table.metadata.snapshots
    assert snapshot.snapshot_id == first["snapshotId"] and snapshot.summary is not None
    assert snapshot.summary.operation.value == "append"
    assert snapshot.summary["lakeformat.commit-identifier"] == str(first["commitIdentifier"])
    assert snapshot.summary["lakeformat.commit-user"] == "airflow-lakeformat_iceberg_ingest-write_batch"

    # The same DAG run again (same run id, so the same commit identifier, as a retry or a cleared task has):
    # the write finds its snapshot and appends nothing.
    run, _ = run_dag("lakeformat_iceberg_ingest", logical_date=when, run_after=when)
    again = _written(run)
    assert (again["alreadyCommitted"], again["snapshotId"], again["commitIdentifier"]) == (
        True,
        first["snapshotId"],
        first["commitIdentifier"],
    )
    assert [s.snapshot_id for s in table.refresh().metadata.snapshots] == [first["snapshotId"]]
    assert live_rows(table) == 50

    # Another run: one more snapshot, on top of the first.
    run, _ = run_dag("lakeformat_iceberg_ingest")
    second = _written(run)
    assert second["alreadyCommitted"] is False and second["commitIdentifier"] != first["commitIdentifier"]
    snapshots = table.refresh().metadata.snapshots
    assert [s.snapshot_id for s in snapshots] == [first["snapshotId"], second["snapshotId"]]
    assert snapshots[1].parent_snapshot_id == first["snapshotId"] and live_rows(table) == 100
    # No outlet: the watcher of lakeformat_iceberg_downstream_asset records the table's events, once each.
    assert _asset_events("file://" + root) == []
    assert _asset_events("lakeformat://lakeformat_default/demo.events_iceberg") == []


def test_iceberg_sensor_dag_defers_ignores_replace_and_resumes_on_an_append(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests
    from airflow_lakeformat.core.iceberg.write.write import append as append_rows
    from airflow_lakeformat.sensors.snapshot import sensor_variable_key
    from tests.airflow.helpers import variable_record, when

    root = _iceberg_ingest_env(monkeypatch, tmp_path)
    ingested = [_written(run_dag("lakeformat_iceberg_ingest")[0])["snapshotId"] for _ in range(2)]
    monkeypatch.setenv("LAKEFORMAT_SENSOR_POLL_INTERVAL", "0.5")
    monkeypatch.setenv("LAKEFORMAT_SENSOR_TIMEOUT", "300")
    key = sensor_variable_key("lakeformat_iceberg_downstream_sensor", "wait_for_snapshot", -1, root)
    committed: dict[str, int] = {}

    def commit_after_the_baseline() -> None:
        # The sensor records its baseline at its first look, right before it defers; commit only after.
        time.sleep(2)
        table = open_path_table(root)
        replaced = compact_manifests(table, "full").snapshot_id  # 2 manifests -> 1: ignored by the sensor
        assert replaced is not None
        committed["replace"] = replaced
        data = pa.table({"dt": ["2026-01-03"] * 7, "id": pa.array(range(7), pa.int64()), "amount": [0.5] * 7})
        committed["append"] = append_rows(table.refresh(), data)  # another engine's append

    with (
        caplog.at_level("INFO", logger="airflow.sdk.definitions.dag"),
        when(lambda: variable_record(key) is not None, commit_after_the_baseline),
    ):
        run, _ = run_dag("lakeformat_iceberg_downstream_sensor")
    assert "running trigger in line" in caplog.text and "Trigger completed" in caplog.text
    matched = run.get_task_instance("wait_for_snapshot").xcom_pull(task_ids="wait_for_snapshot")
    assert (matched["afterSnapshotId"], matched["id"], matched["commitKind"]) == (
        ingested[1],
        committed["append"],
        "APPEND",
    )
    assert (matched["format"], matched["table"], matched["newRecords"], matched["snapshotsMatched"]) == (
        "iceberg",
        root,
        7,
        1,
    )
    assert run.get_task_instance("use_snapshot").xcom_pull(task_ids="use_snapshot") == committed["append"]
    assert variable_record(key) == {
        "table": root,
        "runId": run.run_id,
        "after": ingested[1],
        "snapshotId": committed["append"],
    }


def test_iceberg_downstream_asset_dag_is_scheduled_on_the_tables_watched_asset(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.triggers.snapshot import LakeformatSnapshotEventTrigger

    root = _iceberg_ingest_env(monkeypatch, tmp_path)
    monkeypatch.setenv("LAKEFORMAT_WATCHER_POLL_INTERVAL", "5")
    module = load_example_module("lakeformat_iceberg_downstream_asset")
    condition = module.dag.timetable.asset_condition
    assert [a.uri for a in getattr(condition, "objects", [condition])] == [module.COMMITS.uri]
    # The same Asset URI the write operator would name, without reading the connection (issue 28).
    assert module.COMMITS.uri == "lakeformat://lakeformat_default/demo.events_iceberg"
    assert root.endswith("/demo.db/events_iceberg")
    [watcher] = module.COMMITS.watchers
    assert isinstance(watcher.trigger, LakeformatSnapshotEventTrigger)
    classpath, kwargs = watcher.trigger.serialize()
    assert classpath == "airflow_lakeformat.triggers.snapshot.LakeformatSnapshotEventTrigger"
    assert kwargs == {
        "table": "demo.events_iceberg",
        "lakeformat_conn_id": "lakeformat_default",
        "ignore_commit_kinds": ["REPLACE"],
        "min_new_records": 0,
        "poll_interval": 5.0,
        "table_format": "iceberg",
        "branch": "main",
        "after_snapshot_id": None,
    }
    run, _ = run_dag("lakeformat_iceberg_downstream_asset")  # a manual run: no triggering event
    assert run.get_task_instance("report").xcom_pull(task_ids="report") == []
