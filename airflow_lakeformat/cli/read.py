"""The read commands: ``snapshots``, ``files``, ``manifests``, ``inspect`` (Paimon here, Iceberg in ``iceberg.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from airflow_lakeformat.cli import iceberg
from airflow_lakeformat.cli.output import emit_json, format_time, print_rows
from airflow_lakeformat.cli.tables import open_iceberg, open_paimon, selected_snapshot
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.maintenance.results import human_bytes
from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.summary import manifest_rows, summarize_snapshots, summarize_table


def snapshots(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.snapshots(table_, args, out)
    table = open_paimon(args)
    rows = [s.to_json() for s in summarize_snapshots(table)]
    if args.json:
        emit_json({"table": table.uri, "snapshots": rows}, out)
        return
    for row in rows:
        row["time"] = format_time(row["timeMillis"])
    print_rows(
        rows,
        ["id", "commitKind", "time", "totalRecordCount", "deltaRecordCount", "baseManifestCount",
         "deltaManifestCount", "schemaId", "commitUser"],
        out,
    )  # fmt: skip


def files(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.files(table_, args, out)
    if args.ref is not None:
        raise UsageError("--ref names an Iceberg branch or tag; on Paimon tables use --tag or --branch")
    table = open_paimon(args)
    snapshot, tag = selected_snapshot(table, args)
    rows = (
        [f.to_json() for f in live_files(table, snapshot, progress.for_stream(sys.stderr))]
        if snapshot
        else []
    )
    rows.sort(key=lambda r: r["path"])
    if args.json:
        emit_json(
            {"table": table.uri, "snapshot": snapshot.id if snapshot else None, "tag": tag, "files": rows},
            out,
        )
        return
    print_rows(
        rows,
        ["path", "bucket", "level", "rowCount", "fileSize", "minSequenceNumber", "maxSequenceNumber"],
        out,
    )


def manifests(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.manifests(table_, args, out)
    table = open_paimon(args)
    snapshot, _ = selected_snapshot(table, args)
    rows = manifest_rows(table, snapshot) if snapshot else []
    if args.json:
        emit_json({"table": table.uri, "snapshot": snapshot.id if snapshot else None, "manifests": rows}, out)
        return
    print_rows(rows, ["fileName", "list", "fileSize", "numAddedFiles", "numDeletedFiles", "schemaId"], out)


def inspect(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.inspect(table_, args, out)
    s = summarize_table(open_paimon(args))
    if args.json:
        emit_json(s.to_json(), out)
        return
    lines = [
        f"table            {s.table}",
        f"schema           id {s.schema_id} ({s.schema_count} schema version(s))",
        *(f"  field          {f}" for f in s.fields),
        f"partition keys   {', '.join(s.partition_keys) or '-'}",
        f"primary keys     {', '.join(s.primary_keys) or '-'}",
        "options",
        *(f"  {k} = {v}" for k, v in s.options.items()),
    ]
    if s.latest_snapshot is None:
        lines.append("snapshots        none (the table has never been committed to)")
    else:
        lines += [
            f"snapshots        {s.snapshot_count} ({s.earliest_snapshot}..{s.latest_snapshot}); latest "
            f"{s.latest_commit_kind} at {format_time(s.latest_time_millis)}",
            f"live files       {s.live_file_count} files, {human_bytes(s.live_file_bytes)}, {s.live_row_count} rows",
            f"manifests        {s.manifest_count} manifests, {human_bytes(s.manifest_bytes)}",
            f"small files      {s.small_file_count} of {s.live_file_count} ({s.small_file_share:.0%}) "
            f"below {human_bytes(s.small_file_threshold)}",
        ]
    lines.append("tags             " + (", ".join(f"{k} -> snapshot {v}" for k, v in s.tags.items()) or "-"))
    lines.append(
        "consumers        " + (", ".join(f"{k} -> next snapshot {v}" for k, v in s.consumers.items()) or "-")
    )
    lines.append("branches         " + (", ".join(s.branches) or "-"))
    out.write("\n".join(lines) + "\n")
