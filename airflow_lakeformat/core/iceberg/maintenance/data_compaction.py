"""Iceberg data compaction: plan which small files and delete-laden files Java's ``rewrite_data_files`` would
rewrite, and report it as a value.

The entry point of the data-compaction room (Java's ``RewriteDataFilesSparkAction``, 1.10.2):

1. refuse what cannot be rewritten safely yet: format v3 (deletion vectors and row lineage; pyiceberg 0.12 cannot
   write v3 metadata) and data files in a format other than Parquet;
2. fix the starting snapshot: ``main``'s head (an empty table plans nothing);
3. scan it (``data_compaction_scan``: each live data file with the deletes that apply to it);
4. plan groups (``data_compaction_plan``: Java's bin-pack planner with Java's options,
   ``data_compaction_options``).

5. rewrite each group (``data_compaction_rewrite``: deletes applied, target-size Parquet files);
6. commit one ``replace`` snapshot through the one retry loop (``data_compaction_commit``: validated against
   every commit since the start; conflicting groups are skipped and reported, their files discarded).

Files written by a run that did not commit are removed at once; after ``CommitStateUnknownError`` they are kept
(the commit may have landed). Not yet: partial progress, the sort strategy, a partition filter, groups of older
partition specs (refused), removal of dangling deletes.

Example:
    >>> plan = plan_data_compaction(table, {"min-input-files": "2"})  # doctest: +SKIP
    >>> plan.summary()  # doctest: +SKIP
    'db.events: data compaction would rewrite 12 files (3.1 MiB) in 2 groups into about 2 files'
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import CommitStateUnknownError, UnsupportedFormatError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_commit import (
    RewriteCommit,
    StagedRewrite,
    stage_rewrite,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup, plan_file_groups
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import rewrite_group
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import (
    data_files_by_path,
    scan_for_compaction,
)
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.maintenance.results import human_bytes

if TYPE_CHECKING:
    from pyiceberg.table import Transaction

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

log = logging.getLogger(__name__)

REWRITABLE_FORMATS = ("PARQUET",)


@dataclass(frozen=True)
class IcebergDataCompactionPlan:
    """What an Iceberg data compaction would rewrite, against one starting snapshot."""

    table: str
    snapshot_id: int | None
    sequence_number: int
    options: CompactionOptions
    live_data_files: int
    live_delete_files: int
    groups: tuple[FileGroup, ...]

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(g.files) for g in self.groups)

    @property
    def bytes_to_rewrite(self) -> int:
        return sum(g.input_bytes for g in self.groups)

    @property
    def expected_output_files(self) -> int:
        return sum(g.expected_output_files for g in self.groups)

    @property
    def delete_files_applied(self) -> int:
        return len({path for g in self.groups for path in g.delete_files})

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "compact-data",
            "format": "iceberg",
            "table": self.table,
            "dryRun": True,
            "snapshotId": self.snapshot_id,
            "sequenceNumber": self.sequence_number,
            "liveDataFiles": self.live_data_files,
            "liveDeleteFiles": self.live_delete_files,
            "filesToRewrite": self.files_to_rewrite,
            "bytesToRewrite": self.bytes_to_rewrite,
            "deleteFilesApplied": self.delete_files_applied,
            "expectedOutputFiles": self.expected_output_files,
            "options": self.options.to_json(),
            "groups": [g.to_json() for g in self.groups],
        }

    def summary(self) -> str:
        if not self.groups:
            return f"{self.table}: data compaction: nothing to rewrite ({self.live_data_files} data files)"
        groups = len(self.groups)
        return (
            f"{self.table}: data compaction would rewrite {self.files_to_rewrite} files "
            f"({human_bytes(self.bytes_to_rewrite)}) in {groups} group{'s' if groups != 1 else ''} into about "
            f"{self.expected_output_files} file{'s' if self.expected_output_files != 1 else ''}, applying "
            f"{self.delete_files_applied} delete file{'s' if self.delete_files_applied != 1 else ''}"
        )

    def __repr__(self) -> str:
        return f"<IcebergDataCompactionPlan {self.summary()}>"


def check_rewritable(table: IcebergTable) -> None:
    """Refuse, typed and before anything is read or written, what this release does not rewrite."""
    if table.format_version >= 3:
        raise UnsupportedFormatError(
            table.name,
            f"data compaction of format-version {table.format_version} tables is not supported "
            "(deletion vectors and row lineage: pyiceberg 0.12 cannot write v3 metadata)",
        )


def plan_data_compaction(
    table: IcebergTable,
    options: Mapping[str, str] | CompactionOptions | None = None,
) -> IcebergDataCompactionPlan:
    """Which files of ``main``'s head a compaction rewrites, grouped as Java's bin-pack planner groups them.

    Args:
        table: the table.
        options: Java's ``rewrite_data_files`` options by their names (``{"min-input-files": "2"}``), or
            :class:`CompactionOptions`; the target size defaults to ``write.target-file-size-bytes``.

    Raises:
        UnsupportedFormatError: a v3 table, or a group holding a data file that is not Parquet.
        UsageError: an unknown option or a value Java refuses.
    """
    check_rewritable(table)
    if not isinstance(options, CompactionOptions):
        options = CompactionOptions.from_options(options, table.metadata.properties)
    head = table.snapshot(ref="main")
    if head is None:
        return IcebergDataCompactionPlan(table.name, None, 0, options, 0, 0, ())
    scan = scan_for_compaction(table, head)
    groups = plan_file_groups(
        scan.candidates, current_spec_id=table.metadata.default_spec_id, options=options
    )
    formats = {f.path: f.file_format.upper() for f in scan.data_files}
    for group in groups:
        for candidate in group.files:
            if formats.get(candidate.path) not in REWRITABLE_FORMATS:
                raise UnsupportedFormatError(
                    candidate.path,
                    f"data files in {formats.get(candidate.path)} are not rewritten (Parquet only)",
                )
    return IcebergDataCompactionPlan(
        table=table.name,
        snapshot_id=scan.snapshot_id,
        sequence_number=scan.sequence_number,
        options=options,
        live_data_files=len(scan.candidates),
        live_delete_files=len(scan.deletes.all_deletes()),
        groups=tuple(groups),
    )


@dataclass(frozen=True)
class IcebergDataCompactionResult:
    """The outcome of :func:`compact_data`; ``to_json`` is the operation's document."""

    plan: IcebergDataCompactionPlan
    dry_run: bool
    snapshot_id: int | None = None
    files_added: int = 0
    bytes_added: int = 0
    rows_purged: int = 0
    groups_committed: int = 0
    delete_files_removed: int = 0
    conflicts: tuple[str, ...] = ()
    duration_seconds: float = 0.0

    @property
    def files_rewritten(self) -> int:
        committed = self.plan.groups[: self.groups_committed] if not self.dry_run else ()
        return sum(len(g.files) for g in committed)

    def to_json(self) -> dict[str, Any]:
        document = self.plan.to_json()
        document.update(
            {
                "dryRun": self.dry_run,
                "snapshotBefore": self.plan.snapshot_id,
                "snapshotId": self.snapshot_id,
                "groupsCommitted": self.groups_committed,
                "filesAdded": self.files_added,
                "bytesAdded": self.bytes_added,
                "rowsPurged": self.rows_purged,
                "deleteFilesRemoved": self.delete_files_removed,
                "conflicts": list(self.conflicts),
                "durationSeconds": round(self.duration_seconds, 3),
            }
        )
        return document

    def summary(self) -> str:
        if self.dry_run or self.snapshot_id is None:
            return self.plan.summary()
        line = (
            f"{self.plan.table}: data compaction rewrote {self.groups_committed} of {len(self.plan.groups)} groups "
            f"into {self.files_added} files ({human_bytes(self.bytes_added)}), {self.rows_purged} deleted rows "
            f"purged; committed snapshot {self.snapshot_id}"
        )
        if self.conflicts:
            line += f"; {len(self.conflicts)} groups skipped (concurrent deletes or rewrites)"
        return line

    def __repr__(self) -> str:
        return f"<IcebergDataCompactionResult {self.summary()}>"


