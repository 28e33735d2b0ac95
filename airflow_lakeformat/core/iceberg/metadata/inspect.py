"""The ``inspect`` JSON document: what a maintainer needs to know about an Iceberg table at a glance.

Metadata facts (format version, location, schemas, specs, sort orders, properties, snapshots, refs) come
from the metadata model; the maintenance-relevant properties are reported with Java 1.10.2's defaults
(``TableProperties.java``, reference 2.3) and whether the table sets them. The current snapshot's
manifests are decoded once (``live_files.decode_manifests``) to count live data/delete files and bytes,
the small-file share (data files under 75% of ``write.target-file-size-bytes``: the ``min-file-size``
default of Java's bin-pack rewrite, ``SizeBasedFileRewritePlanner``), manifest sizes, and the
``split_offsets`` check of reference 4.7 (``split_offsets.py``).
"""

from __future__ import annotations

import json
from typing import Any

from airflow_lakeformat.core.iceberg.metadata.entries import (
    CONTENT_DATA,
    CONTENT_EQUALITY_DELETES,
    CONTENT_POSITION_DELETES,
    LiveFile,
)
from airflow_lakeformat.core.iceberg.metadata.live_files import ManifestDecoder, decode_manifests
from airflow_lakeformat.core.iceberg.metadata.manifests import manifest_content_name, read_manifests
from airflow_lakeformat.core.iceberg.metadata.snapshots import current_snapshot_id, ref_row
from airflow_lakeformat.core.iceberg.metadata.split_offsets import split_offsets_check
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

LONG_MAX = 9_223_372_036_854_775_807
#: Java Iceberg 1.10.2 defaults of the properties maintenance reads (TableProperties.java).
MAINTENANCE_PROPERTY_DEFAULTS: dict[str, Any] = {
    "gc.enabled": True,
    "history.expire.max-snapshot-age-ms": 432_000_000,
    "history.expire.min-snapshots-to-keep": 1,
    "history.expire.max-ref-age-ms": LONG_MAX,
    "write.metadata.previous-versions-max": 100,
    "write.metadata.delete-after-commit.enabled": False,
    "commit.manifest.target-size-bytes": 8 * 1024 * 1024,
    "commit.manifest.min-count-to-merge": 100,
    "commit.manifest-merge.enabled": True,
    "write.target-file-size-bytes": 512 * 1024 * 1024,
    "commit.retry.num-retries": 4,
    "commit.retry.min-wait-ms": 100,
    "commit.retry.max-wait-ms": 60_000,
    "commit.retry.total-timeout-ms": 1_800_000,
}
SMALL_FILE_RATIO = 0.75


def _typed(raw: str, default: Any) -> Any:
    if isinstance(default, bool):
        return raw.strip().lower() == "true"
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            return raw
    return raw


def maintenance_properties(properties: dict[str, str]) -> dict[str, dict[str, Any]]:
    """``{name: {"value", "default", "set"}}`` for every maintenance-relevant property.

    ``value`` is the table's setting (typed like the default; left a string if it does not parse), else
    the Java default. pyiceberg 0.12 differs from Java on ``commit.manifest-merge.enabled`` (false).
    """
    return {
        name: {
            "value": _typed(properties[name], default) if name in properties else default,
            "default": default,
            "set": name in properties,
        }
        for name, default in MAINTENANCE_PROPERTY_DEFAULTS.items()
    }


def _file_counts(files: list[LiveFile], small_threshold: int) -> dict[str, Any]:
    data = [f for f in files if f.content == CONTENT_DATA]
    position = [f for f in files if f.content == CONTENT_POSITION_DELETES]
    equality = [f for f in files if f.content == CONTENT_EQUALITY_DELETES]
    small = [f for f in data if f.file_size < small_threshold]
    return {
        "dataFiles": len(data),
        "dataBytes": sum(f.file_size for f in data),
        "dataRecords": sum(f.record_count for f in data),
        "positionDeleteFiles": len(position),
        "equalityDeleteFiles": len(equality),
        "deleteFiles": len(position) + len(equality),
        "deleteBytes": sum(f.file_size for f in position + equality),
        "smallFileThresholdBytes": small_threshold,
        "smallDataFiles": len(small),
        "smallFileShare": round(len(small) / len(data), 4) if data else 0.0,
    }


