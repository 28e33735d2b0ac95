"""The partition-expiry operator with the real hook and connection: one direct ``execute`` per case (no DAG run)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR
from airflow_lakeformat.core.paimon.table import Table
from tests.airflow.helpers import append, make_table
from tests.airflow.test_example_dags import examples as examples  # the fixture: dags/ as a bundle

pytestmark = [pytest.mark.airflow]


def context(task_id: str) -> Any:
    ti = SimpleNamespace(dag_id="partitions_dag", task_id=task_id, map_index=-1, try_number=1)
    return {"ti": ti, "run_id": "manual__1"}


def test_the_operator_drops_old_partitions_under_the_lock_and_skips_unconfigured_tables(
    warehouse: Path,
) -> None:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from airflow_lakeformat.operators.expire_partitions import LakeformatExpirePartitionsOperator

    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    for day in ("2024-01-01", "2024-01-02", "2999-01-01"):
        append(table, 2, dt=day)
    assert {"expiration_time", "timestamp_formatter", "timestamp_pattern", "strategy", "max_expires"} <= set(
        LakeformatExpirePartitionsOperator.template_fields
    )

    unconfigured = LakeformatExpirePartitionsOperator(task_id="expire", table="db.events")
    with pytest.raises(AirflowFailException, match="expiration time"):
        unconfigured.execute(context("expire"))
    skipping = LakeformatExpirePartitionsOperator(
        task_id="expire", table="db.events", skip_unsupported="True"
    )
    with pytest.raises(AirflowSkipException, match="expiration time"):
        skipping.execute(context("expire"))

    operator = LakeformatExpirePartitionsOperator(
        task_id="expire",
        table="db.events",
        expiration_time="30 d",
        timestamp_formatter="None",  # a rendered empty Param: the table's option (none: the lenient form)
        strategy="values-time",
        max_expires="10",
        dry_run="False",
    )
    result = operator.execute(context("expire"))
    assert list(result)[:4] == ["operation", "table", "format", "dryRun"]
    assert (result["operation"], result["format"], result["dryRun"], result["execution"]) == (
        "expire-partitions",
        "paimon",
        False,
        "local",
    )
    assert [p["spec"]["dt"] for p in result["partitionsExpired"]] == ["2024-01-01", "2024-01-02"]
    latest = Table.open(str(root)).snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == result["snapshotId"] == 4
    assert latest.commit_kind.value == "OVERWRITE"
    assert latest.commit_user == "airflow-partitions_dag-expire"  # the connection's commit user
    # every run held the lock and released it (the refused ones too); the real run was the third
    locks = sorted(p.name for p in (root / LOCK_DIR).iterdir())
    assert locks[-2:] == ["maintenance-lock-3", "maintenance-lock-3.released"] and len(locks) == 6


@pytest.mark.usefixtures("examples")
def test_the_manual_maintenance_dag_drops_old_partitions_and_its_expiry_deletes_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.airflow.helpers import set_connection
    from tests.airflow.test_example_dags import run_dag

    root = tmp_path / "wh" / "db.db" / "events"
    table = make_table(str(root))
    for day in ("2024-01-01", "2024-01-02", "2999-01-01"):
        append(table, 2, dt=day)
    old_files = [p for p in root.rglob("*.parquet") if "2999" not in str(p)]
    assert len(old_files) == 2
    set_connection(monkeypatch, "lakeformat_default", host=str(tmp_path / "wh"))
    conf = {
        "table": "db.events",
        "dry_run": False,
        "partition_expiration_time": "30 d",
        "retain_min": 1,
        "older_than": "1 ms",
        "execution": "local",
    }
    run, states = run_dag("lakeformat_manual_maintenance", run_conf=conf)
    dropped = run.get_task_instance("expire_partitions").xcom_pull(task_ids="expire_partitions")
    assert [p["spec"]["dt"] for p in dropped["partitionsExpired"]] == ["2024-01-01", "2024-01-02"]
    assert dropped["snapshotId"] == 4 and states[("compact_data", -1)] == "success"
    # Paimon's order: the snapshot expiry after the drop deleted the dropped partitions' files
    assert not any(p.exists() for p in old_files)
    assert [p.parent.parent.name for p in root.rglob("*.parquet")] == ["dt=2999-01-01"]
