"""The health collector of an Iceberg table: :class:`~airflow_lakeformat.core.health.model.HealthInputs` from
its metadata only.

What is read (no data or delete file is opened):

- the live data and delete files of the current snapshot (``metadata/files.py``: its manifests' live
  entries), each with its partition (rendered ``field=value``), content, record count (a delete file: the
  rows it deletes, deletion vectors included) and size;
- the manifests of its manifest list (small: under ``commit.manifest.target-size-bytes``, 8 MiB; the default
  of ``max-small-manifests`` is ``commit.manifest.min-count-to-merge``, 100);
- the snapshots of the table metadata (their commit times, ascending: the count, the oldest age and the
  report's snapshot chart), and the snapshot expiry plan, a dry run with the table's own
  ``history.expire.max-snapshot-age-ms`` / ``history.expire.min-snapshots-to-keep`` and per-ref retention
  (``core/iceberg/maintenance/expiry.py``): the snapshots, files and bytes an expiry would remove.

Target file size: ``write.target-file-size-bytes`` (512 MiB). The metadata bytes are the manifests' bytes
(the manifest lists' and ``metadata.json`` sizes are not in the metadata; not measured here).
"""

from __future__ import annotations

import time

from airflow_lakeformat.core.health.model import FileFacts, HealthInputs
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.iceberg.metadata.files import file_infos
from airflow_lakeformat.core.iceberg.metadata.inspect import maintenance_properties, target_file_size
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress


def _number(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def collect_health(table: IcebergTable, progress: Progress = NO_PROGRESS) -> HealthInputs:
    """Read the metadata a health report needs.

    Args:
        table: the Iceberg table.
        progress: receives the manifest reads' progress.

    Example:
        >>> from airflow_lakeformat.core.health.assess import assess
        >>> assess(collect_health(open_table("/wh/events"))).operations  # doctest: +SKIP
        ['compact_data']
    """
    properties = dict(table.metadata.properties)
    maintenance = maintenance_properties(properties)
    min_merge = _number(maintenance["commit.manifest.min-count-to-merge"]["value"], 100)
    manifest_target = _number(maintenance["commit.manifest.target-size-bytes"]["value"], 8 * 1024 * 1024)
    thresholds = Thresholds.resolve(properties, max_small_manifests=min_merge)
    snapshot_id, infos = file_infos(table, progress=progress)
    files = [
        FileFacts(
            partition="/".join(f"{k}={v}" for k, v in f.partition.items()),
            content=f.content,
            records=f.record_count,
            size=f.file_size,
        )
        for f in infos
    ]
    current = table.snapshot()
    times = sorted(s.timestamp_ms for s in table.metadata.snapshots)
    manifests = [] if current is None else [m.manifest_length for m in read_manifests(table, current)]
    expirable, expiry_files, expiry_bytes = (0, 0, 0) if current is None else _expiry(table)
    return HealthInputs(
        format="iceberg",
        table=table.name,
        snapshot_id=snapshot_id,
        files=files,
        manifest_sizes=manifests,
        manifest_target_size=manifest_target,
        snapshot_count=len(times),
        oldest_snapshot_ms=times[0] if times else None,
        now_ms=int(time.time() * 1000),
        target_file_size=target_file_size(maintenance),
        thresholds=thresholds,
        retention={
            name: maintenance[name]["value"]
            for name in ("history.expire.max-snapshot-age-ms", "history.expire.min-snapshots-to-keep")
        },
        expirable_snapshots=expirable,
        expiry_files=expiry_files,
        expiry_bytes=expiry_bytes,
        metadata_bytes=sum(manifests),
        delete_arguments={"options": {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}},
        compact_data_options=(
            {"remove-dangling-deletes": "true"} if any(f.content != "data" for f in files) else {}
        ),
        delete_files_compactable=True,
        snapshot_times_ms=times,
    )


def _expiry(table: IcebergTable) -> tuple[int, int, int]:
    """Snapshots, files and bytes the expiry plan (the table's own retention) would remove."""
    from airflow_lakeformat.core.iceberg.maintenance.expiry import plan_snapshot_expiry

    plan = plan_snapshot_expiry(table)
    return len(plan.expired), len(plan.deletions), sum(r.size or 0 for r in plan.deletions)