def inspect_document(
    table: IcebergTable,
    snapshot_id: int | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """Table facts, live-file statistics and the split-offset check of a snapshot (default: current).

    Args:
        table: The table.
        snapshot_id: Inspect this snapshot's files and manifests instead of the current one.
        decoder: Manifest decoder (default: fastavro, projected).
        progress: Progress reporter.

    Returns:
        A document with ``formatVersion``, ``location``, ``metadataLocation``, ``tableUuid``, ``schemas``,
        ``currentSchemaId``, ``specs``, ``defaultSpecId``, ``sortOrders``, ``defaultSortOrderId``,
        ``properties``, ``maintenanceProperties``, ``snapshotCount``, ``currentSnapshotId``, ``refs``,
        ``snapshot``, ``liveFiles``, ``manifests`` and ``splitOffsets``.

    Example:
        >>> doc = inspect_document(open_table("/wh/events"))  # doctest: +SKIP
        >>> doc["splitOffsets"]["badFileCount"]  # doctest: +SKIP
        0
    """
    metadata = table.metadata
    properties = dict(metadata.properties)
    maintenance = maintenance_properties(properties)
    target_file_size = maintenance["write.target-file-size-bytes"]["value"]
    target_manifest_size = maintenance["commit.manifest.target-size-bytes"]["value"]
    small_threshold = (
        int(int(target_file_size) * SMALL_FILE_RATIO) if isinstance(target_file_size, int) else 0
    )

    snapshot = table.snapshot(snapshot_id)
    manifests = [] if snapshot is None else read_manifests(table, snapshot)
    referenced_by = f"snapshot {snapshot.snapshot_id}" if snapshot is not None else ""
    per_manifest = decode_manifests(table, manifests, referenced_by, decoder, progress) if manifests else []
    files = [f for group in per_manifest for f in group]
    lengths = [m.manifest_length for m in manifests]
    small_manifest_limit = int(target_manifest_size) if isinstance(target_manifest_size, int) else 0
    return {
        "table": table.name,
        "format": "iceberg",
        "formatVersion": table.format_version,
        "location": metadata.location,
        "metadataLocation": table.metadata_location,
        "tableUuid": str(metadata.table_uuid),
        "lastUpdatedMs": metadata.last_updated_ms,
        "currentSchemaId": metadata.current_schema_id,
        "schemas": [json.loads(s.model_dump_json(by_alias=True)) for s in metadata.schemas],
        "defaultSpecId": metadata.default_spec_id,
        "specs": [json.loads(s.model_dump_json(by_alias=True)) for s in metadata.partition_specs],
        "defaultSortOrderId": metadata.default_sort_order_id,
        "sortOrders": [json.loads(s.model_dump_json(by_alias=True)) for s in metadata.sort_orders],
        "properties": properties,
        "maintenanceProperties": maintenance,
        "snapshotCount": len(metadata.snapshots),
        "currentSnapshotId": current_snapshot_id(table),
        "refs": {name: ref_row(ref) for name, ref in sorted(metadata.refs.items())},
        "metadataLogLength": len(metadata.metadata_log),
        "snapshot": None if snapshot is None else snapshot.snapshot_id,
        "liveFiles": _file_counts(files, small_threshold),
        "manifests": {
            "count": len(manifests),
            "dataManifests": sum(1 for m in manifests if manifest_content_name(m.content) == "data"),
            "deleteManifests": sum(1 for m in manifests if manifest_content_name(m.content) == "deletes"),
            "totalBytes": sum(lengths),
            "averageBytes": round(sum(lengths) / len(lengths)) if lengths else 0,
            "smallManifests": sum(1 for n in lengths if n < small_manifest_limit),
        },
        "splitOffsets": split_offsets_check(
            [(m.manifest_path, group) for m, group in zip(manifests, per_manifest, strict=True)]
        ),
    }
