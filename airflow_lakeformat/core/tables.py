"""One entry point for both formats: ``open_table(...)`` and ``table.maintenance``.

The shape follows pyiceberg's ``table.maintenance.expire_snapshots()`` and delta-rs's
``dt.vacuum(dry_run=True)`` / ``dt.optimize.compact()``: open a table, then call its maintenance
operations, each of which has a ``plan_*`` twin that computes and returns the plan as a value and
changes nothing. Every operation returns one result type per operation with ``to_json()`` (the
document the CLI prints and the Airflow operators push to XCom) and ``summary()`` (the line both log).

``dry_run`` means the same everywhere: plan and report, write and delete nothing. The operations that
delete (``expire_snapshots``, ``remove_orphan_files``) default to ``dry_run=True``; the ones that
only add files and commit (``compact_manifests``, ``compact_data``) default to ``False``, because
what they replace stays on disk until an expiry deletes it.

Reading is the same on both formats: ``table.snapshots()``, ``table.refs()``, ``table.files()``,
``table.manifests()``, ``table.statistics()`` and ``table.inspect()`` return the neutral records of
``core/table_info.py`` and ``core/statistics.py`` (Iceberg's names: ``path`` as a full URI,
``recordCount``, ``fileSize``, ``timestampMs``), whichever format computed them.

Example:
    >>> table = open_table("/warehouse/db.db/events")                # Paimon, detected
    >>> table.statistics().small_file_count                          # under 75% of the target size
    >>> table.maintenance.expire_snapshots(retain_min=5).summary()   # a dry run
    >>> table.maintenance.compact_manifests(mode="full")
    >>> iceberg = open_table("db.events", catalog_properties={"type": "sql", "uri": "sqlite:///c.db"})
    >>> iceberg.format
    'iceberg'

This module imports neither format at import time; each is loaded when a table of it is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.formats import TableFormat, detect_format
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress
from airflow_lakeformat.core.table_maintenance import IcebergMaintenance, ManifestMode, PaimonMaintenance

if TYPE_CHECKING:
    from airflow_lakeformat.core.health.model import TableHealth
    from airflow_lakeformat.core.health.policy import HealthPolicy
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.snapshot import Snapshot
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.sources import WriteSchema
    from airflow_lakeformat.core.statistics import TableStatistics
    from airflow_lakeformat.core.table_info import (
        FileInfo,
        ManifestInfo,
        RefInfo,
        SnapshotInfo,
        TableInspection,
    )
    from airflow_lakeformat.core.table_writes import IcebergWrites, PaimonWrites

__all__ = [
    "IcebergLakeTable",
    "IcebergMaintenance",
    "ManifestMode",
    "PaimonMaintenance",
    "PaimonTable",
    "open_table",
]


def table_format_for(
    format: TableFormat | None,
    catalog: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
) -> TableFormat | None:
    """The format the arguments name before any file is read: ``format`` itself, or Iceberg for a catalog
    (catalogs hold Iceberg tables); None when only the files can tell (:func:`detect_format`).

    The one rule both ``open_table`` and creating a table follow.

    Raises:
        UsageError: ``format="paimon"`` together with a catalog.

    Example:
        >>> table_format_for(None, catalog="prod"), table_format_for(None)
        ('iceberg', None)
    """
    in_catalog = bool(catalog or catalog_properties)
    if format == "paimon" and in_catalog:
        raise UsageError(
            "format 'paimon' (--format paimon) cannot take a catalog (--catalog/--catalog-property): catalogs "
            "hold Iceberg tables (a Paimon table lives at its path)"
        )
    if format is not None and format not in ("paimon", "iceberg"):
        raise ValueError(f"format must be 'paimon' or 'iceberg', not {format!r}")
    return "iceberg" if in_catalog else format


def refuse_iceberg_table_at(uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Before a Paimon table is created at ``uri``: refuse when an Iceberg table already lives there.

    Raises:
        IcebergTableAlreadyExistsError: ``uri`` holds an Iceberg table.
    """
    from airflow_lakeformat.core.errors import UnknownTableFormatError

    try:
        found = detect_format(uri, storage_options=storage_options)
    except UnknownTableFormatError:
        return
    if found == "iceberg":
        from airflow_lakeformat.core.iceberg.errors import IcebergTableAlreadyExistsError

        raise IcebergTableAlreadyExistsError(uri)


