"""What a set of Iceberg snapshots reaches, as a value: :class:`ReachableFiles` (built by
``reachability.reachable_files``), the statistics files it takes from the metadata, and the
:class:`PathSink` protocol orphan cleanup's valid set meets when live paths go straight into it.

Example::

    kept = reachable_files(table, retained)
    gone = reachable_files(table, expired).all_paths() - kept.all_paths()
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_lakeformat.core.iceberg.reach.reach_decode import ContentRef, ManifestRef


class PathSink(Protocol):
    """Where ``ReachabilityReader.add_live_paths`` puts paths (a ``ValidLocations``)."""

    def add_all(self, locations: Iterable[str]) -> int: ...

    def add_grouped(self, groups: Iterable[tuple[str, str]]) -> int: ...


@dataclass
class ReachableFiles:
    """Everything a set of snapshots reaches (module docstring)."""

    snapshot_ids: set[int] = field(default_factory=set)
    manifest_lists: dict[str, int] = field(default_factory=dict)
    manifests: dict[str, ManifestRef] = field(default_factory=dict)
    content_files: dict[str, ContentRef] = field(default_factory=dict)
    statistics_files: dict[str, int] = field(default_factory=dict)
    partition_statistics_files: dict[str, int] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def all_paths(self) -> set[str]:
        """Every location reached (manifest lists, manifests, content and statistics files)."""
        paths = set(self.manifest_lists)
        paths.update(self.manifests)
        paths.update(self.content_files)
        paths.update(self.statistics_files)
        paths.update(self.partition_statistics_files)
        return paths

    def merge(self, other: ReachableFiles) -> ReachableFiles:
        """Fold ``other`` into this set (first-seen rows win) and return self."""
        self.snapshot_ids.update(other.snapshot_ids)
        self.manifest_lists = {**other.manifest_lists, **self.manifest_lists}
        self.manifests = {**other.manifests, **self.manifests}
        self.content_files = {**other.content_files, **self.content_files}
        self.statistics_files = {**other.statistics_files, **self.statistics_files}
        self.partition_statistics_files = {
            **other.partition_statistics_files,
            **self.partition_statistics_files,
        }
        self.missing += [m for m in other.missing if m not in self.missing]
        return self

    def counts(self) -> dict[str, int]:
        """Counts by kind, for results and progress."""
        return {
            "snapshots": len(self.snapshot_ids),
            "manifestLists": len(self.manifest_lists),
            "manifests": len(self.manifests),
            "contentFiles": len(self.content_files),
            "statisticsFiles": len(self.statistics_files) + len(self.partition_statistics_files),
        }


def statistics_of(metadata: Any, snapshot_ids: Collection[int]) -> tuple[dict[str, int], dict[str, int]]:
    """(statistics, partition statistics) files of ``metadata`` whose snapshot is in ``snapshot_ids``."""
    ids = set(snapshot_ids)
    stats = {s.statistics_path: s.snapshot_id for s in metadata.statistics if s.snapshot_id in ids}
    partition = {
        s.statistics_path: s.snapshot_id
        for s in (getattr(metadata, "partition_statistics", None) or [])
        if s.snapshot_id in ids
    }
    return stats, partition


__all__ = ["PathSink", "ReachableFiles", "statistics_of"]
