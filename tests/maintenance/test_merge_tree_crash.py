"""A primary-key compaction killed (SIGKILL) at every step converges on re-run; what it left is an orphan.

``lakeformat compact-data TABLE --full`` runs on a copy of the prepared pypaimon table ``pk_dedup`` (3 awkward
partitions x 2 buckets, 16 level-0 commits with row-kind deletes, 3 tags; ``tests/fixtures/paimon_pk``) in a
process that dies by ``SIGKILL`` at one of these fault points, so no ``finally``, no clean-up runs:

=======================  ==========================================================================================
``planned``              the plan is made, nothing written
``file-started``         the first output file is open, a chunk written to it, not closed (a torn file)
``file-written:N``       the N-th output file is closed (one per bucket here: 1 to 6; after the 6th every output
                         file is written and no manifest yet)
``manifests-written``    the delta manifest written, no manifest list (``Committer._write_manifests``)
``publishing``           merged manifests and both manifest lists written, the snapshot not (before ``publish``)
``published``            the snapshot file created, the ``LATEST`` hint not written
``hinted``               the ``LATEST`` hint written, the commit not returned
``committed``            the compaction returned, its result never printed
=======================  ==========================================================================================

The points are installed by wrapping, in the dying process only, the function that ends each step (the
compaction module's ``plan_primary_key_compaction`` / ``compact_primary_key_table``,
``kv_write._KvWriter.write`` / ``_close``, ``Committer._write_manifests`` / ``publish`` / ``write_latest_hint``):
the compaction has no fault hooks of its own. Each run must die by SIGKILL (a renamed function or a skipped step
fails the test, never passes it silently). Children are forked from one zygote per pytest process that imported
the CLI and ran one full compaction on a scratch copy, as ``tests/iceberg/test_data_compaction_crash.py`` does.

For each point, on its own copy of the table:

* the commit landed exactly when the process died after the publish (``published``, ``hinted``, ``committed``);
* a re-run of ``compact_data(mode="full")`` gives what a clean run gives: the same live files per bucket (level,
  counts, key and sequence ranges, every row), one sorted run at the max level per bucket, the structural checker
  (O2) clean, every file of every snapshot and tag present; after a landed commit the re-run has nothing to do
  (even without the ``LATEST`` hint). pypaimon reads the fixture's rows from the clean run and from the table
  whose commit landed without its hint (one oracle request): a table holding the clean run's files row for row
  reads as it does;
* three days later orphan cleanup deletes exactly what the crashed run wrote (nothing when its commit landed),
  never a file of a snapshot or a tag; within its window (3 days) it deletes nothing (checked where the crashed
  run left the most: ``publishing``).

**An unknown publish outcome** (the store fails the snapshot's create and cannot be read back; the snapshot did or
did not land): the compaction raises ``CommitStateUnknownError`` and deletes nothing at all; the table is intact
either way, a re-run converges, and orphan cleanup later takes exactly the unpublished attempt's files.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import CommitStateUnknownError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.paimon.merge_tree.compaction import compact_primary_key_table
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.faults import FaultyFileIO
from tests.support.maintenance import assert_intact
from tests.support.paimon_pk import (  # noqa: F401  (fixtures)
    check_pk_table,
    listing,
    max_level,
    paimon_pk_pristine_fixture,
    paimon_pk_tables_fixture,
    runs_per_bucket,
)
from tests.support.pypaimon import run_oracle_batch

Copy = Callable[[str], tuple[str, dict[str, Any]]]
TABLE = "pk_dedup"
BUCKETS = 6  # 3 partitions x 2 buckets, one output file each
POINTS = (
    "planned",
    "file-started",
    *(f"file-written:{n}" for n in range(1, BUCKETS + 1)),
    "manifests-written",
    "publishing",
    "published",
    "hinted",
    "committed",
)
LANDED = {"published", "hinted", "committed"}
LATER = 3 * 86400 + 3600  # seconds: past orphan cleanup's default window of 3 days

ZYGOTE = r"""
import io, json, os, signal, sys, traceback

