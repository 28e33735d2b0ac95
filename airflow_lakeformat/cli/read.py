"""The read commands: ``snapshots``, ``files``, ``manifests``, ``inspect``, on either format through the facade.

Each command opens the table as a facade table (``cli.tables.open_command_table``, i.e. ``open_table``
of ``core/tables.py``: the format is chosen there) and
prints the records its read methods return, so both formats print ONE document per command:

- ``snapshots``: ``{table, format, currentSnapshotId, snapshots: [{id, parentId, timestampMs, operation,
  schemaId, totalRecordCount, ..., summary}], refs: {name: {type, snapshotId, ...}}}``
- ``files``: ``{table, format, snapshot, ref, files: [{path, content, partition, recordCount, fileSize,
  ...}]}`` (``path`` a full URI)
- ``manifests``: ``{table, format, snapshot, manifests: [{path, content, fileSize, addedFilesCount,
  deletedFilesCount, ...}]}``
- ``inspect``: ``{table, format, statistics: {...}, schema, partitioning, properties, refs, details}``,
  the statistics model of ``core/statistics.py`` under ``statistics``.

What one format alone has follows the shared keys (Paimon's bucket and level, Iceberg's spec id and
sequence numbers). Text output prints times as ISO-8601 UTC, values as text (``true``, ``-`` for none),
never a Python repr.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from airflow_lakeformat.cli.output import emit_json, print_rows
from airflow_lakeformat.cli.tables import open_command_table
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.maintenance.results import human_bytes
from airflow_lakeformat.core.table_info import TableInspection

#: Text columns after the shared ones, per format (the JSON documents carry every field).
_FILE_COLUMNS = {"paimon": ["bucket", "level"], "iceberg": ["specId", "dataSequenceNumber"]}
_MANIFEST_COLUMNS = {"paimon": ["list", "schemaId"], "iceberg": ["specId", "addedSnapshotId"]}


def iso_time(millis: int | None) -> str:
    """Epoch milliseconds as ISO-8601 UTC, ``2024-01-31T09:15:02.123Z`` (``-`` for none)."""
    if millis is None:
        return "-"
    moment = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text(value: Any) -> str:
    """A value as a reader expects it: ``true``/``false``, ``-`` for none, JSON for a list or mapping."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": ")) if value else "-"
    return str(value)


def snapshots(args: argparse.Namespace, out: TextIO) -> None:
    table = open_command_table(args)
    rows = [s.to_json() for s in table.snapshots()]
    refs = table.refs()
    main = refs.get(getattr(args, "branch", "main") or "main") or refs.get("main")
    if args.json:
        emit_json(
            {
                "table": table.uri,
                "format": table.format,
                "currentSnapshotId": main.snapshot_id if main else None,
                "snapshots": rows,
                "refs": {name: ref.to_json() for name, ref in refs.items()},
            },
            out,
        )
        return
    for row in rows:
        row["time"] = iso_time(row["timestampMs"])
    print_rows(rows, ["id", "parentId", "time", "operation", "totalRecordCount", "schemaId"], out)
    for name, ref in refs.items():
        out.write(f"{ref.type} {name} -> snapshot {text(ref.snapshot_id)}\n")


def files(args: argparse.Namespace, out: TextIO) -> None:
    table = open_command_table(args)
    ref = args.ref or args.tag  # either names a tag; --ref also a branch (Paimon: the one opened)
    snapshot_id = table.resolve_snapshot(args.snapshot, ref)
    found = table.files(args.snapshot, ref, progress.for_stream(sys.stderr))
    rows = [f.to_json() for f in found]
    if args.json:
        document = {"table": table.uri, "format": table.format, "snapshot": snapshot_id, "ref": ref}
        emit_json({**document, "files": rows}, out)
        return
    columns = ["path", "content", "recordCount", "fileSize", "partition", *_FILE_COLUMNS[table.format]]
    print_rows(rows, columns, out)


def manifests(args: argparse.Namespace, out: TextIO) -> None:
    table = open_command_table(args)
    snapshot_id = table.resolve_snapshot(args.snapshot)
    rows = [m.to_json() for m in table.manifests(args.snapshot)]
    if args.json:
        document = {"table": table.uri, "format": table.format, "snapshot": snapshot_id}
        emit_json({**document, "manifests": rows}, out)
        return
    columns = ["path", "content", "fileSize", "addedFilesCount", "deletedFilesCount"]
    print_rows(rows, columns + _MANIFEST_COLUMNS[table.format], out)


def inspect(args: argparse.Namespace, out: TextIO) -> None:
    inspection = open_command_table(args).inspect(progress.for_stream(sys.stderr))
    if args.json:
        emit_json(inspection.to_json(), out)
        return
    out.write("\n".join(inspect_lines(inspection)) + "\n")


def inspect_lines(inspection: TableInspection) -> list[str]:
    """The text form of ``inspect``: definition, statistics, refs, properties, then the format's details."""
    s, schema, details = inspection.statistics, inspection.schema, inspection.details
    versions = schema["versions"]
    lines = [
        f"table            {inspection.table} ({inspection.format})",
        f"schema           id {schema['id']} ({versions} version{'' if versions == 1 else 's'})",
        *(f"  field          {f['name']} {f['type']}" for f in schema["fields"]),
        "partition keys   " + (", ".join(map(_partition_field, inspection.partitioning)) or "-"),
        f"primary keys     {', '.join(schema['primaryKeys']) or '-'}",
    ]
    if s.snapshot_id is None:
        lines.append("snapshots        none (the table has never been committed to)")
    else:
        earliest, latest = details.get("earliestSnapshotId"), details.get("latestSnapshotId")
        span = f" ({earliest}..{latest})" if earliest is not None else ""
        lines += [
            f"snapshots        {s.snapshot_count}{span}; files of snapshot {s.snapshot_id}:",
            f"live files       {s.data_file_count} files, {human_bytes(s.data_file_bytes)}, "
            f"{s.record_count} records, {s.partition_count} partition(s)",
            f"small files      {s.small_file_count} of {s.data_file_count} ({s.small_file_share:.0%}) under "
            f"{human_bytes(s.small_file_threshold)} (75% of the target file size, "
            f"{human_bytes(s.target_file_size)})",
            f"delete files     {s.delete_file_count} files, {human_bytes(s.delete_file_bytes)}",
            f"manifests        {s.manifest_count} manifests, {human_bytes(s.manifest_bytes)}",
        ]
    refs = [
        f"{name} -> snapshot {text(ref.snapshot_id)} ({ref.type})" for name, ref in inspection.refs.items()
    ]
    lines.append("refs             " + (", ".join(refs) or "-"))
    lines.append("properties")
    for name, row in inspection.properties.items():
        note = "set" if row["set"] else "default"
        if row["set"] and row["default"] is not None:
            note += f"; default {text(row['default'])}"
        lines.append(f"  {name} = {text(row['value'])} ({note})")
    lines.append("details")
    lines += [f"  {key} = {_detail(key, value)}" for key, value in details.items()]
    return lines


def _partition_field(field: dict[str, Any]) -> str:
    if field["transform"] == "identity" and field["name"] == field["source"]:
        return str(field["name"])
    return f"{field['name']} = {field['transform']}({field['source']})"


def _detail(key: str, value: Any) -> str:
    if key == "consumers" and isinstance(value, dict):
        return ", ".join(f"{k} -> next snapshot {v}" for k, v in value.items()) or "-"
    if key.endswith(("TimestampMs", "UpdatedMs")) and isinstance(value, int):
        return iso_time(value)
    return text(value)
