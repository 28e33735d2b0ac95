"""The health collector of an Iceberg table: :class:`~airflow_lakeformat.core.health.model.HealthInputs` from
its metadata only.

What is read (no data or delete file is opened):

- the manifest list of the current snapshot, once: its manifests' sizes (small: under
  ``commit.manifest.target-size-bytes``, 8 MiB; the default of ``max-small-manifests`` is
  ``commit.manifest.min-count-to-merge``, 100) and their live entries (``metadata/live_files.py``'s
  ``decode_manifests``, what ``lakeformat files`` reads): each live data and delete file with its partition
  (rendered ``field=value`` as ``metadata/files.py`` renders it, once per spec and value), content, record
  count (a delete file: the rows it deletes, deletion vectors included) and size;
- the snapshots of the table metadata (their commit times, ascending: the count, the oldest age and the
  report's snapshot chart), and the snapshot expiry plan, a dry run with the table's own
  ``history.expire.max-snapshot-age-ms`` / ``history.expire.min-snapshots-to-keep`` and per-ref retention
  (``core/iceberg/maintenance/expiry.py``): the snapshots, files and bytes an expiry would remove.

Target file size: ``write.target-file-size-bytes`` (512 MiB). The metadata bytes are the manifests' bytes
(the manifest lists' and ``metadata.json`` sizes are not in the metadata; not measured here).
"""

from __future__ import annotations

import time

from pyiceberg.manifest import ManifestFile
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.health.model import FileFacts, HealthInputs
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.iceberg.metadata.files import PartitionRenderer
from airflow_lakeformat.core.iceberg.metadata.inspect import maintenance_properties, target_file_size
from airflow_lakeformat.core.iceberg.metadata.live_files import decode_manifests
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
    current = table.snapshot()
    times = sorted(s.timestamp_ms for s in table.metadata.snapshots)
    manifests = [] if current is None else read_manifests(table, current)
    files = [] if current is None else _live_files(table, current, manifests, progress)
    expirable, expiry_files, expiry_bytes = (0, 0, 0) if current is None else _expiry(table)
    return HealthInputs(
        format="iceberg",
        table=table.name,
        snapshot_id=None if current is None else current.snapshot_id,
        files=files,
        manifest_sizes=[m.manifest_length for m in manifests],
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
        metadata_bytes=sum(m.manifest_length for m in manifests),
        delete_arguments={"options": {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}},
        compact_data_options=(
            {"remove-dangling-deletes": "true"} if any(f.content != "data" for f in files) else {}
        ),
        delete_files_compactable=True,
        snapshot_times_ms=times,
    )


def _live_files(
    table: IcebergTable, snapshot: Snapshot, manifests: list[ManifestFile], progress: Progress
) -> list[FileFacts]:
    """The live files of ``snapshot`` from its manifests (the list read once, for the sizes too), each
    partition rendered once per spec and value (``files.PartitionRenderer``, as ``lakeformat files``)."""
    render = PartitionRenderer(table)
    rendered: dict[tuple[int, tuple[object, ...]], str] = {}
    per_manifest = decode_manifests(table, manifests, f"snapshot {snapshot.snapshot_id}", None, progress)
    files = []
    with gc_paused():  # 100,000 facts that form no cycle: the collector would rescan them over and over
        for f in (f for found in per_manifest for f in found):
            key = (f.spec_id, f.partition)
            partition = rendered.get(key)
            if partition is None:
                values = render(f.spec_id, f.partition)
                partition = rendered[key] = "/".join(f"{k}={v}" for k, v in values.items())
            files.append(FileFacts(partition, f.content_name, f.record_count, f.file_size))
    return files


def _expiry(table: IcebergTable) -> tuple[int, int, int]:
    """Snapshots, files and bytes the expiry plan (the table's own retention) would remove."""
    from airflow_lakeformat.core.iceberg.maintenance.expiry import plan_snapshot_expiry

    plan = plan_snapshot_expiry(table)
    return len(plan.expired), len(plan.deletions), sum(r.size or 0 for r in plan.deletions)