import pyarrow.parquet  # noqa: F401  (imported once, here, for every forked run)
from airflow_lakeformat import cli
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.merge_tree import compaction, kv_write

def install(point, nth):
    hits = [0]
    def hit():
        hits[0] += 1
        if hits[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
    def wrap(owner, name, before=False, when=lambda self: True):
        original = getattr(owner, name)
        def wrapper(*args, **kwargs):
            if before:
                hit()
            result = original(*args, **kwargs)
            if not before and when(args[0] if args else None):
                hit()
            return result
        setattr(owner, name, wrapper)
    if point == "planned":
        wrap(compaction, "plan_primary_key_compaction")
    elif point == "file-started":  # a chunk written into a file still open
        wrap(kv_write._KvWriter, "write", when=lambda self: self.current is not None)
    elif point == "file-written":
        wrap(kv_write._KvWriter, "_close")
    elif point == "manifests-written":
        wrap(Committer, "_write_manifests")
    elif point == "publishing":
        wrap(Committer, "publish", before=True)
    elif point == "published":
        wrap(Committer, "publish")
    elif point == "hinted":
        wrap(Committer, "write_latest_hint")
    elif point == "committed":
        wrap(compaction, "compact_primary_key_table")
    else:
        raise ValueError(point)

warmed = False
for line in sys.stdin:
    request = json.loads(line)
    if not warmed:  # one real compaction here: every lazy import is done before the forks
        cli.main(["compact-data", request["warm"], "--full", "--json"], out=io.StringIO())
        warmed = True
    pid = os.fork()
    if pid == 0:
        code = 98
        try:
            with open(request["log"], "w") as log:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                name, _, nth = request["point"].partition(":")
                install(name, int(nth or 1))
                code = cli.main(request["argv"])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    answer = {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
    print(json.dumps(answer), flush=True)
"""


class _Zygote:
    """One interpreter with the CLI imported and warmed; each request forks a child that dies at a point."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def crash(self, point: str, argv: list[str], log: Path, warm: str) -> dict[str, Any]:
        """Run the CLI with ``argv`` in a child that dies at ``point`` (``name[:nth]``); its exit or signal."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"point": point, "argv": argv, "log": str(log), "warm": warm}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=60)


_ZYGOTES: list[_Zygote] = []


@pytest.fixture
def zygote() -> _Zygote:
    """This pytest process's zygote (started once, closed at exit)."""
    if not _ZYGOTES or _ZYGOTES[0].process.poll() is not None:
        _ZYGOTES[:] = [_Zygote()]
        atexit.register(_ZYGOTES[0].close)
    return _ZYGOTES[0]


def _layout(path: str) -> list[tuple[Any, ...]]:
    """The live files of the latest snapshot by what a re-run must reproduce (not names, not sizes): place,
    level, counts, key and sequence ranges, and every row of the file (``_KEY_*``, sequence and kind too)."""
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    paths = DataFilePaths(table.schema)
    layout = []
    for e in live_entries(table, snapshot):
        data = table.io.read_bytes(table.io.join(table.root, paths.relative_path(e)))
        rows = pq.ParquetFile(pa.BufferReader(data)).read().to_pylist()
        layout.append(
            (
                json.dumps(paths.partitions.to_json(e.partition), ensure_ascii=False),
                e.bucket,
                e.total_buckets,
                e.file.level,
                e.file.row_count,
                e.file.min_key,
                e.file.max_key,
                e.file.min_sequence_number,
                e.file.max_sequence_number,
                e.file.delete_row_count,
                tuple(tuple(sorted(r.items())) for r in rows),
            )
        )
    return sorted(layout)


def _live_names(path: str) -> set[str]:
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return {e.file.file_name for e in live_entries(table, snapshot)}


def _assert_clean_run(path: str, compact_files: set[str]) -> list[tuple[Any, ...]]:
    """The clean run's layout: one file (one sorted run) at the max level per bucket, the checker clean."""
    table = Table.open(path)
    top = max_level(table.schema)
    levels = runs_per_bucket(path)
    assert len(levels) == BUCKETS and all(lv == [top] for lv in levels.values()), levels
    assert check_pk_table(path, compact_files=compact_files) == []
    return _layout(path)


def _assert_compacted(path: str, clean: list[tuple[Any, ...]], compact_files: set[str], where: str) -> None:
    """What the clean run left, file for file and row for row (so one max-level run per bucket), the checker
    clean (it also proves the new files say COMPACT)."""
    assert _layout(path) == clean, f"{where}: the re-run differs from a clean run"
    assert check_pk_table(path, compact_files=compact_files) == [], where


def _orphan_cleanup_takes_exactly(
    path: str, leftovers: set[str], where: str, *, window: bool = False
) -> None:
    """Three days later orphan cleanup deletes exactly ``leftovers`` (relative paths), and every file of every
    snapshot and tag is there; with ``window``, first that it deletes nothing within its window."""
    on_disk = set(listing(path))
    if window:
        remove_orphan_files(Table.open(path), dry_run=False)
        assert set(listing(path)) == on_disk, f"{where}: deleted inside the orphan window"
    later = time.time() + LATER
    remove_orphan_files(Table.open(path), dry_run=False, clock=lambda: later)
    deleted = on_disk - set(listing(path))
    assert deleted == leftovers, f"{where}: {sorted(deleted ^ leftovers)}"
    assert_intact(Table.open(path), from_id=1)


def _compact_files(path: str, before: set[str]) -> set[str]:
    return _live_names(path) - before


@pytest.mark.interop
@pytest.mark.slow
def test_a_killed_compaction_converges_and_leaves_only_orphans(
    paimon_pk_tables: Copy, zygote: _Zygote, tmp_path: Path
) -> None:
    untouched, summary = paimon_pk_tables(TABLE)
    commits = summary["commits"]
    fixture_files = _live_names(untouched)
    clean_path = shutil.copytree(untouched, tmp_path / "clean" / TABLE)
    warm = shutil.copytree(untouched, tmp_path / "warm" / TABLE)
    document = open_table(str(clean_path)).maintenance.compact_data(mode="full").to_json()
    assert document["snapshotId"] == commits + 1 and document["filesWritten"] == BUCKETS, document
    clean = _assert_clean_run(str(clean_path), _compact_files(str(clean_path), fixture_files))

    tables: dict[str, str] = {}
    for point in POINTS:
        where = f"crash at {point}"
        path = str(shutil.copytree(untouched, tmp_path / point.replace(":", "-") / TABLE))
        before = set(listing(path))
        log = tmp_path / f"{point.replace(':', '-')}.log"
        answer = zygote.crash(point, ["compact-data", path, "--full", "--json"], log, str(warm))
        assert answer["signal"] == 9, f"{where}: did not die at its fault point {answer}: {log.read_text()}"
        landed = Table.open(path).snapshot_manager.latest_snapshot()
        assert landed is not None
        assert (landed.id == commits + 1) == (point.partition(":")[0] in LANDED), where
        if landed.id == commits + 1:
            assert landed.commit_kind == CommitKind.COMPACT, where
        crashed = set(listing(path)) - before
        assert bool(crashed) == (point != "planned"), f"{where}: {crashed}"
        if point.startswith("file-written:"):
            outputs = [p for p in crashed if p.endswith(".parquet")]
            assert len(outputs) == int(point.partition(":")[2]), (where, outputs)

        rerun = open_table(path).maintenance.compact_data(mode="full").to_json()
        assert rerun["snapshotId"] == (None if landed.id > commits else commits + 1), (where, rerun)
        _assert_compacted(path, clean, _compact_files(path, fixture_files), where)
        leftovers = set() if landed.id > commits else crashed
        _orphan_cleanup_takes_exactly(path, leftovers, where, window=point == "publishing")
        tables[point] = path

    # pypaimon reads the fixture's rows in the clean run and where the commit landed without its LATEST hint;
    # every other table holds the clean run's live files, row for row (one oracle request).
    reads = run_oracle_batch([["read", p] for p in (untouched, str(clean_path), tables["published"])])
    assert reads[0], "the fixture reads some rows"
    assert reads[1] == reads[0] and reads[2] == reads[0]


class _UnknownPublish(FaultyFileIO):
    """Every create of a snapshot file fails with an error that says nothing (after creating it when
    ``lands``), and while that lasts the snapshot cannot be read back: the publish outcome stays unknown.
    Every mutation is recorded (``calls``)."""

    def __init__(self, inner: FileIO, lands: bool) -> None:
        super().__init__(inner)
        self.lands = lands
        self.hidden: set[str] = set()

    def create_exclusive(self, path: str, data: bytes) -> None:
        if "/snapshot/snapshot-" not in path:
            super().create_exclusive(path, data)
            return
        self.calls.append(("create_exclusive", path))
        if self.lands and path not in self.hidden:
            FileIO.create_exclusive(self, path, data)
        self.hidden.add(path)
        raise OSError(f"connection reset while creating {path}")

    def read_bytes(self, path: str) -> bytes:
        if path in self.hidden:
            raise OSError(f"read timed out: {path}")
        return FileIO.read_bytes(self, path)


@pytest.mark.interop
def test_an_unknown_publish_outcome_deletes_nothing_and_converges(
    paimon_pk_tables: Copy, tmp_path: Path
) -> None:
    untouched, summary = paimon_pk_tables(TABLE)
    commits = summary["commits"]
    fixture_files = _live_names(untouched)
    clean_path = str(shutil.copytree(untouched, tmp_path / "clean" / TABLE))
    open_table(clean_path).maintenance.compact_data(mode="full")
    clean = _assert_clean_run(clean_path, _compact_files(clean_path, fixture_files))
    paths: dict[str, str] = {}
    for lands in (False, True):
        where = f"unknown outcome, {'landed' if lands else 'not landed'}"
        path = str(shutil.copytree(untouched, tmp_path / f"lands-{lands}" / TABLE))
        before = set(listing(path))
        io = _UnknownPublish(FileIO.for_uri(path)[0], lands)
        table = Table(io, path)
        committer = Committer(table, "compactor", max_retries=2, sleep=lambda _: None)
        with pytest.raises(CommitStateUnknownError):
            compact_primary_key_table(table, mode="full", committer=committer)
        publishes = [p for op, p in io.calls if op == "create_exclusive" and "/snapshot/snapshot-" in p]
        assert len(publishes) == 3 and len(set(publishes)) == 1, (where, publishes)  # the same id, retried
        assert [c for c in io.calls if c[0].startswith("delete")] == [], f"{where}: deleted files"
        written = set(listing(path)) - before
        assert sum(1 for p in written if p.endswith(".parquet")) == BUCKETS, (where, written)
        assert not before - set(listing(path)), where

        latest = Table.open(path).snapshot_manager.latest_snapshot()
        assert latest is not None and latest.id == (commits + 1 if lands else commits), where
        if lands:  # the snapshot that landed has every file it needs: nothing was taken back
            _assert_compacted(path, clean, _compact_files(path, fixture_files), where)
            assert_intact(Table.open(path), from_id=1)
        rerun = open_table(path).maintenance.compact_data(mode="full").to_json()
        assert rerun["snapshotId"] == (None if lands else commits + 1), (where, rerun)
        _assert_compacted(path, clean, _compact_files(path, fixture_files), where)
        _orphan_cleanup_takes_exactly(path, set() if lands else written, where)
        paths["landed" if lands else "not landed"] = path

    # pypaimon reads the fixture's rows where the snapshot landed unacknowledged (the other holds the same files)
    reads = run_oracle_batch([["read", p] for p in (untouched, paths["landed"])])
    assert reads[0] and reads[1] == reads[0]