def open_table(
    uri_or_identifier: str,
    *,
    format: TableFormat | None = None,
    storage_options: Mapping[str, Any] | None = None,
    catalog: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    branch: str = "main",
) -> PaimonTable | IcebergLakeTable:
    """Open a Paimon or an Iceberg table.

    Args:
        uri_or_identifier: a table root (local path, ``file://``, ``s3://``, any fsspec URL), an Iceberg
            ``*.metadata.json`` (read-only), or ``namespace.table`` in an Iceberg catalog.
        format: ``"paimon"`` or ``"iceberg"``; detected from the files when omitted (Paimon has
            ``snapshot/`` and ``schema/``, Iceberg ``metadata/*.metadata.json``). A catalog implies Iceberg.
        storage_options: fsspec options for the table's store (S3 keys, endpoint, ...).
        catalog: an Iceberg catalog name from pyiceberg's configuration (``~/.pyiceberg.yaml``).
        catalog_properties: Iceberg catalog properties as pyiceberg's ``load_catalog`` takes them.
        branch: the Paimon branch to open. An Iceberg table is one handle for all its refs, chosen per read
            (``table.files(ref=...)``) or watched per branch by the sensor, so the argument does not apply to it.

    Returns:
        A table with ``.format``, ``.uri`` and ``.maintenance``.

    Raises:
        TableNotFoundError: no table of either format there (exit code 3 in the CLI).
        UsageError: ``format="paimon"`` with a catalog.

    Example:
        >>> open_table("s3://lake/db.db/events", storage_options={"endpoint_url": "http://127.0.0.1:8333"})
    """
    format = table_format_for(format, catalog, catalog_properties) or detect_format(
        uri_or_identifier, storage_options=storage_options
    )
    if format == "iceberg":
        from airflow_lakeformat.core.iceberg.catalog.catalog import open_table as open_iceberg

        return IcebergLakeTable(
            open_iceberg(
                uri_or_identifier,
                catalog_name=catalog,
                catalog_properties=catalog_properties,
                storage_options=storage_options,
            )
        )
    if format != "paimon":
        raise ValueError(f"format must be 'paimon' or 'iceberg', not {format!r}")
    from airflow_lakeformat.core.paimon.table import Table

    return PaimonTable(Table.open(uri_or_identifier, storage_options, branch=branch))


