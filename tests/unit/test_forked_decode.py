"""Half of a large metadata read in a forked child (``core/forked.py``) gives what one process gives.

* ``run_split`` runs the first half in another process, and whenever that child fails (raises, dies,
  returns what does not pickle) runs the half here instead: the half is never lost, and errors are raised
  here as a one-process run raises them; a failing second half kills and reaps the child.
* Forking is refused with another Python thread alive, with ``LAKEFORMAT_DECODE_PROCESSES=1``, and in a
  forked child.
* Reachability and orphan cleanup over real pyiceberg tables (branches, tags, deletes, overwrites, schema
  and spec changes; a chain of fast appends) read the same lists, manifests and paths, record the same
  carried-over rows and sizes, and raise the same missing and corrupt file errors, split or not.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import plan_orphan_cleanup
from airflow_lakeformat.core.iceberg.reach import reach_split, reachability
from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader, reachable_files
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.scenarios import build, create_table, rows

PARENT = os.getpid()


FORKED: list[int] = []  # the processes this test forked (the suite's servers are children too)


@pytest.fixture(autouse=True)
def _record_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    FORKED.clear()
    real_fork = os.fork

    def recording() -> int:
        pid = real_fork()
        if pid:
            FORKED.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording)


def _no_children_left() -> bool:
    """Every process this test forked was reaped (waiting for it finds no such child)."""
    for pid in FORKED:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return bool(FORKED)


# -- run_split -------------------------------------------------------------------------------------


def test_the_first_half_runs_in_a_child_process() -> None:
    theirs, mine = forked.run_split(os.getpid, (), os.getpid, fork=True)
    assert mine == PARENT and theirs != PARENT
    assert _no_children_left()


def test_a_host_that_reaps_children_itself_does_not_break_the_split() -> None:
    """With SIGCHLD ignored the kernel reaps children at once and waitpid finds none."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        theirs, mine = forked.run_split(os.getpid, (), os.getpid, fork=True)
        with forked.helper() as helper:
            assert helper is None or forked.run_split(os.getpid, (), lambda: 0)[0] == helper.pid
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert mine == PARENT and theirs != PARENT


def test_without_a_fork_both_halves_run_here() -> None:
    assert forked.run_split(os.getpid, (), lambda: "mine", fork=False) == (PARENT, "mine")


def _fails_in_a_child(how: str) -> Any:
    if os.getpid() == PARENT:
        return ["done here", PARENT]
    if how == "raise":
        raise MissingMetadataError("file:/t/metadata/snap-1.avro", "snapshot 1")
    if how == "die":
        os._exit(3)
    return lambda: None  # does not pickle


@pytest.mark.parametrize("how", ["raise", "die", "unpicklable"])
def test_a_failed_child_half_is_run_here(how: str) -> None:
    theirs, mine = forked.run_split(_fails_in_a_child, (how,), lambda: "mine", fork=True)
    assert theirs == ["done here", PARENT] and mine == "mine"
    assert _no_children_left()


def test_a_failing_parent_half_kills_and_reaps_the_child() -> None:
    def slow_child() -> int:
        threading.Event().wait(30)
        return 1

    def failing() -> None:
        raise CorruptMetadataError("file:/t/metadata/m0.avro", "garbage")

    with pytest.raises(CorruptMetadataError, match=r"m0\.avro"):
        forked.run_split(slow_child, (), failing, fork=True)
    assert _no_children_left()


def test_forking_is_refused_with_other_python_threads_and_when_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(forked.ENV_PROCESSES, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert forked.fork_allowed()
    monkeypatch.setenv(forked.ENV_PROCESSES, "1")
    assert not forked.fork_allowed()
    monkeypatch.delenv(forked.ENV_PROCESSES)
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not forked.fork_allowed()
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not forked.fork_allowed()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(forked, "_in_child", True)
    assert not forked.fork_allowed()


# -- the plan's helper process -----------------------------------------------------------------------


def _pid_or_fail(how: str) -> int:
    if os.getpid() != PARENT and how == "raise":
        raise CorruptMetadataError("file:/t/metadata/m0.avro", "garbage")
    return os.getpid()


@pytest.fixture
def helper_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "fork_allowed", lambda: not forked._in_child)


def test_the_helper_runs_every_first_half_in_one_process(helper_allowed: None) -> None:
    with forked.helper({"table": "t"}) as helper:
        assert helper is not None and forked.helper_open()
        pids = {forked.run_split(_pid_or_fail, ("ok",), os.getpid)[0] for _ in range(3)}
        assert pids == {helper.pid} and helper.pid != PARENT and helper.answered == 3
        with forked.helper() as nested:
            assert nested is None  # one helper per plan
        assert forked.context() == {"table": "t"}
    assert not forked.helper_open() and forked.context() == {}
    assert _no_children_left()


