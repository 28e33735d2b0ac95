"""One maintenance run per table at a time: a lease under ``<table root>/.lakeformat/``.

The lock is a sequence of generations. Generation ``N`` is the file ``maintenance-lock-<N>`` holding
``{"owner", "acquiredAt", "expiresAt"}`` (epoch milliseconds). Whoever creates the highest generation
holds the lock until it writes ``maintenance-lock-<N>.released`` or the lease expires. To acquire, a
process reads the highest generation ``N`` and, only if it is released or expired, creates
``maintenance-lock-<N+1>`` with :meth:`FileIO.create_exclusive` (``os.link`` locally, ``If-None-Match: *``
on S3). Generations are created strictly one after the other, so of any number of racing acquirers
exactly one creates ``N+1``; the others see it held.

Nothing is ever overwritten: a released or expired generation stays behind as a record of who held the
table when. So that the directory does not grow by two files per run forever, a release asks
``core/maintenance/deletion.py`` (the one module that deletes) to remove the records of generations at
least :data:`KEEP_GENERATIONS` below its own; the highest generation is never removed, so numbering never
goes back. An acquirer whose view of the directory was so stale that it created a generation below the
highest (one whose file had been pruned) notices on the re-listing that follows every creation, releases
that generation and looks again.

Expiry compares the lease's ``expiresAt`` (written with the holder's clock) with the local clock, so
hosts should keep their clocks roughly in sync, and a lease should comfortably outlast the work it
covers. A holder whose lease expired can learn that it lost the lock with :meth:`MaintenanceLock.ensure_held`
before doing anything destructive.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol

from airflow_lakeformat.core.errors import CorruptMetadataError, LockHeldError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import discard_lock_records

LOCK_DIR = ".lakeformat"
LOCK_PREFIX = "maintenance-lock-"
RELEASED_SUFFIX = ".released"
DEFAULT_LEASE = timedelta(hours=2)
DEFAULT_POLL_INTERVAL = 5.0
# Losing a race for generation N+1 means another acquirer now holds the lock, so one re-read settles it;
# a few more attempts cover listings that lag behind a just-created generation.
_RACE_ATTEMPTS = 5
# Lease records kept below the current generation: a short history of who held the table.
KEEP_GENERATIONS = 10


@dataclass(frozen=True)
class LockLease:
    """One generation of the lock as stored in its file."""

    generation: int
    owner: str
    acquired_at_millis: int
    expires_at_millis: int
    path: str  # the URI of the lease file

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "owner": self.owner,
            "acquiredAt": self.acquired_at_millis,
            "expiresAt": self.expires_at_millis,
            "path": self.path,
        }


class LockableTable(Protocol):
    """What the lock needs of a table, of either format: its store, its root and a name for messages."""

    @property
    def io(self) -> FileIO: ...

    @property
    def root(self) -> str: ...

    @property
    def uri(self) -> str: ...


class MaintenanceLock:
    """A lease-based lock on one table's maintenance, usable as a context manager.

    ``wait`` (seconds or a timedelta) polls every ``poll_interval`` seconds until the lock is free or
    the wait is over; without it a held lock raises :class:`LockHeldError` at once.
    """

    def __init__(
        self,
        table: LockableTable,
        owner: str,
        lease: timedelta = DEFAULT_LEASE,
        clock: Callable[[], float] = time.time,
        *,
        wait: timedelta | float | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if lease.total_seconds() <= 0:
            raise ValueError(f"the lease must be positive, not {lease}")
        if not owner:
            raise ValueError("a lock owner must be named")
        self.table = table
        self.io = table.io
        self.owner = owner
        self.lease = lease
        self.clock = clock
        self.wait = wait.total_seconds() if isinstance(wait, timedelta) else wait
        self.poll_interval = poll_interval
        self.sleep = sleep
        self.lock_dir = self.io.join(table.root, LOCK_DIR)
        self.held: LockLease | None = None
        self.taken_over: LockLease | None = None  # the expired lease this acquisition replaced

    # -- paths and reading ---------------------------------------------------------------------

    def lease_path(self, generation: int) -> str:
        return self.io.join(self.lock_dir, f"{LOCK_PREFIX}{generation}")

    def highest_generation(self) -> int:
        """The highest lease generation present (0 when the table was never locked)."""
        highest = 0
        for name in self.io.list_names(self.lock_dir):
            suffix = name[len(LOCK_PREFIX) :] if name.startswith(LOCK_PREFIX) else ""
            if suffix.isdigit():
                highest = max(highest, int(suffix))
        return highest

    def read_lease(self, generation: int) -> LockLease:
        path = self.lease_path(generation)
        data = self.io.read_bytes(path)
        try:
            document = json.loads(data)
            return LockLease(
                generation,
                str(document["owner"]),
                int(document["acquiredAt"]),
                int(document["expiresAt"]),
                self.io.uri(path),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(
                self.io.uri(path),
                f"not a valid maintenance lock lease ({exc}); if no maintenance is running, "
                f"create {self.io.uri(path)}{RELEASED_SUFFIX} to release it",
            ) from exc

    def is_released(self, generation: int) -> bool:
        return self.io.exists(self.lease_path(generation) + RELEASED_SUFFIX)

    def current_holder(self) -> LockLease | None:
        """The lease that holds the lock now, or None when it is free (released, expired or never taken)."""
        generation = self.highest_generation()
        if generation == 0 or self.is_released(generation):
            return None
        lease = self.read_lease(generation)
        return None if self._expired(lease) else lease

    def _now_millis(self) -> int:
        return int(self.clock() * 1000)

    def _expired(self, lease: LockLease) -> bool:
        return lease.expires_at_millis <= self._now_millis()

    # -- acquiring and releasing -----------------------------------------------------------------

    def try_acquire(self) -> LockLease:
        """One acquisition attempt: the new lease, or :class:`LockHeldError` naming the holder."""
        if self.held is not None:
            raise RuntimeError(f"{self.owner} already holds generation {self.held.generation}")
        for _ in range(_RACE_ATTEMPTS):
            generation = self.highest_generation()
            previous: LockLease | None = None
            if generation > 0 and not self.is_released(generation):
                try:
                    previous = self.read_lease(generation)
                except FileNotFoundError:
                    continue  # listed, then pruned: our listing is stale, look again
                if not self._expired(previous):
                    raise self._held_error(previous)
            now = self._now_millis()
            path = self.lease_path(generation + 1)
            lease = LockLease(
                generation + 1,
                self.owner,
                now,
                now + int(self.lease.total_seconds() * 1000),
                self.io.uri(path),
            )
            document = {
                "owner": lease.owner,
                "acquiredAt": lease.acquired_at_millis,
                "expiresAt": lease.expires_at_millis,
            }
            try:
                self.io.create_exclusive(path, json.dumps(document).encode("utf-8"))
            except FileExistsError:
                continue  # another acquirer created this generation first: look again
            if self.highest_generation() != lease.generation:
                # Our listing was stale and this generation had been pruned: it is not the lock.
                self._write_released(lease.generation)
                continue
            self.held = lease
            self.taken_over = previous
            return lease
        holder = self.current_holder()
        if holder is not None:
            raise self._held_error(holder)
        raise LockHeldError(self.table.uri, "another acquirer", None, self.io.uri(self.lock_dir))

    def acquire(self) -> LockLease:
        """Acquire, polling while the lock is held if ``wait`` was given."""
        if self.wait is None:
            return self.try_acquire()
        deadline = self.clock() + self.wait
        while True:
            try:
                return self.try_acquire()
            except LockHeldError:
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise
                self.sleep(min(self.poll_interval, remaining))

    def ensure_held(self) -> None:
        """Raise :class:`LockHeldError` unless this lock still holds its lease (not expired, not taken over)."""
        if self.held is None:
            raise RuntimeError(f"{self.owner} does not hold the maintenance lock of {self.table.uri}")
        successor = self.held.generation + 1
        if self.io.exists(self.lease_path(successor)):
            raise self._held_error(self.read_lease(successor))
        if self._expired(self.held):
            raise LockHeldError(
                self.table.uri, self.owner, self.held.expires_at_millis, self.held.path, expired=True
            )

    def release(self) -> None:
        """Write the ``.released`` marker of our generation (a no-op when nothing is held)."""
        lease, self.held = self.held, None
        if lease is None:
            return
        self._write_released(lease.generation)
        self.prune(lease.generation)

    def _write_released(self, generation: int) -> None:
        path = self.lease_path(generation) + RELEASED_SUFFIX
        document = {"owner": self.owner, "releasedAt": self._now_millis()}
        # Already there means an earlier attempt of this release landed (its acknowledgement was lost).
        with contextlib.suppress(FileExistsError):
            self.io.create_exclusive(path, json.dumps(document).encode("utf-8"))

    def prune(self, generation: int) -> list[str]:
        """Remove the records of generations ``<= generation - KEEP_GENERATIONS``; returns their paths."""
        below = generation - KEEP_GENERATIONS
        if below < 1:
            return []
        superseded = []
        for name in self.io.list_names(self.lock_dir):
            if not name.startswith(LOCK_PREFIX):
                continue
            number = name[len(LOCK_PREFIX) :].removesuffix(RELEASED_SUFFIX)
            if number.isdigit() and int(number) <= below:
                superseded.append(self.io.join(self.lock_dir, name))
        if superseded:
            discard_lock_records(self.io, superseded)
        return superseded

    def _held_error(self, lease: LockLease) -> LockHeldError:
        return LockHeldError(self.table.uri, lease.owner, lease.expires_at_millis, lease.path)

    def __enter__(self) -> MaintenanceLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
