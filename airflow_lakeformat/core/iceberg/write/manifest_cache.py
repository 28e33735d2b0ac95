"""Decode each manifest once per table object: a cache of decoded manifests keyed by what identifies them.

A data compaction reads the same manifests several times: the scan of the starting snapshot (live files, the
``file_path`` bounds of position-delete files), the ``DataFile`` records of the inputs, then on every commit
attempt the validation against the head, the dangling-delete check and the rewrite of the manifests holding a
removed file. Manifests are immutable files written once under a unique name, and what a reader derives from
one depends only on its bytes and on the manifest-list row it inherits from (``sequence_number``,
``added_snapshot_id``), so a decoded manifest is cached under ``(path, sequence_number, added_snapshot_id)``:

* :meth:`ManifestCache.live_files`: the live files of a snapshot (``live_files.decode_manifests``, the fast
  fastavro decoder), decoding only the manifests of its manifest list not seen before; a snapshot committed
  concurrently since the start brings new manifests, which are read, so validation against a new head sees
  everything committed since;
* :meth:`ManifestCache.entries`: the live pyiceberg ``ManifestEntry`` records (``manifest_writer.read_entries``,
  with the metric maps) of the given manifests, for those steps that need whole records (bounds, writing the
  entries back).

The manifest list itself is read on every call (it names the snapshot's manifests; it is small). The cache is
attached to the :class:`IcebergTable` object (weakly: it goes when the table object goes) and bounded: past
:data:`MAX_CACHED_FILES` live-file rows it is emptied before the next decode, and at most
:data:`MAX_CACHED_ENTRIES` whole entries are kept (beyond, manifests are decoded and streamed as before, one at a
time, so a large table's peak memory does not grow). :func:`release_manifest_cache` drops a table's cache.

Example:
    >>> cache = manifest_cache(table)  # doctest: +SKIP
    >>> files = cache.live_files(table, table.snapshot(ref="main"))  # doctest: +SKIP
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from airflow_lakeformat.core.iceberg.metadata.live_files import decode_manifests
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.write.manifest_writer import read_entries

if TYPE_CHECKING:
    from pyiceberg.manifest import ManifestEntry, ManifestFile
    from pyiceberg.table.snapshots import Snapshot

    from airflow_lakeformat.core.iceberg.metadata.entries import LiveFile
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

# Past this many cached live-file rows the cache of live files is emptied before the next decode.
MAX_CACHED_FILES = 200_000
# At most this many whole entries are kept (the rest are decoded and streamed, not kept).
MAX_CACHED_ENTRIES = 50_000

ManifestKey = tuple[str, int | None, int | None]


def manifest_key(manifest: ManifestFile) -> ManifestKey:
    """What a decoded manifest depends on: its path and the manifest-list values its entries inherit."""
    return (manifest.manifest_path, manifest.sequence_number, manifest.added_snapshot_id)


class ManifestCache:
    """Decoded manifests of one table, by :func:`manifest_key`; ``decoded`` counts the decodes (for tests)."""

    def __init__(self, max_files: int = MAX_CACHED_FILES, max_entries: int = MAX_CACHED_ENTRIES) -> None:
        self.max_files = max_files
        self.max_entries = max_entries
        self._cached_entries = 0
        self._live: dict[ManifestKey, list[LiveFile]] = {}
        self._entries: dict[ManifestKey, list[ManifestEntry]] = {}
        self.decoded = {"live": 0, "entries": 0}

    def live_files(self, table: IcebergTable, snapshot: Snapshot) -> list[LiveFile]:
        """Every live data and delete file of ``snapshot`` (as ``live_files.live_files`` returns them).

        Raises:
            MissingMetadataError, CorruptMetadataError: a manifest (or the list) cannot be read.
        """
        manifests = read_manifests(table, snapshot)
        missing = [m for m in manifests if manifest_key(m) not in self._live]
        if missing:
            if sum(len(v) for v in self._live.values()) > self.max_files:
                self._live.clear()
                missing = list(manifests)
            decoded = decode_manifests(table, missing, f"snapshot {snapshot.snapshot_id}")
            self.decoded["live"] += len(missing)
            for manifest, files in zip(missing, decoded, strict=True):
                self._live[manifest_key(manifest)] = files
        return [f for m in manifests for f in self._live[manifest_key(m)]]

    def entries(
        self, table: IcebergTable, manifests: Sequence[ManifestFile], referenced_by: str
    ) -> Iterator[tuple[ManifestFile, list[ManifestEntry]]]:
        """(manifest, its live entries, inheritance applied) for each of ``manifests``, in order.

        The entries are shared: callers must not modify them (write new entries from them instead). Whole
        entries are heavy (metric maps): past :attr:`max_entries` cached, further manifests are decoded one at a
        time and not kept, as ``manifest_writer.read_entries`` streams them.

        Raises:
            MissingMetadataError, CorruptMetadataError: a manifest cannot be read.
        """
        fresh = [manifest_key(m) not in self._entries for m in manifests]  # entries are never evicted
        decoded = read_entries(
            table, [m for m, new in zip(manifests, fresh, strict=True) if new], referenced_by
        )
        for manifest, new in zip(manifests, fresh, strict=True):
            key = manifest_key(manifest)
            if not new:
                yield manifest, self._entries[key]
                continue
            _manifest, entries = next(decoded)
            self.decoded["entries"] += 1
            if key not in self._entries and self._cached_entries + len(entries) <= self.max_entries:
                self._entries[key] = entries
                self._cached_entries += len(entries)
            yield manifest, entries


_CACHES: weakref.WeakKeyDictionary[IcebergTable, ManifestCache] = weakref.WeakKeyDictionary()


def manifest_cache(table: IcebergTable) -> ManifestCache:
    """The cache of ``table`` (created on first use; it lives as long as the table object)."""
    cache = _CACHES.get(table)
    if cache is None:
        cache = _CACHES[table] = ManifestCache()
    return cache


def release_manifest_cache(table: IcebergTable) -> None:
    """Drop what is cached for ``table`` (e.g. at the end of a run that holds the table object on)."""
    _CACHES.pop(table, None)


__all__ = [
    "MAX_CACHED_ENTRIES",
    "MAX_CACHED_FILES",
    "ManifestCache",
    "manifest_cache",
    "manifest_key",
    "release_manifest_cache",
]
