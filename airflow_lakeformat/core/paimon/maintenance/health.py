"""The health collector of a Paimon table: :class:`~airflow_lakeformat.core.health.model.HealthInputs` from
its metadata only.

What is read, and from where (no data file is opened):

- the live files of the latest snapshot: ``live_facts`` (base then delta manifests, a projected decode
  folded as ``live_entries`` folds them), each entry's partition, bucket, level, row count, file size and
  ``_DELETE_ROW_COUNT`` (the -U/-D records a primary-key file holds, when the writer counted them; pypaimon
  2.1 writes 0), summed per (partition, bucket) into :class:`FileGroup` s as they come;
- the data manifests of its two manifest lists (``manifest.target-file-size``, 8 MB, makes one small;
  ``manifest.merge-min-count``, 30, is the default of ``max-small-manifests``);
- the snapshot files of the branch (listed, each read once for its commit time: the count, the oldest age
  and the report's snapshot chart), and the snapshot expiry plan on the same reads, a dry run with the
  table's own ``snapshot.time-retained`` / ``snapshot.num-retained.*`` / ``snapshot.expire.limit``
  (``core/paimon/maintenance/expiry.py``): the snapshots, files and bytes an expiry would remove, and how
  many snapshots the retention expires past the limit (the recommendation then passes ``max_deletes``);
- when ``partition.expiration-time`` is set: the partition expiry plan (``partition_expiry.py``), which
  judges the live files as ``ManifestEntry`` objects: health then reads them with ``live_entries`` (instead
  of ``live_facts``) and hands them to the plan, so they are read once; a table the partition expiry refuses
  reports no expirable partition;
- the listings of ``snapshot/``, ``manifest/`` and ``schema/`` for the metadata bytes.

The primary-key table's delete load is its sorted runs per bucket against
``num-sorted-run.compaction-trigger`` (default 5), the threshold ``max-sorted-runs``. Target file size:
``target-file-size``, else 128 MiB (primary key) / 256 MiB (append) (``core/paimon/summary.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from airflow_lakeformat.core.errors import LakeformatError
from airflow_lakeformat.core.health.model import FileGroup, HealthInputs
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.io import FileStatus
from airflow_lakeformat.core.paimon.live_facts import GroupedFacts, fact_row, live_facts
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.references import MetadataReader
from airflow_lakeformat.core.paimon.manifest import ManifestEntry, ManifestFileMeta
from airflow_lakeformat.core.paimon.paths import SNAPSHOT_PREFIX, DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.summary import target_file_size
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

DEFAULT_COMPACTION_TRIGGER = 5


def partition_text(values: dict[str, object]) -> str:
    """``k=v/k2=v2`` (``""`` for an unpartitioned table)."""
    return "/".join(f"{k}={v}" for k, v in values.items())


def collect_health(table: Table, progress: Progress = NO_PROGRESS) -> HealthInputs:
    """Read the metadata a health report needs.

    Args:
        table: the Paimon table.
        progress: receives the manifest reads' progress.

    Example:
        >>> from airflow_lakeformat.core.health.assess import assess
        >>> assess(collect_health(Table.open("/wh/db.db/t"))).score  # doctest: +SKIP
        100
    """
    options = table.schema.table_options
    raw = {k: str(v) for k, v in options.raw.items()}
    trigger = int(raw.get("num-sorted-run.compaction-trigger", DEFAULT_COMPACTION_TRIGGER))
    thresholds = Thresholds.resolve(
        raw, max_sorted_runs=trigger, max_small_manifests=options.manifest_merge_min_count
    )
    manager = table.snapshot_manager
    latest = manager.latest_snapshot()
    lists = None if latest is None else table.data_manifests(latest)
    # Partition expiry judges ManifestEntry objects: then health reads those and both use them.
    entries = live_entries(table, latest, progress) if latest and _partition_expiration(table) else None
    groups = [] if latest is None or lists is None else _live_groups(table, latest, lists, progress, entries)
    manifests = [] if lists is None else [m.file_size for g in lists for m in g]
    listed = table.io.list_dir(manager.snapshot_dir)  # the snapshot ids and their bytes, one listing
    ids = sorted(i for i in (_snapshot_id(s.name) for s in listed if not s.is_dir) if i is not None)
    reader = MetadataReader(table)  # the expiry plan reuses the snapshots read here
    snapshots = reader.snapshots(ids)
    times = sorted(s.time_millis for s in snapshots)
    expiry = _expiry(table, reader, snapshots) if latest is not None else {}
    return HealthInputs(
        format="paimon",
        table=table.uri,
        snapshot_id=latest.id if latest else None,
        files=[],
        groups=groups,
        manifest_sizes=manifests,
        manifest_target_size=options.manifest_target_file_size,
        snapshot_count=len(times),
        oldest_snapshot_ms=times[0] if times else None,
        now_ms=int(time.time() * 1000),
        target_file_size=target_file_size(table),
        thresholds=thresholds,
        retention={
            "snapshot.time-retained": str(options.get("snapshot.time-retained")),
            "snapshot.num-retained.min": options.snapshot_num_retained_min,
            "snapshot.num-retained.max": options.snapshot_num_retained_max,
        },
        primary_key=bool(table.schema.primary_keys),
        expirable_partitions=_expirable_partitions(table, latest, entries) if latest is not None else None,
        metadata_bytes=_metadata_bytes(table, listed),
        delete_arguments={"mode": "full"} if table.schema.primary_keys else {},
        snapshot_times_ms=times,
        **expiry,
    )


def _expiry(table: Table, reader: MetadataReader, history: list[Snapshot]) -> dict[str, Any]:
    """What the expiry plan (the table's own retention, dry run) would remove, and how many snapshots the
    retention expires beyond ``snapshot.expire.limit`` (the :class:`HealthInputs` fields)."""
    from airflow_lakeformat.core.paimon.maintenance.expiry import (
        expirable_without_limit,
        plan_snapshot_expiry,
    )

    plan = plan_snapshot_expiry(table, reader=reader)
    requests = plan.requests()
    planned = len(plan.expired_ids)
    total, max_deletes = expirable_without_limit(table, plan, history)
    return {
        "expirable_snapshots": planned,
        "expiry_files": len(requests),
        "expiry_bytes": sum(r.size or 0 for r in requests),
        "expire_limit": plan.options.expire_limit,
        "expirable_unlimited": total,
        "expiry_arguments": {"max_deletes": max_deletes} if total > planned else {},
    }


def _partition_expiration(table: Table) -> bool:
    return bool(table.schema.table_options.get("partition.expiration-time"))


def _expirable_partitions(
    table: Table, latest: Snapshot, entries: list[ManifestEntry] | None
) -> list[str] | None:
    """The partitions past ``partition.expiration-time`` (None when it is not set or the expiry refuses),
    judged on the live ``entries`` health read."""
    if not _partition_expiration(table) or entries is None:
        return None
    from airflow_lakeformat.core.paimon.maintenance.partition_expiry import (
        plan_partition_expiry,
        resolve_settings,
    )

    try:
        plan = plan_partition_expiry(table, resolve_settings(table), (latest, entries))
    except LakeformatError:
        return None
    return [p.joined for p in [*plan.expired, *plan.over_limit]]


def _metadata_bytes(table: Table, snapshot_listing: list[FileStatus]) -> int:
    """Bytes under ``snapshot/`` (its listing, already made), ``manifest/`` and ``schema/``."""
    listed = [*snapshot_listing, *table.io.list_dir(table.manifest_dir), *table.io.list_dir(table.schema_dir)]
    return sum(s.size for s in listed if not s.is_dir)


def _snapshot_id(name: str) -> int | None:
    """The id of a ``snapshot-<id>`` file name (None for the hints and temporary files)."""
    suffix = name[len(SNAPSHOT_PREFIX) :] if name.startswith(SNAPSHOT_PREFIX) else ""
    return int(suffix) if suffix.isdigit() else None


def _live_groups(
    table: Table,
    latest: Snapshot,
    lists: tuple[list[ManifestFileMeta], list[ManifestFileMeta]],
    progress: Progress,
    entries: list[ManifestEntry] | None = None,
) -> list[FileGroup]:
    """The live files summed by (partition, bucket) (``live_facts``: no object per file; or the ``entries``
    already read). A partition is rendered once; an append table's files hold no DELETE records, so their
    count is not decoded (0)."""
    paths = DataFilePaths(table.schema)
    rendered: dict[bytes, str] = {}
    groups = []
    primary_key = bool(table.schema.primary_keys)
    grouped: GroupedFacts = {}
    if entries is None:
        grouped = live_facts(table, latest, progress, delete_counts=primary_key, manifests=lists)
    for entry in entries or ():
        grouped.setdefault((entry.partition, entry.bucket), []).append(fact_row(entry, primary_key))
    for (partition, bucket), rows in grouped.items():
        text = rendered.get(partition)
        if text is None:
            text = rendered[partition] = partition_text(paths.partitions.to_json(partition))
        levels = Counter(row[1][2] for row in rows)
        level0 = levels.pop(0, 0)
        sizes = [row[2] for row in rows]
        records, deletes = sum(row[3] for row in rows), sum(row[4] for row in rows)
        groups.append(FileGroup(text, bucket, sizes, records, deletes, level0, set(levels)))
    return groups
