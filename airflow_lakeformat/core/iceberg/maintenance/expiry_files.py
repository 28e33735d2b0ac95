"""Which files an Iceberg expiry deletes: the expired side minus the retained side, by stored object.

Java 1.10.2 ``ExpireSnapshotsSparkAction.expiredFileDS`` = ``fileDS(original, expiredIds).except(fileDS(updated))``
and ``ReachableFileCleanup`` (reference 3a): candidates are the manifest lists, manifests, live content files
and statistics files the expired snapshots reach; a candidate is kept when any retained snapshot reaches it.
Like ``ReachableFileCleanup`` (and with the same result as the Spark action), only the content of manifests
no retained snapshot lists is read on the expired side: a manifest a retained snapshot still lists keeps
its live files valid anyway. The retained side's manifests are read only when some content file is a
candidate.

Locations are compared as the fsspec path of the table's store (:func:`to_fs_path`): ``s3a://b/k``,
``s3n://b/k`` and ``s3://b/k`` are one object, ``file:/x``, ``file:///x`` and ``/x`` one file, duplicate
slashes collapse. A location on another store (another scheme, a file URI on an object-store table) cannot be
deleted through the table's FileIO: it is reported in ``warnings`` and left alone.

On a local disk, Java's Hadoop ``LocalFileSystem`` writes a ``.<name>.crc`` checksum next to every file and
deletes it with the file; so does this expiry (kind ``checksum-file``, deleted in its file's phase).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from airflow_lakeformat.core.iceberg.metadata.location import normalise_path, split_location
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.reach.reachability import (
    ContentRef,
    ManifestRef,
    ReachabilityReader,
    reachable_files,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

_EQUAL_SCHEMES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
_NO_STATISTICS = SimpleNamespace(statistics=[], partition_statistics=[])


CHECKSUM_KIND = "checksum-file"


def checksum_sidecar(path: str) -> str:
    """Hadoop's ``ChecksumFileSystem`` sidecar of a local file (``dir/.name.crc``), which Java's local
    ``FileIO`` writes next to every file and deletes with it."""
    directory, _, name = path.rpartition("/")
    return f"{directory}/.{name}.crc"


def to_fs_path(io: FileIO, location: str) -> str | None:
    """The fsspec path ``io`` uses for a metadata location, or None if it lives on another store."""
    scheme, authority, raw = split_location(location)
    path = normalise_path(raw)
    if io.is_local:
        if scheme not in (None, "") and scheme.lower() != "file":
            return None
        if authority not in (None, "", "localhost"):
            return None
        return path if path.startswith("/") else None
    if not scheme or not authority:
        return None
    lowered = scheme.lower()
    if _EQUAL_SCHEMES.get(lowered, lowered) != _EQUAL_SCHEMES.get(io.protocol, io.protocol):
        return None
    return f"{authority}{path}"


@dataclass
class ExpiredInputs:
    """Snapshots whose files are candidates (anything with ``snapshot_id`` and ``manifest_list``), their
    statistics files (location -> size, None if unknown), and whether missing metadata is tolerated
    (snapshots already gone from the table, which an interrupted run may have partly cleaned)."""

    snapshots: Sequence[Any]
    statistics: dict[str, int | None] = field(default_factory=dict)
    partition_statistics: dict[str, int | None] = field(default_factory=dict)
    missing_ok: bool = False


class RetainedSide:
    """Everything the retained snapshots reach, as fsspec paths; grows as snapshots are folded in.

    Args:
        table: the table.
        reader: the run's reader (shared cache).
        snapshots: the retained snapshots.
        metadata: the metadata they belong to (for their statistics files).
    """

    def __init__(
        self, table: IcebergTable, reader: ReachabilityReader, snapshots: Sequence[Any], metadata: Any
    ) -> None:
        self.table = table
        self.reader = reader
        self.snapshot_ids: set[int] = set()
        self.manifests: dict[str, ManifestRef] = {}
        self.paths: set[str] = set()  # lists, manifests, statistics
        self.content: set[str] | None = None  # None until some content file is a candidate
        self._content_read: set[str] = set()
        self.fold(snapshots, metadata)

    def _add(self, location: str) -> None:
        path = to_fs_path(self.table.io, location)
        if path is not None:
            self.paths.add(path)

    def fold(self, snapshots: Sequence[Any], metadata: Any) -> None:
        """Add snapshots not folded yet (and their statistics files in ``metadata``)."""
        new = [s for s in snapshots if s.snapshot_id not in self.snapshot_ids]
        if not new:
            return
        for snapshot, rows in zip(new, self.reader.manifests_of_many(new), strict=True):
            self.snapshot_ids.add(snapshot.snapshot_id)
            self._add(snapshot.manifest_list)
            for row in rows:
                if row.path not in self.manifests:
                    self.manifests[row.path] = row
                    self._add(row.path)
        ids = {s.snapshot_id for s in new}
        for stats in (*metadata.statistics, *(metadata.partition_statistics or [])):
            if stats.snapshot_id in ids:
                self._add(stats.statistics_path)
        if self.content is not None:
            self.need_content()

    def need_content(self, progress: Progress = NO_PROGRESS) -> None:
        """Read the live content files of every retained manifest not read yet."""
        if self.content is None:
            self.content = set()
        todo = [m for path, m in self.manifests.items() if path not in self._content_read]
        for manifest, refs in zip(todo, self.reader.content_of(todo, progress), strict=True):
            self._content_read.add(manifest.path)
            for ref in refs:
                path = to_fs_path(self.table.io, ref.path)
                if path is not None:
                    self.content.add(path)

    def reaches(self, path: str) -> bool:
        """True if a retained snapshot reaches this fsspec path (as any kind of file)."""
        return path in self.paths or (self.content is not None and path in self.content)


@dataclass
class Deletions:
    """The files to delete, in phase order, with the original locations and what could not be resolved."""

    requests: list[DeleteRequest] = field(default_factory=list)
    locations: dict[str, str] = field(default_factory=dict)  # fsspec path -> location in the metadata
    warnings: list[str] = field(default_factory=list)


def deletion_requests(
    table: IcebergTable,
    reader: ReachabilityReader,
    inputs: Iterable[ExpiredInputs],
    retained: RetainedSide,
    *,
    progress: Progress = NO_PROGRESS,
) -> Deletions:
    """The expired side minus the retained side (module docstring).

    Raises:
        MissingMetadataError, CorruptMetadataError: a manifest list or manifest of an input without
            ``missing_ok``, or of a retained snapshot, is missing or undecodable.
    """
    builder = _DeletionBuilder(table.io, retained)
    expired = _read_expired_side(table, reader, inputs, builder.out)
    manifests: list[tuple[ManifestRef, bool, str]] = []
    for loc, (row, missing_ok) in expired.manifests.items():
        path = builder.resolve(loc)
        if path is not None and not retained.reaches(path):
            manifests.append((row, missing_ok, path))
    content = _content_of(reader, manifests, builder, progress)
    if content:
        retained.need_content(progress)
    for ref, path in content.values():
        builder.add(ref.kind, path, ref.path, ref.file_size)
    for row, _, path in manifests:
        builder.add("manifest", path, row.path, row.length or None)
    for kind, loc, size in expired.other_files(reader.sizes):
        path = builder.resolve(loc)
        if path is not None:
            builder.add(kind, path, loc, size)
    if builder.foreign:
        builder.out.warnings.append(
            f"{len(builder.foreign)} file(s) are on another store than the table's and are left alone, "
            f"e.g. {builder.foreign[0]}"
        )
    return builder.out


@dataclass
class _ExpiredSide:
    """What the expired inputs reach: manifest lists, manifests (with ``missing_ok``), statistics files."""

    lists: list[str] = field(default_factory=list)
    manifests: dict[str, tuple[ManifestRef, bool]] = field(
        default_factory=dict
    )  # location -> (row, missing_ok)
    stats: list[tuple[str, str, int | None]] = field(default_factory=list)  # (kind, location, size)

    def other_files(self, sizes: dict[str, int]) -> list[tuple[str, str, int | None]]:
        """Manifest lists, then statistics files: ``(kind, location, size)``."""
        return [("manifest-list", loc, sizes.get(loc)) for loc in self.lists] + self.stats


def _read_expired_side(
    table: IcebergTable, reader: ReachabilityReader, inputs: Iterable[ExpiredInputs], out: Deletions
) -> _ExpiredSide:
    """Step 1: read the manifest lists of every input (a manifest is ``missing_ok`` only if every input
    reaching it is)."""
    side = _ExpiredSide()
    for inp in inputs:
        reached = reachable_files(
            table,
            inp.snapshots,
            metadata=_NO_STATISTICS,
            reader=reader,
            read_content=False,
            missing_ok=inp.missing_ok,
        )
        if reached.missing:
            out.warnings.append(
                f"{len(reached.missing)} manifest list(s) of snapshots already gone from the table were already "
                f"deleted (an earlier run removed them), e.g. {reached.missing[0]}"
            )
        side.lists += reached.manifest_lists
        for loc, row in reached.manifests.items():
            missing_ok = side.manifests.get(loc, (row, True))[1] and inp.missing_ok
            side.manifests[loc] = (row, missing_ok)
        side.stats += [("statistics", loc, size) for loc, size in inp.statistics.items()]
        side.stats += [("partition-statistics", loc, size) for loc, size in inp.partition_statistics.items()]
    return side


def _content_of(
    reader: ReachabilityReader,
    manifests: Sequence[tuple[ManifestRef, bool, str]],
    builder: _DeletionBuilder,
    progress: Progress,
) -> dict[str, tuple[ContentRef, str]]:
    """Step 2: the live content files of the manifests only expired snapshots reach, by location."""
    content: dict[str, tuple[ContentRef, str]] = {}
    for missing_ok in (False, True):
        group = [row for row, ok, _ in manifests if ok is missing_ok]
        if not group:
            continue
        missing: list[str] = []
        for refs in reader.content_of(group, progress, missing_ok=missing_ok, missing=missing):
            for ref in refs:
                if ref.path not in content:
                    path = builder.resolve(ref.path)
                    if path is not None:
                        content[ref.path] = (ref, path)
        if missing:
            builder.out.warnings.append(
                f"{len(missing)} manifest(s) of snapshots already gone from the table were already deleted, "
                f"e.g. {missing[0]}"
            )
    return content


class _DeletionBuilder:
    """Step 3: resolves locations to the table's store and adds each file once, unless a retained snapshot
    reaches it (with its checksum sidecar on a local table)."""

    def __init__(self, io: FileIO, retained: RetainedSide) -> None:
        self.io = io
        self.retained = retained
        self.out = Deletions()
        self.seen: set[str] = set()
        self.foreign: list[str] = []

    def resolve(self, location: str) -> str | None:
        path = to_fs_path(self.io, location)
        if path is None:
            self.foreign.append(location)
        return path

    def add(self, kind: str, path: str, location: str, size: int | None) -> None:
        if path in self.seen or self.retained.reaches(path):
            return
        self.seen.add(path)
        self.out.locations[path] = location
        self.out.requests.append(DeleteRequest(kind, path, size))
        if self.io.is_local:
            sidecar = checksum_sidecar(path)
            if self.io.exists(sidecar):
                self.out.requests.append(DeleteRequest(CHECKSUM_KIND, sidecar, None))


__all__ = [
    "CHECKSUM_KIND",
    "Deletions",
    "ExpiredInputs",
    "RetainedSide",
    "checksum_sidecar",
    "deletion_requests",
    "to_fs_path",
]
