"""The metadata side of an Iceberg expiry: the update committed, its requirements, and the run's journal.

**The update** (Java 1.10.2 ``TableMetadata.Builder.removeRef``/``removeSnapshots``/``removeSpecs``/
``removeSchemas`` and ``TableMetadata.updateSnapshotLog``; reference 3a step 6 and 2.4). pyiceberg's own
``RemoveSnapshotsUpdate`` handler differs from Java in three ways: it nulls the ``parent-snapshot-id`` of
children of removed snapshots (Java keeps the dangling id), it only filters removed ids out of the
``snapshot-log`` (Java clears all history before an entry whose snapshot is gone, so the log never has a
gap), and it keeps the ``partition-statistics`` of removed snapshots (Java drops them; we delete their
files, so keeping them would leave dangling references). :class:`ExpireSnapshotsUpdate` is a
``RemoveSnapshotsUpdate`` (it serialises as ``remove-snapshots``) whose handler, registered on pyiceberg's
``_apply_table_update``, does what Java does, and is stricter: it removes the refs the plan removes, and a
ref the plan keeps that would dangle (a concurrent writer pointed a new tag or branch at a snapshot being
expired) fails the commit with ``CommitFailedException``, so the retry loop re-checks the plan on the new
metadata instead of dropping the new ref. Ids already gone (a concurrent expiry) are skipped.

Catalogs that apply updates in this process (SQL, our Hadoop layout, Glue, Hive) use it. A REST catalog
applies updates on the server (Java semantics there); it gets pyiceberg's standard ``remove-snapshot-ref``
and ``remove-snapshots`` updates.

**Requirements**: the table UUID (pyiceberg adds it) and ``assert-ref-snapshot-id`` for every ref of the
metadata the update was staged on (main included): a concurrent commit that moved any ref makes the catalog
refuse, and the one retry loop (``commit.py``) re-stages on the new metadata. Java sends nothing but the
UUID check for ``RemoveSnapshots`` to a REST server (reference 2.1); we are stricter. Removing specs or
schemas also asserts the default spec and current schema, as Java does.

**The journal**: before committing, a run writes ``<table>/metadata/.lakeformat-expiry-<run>.json`` holding
the snapshots it expires (id, manifest list) and their statistics files; it is removed after the last
delete. A run that crashed (or lost the commit's acknowledgement) between the commit and the end of its
deletes leaves it behind, and the next run finishes that work: the journal's snapshots that are no longer
in the table are expired-side input of the next deletion set. The name starts with ``.``, so orphan
listings (ours and Java's) skip it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import PrivateAttr
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Transaction
from pyiceberg.table.update import (
    AssertCurrentSchemaId,
    AssertDefaultSpecId,
    AssertRefSnapshotId,
    RemovePartitionSpecsUpdate,
    RemoveSchemasUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
)

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter

JOURNAL_PREFIX = ".lakeformat-expiry-"
JOURNAL_SUFFIX = ".json"
JOURNAL_VERSION = 1
STALE_JOURNAL_MS = 60 * 60 * 1000  # a journal whose snapshots are all still there, older than this: dead


class ExpireSnapshotsUpdate(RemoveSnapshotsUpdate):
    """``remove-snapshots`` with Java's side effects and the plan's ref removals (module docstring)."""

    _refs_to_remove: frozenset[str] = PrivateAttr(default=frozenset())

    @classmethod
    def of(cls, snapshot_ids: Iterable[int], refs_to_remove: Iterable[str]) -> ExpireSnapshotsUpdate:
        update = cls(snapshot_ids=list(snapshot_ids))  # type: ignore[call-arg]
        update._refs_to_remove = frozenset(refs_to_remove)
        return update

    @property
    def refs_to_remove(self) -> frozenset[str]:
        return self._refs_to_remove


def java_snapshot_log(snapshot_log: list[Any], present: set[int]) -> list[Any]:
    """``TableMetadata.updateSnapshotLog`` after removals: an entry whose snapshot is gone clears the
    history before it (and itself), so time travel never sees a gap."""
    kept: list[Any] = []
    for entry in snapshot_log:
        if entry.snapshot_id in present:
            kept.append(entry)
        else:
            kept.clear()
    return kept


@_apply_table_update.register(ExpireSnapshotsUpdate)
def _apply_expire(
    update: ExpireSnapshotsUpdate, base_metadata: Any, context: _TableMetadataUpdateContext
) -> Any:
    remove = {i for i in update.snapshot_ids if base_metadata.snapshot_by_id(i) is not None}
    refs = {name: ref for name, ref in base_metadata.refs.items() if name not in update.refs_to_remove}
    dangling = sorted(name for name, ref in refs.items() if ref.snapshot_id in remove)
    if dangling:
        raise CommitFailedException(
            f"refs {dangling} point at snapshots being expired (changed since the expiry was planned)"
        )
    snapshots = [s for s in base_metadata.snapshots if s.snapshot_id not in remove]
    present = {s.snapshot_id for s in snapshots}
    changes: dict[str, Any] = {
        "refs": refs,
        "snapshots": snapshots,
        "snapshot_log": java_snapshot_log(list(base_metadata.snapshot_log), present),
        "statistics": [s for s in base_metadata.statistics if s.snapshot_id not in remove],
        "partition_statistics": [
            s for s in (base_metadata.partition_statistics or []) if s.snapshot_id not in remove
        ],
    }
    if "main" not in refs:
        changes["current_snapshot_id"] = None
    if remove or len(refs) != len(base_metadata.refs):
        context.add_update(update)
    return base_metadata.model_copy(update=changes)


def is_remote_catalog(catalog: Any) -> bool:
    """True for catalogs that apply updates on a server (REST): they get pyiceberg's standard updates."""
    try:
        from pyiceberg.catalog.rest import RestCatalog
    except ImportError:  # pragma: no cover - pyiceberg always ships it
        return False
    return isinstance(catalog, RestCatalog)