def compact_data(
    table: IcebergTable,
    options: Mapping[str, str] | CompactionOptions | None = None,
    *,
    dry_run: bool = False,
    snapshot_properties: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
) -> IcebergDataCompactionResult:
    """Rewrite the planned groups and commit one ``replace`` snapshot on ``main``.

    Args:
        table: a writable table (format v1 or v2).
        options: Java's ``rewrite_data_files`` options (see :func:`plan_data_compaction`).
        dry_run: plan and report only; read, write and commit nothing.
        snapshot_properties: extra summary properties of the ``replace`` snapshot (e.g. the commit user).
        policy: the commit retry policy (default: the table's ``commit.retry.*``).

    Returns:
        The result; groups that conflict with a concurrent commit are skipped and named in ``conflicts``.

    Raises:
        CommitConflictError: every group conflicts, or the starting snapshot is gone from main's history; the
            written files are removed.
        CommitStateUnknownError: the commit may have landed; the written files are kept.

    Example:
        >>> compact_data(table, {"min-input-files": "2"}).summary()  # doctest: +SKIP
    """
    started = time.monotonic()
    plan = plan_data_compaction(table, options)
    if dry_run or not plan.groups:
        return IcebergDataCompactionResult(plan, dry_run=dry_run, duration_seconds=time.monotonic() - started)
    table.check_writable()
    head = table.snapshot(plan.snapshot_id)
    assert head is not None
    needed = [c.path for g in plan.groups for c in g.files] + [p for g in plan.groups for p in g.delete_files]
    files = data_files_by_path(table, head, needed)
    written: list[str] = []
    staged = StagedRewrite()
    try:
        rewritten = []
        for group in plan.groups:
            outcome = rewrite_group(table, group, files)
            written += outcome.locations
            rewritten.append(outcome)
        commit = RewriteCommit(
            starting_snapshot_id=plan.snapshot_id or 0,
            starting_sequence_number=plan.sequence_number,
            groups=[([files[c.path] for c in r.group.files], r.outputs) for r in rewritten],
            use_starting_sequence_number=plan.options.use_starting_sequence_number,
            remove_dangling_deletes=plan.options.remove_dangling_deletes,
            snapshot_properties=dict(snapshot_properties or {}),
        )

        def stage(tx: Transaction) -> StagedRewrite:
            _discard(table, staged.manifests_written, "a concurrent commit won; validating on the new head")
            return stage_rewrite(tx, table, commit, staged)

        commit_with_retry(table, stage, description="data compaction", policy=policy)
    except CommitStateUnknownError:
        log.warning("%s: data compaction outcome unknown; keeping %d written files", table.name, len(written))
        raise
    except BaseException:
        _discard(table, written + staged.manifests_written, "the compaction was not committed")
        raise
    skipped = [r for n, r in enumerate(rewritten) if n in staged.conflicts]
    _discard(
        table, [loc for r in skipped for loc in r.locations], "its group conflicted and was not committed"
    )
    kept = [r for n, r in enumerate(rewritten) if n not in staged.conflicts]
    return IcebergDataCompactionResult(
        plan,
        dry_run=False,
        snapshot_id=staged.snapshot_id,
        files_added=sum(len(r.outputs) for r in kept),
        bytes_added=sum(f.file_size_in_bytes for r in kept for f in r.outputs),
        rows_purged=sum(r.rows_deleted for r in kept),
        groups_committed=len(kept),
        delete_files_removed=len(staged.deletes_removed),
        conflicts=tuple(staged.conflicts[n] for n in sorted(staged.conflicts)),
        duration_seconds=time.monotonic() - started,
    )


def _discard(table: IcebergTable, locations: list[str], why: str) -> None:
    """Remove files this run wrote that no snapshot references (only when their commit definitely did not land)."""
    if not locations:
        return
    from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

    log.info("%s: discarding %d unpublished files (%s)", table.name, len(locations), why)
    fs = table.io.fs
    discard_unpublished(table.io, [str(fs._strip_protocol(p)) for p in locations], kind="unpublished")
    locations.clear()
