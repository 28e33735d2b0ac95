"""Steps 1 to 3 of snapshot expiry: the data, changelog and metadata files the expired snapshots free.

**Step 1**, which data files the expired snapshots' DELETEs free:

The delta manifests of snapshots ``(begin, end]`` are read into *marks*, one per ADD or DELETE entry,
ordered by (snapshot id, position in that snapshot's delta). Folding them keeps, per file
(partition, bucket, name), the last mark: a file whose last mark is a DELETE is no longer used by
snapshot ``end`` or any later one; an ADD after a DELETE (an in-place upgrade) brings it back. Files a
tag or a branch head still holds by name are kept.

Everything is read through a :class:`~airflow_lakeformat.core.paimon.maintenance.references.
MetadataReader`, shared with the rest of the plan: a manifest list or manifest read here (a delta
manifest that a tag's base list also names, snapshot ``end``'s delta list) is not read again later.
The Spark job distributes :func:`delta_marks` and runs :func:`fold_marks` and
:func:`protected_data_names` on the driver.

**Step 2** (:func:`changelog_requests`): the changelog files ADDed by the changelog manifests of
``[begin, end)``. **Step 3** (:func:`unused_metadata_requests`): the manifests, manifest lists, index
manifests, index files and statistics files of ``[begin, end)`` that snapshot ``end``, no tag and no branch
uses (compared by file name).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.maintenance.references import (
    MetadataReader,
    SnapshotReferences,
    index_file_path,
    resolve_table_path,
    snapshot_references,
)
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, iter_added, merge_entries
from airflow_lakeformat.core.paimon.manifest_scan import ManifestRef
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table

FileKey = tuple[bytes, int, str]
# (file key, (snapshot id, position in that snapshot's delta), is DELETE, the entry)
Mark = tuple[FileKey, tuple[int, int], bool, ManifestEntry]


def _file_key(entry: ManifestEntry) -> FileKey:
    return (entry.partition, entry.bucket, entry.file.file_name)


@dataclass
class DeltaMarks:
    marks: list[Mark]
    warnings: list[str]
    manifest_lists_read: int
    manifests_read: int
    lists_read: list[str] = field(default_factory=list)  # names of what this call read
    manifests_read_names: list[str] = field(default_factory=list)


def delta_marks(
    table: Table, snapshot_id: int, *, retained: bool, reader: MetadataReader | None = None
) -> DeltaMarks:
    """The ADD/DELETE entries of one snapshot's delta manifests, in order, as marks.

    For an expired snapshot (``retained=False``) missing metadata reads as empty: a crashed
    earlier run deleted it after finishing this step. For the first retained snapshot it raises.
    The counts and names are of the files this call read (not those ``reader`` had read before).
    """
    reader = reader or MetadataReader(table)
    lists_read, manifests_read = reader.names["manifest-list"], reader.names["manifest"]
    owner = f"snapshot {snapshot_id}"
    found = DeltaMarks([], [], 0, 0)
    snapshot = reader.snapshot(snapshot_id)
    known = snapshot.delta_manifest_list in lists_read
    try:
        delta = reader.manifest_list(snapshot.delta_manifest_list, owner)
    except FileNotFoundError:
        if retained:
            raise
        found.warnings.append(f"delta manifest list of snapshot {snapshot_id} is already gone")
        return found
    if not known:
        found.lists_read.append(snapshot.delta_manifest_list)
        found.manifest_lists_read = 1
    before = {ref.file_name for ref in delta if ref.file_name in manifests_read}
    manifests = manifests_or_gone(reader, delta, owner, missing_ok=not retained, warnings=found.warnings)
    new = [ref.file_name for ref in delta if ref.file_name not in before and ref.file_name in manifests_read]
    found.manifests_read_names = list(dict.fromkeys(new))
    found.manifests_read = len(found.manifests_read_names)
    position = 0
    for entries in manifests:
        for entry in entries:
            found.marks.append(
                (_file_key(entry), (snapshot_id, position), entry.kind == FileKind.DELETE, entry)
            )
            position += 1
    return found


def fold_marks(marks: Iterable[Mark]) -> tuple[list[ManifestEntry], int]:
    """Files whose last mark in ``(begin, end]`` is a DELETE, and how many DELETEs a later ADD of the
    same file cancelled (in-place upgrades)."""
    last: dict[FileKey, tuple[tuple[int, int], bool, ManifestEntry]] = {}
    readded = 0
    for key, order, is_delete, entry in sorted(marks, key=lambda m: m[1]):
        previous = last.get(key)
        if previous is not None and previous[1] and not is_delete:
            readded += 1
        if previous is None and not is_delete:
            continue  # an ADD with no DELETE before it in the range: nothing to undo
        last[key] = (order, is_delete, entry)
    return [entry for _, is_delete, entry in last.values() if is_delete], readded


def protected_data_names(
    table: Table, protecting: Iterable[Snapshot], reader: MetadataReader | None = None
) -> set[str]:
    """File names live in any tag or branch head: never deleted by expiry."""
    reader = reader or MetadataReader(table)
    names: set[str] = set()
    for snapshot in protecting:
        owner = f"snapshot {snapshot.id}"
        refs = reader.manifest_list(snapshot.base_manifest_list, owner)
        refs += reader.manifest_list(snapshot.delta_manifest_list, owner)
        merged: dict[tuple[object, ...], ManifestEntry] = {}
        with gc_paused():
            for entries in reader.manifests([r.file_name for r in refs], owner, [r.file_size for r in refs]):
                merge_entries(entries, merged)
        names.update(e.file.file_name for e in iter_added(merged))
    return names


def data_file_requests(
    table: Table, entries: Iterable[ManifestEntry], kind: str, data_paths: DataFilePaths
) -> list[DeleteRequest]:
    requests = []
    for entry in entries:
        path = resolve_table_path(table, data_paths.relative_path(entry))
        requests.append(DeleteRequest(kind, path, entry.file.file_size))
        directory = posixpath.dirname(path)
        for extra in entry.file.extra_files:
            requests.append(DeleteRequest("extra-file", posixpath.join(directory, extra)))
    return requests


def manifests_or_gone(
    reader: MetadataReader, refs: list[ManifestRef], owner: str, *, missing_ok: bool, warnings: list[str]
) -> list[list[ManifestEntry]]:
    """Read manifests; with ``missing_ok`` (an expired snapshot's, which a crashed earlier run may
    already have removed) a missing one is skipped with a warning instead of raising."""
    result = []
    for ref in refs:
        try:
            result.append(reader.manifest(ref.file_name, owner, ref.file_size))
        except FileNotFoundError:
            if not missing_ok:
                raise
            warnings.append(
                f"manifest {ref.file_name} of {owner} is already gone (an earlier run removed it)"
            )
    return result


def changelog_requests(
    table: Table,
    reader: MetadataReader,
    expired: Iterable[Snapshot],
    data_paths: DataFilePaths,
    warnings: list[str],
) -> list[DeleteRequest]:
    """Step 2: the changelog files ADDed by the changelog manifests of the expired snapshots (a changelog
    manifest list or manifest already gone is skipped, with a warning for a manifest)."""
    requests: list[DeleteRequest] = []
    for snapshot in expired:
        if not snapshot.changelog_manifest_list:
            continue
        owner = f"snapshot {snapshot.id}"
        try:
            changelog_refs = reader.manifest_list(snapshot.changelog_manifest_list, owner)
        except FileNotFoundError:
            continue
        changelogs = manifests_or_gone(reader, changelog_refs, owner, missing_ok=True, warnings=warnings)
        for entries in changelogs:
            added = [e for e in entries if e.kind == FileKind.ADD]
            requests += data_file_requests(table, added, "changelog-file", data_paths)
    return requests


def unused_metadata_requests(
    table: Table,
    reader: MetadataReader,
    expired: Iterable[Snapshot],
    kept: Iterable[Snapshot],
    warnings: list[str],
) -> list[DeleteRequest]:
    """Step 3: the metadata files of the expired snapshots that none of ``kept`` (snapshot ``end``, the
    snapshots of tags and branches) uses, each once."""
    skipping: set[str] = set()
    for snapshot in kept:
        skipping |= snapshot_references(table, snapshot, reader=reader).all_file_names()
    seen: set[str] = set()
    requests: list[DeleteRequest] = []
    for snapshot in expired:
        refs = snapshot_references(table, snapshot, missing_ok=True, reader=reader)
        warnings += [f"{name} of snapshot {snapshot.id} is already gone" for name in refs.missing]
        requests += _metadata_requests(table, refs, skipping, seen)
    return requests


def _metadata_requests(
    table: Table, refs: SnapshotReferences, skipping: set[str], seen: set[str]
) -> list[DeleteRequest]:
    requests: list[DeleteRequest] = []

    def add(kind: str, name: str, path: str, size: int | None) -> None:
        if name in skipping or name in seen:
            return
        seen.add(name)
        requests.append(DeleteRequest(kind, path, size))

    for meta in (*refs.manifests, *refs.changelog_manifests):
        add("manifest", meta.file_name, table.manifest_path(meta.file_name), meta.file_size)
        for extra in meta.extra_files:
            add("manifest", extra, table.manifest_path(extra), None)
    for name, size in refs.manifest_lists.items():
        add("manifest-list", name, table.manifest_path(name), size)
    if refs.index_manifest:
        add("index-manifest", refs.index_manifest, table.manifest_path(refs.index_manifest), None)
    for ref in refs.index_files:
        add("index-file", ref.file_name, index_file_path(table, ref), ref.file_size)
    if refs.statistics:
        path = table.io.join(table.root, paths.STATISTICS_DIR, refs.statistics)
        add("statistics", refs.statistics, path, None)
    return requests
