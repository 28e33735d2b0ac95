"""The maintenance half of the facade: ``table.maintenance`` for a Paimon and for an Iceberg table.

``core/tables.py`` opens a table and picks the format once; the table it returns carries one of these
classes as ``.maintenance``. Each operation has a ``plan_*`` twin that returns the plan as a value and
changes nothing; the operations that delete (``expire_snapshots``, ``remove_orphan_files``) are dry runs
unless ``dry_run=False``; the ones that only add files and commit (``compact_manifests``,
``compact_data``) commit unless ``dry_run=True``, because what they replace stays on disk until an
expiry deletes it.

What the layers above (CLI, operators, Spark jobs) pass is taken here as typed keyword arguments, so they
never import a format module: ``progress`` (a :class:`~airflow_lakeformat.core.progress.Progress`),
``deleter`` (a :class:`~airflow_lakeformat.core.maintenance.deletion.FileDeleter` with the caller's batch
size, rate and retries; :meth:`file_deleter` builds one on the table's store), ``commit_user`` (the commit
user of a commit: Paimon's snapshot field, Iceberg's ``lakeformat.commit-user`` summary property), ``report``
and the maintenance lock (:meth:`lock`). An option only one format has is a parameter of that format's
class only; the other format's class refuses it by name (:class:`UsageError`) instead of ignoring it. The
rule "no ``older_than`` given means the format's default" for orphan cleanup is
:meth:`~airflow_lakeformat.core.maintenance.orphan_age.OrphanAge.older_than`, reached as
:meth:`orphan_older_than`.

Each method loads its format's module when called, so importing this module loads neither format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from airflow_lakeformat.core.maintenance.facade_base import (
    MaintenanceBase,
    OlderThan,
    TableSize,
    duration_older_than,
    refuse_options,
)
from airflow_lakeformat.core.maintenance.orphan_age import PAIMON_ORPHAN_AGE
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from airflow_lakeformat.core.maintenance.deletion import FileDeleter
    from airflow_lakeformat.core.maintenance.tag_results import TagResult
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.maintenance.data_compaction import (
        DataCompactionPlan,
        DataCompactionResult,
    )
    from airflow_lakeformat.core.paimon.maintenance.expiry import SnapshotExpiryPlan, SnapshotExpiryResult
    from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import ManifestCompactionResult
    from airflow_lakeformat.core.paimon.maintenance.orphans import OrphanCleanupPlan, OrphanCleanupResult
    from airflow_lakeformat.core.paimon.maintenance.partition_expiry import PartitionExpiryResult
    from airflow_lakeformat.core.paimon.merge_tree.compaction import PrimaryKeyCompactionResult
    from airflow_lakeformat.core.paimon.merge_tree.plan import PrimaryKeyCompactionPlan
    from airflow_lakeformat.core.paimon.table import Table

ManifestMode = Literal["full", "minor"]


class PaimonMaintenance(MaintenanceBase):
    """Maintenance of one Paimon table: Paimon's own rules (``docs/maintenance.md``), stricter where safe."""

    orphan_age = PAIMON_ORPHAN_AGE

    def __init__(self, table: Table) -> None:
        self.table = table

    @property
    def opens_by_root(self) -> bool:
        """Whether a process given only the table's root URI opens this table (always, for Paimon)."""
        return True

    def size(self) -> TableSize:
        """Live files and manifests of the latest snapshot, from its two manifest lists."""
        latest = self.table.snapshot_manager.latest_snapshot()
        if latest is None:
            return TableSize(None, 0, 0)
        base, delta = self.table.data_manifests(latest)
        metas = base + delta
        files = sum(m.num_added_files - m.num_deleted_files for m in metas)
        return TableSize(latest.id, max(files, 0), len(metas))

    def check_expire_snapshots(
        self,
        *,
        older_than: OlderThan = None,
        clean_expired_metadata: bool = False,
        retain_last: int | None = None,
        snapshot_ids: Sequence[int] = (),
        **_: Any,
    ) -> timedelta | None:
        """Check expiry arguments without reading the table: Iceberg's options and timestamps are refused;
        the ``older_than`` as a duration (None: the table's ``snapshot.time-retained``)."""
        iceberg_only = {
            "retain_last": retain_last,
            "snapshot_ids": list(snapshot_ids),
            "clean_expired_metadata": clean_expired_metadata,
        }
        refuse_options(self.table.uri, iceberg_only, only="Iceberg", this="a Paimon")
        return duration_older_than(older_than)

    def plan_expire_snapshots(
        self,
        *,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than: OlderThan = None,
        max_deletes: int | None = None,
        clean_expired_metadata: bool = False,
        progress: Progress = NO_PROGRESS,
    ) -> SnapshotExpiryPlan:
        """The expiry plan (which snapshots go, which files only they use); deletes nothing.

        Args:
            retain_min: keep at least this many snapshots (``snapshot.num-retained.min``, 10).
            retain_max: keep at most this many (``snapshot.num-retained.max``).
            older_than: expire only snapshots whose successor is older (``snapshot.time-retained``, 1 h):
                a ``timedelta`` or a duration text (``"1 h"``).
            max_deletes: expire at most this many snapshots per run (``snapshot.expire.limit``, 50).
            clean_expired_metadata: Iceberg only; refused here when set.
            progress: receives the planner's progress.
        """
        from airflow_lakeformat.core.paimon.maintenance.expiry import plan_snapshot_expiry

        return plan_snapshot_expiry(
            self.table,
            retain_min=retain_min,
            retain_max=retain_max,
            older_than=self.check_expire_snapshots(
                older_than=older_than, clean_expired_metadata=clean_expired_metadata
            ),
            max_deletes=max_deletes,
            progress=progress,
        )

    def expire_snapshots(
        self,
        *,
        dry_run: bool = True,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than: OlderThan = None,
        max_deletes: int | None = None,
        clean_expired_metadata: bool = False,
        plan: SnapshotExpiryPlan | None = None,
        progress: Progress = NO_PROGRESS,
        deleter: FileDeleter | None = None,
    ) -> SnapshotExpiryResult:
        """Expire snapshots and delete the files only they used (a dry run unless ``dry_run=False``).

        Args:
            dry_run: report, delete nothing (default).
            retain_min, retain_max, older_than, max_deletes, clean_expired_metadata: as for
                :meth:`plan_expire_snapshots`.
            plan: carry out this plan instead of planning again; it is re-checked against the table first.
            progress: receives planning and deletion progress.
            deleter: delete with this deleter (batch size, rate, retries); default the core's.

        Example:
            >>> open_table("/wh/db.db/t").maintenance.expire_snapshots(retain_min=5, dry_run=False)  # doctest: +SKIP
        """
        from airflow_lakeformat.core.paimon.maintenance.expiry import execute_snapshot_expiry

        plan = plan or self.plan_expire_snapshots(
            retain_min=retain_min,
            retain_max=retain_max,
            older_than=older_than,
            max_deletes=max_deletes,
            clean_expired_metadata=clean_expired_metadata,
            progress=progress,
        )
        return execute_snapshot_expiry(self.table, plan, dry_run=dry_run, deleter=deleter, progress=progress)

    def plan_remove_orphan_files(
        self,
        *,
        older_than: timedelta | None = None,
        allow_short_older_than: bool = False,
        progress: Progress = NO_PROGRESS,
    ) -> OrphanCleanupPlan:
        """List candidates older than ``older_than`` (1 day), then the used set; deletes nothing."""
        from airflow_lakeformat.core.paimon.maintenance.orphans import plan_orphan_cleanup

        return plan_orphan_cleanup(
            self.table,
            older_than=self.orphan_older_than(older_than),
            allow_short_older_than=allow_short_older_than,
            progress=progress,
        )

    def remove_orphan_files(
        self,
        *,
        dry_run: bool = True,
        older_than: timedelta | None = None,
        allow_short_older_than: bool = False,
        plan: OrphanCleanupPlan | None = None,
        progress: Progress = NO_PROGRESS,
        deleter: FileDeleter | None = None,
        report: str | None = None,
    ) -> OrphanCleanupResult:
        """Delete files no snapshot, tag or changelog uses (a dry run unless ``dry_run=False``).

        Args:
            dry_run: report, delete nothing (default).
            older_than: only files older than this are candidates (default 1 day; under 1 hour refused
                unless ``allow_short_older_than``).
            allow_short_older_than: accept a short ``older_than`` (only when no writer is running).
            plan: delete this plan's orphans; every batch is re-checked against the table first.
            progress: receives listing and deletion progress.
            deleter: delete with this deleter (batch size, rate, retries); default the core's.
            report: write every deleted (or, in a dry run, would-be-deleted) path and why, one JSON line
                each (the lines Iceberg's cleanup writes).
        """
        from airflow_lakeformat.core.paimon.maintenance.orphans import execute_orphan_cleanup

        plan = plan or self.plan_remove_orphan_files(
            older_than=older_than, allow_short_older_than=allow_short_older_than, progress=progress
        )
        return execute_orphan_cleanup(
            self.table, plan, dry_run=dry_run, deleter=deleter, progress=progress, report=report
        )

    def plan_compact_manifests(self, mode: ManifestMode = "full") -> ManifestCompactionResult:
        """What a manifest compaction would do: the merge is computed and encoded, nothing is stored."""
        return self.compact_manifests(mode, dry_run=True)

    def _committer(self, commit_user: str | None, dry_run: bool) -> Committer | None:
        if commit_user is None:
            return None
        from airflow_lakeformat.core.paimon.commit import Committer

        return Committer(self.table, commit_user, allow_unsafe_publish=dry_run)

    def compact_manifests(
        self, mode: ManifestMode = "full", *, dry_run: bool = False, commit_user: str | None = None
    ) -> ManifestCompactionResult:
        """Merge the latest snapshot's manifests (``full``: Paimon's ``compact_manifest``; ``minor``: the policy).

        Args:
            mode: ``"full"`` merges everything and drops DELETE entries; ``"minor"`` applies the table's
                ordinary merge policy.
            dry_run: report the merge, commit nothing.
            commit_user: the commit user of the COMPACT snapshot (default: a new one per run).
        """
        from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests

        committer = self._committer(commit_user, dry_run)
        return compact_manifests(self.table, mode, dry_run=dry_run, committer=committer)

    @property
    def compacts_by_key(self) -> bool:
        """Whether ``compact_data`` merges rows by primary key (Paimon's merge-tree compaction of a primary-key
        table) rather than bin-packing files (the Spark job ``compact_data`` does it too: executors merge the
        buckets, ``spark/paimon_pk_compaction.py``)."""
        return bool(self.table.schema.is_primary_key_table)

    def _compaction_mode(self, mode: str | None, min_file_count: int | None) -> str | None:
        """The merge-tree mode of a primary-key table (default ``minor``); None for an append table.

        An append table is bin-packed, which is the minor compaction of an append table: ``mode="minor"`` is
        accepted for it, ``mode="full"`` refused. A primary-key table refuses ``min_file_count`` (its
        compaction picks sorted runs by ``num-sorted-run.compaction-trigger``, not files)."""
        from airflow_lakeformat.core.errors import UsageError

        if mode not in (None, "full", "minor"):
            raise UsageError(f"mode: 'full' or 'minor', not {mode!r}")
        if not self.compacts_by_key:
            if mode == "full":
                raise UsageError(
                    f"mode='full': only for primary-key tables ({self.table.uri} is an append table, whose "
                    "compaction bin-packs small files)"
                )
            return None
        if min_file_count is not None:
            raise UsageError(
                f"min_file_count: only for append tables ({self.table.uri} has a primary key; its compaction "
                "picks sorted runs by num-sorted-run.compaction-trigger)"
            )
        return mode or "minor"

    def plan_compact_data(
        self,
        *,
        partitions: Sequence[Mapping[str, str | None]] | None = None,
        min_file_count: int | None = None,
        target_file_size: int | None = None,
        mode: str | None = None,
    ) -> DataCompactionPlan | PrimaryKeyCompactionPlan:
        """What ``compact_data`` would do; writes nothing.

        Append tables: groups of small files per partition and bucket, bin-packed to the target size. Primary-key
        tables: per bucket, the files upgraded and merged (``mode`` as for :meth:`compact_data`).
        """
        pk_mode = self._compaction_mode(mode, min_file_count)
        if pk_mode is not None:
            from airflow_lakeformat.core.paimon.merge_tree.plan import plan_primary_key_compaction

            return plan_primary_key_compaction(
                self.table, mode=pk_mode, partitions=partitions, target_file_size=target_file_size
            )
        from airflow_lakeformat.core.paimon.maintenance.data_compaction import plan_data_compaction

        return plan_data_compaction(
            self.table,
            partitions=partitions,
            min_file_count=min_file_count,
            target_file_size=target_file_size,
        )

    def compact_data(
        self,
        *,
        dry_run: bool = False,
        partitions: Sequence[Mapping[str, str | None]] | None = None,
        min_file_count: int | None = None,
        target_file_size: int | None = None,
        commit_user: str | None = None,
        mode: str | None = None,
        progress: Progress = NO_PROGRESS,
        where: str | None = None,
        options: Mapping[str, str] | None = None,
        strategy: str | None = None,
        sort_order: str | None = None,
    ) -> DataCompactionResult | PrimaryKeyCompactionResult:
        """Compact data files and commit one COMPACT snapshot (unless ``dry_run``).

        Append tables: small level-0 Parquet files rewritten into target-size files (a bin-pack). Primary-key
        tables: Paimon's merge-tree compaction (``core/paimon/merge_tree``): ``mode="full"`` merges every bucket
        into one sorted run at the max level (Java's ``compact`` procedure with ``compact_strategy => 'full'``),
        ``"minor"`` (the default) applies Paimon's universal compaction pick per bucket; a bucket changed by a
        concurrent writer meanwhile is skipped and reported.

        Args:
            dry_run: plan and report, write and commit nothing.
            partitions: only these partitions, matched by value (``[{"dt": "2024-01-01"}]``; see
                :func:`~airflow_lakeformat.core.table_writes.partition_filters` for text forms).
            min_file_count: append tables: the smallest group worth a rewrite (``compaction.min.file-num``, 5);
                refused for primary-key tables.
            target_file_size: bytes per output file (``target-file-size``; 128 MiB for primary-key tables, 256 MiB
                for append tables when unset).
            commit_user: the commit user of the COMPACT snapshot (default: a new one per run).
            mode: primary-key tables: ``"full"`` or ``"minor"`` (default); append tables accept ``"minor"`` (their
                bin-pack) and refuse ``"full"``.
            progress: primary-key tables: one step per bucket compacted.
            where, options, strategy, sort_order: Iceberg's (a predicate, Java's rewrite_data_files options, its
                sort strategy and order): refused by name here.

        Example:
            >>> open_table("/wh/db.db/orders").maintenance.compact_data(mode="full").summary()  # doctest: +SKIP
        """
        refuse_options(
            self.table.uri,
            {"where": where, "options": options or None, "strategy": strategy, "sort_order": sort_order},
            only="Iceberg",
            this="a Paimon",
        )
        pk_mode = self._compaction_mode(mode, min_file_count)
        committer = None if dry_run else self._committer(commit_user, dry_run)
        if pk_mode is not None:
            from airflow_lakeformat.core.paimon.merge_tree.compaction import compact_primary_key_table

            return compact_primary_key_table(
                self.table,
                mode=pk_mode,
                dry_run=dry_run,
                partitions=partitions,
                target_file_size=target_file_size,
                committer=committer,
                progress=progress,
            )
        from airflow_lakeformat.core.paimon.maintenance.data_compaction import compact_data

        return compact_data(
            self.table,
            dry_run=dry_run,
            partitions=partitions,
            min_file_count=min_file_count,
            target_file_size=target_file_size,
            committer=committer,
        )

    def expire_partitions(
        self,
        *,
        expiration_time: timedelta | str | None = None,
        timestamp_formatter: str | None = None,
        timestamp_pattern: str | None = None,
        strategy: str | None = None,
        max_expires: int | None = None,
        dry_run: bool = False,
        now: datetime | None = None,
        commit_user: str | None = None,
    ) -> PartitionExpiryResult:
        """Drop the partitions older than the expiration time in one OVERWRITE snapshot (Paimon's
        ``expire_partitions``); their files go with a later snapshot expiry. Commits unless ``dry_run``.

        Args:
            expiration_time: ``"7 d"`` or a ``timedelta`` (default: ``partition.expiration-time``; required).
            timestamp_formatter: a Java ``DateTimeFormatter`` pattern (``partition.timestamp-formatter``).
            timestamp_pattern: ``"$dt $hh:00:00"`` (``partition.timestamp-pattern``; default the first value).
            strategy: ``values-time`` or ``update-time`` (``partition.expiration-strategy``, values-time).
            max_expires: partitions per run (``partition.expiration-max-num``, 100).
            dry_run: report, commit nothing.
            now: the local wall-clock now (default: the clock).
            commit_user: the commit user of the snapshot (default: a new one per run).

        Example:
            >>> open_table("/wh/db.db/t").maintenance.expire_partitions(expiration_time="30 d")  # doctest: +SKIP
        """
        from airflow_lakeformat.core.paimon.maintenance.partition_expiry import expire_partitions

        return expire_partitions(
            self.table,
            expiration_time=expiration_time,
            timestamp_formatter=timestamp_formatter,
            timestamp_pattern=timestamp_pattern,
            strategy=strategy,
            max_expires=max_expires,
            dry_run=dry_run,
            now=now,
            committer=self._committer(commit_user, dry_run),
        )

    def compact_deletes(self, *, dry_run: bool = False, options: Mapping[str, str] | None = None) -> Any:
        """Iceberg's ``rewrite_position_delete_files``: a Paimon table keeps no position-delete files, so this is
        refused by name (:class:`UsageError`), changing nothing."""
        from airflow_lakeformat.core.errors import UsageError

        raise UsageError(
            f"compact-deletes: only for Iceberg tables ({self.table.uri} is a Paimon table, which keeps no "
            "position-delete files)"
        )

    def check_compact_data(self, mode: str | None = None) -> None:
        """Raise :class:`UnsupportedFormatError` (changing nothing) if data compaction cannot handle the table:
        append tables with deletion vectors or a file format other than Parquet; primary-key tables with a
        changelog producer, deletion vectors, postponed buckets, merge options not implemented, ...
        (``core/paimon/merge_tree/refusals.py``)."""
        pk_mode = self._compaction_mode(mode, None)
        if pk_mode is not None:
            from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec
            from airflow_lakeformat.core.paimon.merge_tree.refusals import check_table

            check_table(self.table, pk_mode)
            MergeSpec.from_schema(self.table.schema, self.table.uri)
            return
        from airflow_lakeformat.core.paimon.maintenance.data_compaction import check_compactable

        check_compactable(self.table)

    # -- tags (docs/tags.md): one shape on both formats ----------------------------------------------

    def create_tag(
        self,
        name: str,
        snapshot_id: int | None = None,
        time_retained: timedelta | str | None = None,
        *,
        ignore_if_exists: bool = False,
        replace: bool = False,
        dry_run: bool = False,
    ) -> TagResult:
        """Create tag ``name`` on ``snapshot_id`` (default: the latest), as Java's ``create_tag``.

        Args:
            name: the tag's name.
            snapshot_id: the snapshot to tag (an expired one is taken from a tag that still holds it).
            time_retained: its retention (``"7 d"``; default: ``tag.default-time-retained``, else none).
            ignore_if_exists: an existing tag is left as it is (``alreadyExisted``), not refused.
            replace: an existing tag is overwritten.
            dry_run: report, write nothing.

        Example:
            >>> open_table("/wh/db.db/t").maintenance.create_tag("before-backfill", time_retained="7 d")  # doctest: +SKIP
        """
        from airflow_lakeformat.core.maintenance.tag_periods import as_duration
        from airflow_lakeformat.core.paimon.tags import manage

        return manage.create_tag(
            self.table,
            name,
            snapshot_id,
            as_duration(time_retained, "time_retained"),
            ignore_if_exists=ignore_if_exists,
            replace=replace,
            dry_run=dry_run,
        )

    def delete_tag(self, name: str, *, dry_run: bool = False) -> TagResult:
        """Delete tag ``name``: its file only; files only it held are left to expiry and orphan cleanup."""
        from airflow_lakeformat.core.paimon.tags import manage

        return manage.delete_tag(self.table, name, dry_run=dry_run)

    def list_tags(self) -> TagResult:
        """Every tag: name, snapshot, schema, create time, retention and when it expires (``result.tags``)."""
        from airflow_lakeformat.core.paimon.tags import manage

        return manage.list_tags(self.table)

    def expire_tags(
        self, older_than: OlderThan = None, dry_run: bool = True, now: datetime | None = None
    ) -> TagResult:
        """Delete tags whose ``tagTimeRetained`` has passed, and with ``older_than`` (a duration, or a local
        timestamp) those created before it (Java's ``TagTimeExpire``; no create time: the file's mtime).

        A dry run unless ``dry_run=False``, as every operation that deletes by age.
        """
        from airflow_lakeformat.core.paimon.tags import manage
        from airflow_lakeformat.core.paimon.tags.tag_expiry import parse_older_than

        return manage.expire_tags(
            self.table, older_than=parse_older_than(older_than), dry_run=dry_run, now=now
        )

    def create_scheduled_tag(
        self,
        when: datetime,
        *,
        period: str | None = None,
        period_duration: timedelta | str | None = None,
        formatter: str | None = None,
        num_retained_max: int | None = None,
        time_retained: timedelta | str | None = None,
        snapshot_id: int | None = None,
        time_zone: str | None = None,
        dry_run: bool = False,
    ) -> TagResult:
        """The tag of the period that ended at ``when``, named as Paimon's ``tag.creation-period`` names it, then
        ``tag.num-retained-max`` over the auto tags; idempotent (an existing tag is left as it is).

        Args:
            when: the period's end (a DAG run's data interval end); aware: read in ``time_zone`` (default UTC).
            period, period_duration, formatter: over the table's ``tag.creation-period``,
                ``tag.creation-period-duration``, ``tag.period-formatter``.
            num_retained_max: over ``tag.num-retained-max``.
            time_retained: over ``tag.default-time-retained``.
            snapshot_id: the snapshot to tag (default: the latest).
            time_zone: the zone of the wall clock periods are named in.
            dry_run: report, change nothing.
        """
        from airflow_lakeformat.core.maintenance.tag_periods import as_duration, wall_clock
        from airflow_lakeformat.core.paimon.tags import manage

        overrides = {
            "tag.creation-period": period,
            "tag.creation-period-duration": as_duration(period_duration, "period_duration"),
            "tag.period-formatter": formatter,
        }
        return manage.create_period_tag(
            self.table,
            wall_clock(when, time_zone),
            overrides=overrides,
            num_retained_max=num_retained_max,
            time_retained=as_duration(time_retained, "time_retained"),
            snapshot_id=snapshot_id,
            dry_run=dry_run,
        )


# The Iceberg half lives beside this module; importing it here keeps ``core.table_maintenance`` the one name.
from airflow_lakeformat.core.table_maintenance_iceberg import COMMIT_USER_PROPERTY as COMMIT_USER_PROPERTY  # noqa: E402
from airflow_lakeformat.core.table_maintenance_iceberg import IcebergMaintenance as IcebergMaintenance  # noqa: E402
