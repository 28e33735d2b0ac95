"""The per-table maintenance lock: one winner per generation, expiry takeover, waiting, bad lease files.

The lock is core code (no Airflow); it lives with the Airflow tests because the operators are its main
user. Races run on real storage: the local filesystem (threads and separate processes) and SeaweedFS S3.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.errors import CorruptMetadataError, LockHeldError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.lock import (
    KEEP_GENERATIONS,
    LOCK_DIR,
    LOCK_PREFIX,
    RELEASED_SUFFIX,
    MaintenanceLock,
)
from airflow_lakeformat.core.paimon.table import Table
from tests.support.seaweedfs import SeaweedFSServer


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def table_at(uri: str, options: dict[str, Any] | None = None) -> Table:
    io, root = FileIO.for_uri(uri, options)
    return Table(io, root)  # the lock needs only the root, not a schema


def test_acquire_release_and_holder_named(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    clock = FakeClock()
    first = MaintenanceLock(table, "dag-a/run-1", timedelta(minutes=10), clock)
    with first:
        lease_file = tmp_path / "t" / LOCK_DIR / "maintenance-lock-1"
        assert json.loads(lease_file.read_text()) == {
            "owner": "dag-a/run-1",
            "acquiredAt": int(clock.now * 1000),
            "expiresAt": int(clock.now * 1000) + 600_000,
        }
        with pytest.raises(LockHeldError) as excinfo:
            MaintenanceLock(table, "dag-b/run-7", clock=clock).acquire()
        message = str(excinfo.value)
        assert "'dag-a/run-1'" in message and "2027-01-15T08:10:00+00:00" in message
        assert str(lease_file) in message
        assert excinfo.value.owner == "dag-a/run-1"
    assert (tmp_path / "t" / LOCK_DIR / "maintenance-lock-1.released").exists()
    second = MaintenanceLock(table, "dag-b/run-7", clock=clock)
    assert second.acquire().generation == 2
    assert second.taken_over is None  # generation 1 was released, not taken over
    assert second.current_holder() == second.held
    second.release()
    assert second.current_holder() is None
    # Every generation stays on disk: the lock never deletes.
    names = sorted(p.name for p in (tmp_path / "t" / LOCK_DIR).iterdir())
    assert names == [
        "maintenance-lock-1",
        "maintenance-lock-1.released",
        "maintenance-lock-2",
        "maintenance-lock-2.released",
    ]


def test_expired_lease_is_taken_over_and_the_old_holder_learns_it(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    clock = FakeClock()
    crashed = MaintenanceLock(table, "crashed-worker", timedelta(seconds=60), clock)
    crashed.acquire()
    clock.advance(59)
    with pytest.raises(LockHeldError, match="crashed-worker"):
        MaintenanceLock(table, "next", clock=clock).acquire()
    clock.advance(2)
    taker = MaintenanceLock(table, "next", timedelta(seconds=60), clock)
    lease = taker.acquire()
    assert lease.generation == 2
    assert taker.taken_over is not None and taker.taken_over.owner == "crashed-worker"
    with pytest.raises(LockHeldError, match="'next'"):
        crashed.ensure_held()
    # A late release by the old holder marks only its own generation; the new holder keeps the lock.
    crashed.release()
    taker.ensure_held()
    with pytest.raises(LockHeldError, match="'next'"):
        MaintenanceLock(table, "third", clock=clock).acquire()
    clock.advance(61)
    with pytest.raises(LockHeldError, match="lost its maintenance lease by 'next'"):
        taker.ensure_held()


def test_wait_polls_until_the_holder_releases(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    holder = MaintenanceLock(table, "holder")
    holder.acquire()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            holder.release()

    waiter = MaintenanceLock(table, "waiter", wait=timedelta(minutes=5), poll_interval=0.25, sleep=sleep)
    assert waiter.acquire().generation == 2
    assert sleeps == [0.25, 0.25, 0.25]


def test_wait_gives_up_after_the_timeout(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    clock = FakeClock()
    MaintenanceLock(table, "holder", timedelta(hours=1), clock).acquire()
    waiter = MaintenanceLock(table, "waiter", clock=clock, wait=10.0, poll_interval=4.0, sleep=clock.advance)
    with pytest.raises(LockHeldError, match="'holder'"):
        waiter.acquire()
    assert clock.now == 1_800_000_010.0  # slept 4 + 4 + 2, then gave up


def test_corrupt_lease_refuses_with_the_file_named(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    lock_dir = tmp_path / "t" / LOCK_DIR
    lock_dir.mkdir(parents=True)
    (lock_dir / "maintenance-lock-3").write_text("{not json")
    with pytest.raises(CorruptMetadataError) as excinfo:
        MaintenanceLock(table, "x").acquire()
    assert str(lock_dir / "maintenance-lock-3") in str(excinfo.value)
    assert not (lock_dir / "maintenance-lock-4").exists()


def race_threads(table: Table, contenders: int) -> list[str]:
    """Every contender tries once, all released at the same instant; returns the winners' owners."""
    barrier = threading.Barrier(contenders)
    winners: list[str] = []
    errors: list[BaseException] = []

    def contend(i: int) -> None:
        lock = MaintenanceLock(table, f"thread-{i}")
        barrier.wait()
        try:
            lock.try_acquire()
        except LockHeldError:
            return
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            return
        winners.append(lock.owner)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return winners


