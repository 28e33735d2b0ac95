"""The metadata files a snapshot (or tag, or long-lived changelog) points at, read once per run.

Both deletion planners need the same answer: expiry to know which manifests a retained snapshot or a
tag still uses, orphan cleanup to build its used set. A snapshot references its base, delta and
changelog manifest lists, every manifest in them (plus their ``_EXTRA_FILES``), its index manifest
and the index files that manifest lists, and its statistics file.

Metadata file names are immutable (every write makes a new name), so a :class:`MetadataReader`
keeps what it decoded by name for the length of one run: a manifest list, index manifest or
manifest another snapshot or tag also references is read once. Manifest lists are decoded by
:class:`~airflow_lakeformat.core.paimon.manifest_scan.ManifestListDecoder` (only the fields
maintenance needs; the blocks many lists share decoded once). ``reads`` counts the files read by
kind, which is how tests hold expiry to one read per file.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro, paths
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.manifest_scan import ManifestListDecoder, ManifestRef
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table

INDEX_MANIFEST_VERSION = 1
_ADD = 0


@dataclass(frozen=True, slots=True)
class IndexFileRef:
    """One index file (deletion vectors, dynamic-bucket hash, ...) listed by an index manifest."""

    file_name: str
    file_size: int | None
    external_path: str | None
    index_type: str | None


@dataclass
class SnapshotReferences:
    """Metadata file names one snapshot uses, with sizes where the metadata records them."""

    snapshot_id: int
    manifest_lists: dict[str, int | None] = field(default_factory=dict)
    manifests: list[ManifestRef] = field(default_factory=list)
    changelog_manifests: list[ManifestRef] = field(default_factory=list)
    index_manifest: str | None = None
    index_files: list[IndexFileRef] = field(default_factory=list)
    statistics: str | None = None
    missing: list[str] = field(default_factory=list)

    def manifest_file_names(self) -> set[str]:
        """Manifests, their extra files and manifest lists: everything in ``manifest/`` this snapshot uses."""
        names = set(self.manifest_lists)
        for meta in (*self.manifests, *self.changelog_manifests):
            names.add(meta.file_name)
            names.update(meta.extra_files)
        if self.index_manifest:
            names.add(self.index_manifest)
        return names

    def all_file_names(self) -> set[str]:
        names = self.manifest_file_names()
        names.update(ref.file_name for ref in self.index_files)
        if self.statistics:
            names.add(self.statistics)
        return names


def decode_index_manifest(data: bytes, path: str) -> list[IndexFileRef]:
    """The index files an index manifest holds (it is the complete index state of its snapshot)."""
    _, records = avro.read_records(data, path)
    result = []
    for record in records:
        if not isinstance(record, dict):
            raise CorruptMetadataError(path, "null record in index manifest")
        version = record.get("_VERSION")
        if version != INDEX_MANIFEST_VERSION:
            raise UnsupportedFormatError(
                path, f"index manifest _VERSION {version} (only {INDEX_MANIFEST_VERSION} is supported)"
            )
        if record.get("_KIND", _ADD) != _ADD:
            continue
        try:
            name = str(record["_FILE_NAME"])
        except KeyError as exc:
            raise CorruptMetadataError(path, "index manifest record lacks _FILE_NAME") from exc
        size: Any = record.get("_FILE_SIZE")
        result.append(
            IndexFileRef(
                file_name=name,
                file_size=int(size) if size is not None else None,
                external_path=record.get("_EXTERNAL_PATH"),
                index_type=record.get("_INDEX_TYPE"),
            )
        )
    return result


class MetadataReader:
    """One run's reads of a table's metadata: each manifest list, index manifest and (kept) manifest once."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.lists = ManifestListDecoder()
        self._list_blocks: dict[str, tuple[int, ...]] = {}
        self._index: dict[str, list[IndexFileRef]] = {}
        self._manifests: dict[str, list[ManifestEntry]] = {}
        self._snapshots: dict[int, Snapshot] = {}
        self.reads: Counter[str] = Counter()  # files read, by kind
        self.names: dict[str, set[str]] = {"manifest-list": set(), "manifest": set()}  # which ones

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """A snapshot of the table's branch, read once (SnapshotNotFoundError if absent)."""
        snapshot = self._snapshots.get(snapshot_id)
        if snapshot is None:
            snapshot = self.table.snapshot_manager.snapshot(snapshot_id)
            self.reads["snapshot"] += 1
            self._snapshots[snapshot_id] = snapshot
        return snapshot

    def snapshots(self, ids: list[int]) -> list[Snapshot]:
        """The snapshots of ``ids`` that exist, each read once (``Table.read_snapshots``: one gone since it
        was listed is left out, one that cannot be parsed raises CorruptMetadataError)."""
        unread = [i for i in ids if i not in self._snapshots]
        for snapshot in self.table.read_snapshots(unread):
            self.reads["snapshot"] += 1
            self._snapshots[snapshot.id] = snapshot
        return [self._snapshots[i] for i in ids if i in self._snapshots]

    def history(self) -> list[Snapshot]:
        """Every snapshot of the table's branch from the earliest to the latest, parsed (:meth:`snapshots`)."""
        manager = self.table.snapshot_manager
        earliest, latest = manager.earliest_snapshot_id(), manager.latest_snapshot_id()
        if earliest is None or latest is None:
            return []
        return self.snapshots([i for i in manager.list_snapshot_ids() if earliest <= i <= latest])

    def list_blocks(self, name: str, referenced_by: str) -> tuple[int, ...]:
        """The blocks of a manifest list (rows: ``self.lists.blocks[i]``); MissingMetadataError if absent."""
        blocks = self._list_blocks.get(name)
        if blocks is None:
            data = self.table._read_metadata(name, referenced_by)
            self.reads["manifest-list"] += 1
            self.names["manifest-list"].add(name)
            blocks = self.lists.decode(data, self.table.io.uri(self.table.manifest_path(name)))
            self._list_blocks[name] = blocks
        return blocks

    def manifest_list(self, name: str, referenced_by: str) -> list[ManifestRef]:
        return self.lists.refs(self.list_blocks(name, referenced_by))

    def index_files(self, name: str, referenced_by: str) -> list[IndexFileRef]:
        files = self._index.get(name)
        if files is None:
            path = self.table.manifest_path(name)
            try:
                data = self.table.io.read_bytes(path)
            except FileNotFoundError as exc:
                raise MissingMetadataError(self.table.io.uri(path), referenced_by) from exc
            self.reads["index-manifest"] += 1
            files = decode_index_manifest(data, self.table.io.uri(path))
            self._index[name] = files
        return files

    def manifest(
        self, name: str, referenced_by: str, expected_size: int | None = None
    ) -> list[ManifestEntry]:
        """A manifest's entries, decoded once and kept for the rest of the run (checked against the
        manifest list's ``expected_size`` when given: ``avro.check_manifest_size``)."""
        entries = self._manifests.get(name)
        if entries is None:
            entries = self.table.manifest(name, referenced_by, expected_size)
            self.reads["manifest"] += 1
            self.names["manifest"].add(name)
            self._manifests[name] = entries
        return entries

    def manifests(
        self, names: list[str], referenced_by: str, sizes: Sequence[int | None] | None = None
    ) -> list[list[ManifestEntry]]:
        """Many manifests' entries, in order: the ones not read yet are fetched on the table's
        ``read_parallelism`` threads (object stores) and decoded here, then kept. ``sizes`` (the
        manifest list's, one per name) are checked as in :meth:`manifest`."""
        expected = dict(zip(names, sizes, strict=True)) if sizes is not None else {}
        missing = list(dict.fromkeys(n for n in names if n not in self._manifests))
        if missing:
            table = self.table
            fetched = table.parallel_imap(
                lambda n: table._read_metadata(n, referenced_by, expected.get(n)), missing
            )
            for name, data in zip(missing, fetched, strict=True):
                self._manifests[name] = avro.decode_manifest(data, table.io.uri(table.manifest_path(name)))
                self.reads["manifest"] += 1
                self.names["manifest"].add(name)
        return [self._manifests[n] for n in names]

    def manifest_names(self, name: str, referenced_by: str) -> list[str]:
        """The file names a manifest mentions (not kept: each manifest is asked for once)."""
        entries = self._manifests.get(name)
        if entries is not None:
            return [n for e in entries for n in (e.file.file_name, *e.file.extra_files)]
        self.reads["manifest"] += 1
        self.names["manifest"].add(name)
        return self.table.manifest_file_names(name, referenced_by)


