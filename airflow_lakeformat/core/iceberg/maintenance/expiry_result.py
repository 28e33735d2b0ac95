"""The value types of an Iceberg expiry: the plan and the result documents (``core/iceberg/maintenance/expiry.py``).

Both ``to_json`` documents follow the Paimon expiry result's shape (``operation``, ``table``, ``format``,
``dryRun``, ``files``/``bytes`` by kind, ``decisions``, ``warnings``), add Iceberg's refs, specs and schemas,
and ``javaCounts``: the files by kind as the columns of Java's ``expire_snapshots`` procedure count them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.iceberg.maintenance.expiry_commit import ExpiryJournal
from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import IcebergExpiryOptions
from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, tally
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary

OPERATION = "expire-snapshots"

# Our kinds -> the columns of Java's expire_snapshots procedure output.
JAVA_COUNTS = {
    "data-file": "deleted_data_files_count",
    "position-delete-file": "deleted_position_delete_files_count",
    "equality-delete-file": "deleted_equality_delete_files_count",
    "manifest": "deleted_manifest_files_count",
    "manifest-list": "deleted_manifest_lists_count",
    "statistics": "deleted_statistics_files_count",
    "partition-statistics": "deleted_statistics_files_count",
}


def java_counts(files: dict[str, int]) -> dict[str, int]:
    """Files by kind as Java's ``expire_snapshots`` output columns count them."""
    counts = dict.fromkeys(dict.fromkeys(JAVA_COUNTS.values()), 0)
    for kind, n in files.items():
        if kind in JAVA_COUNTS:
            counts[JAVA_COUNTS[kind]] += n
    return counts


@dataclass
class IcebergExpiryPlan:
    """Everything an expiry would do, computed by :func:`plan_snapshot_expiry`; nothing has changed."""

    table_name: str
    table_uuid: str
    metadata_location: str
    options: IcebergExpiryOptions
    snapshots_before: list[int]
    expired: list[int]
    refs_removed: dict[str, int]
    refs_kept: dict[str, int]
    specs_removed: list[int]
    schemas_removed: list[int]
    deletions: list[DeleteRequest]
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recovered_runs: list[str] = field(default_factory=list)
    journals: list[ExpiryJournal] = field(default_factory=list, repr=False)
    reader: ReachabilityReader | None = field(default=None, repr=False)
    unreachable_locations: dict[str, str] = field(default_factory=dict, repr=False)  # fs path -> location

    @property
    def changes_metadata(self) -> bool:
        return bool(self.expired or self.refs_removed or self.specs_removed or self.schemas_removed)

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        return tally(self.deletions)

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        files, sizes = self.counts()
        document: dict[str, Any] = {
            "operation": OPERATION,
            "format": "iceberg",
            "table": self.table_name,
            "dryRun": True,
            "metadataLocation": self.metadata_location,
            "options": self.options.to_json(),
            "snapshotsBefore": len(self.snapshots_before),
            "snapshotsToExpire": self.expired,
            "refsToRemove": dict(sorted(self.refs_removed.items())),
            "refsKept": dict(sorted(self.refs_kept.items())),
            "specsToRemove": self.specs_removed,
            "schemasToRemove": self.schemas_removed,
            "files": files,
            "bytes": sizes,
            "javaCounts": java_counts(files),
            "recoveredRuns": self.recovered_runs,
            "decisions": list(self.decisions),
            "warnings": list(self.warnings),
            "manifestListsRead": self.reader.lists_read if self.reader else 0,
            "manifestsRead": self.reader.manifests_read if self.reader else 0,
        }
        if include_files:
            document["paths"] = {
                kind: [
                    self.unreachable_locations.get(r.path, r.path) for r in self.deletions if r.kind == kind
                ]
                for kind in files
            }
        return document


@short_repr
@dataclass
class IcebergExpiryResult:
    """The outcome of :func:`execute_snapshot_expiry`: the plan, what was committed and deleted."""

    plan: IcebergExpiryPlan
    report: DeletionReport
    committed: bool
    metadata_location_after: str
    snapshots_after: int
    kept_by_recheck: int
    warnings: list[str]
    duration_seconds: float

    def summary(self) -> str:
        """One line: what was (or would be) expired and deleted."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The result document (``lakeformat expire --json``): the Paimon expiry result's shape, plus
        Iceberg's refs, specs and schemas, and Java's procedure counts."""
        files = dict(sorted(self.report.files.items()))
        return {
            "operation": OPERATION,
            "format": "iceberg",
            "table": self.plan.table_name,
            "dryRun": self.report.dry_run,
            "committed": self.committed,
            "metadataLocation": self.metadata_location_after,
            "snapshotsBefore": len(self.plan.snapshots_before),
            "snapshotsAfter": self.snapshots_after,
            "snapshotsExpired": self.plan.expired,
            "refsRemoved": dict(sorted(self.plan.refs_removed.items())),
            "specsRemoved": self.plan.specs_removed,
            "schemasRemoved": self.plan.schemas_removed,
            "options": self.plan.options.to_json(),
            "files": files,
            "bytes": dict(sorted(self.report.bytes.items())),
            "bytesFreed": 0 if self.report.dry_run else self.report.total_bytes,
            "javaCounts": java_counts(files),
            "alreadyMissing": self.report.already_missing,
            "keptByRecheck": self.kept_by_recheck,
            "failed": [f.path for f in self.report.failed],
            "recoveredRuns": self.plan.recovered_runs,
            "decisions": list(self.plan.decisions),
            "warnings": [*self.plan.warnings, *self.warnings],
            "manifestListsRead": self.plan.reader.lists_read if self.plan.reader else 0,
            "manifestsRead": self.plan.reader.manifests_read if self.plan.reader else 0,
            "durationSeconds": round(self.duration_seconds, 3),
        }


__all__ = ["JAVA_COUNTS", "OPERATION", "IcebergExpiryPlan", "IcebergExpiryResult", "java_counts"]