class PaimonTable:
    """A Paimon table behind the common facade; ``.native`` is the core's :class:`Table`."""

    format: TableFormat = "paimon"

    def __init__(self, native: Table) -> None:
        self.native = native
        self.maintenance = PaimonMaintenance(native)

    @property
    def uri(self) -> str:
        return self.native.uri

    def writes(self) -> PaimonWrites:
        """Exactly-once commits of staged files and rows (``core/table_writes.py``)."""
        from airflow_lakeformat.core.table_writes import PaimonWrites

        return PaimonWrites(self.native)

    def write_schema(self) -> WriteSchema:
        """The columns a write must deliver, for ``core.sources.read_source`` (Paimon's types and names)."""
        from airflow_lakeformat.core.paimon.write.rows import write_schema

        return write_schema(self.native.schema)

    def snapshots(self) -> list[SnapshotInfo]:
        """Every snapshot of the branch, ascending; only snapshot files are read.

        Returns:
            :class:`~airflow_lakeformat.core.table_info.SnapshotInfo` records (``operation`` is Paimon's
            commit kind; ``parent_id`` is ``id - 1``: Paimon's history is linear).

        Example:
            >>> [s.operation for s in open_table("/wh/db.db/events").snapshots()]
            ['APPEND', 'APPEND', 'COMPACT']
        """
        from airflow_lakeformat.core.paimon.summary import snapshot_infos

        return snapshot_infos(self.native)

    def refs(self) -> dict[str, RefInfo]:
        """The branch opened (at its latest snapshot) and every tag, by name.

        Example:
            >>> open_table("/wh/db.db/events").refs()["nightly"].snapshot_id
            3
        """
        from airflow_lakeformat.core.paimon.summary import ref_infos

        return ref_infos(self.native)

    def resolve_snapshot(self, snapshot: int | None = None, ref: str | None = None) -> int | None:
        """The id of the snapshot ``snapshot`` or ``ref`` names (default: the latest; None for no snapshot).

        Args:
            snapshot: a snapshot id.
            ref: a tag name, or the name of the branch the table was opened on.

        Raises:
            SnapshotNotFoundError: no such snapshot. TagNotFoundError: no such tag.
            UsageError: both given.

        Example:
            >>> open_table("/wh/db.db/events").resolve_snapshot(ref="nightly")
            3
        """
        found = self._snapshot(snapshot, ref)
        return None if found is None else found.id

    def files(
        self, snapshot: int | None = None, ref: str | None = None, progress: Progress = NO_PROGRESS
    ) -> list[FileInfo]:
        """The live data files of a snapshot (default: the latest), sorted by path.

        Args:
            snapshot: a snapshot id.
            ref: a tag name (or the branch opened) instead.
            progress: a progress reporter for the manifests read.

        Returns:
            :class:`~airflow_lakeformat.core.table_info.FileInfo` records with full paths (bucket, level,
            sequence numbers in ``extra``); empty for a table never committed to.

        Example:
            >>> sum(f.record_count for f in open_table("/wh/db.db/events").files(ref="nightly"))
            1200
        """
        from airflow_lakeformat.core.paimon.summary import file_infos

        found = self._snapshot(snapshot, ref)
        return [] if found is None else file_infos(self.native, found, progress)

    def manifests(self, snapshot: int | None = None, ref: str | None = None) -> list[ManifestInfo]:
        """The data manifests of a snapshot (default: the latest): base list first, then delta.

        Args:
            snapshot: a snapshot id.
            ref: a tag name (or the branch opened) instead.

        Example:
            >>> [m.extra["list"] for m in open_table("/wh/db.db/events").manifests()]
            ['base', 'base', 'delta']
        """
        from airflow_lakeformat.core.paimon.summary import manifest_infos

        found = self._snapshot(snapshot, ref)
        return [] if found is None else manifest_infos(self.native, found)

    def statistics(
        self, snapshot: int | None = None, ref: str | None = None, progress: Progress = NO_PROGRESS
    ) -> TableStatistics:
        """File counts and sizes of a snapshot (default: the latest), small files by the one rule.

        Args:
            snapshot: a snapshot id.
            ref: a tag name (or the branch opened) instead.
            progress: a progress reporter for the manifests read.

        Example:
            >>> open_table("/wh/db.db/events").statistics().summary()
            '/wh/db.db/events (paimon): 4 snapshots; 3 data files (2.1 KiB, ...'
        """
        from airflow_lakeformat.core.paimon.summary import table_statistics

        return table_statistics(self.native, self._snapshot(snapshot, ref), progress)

    def inspect(self, progress: Progress = NO_PROGRESS) -> TableInspection:
        """The statistics of the latest snapshot with the schema, partition keys, options and refs.

        Args:
            progress: a progress reporter for the manifests read.

        Example:
            >>> inspection = open_table("/wh/db.db/events").inspect()
            >>> inspection.properties["target-file-size"]
            {'value': '256 mb', 'default': '256 mb', 'set': False}
        """
        from airflow_lakeformat.core.paimon.summary import inspect_table

        return inspect_table(self.native, progress)

    def health(
        self,
        progress: Progress = NO_PROGRESS,
        *,
        orphans: bool = False,
        orphan_older_than: timedelta | None = None,
        policy: HealthPolicy | None = None,
    ) -> TableHealth:
        """What the table needs, from its metadata only: measures, a 0-100 score and recommendations
        (``core/health/``; Paimon's collector ``core/paimon/maintenance/health.py``).

        Args:
            progress: a progress reporter for the manifests read.
            orphans: also run the orphan cleanup's dry run (lists the table's location; slower).
            orphan_older_than: its age rule (default the format's: 1 day).
            policy: a health policy (``core/health/policy.py``) applied as the table ``db.events`` of
                ``/wh/db.db/events``: its thresholds, and the operations it allows (the others are listed
                as suppressed in the document's ``policy``).

        Example:
            >>> open_table("/wh/db.db/events").health().operations
            ['compact_data', 'expire_snapshots']
            >>> open_table("/wh/db.db/events").health(policy=HealthPolicy.load("p.yaml")).to_json()["policy"]
        """
        from airflow_lakeformat.core.health.assess import assess, with_orphans
        from airflow_lakeformat.core.health.policy import TableKey, applied_policy
        from airflow_lakeformat.core.paimon.maintenance.health import collect_health

        inputs = collect_health(self.native, progress)
        if orphans:
            plan = self.maintenance.plan_remove_orphan_files(older_than=orphan_older_than, progress=progress)
            arguments = {} if orphan_older_than is None else {"older_than": orphan_older_than}
            inputs = with_orphans(inputs, plan.orphans, arguments)
        properties = {k: str(v) for k, v in self.native.schema.table_options.raw.items()}
        return assess(inputs, applied_policy(policy, TableKey.parse(self.uri), inputs.thresholds, properties))

    def _snapshot(self, snapshot: int | None, ref: str | None) -> Snapshot | None:
        manager = self.native.snapshot_manager
        if snapshot is not None and ref is not None:
            raise UsageError("give a snapshot id or a ref, not both")
        if snapshot is not None:
            return manager.snapshot(snapshot)
        if ref is not None and ref != self.native.branch:
            return manager.tag(ref)
        return manager.latest_snapshot()

    def __repr__(self) -> str:
        branch = "" if self.native.branch == "main" else f", branch={self.native.branch!r}"
        return f"PaimonTable({self.uri!r}{branch})"


