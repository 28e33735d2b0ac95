"""The create-tag operator with the real hook and connection: one direct ``execute`` per case (no DAG run)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR
from airflow_lakeformat.core.paimon.table import Table
from tests.airflow.helpers import append, make_table

pytestmark = [pytest.mark.airflow]


def context(day: int | None) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="tags_dag", task_id="tag", map_index=-1, try_number=1)
    document: dict[str, Any] = {"ti": ti, "run_id": f"scheduled__{day}"}
    if day is not None:
        document["data_interval_end"] = datetime(2024, 1, day, 0, 0, tzinfo=timezone.utc)
    return document


def test_period_tags_from_the_data_interval_with_retention_and_idempotent_reruns(warehouse: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_lakeformat.operators.create_tag import LakeformatCreateTagOperator

    root = warehouse / "db.db" / "events"
    table = make_table(str(root))
    append(table, 2)
    assert {"tag_name", "period", "period_formatter", "num_retained_max", "time_retained"} <= set(
        LakeformatCreateTagOperator.template_fields
    )
    operator = LakeformatCreateTagOperator(
        task_id="tag",
        table="db.events",
        period_formatter="without_dashes",
        num_retained_max="2",
        time_retained="3 d",
    )
    results = [operator.execute(context(day)) for day in (2, 3, 4)]
    assert [r["created"][0]["name"] for r in results] == ["20240101", "20240102", "20240103"]
    assert list(results[0])[:4] == ["operation", "table", "format", "dryRun"]
    assert results[0]["operation"] == "create-tag" and results[0]["execution"] == "local"
    assert [d["name"] for d in results[2]["deleted"]] == ["20240101"]  # num-retained-max over auto tags
    assert results[2]["created"][0]["timeRetainedMs"] == 3 * 86_400_000
    rerun = operator.execute(context(4))
    assert rerun["created"] == [] and [t["name"] for t in rerun["alreadyExisted"]] == ["20240103"]
    assert sorted(Table.open(str(root)).snapshot_manager.tag_names()) == ["20240102", "20240103"]
    assert (root / LOCK_DIR).exists()  # real runs took the maintenance lock

    named = LakeformatCreateTagOperator(
        task_id="tag", table="db.events", tag_name="release", ignore_if_exists=False
    )
    assert named.execute(context(None))["created"][0]["name"] == "release"
    with pytest.raises(AirflowFailException, match="already exists"):
        named.execute(context(None))
    bad = LakeformatCreateTagOperator(task_id="tag", table="db.events", period="weekly")
    with pytest.raises(AirflowFailException, match="creation-period"):
        bad.execute(context(5))