def test_what_the_helper_cannot_do_is_done_here(helper_allowed: None) -> None:
    with forked.helper() as helper:
        assert helper is not None
        # A task that fails there runs here; the helper stays for the next one.
        assert forked.run_split(_pid_or_fail, ("raise",), lambda: 0) == (PARENT, 0)
        assert helper.alive
        # A task that does not pickle runs here.
        assert forked.run_split(lambda: os.getpid(), (), lambda: 0) == (PARENT, 0)
        # A helper that died: this task and the rest run here.
        assert helper.pid is not None
        os.kill(helper.pid, 9)
        assert forked.run_split(_pid_or_fail, ("ok",), lambda: 0) == (PARENT, 0)
        assert not helper.alive
        assert forked.run_split(_pid_or_fail, ("ok",), lambda: 0) == (PARENT, 0)
    assert _no_children_left()


def test_a_released_helper_leaves_and_the_rest_runs_here(helper_allowed: None) -> None:
    with forked.helper() as helper:
        assert helper is not None and forked.run_split(_pid_or_fail, ("ok",), lambda: 0)[0] == helper.pid
        forked.release_helper()
        assert not helper.alive and not forked.helper_open()
        assert forked.run_split(_pid_or_fail, ("ok",), lambda: 0) == (PARENT, 0)
    assert _no_children_left()


def test_a_failing_half_here_closes_the_helper(helper_allowed: None) -> None:
    def failing() -> None:
        raise MissingMetadataError("file:/t/metadata/snap-1.avro", "snapshot 1")

    with forked.helper() as helper, pytest.raises(MissingMetadataError):
        assert helper is not None
        forked.run_split(_pid_or_fail, ("ok",), failing)
    assert helper is not None and not helper.alive
    assert _no_children_left()


# -- reachability, split or not ------------------------------------------------------------------------


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch, _record_forks: None) -> list[int]:
    """Split every local read of two or more files; returns the pids of the children forked."""
    monkeypatch.setattr(reachability, "FORK_MIN_BYTES", 0)
    monkeypatch.setattr(forked, "fork_allowed", lambda: not forked._in_child)
    return FORKED