class IcebergLakeTable:
    """An Iceberg table behind the common facade; ``.native`` is the core's :class:`IcebergTable`."""

    format: TableFormat = "iceberg"

    def __init__(self, native: IcebergTable) -> None:
        self.native = native
        self.maintenance = IcebergMaintenance(native)

    @property
    def uri(self) -> str:
        return self.native.name

    def writes(self) -> IcebergWrites:
        """Exactly-once commits of staged files and rows (``core/table_writes.py``)."""
        from airflow_lakeformat.core.table_writes import IcebergWrites

        return IcebergWrites(self.native)

    def write_schema(self) -> WriteSchema:
        """The columns a write must deliver, for ``core.sources.read_source`` (the current schema's)."""
        from airflow_lakeformat.core.iceberg.write.write import write_schema

        return write_schema(self.native)

    def snapshots(self) -> list[SnapshotInfo]:
        """Every snapshot in the metadata (all branches and tags), by sequence number, then time.

        Returns:
            :class:`~airflow_lakeformat.core.table_info.SnapshotInfo` records (sequence number and manifest
            list in ``extra``); no manifest is read.

        Example:
            >>> [s.operation for s in open_table("db.events", catalog="prod").snapshots()]
            ['append', 'append', 'overwrite']
        """
        from airflow_lakeformat.core.iceberg.metadata.snapshots import snapshot_infos

        return snapshot_infos(self.native)

    def refs(self) -> dict[str, RefInfo]:
        """Every branch and tag by name, with its retention settings.

        Example:
            >>> open_table("db.events", catalog="prod").refs()["main"].type
            'branch'
        """
        from airflow_lakeformat.core.iceberg.metadata.snapshots import ref_infos

        return ref_infos(self.native)

    def resolve_snapshot(self, snapshot: int | None = None, ref: str | None = None) -> int | None:
        """The id of the snapshot ``snapshot`` or ``ref`` names (default: the current; None when empty).

        Args:
            snapshot: a snapshot id.
            ref: a branch or tag name.

        Raises:
            SnapshotNotFoundError: no such snapshot. TagNotFoundError: no such branch or tag.
            UsageError: both given.

        Example:
            >>> open_table("db.events", catalog="prod").resolve_snapshot(ref="nightly")
            8731526452346
        """
        if snapshot is not None and ref is not None:
            raise UsageError("give a snapshot id or a ref, not both")
        found = self.native.snapshot(snapshot, ref)
        return None if found is None else found.snapshot_id

    def files(
        self, snapshot: int | None = None, ref: str | None = None, progress: Progress = NO_PROGRESS
    ) -> list[FileInfo]:
        """The live data and delete files of a snapshot (default: the current), data files first.

        Args:
            snapshot: a snapshot id.
            ref: a branch or tag name instead.
            progress: a progress reporter for the manifests read.

        Returns:
            :class:`~airflow_lakeformat.core.table_info.FileInfo` records (``content`` tells data from
            deletes); empty for a table without snapshots.

        Example:
            >>> [f.path for f in open_table("/wh/events").files(ref="nightly") if f.content == "data"]
            ['file:///wh/events/data/cat=a/00000-0-....parquet']
        """
        from airflow_lakeformat.core.iceberg.metadata.files import file_infos

        if snapshot is not None and ref is not None:
            raise UsageError("give a snapshot id or a ref, not both")
        return file_infos(self.native, snapshot, ref, progress=progress)[1]

    def manifests(self, snapshot: int | None = None, ref: str | None = None) -> list[ManifestInfo]:
        """The manifests of a snapshot's manifest list (default: the current), in list order.

        Args:
            snapshot: a snapshot id.
            ref: a branch or tag name instead.

        Example:
            >>> [m.content for m in open_table("/wh/events").manifests()]
            ['data', 'deletes']
        """
        from airflow_lakeformat.core.iceberg.metadata.manifests import manifest_info, read_manifests

        if snapshot is not None and ref is not None:
            raise UsageError("give a snapshot id or a ref, not both")
        found = self.native.snapshot(snapshot, ref)
        return [] if found is None else [manifest_info(m) for m in read_manifests(self.native, found)]

    def statistics(
        self, snapshot: int | None = None, ref: str | None = None, progress: Progress = NO_PROGRESS
    ) -> TableStatistics:
        """File counts and sizes of a snapshot (default: the current), small files by the one rule.

        Args:
            snapshot: a snapshot id.
            ref: a branch or tag name instead.
            progress: a progress reporter for the manifests read.

        Example:
            >>> open_table("/wh/events").statistics().small_file_share
            1.0
        """
        from airflow_lakeformat.core.iceberg.metadata.inspect import table_statistics

        if snapshot is not None and ref is not None:
            raise UsageError("give a snapshot id or a ref, not both")
        return table_statistics(self.native, snapshot, ref, progress=progress)

    def inspect(self, progress: Progress = NO_PROGRESS) -> TableInspection:
        """The current snapshot's statistics with the schema, partition spec, properties, refs, and Iceberg's
        own facts (format version, locations, manifest breakdown, the split-offsets check) in ``details``.

        Args:
            progress: a progress reporter for the manifests read.

        Example:
            >>> open_table("/wh/events").inspect().properties["gc.enabled"]
            {'value': True, 'default': True, 'set': False}
        """
        from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_table

        return inspect_table(self.native, progress=progress)

    def health(
        self,
        progress: Progress = NO_PROGRESS,
        *,
        orphans: bool = False,
        orphan_older_than: timedelta | None = None,
        policy: HealthPolicy | None = None,
    ) -> TableHealth:
        """What the table needs, from its metadata only: measures, a 0-100 score and recommendations
        (``core/health/``; Iceberg's collector ``core/iceberg/maintenance/health.py``).

        Args:
            progress: a progress reporter for the manifests read.
            orphans: also run the orphan cleanup's dry run (lists the table's locations; slower).
            orphan_older_than: its age rule (default the format's: 3 days).
            policy: a health policy (``core/health/policy.py``) applied as the table its catalog names
                (``db.events``), or for a table opened by its root the root's last two parts
                (``/wh/db/events`` -> ``db.events``).

        Example:
            >>> open_table("/wh/events").health().score
            100
        """
        from airflow_lakeformat.core.health.assess import assess, with_orphans
        from airflow_lakeformat.core.health.policy import TableKey, applied_policy
        from airflow_lakeformat.core.iceberg.maintenance.health import collect_health

        inputs = collect_health(self.native, progress)
        if orphans:
            plan = self.maintenance.plan_remove_orphan_files(older_than=orphan_older_than, progress=progress)
            arguments = {} if orphan_older_than is None else {"older_than": orphan_older_than}
            inputs = with_orphans(inputs, plan.orphans, arguments)
        named = self.writes().catalog_identifier()
        key = TableKey(".".join(named[1]), named[2]) if named else TableKey.parse(self.native.uri)
        properties = dict(self.native.metadata.properties)
        return assess(inputs, applied_policy(policy, key, inputs.thresholds, properties))

    def __repr__(self) -> str:
        return f"IcebergLakeTable({self.uri!r})"
