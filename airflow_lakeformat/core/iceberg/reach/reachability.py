"""The files a set of Iceberg snapshots reaches: manifest lists, manifests, content and statistics files.

Public API (stable: expiry and orphan cleanup both build on it)::

    reachable_files(table, snapshots, *, metadata=None, reader=None, skip_manifests=(),
                    read_content=True, missing_ok=False, progress=NO_PROGRESS,
                    workers=None) -> ReachableFiles

    ReachableFiles (mutable dataclass; ``merge(other)`` folds another one in):
        snapshot_ids: set[int]                    the snapshots folded in
        manifest_lists: dict[str, int]            manifest-list location -> snapshot id
        manifests: dict[str, ManifestRef]         manifest location -> its manifest-list row (first seen)
        content_files: dict[str, ContentRef]      live content file path -> kind/format/size (first seen)
        statistics_files: dict[str, int]          ``statistics[*].statistics-path`` -> snapshot id
        partition_statistics_files: dict[str, int]  ``partition-statistics[*]`` -> snapshot id
        missing: list[str]                        files skipped because missing (only with missing_ok)
        all_paths() -> set[str]                   every location above
    ManifestRef(path, length, spec_id, content, added_snapshot_id)   content 0 data, 1 deletes
    ContentRef(path, content, file_format, file_size)   content 0 data, 1 position deletes (deletion-vector
        Puffin files included: ``file_format == "puffin"``), 2 equality deletes; ``kind`` gives the
        deletion-module kind: "data-file", "position-delete-file", "equality-delete-file"
    ReachabilityReader(table, *, workers=None, loader=None)    per-run cache: ``manifests_of(snapshot)`` and
        ``content_of(manifests, progress)``; every manifest list and manifest is fetched and decoded at
        most once per reader. Pass one reader to several ``reachable_files`` calls of the same run.
        ``loader`` (a :data:`Loader`) replaces the thread pool, e.g. to read on Spark executors with
        :func:`load_one`.

Paths are the strings written in the metadata (``file_path`` of the entry, ``manifest_path`` of the
list, ``manifest-list`` of the snapshot), compared as strings, as Java's ``ExpireSnapshotsSparkAction``
compares them (orphan cleanup normalises them itself).

Algorithm (Java 1.10.2 ``BaseSparkAction.manifestListDS``/``manifestDS``/``contentFileDS``/
``statisticsFileDS`` restricted to snapshot ids, as ``ExpireSnapshotsSparkAction.fileDS`` uses them;
core ``ReachableFileCleanup``; reference sections 1.7, 3a and 3b step 2):

1. For each snapshot: its ``manifest-list`` location; the list is decoded (fields found by field id:
   500 path, 501 length, 502 spec id, 517 content, 503 added snapshot id; the regex scanner with fastavro
   for what it does not express, :mod:`airflow_lakeformat.core.iceberg.reach.reach_decode`) into
   :class:`ManifestRef` rows. A snapshot without a manifest list (legacy v1 inline ``manifests``) is refused
   (:class:`UnsupportedFormatError`), as the rest of the package refuses it.
2. The manifests are deduplicated by path (``all_manifests`` is deduplicated the same way).
3. Each manifest's **live** entries (status ADDED or EXISTING, Java ``ManifestReader.iterator`` =
   ``liveEntries()``, as ``ManifestFiles.readPaths`` and ``ReadManifest`` use it) give content files:
   only field ids 0 (status) and 2 / 134, 100, 101, 104 are decoded (``reach_decode``); the partition,
   metrics and everything else are skipped. A deletion-vector Puffin file shared by
   several entries is one path.
4. ``statistics`` and ``partition-statistics`` entries of ``metadata`` whose ``snapshot-id`` is one of
   the snapshots.

Manifests and lists are fetched on a thread pool (``workers``, default the table's read parallelism; on
local disk in the calling thread) and decoded in the calling thread. A missing file is :class:`MissingMetadataError` and an undecodable
one :class:`CorruptMetadataError`, both naming the file; nothing is ever silently skipped, so callers
that delete can rely on a complete set or an exception.

Where the parts live: fetching one file's bytes in ``metadata/fetch`` (shared with ``live_files``), the
result type and the statistics look-up in ``reach_result``, decoding in ``reach_decode`` (shared
fast-append lists in ``reach_lists``), and the halves of a read split over two processes in
``reach_split``; this module holds the per-run reader, the distributed unit of work (:func:`load_one`,
:data:`Loader`) and the walk over snapshots.

Example::

    reader = ReachabilityReader(table)
    kept = reachable_files(table, retained_snapshots, reader=reader)
    gone = reachable_files(table, expired_snapshots, metadata=old_metadata, reader=reader)
    deletable = gone.all_paths() - kept.all_paths()
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    LakeformatError,
    MissingMetadataError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.iceberg.metadata.fetch import fetch_metadata_file, length_problem, local_path
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.reach.reach_decode import (
    CONTENT_KINDS,
    ContentRef,
    ManifestRef,
    decode_manifest_list,
    decode_manifest_live_paths,
    decode_manifest_paths,
    scanners_ready,
)
from airflow_lakeformat.core.iceberg.reach.reach_lists import SharedList, decode_manifest_list_shared
from airflow_lakeformat.core.iceberg.reach.reach_result import PathSink, ReachableFiles, statistics_of
from airflow_lakeformat.core.iceberg.reach.reach_split import (
    HELPER_HAS_SCANNER,
    Here,
    decode_lists_apart,
    drained,
    half_by_bytes,
    live_paths_apart,
)
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

T = TypeVar("T")
_SHARED_LISTS = 8  # decoded manifest lists kept for their children (fast appends carry their rows over)
# Of a split list read's bytes, the share moved to the other process when only this one compiles the
# manifests' scanner after its lists (and back when only the other does).
_COMPILE_SHARE = 0.1
# Local files of at least this many bytes in one call are decoded half in a forked child (core/forked.py):
# below it the fork (about 10 ms) costs more than the second core gives.
FORK_MIN_BYTES = 8 << 20

# A bulk loader: (kind "manifest-list" | "manifest", [(location, referenced_by)]) -> [(size, rows or
# MissingMetadataError)] in input order. The default fetches on threads; the Spark jobs load on executors.
Loader = Callable[[str, list[tuple[str, str]]], list[tuple[int, Any]]]


class ReachabilityReader:
    """Reads manifest lists and manifests once per run (module docstring).

    Args:
        table: The table whose FileIO reads the files.
        workers: Fetch threads (default the table's ``read_parallelism``).
    """

    def __init__(
        self, table: IcebergTable, *, workers: int | None = None, loader: Loader | None = None
    ) -> None:
        self.table = table
        self.workers = max(1, workers if workers is not None else table.read_parallelism)
        self.loader = loader
        self._lists: dict[str, list[ManifestRef]] = {}
        self._contents: dict[str, list[ContentRef]] = {}
        self._missing: dict[str, MissingMetadataError] = {}
        self._shared: OrderedDict[str, SharedList] = OrderedDict()  # the last lists decoded exactly
        self.own_rows: dict[str, tuple[str, int]] = {}  # list -> (parent list, rows of its own), carried over
        self.sizes: dict[str, int] = {}  # bytes of every file read
        self._lengths: dict[str, int] = {}  # manifest -> the length its list records, checked when read
        self.lists_read = 0
        self.manifests_read = 0

    def _map(self, fn: Callable[[Any], T], items: Sequence[Any]) -> Iterator[T]:
        # Local files are read in this thread: a read costs microseconds, and bytes allocated on worker
        # threads land in per-thread malloc arenas that keep the process's RSS high long after.
        if len(items) <= 1 or self.workers == 1 or self.table.io.is_local:
            yield from map(fn, items)
            return
        with ThreadPoolExecutor(max_workers=min(self.workers, len(items))) as pool:
            yield from pool.map(fn, items)

    def _fetch(
        self, location: str, referenced_by: str, expected_length: int | None = None
    ) -> bytes | MissingMetadataError:
        try:
            return fetch_metadata_file(self.table, location, referenced_by, expected_length)
        except MissingMetadataError as exc:
            return exc

    def _load(
        self,
        wanted: list[tuple[str, str]],
        cache: dict[str, Any],
        decode: Callable[[bytes, str], Any],
        task: str,
        progress: Progress,
        split: Callable[[], None] | None = None,
    ) -> int:
        """Fetch and decode ``(location, referenced_by)`` pairs into ``cache``; missing ones are remembered.
        ``split`` does the fetching and decoding instead (half of it in another process)."""
        if not wanted:
            return 0
        progress.start(task, len(wanted))
        try:
            with gc_paused():  # millions of small acyclic objects (core/collector.py)
                if self.loader is not None:
                    kind = "manifest" if decode is decode_manifest_paths else "manifest-list"
                    for (location, _), (size, value) in zip(wanted, self.loader(kind, wanted), strict=True):
                        if isinstance(value, MissingMetadataError):
                            self._missing[location] = value
                        else:
                            expected = self._lengths.get(location)
                            if expected is not None and size != expected:
                                raise CorruptMetadataError(location, length_problem(size, expected))
                            self.sizes[location] = size
                            cache[location] = value
                        progress.advance()
                    return len(wanted)
                if split is not None:
                    split()
                else:
                    self.decode_into(wanted, cache, decode, progress)
        finally:
            progress.finish()
        return len(wanted)

    def decode_into(
        self,
        wanted: list[tuple[str, str]],
        cache: dict[str, Any],
        decode: Callable[[bytes, str], Any],
        progress: Progress,
    ) -> None:
        lengths = self._lengths
        fetched = self._map(lambda item: self._fetch(item[0], item[1], lengths.get(item[0])), wanted)
        for (location, _), data in zip(wanted, fetched, strict=True):
            if isinstance(data, MissingMetadataError):
                self._missing[location] = data
            else:
                self.sizes[location] = len(data)
                cache[location] = decode(data, location)
            progress.advance()

    def _local_sizes(self, locations: Sequence[str], known: Sequence[int] | None = None) -> list[int] | None:
        """Sizes of local files (0 for a missing one; ``known`` sizes, e.g. the manifest lengths a list
        records, where positive), or None unless forking is allowed and they are local and
        :data:`FORK_MIN_BYTES` in all."""
        if self.loader is not None or not self.table.io.is_local or len(locations) < 2:
            return None
        if not forked.fork_allowed():
            return None
        sizes: list[int] = []
        for index, location in enumerate(locations):
            path = local_path(self.table, location)
            if path is None:
                return None
            if known is not None and known[index] > 0:
                sizes.append(known[index])
                continue
            try:
                sizes.append(os.stat(path).st_size)
            except OSError:
                sizes.append(0)
        return sizes if sum(sizes) >= FORK_MIN_BYTES else None

    def _decode_lists_split(
        self,
        wanted: list[tuple[str, str]],
        sizes: list[int],
        parents: dict[str, str],
        progress: Progress,
    ) -> None:
        """The other process (:func:`decode_lists_apart`) returns, per list, its size and rows, or only
        its own rows and the parent list they were carried over from (the rest are that list's rows), or
        that it is missing; the rows are then cached here exactly as a one-process :meth:`_load` caches
        them. Each process that will read manifests and lacks their scanner compiles it after its lists
        (this one unless warmed, the plan's helper once), and the other takes more of the lists."""
        here_compiles = not scanners_ready("manifest")
        helper = forked.context() if forked.helper_open() else None
        there_compiles = helper is not None and not helper.get(HELPER_HAS_SCANNER)
        share = 0.5 + _COMPILE_SHARE * (here_compiles - there_compiles)
        cut = half_by_bytes(sizes, share)
        older, newer = wanted[:cut], wanted[cut:]
        known = set(self._lists)
        decode = self.list_decoder(parents)

        def mine() -> None:
            self.decode_into(newer, self._lists, decode, progress)
            if here_compiles:
                self.compile_manifest_scanner([location for location, _ in reversed(newer)])

        ours = {location: parents[location] for location, _ in older if location in parents}
        task = (Here(self), older, ours, known, there_compiles)
        theirs, _ = forked.run_split(decode_lists_apart, task, mine)
        if helper is not None and there_compiles:
            helper[HELPER_HAS_SCANNER] = True
        for location, size, value in theirs:
            if size is None:
                self._missing[location] = MissingMetadataError(location, value)
            elif isinstance(value, tuple):
                own, parent = value
                self._lists[location] = own + self._lists[parent]
                self.own_rows[location] = (parent, len(own))
                self.sizes[location] = size
            else:
                self._lists[location] = value
                self.sizes[location] = size
            progress.advance()

    def _get(self, cache: dict[str, Any], location: str, missing_ok: bool, missing: list[str]) -> Any:
        found = cache.get(location)
        if found is not None:
            return found
        error = self._missing.get(location)
        if error is not None and not missing_ok:
            raise error
        missing.append(location)
        return []

    def manifests_of_many(
        self,
        snapshots: Sequence[Any],
        progress: Progress = NO_PROGRESS,
        *,
        missing_ok: bool = False,
        missing: list[str] | None = None,
    ) -> list[list[ManifestRef]]:
        """The manifest lists of several snapshots (anything with ``snapshot_id`` and ``manifest_list``),
        in input order. With ``missing_ok`` a missing list reads as empty and is appended to ``missing``."""
        wanted: dict[str, str] = {}
        parents: dict[str, str] = {}
        list_of = {s.snapshot_id: s.manifest_list for s in self.table.metadata.snapshots}
        list_of.update((s.snapshot_id, s.manifest_list) for s in snapshots)
        ordered = sorted(  # parents first (anything with snapshot_id and manifest_list is accepted)
            snapshots,
            key=lambda s: (getattr(s, "sequence_number", None) or 0, getattr(s, "timestamp_ms", None) or 0),
        )
        for snapshot in ordered:
            location = snapshot.manifest_list
            if not location:
                raise UnsupportedFormatError(
                    self.table.metadata_location,
                    f"snapshot {snapshot.snapshot_id} has no manifest-list (legacy v1 inline manifests)",
                )
            if location not in self._lists and location not in self._missing and location not in wanted:
                wanted[location] = f"snapshot {snapshot.snapshot_id}"
                parent_id = getattr(snapshot, "parent_snapshot_id", None)
                parent = list_of.get(parent_id) if parent_id is not None else None
                if parent:
                    parents[location] = parent
        pairs = list(wanted.items())
        sizes = self._local_sizes([location for location, _ in pairs])
        split = None if sizes is None else (lambda: self._decode_lists_split(pairs, sizes, parents, progress))
        decode = self.list_decoder(parents)
        self.lists_read += self._load(pairs, self._lists, decode, "reading manifest lists", progress, split)
        sink = [] if missing is None else missing
        return [self._get(self._lists, s.manifest_list, missing_ok, sink) for s in snapshots]

    def list_decoder(self, parents: dict[str, str]) -> Callable[[bytes, str], list[ManifestRef]]:
        """Decodes lists in the calling thread, each against its parent's list when that was decoded exactly
        just before (the last :data:`_SHARED_LISTS` are kept), recording the rows it carried over."""

        def decode(data: bytes, location: str) -> list[ManifestRef]:
            parent = parents.get(location)
            shared = decode_manifest_list_shared(data, location, self._shared.get(parent) if parent else None)
            if parent and shared.own < len(shared.rows):
                self.own_rows[location] = (parent, shared.own)
            if shared.payload is not None:
                self._shared[location] = shared
                while len(self._shared) > _SHARED_LISTS:
                    self._shared.popitem(last=False)
            return shared.rows

        return decode

    def add_live_paths(
        self, manifests: Sequence[ManifestRef], sink: PathSink, progress: Progress = NO_PROGRESS
    ) -> None:
        """Add the paths of the live content files of each distinct manifest to ``sink``, read now and not
        kept (orphan cleanup reads each manifest once and needs only the paths). A large local read adds
        this process's half while the forked child decodes the other, whose paths come back grouped by
        directory (``sink.add_grouped``).

        Raises:
            MissingMetadataError: A manifest does not exist (raised when reached).
            CorruptMetadataError: One cannot be decoded.
        """
        distinct = list({m.path: m for m in manifests}.values())
        if not distinct:
            return
        progress.start("reading manifests", len(distinct))

        def take(m: ManifestRef, paths: list[str]) -> None:
            sink.add_all(paths)
            progress.advance()

        try:
            with gc_paused():  # millions of small acyclic objects (core/collector.py)
                todo = []
                for m in distinct:
                    if m.path in self._contents:
                        take(m, [ref.path for ref in self._contents[m.path]])
                    else:
                        todo.append(m)
                if self.loader is not None:
                    wanted = [(m.path, _referenced_by(m)) for m in todo]
                    for m, (_, rows) in zip(todo, self.loader("manifest", wanted), strict=True):
                        if isinstance(rows, MissingMetadataError):
                            raise rows
                        take(m, [ref.path for ref in rows])
                    return
                sizes = self._local_sizes([m.path for m in todo], [m.length for m in todo])
                if sizes is not None:
                    # Unless compiled already (while the lists were read), one manifest here, its schema's
                    # scanner compiled at once (the child must not compile it again); then the rest split.
                    warm = 0
                    while warm < len(todo) // 2 and not scanners_ready("manifest", compile_now=warm > 0):
                        self.add_live_paths_with(todo[warm : warm + 1], take)
                        warm += 1
                    if len(todo) - warm >= 2:
                        self._add_live_paths_split(todo[warm:], sizes[warm:], sink, progress)
                        return
                    todo = todo[warm:]
                self.add_live_paths_with(todo, take)
        finally:
            progress.finish()

    def compile_manifest_scanner(
        self, lists: Sequence[str], decoded: Mapping[str, list[ManifestRef]] | None = None
    ) -> None:
        """Decode the first manifest of the first of ``lists`` that has one (rows from ``decoded``, by
        default this reader's) and compile the scanner of its schema now (:func:`scanners_ready`); a
        failure is left to the read that follows to report."""
        for location in lists:
            rows = (self._lists if decoded is None else decoded).get(location)
            if rows:
                try:
                    decode_manifest_live_paths(self._fetch_or_raise(rows[0]), rows[0].path)
                except (LakeformatError, OSError):
                    return
                scanners_ready("manifest", compile_now=True)
                return

    def _fetch_or_raise(self, manifest: ManifestRef) -> bytes:
        data = self._fetch(manifest.path, _referenced_by(manifest), manifest.length)
        if isinstance(data, MissingMetadataError):
            raise data
        return data

    def add_live_paths_with(
        self, manifests: Sequence[ManifestRef], add: Callable[[ManifestRef, list[str]], None]
    ) -> None:
        """Hand each manifest's live content paths to ``add``, read here (also the other half's read)."""
        fetched = self._map(lambda m: self._fetch(m.path, _referenced_by(m), m.length), manifests)
        for m, data in zip(manifests, fetched, strict=True):
            if isinstance(data, MissingMetadataError):
                raise data
            self.manifests_read += 1
            add(m, decode_manifest_live_paths(data, m.path))

    def _add_live_paths_split(
        self,
        manifests: Sequence[ManifestRef],
        sizes: list[int],
        sink: PathSink,
        progress: Progress,
    ) -> None:
        """The older half (by work, :func:`half_by_bytes`) decoded by the other process, whose paths enter
        ``sink`` grouped by directory (:class:`_ByDirectory`); this half's enter as they are decoded."""
        cut = half_by_bytes(sizes)
        older, newer = manifests[:cut], manifests[cut:]

        def take(_: ManifestRef, paths: list[str]) -> None:
            sink.add_all(paths)  # as they come: no second copy of this half's paths is held
            progress.advance()

        (groups, plain), _ = forked.run_split(
            live_paths_apart, (Here(self), older), lambda: self.add_live_paths_with(newer, take)
        )
        self.manifests_read += len(older)
        sink.add_grouped(drained(groups))  # each group's string is freed once its names are in
        sink.add_all(plain)
        for _ in older:
            progress.advance()

    def manifests_of(self, snapshot: Any) -> list[ManifestRef]:
        """The manifest list of one snapshot."""
        return self.manifests_of_many([snapshot])[0]

    def content_of(
        self,
        manifests: Sequence[ManifestRef],
        progress: Progress = NO_PROGRESS,
        *,
        missing_ok: bool = False,
        missing: list[str] | None = None,
    ) -> list[list[ContentRef]]:
        """Live content files of each manifest, in input order (each manifest read once per reader).
        With ``missing_ok`` a missing manifest reads as empty and is appended to ``missing``."""
        wanted: dict[str, str] = {}
        for m in manifests:
            if m.path not in self._contents and m.path not in self._missing and m.path not in wanted:
                wanted[m.path] = _referenced_by(m)
                self._lengths[m.path] = m.length  # checked as it is read (metadata/fetch)
        self.manifests_read += self._load(
            list(wanted.items()), self._contents, decode_manifest_paths, "reading manifests", progress
        )
        sink = [] if missing is None else missing
        return [self._get(self._contents, m.path, missing_ok, sink) for m in manifests]


def _referenced_by(manifest: ManifestRef) -> str:
    return f"a manifest list (manifest added by snapshot {manifest.added_snapshot_id})"


def load_one(table: IcebergTable, kind: str, location: str, referenced_by: str) -> tuple[int, Any]:
    """Fetch and decode one manifest list (``kind="manifest-list"``) or manifest: ``(size, rows)``, or
    ``(0, MissingMetadataError)`` for a missing file. The unit of work a distributed :data:`Loader` runs."""
    try:
        data = fetch_metadata_file(table, location, referenced_by)
    except MissingMetadataError as exc:
        return 0, exc
    decode = decode_manifest_list if kind == "manifest-list" else decode_manifest_paths
    return len(data), decode(data, location)


def reachable_files(
    table: IcebergTable,
    snapshots: Iterable[Any],
    *,
    metadata: Any = None,
    reader: ReachabilityReader | None = None,
    skip_manifests: Collection[str] = (),
    read_content: bool = True,
    missing_ok: bool = False,
    progress: Progress = NO_PROGRESS,
    workers: int | None = None,
) -> ReachableFiles:
    """Everything ``snapshots`` reach (module docstring).

    Args:
        table: The table (its FileIO reads the files).
        snapshots: pyiceberg ``Snapshot`` objects (of ``metadata``).
        metadata: The metadata the snapshots' statistics are looked up in (default the table's current).
        reader: A per-run cache shared by several calls (default a fresh one).
        skip_manifests: Manifest paths neither listed nor read (already folded in by the caller).
        read_content: False lists manifests but reads none of them (no ``content_files``).
        missing_ok: A missing manifest list or manifest reads as empty and is recorded in ``missing``
            (for snapshots already removed from the table, whose files an interrupted run may have
            deleted); otherwise it raises.
        progress: Progress reporter.
        workers: Fetch threads when no ``reader`` is given.

    Returns:
        The reachable files.

    Raises:
        MissingMetadataError: A manifest list or manifest does not exist (the message names it).
        CorruptMetadataError: One cannot be decoded.
        UnsupportedFormatError: A snapshot has no manifest list (legacy v1).

    Example:
        >>> files = reachable_files(table, table.metadata.snapshots)  # doctest: +SKIP
        >>> sorted(files.manifest_lists)[:1]  # doctest: +SKIP
    """
    reader = reader or ReachabilityReader(table, workers=workers)
    metadata = metadata if metadata is not None else table.metadata
    snapshots = list(snapshots)
    result = ReachableFiles()
    skip = set(skip_manifests)
    lists = reader.manifests_of_many(snapshots, progress, missing_ok=missing_ok, missing=result.missing)
    folded: set[str] = set()  # lists whose rows are in: a child list that carried them over adds its own
    for snapshot, rows in zip(snapshots, lists, strict=True):
        result.snapshot_ids.add(snapshot.snapshot_id)
        result.manifest_lists.setdefault(snapshot.manifest_list, snapshot.snapshot_id)
        own = reader.own_rows.get(snapshot.manifest_list)
        if own is not None and own[0] in folded:
            rows = rows[: own[1]]
        if snapshot.manifest_list in reader._lists:
            folded.add(snapshot.manifest_list)
        for row in rows:
            if row.path not in skip:
                result.manifests.setdefault(row.path, row)
    if read_content:
        manifests = list(result.manifests.values())
        for refs in reader.content_of(manifests, progress, missing_ok=missing_ok, missing=result.missing):
            for ref in refs:
                result.content_files.setdefault(ref.path, ref)
    result.statistics_files, result.partition_statistics_files = statistics_of(metadata, result.snapshot_ids)
    return result


__all__ = [
    "CONTENT_KINDS",
    "ContentRef",
    "Loader",
    "ManifestRef",
    "PathSink",
    "ReachabilityReader",
    "ReachableFiles",
    "decode_manifest_list",
    "decode_manifest_paths",
    "fetch_metadata_file",
    "load_one",
    "reachable_files",
    "statistics_of",
]
