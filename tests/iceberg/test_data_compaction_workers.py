"""Iceberg data compaction's groups rewritten in forked worker processes (``data_compaction_workers``).

The tables here are tiny, so ``MIN_BATCH_BYTES`` is lowered to 0 for the runs that must use workers. Each such
test first proves that workers rewrote the groups (the pids ``rewrite_group`` ran in), then that the outcome is a
one-process run's: the same rows per partition, the same file per group, one commit; a worker killed in the middle
of a group leaves nothing (its announced file removed) and its group is rewritten here; a corrupt input file fails
typed, naming the file, with nothing committed and nothing left on disk. The commit's rewritten manifests, written
while the workers run, are the ones committed, or discarded when another commit landed meanwhile.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_commit as commit
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_run as run
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_workers as workers
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, local_path, write_parquet
from tests.iceberg.scenarios import create_table, rows

DAY = datetime.date(2024, 1, 1)
OPTIONS = {"min-input-files": "2", "max-concurrent-file-group-rewrites": "2"}

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
    reason="workers need fork and 2 CPUs",
)


def _table(tmp_path: Path, name: str):
    """Four partitions of two small files; a position delete of row 1 of partition b's first file."""
    table = create_table("hadoop", 2, tmp_path, name=name)
    for first in (0, 3):  # one file per partition and append
        write.append(table, pa.concat_tables(rows([first, first + 1, first + 2], c, DAY) for c in "abcd"))
    first_b = next(
        t.file.file_path
        for t in table.table.scan().plan_files()
        if 0 in pq.read_table(local_path(t.file.file_path)).column("id").to_pylist()
        and t.file.partition[0] == "b"
    )
    pos = write_parquet(
        tmp_path / f"{name}-landing" / "pos.parquet",
        pa.table({"file_path": [first_b], "pos": pa.array([1], pa.int64())}),
    )
    commit_delete_files(
        table, [data_file(table.table, pos, ("b",), content=DataFileContent.POSITION_DELETES)]
    )
    return table


def _parquet_files(table) -> set[str]:
    return {str(p) for p in Path(local_path(table.metadata.location)).rglob("*.parquet")}


def _content(table, snapshot_id) -> list[tuple[str, int, list[int]]]:
    return sorted(
        (
            task.file.partition[0],
            task.file.record_count,
            sorted(pq.read_table(local_path(task.file.file_path)).column("id").to_pylist()),
        )
        for task in table.table.scan(snapshot_id=snapshot_id).plan_files()
    )


def _allow_workers(monkeypatch) -> None:
    """Workers for these tiny tables, even when an earlier test of this process left a thread alive (the Java
    oracle's reader): the thread rule is tested on its own below."""
    monkeypatch.setattr(workers, "MIN_BATCH_BYTES", 0)
    monkeypatch.setattr(workers, "threads_allow_fork", lambda: True)


