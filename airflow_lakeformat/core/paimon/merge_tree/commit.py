"""The COMPACT commit of a primary-key compaction, validated per bucket before every publish attempt.

All compacted buckets go into ONE snapshot of kind COMPACT with ``commitIdentifier = Long.MAX_VALUE``
(Java's batch identifier), through the ordinary :class:`~airflow_lakeformat.core.paimon.commit.Committer`
(its retry loop, exclusive publish and duplicate detection). Per (partition, bucket) the entries are, as
Java's ``ManifestEntryChanges`` builds them from a ``CompactResult``:

* a DELETE for every input file, copied verbatim from the live ADD it cancels (the identity includes the
  level, so an upgraded file is DELETE at its old level + ADD of the same file at the new level);
* an ADD for every new or upgraded file, with the inputs' ``_TOTAL_BUCKETS`` and the same partition bytes
  and bucket.

Before each attempt (the committer's ``validate`` hook, against the snapshot the attempt builds on) every
touched bucket is checked with the rules of ``paimon-pk-compaction.md`` section 4.3, derived from Java's
``ConflictDetection``:

1. every input identity is still live;
2. no file above level 0 appeared in the bucket since the plan (a concurrent compaction);
3. every level-0 file that appeared has ``minSequenceNumber`` greater than ``M``, the largest sequence
   number of the bucket's inputs (otherwise a delete this compaction dropped could expose an older row);
4. ``_TOTAL_BUCKETS`` of the partition is unchanged.

Rule 2 also rules out a key-range overlap of our ADD files with a live file at their level: the only files
above level 0 are then the ones the plan saw, whose layout it compacted into. A bucket that breaks a rule
is dropped from the commit and reported as skipped (or, with ``skip_conflicts=False``, the whole commit is
refused with :class:`~airflow_lakeformat.core.errors.CompactionConflictError`); the remaining buckets are
committed from the same written files. Data is never rewritten inside the loop. The new files of a
dropped bucket were certainly not published and are discarded; when a publish outcome is unknown nothing
is deleted (the files become orphans for orphan cleanup, Paimon's rule, #7441).

Example:
    >>> outcome = commit_changes(table, changes, committer=Committer(table, "compactor-1"))  # doctest: +SKIP
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.errors import CommitRetriesExhaustedError, CompactionConflictError
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, iter_added, merge_entries
from airflow_lakeformat.core.paimon.manifest_merge import partition_may_contain
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table

BucketKey = tuple[bytes, int]


@dataclass(frozen=True)
class BucketChange:
    """What one (partition, bucket) contributes to the COMPACT snapshot, and what its validation needs.

    ``known`` holds the identities live in the bucket when it was planned (new files are the others);
    ``written`` the full paths of the files this compaction wrote for the bucket (discarded when the bucket
    is certainly not published); ``label`` names the bucket in messages.
    """

    partition: bytes
    bucket: int
    total_buckets: int | None
    deletes: tuple[ManifestEntry, ...]
    adds: tuple[ManifestEntry, ...]
    max_sequence_number: int
    known: frozenset[tuple[Any, ...]]
    written: tuple[str, ...] = ()
    label: str = ""

    @property
    def key(self) -> BucketKey:
        return (self.partition, self.bucket)

    @property
    def entries(self) -> list[ManifestEntry]:
        return [*self.deletes, *self.adds]


@dataclass
class CommitOutcome:
    """The snapshot committed (None when nothing was left to commit) and the buckets dropped, with why."""

    snapshot: Snapshot | None
    committed: list[BucketChange] = field(default_factory=list)
    skipped: dict[BucketKey, str] = field(default_factory=dict)
    attempts: int = 0


def live_in_partitions(
    table: Table, snapshot: Snapshot | None, partitions: set[bytes]
) -> list[ManifestEntry]:
    """The live ADD entries of ``partitions`` in ``snapshot`` (only manifests that may hold them are read)."""
    if snapshot is None or not partitions:
        return []
    base, delta = table.data_manifests(snapshot)
    types = table.schema.partition_types
    relevant = [m for m in base + delta if any(partition_may_contain(m, p, types) for p in partitions)]
    merged: dict[tuple[Any, ...], ManifestEntry] = {}
    for entries in table.read_manifests(relevant, f"snapshot {snapshot.id}"):
        merge_entries((e for e in entries if e.partition in partitions), merged)
    return list(iter_added(merged))


def conflicts(table: Table, latest: Snapshot | None, changes: Sequence[BucketChange]) -> dict[BucketKey, str]:
    """The buckets of ``changes`` that break a section 4.3 rule against ``latest``, each with the reason."""
    live = live_in_partitions(table, latest, {c.partition for c in changes})
    by_bucket: dict[BucketKey, list[ManifestEntry]] = {}
    totals: dict[bytes, set[int | None]] = {}
    for entry in live:
        by_bucket.setdefault((entry.partition, entry.bucket), []).append(entry)
        totals.setdefault(entry.partition, set()).add(entry.total_buckets)
    found: dict[BucketKey, str] = {}
    for change in changes:
        reason = _bucket_conflict(change, by_bucket.get(change.key, []), totals.get(change.partition, set()))
        if reason is not None:
            found[change.key] = reason
    return found


def _bucket_conflict(change: BucketChange, live: list[ManifestEntry], totals: set[int | None]) -> str | None:
    identities = {e.identifier() for e in live}
    for entry in change.deletes:
        if entry.identifier() not in identities:
            return f"input {entry.file.file_name} (level {entry.file.level}) is no longer live"
    for entry in live:
        if entry.identifier() in change.known:
            continue
        f = entry.file
        if f.level != 0:
            return f"a concurrent compaction added {f.file_name} at level {f.level}"
        if f.min_sequence_number <= change.max_sequence_number:
            return (
                f"new level-0 file {f.file_name} has minSequenceNumber {f.min_sequence_number} <= "
                f"{change.max_sequence_number}, the inputs' largest"
            )
    if totals - {change.total_buckets}:
        return (
            f"the partition's total buckets changed from {change.total_buckets} to {sorted(map(str, totals))}"
        )
    return None


def commit_changes(
    table: Table,
    changes: Sequence[BucketChange],
    *,
    committer: Committer | None = None,
    skip_conflicts: bool = True,
    discard: Callable[[Sequence[str]], None] | None = None,
) -> CommitOutcome:
    """Commit every bucket's change as one COMPACT snapshot, dropping buckets that conflict.

    Args:
        table: the table.
        changes: one change per compacted (partition, bucket); buckets with neither deletes nor adds are
            left out.
        committer: the committer (default: a new commit user per run).
        skip_conflicts: drop a conflicting bucket and commit the others (default); False refuses the commit.
        discard: removes paths certainly unpublished (default
            :func:`~airflow_lakeformat.core.maintenance.deletion.discard_unpublished` on the table's store).

    Returns:
        The snapshot (None when no bucket was left), the committed changes and the skipped buckets.

    Raises:
        CompactionConflictError: a bucket conflicts and ``skip_conflicts`` is False (nothing published).
    """
    pending = [c for c in changes if c.deletes or c.adds]
    outcome = CommitOutcome(None)
    if not pending:
        return outcome
    committer = committer or Committer(table, f"lakeformat-compact-pk-{uuid.uuid4()}")
    remove = discard or _discarder(table)
    while pending:

        def validate(latest: Snapshot | None, current: list[BucketChange] = pending) -> None:
            found = conflicts(table, latest, current)
            if found:
                raise CompactionConflictError(_message(current, found), found)

        entries = [e for c in pending for e in c.entries]
        try:
            result = committer.commit(
                entries,
                kind=CommitKind.COMPACT,
                commit_identifier=BATCH_COMMIT_IDENTIFIER,
                validate=validate,
            )
        except CompactionConflictError as exc:
            dropped = [c for c in pending if c.key in exc.buckets]
            remove([p for c in dropped for p in c.written])  # certainly unpublished: validation refused them
            if not skip_conflicts:
                remove([p for c in pending if c.key not in exc.buckets for p in c.written])
                raise
            outcome.skipped.update(exc.buckets)
            pending = [c for c in pending if c.key not in exc.buckets]
            continue
        except CommitRetriesExhaustedError:
            remove([p for c in pending for p in c.written])  # nothing of this commit was published
            raise
        outcome.snapshot = result.snapshot
        outcome.committed = pending
        outcome.attempts = result.attempts
        break
    return outcome


def _message(changes: Sequence[BucketChange], found: dict[BucketKey, str]) -> str:
    labels = {c.key: c.label or f"bucket {c.bucket}" for c in changes}
    return "compaction conflict: " + "; ".join(f"{labels.get(k, k)}: {why}" for k, why in found.items())


def _discarder(table: Table) -> Callable[[Sequence[str]], None]:
    from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

    def remove(paths: Sequence[str]) -> None:
        if paths:
            discard_unpublished(table.io, paths, "data")

    return remove


def delete_entries(inputs: Sequence[ManifestEntry]) -> tuple[ManifestEntry, ...]:
    """DELETE entries copied verbatim from the live ADD entries they cancel."""
    if any(e.kind is not FileKind.ADD for e in inputs):
        raise ValueError("a compaction's inputs must be live ADD entries")
    return tuple(e.to_delete() for e in inputs)
