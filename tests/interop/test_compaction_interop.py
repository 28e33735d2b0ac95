"""Manifest compaction of pypaimon-written tables: pypaimon reads identical rows everywhere afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.paimon.table import Table
from tests.support.pypaimon import run_oracle_batch

pytestmark = pytest.mark.interop

TABLES = ("overwrite_tag_consumer", "pk_buckets", "many_commits", "append_partitioned", "unpartitioned_pk")


def all_rows(path: str) -> dict[str, Any]:
    """pypaimon's rows at every snapshot and tag of one table, in one oracle process."""
    table = Table.open(path)
    manager = table.snapshot_manager
    selectors = [("snapshot", str(i)) for i in manager.list_snapshot_ids()] + [
        ("tag", t) for t in manager.tag_names()
    ]
    results = run_oracle_batch([["read", path, f"--{kind}", value] for kind, value in selectors])
    return {f"{kind}:{value}": rows for (kind, value), rows in zip(selectors, results, strict=True)}


@pytest.mark.parametrize("mode", ["minor", "full"])
def test_compaction_keeps_pypaimon_rows_identical(
    fresh_pypaimon_warehouse: dict[str, Any], mode: str
) -> None:
    merged_somewhere = False
    for name in TABLES:
        path = fresh_pypaimon_warehouse["tables"][name]["path"]
        before = all_rows(path)
        table = Table.open(path)
        latest_before = table.snapshot_manager.latest_snapshot()
        assert latest_before is not None
        result = compact_manifests(table, mode)  # type: ignore[arg-type]
        after = all_rows(path)
        if result.changed:
            merged_somewhere = True
            assert result.snapshot_id == latest_before.id + 1
            compacted = after.pop(f"snapshot:{result.snapshot_id}")
            assert compacted == before[f"snapshot:{latest_before.id}"], name
            assert result.manifests_after < result.manifests_before
        assert after == before, name
    assert merged_somewhere


def test_pypaimon_appends_on_top_of_a_compacted_snapshot(fresh_pypaimon_warehouse: dict[str, Any]) -> None:
    from tests.support.pypaimon import oracle_append, oracle_read

    path = fresh_pypaimon_warehouse["tables"]["overwrite_tag_consumer"]["path"]
    rows_before = oracle_read(path)
    result = compact_manifests(Table.open(path), "full")
    assert result.snapshot_id is not None
    template = dict(rows_before[0])
    template["id"] = 987654
    oracle_append(path, [template])
    table = Table.open(path)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == result.snapshot_id + 1
    base, _ = table.data_manifests(latest)
    compacted = table.snapshot_manager.snapshot(result.snapshot_id)
    merged_names = {m.file_name for m in table.manifest_list(compacted.base_manifest_list)}
    assert merged_names <= {m.file_name for m in base}  # pypaimon built its base on our merged manifests
    assert sorted(map(str, oracle_read(path))) == sorted(map(str, [*rows_before, template]))
