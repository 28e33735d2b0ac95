"""The Iceberg half of ``table.maintenance``: :class:`IcebergMaintenance`, the facade over ``core/iceberg``.

``core/table_maintenance.py`` states the rules both halves follow (dry runs, typed keyword arguments, options of
the other format refused by name); this module holds the Iceberg class so that each half stays one job. Each
method loads its ``core/iceberg`` module when called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from airflow_lakeformat.core.maintenance.facade_base import (
    MaintenanceBase,
    OlderThan,
    TableSize,
    expiry_older_than,
    refuse_options,
)
from airflow_lakeformat.core.maintenance.orphan_age import ICEBERG_ORPHAN_AGE
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.maintenance.data_compaction import IcebergDataCompactionPlan
    from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import IcebergDataCompactionResult
    from airflow_lakeformat.core.iceberg.maintenance.delete_compaction import DeleteCompactionResult
    from airflow_lakeformat.core.iceberg.maintenance.expiry import IcebergExpiryPlan, IcebergExpiryResult
    from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import (
        IcebergManifestCompactionResult,
    )
    from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction_plan import ManifestCompactionPlan
    from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import IcebergOrphanPlan
    from airflow_lakeformat.core.iceberg.maintenance.orphans import IcebergOrphanResult
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.maintenance.deletion import FileDeleter
    from airflow_lakeformat.core.maintenance.tag_results import TagResult

ManifestMode = Literal["full", "minor"]
#: The Iceberg snapshot summary property naming the commit user (an Iceberg snapshot has no field for it).
COMMIT_USER_PROPERTY = "lakeformat.commit-user"


def _retain_last(retain_last: int | None, retain_min: int | None) -> int | None:
    """Iceberg's ``retain_last`` or its Paimon name ``retain_min`` (the same concept), not two different values."""
    if retain_last is not None and retain_min is not None and retain_last != retain_min:
        raise ValueError("retain_last and retain_min are the same setting for Iceberg tables: give one")
    return retain_last if retain_last is not None else retain_min


