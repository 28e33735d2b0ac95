"""Atomic commit: publish one snapshot, following Paimon's ``FileStoreCommitImpl``.

One attempt reads the latest snapshot, checks conflicts (every DELETE must match a live file, no
ADD may duplicate one; always for COMPACT and for commits that delete), merges the previous
manifests with the table's policy into the base list, writes this commit's entries as the delta
list, and publishes ``snapshot-<latest + 1>`` with an exclusive create.

The outcome of a publish is one of three, and each is handled differently:

* published: write the LATEST hint and return;
* preempted (another writer's file holds the id): nothing of ours is visible, so the base list of
  this attempt is removed and the commit retries against the new latest, with back-off;
* unknown (the store failed without saying whether our write landed): nothing is deleted, and the
  next attempt first re-publishes the very same bytes at the same id, which either lands, finds our
  own snapshot there, or finds another writer's.

Every snapshot we write carries a per-commit id in its ``properties`` so that our own snapshot is
recognized after an acknowledgement was lost, and a commit with an explicit ``commit_identifier``
looks for an earlier landed snapshot of the same user and identifier first, so a re-run after an
uncertain failure never commits twice.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    SnapshotNotFoundError,
    UnsupportedFormatError,
    UnsupportedStorageError,
)
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import (
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    merge_entries,
)
from airflow_lakeformat.core.paimon.manifest_merge import (
    ManifestMergeResult,
    merge_manifests,
    partition_may_contain,
)
from airflow_lakeformat.core.paimon.manifest_writer import RollingManifestWriter
from airflow_lakeformat.core.paimon.paths import PartitionCodec, PartitionFilter
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.version import __version__

COMMIT_ID_PROPERTY = "lakeformat.commit-id"
WRITER_VERSION = f"airflow-lakeformat-{__version__}"
# How far back a commit with an explicit identifier looks for an earlier landed attempt of itself.
DEFAULT_DEDUP_LOOKBACK = 1000


class PublishOutcome(Enum):
    PUBLISHED = "published"
    PREEMPTED = "preempted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CommitResult:
    """What a commit did. ``already_committed`` means an earlier run had published it."""

    snapshot: Snapshot
    attempts: int
    already_committed: bool = False
    merge: str = "none"
    files_written: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshotId": self.snapshot.id,
            "commitKind": self.snapshot.commit_kind.value,
            "commitUser": self.snapshot.commit_user,
            "commitIdentifier": self.snapshot.commit_identifier,
            "attempts": self.attempts,
            "alreadyCommitted": self.already_committed,
            "manifestMerge": self.merge,
            "totalRecordCount": self.snapshot.total_record_count,
            "deltaRecordCount": self.snapshot.delta_record_count,
        }


@dataclass
class Attempt:
    """One try at publishing a snapshot: the snapshot and the files written for this try alone."""

    snapshot: Snapshot
    files: list[str]  # base list and merged manifests written for this attempt only


class Committer:
    """Commits to one table as one commit user (give each job its own user: Paimon dedups by it)."""

    def __init__(
        self,
        table: Table,
        commit_user: str | None = None,
        *,
        max_retries: int | None = None,
        min_retry_wait: float = 0.01,
        max_retry_wait: float = 10.0,
        allow_unsafe_publish: bool = False,
        dedup_lookback: int = DEFAULT_DEDUP_LOOKBACK,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.table = table
        self.io = table.io
        self.commit_user = commit_user or f"lakeformat-{uuid.uuid4()}"
        options = table.schema.table_options
        self.max_retries = (
            int(options.get("commit.max-retries") or 10) if max_retries is None else max_retries
        )
        self.min_retry_wait = min_retry_wait
        self.max_retry_wait = max_retry_wait
        self.allow_unsafe_publish = allow_unsafe_publish
        self.dedup_lookback = dedup_lookback
        self.clock = clock
        self.sleep = sleep
        self.rng = rng
        if not self.io.supports_exclusive_create and not allow_unsafe_publish:
            raise UnsupportedStorageError(self.io.protocol)

    # -- public API ------------------------------------------------------------------------------

    def commit(
        self,
        entries: Sequence[ManifestEntry],
        kind: CommitKind | None = None,
        commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: Mapping[str, str] | None = None,
        merge: bool = True,
        force_merge: bool = False,
        check_conflicts: bool | None = None,
        validate: Callable[[Snapshot | None], None] | None = None,
    ) -> CommitResult:
        """Publish ``entries`` (ADD and DELETE) as one snapshot.

        ``kind`` defaults to APPEND, or OVERWRITE when the commit deletes files (as Paimon does).
        Conflicts are checked for COMPACT and for commits that delete, as Paimon does, and also when
        ``check_conflicts`` is true (registering existing files: a concurrent duplicate ADD is refused).
        ``validate(latest)``, when given, runs first on every attempt against the snapshot it builds on
        (a primary-key compaction's checks); what it raises aborts the commit, nothing published.
        """
        has_deletes = any(e.kind is FileKind.DELETE for e in entries)
        kind = kind or (CommitKind.OVERWRITE if has_deletes else CommitKind.APPEND)
        self._refuse_unsupported(has_deletes or kind is CommitKind.COMPACT)
        if commit_identifier != BATCH_COMMIT_IDENTIFIER:
            landed = self.find_landed(commit_identifier, kind)
            if landed is not None:
                return CommitResult(landed, 0, already_committed=True)
        if check_conflicts is None:
            check_conflicts = has_deletes or kind is CommitKind.COMPACT
        delta: list[ManifestFileMeta] | None = None
        shared: list[str] = []  # the delta manifests, written once and reused by every attempt
        merge_mode = "none"

        def prepare(commit_id: str) -> Attempt:
            nonlocal delta, merge_mode
            latest = self.table.snapshot_manager.latest_snapshot()
            attempt_files: list[str] = []
            try:
                # A refusal on a later attempt (after a lost snapshot id) must not leave the delta
                # manifests of the earlier attempts behind: nothing of this commit was published.
                if validate is not None:
                    validate(latest)
                if check_conflicts:
                    self._check_conflicts(latest, entries)
                if delta is None:
                    delta = self._write_manifests(entries, shared)
                props = {**(properties or {}), COMMIT_ID_PROPERTY: commit_id}
                attempt, merge_mode = self._prepare(
                    latest, delta, entries, kind, commit_identifier, props, merge, force_merge, attempt_files
                )
            except BaseException:
                # Nothing was published in this commit yet, so everything it wrote is garbage.
                self.remove([*shared, *attempt_files])
                raise
            return attempt

        describe = f"commit by {self.commit_user} (identifier {commit_identifier})"
        try:
            published = self.publish_with_retries(prepare, describe)
        except CommitRetriesExhaustedError:
            self.remove(shared)  # the delta manifests no attempt will ever reference
            raise
        except CommitStateUnknownError as exc:
            raise CommitStateUnknownError(f"{exc}; re-run with the same commit user and identifier") from None
        assert published is not None  # prepare always builds an attempt
        won, attempts = published
        return CommitResult(won.snapshot, attempts, merge=merge_mode, files_written=[*shared, *won.files])

    def publish_with_retries(
        self, prepare: Callable[[str], Attempt | None], describe: str
    ) -> tuple[Attempt, int] | None:
        """The one publish/retry loop every snapshot this committer writes goes through.

        ``prepare(commit_id)`` builds an attempt on the latest snapshot: it writes the attempt's lists
        and manifests and returns the snapshot to publish, which must carry ``commit_id`` in its
        properties (that is how a publish whose acknowledgement was lost is recognised), or None when
        there is nothing to commit on that snapshot (then None is returned). Then:

        * *published*: the LATEST hint is written and ``(attempt, attempts made)`` returned;
        * *preempted* (another writer's snapshot holds the id): this attempt's files are removed and the
          next attempt is prepared on the new latest snapshot, after a jittered exponential back-off;
        * *unknown*: the same bytes are published again at the same id, every file kept.

        Past ``max_retries`` an unknown outcome raises :class:`CommitStateUnknownError` (nothing is
        removed: the snapshot may have landed) and anything else :class:`CommitRetriesExhaustedError`.
        Exceptions from ``prepare`` propagate; it removes what it wrote itself.

        Args:
            prepare: builds one attempt from the latest snapshot, given the commit id to embed.
            describe: what is committed, for messages ("manifest compaction", "commit by u (identifier 3)").

        Returns:
            The published attempt and the number of attempts made, or None.

        Example:
            >>> attempt, tries = committer.publish_with_retries(lambda cid: build(cid), "manifest compaction")
        """
        commit_id = str(uuid.uuid4())
        pending: Attempt | None = None
        attempt = 0
        while True:
            attempt += 1
            if pending is None:
                pending = prepare(commit_id)
                if pending is None:
                    return None
            outcome = self.publish(pending.snapshot, commit_id)
            if outcome is PublishOutcome.PUBLISHED:
                self.write_latest_hint(pending.snapshot.id)
                return pending, attempt
            if outcome is PublishOutcome.PREEMPTED:
                # Another snapshot holds the id: ours cannot land there, so this attempt's lists and
                # merged manifests are unreferenced.
                self.remove(pending.files)
                pending = None
            if attempt > self.max_retries:
                if outcome is PublishOutcome.UNKNOWN:
                    raise CommitStateUnknownError(
                        f"{describe}: snapshot {pending.snapshot.id if pending else '?'} has an unknown "
                        f"outcome after {attempt} attempts"
                    )
                raise CommitRetriesExhaustedError(
                    f"{describe} gave up after {attempt} attempts: other writers kept taking the snapshot id"
                )
            self.sleep(self.backoff(attempt))

    def find_landed(self, commit_identifier: int, kind: CommitKind) -> Snapshot | None:
        """A snapshot of this user with this identifier and kind among the recent ones, if any."""
        manager = self.table.snapshot_manager
        latest = manager.latest_snapshot_id()
        if latest is None:
            return None
        earliest = manager.earliest_snapshot_id() or 1
        for snapshot_id in range(latest, max(earliest, latest - self.dedup_lookback + 1) - 1, -1):
            try:
                snapshot = manager.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue  # expired meanwhile
            if (
                snapshot.commit_user == self.commit_user
                and snapshot.commit_identifier == commit_identifier
                and snapshot.commit_kind is kind
            ):
                return snapshot
        return None

    # -- one attempt ---------------------------------------------------------------------------

    def overwrite_entries(
        self,
        partition_filter: Mapping[str, str | None] | None,
        added: Sequence[ManifestEntry] = (),
    ) -> list[ManifestEntry]:
        """DELETE entries for every live file of the partitions matching ``partition_filter``.

        Partitions are matched by value as Paimon does (:class:`~airflow_lakeformat.core.paimon.paths.PartitionFilter`):
        the default partition name means NULL only, never the blank strings that share its directory.
        ``None`` matches the whole table. Like Paimon's ``FileStoreCommitImpl.overwrite``, files being
        ``added`` must lie inside the overwritten partition: rows outside it would survive an overwrite
        that was meant to replace them, so that is refused with :class:`ValueError`.
        """
        selected = PartitionFilter(
            PartitionCodec(self.table.schema),
            [partition_filter] if partition_filter else None,
            "overwrite",
        )
        for entry in added:
            if not selected(entry.partition):
                raise ValueError(
                    f"overwrite of partition {dict(partition_filter or {})}: the new file "
                    f"{entry.file.file_name} holds rows of partition "
                    f"{selected.codec.to_json(entry.partition)}, outside it"
                )
        latest = self.table.snapshot_manager.latest_snapshot()
        if latest is None:
            return []
        return [e.to_delete() for e in live_entries(self.table, latest) if selected(e.partition)]

    def _refuse_unsupported(self, rewrites_live_files: bool) -> None:
        options = self.table.schema.table_options
        if (options.get("row-tracking.enabled") or "false").lower() == "true":
            raise UnsupportedFormatError(self.table.uri, "commits to tables with row-tracking.enabled")
        if rewrites_live_files and (options.get("deletion-vectors.enabled") or "false").lower() == "true":
            raise UnsupportedFormatError(
                self.table.uri,
                "deleting files of a table with deletion vectors (their index is not maintained)",
            )

    def _check_conflicts(self, latest: Snapshot | None, entries: Sequence[ManifestEntry]) -> None:
        """Every DELETE must match a live file and no ADD may duplicate one (``FileEntry.mergeEntries``)."""
        partitions = {e.partition for e in entries}
        live: dict[tuple[Any, ...], ManifestEntry] = {}
        if latest is not None:
            base, delta = self.table.data_manifests(latest)
            types = self.table.schema.partition_types
            relevant = [
                m for m in base + delta if any(partition_may_contain(m, p, types) for p in partitions)
            ]
            for manifest_entries in self.table.read_manifests(relevant, f"snapshot {latest.id}"):
                merge_entries((e for e in manifest_entries if e.partition in partitions), live)
        for entry in entries:
            key = entry.identifier()
            if entry.kind is FileKind.DELETE:
                current = live.get(key)
                if current is None or current.kind is not FileKind.ADD:
                    raise CommitConflictError(
                        f"file deletion conflict: {entry.file.file_name} (bucket {entry.bucket}, level "
                        f"{entry.file.level}) is not live in snapshot {latest.id if latest else 'none'}; "
                        "give up committing"
                    )
                del live[key]
            elif key in live and live[key].kind is FileKind.ADD:
                raise CommitConflictError(
                    f"file {entry.file.file_name} (bucket {entry.bucket}, level {entry.file.level}) is already live"
                )
            else:
                live[key] = entry

    def _write_manifests(
        self, entries: Sequence[ManifestEntry], written: list[str]
    ) -> list[ManifestFileMeta]:
        writer = self._rolling_writer(written)
        return writer.write(entries)

    def _rolling_writer(
        self, written: list[str], extra_file_fields: Sequence[Mapping[str, Any]] = (), store: bool = True
    ) -> RollingManifestWriter:
        options = self.table.schema.table_options

        def write_file(name: str, data: bytes) -> None:
            if store:
                written.append(name)
                self.io.write_bytes(self.table.manifest_path(name), data)

        return RollingManifestWriter(
            write_file,
            partition_types=self.table.schema.partition_types,
            schema_id=self.table.schema.id,
            target_file_size=options.manifest_target_file_size,
            compression=options.manifest_compression,
            extra_file_fields=extra_file_fields,
        )

    def write_list(self, metas: Sequence[ManifestFileMeta], written: list[str]) -> tuple[str, int]:
        name = f"manifest-list-{uuid.uuid4()}-0"
        extra = _extra_list_fields(metas)
        data = avro.encode_manifest_list(metas, self.table.schema.table_options.manifest_compression, extra)
        written.append(name)
        self.io.write_bytes(self.table.manifest_path(name), data)
        return name, len(data)

    def _prepare(
        self,
        latest: Snapshot | None,
        delta: list[ManifestFileMeta],
        entries: Sequence[ManifestEntry],
        kind: CommitKind,
        commit_identifier: int,
        properties: dict[str, str],
        merge: bool,
        force_merge: bool,
        written: list[str],
    ) -> tuple[Attempt, str]:
        before: list[ManifestFileMeta] = []
        if latest is not None:
            base, previous_delta = self.table.data_manifests(latest)
            before = base + previous_delta
        result = self.merge(before, written, force=force_merge) if merge else None
        after = result.manifests if result else before
        base_name, base_size = self.write_list(after, written)
        delta_name, delta_size = self.write_list(delta, written)
        added = sum(e.file.row_count for e in entries if e.kind is FileKind.ADD)
        deleted = sum(e.file.row_count for e in entries if e.kind is FileKind.DELETE)
        schema = self.table.schema
        snapshot = Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=schema.id,
            base_manifest_list=base_name,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_name,
            delta_manifest_list_size=delta_size,
            index_manifest=latest.index_manifest if latest else None,
            commit_user=self.commit_user,
            commit_identifier=commit_identifier,
            commit_kind=kind,
            time_millis=int(self.clock() * 1000),
            total_record_count=((latest.total_record_count or 0) if latest else 0) + added - deleted,
            delta_record_count=added - deleted,
            watermark=latest.watermark if latest else None,
            statistics=latest.statistics if latest and latest.schema_id == schema.id else None,
            properties=properties,
            next_row_id=latest.next_row_id if latest else None,
            extra={"uuid": str(uuid.uuid4()), "writerVersion": WRITER_VERSION},
        )
        return Attempt(snapshot, written), (result.mode if result else "none")

    def merge(
        self,
        manifests: list[ManifestFileMeta],
        written: list[str],
        force: bool = False,
        dry_run: bool = False,
    ) -> ManifestMergeResult:
        """Apply the table's manifest merge policy (forced full merge when ``force``).

        With ``dry_run`` the merged manifests are encoded (so their sizes are real) but not stored.

        Fields a newer Paimon wrote into ``_FILE`` are learned from each manifest's writer schema as it
        is read and carried into the rewritten manifests; the writer refuses any it was not told about.
        """
        options = self.table.schema.table_options
        types = self.table.schema.partition_types
        carried: dict[str, dict[str, Any]] = {}

        def read(meta: ManifestFileMeta) -> list[ManifestEntry]:
            entries, writer_schema = self.table.manifest_with_schema(
                meta.file_name, "the manifest merge", meta.file_size
            )
            top, nested = avro.extra_fields(writer_schema)
            if top:
                raise UnsupportedFormatError(
                    meta.file_name, f"manifest entry fields {[f['name'] for f in top]} cannot be carried"
                )
            for f in nested:
                carried.setdefault(f["name"], f)
            return entries

        def write(entries: Iterable[ManifestEntry]) -> list[ManifestFileMeta]:
            return self._rolling_writer(written, list(carried.values()), store=not dry_run).write(entries)

        return merge_manifests(
            manifests,
            read=read,
            write=write,
            target_file_size=options.manifest_target_file_size,
            full_compaction_threshold=1 if force else options.manifest_full_compaction_threshold_size,
            merge_min_count=1 if force else options.manifest_merge_min_count,
            partitioned=bool(types),
            partition_stats_may_contain=lambda m, p: partition_may_contain(m, p, types),
        )

    # -- publishing -----------------------------------------------------------------------------

    def publish(self, snapshot: Snapshot, commit_id: str) -> PublishOutcome:
        path = self.table.snapshot_manager.snapshot_path(snapshot.id)
        data = snapshot.to_bytes()
        try:
            if self.io.supports_exclusive_create:
                self.io.create_exclusive(path, data)
            else:
                self.io.write_unsafe(path, data)
            return PublishOutcome.PUBLISHED
        except FileExistsError:
            return self._whose(snapshot.id, commit_id)
        except Exception:
            # The write may or may not have landed: look, and if we cannot tell, say so.
            return self._whose(snapshot.id, commit_id)

    def _whose(self, snapshot_id: int, commit_id: str) -> PublishOutcome:
        """After a failed publish: ours if our commit id is there, preempted if another's is, else unknown."""
        try:
            existing = self.table.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            return PublishOutcome.UNKNOWN
        except (CorruptMetadataError, OSError):
            return PublishOutcome.UNKNOWN
        if (existing.properties or {}).get(COMMIT_ID_PROPERTY) == commit_id:
            return PublishOutcome.PUBLISHED
        return PublishOutcome.PREEMPTED

    def write_latest_hint(self, snapshot_id: int) -> None:
        # A hint only: readers verify it and fall back to listing, so a failed write costs nothing.
        with contextlib.suppress(OSError):
            self.io.write_atomic(
                self.table.io.join(self.table.snapshot_manager.snapshot_dir, "LATEST"),
                str(snapshot_id).encode(),
            )

    def remove(self, names: Sequence[str]) -> None:
        """Remove manifests and lists this commit wrote and never published (best effort)."""
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        discard_unpublished(self.io, [self.table.manifest_path(name) for name in names], "manifest")

    def backoff(self, attempt: int) -> float:
        wait = min(self.max_retry_wait, self.min_retry_wait * (2 ** (attempt - 1)))
        return float(wait * (0.5 + self.rng()))


def _extra_list_fields(metas: Sequence[ManifestFileMeta]) -> list[dict[str, Any]]:
    """Schemas of manifest-list fields some input rows carry beyond Java's (e.g. pypaimon's), nullable."""
    known = {f["name"] for f in avro.manifest_file_meta_schema()["fields"]}
    extra: dict[str, dict[str, Any]] = {}
    for meta in metas:
        for name, value in meta.record.items():
            if name in known or name in extra:
                continue
            if name == "_TOTAL_BUCKETS":
                extra[name] = {"name": name, "type": ["null", "int"], "default": None}
            elif name == "_EXTRA_FILES":
                extra[name] = {
                    "name": name,
                    "type": ["null", {"type": "array", "items": "string"}],
                    "default": None,
                }
            elif value is not None:
                raise UnsupportedFormatError(
                    meta.file_name,
                    f"manifest-list field {name} is unknown to this release and cannot be carried",
                )
    return list(extra.values())
