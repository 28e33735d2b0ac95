"""``table.inspect()`` and ``table.statistics()`` of an Iceberg table: what a maintainer needs at a glance.

Metadata facts (format version, location, schema, specs, sort orders, properties, refs) come from the
metadata model; the maintenance-relevant properties are reported with Java 1.10.2's defaults
(``TableProperties.java``, reference 2.3) and whether the table sets them. The snapshot's manifests are
decoded once (``live_files.decode_manifests``) for the neutral statistics model
(``core/statistics.py``: live data and delete files and bytes, records, partitions, manifests, and small
files: data files under 75% of ``write.target-file-size-bytes``, the ``min-file-size`` default of Java's
bin-pack rewrite, ``SizeBasedFileRewritePlanner``), the manifest breakdown, and the ``split_offsets``
check of reference 4.7 (``split_offsets.py``).
"""

from __future__ import annotations

import json
from typing import Any

from pyiceberg.manifest import ManifestFile
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA, LiveFile
from airflow_lakeformat.core.iceberg.metadata.live_files import ManifestDecoder, decode_manifests
from airflow_lakeformat.core.iceberg.metadata.manifests import manifest_content_name, read_manifests
from airflow_lakeformat.core.iceberg.metadata.snapshots import current_snapshot_id, ref_infos
from airflow_lakeformat.core.iceberg.metadata.split_offsets import split_offsets_check
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress
from airflow_lakeformat.core.statistics import TableStatistics
from airflow_lakeformat.core.table_info import TableInspection, property_row

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
        name: property_row(
            _typed(properties[name], default) if name in properties else default, default, name in properties
        )
        for name, default in MAINTENANCE_PROPERTY_DEFAULTS.items()
    }


def target_file_size(maintenance: dict[str, dict[str, Any]]) -> int:
    """``write.target-file-size-bytes`` (Java's default when unset or not a number)."""
    value = maintenance["write.target-file-size-bytes"]["value"]
    return (
        value
        if isinstance(value, int)
        else int(MAINTENANCE_PROPERTY_DEFAULTS["write.target-file-size-bytes"])
    )


def statistics_of(
    table: IcebergTable, snapshot_id: int | None, files: list[LiveFile], manifests: list[ManifestFile]
) -> TableStatistics:
    """The statistics model from a snapshot's decoded live files and manifest list."""
    maintenance = maintenance_properties(dict(table.metadata.properties))
    return TableStatistics.build(
        format="iceberg",
        table=table.name,
        snapshot_id=snapshot_id,
        snapshot_count=len(table.metadata.snapshots),
        target_file_size=target_file_size(maintenance),
        data_files=(
            (f.file_size, f.record_count, (f.spec_id, f.partition))
            for f in files
            if f.content == CONTENT_DATA
        ),
        delete_files=(f.file_size for f in files if f.content != CONTENT_DATA),
        manifests=(m.manifest_length for m in manifests),
    )


def _decoded(
    table: IcebergTable, snapshot: Snapshot | None, decoder: ManifestDecoder | None, progress: Progress
) -> tuple[list[ManifestFile], list[list[LiveFile]]]:
    """A snapshot's manifest list and each manifest's live files (nothing for no snapshot)."""
    if snapshot is None:
        return [], []
    manifests = read_manifests(table, snapshot)
    referenced_by = f"snapshot {snapshot.snapshot_id}"
    return manifests, decode_manifests(
        table, manifests, referenced_by, decoder, progress
    ) if manifests else []


def table_statistics(
    table: IcebergTable,
    snapshot_id: int | None = None,
    ref: str | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> TableStatistics:
    """The statistics of a snapshot (default: the current one), or of a branch's or tag's head.

    Args:
        table: The table.
        snapshot_id: A snapshot id.
        ref: A branch or tag name instead.
        decoder: Manifest decoder (default: fastavro, projected).
        progress: Progress reporter.

    Returns:
        The :class:`~airflow_lakeformat.core.statistics.TableStatistics`.

    Example:
        >>> table_statistics(open_table("/wh/events")).small_file_count  # doctest: +SKIP
        4
    """
    snapshot = table.snapshot(snapshot_id, ref)
    manifests, per_manifest = _decoded(table, snapshot, decoder, progress)
    files = [f for group in per_manifest for f in group]
    return statistics_of(table, None if snapshot is None else snapshot.snapshot_id, files, manifests)


def _schema(table: IcebergTable) -> dict[str, Any]:
    metadata = table.metadata
    schema = metadata.schema()
    by_id = {f.field_id: f.name for f in schema.fields}
    return {
        "id": schema.schema_id,
        "versions": len(metadata.schemas),
        "fields": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in schema.fields
        ],
        "primaryKeys": [by_id.get(i, str(i)) for i in schema.identifier_field_ids],
    }