def snapshot_references(
    table: Table,
    snapshot: Snapshot,
    *,
    missing_ok: bool = False,
    owner: str | None = None,
    reader: MetadataReader | None = None,
) -> SnapshotReferences:
    """Read a snapshot's manifest lists and index manifest (not its manifests), through ``reader``.

    ``missing_ok`` is for snapshots being expired: a crashed earlier run may already have deleted
    their metadata, so a missing file reads as empty and is recorded in ``missing``. For anything
    that protects files (retained snapshots, tags) a missing file raises, because a protection set
    built from incomplete metadata would let live files be deleted.
    """
    owner = owner or f"snapshot {snapshot.id}"
    reader = reader or MetadataReader(table)
    refs = SnapshotReferences(
        snapshot.id, statistics=snapshot.statistics, index_manifest=snapshot.index_manifest
    )

    def read_list(name: str, size: int | None) -> list[ManifestRef]:
        refs.manifest_lists[name] = size
        try:
            return reader.manifest_list(name, owner)
        except MissingMetadataError:
            if not missing_ok:
                raise
            refs.missing.append(name)
            return []

    refs.manifests = read_list(snapshot.base_manifest_list, snapshot.base_manifest_list_size)
    refs.manifests += read_list(snapshot.delta_manifest_list, snapshot.delta_manifest_list_size)
    if snapshot.changelog_manifest_list:
        refs.changelog_manifests = read_list(
            snapshot.changelog_manifest_list, snapshot.changelog_manifest_list_size
        )
    if snapshot.index_manifest:
        try:
            refs.index_files = reader.index_files(snapshot.index_manifest, owner)
        except MissingMetadataError:
            if not missing_ok:
                raise
            refs.missing.append(snapshot.index_manifest)
    return refs


def resolve_table_path(table: Table, path: str) -> str:
    """The fsspec path of a file path as metadata records it: relative to the table root, or full.

    Full paths (``_EXTERNAL_PATH``) must be on the table's own filesystem; anything else is refused,
    since deleting through another filesystem's credentials is not something to guess at.
    """
    scheme, sep, _ = path.partition("://")
    if not sep and not path.startswith("file:"):
        return path if path.startswith("/") else posixpath.join(table.root, path)
    scheme = "file" if path.startswith("file:") else scheme.lower()
    if scheme == "s3a":
        scheme = "s3"
    if scheme != table.io.protocol and not (scheme == "file" and table.io.is_local):
        raise UnsupportedFormatError(
            path, f"external file on another filesystem than the table ({table.uri})"
        )
    return str(table.io.fs._strip_protocol(path)).rstrip("/")


def index_file_path(table: Table, ref: IndexFileRef) -> str:
    """Where an index file lives: its external path, else ``<root>/index/<name>``."""
    if ref.external_path:
        return resolve_table_path(table, ref.external_path)
    return posixpath.join(table.root, paths.INDEX_DIR, ref.file_name)