class IcebergMaintenance(MaintenanceBase):
    """Maintenance of one Iceberg table.

    Manifest compaction follows Java's ``RewriteManifests`` (full) and ``ManifestMergeManager`` (minor);
    orphan cleanup Java's ``DeleteOrphanFilesSparkAction`` (``core/iceberg/maintenance/orphans.py``), stricter.
    Expiry follows Java's ``expire_snapshots`` (``core/iceberg/maintenance/expiry.py``) and deletes the files only
    expired snapshots reached. Data compaction follows Java's ``rewrite_data_files`` (bin-pack, deletes applied,
    ``core/iceberg/maintenance/data_compaction*.py``) and ``rewrite_position_delete_files`` (``compact_deletes``).
    """

    orphan_age = ICEBERG_ORPHAN_AGE
    #: Whether ``compact_data`` merges rows by primary key (Paimon primary-key tables only).
    compacts_by_key = False

    def __init__(self, table: IcebergTable) -> None:
        self.table = table

    @property
    def opens_by_root(self) -> bool:
        """Whether a process given only the table's root URI opens this table: a Hadoop-layout table (or a
        ``metadata.json`` opened read-only) does; a table of another catalog does not."""
        from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import (
            HadoopLayoutCatalog,
            ReadOnlyCatalog,
        )

        return isinstance(self.table.table.catalog, (HadoopLayoutCatalog, ReadOnlyCatalog))

    def size(self) -> TableSize:
        """Live data files (the current snapshot's ``total-data-files``) and its manifests (manifest list)."""
        current = self.table.snapshot()
        if current is None:
            return TableSize(None, 0, 0)
        summary = current.summary
        files = int(summary.get("total-data-files") or 0) if summary is not None else 0
        return TableSize(current.snapshot_id, files, len(current.manifests(self.table.table.io)))

    def check_compact_data(self, mode: str | None = None) -> None:
        """Raise :class:`UnsupportedFormatError` (changing nothing) when data compaction refuses the table (v3);
        ``mode`` (Paimon's merge-tree mode) is refused by name."""
        refuse_options(self.table.name, {"mode": mode}, only="Paimon", this="an Iceberg")
        from airflow_lakeformat.core.iceberg.maintenance.data_compaction import check_rewritable

        check_rewritable(self.table)

    def check_expire_snapshots(
        self,
        *,
        older_than: OlderThan = None,
        retain_max: int | None = None,
        max_deletes: int | None = None,
        retain_last: int | None = None,
        retain_min: int | None = None,
        **_: Any,
    ) -> OlderThan:
        """Check expiry arguments without reading the table: Paimon's options are refused, ``retain_last``
        and its Paimon name ``retain_min`` must agree; the ``older_than`` checked (a duration text becomes a
        ``timedelta``, a timestamp stays text)."""
        _retain_last(retain_last, retain_min)
        refuse_options(
            self.table.name,
            {"retain_max": retain_max, "max_deletes": max_deletes},
            only="Paimon",
            this="an Iceberg",
        )
        return expiry_older_than(older_than)

    def plan_expire_snapshots(
        self,
        *,
        older_than: timedelta | datetime | str | None = None,
        retain_last: int | None = None,
        snapshot_ids: Sequence[int] = (),
        clean_expired_metadata: bool = False,
        retain_min: int | None = None,
        retain_max: int | None = None,
        max_deletes: int | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> IcebergExpiryPlan:
        """The expiry plan (snapshots and refs removed, files only they reach by kind); changes nothing.

        Java's ``expire_snapshots`` rules (``core/iceberg/maintenance/expiry.py``); per-ref retention
        (``max-ref-age-ms``, ``max-snapshot-age-ms``, ``min-snapshots-to-keep``) overrides the arguments.

        Args:
            older_than: expire snapshots older than this: a ``timedelta`` before now, a ``datetime``, or text
                (``"5 d"``, ``"2024-05-01T00:00:00Z"``); default ``history.expire.max-snapshot-age-ms`` (5 days).
            retain_last: keep at least this many ancestors of each branch head
                (``history.expire.min-snapshots-to-keep``, 1).
            snapshot_ids: expire these snapshots too (in addition to the age rule, as Java does).
            clean_expired_metadata: also drop partition specs and schemas no retained snapshot uses.
            retain_min: the Paimon name of ``retain_last`` (give one of them).
            retain_max, max_deletes: Paimon only; refused here when set.
            progress: receives the planner's progress.
        """
        from airflow_lakeformat.core.iceberg.maintenance.expiry import plan_snapshot_expiry

        return plan_snapshot_expiry(
            self.table,
            older_than=self.check_expire_snapshots(
                older_than=older_than, retain_max=retain_max, max_deletes=max_deletes
            ),
            retain_last=_retain_last(retain_last, retain_min),
            snapshot_ids=snapshot_ids,
            clean_expired_metadata=clean_expired_metadata,
            progress=progress,
        )

    def expire_snapshots(
        self,
        *,
        dry_run: bool = True,
        older_than: timedelta | datetime | str | None = None,
        retain_last: int | None = None,
        snapshot_ids: Sequence[int] = (),
        clean_expired_metadata: bool = False,
        retain_min: int | None = None,
        retain_max: int | None = None,
        max_deletes: int | None = None,
        plan: IcebergExpiryPlan | None = None,
        progress: Progress = NO_PROGRESS,
        deleter: FileDeleter | None = None,
    ) -> IcebergExpiryResult:
        """Expire snapshots, commit, and delete the files only they reached (a dry run unless ``dry_run=False``).

        Args:
            dry_run: report, commit and delete nothing (default).
            older_than, retain_last, snapshot_ids, clean_expired_metadata, retain_min, retain_max,
                max_deletes: as for :meth:`plan_expire_snapshots`.
            plan: carry out this plan instead of planning again; it is re-checked against the table first.
            progress: receives planning and deletion progress.
            deleter: delete with this deleter (batch size, rate, retries); default the core's.

        Example:
            >>> table.maintenance.expire_snapshots(older_than="7 d", retain_last=3, dry_run=False).summary()  # doctest: +SKIP
        """
        from airflow_lakeformat.core.iceberg.maintenance.expiry import execute_snapshot_expiry

        plan = plan or self.plan_expire_snapshots(
            older_than=older_than,
            retain_last=retain_last,
            snapshot_ids=snapshot_ids,
            clean_expired_metadata=clean_expired_metadata,
            retain_min=retain_min,
            retain_max=retain_max,
            max_deletes=max_deletes,
            progress=progress,
        )
        return execute_snapshot_expiry(self.table, plan, dry_run=dry_run, deleter=deleter, progress=progress)

    def plan_remove_orphan_files(
        self,
        *,
        older_than: timedelta | None = None,
        allow_short_older_than: bool = False,
        equal_schemes: Mapping[str, str] | None = None,
        equal_authorities: Mapping[str, str] | None = None,
        prefix_mismatch: Literal["error", "ignore"] = "error",
        progress: Progress = NO_PROGRESS,
    ) -> IcebergOrphanPlan:
        """List the files under the table's location(s), then the valid set, then join; deletes nothing.

        Java's ``DeleteOrphanFilesSparkAction`` rules (``core/iceberg/maintenance/orphans.py``): candidates older than
        ``older_than`` (3 days; under 24 h refused unless ``allow_short_older_than``), paths compared after
        mapping ``s3a``/``s3n`` to ``s3``, a file valid under another scheme or authority aborts the run.
        """
        from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import plan_orphan_cleanup

        return plan_orphan_cleanup(
            self.table,
            older_than=self.orphan_older_than(older_than),
            allow_short_older_than=allow_short_older_than,
            equal_schemes=equal_schemes,
            equal_authorities=equal_authorities,
            prefix_mismatch=prefix_mismatch,
            progress=progress,
        )

    def remove_orphan_files(
        self,
        *,
        dry_run: bool = True,
        older_than: timedelta | None = None,
        allow_short_older_than: bool = False,
        equal_schemes: Mapping[str, str] | None = None,
        equal_authorities: Mapping[str, str] | None = None,
        prefix_mismatch: Literal["error", "ignore"] = "error",
        report: str | None = None,
        plan: IcebergOrphanPlan | None = None,
        progress: Progress = NO_PROGRESS,
        deleter: FileDeleter | None = None,
    ) -> IcebergOrphanResult:
        """Delete files no snapshot of any ref and no metadata file reaches (a dry run unless ``dry_run=False``).

        Args:
            dry_run: report, delete nothing (default).
            older_than: only files older than this are candidates (default 3 days, Java's; under 24 hours
                refused unless ``allow_short_older_than``).
            allow_short_older_than: accept a short ``older_than`` (only when no writer is running).
            equal_schemes: extra scheme equivalences over ``{"s3a": "s3", "s3n": "s3"}``.
            equal_authorities: authority equivalences.
            prefix_mismatch: ``"error"`` (abort when a listed file is valid under another scheme or
                authority) or ``"ignore"`` (keep such files).
            report: write every deleted (or, in a dry run, would-be-deleted) path and why, one JSON line each.
            plan: delete this plan's orphans; every batch is re-checked against the re-loaded table first.
            progress: receives listing and deletion progress.
            deleter: delete with this deleter (batch size, rate, retries); default the core's.

        Example:
            >>> open_table("s3://lake/wh/events").maintenance.remove_orphan_files(report="orphans.jsonl")  # doctest: +SKIP
        """
        from airflow_lakeformat.core.iceberg.maintenance.orphans import execute_orphan_cleanup

        plan = plan or self.plan_remove_orphan_files(
            older_than=older_than,
            allow_short_older_than=allow_short_older_than,
            equal_schemes=equal_schemes,
            equal_authorities=equal_authorities,
            prefix_mismatch=prefix_mismatch,
            progress=progress,
        )
        return execute_orphan_cleanup(
            self.table, plan, dry_run=dry_run, report=report, deleter=deleter, progress=progress
        )

    def plan_compact_manifests(
        self, mode: ManifestMode = "full", *, branch: str = "main", target_size_bytes: int | None = None
    ) -> ManifestCompactionPlan:
        """The manifests a compaction would replace and write, per spec; writes and commits nothing."""
        from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction_plan import (
            plan_manifest_compaction,
        )

        return plan_manifest_compaction(self.table, mode, branch=branch, target_size_bytes=target_size_bytes)

    def compact_manifests(
        self,
        mode: ManifestMode = "full",
        *,
        dry_run: bool = False,
        branch: str = "main",
        target_size_bytes: int | None = None,
        snapshot_properties: Mapping[str, str] | None = None,
        commit_user: str | None = None,
    ) -> IcebergManifestCompactionResult:
        """Rewrite the branch head's data manifests and commit a ``replace`` snapshot (live files unchanged).

        Args:
            mode: ``"full"`` clusters every live entry by partition into target-size manifests (Java's
                ``rewrite_manifests``); ``"minor"`` applies the commit-time merge policy
                (``commit.manifest.min-count-to-merge``, ``commit.manifest-merge.enabled``).
            dry_run: compute and encode the new manifests, store and commit nothing.
            branch: the branch whose head is compacted.
            target_size_bytes: default ``commit.manifest.target-size-bytes`` (8 MB).
            snapshot_properties: extra summary properties of the ``replace`` snapshot (e.g. the commit
                user, ``lakeformat.commit-user``).
            commit_user: the commit user, written as the ``lakeformat.commit-user`` summary property.
        """
        from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests

        return compact_manifests(
            self.table,
            mode,
            dry_run=dry_run,
            branch=branch,
            target_size_bytes=target_size_bytes,
            snapshot_properties={
                **(snapshot_properties or {}),
                **({} if commit_user is None else {COMMIT_USER_PROPERTY: commit_user}),
            },
        )

    def plan_compact_data(
        self,
        *,
        options: Mapping[str, str] | None = None,
        where: str | None = None,
        partitions: Sequence[Mapping[str, str | None]] | None = None,
        min_file_count: int | None = None,
        target_file_size: int | None = None,
        strategy: str | None = None,
        sort_order: str | None = None,
    ) -> IcebergDataCompactionPlan:
        """The groups Java's ``rewrite_data_files`` planner would rewrite; reads, writes nothing.

        Args:
            options: Java's options by name (``{"min-input-files": "2", "rewrite-all": "true"}``).
            where: a predicate selecting files by partition (``"cat = 'a'"``).
            partitions, min_file_count, target_file_size: the Paimon-named shorthands the operators and the CLI
                pass for both formats: partitions by value (become ``where``), ``min-input-files`` and
                ``target-file-size-bytes``.
            strategy: ``"binpack"`` (default) or ``"sort"``, Java's procedure argument.
            sort_order: Java's ``sort_order`` text (``"id DESC NULLS LAST, name"``); implies ``sort``; default:
                the table's sort order.
        """
        from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction

        merged, predicate = compaction_arguments(options, where, partitions, min_file_count, target_file_size)
        return plan_data_compaction(
            self.table, merged, where=predicate, strategy=strategy, sort_order=sort_order
        )

    def compact_data(
        self,
        *,
        dry_run: bool = False,
        options: Mapping[str, str] | None = None,
        where: str | None = None,
        partitions: Sequence[Mapping[str, str | None]] | None = None,
        min_file_count: int | None = None,
        target_file_size: int | None = None,
        commit_user: str | None = None,
        strategy: str | None = None,
        sort_order: str | None = None,
        mode: str | None = None,
    ) -> IcebergDataCompactionResult:
        """Rewrite small files and files with many deletes, deletes applied, as ``replace`` snapshots.

        Java's ``rewrite_data_files`` (bin-pack, or sort: each group's rows sorted across its files in bounded
        memory), validated against concurrent commits (``core/iceberg/maintenance/data_compaction_run.py``).

        Args:
            dry_run: plan and report, write and commit nothing.
            options, where, partitions, min_file_count, target_file_size, strategy, sort_order: as for
                :meth:`plan_compact_data`.
            commit_user: recorded as ``lakeformat.commit-user`` in each snapshot's summary.
            mode: Paimon's (``"full"``/``"minor"`` merge-tree compaction of a primary-key table): refused by
                name here.

        Example:
            >>> table.maintenance.compact_data(options={"min-input-files": "2"}).summary()  # doctest: +SKIP
            >>> table.maintenance.compact_data(strategy="sort", sort_order="id DESC NULLS LAST")  # doctest: +SKIP
        """
        refuse_options(self.table.name, {"mode": mode}, only="Paimon", this="an Iceberg")
        from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
        from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data

        merged, predicate = compaction_arguments(options, where, partitions, min_file_count, target_file_size)
        properties = {COMMIT_USER_PROPERTY: commit_user} if commit_user else None
        chosen: dict[str, str] | CompactionOptions = merged
        if strategy is not None or sort_order is not None:  # the run takes them inside its options
            chosen = CompactionOptions.from_options(
                merged, self.table.metadata.properties, strategy=strategy, sort_order=sort_order
            )
        return compact_data(
            self.table, chosen, dry_run=dry_run, where=predicate, snapshot_properties=properties
        )

    def expire_partitions(self, **_: Any) -> Any:
        """Paimon's ``expire_partitions`` (``partition.expiration-time``): refused by name (:class:`UsageError`),
        changing nothing; an Iceberg table drops old partitions with a delete by a partition filter."""
        from airflow_lakeformat.core.errors import UsageError

        raise UsageError(
            f"expire-partitions: only for Paimon tables ({self.table.name} is an Iceberg table; "
            "partition.expiration-time is a Paimon option)"
        )

    def compact_deletes(
        self, *, dry_run: bool = False, options: Mapping[str, str] | None = None
    ) -> DeleteCompactionResult:
        """Merge small position-delete files and drop their dangling records (Java's
        ``rewrite_position_delete_files``).

        Args:
            dry_run: plan and report, write and commit nothing.
            options: that procedure's options by name (``{"rewrite-all": "true"}``).
        """
        from airflow_lakeformat.core.iceberg.maintenance.delete_compaction import compact_deletes

        return compact_deletes(self.table, options, dry_run=dry_run)

    # -- tags (docs/tags.md): the same methods and result shape as Paimon's ---------------------------

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
        """Create tag ``name`` on ``snapshot_id`` (default: the current snapshot) through pyiceberg's
        ``manage_snapshots``; ``time_retained`` is its ``max-ref-age-ms`` (``"7 d"``; default: none).
        ``ignore_if_exists`` leaves an existing tag as it is; ``replace`` moves it; ``dry_run`` commits nothing.

        Example:
            >>> open_table("/wh/db/events").maintenance.create_tag("before-backfill")  # doctest: +SKIP
        """
        from airflow_lakeformat.core.iceberg.maintenance import tags
        from airflow_lakeformat.core.maintenance.tag_periods import as_duration

        return tags.create_tag(
            self.table,
            name,
            snapshot_id,
            as_duration(time_retained, "time_retained"),
            ignore_if_exists=ignore_if_exists,
            replace=replace,
            dry_run=dry_run,
        )

    def delete_tag(self, name: str, *, dry_run: bool = False) -> TagResult:
        """Remove tag ``name`` (the ref only: its snapshot and files go with a later snapshot expiry)."""
        from airflow_lakeformat.core.iceberg.maintenance import tags

        return tags.delete_tag(self.table, name, dry_run=dry_run)

    def list_tags(self) -> TagResult:
        """Every tag: name, snapshot, schema, ``max-ref-age-ms`` and when it expires (``result.tags``)."""
        from airflow_lakeformat.core.iceberg.maintenance import tags

        return tags.list_tags(self.table)

    def expire_tags(
        self, older_than: OlderThan = None, dry_run: bool = True, now: datetime | None = None
    ) -> TagResult:
        """Remove tags whose ``max-ref-age-ms`` (else ``history.expire.max-ref-age-ms``) has passed since their
        snapshot, whose snapshot is missing, and with ``older_than`` (a duration or a timestamp, naive = UTC)
        those whose snapshot is older. A dry run unless ``dry_run=False``, as every operation that deletes by age.
        """
        from airflow_lakeformat.core.iceberg.maintenance import tags

        return tags.expire_tags(self.table, older_than=older_than, dry_run=dry_run, now=now)

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
        """The tag of the period that ended at ``when``, named by Paimon's ``tag.creation-period`` rules (the
        arguments; defaults daily, with_dashes), then ``num_retained_max`` over those auto tags; idempotent.
        Arguments as for the Paimon facade's method."""
        from airflow_lakeformat.core.iceberg.maintenance import tags
        from airflow_lakeformat.core.maintenance.tag_periods import as_duration, wall_clock

        overrides = {
            "tag.creation-period": period,
            "tag.creation-period-duration": as_duration(period_duration, "period_duration"),
            "tag.period-formatter": formatter,
        }
        return tags.create_period_tag(
            self.table,
            wall_clock(when, time_zone),
            overrides=overrides,
            num_retained_max=num_retained_max,
            time_retained=as_duration(time_retained, "time_retained"),
            snapshot_id=snapshot_id,
            dry_run=dry_run,
        )


def compaction_arguments(
    options: Mapping[str, str] | None,
    where: str | None,
    partitions: Sequence[Mapping[str, str | None]] | None,
    min_file_count: int | None,
    target_file_size: int | None,
) -> tuple[dict[str, str], str | None]:
    """Java's option map and predicate from the shorthands both formats' callers pass.

    Example:
        >>> compaction_arguments(None, None, [{"cat": "a'b"}, {"cat": None}], 2, None)
        ({'min-input-files': '2'}, "(cat = 'a''b') OR (cat IS NULL)")
    """
    merged = dict(options or {})
    if min_file_count is not None:
        merged.setdefault("min-input-files", str(min_file_count))
    if target_file_size is not None:
        merged.setdefault("target-file-size-bytes", str(target_file_size))
    clauses = []
    for spec in partitions or ():
        terms = [
            f"{name} IS NULL" if value is None else f"{name} = '{str(value).replace(chr(39), chr(39) * 2)}'"
            for name, value in spec.items()
        ]
        clauses.append("(" + " AND ".join(terms) + ")")
    by_partition = " OR ".join(clauses) if clauses else None
    if where and by_partition:
        return merged, f"({where}) AND ({by_partition})"
    return merged, where or by_partition
