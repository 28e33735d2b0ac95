"""The structural checker of primary-key tables (``tests/support/paimon_pk.py``) passes on the level-0 files
pypaimon 2.1 wrote and finds each corruption planted in a copy: in a data file's rows, or in its manifest
entry (served through a patched ``live_entries``, so no manifest has to be rewritten). No pypaimon runs here."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import DataType
from tests.support import paimon_pk
from tests.support.paimon_pk import (  # noqa: F401  (fixtures)
    check_pk_table,
    paimon_pk_pristine_fixture,
    paimon_pk_tables_fixture,
)

Copy = Callable[[str], tuple[str, dict[str, Any]]]
Change = Callable[[Table, list[ManifestEntry]], None]
CHECKED = (
    "pk_dedup",
    "pk_minor",
    "pk_dedup_seq",
    "pk_partial",
    "pk_agg",
    "pk_first_row",
    "pk_upgrade",
    "pk_lookup",
    "pk_dv",
)
BIGINT = DataType(root="BIGINT", nullable=False)


def test_pypaimon_level0_files_pass(paimon_pk_pristine: tuple[Any, dict[str, Any]]) -> None:
    warehouse, document = paimon_pk_pristine
    for name in CHECKED:
        assert check_pk_table(str(warehouse / document["tables"][name]["path"])) == [], name


def _order(entry: ManifestEntry) -> tuple[Any, ...]:
    return (entry.partition, entry.bucket, entry.file.min_sequence_number)


def _serve(monkeypatch: pytest.MonkeyPatch, change: Change) -> None:
    """Make the checker see the live entries (copies, in a fixed order) as ``change`` edits them."""
    original = live_entries

    def patched(table: Table, snapshot: Any) -> list[ManifestEntry]:
        entries = sorted(original(table, snapshot), key=_order)
        copies = [ManifestEntry({**e.record, "_FILE": dict(e.file.record)}) for e in entries]
        change(table, copies)
        return copies

    monkeypatch.setattr(paimon_pk, "live_entries", patched)


def _set(index: int, **fields: Any) -> Change:
    def change(table: Table, entries: list[ManifestEntry]) -> None:
        entries[index].file.record.update(fields)

    return change


def _keys(table: Table, entry: ManifestEntry) -> set[int]:
    path = table.io.join(table.root, DataFilePaths(table.schema).relative_path(entry))
    return set(pq.read_table(path, columns=["k"]).column("k").to_pylist())


def _levels_sharing_a_key(lower: int, higher: int) -> Change:
    """Two files of one bucket that share a key: the NEWER one moved to ``higher``, the older to ``lower``."""

    def change(table: Table, entries: list[ManifestEntry]) -> None:
        keys = [_keys(table, e) for e in entries]
        for (older, old_keys), (newer, new_keys) in itertools.combinations(
            zip(entries, keys, strict=True), 2
        ):
            same_bucket = (older.partition, older.bucket) == (newer.partition, newer.bucket)
            if same_bucket and old_keys & new_keys:
                older.file.record["_LEVEL"], newer.file.record["_LEVEL"] = lower, higher
                return
        raise AssertionError("no two files share a key")

    return change


def _total_buckets(table: Table, entries: list[ManifestEntry]) -> None:
    entries[1].record["_TOTAL_BUCKETS"] = entries[1].total_buckets = 3


def _swap_key_stats(table: Table, entries: list[ManifestEntry]) -> None:
    stats = entries[0].file.record["_KEY_STATS"]
    entries[0].file.record["_KEY_STATS"] = {
        **stats,
        "_MIN_VALUES": stats["_MAX_VALUES"],
        "_MAX_VALUES": stats["_MIN_VALUES"],
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set(0, _MIN_SEQUENCE_NUMBER=-1), "sequence range"),
        (_set(1, _ROW_COUNT=999), "_ROW_COUNT 999"),
        (_set(1, _FILE_SIZE=1), "_FILE_SIZE 1"),
        (_set(2, _DELETE_ROW_COUNT=None), "_DELETE_ROW_COUNT None"),
        (_set(2, _LEVEL=9), "_LEVEL 9 outside 0..5"),
        (_set(0, _FILE_SOURCE=None), "_FILE_SOURCE is null"),
        (_set(3, _MIN_KEY=binary_row.encode([-5], [BIGINT])), "_MIN_KEY != the first key"),
        (_set(3, _MAX_KEY=binary_row.encode([10**6], [BIGINT])), "_MAX_KEY != the last key"),
        (_swap_key_stats, "_KEY_STATS min"),
        (_set(4, _VALUE_STATS_COLS=None), "_VALUE_STATS rows have arity (0, 0)"),
        (_total_buckets, "_TOTAL_BUCKETS"),
        (_levels_sharing_a_key(1, 1), "overlap"),
        (_levels_sharing_a_key(1, 2), "at level 1 <="),
    ],
    ids=[
        "seq", "rows", "size", "deletes-null", "level", "source", "min-key", "max-key", "key-stats",
        "value-stats", "total-buckets", "overlap", "lsm",
    ],
)  # fmt: skip
def test_manifest_corruptions_are_found(
    paimon_pk_pristine: tuple[Any, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    change: Change,
    message: str,
) -> None:
    warehouse, document = paimon_pk_pristine  # read-only here: the corruptions are served, not written
    path = str(warehouse / document["tables"]["pk_upgrade"]["path"])
    _serve(monkeypatch, change)
    problems = check_pk_table(path)
    assert any(message in p for p in problems), problems


def test_a_retraction_counted_as_zero_above_level_0_is_found(
    paimon_pk_pristine: tuple[Any, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pypaimon's level-0 files say 0 deletes whatever they hold (accepted); at level >= 1 that is an error."""
    warehouse, document = paimon_pk_pristine  # read-only here: the corruption is served, not written
    path = str(warehouse / document["tables"]["pk_upgrade"]["path"])

    def with_retractions(table: Table, entries: list[ManifestEntry]) -> None:
        for entry in entries:
            file = table.io.join(table.root, DataFilePaths(table.schema).relative_path(entry))
            kinds = pq.read_table(file, columns=["_VALUE_KIND"]).column(0).to_pylist()
            if entry.file.delete_row_count == 0 and any(k in (1, 3) for k in kinds):
                entry.file.record["_LEVEL"] = 3
                return
        raise AssertionError("no file holds a retraction")

    _serve(monkeypatch, with_retractions)
    problems = check_pk_table(path)
    assert any("_DELETE_ROW_COUNT 0 !=" in p for p in problems), problems


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.take(list(range(t.num_rows))[::-1]), "keys not strictly ascending"),
        (lambda t: pa.concat_tables([t, t.slice(t.num_rows - 1)]), "keys not strictly ascending"),
        (lambda t: t.set_column(0, "_KEY_k", pc.add(t.column(0), 1)), "_KEY_k differs from k"),
        (lambda t: t.select([1, 0, *range(2, t.num_columns)]), "columns ["),
    ],
    ids=["descending", "duplicate", "key-column", "column-order"],
)
def test_data_file_corruptions_are_found(
    paimon_pk_tables: Copy, edit: Callable[[pa.Table], pa.Table], message: str
) -> None:
    path, _summary = paimon_pk_tables("pk_upgrade")
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    entry = max(live_entries(table, snapshot), key=lambda e: e.file.row_count)
    file = table.io.join(table.root, DataFilePaths(table.schema).relative_path(entry))
    pq.write_table(edit(pq.read_table(file)), file)
    problems = check_pk_table(path)
    assert any(message in p for p in problems), problems