def stage_expiry(
    tx: Transaction,
    expired_ids: Iterable[int],
    refs_to_remove: Iterable[str],
    *,
    specs_to_remove: Iterable[int] = (),
    schemas_to_remove: Iterable[int] = (),
    remote: bool = False,
) -> None:
    """Stage the expiry's updates and requirements on ``tx`` (module docstring).

    Args:
        tx: a fresh transaction (its ``table_metadata`` is the base the plan was re-checked on).
        expired_ids: snapshots to remove.
        refs_to_remove: refs to remove (expired tags and branches, refs to missing snapshots).
        specs_to_remove, schemas_to_remove: ``clean_expired_metadata``'s removals.
        remote: the catalog applies updates on a server (standard updates only).
    """
    metadata = tx.table_metadata
    expired = [int(i) for i in expired_ids]
    refs = sorted(set(refs_to_remove) & set(metadata.refs))
    updates: list[TableUpdate] = []
    if remote:
        updates += [RemoveSnapshotRefUpdate(ref_name=name) for name in refs]  # type: ignore[call-arg]
        if expired:
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=expired))  # type: ignore[call-arg]
    elif expired or refs:
        updates.append(ExpireSnapshotsUpdate.of(expired, refs))
    specs, schemas = sorted(set(specs_to_remove)), sorted(set(schemas_to_remove))
    if specs:
        updates.append(RemovePartitionSpecsUpdate(spec_ids=specs))  # type: ignore[call-arg]
    if schemas:
        updates.append(RemoveSchemasUpdate(schema_ids=schemas))  # type: ignore[call-arg]
    if not updates:
        return
    tx._stage(tuple(updates))
    # pyiceberg keeps one requirement per type; every ref needs its own assertion, so they are appended.
    requirements: list[Any] = [
        AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id)  # type: ignore[call-arg]
        for name, ref in sorted(metadata.refs.items())
    ]
    if specs:
        requirements.append(AssertDefaultSpecId(default_spec_id=metadata.default_spec_id))  # type: ignore[call-arg]
    if schemas:
        requirements.append(AssertCurrentSchemaId(current_schema_id=metadata.current_schema_id))  # type: ignore[call-arg]
    tx._requirements = tx._requirements + tuple(requirements)


