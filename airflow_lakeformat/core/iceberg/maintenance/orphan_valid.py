"""The valid side of Iceberg orphan cleanup: every file the table's metadata still reaches.

Java 1.10.2 ``DeleteOrphanFilesSparkAction.validFileIdentDS`` (reference 3b step 2) unions:

* content files: the *live* entries (ADDED or EXISTING; ``ManifestFiles.readPaths`` reads
  ``liveEntries()``) of every manifest of every snapshot (``all_manifests``), data and delete files alike,
  deletion-vector Puffin files included;
* those manifests and every snapshot's manifest list;
* the current metadata file and each ``metadata-log`` entry (not recursively: a metadata file that fell
  out of the log is an orphan), and ``<metadata dir>/version-hint.text`` (always, even for catalog tables);
* every ``statistics`` and ``partition-statistics`` file of the metadata.

Every snapshot of every ref is in ``snapshots``, so "all snapshots" covers branches and tags.

The snapshots are read with :func:`~airflow_lakeformat.core.iceberg.reach.reachability.reachable_files` (shared
with snapshot expiry: manifest lists, each fast append's list decoded only as far as it is new), and the
manifests with ``ReachabilityReader.add_live_paths`` (the status and path of each entry, nothing else, and
nothing kept after its paths are in the set). :func:`collect_valid` folds one metadata version into a :class:`ValidSet` and can be
called again after a re-load: it only reads snapshots it has not seen and manifests it has not read (one
``ReachabilityReader`` per run: each manifest list and manifest is read once), which is how execution
re-checks every delete batch. A manifest list or manifest that
is missing makes it re-load the table: if the snapshot that referenced it is gone (a concurrent expiry),
it is skipped; otherwise the typed error propagates and nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_lakeformat.core.errors import MissingMetadataError
from airflow_lakeformat.core.iceberg.metadata.location import LocationNormaliser, ValidLocations
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.progress import Progress

VERSION_HINT = "version-hint.text"
_MAX_RELOADS = 5


class ValidSet:
    """The valid locations seen so far, and what was read to find them (for re-checks and the result).

    Args:
        io: the table's FileIO (renders messages).
        normaliser: the scheme/authority equivalences of the run.
        metadata_dir: fsspec path of the metadata directory (for ``version-hint.text``).
    """

    def __init__(self, io: FileIO, normaliser: LocationNormaliser, metadata_dir: str) -> None:
        self.io = io
        self.normaliser = normaliser
        self.metadata_dir = metadata_dir
        self.locations = ValidLocations(normaliser)
        self.metadata_seen: set[str] = set()
        self.snapshots: set[int] = set()
        self.manifest_lists: set[str] = set()
        self.manifests: set[str] = set()
        self.content_files = 0
        self.statistics_files = 0
        self.metadata_files = 0
        self.skipped_vanished = 0
        self.reloads = 0
        self.reader: Any = None  # the run's ReachabilityReader: each manifest list and manifest read once
        self.locations.add(io.uri(io.join(metadata_dir, VERSION_HINT)))

    def spelling(self, path: str) -> str:
        """A valid spelling of a normalised path, for messages."""
        prefixes = self.locations.prefixes_of(path)
        if not prefixes:
            return path
        scheme, authority = prefixes[0]
        if scheme is None:
            return path if authority is None else f"//{authority}{path}"
        return f"{scheme}://{authority}{path}" if authority else f"{scheme}:{path}"

    def add_all(self, locations: Iterable[str]) -> int:
        return self.locations.add_all(locations)

    def counts_json(self) -> dict[str, Any]:
        return {
            "snapshotsRead": len(self.snapshots),
            "manifestListsRead": len(self.manifest_lists),
            "manifestsRead": len(self.manifests),
            "contentFilesReferenced": self.content_files,
            "metadataFilesReferenced": self.metadata_files,
            "statisticsFilesReferenced": self.statistics_files,
            "skippedVanishedSnapshots": self.skipped_vanished,
        }


def refresh_if_changed(table: IcebergTable) -> bool:
    """Re-load the table unless its current metadata file provably did not change; True if re-loaded.

    Hadoop-layout tables are checked the way their catalog finds the current version (the version hint,
    then ``v<N+1>`` while it exists): the same file means the same metadata, and the 1-2 MB JSON of a
    long-lived table is not parsed again. Every other table is re-loaded through its catalog.
    """
    from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
    from airflow_lakeformat.core.iceberg.metadata.metadata_files import METADATA_DIR, find_current_version

    if table.read_only:
        return False
    if isinstance(getattr(table.table, "catalog", None), HadoopLayoutCatalog):
        current = find_current_version(table.io, table.io.join(table.root, METADATA_DIR))
        if current is not None and table.io.uri(current.path) == table.metadata_location:
            return False
    table.refresh()
    return True


def metadata_references(metadata: Any, metadata_location: str) -> tuple[list[str], list[str]]:
    """(metadata files, statistics files) a metadata version references directly."""
    metadata_files = [metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)]
    statistics = [s.statistics_path for s in metadata.statistics]
    statistics += [s.statistics_path for s in getattr(metadata, "partition_statistics", []) or []]
    return metadata_files, statistics


def collect_valid(table: IcebergTable, valid: ValidSet, progress: Progress) -> ValidSet:
    """Fold the table's current metadata into ``valid`` (only what was not folded before).

    Args:
        table: the table, as last loaded (it is re-loaded here only after a missing file).
        valid: the set to extend.
        progress: progress reporter for the manifest reads.

    Raises:
        CorruptMetadataError: a manifest list or manifest cannot be decoded.
        MissingMetadataError: one is missing although its snapshot still exists.
    """
    for _ in range(_MAX_RELOADS):
        location = table.metadata_location
        if location in valid.metadata_seen:
            return valid
        metadata = table.metadata
        metadata_files, statistics = metadata_references(metadata, location)
        valid.metadata_files += valid.add_all(metadata_files)
        valid.statistics_files += valid.add_all(statistics)
        new = [s for s in metadata.snapshots if s.snapshot_id not in valid.snapshots]
        try:
            _fold_snapshots(table, valid, new, progress)
        except MissingMetadataError:
            refresh_if_changed(table)
            valid.reloads += 1
            if table.metadata_location == location:
                raise  # the same metadata still references the missing file: corrupt
            gone = {s.snapshot_id for s in new} - {s.snapshot_id for s in table.metadata.snapshots}
            valid.skipped_vanished += len(gone)
            continue
        valid.metadata_seen.add(location)
        return valid
    raise MissingMetadataError(
        table.metadata_location, f"the table kept changing over {_MAX_RELOADS} re-loads"
    )


def _fold_snapshots(table: IcebergTable, valid: ValidSet, snapshots: list[Any], progress: Progress) -> None:
    from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader, reachable_files

    if not snapshots:
        return
    if valid.reader is None or valid.reader.table is not table:
        valid.reader = ReachabilityReader(table)
    reached = reachable_files(
        table,
        snapshots,
        reader=valid.reader,
        skip_manifests=valid.manifests,
        read_content=False,
        progress=progress,
    )
    # Only the paths of the live entries, each manifest read once and not kept (``add_live_paths``).
    before = len(valid.locations)
    valid.reader.add_live_paths(list(reached.manifests.values()), valid.locations, progress)
    valid.content_files += len(valid.locations) - before
    valid.add_all(reached.manifest_lists)
    valid.manifest_lists.update(reached.manifest_lists)
    valid.add_all(reached.manifests)
    valid.manifests.update(reached.manifests)  # after every one was read: a missing one retries them all
    valid.statistics_files += valid.add_all(reached.statistics_files)
    valid.statistics_files += valid.add_all(reached.partition_statistics_files)
    valid.snapshots.update(reached.snapshot_ids)
