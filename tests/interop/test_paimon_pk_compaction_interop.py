"""Primary-key (merge-tree) compaction of tables pypaimon 2.1 wrote, judged by pypaimon (issue 27 acceptance).

Every table is a copy of a prepared fixture (``tests/fixtures/paimon_pk``, see
``tests/interop/pypaimon_pk_scenarios.py``): one per merge engine, 2 buckets, awkward partition values, tags,
71 small commits, every file at level 0. Each test reads the table with pypaimon at every snapshot and tag
before OUR compaction and again after it (one oracle request each way), and runs the structural checker of
``tests/support/paimon_pk.py`` on the result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileKind
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.paimon_pk import (  # noqa: F401  (fixtures)
    check_pk_table,
    listing,
    live_key_sequences,
    max_level,
    paimon_pk_pristine_fixture,
    paimon_pk_tables_fixture,
    runs_per_bucket,
)
from tests.support.pypaimon import oracle_append, run_oracle, run_oracle_batch

pytestmark = pytest.mark.interop

Copy = Callable[[str], tuple[str, dict[str, Any]]]
# Java's merge functions: the sequence number a merged key keeps ("max": the latest record's, "min": the first's).
ENGINES = {"pk_dedup": "max", "pk_dedup_seq": None, "pk_partial": "max", "pk_agg": "max", "pk_upgrade": "max"}
TRIGGER = 5  # num-sorted-run.compaction-trigger (default; no fixture sets it)


def versions(path: str, since: int = 1) -> dict[str, Any]:
    """pypaimon's rows at every snapshot from ``since`` on and at every tag, in one oracle request."""
    manager = Table.open(path).snapshot_manager
    selectors = [f"snapshot:{i}" for i in manager.list_snapshot_ids() if i >= since]
    selectors += [f"tag:{t}" for t in manager.tag_names()]
    argvs = [["read", path, f"--{s.split(':', 1)[0]}", s.split(":", 1)[1]] for s in selectors]
    return dict(zip(selectors, run_oracle_batch(argvs), strict=True))


def compact(path: str, mode: str, **kwargs: Any) -> Any:
    return open_table(path).maintenance.compact_data(mode=mode, **kwargs)


def latest_id(path: str) -> int:
    snapshot = Table.open(path).snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return snapshot.id


def file_names(path: str) -> set[str]:
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return {e.file.file_name for e in live_entries(table, snapshot)}


def assert_compacted_rows(before: dict[str, Any], after: dict[str, Any], compacted: int) -> None:
    """Every version read before reads identically after; the compaction's snapshot reads as the latest did."""
    new = after.pop(f"snapshot:{compacted}")
    assert set(after) == set(before)
    for version, rows in before.items():
        assert after[version] == rows, version
    assert new == before[f"snapshot:{compacted - 1}"]


def assert_sequences_carried(inputs: dict[Any, Any], outputs: dict[Any, Any], rule: str | None) -> None:
    """Each output record keeps a sequence number of its key's input records: the latest or the first."""
    for where, keys in outputs.items():
        for key, seqs in keys.items():
            assert len(seqs) == 1, (where, key, seqs)
            candidates = inputs[where][key]
            expected = {"max": max(candidates), "min": min(candidates), None: seqs[0]}[rule]
            assert seqs[0] in candidates and seqs[0] == expected, (where, key, seqs, candidates)


def assert_delta_pairs_up(table: Table, compacted: int, before: list[Any]) -> None:
    """The COMPACT snapshot's delta: a DELETE of every file live before (copied verbatim: same identity) and an
    ADD of every file live after, in the same partitions and buckets; the record counts follow."""
    snapshot = table.snapshot_manager.snapshot(compacted)
    _base, delta = table.data_manifests(snapshot)
    entries = [e for m in delta for e in table.manifest(m.file_name)]
    deletes = {e.identifier() for e in entries if e.kind == FileKind.DELETE}
    adds = [e for e in entries if e.kind == FileKind.ADD]
    assert deletes == {e.identifier() for e in before}
    assert {a.identifier() for a in adds} == {e.identifier() for e in live_entries(table, snapshot)}
    assert {(a.partition, a.bucket, a.total_buckets) for a in adds} <= {
        (e.partition, e.bucket, e.total_buckets) for e in before
    }
    rows_after = sum(a.file.row_count for a in adds)
    assert snapshot.delta_record_count == rows_after - sum(e.file.row_count for e in before)
    assert snapshot.total_record_count == rows_after


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_full_compaction_keeps_every_version_and_leaves_one_max_level_run(
    paimon_pk_tables: Copy, name: str
) -> None:
    path, summary = paimon_pk_tables(name)
    before = versions(path)
    assert before[f"snapshot:{summary['commits']}"], "the fixture reads some rows"
    inputs = live_key_sequences(path)
    old_files = file_names(path)
    before_entries = _entries(path)

    result = compact(path, "full")

    compacted = latest_id(path)
    assert compacted == summary["commits"] + 1 and result.to_json()["snapshotId"] == compacted
    table = Table.open(path)
    assert table.snapshot_manager.snapshot(compacted).commit_kind == CommitKind.COMPACT
    assert_compacted_rows(before, versions(path), compacted)
    top = max_level(table.schema)
    levels = runs_per_bucket(path)
    assert len(levels) == len({w for w in inputs}), "a bucket appeared or vanished"
    assert all(set(lv) == {top} for lv in levels.values()), levels
    written = file_names(path) - old_files
    assert check_pk_table(path, compact_files=written) == []
    assert_delta_pairs_up(table, compacted, before_entries)
    entries = live_entries(table, table.snapshot_manager.snapshot(compacted))
    assert all(e.file.delete_row_count == 0 for e in entries), "retractions survived at the max level"
    assert_sequences_carried(inputs, live_key_sequences(path), ENGINES[name])


