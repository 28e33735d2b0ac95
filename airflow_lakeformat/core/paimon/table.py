"""A Paimon table opened for reading: its FileIO, root, schemas, snapshots and manifests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, TypeVar

from airflow_lakeformat.core.errors import (
    BranchNotFoundError,
    CorruptMetadataError,
    MissingMetadataError,
    SnapshotNotFoundError,
    TableNotFoundError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon import avro, paths
from airflow_lakeformat.core.paimon.manifest import ManifestEntry, ManifestFileMeta
from airflow_lakeformat.core.paimon.schema import SCHEMA_PREFIX, TableSchema
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import MAIN_BRANCH, SnapshotManager
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

T = TypeVar("T")
DEFAULT_READ_PARALLELISM = 16


class Table:
    """Entry point to a table. Cheap to create; reads only what is asked for."""

    def __init__(
        self,
        io: FileIO,
        root: str,
        branch: str = MAIN_BRANCH,
        read_parallelism: int = DEFAULT_READ_PARALLELISM,
    ):
        self.io = io
        self.root = root
        self.branch = branch
        self.read_parallelism = max(1, read_parallelism)
        self.snapshot_manager = SnapshotManager(io, root, branch)
        self.schema_dir = io.join(self.snapshot_manager.branch_root, paths.SCHEMA_DIR)
        self.manifest_dir = io.join(root, paths.MANIFEST_DIR)

    @classmethod
    def open(
        cls,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        branch: str = MAIN_BRANCH,
        read_parallelism: int = DEFAULT_READ_PARALLELISM,
    ) -> Table:
        """Open the table rooted at ``uri`` (a local path or any fsspec URL) and check it is one we can read."""
        io, root = FileIO.for_uri(uri, storage_options)
        table = cls(io, root, branch, read_parallelism)
        if branch != MAIN_BRANCH and not io.exists(table.snapshot_manager.branch_root):
            cls(io, root, MAIN_BRANCH, read_parallelism).check_supported()  # a table, without that branch
            raise BranchNotFoundError(f"{uri}: no branch {branch!r} (branches: {_branch_names(io, root)})")
        table.check_supported()
        return table

    @property
    def uri(self) -> str:
        return self.io.uri(self.root)

    # -- schemas -------------------------------------------------------------------------------

    def schema_ids(self) -> list[int]:
        ids = []
        for name in self.io.list_names(self.schema_dir):
            suffix = name[len(SCHEMA_PREFIX) :] if name.startswith(SCHEMA_PREFIX) else ""
            if suffix.isdigit():
                ids.append(int(suffix))
        return sorted(ids)

    def schema_by_id(self, schema_id: int) -> TableSchema:
        path = self.io.join(self.schema_dir, f"{SCHEMA_PREFIX}{schema_id}")
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError as exc:
            raise MissingMetadataError(self.io.uri(path)) from exc
        try:
            return TableSchema.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(
                self.io.uri(path), f"not a valid schema JSON document ({exc})"
            ) from exc

    @cached_property
    def schema(self) -> TableSchema:
        """The current (highest) schema."""
        ids = self.schema_ids()
        if not ids:
            if not self.io.exists(self.root):
                raise TableNotFoundError(self.uri, "the path does not exist")
            raise TableNotFoundError(self.uri)
        return self.schema_by_id(ids[-1])

    def check_supported(self) -> None:
        """Refuse tables whose format this release does not read (rather than misread them)."""
        options = self.schema.table_options
        if options.manifest_format != "avro":
            raise UnsupportedFormatError(
                self.uri, f"manifest.format={options.manifest_format!r} (only avro manifests are supported)"
            )

    # -- snapshots -----------------------------------------------------------------------------

    def read_snapshots(self, ids: Sequence[int]) -> list[Snapshot]:
        """The snapshots ``ids`` names, in order, each parsed (fetched on ``read_parallelism`` threads from
        object stores, in order from a local disk).

        A snapshot listed but gone when read was removed by a concurrent expiry: left out, as Paimon's
        readers do. One that exists but cannot be parsed (truncated, garbage, another id) raises
        CorruptMetadataError naming the file.
        """
        manager = self.snapshot_manager

        def read(snapshot_id: int) -> Snapshot | None:
            try:
                return manager.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                return None

        found = map(read, ids) if self.io.is_local else self.parallel_imap(read, ids)
        return [snapshot for snapshot in found if snapshot is not None]

    # -- manifests -----------------------------------------------------------------------------

    def manifest_path(self, name: str) -> str:
        return self.io.join(self.manifest_dir, name)

    def _read_metadata(self, name: str, referenced_by: str, expected_size: int | None = None) -> bytes:
        """A manifest list's or manifest's bytes; with ``expected_size`` (the manifest list's
        ``_FILE_SIZE``) a manifest of another length is CorruptMetadataError (avro.check_manifest_size)."""
        path = self.manifest_path(name)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError as exc:
            raise MissingMetadataError(self.io.uri(path), referenced_by) from exc
        avro.check_manifest_size(data, self.io.uri(path), expected_size)
        return data

    def manifest_list(self, name: str, referenced_by: str = "a snapshot") -> list[ManifestFileMeta]:
        return avro.decode_manifest_list(
            self._read_metadata(name, referenced_by), self.io.uri(self.manifest_path(name))
        )

    def manifest(
        self, name: str, referenced_by: str = "a manifest list", expected_size: int | None = None
    ) -> list[ManifestEntry]:
        return avro.decode_manifest(
            self._read_metadata(name, referenced_by, expected_size), self.io.uri(self.manifest_path(name))
        )

    def manifest_file_names(
        self, name: str, referenced_by: str = "a manifest list", expected_size: int | None = None
    ) -> list[str]:
        """The file names a manifest's entries mention, without decoding their statistics."""
        from airflow_lakeformat.core.paimon import manifest_scan

        return manifest_scan.manifest_file_names(
            self._read_metadata(name, referenced_by, expected_size), self.io.uri(self.manifest_path(name))
        )

    def manifest_with_schema(
        self, name: str, referenced_by: str = "a manifest list", expected_size: int | None = None
    ) -> tuple[list[ManifestEntry], dict[str, Any]]:
        """A manifest's entries and its Avro writer schema (to carry fields a rewrite does not know)."""
        path = self.io.uri(self.manifest_path(name))
        return avro.decode_manifest_with_schema(self._read_metadata(name, referenced_by, expected_size), path)

    def data_manifests(self, snapshot: Snapshot) -> tuple[list[ManifestFileMeta], list[ManifestFileMeta]]:
        """The base and delta manifest lists of a snapshot (tags are snapshots too)."""
        owner = f"snapshot {snapshot.id}"
        base = self.manifest_list(snapshot.base_manifest_list, owner)
        delta = self.manifest_list(snapshot.delta_manifest_list, owner)
        return base, delta

    def read_manifests(
        self,
        metas: Sequence[ManifestFileMeta],
        referenced_by: str,
        progress: Progress = NO_PROGRESS,
        decode: Callable[[bytes, str], list[ManifestEntry]] = avro.decode_manifest,
    ) -> list[list[ManifestEntry]]:
        """Read many manifests, results in input order.

        Threads only fetch bytes from object stores (concurrent IO matters there; a local disk is
        read in order, where threads only contend); decoding happens in the calling thread, because
        the decoders hold the GIL and decoding threads would only contend.
        """
        progress.start(f"reading manifests of {referenced_by}", len(metas))
        try:
            result = []

            def fetch(meta: ManifestFileMeta) -> bytes:
                return self._read_metadata(meta.file_name, referenced_by, meta.file_size)

            fetched = map(fetch, metas) if self.io.is_local else self.parallel_imap(fetch, metas)
            for meta, data in zip(metas, fetched, strict=True):
                result.append(decode(data, self.io.uri(self.manifest_path(meta.file_name))))
                progress.advance()
            return result
        finally:
            progress.finish()

    def parallel_imap(self, fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]:
        """``map`` over a thread pool, lazily and in order (a sequential map for one worker)."""
        if len(items) <= 1 or self.read_parallelism == 1:
            yield from map(fn, items)
            return
        with ThreadPoolExecutor(max_workers=min(self.read_parallelism, len(items))) as pool:
            yield from pool.map(fn, items)

    def parallel_map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        if len(items) <= 1 or self.read_parallelism == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.read_parallelism, len(items))) as pool:
            return list(pool.map(fn, items))


def _branch_names(io: FileIO, root: str) -> str:
    """The table's branches besides main, for an error message ("none" when it has none)."""
    directory = io.join(root, paths.BRANCH_DIR)
    names = io.list_names(directory) if io.exists(directory) else []
    found = sorted(n[len(paths.BRANCH_PREFIX) :] for n in names if n.startswith(paths.BRANCH_PREFIX))
    return ", ".join(found) or "none but main"