def assert_one_winner_per_round(table: Table, rounds: int, contenders: int) -> None:
    for round_number in range(1, rounds + 1):
        winners = race_threads(table, contenders)
        assert len(winners) == 1, f"round {round_number}: winners {winners}"
        holder = MaintenanceLock(table, "observer").current_holder()
        assert holder is not None and holder.owner == winners[0] and holder.generation == round_number
        # The winner's lock object is gone with its thread; release its generation as it would have.
        closer = MaintenanceLock(table, winners[0])
        closer.held = holder
        closer.release()


def test_threads_race_locally(tmp_path: Path) -> None:
    assert_one_winner_per_round(table_at(str(tmp_path / "t")), rounds=5, contenders=8)


@pytest.mark.s3
def test_threads_race_on_s3(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    assert_one_winner_per_round(
        table_at(f"{s3_bucket}/t", seaweedfs.storage_options()), rounds=3, contenders=6
    )


def warm_up(_: int) -> float:
    return time.time()


def contend_in_process(uri: str, owner: str, start_at: float) -> bool:
    table = table_at(uri)
    lock = MaintenanceLock(table, owner)
    while time.time() < start_at:  # line the processes up so their attempts overlap
        time.sleep(0.001)
    try:
        lock.try_acquire()
    except LockHeldError:
        return False
    return True


@pytest.mark.slow
def test_processes_race_locally(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        pool.map(warm_up, range(8))  # workers have imported this module before the start time is chosen
        start_at = time.time() + 1.0
        outcomes = pool.starmap(contend_in_process, [(uri, f"process-{i}", start_at) for i in range(4)])
    assert sorted(outcomes) == [False, False, False, True]
    holder = MaintenanceLock(table_at(uri), "observer").current_holder()
    assert holder is not None and holder.owner == f"process-{outcomes.index(True)}"


def lock_records(root: Path) -> list[str]:
    return sorted(p.name for p in (root / LOCK_DIR).iterdir())


def test_release_prunes_records_far_below_the_current_generation(tmp_path: Path) -> None:
    table = table_at(str(tmp_path / "t"))
    for run in range(1, KEEP_GENERATIONS + 1):
        with MaintenanceLock(table, f"run-{run}"):
            pass
    assert len(lock_records(tmp_path / "t")) == 2 * KEEP_GENERATIONS, "nothing is pruned below the threshold"
    for run in range(KEEP_GENERATIONS + 1, 26):
        with MaintenanceLock(table, f"run-{run}"):
            pass
    kept = range(26 - KEEP_GENERATIONS, 26)
    assert lock_records(tmp_path / "t") == sorted(
        name for g in kept for name in (f"{LOCK_PREFIX}{g}", f"{LOCK_PREFIX}{g}{RELEASED_SUFFIX}")
    )
    assert MaintenanceLock(table, "next").acquire().generation == 26, "numbering never goes back"


class StaleListingLock(MaintenanceLock):
    """Lists the lock directory once as it was long ago: the view of an acquirer paused mid-acquisition."""

    def __init__(self, table: Table, owner: str, stale_generation: int) -> None:
        super().__init__(table, owner)
        self.stale_generation: int | None = stale_generation

    def highest_generation(self) -> int:
        if self.stale_generation is not None:
            stale, self.stale_generation = self.stale_generation, None
            return stale
        return super().highest_generation()


@pytest.mark.parametrize(
    ("stale_view", "created_below"),
    [
        (0, 1),  # saw an empty directory: creates generation 1 (pruned long ago), then sees 20 above it
        (3, None),  # saw generation 3 held: its lease file is gone, so it re-lists before creating anything
    ],
)
def test_an_acquirer_with_a_stale_listing_does_not_hold_a_pruned_generation(
    tmp_path: Path, stale_view: int, created_below: int | None
) -> None:
    table = table_at(str(tmp_path / "t"))
    for run in range(20):
        with MaintenanceLock(table, f"run-{run}"):
            pass
    assert min(int(n[len(LOCK_PREFIX) :].split(".")[0]) for n in lock_records(tmp_path / "t")) == 11
    stale = StaleListingLock(table, "paused acquirer", stale_view)
    assert stale.acquire().generation == 21
    records = lock_records(tmp_path / "t")
    if created_below is not None:
        # The generation it created from the stale view is marked released: nobody can take it for the lock.
        assert {f"{LOCK_PREFIX}{created_below}", f"{LOCK_PREFIX}{created_below}{RELEASED_SUFFIX}"} <= set(
            records
        )
    assert len(records) == 2 * 10 + 1 + (2 if created_below is not None else 0)
    with pytest.raises(LockHeldError):
        MaintenanceLock(table, "another").try_acquire()
    stale.release()
