"""Listing orphan candidates: where to look, which files are candidates, how old they are.

Candidate files live in ``manifest/``, ``index/``, ``statistics/``, the data tree (exactly one
directory level per partition key, then ``bucket-*``), external data paths, and, as stray files
(crashed temp files), in every branch's ``snapshot/`` and ``changelog/`` directories. Hints,
numbered snapshot and changelog files and ``*.managed.blob`` files are never candidates.

A candidate may only be deleted if it is older than the cutoff. Two ways to learn that:

* :func:`list_candidates` reads each file's age while listing: an object store's listing carries it,
  and a local directory is listed with ``os.scandir`` plus one ``stat`` per file (not through
  fsspec, which builds a dictionary per file). Files younger than the cutoff, or without a time, are
  set aside right there. The Spark job lists this way.
* :func:`list_names` (what the driver-side plan uses on a local filesystem) lists names only, which
  is several times faster than a ``stat`` per file: the age of a file matters only if no snapshot
  uses it, so :func:`read_ages` reads it afterwards for the files the used set did not claim. The
  listing still happens first, so the order rule of orphan cleanup holds; a file that disappears
  before its ``stat`` is simply no orphan.

:class:`Listing` holds the candidates as columns (names, directory index, size; a path only where it
is not ``<directory>/<name>``) rather than one object per file: a million candidates stay well
under the memory of a million objects.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.maintenance.references import resolve_table_path
from airflow_lakeformat.core.paimon.snapshot_manager import MAIN_BRANCH, SnapshotManager
from airflow_lakeformat.core.paimon.table import Table

_NEVER_CANDIDATE_SUFFIXES = (".managed.blob",)
_HINTS = frozenset({paths.EARLIEST, paths.LATEST})
UNKNOWN_SIZE = -1


@dataclass(frozen=True, slots=True)
class CandidateDirectory:
    """A directory whose files are orphan candidates; ``kind`` names what lives there."""

    path: str
    kind: str  # manifest | index | statistics | data | snapshot-dir | changelog-dir


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    path: str
    size: int
    kind: str


@dataclass
class Listing:
    """Candidate files (as columns) plus what the listing saw, for reporting and directory cleanup.

    ``ages_read`` False: the candidates' ages (and sizes) are still unknown (:func:`list_names`);
    ``too_recent`` and ``no_mtime`` then count only the files :func:`read_ages` looked at.
    """

    directories: list[CandidateDirectory] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    where: array[int] = field(default_factory=lambda: array("I"))  # index into ``directories``
    sizes: array[int] = field(default_factory=lambda: array("q"))  # UNKNOWN_SIZE until read
    odd_paths: dict[int, str] = field(default_factory=dict)  # where a path is not <directory>/<name>
    ages_read: bool = True
    files_listed: int = 0
    too_recent: int = 0
    no_mtime: int = 0
    directories_listed: int = 0
    vanished: int = 0
    empty_directories: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def candidate_count(self) -> int:
        """Old-enough candidates; with ages unread, every listed candidate not found too recent."""
        return len(self.names) - (0 if self.ages_read else self.too_recent + self.no_mtime + self.vanished)

    def path(self, index: int) -> str:
        odd = self.odd_paths.get(index)
        if odd is not None:
            return odd
        return f"{self.directories[self.where[index]].path}/{self.names[index]}"

    def candidate(self, index: int) -> Candidate:
        directory = self.directories[self.where[index]]
        return Candidate(self.names[index], self.path(index), self.sizes[index], directory.kind)

    @property
    def candidates(self) -> list[Candidate]:
        return [self.candidate(i) for i in range(len(self.names))]

    def add(self, directory: int, name: str, path: str | None, size: int) -> None:
        if path is not None:
            self.odd_paths[len(self.names)] = path
        self.names.append(name)
        self.where.append(directory)
        self.sizes.append(size)


def branch_managers(table: Table) -> list[SnapshotManager]:
    managers = [SnapshotManager(table.io, table.root, MAIN_BRANCH)]
    for branch in managers[0].branches():
        manager = SnapshotManager(table.io, table.root, branch)
        schema_dir = table.io.join(manager.branch_root, paths.SCHEMA_DIR)
        if not any(n.startswith("schema-") for n in table.io.list_names(schema_dir)):
            # Paimon aborts here too: a branch without a schema is half-created or half-deleted.
            raise CorruptMetadataError(table.io.uri(schema_dir), f"branch {branch!r} has no schema")
        managers.append(manager)
    return managers


def _data_roots(table: Table) -> list[tuple[FileIO, str, str]]:
    """(io, root, kind) of every tree data files live in: the table's and each external path."""
    options = table.schema.table_options
    base = table.root
    if options.data_file_path_directory:
        base = table.io.join(base, options.data_file_path_directory)
    roots = [(table.io, base, "data")]
    external = options.raw.get("data-file.external-paths")
    for uri in filter(None, (u.strip() for u in (external or "").split(","))):
        roots.append((table.io, resolve_table_path(table, uri), "data"))
    return roots


