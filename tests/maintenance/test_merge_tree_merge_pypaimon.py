"""merge_kv against pypaimon 2.1's merge-on-read, on the prepared primary-key fixture tables.

For every table of ``tests/fixtures/paimon_pk`` whose engine pypaimon reads by merging (deduplicate, with
``sequence.field``, partial-update, aggregation), at the latest snapshot and every tag: the raw files of each
(partition, bucket) are read with ``read_kv``, concatenated, merged with ``merge_kv(drop_deletes=True)``, and
the rows must be exactly the rows pypaimon reads (one oracle request per table). The first-row table is
checked against the first version of each key that its scenario recorded (pypaimon's batch read skips level
0, where all its files are). Nothing is written: the session's unpacked fixture is only read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.merge_tree.kv_read import read_kv
from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from tests.support.paimon_pk import paimon_pk_pristine_fixture  # noqa: F401  (fixture)
from tests.support.pypaimon import run_oracle_batch

pytestmark = pytest.mark.interop

MERGED_ON_READ = ("pk_dedup", "pk_dedup_seq", "pk_partial", "pk_agg", "pk_upgrade")


def _normal(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str, ensure_ascii=False) for row in rows)


def merged_rows(table: Table, snapshot: Snapshot) -> list[dict[str, Any]]:
    """The rows a merge-on-read of ``snapshot`` gives with merge_kv: every bucket's files merged, deletes dropped."""
    schema = table.schema
    spec = MergeSpec.from_schema(schema, table.uri)
    per_bucket: dict[tuple[bytes, int], list[pa.Table]] = defaultdict(list)
    for entry in live_entries(table, snapshot):
        per_bucket[(entry.partition, entry.bucket)].append(read_kv(table, entry, schema))
    names = [f.name for f in schema.fields]
    rows: list[dict[str, Any]] = []
    for parts in per_bucket.values():
        rows += merge_kv(pa.concat_tables(parts), spec, drop_deletes=True).select(names).to_pylist()
    return rows


@pytest.mark.parametrize("name", MERGED_ON_READ)
def test_merge_kv_reads_what_pypaimon_reads(
    name: str, paimon_pk_pristine: tuple[Path, dict[str, Any]]
) -> None:
    warehouse, document = paimon_pk_pristine
    path = str(warehouse / document["tables"][name]["path"])
    table = Table.open(path)
    manager = table.snapshot_manager
    latest = manager.latest_snapshot()
    assert latest is not None
    versions = {f"snapshot:{latest.id}": latest} | {
        f"tag:{tag}": manager.tag(tag) for tag in manager.tag_names()
    }
    argvs = [["read", path, f"--{v.split(':', 1)[0]}", v.split(":", 1)[1]] for v in versions]
    expected = dict(zip(versions, run_oracle_batch(argvs), strict=True))
    assert any(expected.values()), "the fixture reads some rows"
    for version, snapshot in versions.items():
        assert _normal(merged_rows(table, snapshot)) == _normal(expected[version]), version


def test_first_row_merge_gives_each_keys_first_version(
    paimon_pk_pristine: tuple[Path, dict[str, Any]],
) -> None:
    warehouse, document = paimon_pk_pristine
    summary = document["tables"]["pk_first_row"]
    table = Table.open(str(warehouse / summary["path"]))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    assert _normal(merged_rows(table, latest)) == _normal(summary["expectedRows"])
