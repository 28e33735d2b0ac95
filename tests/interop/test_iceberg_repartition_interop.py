"""Data compaction of files of older partition specs, re-partitioned into the current spec, read back by Java
Iceberg 1.10.2 (issue 26; ``core/iceberg/maintenance/data_compaction_repartition.py``).

``partition_evolution`` (the oracle's foundation table) has three specs: ``category``; ``category`` +
``bucket(4, id)``; ``bucket(4, id)`` + ``months(event_date)`` (current), a renamed column and merge-on-read
deletes. We compact it with ``rewrite-all`` (every group, older specs included, as Java's ``rewrite_data_files``
writes them into the current spec) on the table restored in place; then in one Java request:

* Java reads exactly the rows it read before (deletes applied once, nothing lost or duplicated);
* every live data file is of the current spec, and each row's ``_partition`` and its file's partition in Java's
  ``files`` table equal Java's own transforms of the row (``hc.system.bucket(4, id)``,
  ``hc.system.months(event_date)``), so every row lies in the right partition;
* our snapshot is a ``replace``.
"""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from tests.support.java_iceberg import JavaIcebergWarehouse

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_older_spec_groups_are_rewritten_into_the_current_spec(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    w = fresh_java_iceberg_warehouse
    summary = w.tables["partition_evolution"]
    table = open_path_table(summary["path"])
    current = table.metadata.default_spec_id
    before = {f["spec_id"] for f in w.baseline["partition_evolution"]["files"]["snapshots"][str(
        w.baseline["partition_evolution"]["files"]["current_snapshot_id"])] if f["content"] == 0}  # fmt: skip
    assert len(table.metadata.specs()) == 3 and before - {current}, before  # files of older specs are live
    result = compact_data(table, {"rewrite-all": "true"})
    assert result.snapshot_id is not None, result.summary()
    identifier = summary["identifier"]
    check = (
        "SELECT r.id, r._spec_id AS spec_id, r._partition AS row_partition, f.partition AS file_partition, "
        "named_struct('id_bucket', hc.system.bucket(4, r.id), 'event_month', hc.system.months(r.event_date)) "
        f"AS java_partition FROM (SELECT _file, _spec_id, _partition, * FROM {identifier}) r "
        f"JOIN {identifier}.files f ON r._file = f.file_path"
    )
    rows, files, placed, snapshots = w.batch(
        [
            ["rows", "--table", identifier],
            ["files", "--table", identifier, "--source", "java"],
            ["sql", "--statement", check],
            ["snapshots", "--table", identifier],
        ]
    )
    assert rows == w.baseline["partition_evolution"]["rows"]
    data = [f for f in files if f["content"] == 0]
    assert data and {f["spec_id"] for f in data} == {current}, data
    [placed_rows] = placed
    assert len(placed_rows) == len(rows)
    for one in placed_rows:
        assert one["spec_id"] == current, one
        # Java's partition struct is the union of every spec's fields: the dropped ``category`` is null
        expected = {"category": None, **one["java_partition"]}
        assert one["file_partition"] == expected == one["row_partition"], one
    [head] = [s for s in snapshots["snapshots"] if s["snapshot_id"] == result.snapshot_id]
    assert head["operation"] == "replace" and snapshots["current_snapshot_id"] == result.snapshot_id