def _partitioning(table: IcebergTable) -> list[dict[str, Any]]:
    metadata = table.metadata
    schema = metadata.schema()
    names = {f.field_id: f.name for f in schema.fields}
    return [
        {"name": f.name, "source": names.get(f.source_id, str(f.source_id)), "transform": str(f.transform)}
        for f in metadata.spec().fields
    ]


def _properties(properties: dict[str, str]) -> dict[str, dict[str, Any]]:
    rows = maintenance_properties(properties)
    for name, value in properties.items():
        rows.setdefault(name, property_row(value, None, True))
    return dict(sorted(rows.items()))


def inspect_table(
    table: IcebergTable,
    snapshot_id: int | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> TableInspection:
    """Statistics, definition, properties, refs and Iceberg's own facts of a snapshot (default: current).

    Args:
        table: The table.
        snapshot_id: Inspect this snapshot's files and manifests instead of the current one.
        decoder: Manifest decoder (default: fastavro, projected).
        progress: Progress reporter.

    Returns:
        The :class:`~airflow_lakeformat.core.table_info.TableInspection`; its ``details`` hold
        ``formatVersion``, ``location``, ``metadataLocation``, ``tableUuid``, ``lastUpdatedMs``,
        ``currentSnapshotId``, ``metadataLogLength``, ``specs``, ``sortOrders``, ``manifests`` (data and
        delete manifests, average and small ones) and ``splitOffsets``.

    Example:
        >>> inspection = inspect_table(open_table("/wh/events"))  # doctest: +SKIP
        >>> inspection.details["splitOffsets"]["badFileCount"]  # doctest: +SKIP
        0
    """
    metadata = table.metadata
    properties = dict(metadata.properties)
    target_manifest_size = maintenance_properties(properties)["commit.manifest.target-size-bytes"]["value"]
    snapshot = table.snapshot(snapshot_id)
    manifests, per_manifest = _decoded(table, snapshot, decoder, progress)
    files = [f for group in per_manifest for f in group]
    lengths = [m.manifest_length for m in manifests]
    small_manifest_limit = int(target_manifest_size) if isinstance(target_manifest_size, int) else 0
    details = {
        "formatVersion": table.format_version,
        "location": metadata.location,
        "metadataLocation": table.metadata_location,
        "tableUuid": str(metadata.table_uuid),
        "lastUpdatedMs": metadata.last_updated_ms,
        "currentSnapshotId": current_snapshot_id(table),
        "metadataLogLength": len(metadata.metadata_log),
        "specs": [json.loads(s.model_dump_json(by_alias=True)) for s in metadata.partition_specs],
        "sortOrders": [json.loads(s.model_dump_json(by_alias=True)) for s in metadata.sort_orders],
        "manifests": {
            "dataManifests": sum(1 for m in manifests if manifest_content_name(m.content) == "data"),
            "deleteManifests": sum(1 for m in manifests if manifest_content_name(m.content) == "deletes"),
            "averageBytes": round(sum(lengths) / len(lengths)) if lengths else 0,
            "smallManifests": sum(1 for n in lengths if n < small_manifest_limit),
        },
        "splitOffsets": split_offsets_check(
            [(m.manifest_path, group) for m, group in zip(manifests, per_manifest, strict=True)]
        ),
    }
    return TableInspection(
        format="iceberg",
        table=table.name,
        statistics=statistics_of(table, None if snapshot is None else snapshot.snapshot_id, files, manifests),
        schema=_schema(table),
        partitioning=_partitioning(table),
        properties=_properties(properties),
        refs=ref_infos(table),
        details=details,
    )


def inspect_document(
    table: IcebergTable,
    snapshot_id: int | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """:func:`inspect_table` as the JSON document ``lakeformat inspect --json`` prints."""
    return inspect_table(table, snapshot_id, decoder, progress).to_json()
