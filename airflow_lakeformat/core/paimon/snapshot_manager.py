"""Read-only access to a table's snapshots, hint files, tags, consumers and branches.

The ``LATEST`` and ``EARLIEST`` hints are only hints: a crashed writer leaves ``LATEST`` behind,
an expiry leaves ``EARLIEST`` pointing at a deleted file. Paimon trusts ``LATEST`` only when the
next snapshot does not exist and otherwise lists the directory; we additionally check that the
hinted snapshot exists, and fall back to the listing in every doubtful case.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    SnapshotNotFoundError,
    TagNotFoundError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.snapshot import SNAPSHOT_VERSION, Snapshot

MAIN_BRANCH = "main"


@dataclass(frozen=True)
class Consumer:
    """A streaming reader's progress: snapshots from ``next_snapshot`` on must be kept for it."""

    consumer_id: str
    next_snapshot: int


def _parse_suffix(name: str, prefix: str) -> int | None:
    if not name.startswith(prefix):
        return None
    suffix = name[len(prefix) :]
    return int(suffix) if suffix.isdigit() else None


class SnapshotManager:
    """Snapshots of one branch of a table (``main`` by default)."""

    def __init__(
        self,
        io: FileIO,
        table_root: str,
        branch: str = MAIN_BRANCH,
        *,
        read_attempts: int = 3,
        retry_delay: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.io = io
        self.table_root = table_root
        self.branch = branch
        self.branch_root = (
            table_root
            if branch == MAIN_BRANCH
            else io.join(table_root, paths.BRANCH_DIR, paths.BRANCH_PREFIX + branch)
        )
        self.snapshot_dir = io.join(self.branch_root, paths.SNAPSHOT_DIR)
        self.tag_dir = io.join(self.branch_root, paths.TAG_DIR)
        self.consumer_dir = io.join(self.branch_root, paths.CONSUMER_DIR)
        self.read_attempts = read_attempts
        self.retry_delay = retry_delay
        self.sleep = sleep

    # -- snapshot files ------------------------------------------------------------------------

    def snapshot_path(self, snapshot_id: int) -> str:
        return self.io.join(self.snapshot_dir, f"{paths.SNAPSHOT_PREFIX}{snapshot_id}")

    def snapshot_exists(self, snapshot_id: int) -> bool:
        return self.io.exists(self.snapshot_path(snapshot_id))

    def list_snapshot_ids(self) -> list[int]:
        """Ids of the ``snapshot-<id>`` files, ascending; temp files and other names are ignored."""
        ids = (_parse_suffix(name, paths.SNAPSHOT_PREFIX) for name in self.io.list_names(self.snapshot_dir))
        return sorted(i for i in ids if i is not None)

    def read_hint(self, name: str) -> int | None:
        """The id in a hint file, or None when it is missing or unreadable (Paimon retries, then ignores it)."""
        path = self.io.join(self.snapshot_dir, name)
        for attempt in range(self.read_attempts):
            try:
                text = self.io.read_text(path).strip()
            except FileNotFoundError:
                return None
            except OSError:
                text = ""
            if text.isdigit():
                return int(text)
            if attempt + 1 < self.read_attempts:
                self.sleep(self.retry_delay)
        return None

    def latest_snapshot_id(self) -> int | None:
        hinted = self.read_hint(paths.LATEST)
        if (
            hinted is not None
            and hinted > 0
            and not self.snapshot_exists(hinted + 1)
            and self.snapshot_exists(hinted)
        ):
            return hinted
        ids = self.list_snapshot_ids()
        return ids[-1] if ids else None

    def earliest_snapshot_id(self) -> int | None:
        hinted = self.read_hint(paths.EARLIEST)
        if hinted is not None and self.snapshot_exists(hinted):
            return hinted
        ids = self.list_snapshot_ids()
        return ids[0] if ids else None

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Read ``snapshot-<id>``; raises SnapshotNotFoundError, CorruptMetadataError or UnsupportedFormatError."""
        path = self.snapshot_path(snapshot_id)
        try:
            snapshot = self.read_snapshot_file(path)
        except FileNotFoundError as exc:
            raise SnapshotNotFoundError(
                f"snapshot {snapshot_id} does not exist ({self.io.uri(path)})"
            ) from exc
        if snapshot.id != snapshot_id:
            raise CorruptMetadataError(
                self.io.uri(path), f"file of snapshot {snapshot_id} holds snapshot id {snapshot.id}"
            )
        return snapshot

    def read_snapshot_file(self, path: str) -> Snapshot:
        """Parse a snapshot-shaped JSON file (snapshot, tag or changelog).

        A parse failure is retried: on object stores a reader can race a writer's upload.
        """
        last_error: Exception | None = None
        for attempt in range(self.read_attempts):
            data = self.io.read_bytes(path)
            try:
                snapshot = Snapshot.from_json(json.loads(data))
            except (ValueError, KeyError, TypeError) as exc:
                last_error = exc
                if attempt + 1 < self.read_attempts:
                    self.sleep(self.retry_delay)
                continue
            if snapshot.version > SNAPSHOT_VERSION:
                raise UnsupportedFormatError(
                    self.io.uri(path),
                    f"snapshot version {snapshot.version} (this release reads up to {SNAPSHOT_VERSION})",
                )
            return snapshot
        raise CorruptMetadataError(self.io.uri(path), f"not a valid snapshot JSON document ({last_error})")

    def latest_snapshot(self) -> Snapshot | None:
        snapshot_id = self.latest_snapshot_id()
        return None if snapshot_id is None else self.snapshot(snapshot_id)

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot, ascending. A snapshot that disappears while we list (concurrent expiry) is skipped."""
        result = []
        for snapshot_id in self.list_snapshot_ids():
            try:
                result.append(self.snapshot(snapshot_id))
            except SnapshotNotFoundError:
                continue
        return result

    def snapshot_at_or_before(self, time_millis: int) -> Snapshot:
        """The newest snapshot committed at or before ``time_millis`` (epoch ms)."""
        ids = self.list_snapshot_ids()
        found: Snapshot | None = None
        low, high = 0, len(ids) - 1
        # Commit times increase with snapshot ids, so a binary search reads O(log n) snapshots.
        while low <= high:
            mid = (low + high) // 2
            candidate = self.snapshot(ids[mid])
            if candidate.time_millis <= time_millis:
                found, low = candidate, mid + 1
            else:
                high = mid - 1
        if found is None:
            raise SnapshotNotFoundError(f"no snapshot was committed at or before {time_millis} ms")
        return found

    # -- tags, consumers, branches -----------------------------------------------------------

    def tag_names(self) -> list[str]:
        names = self.io.list_names(self.tag_dir)
        return sorted(n[len(paths.TAG_PREFIX) :] for n in names if n.startswith(paths.TAG_PREFIX))

    def tag(self, name: str) -> Snapshot:
        path = self.io.join(self.tag_dir, paths.TAG_PREFIX + name)
        try:
            return self.read_snapshot_file(path)
        except FileNotFoundError as exc:
            raise TagNotFoundError(f"tag {name!r} does not exist ({self.io.uri(path)})") from exc

    def tags(self) -> dict[str, Snapshot]:
        return {name: self.tag(name) for name in self.tag_names()}

    def consumers(self) -> list[Consumer]:
        result = []
        for status in self.io.list_dir(self.consumer_dir):
            if status.is_dir or not status.name.startswith(paths.CONSUMER_PREFIX):
                continue
            try:
                document = json.loads(self.io.read_bytes(status.path))
                next_snapshot = int(document["nextSnapshot"])
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptMetadataError(
                    self.io.uri(status.path), f"not a valid consumer file ({exc})"
                ) from exc
            result.append(Consumer(status.name[len(paths.CONSUMER_PREFIX) :], next_snapshot))
        return sorted(result, key=lambda c: c.consumer_id)

    def branches(self) -> list[str]:
        """Branch names other than ``main`` (directories ``branch/branch-<name>``)."""
        branch_dir = self.io.join(self.table_root, paths.BRANCH_DIR)
        return sorted(
            s.name[len(paths.BRANCH_PREFIX) :]
            for s in self.io.list_dir(branch_dir)
            if s.is_dir and s.name.startswith(paths.BRANCH_PREFIX)
        )
