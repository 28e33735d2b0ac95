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
from airflow_lakeformat.core.table_info import RefInfo, SnapshotInfo


def snapshot_info(snapshot: Snapshot) -> SnapshotInfo:
    """One snapshot as the facade's record (``summary`` is the flat string map of the spec, with
    ``operation``; ``totalRecordCount`` is its ``total-records`` when present)."""
    summary = snapshot.summary
    operation = None
    summary_map: dict[str, str] = {}
    if summary is not None:
        operation = summary.operation.value
        summary_map = {
            "operation": operation,
            **{k: str(v) for k, v in summary.additional_properties.items()},
        }
    total = summary_map.get("total-records")
    return SnapshotInfo(
        id=snapshot.snapshot_id,
        parent_id=snapshot.parent_snapshot_id,
        timestamp_ms=snapshot.timestamp_ms,
        operation=operation,
        schema_id=snapshot.schema_id,
        total_record_count=int(total) if total is not None and total.isdigit() else None,
        summary=summary_map,
        extra={"sequenceNumber": snapshot.sequence_number, "manifestList": snapshot.manifest_list},
    )


def snapshot_row(snapshot: Snapshot) -> dict[str, Any]:
    """One snapshot as a JSON object (camelCase keys), the record's ``to_json()``."""
    return snapshot_info(snapshot).to_json()


def ref_info(name: str, ref: SnapshotRef) -> RefInfo:
    """One branch or tag as the facade's record."""
    return RefInfo(
        name=name,
        type=ref.snapshot_ref_type.value,
        snapshot_id=ref.snapshot_id,
        max_ref_age_ms=ref.max_ref_age_ms,
        max_snapshot_age_ms=ref.max_snapshot_age_ms,
        min_snapshots_to_keep=ref.min_snapshots_to_keep,
    )


def ref_row(ref: SnapshotRef) -> dict[str, Any]:
    """One branch or tag as a JSON object."""
    return ref_info("", ref).to_json()


def ref_infos(table: IcebergTable) -> dict[str, RefInfo]:
    """Every branch and tag by name."""
    return {name: ref_info(name, ref) for name, ref in sorted(table.metadata.refs.items())}


def snapshot_infos(table: IcebergTable) -> list[SnapshotInfo]:
    """All snapshots, by sequence number, then timestamp, then id."""
    snapshots = sorted(
        table.metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms, s.snapshot_id)
    )
    return [snapshot_info(s) for s in snapshots]


def current_snapshot_id(table: IcebergTable) -> int | None:
    """The current snapshot id, None for an empty table (v1/v2 metadata may say ``-1``)."""
    current = table.metadata.current_snapshot_id
    return None if current is None or current == -1 else current


def snapshots_document(table: IcebergTable) -> dict[str, Any]:
    """All snapshots (by sequence number, then timestamp, then id), refs by name, and the current id.

    Args:
        table: The table.

    Returns:
        ``{"table", "format": "iceberg", "currentSnapshotId", "snapshots": [{id, parentId, timestampMs,
        operation, schemaId, totalRecordCount, sequenceNumber, manifestList, summary}], "refs": {name:
        {type, snapshotId, maxRefAgeMs, maxSnapshotAgeMs, minSnapshotsToKeep}}}``.

    Example:
        >>> doc = snapshots_document(open_table("/wh/events"))  # doctest: +SKIP
        >>> doc["refs"]["main"]["snapshotId"] == doc["currentSnapshotId"]  # doctest: +SKIP
        True
    """
    return {
        "table": table.name,
        "format": "iceberg",
        "currentSnapshotId": current_snapshot_id(table),
        "snapshots": [s.to_json() for s in snapshot_infos(table)],
        "refs": {name: ref.to_json() for name, ref in ref_infos(table).items()},
    }
