"""The metadata files a snapshot (or tag, or long-lived changelog) points at.

Both deletion planners need the same answer: expiry to know which manifests a retained snapshot or a
tag still uses, orphan cleanup to build its used set. A snapshot references its base, delta and
changelog manifest lists, every manifest in them (plus their ``_EXTRA_FILES``), its index manifest
and the index files that manifest lists, and its statistics file.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro, paths
from airflow_lakeformat.core.paimon.manifest import ManifestFileMeta
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
    manifests: list[ManifestFileMeta] = field(default_factory=list)
    changelog_manifests: list[ManifestFileMeta] = field(default_factory=list)
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


def snapshot_references(
    table: Table, snapshot: Snapshot, *, missing_ok: bool = False, owner: str | None = None
) -> SnapshotReferences:
    """Read a snapshot's manifest lists and index manifest (not its manifests).

    ``missing_ok`` is for snapshots being expired: a crashed earlier run may already have deleted
    their metadata, so a missing file reads as empty and is recorded in ``missing``. For anything
    that protects files (retained snapshots, tags) a missing file raises, because a protection set
    built from incomplete metadata would let live files be deleted.
    """
    owner = owner or f"snapshot {snapshot.id}"
    refs = SnapshotReferences(
        snapshot.id, statistics=snapshot.statistics, index_manifest=snapshot.index_manifest
    )

    def read_list(name: str, size: int | None) -> list[ManifestFileMeta]:
        refs.manifest_lists[name] = size
        try:
            return table.manifest_list(name, owner)
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
        path = table.manifest_path(snapshot.index_manifest)
        try:
            data = table.io.read_bytes(path)
        except FileNotFoundError as exc:
            if not missing_ok:
                raise MissingMetadataError(table.io.uri(path), owner) from exc
            refs.missing.append(snapshot.index_manifest)
        else:
            refs.index_files = decode_index_manifest(data, table.io.uri(path))
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