class Paths:
    """A path sink that keeps every path given, grouped or not."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def add_all(self, locations: Iterable[str]) -> int:
        before = len(self.paths)
        self.paths.extend(locations)
        return len(self.paths) - before

    def add_grouped(self, groups: Iterable[tuple[str, str]]) -> int:
        return self.add_all(d + name for d, joined in groups for name in joined.split("\0"))


def _read(table: Any) -> tuple[ReachabilityReader, Any]:
    reader = ReachabilityReader(table)
    snapshots = table.metadata.snapshots
    found = reachable_files(table, snapshots, reader=reader, read_content=False)
    live = Paths()
    reader.add_live_paths(list(found.manifests.values()), live)
    return reader, (found.all_paths(), sorted(live.paths))


def _state(reader: ReachabilityReader) -> Any:
    return (reader._lists, reader.sizes, reader.lists_read, reader.manifests_read)


def _fast_append_chain(tmp_path: Path, commits: int) -> Any:
    table = create_table("hadoop", 2, tmp_path)
    for i in range(commits):
        write.append(table, rows([i], f"c{i % 3}", datetime.date(2024, 1, 1 + i % 28)))
    return table


@pytest.mark.parametrize("shape", ["scenario", "fast-appends"])
def test_a_split_read_is_the_one_process_read(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    table = build("hadoop", 2, tmp_path).table if shape == "scenario" else _fast_append_chain(tmp_path, 24)
    split_reader, split = _read(table)
    assert len(forks) == 2, "the lists and the manifests were each read half in a child"
    monkeypatch.setattr(forked, "fork_allowed", lambda: False)
    one_reader, one = _read(table)
    assert split == one
    assert _state(split_reader) == _state(one_reader)
    # Rows carried over from a parent list are the same; a list whose parent list the other process
    # decoded is decoded whole (in a chain of fast appends, only the first list after the cut).
    carried, one_carried = split_reader.own_rows, one_reader.own_rows
    assert carried.items() <= one_carried.items()
    if shape == "fast-appends":
        assert len(one_carried) - len(carried) == 1
    if shape == "fast-appends":
        assert len(split_reader.own_rows) >= 20, (
            "lists on both sides of the cut were decoded as new rows only"
        )


def test_orphan_cleanup_plans_the_same_split_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    scenario = build("hadoop", 2, tmp_path)
    table = scenario.table
    orphan = Path(table.metadata.location.removeprefix("file:")) / "data" / "orphan.parquet"
    orphan.write_bytes(b"x")
    os.utime(orphan, (1e9, 1e9))
    helpers: list[forked.Helper] = []
    real_init = forked.Helper.__init__

    def recording(self: forked.Helper) -> None:
        real_init(self)
        helpers.append(self)

    monkeypatch.setattr(forked.Helper, "__init__", recording)
    now = time.time()  # one clock for both plans: the cutoff is quoted in the plan's decisions
    split = plan_orphan_cleanup(table, older_than=timedelta(days=1), clock=lambda: now)
    assert forks and len(helpers) == 1
    assert helpers[0].answered == 2, "the plan's helper read half of the lists and of the manifests"
    monkeypatch.setattr(forked, "fork_allowed", lambda: False)
    one = plan_orphan_cleanup(table, older_than=timedelta(days=1), clock=lambda: now)
    assert [r.path for r in split.orphans] == [r.path for r in one.orphans] == [str(orphan)]
    split_doc, one_doc = split.to_json(sample_limit=0), one.to_json(sample_limit=0)
    assert split_doc["cutoff"] and split_doc == one_doc


def _old_manifest_list(table: Any) -> Path:
    oldest = min(table.metadata.snapshots, key=lambda s: s.sequence_number)
    return Path(oldest.manifest_list.removeprefix("file:"))


def test_a_missing_list_in_the_childs_half_is_missing_as_in_one_process(
    tmp_path: Path, forks: list[int]
) -> None:
    table = _fast_append_chain(tmp_path, 12)
    gone = _old_manifest_list(table)
    gone.unlink()
    with pytest.raises(MissingMetadataError, match=gone.name):
        reachable_files(table, table.metadata.snapshots, reader=ReachabilityReader(table))
    found = reachable_files(
        table, table.metadata.snapshots, reader=ReachabilityReader(table), missing_ok=True
    )
    assert [m.removeprefix("file:") for m in found.missing] == [str(gone)]
    assert forks


def test_a_corrupt_manifest_in_the_childs_half_is_refused_here(tmp_path: Path, forks: list[int]) -> None:
    table = _fast_append_chain(tmp_path, 12)
    reader = ReachabilityReader(table)
    found = reachable_files(table, table.metadata.snapshots, reader=reader, read_content=False)
    manifests = list(found.manifests.values())
    broken = Path(manifests[len(manifests) // 4].path.removeprefix("file:"))  # in the child's half
    broken.write_bytes(broken.read_bytes()[:-40] + b"\x00" * 40)
    with pytest.raises(CorruptMetadataError, match=broken.name):
        ReachabilityReader(table).add_live_paths(manifests, Paths())
    assert forks


# -- the listing, split or not ------------------------------------------------------------------------


def _tree(root: Path) -> None:
    for p in range(20):
        for f in range(3):
            (root / "data" / f"p={p}").mkdir(parents=True, exist_ok=True)
            (root / "data" / f"p={p}" / f"{f}.parquet").write_bytes(b"x")
        (root / "data" / f"p={p}" / "_SUCCESS").write_bytes(b"")
    (root / "metadata").mkdir()
    (root / "metadata" / "v1.metadata.json").write_bytes(b"{}")


def _names(listing: Any) -> Any:
    found = {(d, n) for d, joined in listing.directories for n in joined.split("\0")}
    return found, listing.files_listed, listing.hidden, listing.requests


@pytest.mark.parametrize("case", ["queue", "queue-and-alongside", "child-dies", "halves-in-a-helper"])
def test_a_split_listing_is_the_one_process_listing(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch, forks: list[int]
) -> None:
    """Both processes take directories from one queue (this one after its alongside work); when the child
    dies after a directory, this process lists all it did not take; with a helper open, halves."""
    from airflow_lakeformat.core.iceberg.maintenance import orphan_local
    from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import HiddenFilter
    from airflow_lakeformat.core.iceberg.maintenance.orphan_local import list_local_names

    _tree(tmp_path)
    ran: list[int] = []
    alongside = case == "queue-and-alongside"
    if case == "child-dies":
        real_list_trees = orphan_local._list_trees

        def dying(roots: Any, hidden: Any, listing: Any) -> Any:
            found = real_list_trees(roots, hidden, listing)
            if os.getpid() != PARENT:
                os._exit(3)
            return found

        monkeypatch.setattr(orphan_local, "_list_trees", dying)
    with forked.helper() if case == "halves-in-a-helper" else contextlib.nullcontext():
        split = list_local_names(
            [str(tmp_path)],
            HiddenFilter(),
            alongside=(lambda: ran.append(os.getpid())) if alongside else None,
        )
    assert len(forks) == 1 and ran == ([PARENT] if alongside else [])
    monkeypatch.setattr(forked, "fork_allowed", lambda: False)
    one = list_local_names([str(tmp_path)], HiddenFilter())
    assert _names(split) == _names(one)
    assert one.files_listed == 61 and one.hidden == 20


def test_the_manifest_decoder_is_warmed_only_for_many_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_lakeformat.core.iceberg.reach import reach_decode

    table = _fast_append_chain(tmp_path, 3)
    monkeypatch.setattr(reach_decode.MANIFEST_PLANS, "_cache", {})
    monkeypatch.setattr(reach_split, "WARM_MIN_MANIFESTS", 4)
    assert not reach_split.warm_manifest_decoder(table)
    assert not reach_decode.scanners_ready("manifest")
    monkeypatch.setattr(reach_split, "WARM_MIN_MANIFESTS", 3)
    assert reach_split.warm_manifest_decoder(table)
    assert reach_decode.scanners_ready("manifest")
