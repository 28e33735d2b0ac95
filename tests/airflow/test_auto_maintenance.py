"""``lakeformat_auto_maintenance`` (issue 28 point 4): ``dag.test()`` over the 4 tables of a warehouse namespace,
two per format, one of each healthy, runs exactly what each needs, and afterwards health recommends nothing.

The tables (built small and directly in the test's warehouse, ``db.db/``):

* ``db.paimon_ok``: a Paimon append table, two appends (2 files, retention defaults): healthy.
* ``db.paimon_small``: six one-row appends (6 tiny files in one bucket) with ``snapshot.time-retained=1 ms`` and
  ``snapshot.num-retained.min=1``: ``compact_data`` then ``expire_snapshots``.
* ``db.iceberg_ok``: a Hadoop-layout Iceberg v2 table, two appends: healthy.
* ``db.iceberg_deletes``: eight tiny files (5 in ``a``, 3 in ``b``), a position and an equality delete
  (merge-on-read), with ``history.expire.max-snapshot-age-ms=1`` and ``min-snapshots-to-keep=1``: ``compact_data``
  (with the options that apply the deletes) then ``expire_snapshots``.

The DAG gets only ``namespace: db``: ``resolve_tables`` lists the warehouse database (no catalog).
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.table_maintenance import PaimonMaintenance
from airflow_lakeformat.core.tables import open_table
from tests.airflow.helpers import FIELDS, append, set_connection, xcom_result
from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "dags"
DAY = datetime.date(2024, 1, 1)
PAIMON_EXPIRY = {"snapshot.time-retained": "1 ms", "snapshot.num-retained.min": "1"}
ICEBERG_EXPIRY = {"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"}
EXPECTED = {
    "db.iceberg_deletes": ["compact_data", "expire_snapshots"],
    "db.iceberg_ok": [],
    "db.paimon_ok": [],
    "db.paimon_small": ["compact_data", "expire_snapshots"],
}


@pytest.fixture
def examples(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dags/`` as a bundle of its own, beside the session's dags folder (as ``test_example_dags.py`` does)."""
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


def paimon_table(root: Path, appends: int, options: dict[str, str] | None = None) -> None:
    table = create_table(str(root), schema_from_fields(FIELDS, ["dt"], options=options))
    for i in range(appends):
        append(table, 1 + i)


def iceberg_table(root: Path, *, deletes: bool) -> None:
    """Two appends (healthy), or eight tiny files with a position and an equality delete and expiry settings."""
    properties = {"format-version": "2", **(ICEBERG_EXPIRY if deletes else {})}
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC, properties=properties)
    table = open_path_table(str(root))
    if not deletes:
        write.append(table, rows([0, 1], "a", DAY))
        write.append(table, rows([2, 3], "a", DAY))
        return
    for first in range(0, 10, 2):
        write.append(table, rows([first, first + 1], "a", DAY))
    for first in range(100, 106, 2):
        write.append(table, rows([first, first + 1], "b", DAY))
    table.refresh()
    head = table.snapshot(ref="main")
    assert head is not None
    a_file = min(f.path for f in live_files(table, head) if f.partition == ("a",))
    landing = root.parent.parent / "landing"
    pos = write_parquet(
        landing / "pos.parquet", pa.table({"file_path": [a_file], "pos": pa.array([0], pa.int64())})
    )
    eq = write_parquet(landing / "eq.parquet", pa.table({"id": pa.array([103], pa.int64())}))
    pyt = table.table
    commit_delete_files(table, [data_file(pyt, pos, ("a",), content=DataFileContent.POSITION_DELETES)])
    commit_delete_files(
        table, [data_file(pyt, eq, ("b",), content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])]
    )


def build_warehouse(warehouse: Path) -> dict[str, Path]:
    db = warehouse / "db.db"
    db.mkdir(parents=True)
    roots = {name: db / name.split(".", 1)[1] for name in EXPECTED}
    paimon_table(roots["db.paimon_ok"], 2)
    paimon_table(roots["db.paimon_small"], 6, PAIMON_EXPIRY)
    iceberg_table(roots["db.iceberg_ok"], deletes=False)
    iceberg_table(roots["db.iceberg_deletes"], deletes=True)
    return roots


def load_dag() -> Any:
    import importlib.util
    import uuid

    spec = importlib.util.spec_from_file_location(
        f"lakeformat_auto_{uuid.uuid4().hex}", EXAMPLE_DAGS / "lakeformat_auto_maintenance.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


@pytest.mark.slow
def test_runs_exactly_what_each_table_needs_and_leaves_them_healthy(
    examples: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = tmp_path / "wh"
    roots = build_warehouse(warehouse)
    set_connection(monkeypatch, "lakeformat_default", host=str(warehouse))
    before = {name: open_table(str(root)).health() for name, root in roots.items()}
    assert {name: h.operations for name, h in before.items()} == EXPECTED
    assert before["db.iceberg_deletes"].deletes["deleteFiles"] == 2

    # Paimon judges a snapshot by its successor's time: the compaction's commit is the successor of snapshot 6,
    # and an expiry in the same millisecond keeps 6 under the 1 ms retention (seen once in a clean-clone run).
    # A real retention (hours) always lies between the two; here 5 ms are let pass before the expiry.
    expire = PaimonMaintenance.expire_snapshots

    def expire_later(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.005)
        return expire(self, *args, **kwargs)

    monkeypatch.setattr(PaimonMaintenance, "expire_snapshots", expire_later)
    run = load_dag().test(run_conf={"namespace": "db"})
    states = {(ti.task_id, ti.map_index): ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states

    assert sorted(xcom_result(run, "resolve_tables")) == sorted(EXPECTED)
    summary = xcom_result(run, "summary")
    assert {name: entry["ran"] for name, entry in summary.items()} == EXPECTED
    for name, entry in summary.items():
        assert entry["score"] == before[name].score
        assert sorted(entry["changes"]) == sorted(EXPECTED[name]), entry["changes"]
    small = summary["db.paimon_small"]["changes"]
    assert small["compact_data"]["result"]["filesRewritten"] == 6, small["compact_data"]
    assert small["expire_snapshots"]["result"]["snapshotsExpired"] == 6, small["expire_snapshots"]
    deletes = summary["db.iceberg_deletes"]["changes"]
    compaction = deletes["compact_data"]["result"]
    assert (compaction["filesRewritten"], compaction["deleteFilesRemoved"]) == (8, 2), compaction
    assert deletes["expire_snapshots"]["result"]["snapshotsAfter"] == 1, deletes["expire_snapshots"]
    assert all(change["summary"] for entry in summary.values() for change in entry["changes"].values())
    # A health document per table in XCom, in the order resolve_tables gave.
    documents = [xcom_result(run, "health", map_index=i) for i in range(len(EXPECTED))]
    assert [d["operation"] for d in documents] == ["health"] * len(EXPECTED)

    after = {name: open_table(str(root)).health() for name, root in roots.items()}
    assert {name: h.operations for name, h in after.items()} == {key: [] for key in EXPECTED}, {
        name: h.to_json()["recommendations"] for name, h in after.items()
    }
    assert after["db.iceberg_deletes"].deletes["deleteFiles"] == 0
    assert after["db.paimon_small"].files["dataFiles"] == 1
    # The healthy tables were not touched: no new snapshot.
    for name in ("db.paimon_ok", "db.iceberg_ok"):
        assert after[name].snapshot_id == before[name].snapshot_id
