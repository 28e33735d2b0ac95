"""Manifest compaction as its own operation: Paimon's ``compact_manifest`` (full) and the ordinary policy (minor).

Full forces a complete merge (``merge-min-count`` 1, threshold 1 byte): DELETE entries and the files
they delete disappear from the metadata and small manifests are packed to the target size. Minor
applies the table's ordinary policy, which never drops an unmatched DELETE. Either way the result
is a COMPACT snapshot whose base list is the merged manifests and whose delta list is empty, with
every other snapshot field copied; when the merge changes nothing, nothing is committed.

A dry run performs the same merge with a writer that encodes but does not store, so the sizes it
reports are the real ones.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon.commit import COMMIT_ID_PROPERTY, WRITER_VERSION, Attempt, Committer
from airflow_lakeformat.core.paimon.manifest import ManifestFileMeta
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table

Mode = Literal["full", "minor"]


@short_repr
@dataclass(frozen=True)
class ManifestCompactionResult:
    mode: Mode
    dry_run: bool
    merge: str  # what the policy did: none, minor or full
    snapshot_before: int | None
    snapshot_id: int | None  # the COMPACT snapshot committed, None when nothing changed or dry run
    manifests_before: int
    bytes_before: int
    manifests_after: int
    bytes_after: int
    manifests_rewritten: int
    duration_seconds: float

    @property
    def changed(self) -> bool:
        return self.merge != "none"

    def summary(self) -> str:
        """One line: what the merge did (or would do)."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "compact-manifests",
            "format": "paimon",
            "mode": self.mode,
            "dryRun": self.dry_run,
            "merge": self.merge,
            "snapshotBefore": self.snapshot_before,
            "snapshotId": self.snapshot_id,
            "manifestsBefore": self.manifests_before,
            "bytesBefore": self.bytes_before,
            "manifestsAfter": self.manifests_after,
            "bytesAfter": self.bytes_after,
            "manifestsRewritten": self.manifests_rewritten,
            "durationSeconds": round(self.duration_seconds, 3),
        }


def _sizes(metas: list[ManifestFileMeta]) -> tuple[int, int]:
    return len(metas), sum(m.file_size for m in metas)


def compact_manifests(
    table: Table,
    mode: Mode = "full",
    *,
    dry_run: bool = False,
    committer: Committer | None = None,
) -> ManifestCompactionResult:
    """Merge the latest snapshot's manifests and commit the result as a COMPACT snapshot."""
    if mode not in ("full", "minor"):
        raise ValueError(f"mode must be 'full' or 'minor', not {mode!r}")
    started = time.monotonic()
    committer = committer or Committer(
        table, f"lakeformat-compact-manifests-{uuid.uuid4()}", allow_unsafe_publish=dry_run
    )
    summary: tuple[Any, ...] | None = None

    def prepare(commit_id: str) -> Attempt | None:
        """One attempt on the latest snapshot; None when there is nothing to commit."""
        nonlocal summary
        latest = table.snapshot_manager.latest_snapshot()
        if latest is None:
            summary = (mode, dry_run, "none", None, 0, 0, 0, 0, 0)
            return None
        base, delta = table.data_manifests(latest)
        before = base + delta
        written: list[str] = []
        result = committer.merge(before, written, force=mode == "full", dry_run=dry_run)
        summary = (
            mode, dry_run, result.mode, latest.id, *_sizes(before), *_sizes(result.manifests), len(result.rewritten)
        )  # fmt: skip
        if dry_run or not result.changed:
            return None
        try:
            snapshot = _compact_snapshot(committer, latest, result.manifests, commit_id, written)
        except BaseException:
            committer.remove(written)
            raise
        return Attempt(snapshot, written)

    published = committer.publish_with_retries(prepare, "manifest compaction")
    assert summary is not None
    return _result(summary, published[0].snapshot.id if published else None, started)


def _result(summary: tuple[Any, ...], snapshot_id: int | None, started: float) -> ManifestCompactionResult:
    mode, dry_run, merge, before_id, n_before, b_before, n_after, b_after, rewritten = summary
    return ManifestCompactionResult(
        mode, dry_run, merge, before_id, snapshot_id, n_before, b_before, n_after, b_after, rewritten,
        time.monotonic() - started,
    )  # fmt: skip


def _compact_snapshot(
    committer: Committer, latest: Snapshot, merged: list[ManifestFileMeta], commit_id: str, written: list[str]
) -> Snapshot:
    base_name, base_size = committer.write_list(merged, written)
    delta_name, delta_size = committer.write_list([], written)
    return Snapshot(
        id=latest.id + 1,
        schema_id=latest.schema_id,
        base_manifest_list=base_name,
        base_manifest_list_size=base_size,
        delta_manifest_list=delta_name,
        delta_manifest_list_size=delta_size,
        index_manifest=latest.index_manifest,
        commit_user=committer.commit_user,
        commit_identifier=BATCH_COMMIT_IDENTIFIER,
        commit_kind=CommitKind.COMPACT,
        time_millis=int(committer.clock() * 1000),
        total_record_count=latest.total_record_count,
        delta_record_count=0,
        watermark=latest.watermark,
        statistics=latest.statistics,
        properties={**(latest.properties or {}), COMMIT_ID_PROPERTY: commit_id},
        next_row_id=latest.next_row_id,
        extra={"uuid": str(uuid.uuid4()), "writerVersion": WRITER_VERSION},
    )