# -- the journal ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiryJournal:
    """What one run expires, written before its commit (module docstring)."""

    path: str  # fsspec path of the journal file
    run_id: str
    created_ms: int
    table_uuid: str
    base_metadata: str
    snapshots: dict[int, str]  # expired snapshot id -> manifest list location
    statistics: dict[str, int]  # statistics path -> snapshot id
    partition_statistics: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": JOURNAL_VERSION,
            "runId": self.run_id,
            "createdMs": self.created_ms,
            "tableUuid": self.table_uuid,
            "baseMetadata": self.base_metadata,
            "snapshots": [{"id": i, "manifestList": m} for i, m in self.snapshots.items()],
            "statistics": [{"path": p, "snapshotId": i} for p, i in self.statistics.items()],
            "partitionStatistics": [
                {"path": p, "snapshotId": i} for p, i in self.partition_statistics.items()
            ],
        }

    @classmethod
    def from_json(cls, path: str, document: Mapping[str, Any]) -> ExpiryJournal:
        return cls(
            path=path,
            run_id=str(document["runId"]),
            created_ms=int(document["createdMs"]),
            table_uuid=str(document["tableUuid"]),
            base_metadata=str(document["baseMetadata"]),
            snapshots={int(s["id"]): str(s["manifestList"]) for s in document["snapshots"]},
            statistics={str(s["path"]): int(s["snapshotId"]) for s in document["statistics"]},
            partition_statistics={
                str(s["path"]): int(s["snapshotId"]) for s in document["partitionStatistics"]
            },
        )


def journal_dir(io: FileIO, root: str) -> str:
    return io.join(root, "metadata")


def new_journal(
    io: FileIO,
    root: str,
    *,
    now_ms: int,
    metadata: Any,
    metadata_location: str,
    expired_ids: Iterable[int],
) -> ExpiryJournal:
    """The journal of a run about to commit the expiry of ``expired_ids`` of ``metadata`` (not written yet)."""
    run_id = uuid.uuid4().hex
    ids = set(expired_ids)
    snapshots = {s.snapshot_id: s.manifest_list for s in metadata.snapshots if s.snapshot_id in ids}
    stats = {s.statistics_path: s.snapshot_id for s in metadata.statistics if s.snapshot_id in ids}
    partition = {
        s.statistics_path: s.snapshot_id
        for s in (metadata.partition_statistics or [])
        if s.snapshot_id in ids
    }
    path = io.join(journal_dir(io, root), f"{JOURNAL_PREFIX}{run_id}{JOURNAL_SUFFIX}")
    return ExpiryJournal(
        path, run_id, now_ms, str(metadata.table_uuid), metadata_location, snapshots, stats, partition
    )


def write_journal(io: FileIO, journal: ExpiryJournal) -> None:
    """Write the journal (an atomic write: a reader sees all of it or nothing)."""
    io.write_atomic(journal.path, json.dumps(journal.to_json(), sort_keys=True).encode())


def read_journals(io: FileIO, root: str, table_uuid: str) -> list[ExpiryJournal]:
    """Journals left by earlier runs on this table (another table's UUID is ignored).

    Raises:
        CorruptMetadataError: a journal that cannot be decoded (it names the file; delete it by hand
            after checking, since it may be the only record of files an interrupted run left behind).
    """
    found = []
    directory = journal_dir(io, root)
    for name in sorted(io.list_names(directory)):
        if not (name.startswith(JOURNAL_PREFIX) and name.endswith(JOURNAL_SUFFIX)):
            continue
        path = io.join(directory, name)
        try:
            document = json.loads(io.read_bytes(path))
            journal = ExpiryJournal.from_json(path, document)
        except FileNotFoundError:
            continue  # another run finished it meanwhile
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(io.uri(path), f"not a valid expiry journal ({exc})") from exc
        if journal.table_uuid == table_uuid:
            found.append(journal)
    return found


def journal_finished(journal: ExpiryJournal, present: set[int], now_ms: int) -> bool:
    """A journal this run has finished (its snapshots are gone), or a dead one (an old run whose commit
    never landed: all its snapshots still there, written over an hour ago)."""
    if any(i not in present for i in journal.snapshots):
        return True
    return now_ms - journal.created_ms > STALE_JOURNAL_MS


def remove_journals(io: FileIO, journals: Sequence[ExpiryJournal]) -> None:
    """Delete ``journals`` (three attempts each) through the one deletion module."""
    if not journals:
        return
    deleter = FileDeleter(io, dry_run=False, max_attempts=3, concurrency=2)
    deleter.delete(DeleteRequest("expiry-journal", j.path) for j in journals)


__all__ = [
    "ExpireSnapshotsUpdate",
    "ExpiryJournal",
    "is_remote_catalog",
    "java_snapshot_log",
    "journal_finished",
    "new_journal",
    "read_journals",
    "remove_journals",
    "stage_expiry",
    "write_journal",
]