@pytest.fixture
def recorded_pids(monkeypatch, tmp_path):
    """Every ``rewrite_group`` call writes the pid it ran in (a worker's memory is its own: a file tells)."""
    _allow_workers(monkeypatch)
    log = tmp_path / "pids"
    original = run.rewrite_group

    def rewrite_group(table, group, files):
        with open(log, "a") as out:
            out.write(f"{os.getpid()} {group.partition[0]}\n")
        return original(table, group, files)

    monkeypatch.setattr(run, "rewrite_group", rewrite_group)
    return lambda: [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


def test_workers_rewrite_what_one_process_rewrites(tmp_path, recorded_pids, monkeypatch) -> None:
    serial, forked_table = _table(tmp_path, "serial"), _table(tmp_path, "forked")
    one = run.compact_data(serial, {**OPTIONS, "max-concurrent-file-group-rewrites": "1"})
    assert {pid for pid, _ in recorded_pids()} == {str(os.getpid())}
    plan = plan_data_compaction(forked_table, OPTIONS)
    assert workers.worker_count(forked_table, plan.groups, 2) == 2
    before = _parquet_files(forked_table)
    two = run.compact_data(forked_table, OPTIONS)
    in_workers = {pid for pid, _ in recorded_pids()[4:]}
    assert str(os.getpid()) not in in_workers and len(in_workers) >= 1, recorded_pids()
    assert (one.groups_committed, one.files_added, one.rows_purged) == (4, 4, 1)
    assert (two.groups_committed, two.files_added, two.rows_purged) == (4, 4, 1)
    assert len(two.snapshot_ids) == 1 and two.delete_files_removed == one.delete_files_removed
    assert _content(serial, one.snapshot_id) == _content(forked_table, two.snapshot_id)
    assert [p for p, _, _ in _content(forked_table, two.snapshot_id)] == ["a", "b", "c", "d"]
    new = _parquet_files(forked_table) - before
    assert {local_path(t.file.file_path) for t in forked_table.table.scan().plan_files()} == new


def test_a_killed_worker_leaves_nothing_and_its_group_is_rewritten_here(tmp_path, recorded_pids, monkeypatch):
    table = _table(tmp_path, "t")
    parent = os.getpid()
    original = run.rewrite_group

    def dies_in_a_worker(tbl, group, files):
        outcome = original(tbl, group, files)  # its file is written (and announced) ...
        if os.getpid() != parent and group.partition == ("c",):
            os.kill(os.getpid(), signal.SIGKILL)  # ... and its worker dies before answering
        return outcome

    monkeypatch.setattr(run, "rewrite_group", dies_in_a_worker)
    before = _parquet_files(table)
    result = run.compact_data(table, OPTIONS)
    assert (result.groups_committed, result.files_added, result.rows_purged) == (4, 4, 1)
    ran = recorded_pids()
    assert [pid for pid, cat in ran if cat == "c"][-1] == str(parent), ran  # rewritten here after the crash
    assert any(pid != str(parent) and cat == "c" for pid, cat in ran), ran
    live = {local_path(t.file.file_path) for t in table.table.scan().plan_files()}
    assert _parquet_files(table) - before == live  # the dead worker's file removed
    assert (
        sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist()).count(1) == 3
    )  # b's row 1 deleted


def test_a_hung_worker_is_killed_and_its_group_rewritten_here(tmp_path, recorded_pids, monkeypatch, caplog):
    """A worker that stops answering (here: it sleeps for an hour after writing its group's file) cannot hold
    the compaction: past STALL_SECONDS of silence it is killed, its file removed and its group rewritten here."""
    table = _table(tmp_path, "t")
    parent = os.getpid()
    original = run.rewrite_group

    def hangs_in_a_worker(tbl, group, files):
        outcome = original(tbl, group, files)
        if os.getpid() != parent and group.partition == ("c",):
            time.sleep(3600)
        return outcome

    monkeypatch.setattr(run, "rewrite_group", hangs_in_a_worker)
    monkeypatch.setattr(workers, "STALL_SECONDS", 3.0)
    before = _parquet_files(table)
    result = run.compact_data(table, OPTIONS)  # without the bound it waits the hour (pytest-timeout fails it)
    assert (result.groups_committed, result.files_added, result.rows_purged) == (4, 4, 1)
    ran = recorded_pids()
    assert [pid for pid, cat in ran if cat == "c"][-1] == str(parent), ran
    assert any(pid != str(parent) and cat == "c" for pid, cat in ran), ran
    assert "no word from compaction worker" in caplog.text
    live = {local_path(t.file.file_path) for t in table.table.scan().plan_files()}
    assert _parquet_files(table) - before == live  # the hung worker's file removed
    assert sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist()).count(1) == 3