def candidate_directories(table: Table) -> tuple[list[CandidateDirectory], list[str]]:
    """Directories to list, and the partition/bucket directories (for empty-directory cleanup).

    The data tree is walked exactly as deep as the table has partition keys, through directories
    named ``key=value`` only, so nothing outside Paimon's layout is ever a candidate.
    """
    io = table.io
    directories = [
        CandidateDirectory(io.join(table.root, paths.MANIFEST_DIR), "manifest"),
        CandidateDirectory(io.join(table.root, paths.INDEX_DIR), "index"),
        CandidateDirectory(io.join(table.root, paths.STATISTICS_DIR), "statistics"),
    ]
    for manager in branch_managers(table):
        directories.append(CandidateDirectory(manager.snapshot_dir, "snapshot-dir"))
        directories.append(
            CandidateDirectory(io.join(manager.branch_root, paths.CHANGELOG_DIR), "changelog-dir")
        )
    depth = len(table.schema.partition_keys)
    tree_dirs: list[str] = []
    for _, root, kind in _data_roots(table):
        level = [root]
        for _ in range(depth):
            level = [s.path for d in level for s in io.list_dir(d) if s.is_dir and "=" in s.name]
            tree_dirs.extend(level)
        for directory in level:
            for status in io.list_dir(directory):
                if status.is_dir and status.name.startswith(paths.BUCKET_PREFIX):
                    directories.append(CandidateDirectory(status.path, kind))
                    tree_dirs.append(status.path)
    return directories, tree_dirs


def is_candidate_name(name: str, kind: str) -> bool:
    if name.endswith(_NEVER_CANDIDATE_SUFFIXES):
        return False
    if kind == "snapshot-dir":
        return not (name in _HINTS or is_numbered(name, paths.SNAPSHOT_PREFIX))
    if kind == "changelog-dir":
        return not (name in _HINTS or is_numbered(name, "changelog-"))
    return True


def is_numbered(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and name[len(prefix) :].isdigit()


def _local_files(path: str) -> Iterator[os.DirEntry[str]]:
    """Files of a local directory (symlinks followed, as fsspec's listing does); missing lists empty."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    if entry.is_dir():
                        continue
                except OSError:
                    pass  # a broken link: a file without an age
                yield entry
    except (FileNotFoundError, NotADirectoryError):
        return


def _list_into(listing: Listing, io: FileIO, index: int, cutoff: float, ages: bool) -> None:
    directory = listing.directories[index]
    kind = directory.kind
    listing.directories_listed += 1
    if io.is_local and not ages:
        names = [entry.name for entry in _local_files(directory.path)]
        listing.files_listed += len(names)
        if kind in ("snapshot-dir", "changelog-dir") or any(
            n.endswith(_NEVER_CANDIDATE_SUFFIXES) for n in names
        ):
            names = [n for n in names if is_candidate_name(n, kind)]
        listing.names.extend(names)
        listing.where.extend(array("I", [index]) * len(names))
        listing.sizes.extend(array("q", [UNKNOWN_SIZE]) * len(names))
        return
    if io.is_local:
        for entry in _local_files(directory.path):
            listing.files_listed += 1
            name = entry.name
            if not is_candidate_name(name, kind):
                continue
            try:
                stat = entry.stat()
            except OSError:
                listing.no_mtime += 1
                continue
            if stat.st_mtime >= cutoff:
                listing.too_recent += 1
            else:
                listing.add(index, name, None, stat.st_size)
        return
    base = directory.path
    for status in io.list_dir(base):
        if status.is_dir:
            continue
        listing.files_listed += 1
        if not is_candidate_name(status.name, kind):
            continue
        if status.mtime is None:
            listing.no_mtime += 1
        elif status.mtime >= cutoff:
            listing.too_recent += 1
        else:
            path = status.path if status.path != f"{base}/{status.name}" else None
            listing.add(index, status.name, path, status.size)


def list_candidates(io: FileIO, directory: CandidateDirectory, cutoff: float) -> Listing:
    """Old-enough files of one directory (mtime strictly before ``cutoff``, epoch seconds).

    A file without a modification time is never a candidate: its age is unknown.
    """
    listing = Listing(directories=[directory])
    _list_into(listing, io, 0, cutoff, ages=True)
    return listing


def list_names(io: FileIO, directories: list[CandidateDirectory], cutoff: float) -> Listing:
    """Every directory's candidates in one listing; on a local filesystem names only (ages unread)."""
    listing = Listing(directories=list(directories), ages_read=not io.is_local)
    for index in range(len(directories)):
        _list_into(listing, io, index, cutoff, ages=listing.ages_read)
    return listing


def merge_listings(parts: Iterable[Listing]) -> Listing:
    total = Listing()
    for part in parts:
        offset = len(total.directories)
        base = len(total.names)
        total.directories.extend(part.directories)
        total.names.extend(part.names)
        total.where.extend(w + offset for w in part.where)
        total.sizes.extend(part.sizes)
        total.odd_paths.update({i + base: p for i, p in part.odd_paths.items()})
        total.ages_read = total.ages_read and part.ages_read
        total.files_listed += part.files_listed
        total.too_recent += part.too_recent
        total.no_mtime += part.no_mtime
        total.directories_listed += part.directories_listed
    return total


def read_ages(listing: Listing, indexes: Iterable[int], cutoff: float) -> list[int]:
    """The candidates among ``indexes`` old enough to delete, ages (and sizes) read now (local only)."""
    if listing.ages_read:
        return list(indexes)
    old = []
    for index in indexes:
        try:
            stat = os.stat(listing.path(index))
        except FileNotFoundError:
            listing.vanished += 1  # gone since the listing: nothing to delete
            continue
        except OSError:
            listing.no_mtime += 1
            continue
        if stat.st_mtime >= cutoff:
            listing.too_recent += 1
        else:
            listing.sizes[index] = stat.st_size
            old.append(index)
    return old


def old_empty_directories(table: Table, tree_dirs: list[str], cutoff: float) -> list[str]:
    """Bucket and partition directories that hold nothing and were last changed before ``cutoff``."""
    if not table.io.is_local:
        return []
    empty = []
    for directory in tree_dirs:
        try:
            with os.scandir(directory) as entries:
                if next(entries, None) is not None:
                    continue  # one entry is enough to know
            if os.stat(directory).st_mtime < cutoff:
                empty.append(directory)
        except FileNotFoundError:
            continue
    return empty
