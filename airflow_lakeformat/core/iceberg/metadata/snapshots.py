"""The ``snapshots`` JSON document: every snapshot of the table metadata, its refs and the current id.

Straight from the metadata model (Iceberg spec "Snapshots" and "Snapshot References", reference 1.2);
no manifest is read. Ref retention fields are reported as stored (null when absent: the table
properties ``history.expire.*`` then apply, see ``inspect.MAINTENANCE_PROPERTY_DEFAULTS``).
"""

from __future__ import annotations

from typing import Any

from pyiceberg.table.refs import SnapshotRef
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def snapshot_row(snapshot: Snapshot) -> dict[str, Any]:
    """One snapshot as a JSON object (camelCase keys; ``summary`` is the flat string map of the spec)."""
    summary = snapshot.summary
    operation = None
    summary_map: dict[str, str] = {}
    if summary is not None:
        operation = summary.operation.value
        summary_map = {
            "operation": operation,
            **{k: str(v) for k, v in summary.additional_properties.items()},
        }
    return {
        "id": snapshot.snapshot_id,
        "parentId": snapshot.parent_snapshot_id,
        "sequenceNumber": snapshot.sequence_number,
        "timestampMs": snapshot.timestamp_ms,
        "operation": operation,
        "manifestList": snapshot.manifest_list,
        "summary": summary_map,
        "schemaId": snapshot.schema_id,
    }


def ref_row(ref: SnapshotRef) -> dict[str, Any]:
    """One branch or tag as a JSON object."""
    return {
        "type": ref.snapshot_ref_type.value,
        "snapshotId": ref.snapshot_id,
        "maxRefAgeMs": ref.max_ref_age_ms,
        "maxSnapshotAgeMs": ref.max_snapshot_age_ms,
        "minSnapshotsToKeep": ref.min_snapshots_to_keep,
    }


def current_snapshot_id(table: IcebergTable) -> int | None:
    """The current snapshot id, None for an empty table (v1/v2 metadata may say ``-1``)."""
    current = table.metadata.current_snapshot_id
    return None if current is None or current == -1 else current


def snapshots_document(table: IcebergTable) -> dict[str, Any]:
    """All snapshots (by sequence number, then timestamp, then id), refs by name, and the current id.

    Args:
        table: The table.

    Returns:
        ``{"table", "format": "iceberg", "snapshots": [{id, parentId, sequenceNumber, timestampMs, operation,
        manifestList, summary, schemaId}], "refs": {name: {type, snapshotId, maxRefAgeMs, maxSnapshotAgeMs,
        minSnapshotsToKeep}}, "currentSnapshotId"}``.

    Example:
        >>> doc = snapshots_document(open_table("/wh/events"))  # doctest: +SKIP
        >>> doc["refs"]["main"]["snapshotId"] == doc["currentSnapshotId"]  # doctest: +SKIP
        True
    """
    metadata = table.metadata
    snapshots = sorted(
        metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms, s.snapshot_id)
    )
    return {
        "table": table.name,
        "format": "iceberg",
        "snapshots": [snapshot_row(s) for s in snapshots],
        "refs": {name: ref_row(ref) for name, ref in sorted(metadata.refs.items())},
        "currentSnapshotId": current_snapshot_id(table),
    }