def test_first_row_reads_nothing_before_and_the_first_versions_after_full_compaction(
    paimon_pk_tables: Copy,
) -> None:
    path, summary = paimon_pk_tables("pk_first_row")
    before = versions(path)
    assert summary["expectedRows"] and all(rows == [] for rows in before.values()), "level 0 is skipped"
    inputs = live_key_sequences(path)

    compact(path, "full")

    after = versions(path)
    compacted = latest_id(path)
    assert after.pop(f"snapshot:{compacted}") == summary["expectedRows"]
    assert after == before
    assert check_pk_table(path) == []
    top = max_level(Table.open(path).schema)
    assert all(set(lv) == {top} for lv in runs_per_bucket(path).values())
    assert_sequences_carried(inputs, live_key_sequences(path), "min")


def test_minor_compaction_leaves_fewer_runs_than_the_trigger(paimon_pk_tables: Copy) -> None:
    """Every bucket holds 8-13 level-0 runs, so the pick fires everywhere (the engines are the full tests'; so is
    the proof that a compaction leaves older snapshots alone: here the latest one and the tags are read)."""
    path, summary = paimon_pk_tables("pk_dedup")
    runs_before = runs_per_bucket(path)
    assert all(len(lv) >= TRIGGER for lv in runs_before.values()), "the pick fires in every bucket"
    before = versions(path, since=summary["commits"])
    old_files = file_names(path)

    compact(path, "minor")

    assert_compacted_rows(before, versions(path, since=summary["commits"]), latest_id(path))
    runs = runs_per_bucket(path)
    assert set(runs) == set(runs_before)
    for where, levels in runs.items():
        assert levels.count(0) + len({lv for lv in levels if lv}) < TRIGGER, (where, levels)
    assert check_pk_table(path, compact_files=file_names(path) - old_files) == []


def test_minor_compaction_below_the_max_level_keeps_deletes(paimon_pk_tables: Copy, tmp_path: Path) -> None:
    """After a full compaction, four small pypaimon commits to one bucket (5 runs: the trigger): the universal
    pick merges them into max level - 1 (the big max-level run is left alone) and must keep their -D, or the
    old value returns. Versions older than the full compaction are the full-compaction test's."""
    path, _summary = paimon_pk_tables("pk_minor")
    compact(path, "full")
    since = latest_id(path)
    partition = json.dumps({"p": "é"}, ensure_ascii=False)
    keys = sorted(live_key_sequences(path)[(partition, 0)])[:4]
    # Oldest first: the -D, then three +U of equal size (newest first, each run is within the size ratio of
    # the runs before it, and all four stay well below the max-level run).
    rows = [{"p": "é", "k": keys[3][0], "v": None, "op": "-D"}]
    rows += [{"p": "é", "k": k[0], "v": "minor", "op": "+U"} for k in keys[:3]]
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(rows, ensure_ascii=False))
    run_oracle("pk-upserts", path, "--rows", rows_file, "--each")
    max_files = {e.file.file_name for e in _entries(path) if e.file.level == 5}
    before = versions(path, since)
    latest = before[f"snapshot:{latest_id(path)}"]
    assert not [r for r in latest if r["p"] == "é" and r["k"] == keys[3][0]], "the -D hides the key"

    compact(path, "minor")

    assert_compacted_rows(before, versions(path, since), latest_id(path))
    levels = runs_per_bucket(path)[(partition, 0)]
    assert sorted(set(levels)) == [4, 5], levels
    assert max_files <= {e.file.file_name for e in _entries(path) if e.file.level == 5}
    assert check_pk_table(path) == []


def _entries(path: str) -> list[Any]:
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return live_entries(table, snapshot)