def test_a_corrupt_input_fails_typed_naming_it_and_leaves_nothing(tmp_path, recorded_pids) -> None:
    table = _table(tmp_path, "t")
    plan = plan_data_compaction(table, OPTIONS)
    victim = local_path(plan.groups[-1].files[1].path)
    data = Path(victim).read_bytes()
    Path(victim).write_bytes(data[: len(data) // 2])
    before, head = _parquet_files(table), table.snapshot(ref="main")
    with pytest.raises(CorruptMetadataError) as caught:
        run.compact_data(table, OPTIONS)
    assert victim in str(caught.value)
    assert any(pid != str(os.getpid()) for pid, _ in recorded_pids())  # the workers ran
    assert _parquet_files(table) == before
    table.refresh()
    assert table.snapshot(ref="main") == head


def test_no_workers_when_forking_is_not_wanted(tmp_path, monkeypatch) -> None:
    table = _table(tmp_path, "t")
    groups = plan_data_compaction(table, OPTIONS).groups
    assert workers.worker_count(table, groups, 2) == 0  # a few KiB: below MIN_BATCH_BYTES
    assert workers.threads_allow_fork() == (
        threading.active_count() == 1 or workers._only_idle_pyiceberg_threads()
    )
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert not workers.threads_allow_fork()  # another Python thread alive
    finally:
        release.set()
        other.join()
    _allow_workers(monkeypatch)
    assert workers.worker_count(table, groups, 2) == 2
    assert workers.worker_count(table, groups, 1) == 0
    assert workers.worker_count(table, groups[:1], 2) == 0
    monkeypatch.setenv("LAKEFORMAT_DECODE_PROCESSES", "1")
    assert workers.worker_count(table, groups, 2) == 0
    monkeypatch.delenv("LAKEFORMAT_DECODE_PROCESSES")
    s3 = [
        replace(g, files=tuple(replace(c, path=f"s3://b/t/{n}.parquet") for n, c in enumerate(g.files)))
        for g in groups
    ]
    assert workers.worker_count(table, s3, 2) == 0  # an S3 client must not cross a fork


def _metadata_avro(table) -> set[str]:
    return {str(p) for p in Path(local_path(table.metadata.location), "metadata").glob("*.avro")}


def _referenced_avro(table) -> set[str]:
    """Every manifest list and manifest any snapshot of the table references."""
    table.refresh()
    io, found = table.table.io, set()
    for snapshot in table.metadata.snapshots:
        found.add(local_path(snapshot.manifest_list))
        found |= {local_path(m.manifest_path) for m in snapshot.manifests(io)}
    return found


@pytest.fixture
def ahead(monkeypatch):
    """The ``Prestaged`` of each batch (the manifests the run writes while its workers rewrite)."""
    seen: list[commit.Prestaged] = []
    original = commit.Prestaged.write

    def write(self, table, removed):
        seen.append(self)
        original(self, table, removed)

    monkeypatch.setattr(commit.Prestaged, "write", write)
    return seen


def test_the_manifests_written_while_workers_run_are_the_ones_committed(
    tmp_path, recorded_pids, ahead
) -> None:
    table = _table(tmp_path, "t")
    result = run.compact_data(table, OPTIONS)
    assert any(pid != str(os.getpid()) for pid, _ in recorded_pids())  # the workers ran
    assert (result.groups_committed, result.files_added, result.rows_purged) == (4, 4, 1)
    [prestaged] = ahead
    assert prestaged.used and prestaged.written
    table.refresh()
    committed = {
        local_path(m.manifest_path) for m in table.snapshot(result.snapshot_id).manifests(table.table.io)
    }
    assert {local_path(p) for p in prestaged.written} <= committed
    assert _metadata_avro(table) == _referenced_avro(table)  # nothing else was written
    assert sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist()).count(1) == 3


def test_manifests_written_ahead_of_a_commit_that_lands_on_another_head_are_discarded(
    tmp_path, recorded_pids, ahead, monkeypatch
) -> None:
    table = _table(tmp_path, "t")
    original, written = commit.Prestaged.write, []

    def then_a_concurrent_append(self, tbl, removed):
        original(self, tbl, removed)
        written.extend(self.written)
        write.append(tbl, rows([100, 101], "e", DAY))  # lands while the workers rewrite

    monkeypatch.setattr(commit.Prestaged, "write", then_a_concurrent_append)
    result = run.compact_data(table, OPTIONS)
    assert (result.groups_committed, result.files_added, result.rows_purged) == (4, 4, 1)
    [prestaged] = ahead
    assert written and not prestaged.used
    assert not {local_path(p) for p in written} & _metadata_avro(table)  # removed
    assert _metadata_avro(table) == _referenced_avro(table)
    ids = sorted(r["id"] for r in table.table.scan().to_arrow().to_pylist())
    assert ids.count(1) == 3 and {100, 101} <= set(ids)  # the concurrent append kept
