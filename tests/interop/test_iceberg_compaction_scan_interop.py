"""The deletes a compaction applies to each data file equal those Java's planned scan attaches.

Java's ``rewrite_data_files`` reads each group with ``task.deletes()`` (``DeleteFileIndex.forDataFile``); the
planner here attaches deletes with our own index (``core/iceberg/maintenance/data_compaction_deletes.py``). For
every snapshot of every table the oracle built with deletes (merge-on-read position deletes, file- and
partition-scoped; a v1 table upgraded to v2; three partition specs; tags and branches), the two must name the
same delete files for the same data files. One oracle request per table covers all its snapshots.
"""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_table
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import scan_for_compaction
from tests.support.java_iceberg import JavaIcebergWarehouse

pytestmark = [pytest.mark.interop, pytest.mark.slow]

WITH_DELETES = ("v2_mor", "v1_to_v2", "partition_evolution", "tags_branches")


@pytest.mark.parametrize("name", WITH_DELETES)
def test_attached_deletes_equal_javas_scan_tasks_at_every_snapshot(
    java_iceberg_warehouse: JavaIcebergWarehouse, name: str
) -> None:
    summary = java_iceberg_warehouse.tables[name]
    table = open_table(summary["path"])
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    java = java_iceberg_warehouse.batch(
        [["scan-tasks", "--table", summary["identifier"], "--snapshot", str(s)] for s in snapshots]
    )
    with_deletes = 0
    for snapshot_id, expected in zip(snapshots, java, strict=True):
        scan = scan_for_compaction(table, table.snapshot(snapshot_id))
        ours = {c.path: sorted(d.path for d in c.deletes) for c in scan.candidates}
        assert ours == expected, f"{name} at snapshot {snapshot_id}"
        with_deletes += sum(1 for paths in ours.values() if paths)
    # the scenario really exercises the rule: some data file has deletes attached at some snapshot
    assert with_deletes > 0, name


def test_a_v3_table_with_deletion_vectors_is_refused_typed(
    java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    table = open_table(java_iceberg_warehouse.tables["v3_dv"]["path"])
    with pytest.raises(UnsupportedFormatError, match="format-version 3"):
        plan_data_compaction(table)
