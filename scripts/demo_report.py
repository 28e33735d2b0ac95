"""What the demo prints: a table's state before and after maintenance, and the gist of each DAG run's log.

    demo_report.py summary TABLE SAVE.json [CONN_ID]    print the table's state and save it
    demo_report.py compare TABLE BEFORE.json [CONN_ID]  print before -> after for the same table
    demo_report.py root TABLE CONN_ID                   the table's root directory (its files' location)
    demo_report.py log LOGFILE                          the Lakeformat lines and the outcome of `airflow dags test`
    demo_report.py assets TABLE                         the Asset events Airflow recorded for the table

TABLE is a Paimon or an Iceberg table root; with CONN_ID (a ``lakeformat`` connection, e.g. one naming an
Iceberg catalog) it is opened through the connection as the operators open it, so ``namespace.table`` of a
catalog works too. The state is read with the package's core (snapshots, live files and manifests of the
latest snapshot) plus a walk of the table directory, which is what expiry and orphan cleanup shrink.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR
from airflow_lakeformat.core.paimon.summary import summarize_table

ROWS = (
    ("snapshots", "snapshots"),
    ("snapshot range", "range"),
    ("latest commit kind", "latestKind"),
    ("live data files", "liveFiles"),
    ("live rows", "liveRows"),
    ("manifests (latest)", "manifests"),
    ("data files on disk", "dataFilesOnDisk"),
    ("data bytes on disk", "dataBytesOnDisk"),
    ("all table files on disk", "filesOnDisk"),
)


def open_lake_table(uri: str, conn_id: str | None = None) -> Any:
    """The table through the connection (catalog tables included), or by its root (format detected)."""
    if conn_id:
        import logging

        from airflow_lakeformat.hooks.lakeformat import LakeformatHook

        # Reading a connection outside a task makes Airflow warn about short extras it will not mask.
        logging.getLogger("airflow.sdk._shared.secrets_masker").setLevel(logging.ERROR)

        return LakeformatHook(conn_id).open_lake_table(uri)
    from airflow_lakeformat.core.tables import open_table

    return open_table(uri)


def files_on_disk(root: str) -> tuple[int, int, int]:
    """(data files, their bytes, all table files) under a local table root, lock records excluded."""
    data_files = data_bytes = all_files = 0
    for directory, subdirectories, names in os.walk(root):
        if LOCK_DIR in subdirectories:
            subdirectories.remove(LOCK_DIR)  # maintenance-lock records, not table files
        for name in names:
            all_files += 1
            if name.endswith(".parquet"):
                data_files += 1
                data_bytes += os.path.getsize(os.path.join(directory, name))
    return data_files, data_bytes, all_files


def paimon_state(table: Any) -> dict[str, Any]:
    summary = summarize_table(table.native)
    return {
        "snapshots": summary.snapshot_count,
        "range": f"{summary.earliest_snapshot}..{summary.latest_snapshot}",
        "latestKind": summary.latest_commit_kind,
        "liveFiles": summary.live_file_count,
        "liveRows": summary.live_row_count,
        "manifests": summary.manifest_count,
    }


def iceberg_state(table: Any) -> dict[str, Any]:
    """Snapshots of every ref, and the current snapshot's live data files, rows and data manifests."""
    from airflow_lakeformat.core.iceberg.metadata.files import files_document
    from airflow_lakeformat.core.iceberg.metadata.manifests import manifests_document

    native = table.native.refresh()
    snapshots = sorted(native.metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    current = native.snapshot()
    data = [f for f in files_document(native)["files"] if f["content"] == "data"] if current else []
    manifests = manifests_document(native)["manifests"] if current else []
    kind = current.summary.operation.value.upper() if current is not None and current.summary else None
    first, last = (snapshots[0].sequence_number, snapshots[-1].sequence_number) if snapshots else (None, None)
    return {
        "snapshots": len(snapshots),
        "range": f"seq {first}..{last}",
        "latestKind": kind,
        "liveFiles": len(data),
        "liveRows": sum(f["recordCount"] for f in data),
        "manifests": len([m for m in manifests if m.get("content") in (None, "data")]),
    }


def table_state(uri: str, conn_id: str | None = None) -> dict[str, Any]:
    table = open_lake_table(uri, conn_id)
    state = iceberg_state(table) if table.format == "iceberg" else paimon_state(table)
    data_files, data_bytes, all_files = files_on_disk(table.native.root)
    return {
        **state,
        "format": table.format,
        "dataFilesOnDisk": data_files,
        "dataBytesOnDisk": data_bytes,
        "filesOnDisk": all_files,
    }


def print_summary(uri: str, save: str, conn_id: str | None = None) -> None:
    state = table_state(uri, conn_id)
    Path(save).write_text(json.dumps(state))
    print(f"table {uri} ({state['format']})")
    for label, key in ROWS:
        print(f"  {label:<24} {state[key]}")


def print_comparison(uri: str, before_path: str, conn_id: str | None = None) -> None:
    before = json.loads(Path(before_path).read_text())
    after = table_state(uri, conn_id)
    print(f"table {uri} ({after['format']})")
    print(f"  {'':<24} {'before':>12}   {'after':>12}")
    for label, key in ROWS:
        print(f"  {label:<24} {before[key]!s:>12} -> {after[key]!s:>12}")


# A structlog console line: "<timestamp> [<level>] <message> [<logger>] key=value ..."
_LINE = re.compile(r"^\S+ \[(?P<level>\w+)\s*\] (?P<message>.*?)\s+\[(?P<logger>[\w.]+)\]")


def print_log(path: str) -> None:
    for raw in Path(path).read_text(errors="replace").splitlines():
        match = _LINE.match(raw)
        if not match:
            if raw.strip():  # what the DAGs' tasks print (the demo silences Python warnings)
                print(f"   {raw.strip()}")
            continue
        message, logger = match["message"], match["logger"]
        if message.startswith("Result: "):
            continue
        # Operators and sensors, not the spark-submit output their hooks relay (kept in the log file).
        ours = "airflow_lakeformat" in logger and ".hooks." not in logger
        if ours or match["level"] in ("error", "critical"):
            print(f"   {message}")
        elif message.startswith("DagRun Finished:"):
            state = re.search(r"state=(\w+)", message)
            print(f"   run finished: {state[1] if state else '?'}")


def print_asset_events(uri: str) -> None:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_lakeformat.hooks.lakeformat import table_asset

    asset = table_asset(uri)
    with create_session() as session:
        events = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == asset.uri)
            .order_by(AssetEvent.id)
        ).all()
        snapshots = [(e.extra or {}).get("snapshotId") for e in events]
        sources = sorted({f"{e.source_dag_id}.{e.source_task_id}" for e in events})
    print(f"   Asset {asset.uri}: {len(snapshots)} events from {', '.join(sources)}, snapshots {snapshots}")


def main(argv: list[str]) -> int:
    if len(argv) in (3, 4) and argv[0] == "summary":
        print_summary(argv[1], argv[2], *argv[3:])
    elif len(argv) in (3, 4) and argv[0] == "compare":
        print_comparison(argv[1], argv[2], *argv[3:])
    elif len(argv) == 3 and argv[0] == "root":
        print(open_lake_table(argv[1], argv[2]).native.root)
    elif len(argv) == 2 and argv[0] == "log":
        print_log(argv[1])
    elif len(argv) == 2 and argv[0] == "assets":
        print_asset_events(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