def test_pypaimon_upsert_after_full_compaction_wins(paimon_pk_tables: Copy) -> None:
    path, _summary = paimon_pk_tables("pk_dedup")
    compact(path, "full")
    compacted = run_oracle("read", path)
    target = dict(compacted[len(compacted) // 2])
    newer = {**target, "v": "after-compaction", "n": 999, "op": "+I"}

    oracle_append(path, [newer])

    rows = run_oracle("read", path)
    assert newer in rows and target not in rows
    assert len(rows) == len(compacted)
    newest = [e for e in _entries(path) if e.file.level == 0]
    assert len(newest) == 1
    bucket = [e for e in _entries(path) if (e.partition, e.bucket) == (newest[0].partition, newest[0].bucket)]
    top = max(e.file.max_sequence_number for e in bucket if e.file.level > 0)
    assert newest[0].file.min_sequence_number > top, "pypaimon continued from the carried sequence numbers"
    assert check_pk_table(path) == []


@pytest.mark.parametrize(
    ("name", "option"),
    [("pk_lookup", "changelog-producer"), ("pk_dv", "deletion-vectors"), ("pk_postpone", "bucket=-2")],
)
@pytest.mark.parametrize("mode", ["full", "minor"])
def test_refused_tables_are_left_untouched(paimon_pk_tables: Copy, name: str, option: str, mode: str) -> None:
    path, _summary = paimon_pk_tables(name)
    files = listing(path)
    with pytest.raises(UnsupportedFormatError, match=option):
        compact(path, mode)
    assert listing(path) == files


def _by_text(rows: Any) -> list[Any]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))


class _WriteDuring:
    """A progress sink that commits pypaimon upserts when the compaction starts writing and before it commits."""

    def __init__(self, path: str, batches: list[list[dict[str, Any]]]) -> None:
        self.path = path
        self.batches = batches
        self.written: list[int] = []

    def _write(self) -> None:
        if self.batches:
            self.written.append(oracle_append(self.path, self.batches.pop(0))["snapshotId"])

    def start(self, task: str, total: int | None) -> None:
        self._write()

    def advance(self, count: int = 1) -> None:
        pass

    def finish(self) -> None:
        self._write()


def test_pypaimon_writer_committing_during_compaction_loses_and_duplicates_nothing(
    paimon_pk_tables: Copy,
) -> None:
    path, summary = paimon_pk_tables("pk_dedup")
    latest = run_oracle("read", path)
    first = [{**r, "v": f"during-1-{r['k']}", "op": "+U"} for r in latest[::7]]
    second = [{**r, "v": f"during-2-{r['k']}", "op": "+U"} for r in latest[3::11]]
    second.append({"p": "é", "k": 5000, "v": "new key", "n": 7, "op": "+I"})
    hook = _WriteDuring(path, [first, second])

    result = compact(path, "full", progress=hook)

    assert hook.written == [summary["commits"] + 1, summary["commits"] + 2], (
        "both writes landed mid-compaction"
    )
    assert result.to_json()["snapshotBefore"] == summary["commits"], "planned before both writes"
    assert result.to_json()["snapshotId"] == summary["commits"] + 3
    assert result.to_json()["skippedBuckets"] == [], "new level-0 files are no conflict"
    expected = {(r["p"], r["k"]): r for r in latest}
    for row in first + second:
        expected[(row["p"], row["k"])] = row
    rows = run_oracle("read", path)
    assert len({(r["p"], r["k"]) for r in rows}) == len(rows), "a key read twice"
    assert _by_text(rows) == _by_text(expected.values())
    assert {e.file.level for e in _entries(path)} == {0, 5}, "pypaimon's files stay at level 0"
    assert check_pk_table(path) == []


def test_pypaimon_commit_prepared_before_our_compaction_lands_on_top(
    paimon_pk_tables: Copy, tmp_path: Path
) -> None:
    """pypaimon writes its files and takes its sequence numbers (the oracle, in a thread), we compact, then
    pypaimon commits: its level-0 file stays above the compacted run and wins; nothing else changes."""
    path, summary = paimon_pk_tables("pk_dedup")
    latest = run_oracle("read", path)
    upserts = [{**r, "v": f"racing-{r['k']}", "op": "+U"} for r in latest[1::13]]
    rows_file, prepared, proceed = tmp_path / "rows.json", tmp_path / "prepared", tmp_path / "proceed"
    rows_file.write_text(json.dumps(upserts, ensure_ascii=False))
    argv = ["pk-upserts", path, "--rows", rows_file, "--prepared", prepared, "--proceed", proceed]

    with ThreadPoolExecutor(1) as pool:
        writer = pool.submit(run_oracle, *argv)
        deadline = time.monotonic() + 120
        while not prepared.exists():
            assert not writer.done(), writer.result()
            assert time.monotonic() < deadline, "pypaimon never prepared its commit"
            time.sleep(0.02)
        result = compact(path, "full")
        proceed.touch()
        writer.result(timeout=120)

    assert result.to_json()["snapshotId"] == summary["commits"] + 1
    assert latest_id(path) == summary["commits"] + 2, "pypaimon committed after our compaction"
    expected = {(r["p"], r["k"]): r for r in latest}
    expected.update({(r["p"], r["k"]): r for r in upserts})
    assert _by_text(run_oracle("read", path)) == _by_text(expected.values())
    assert {e.file.level for e in _entries(path)} == {0, 5}
    assert check_pk_table(path) == []
