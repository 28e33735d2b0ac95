"""What the demo prints: a table's state before and after maintenance, and the gist of each DAG run's log.

    demo_report.py summary TABLE SAVE.json [CONN_ID]    print the table's state and save it
    demo_report.py compare TABLE BEFORE.json [CONN_ID]  print before -> after for the same table
    demo_report.py root TABLE CONN_ID                   the table's root directory (its files' location)
    demo_report.py log LOGFILE                          the Lakeformat lines and the outcome of `airflow dags test`
    demo_report.py assets NAME [CONN_ID]                the Asset events Airflow recorded for the table

TABLE is a Paimon or an Iceberg table root; with CONN_ID (a ``lakeformat`` connection, e.g. one naming an
Iceberg catalog) it is opened through the connection as the operators open it, so ``namespace.table`` of a
catalog works too. The state is the table's statistics (``table.statistics()``, the model ``lakeformat
inspect`` prints: live data files, records, bytes, small files, i.e. data files under 75% of the table's
target file size, and the latest snapshot's manifests) with its snapshots (``table.snapshots()``), plus a
walk of the table directory, which is what expiry and orphan cleanup shrink.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from airflow_lakeformat.core.maintenance.lock import LOCK_DIR

ROWS = (
    ("snapshots", "snapshots"),
    ("snapshot range", "range"),
    ("latest commit kind", "latestKind"),
    ("live data files", "liveFiles"),
    ("live rows", "liveRows"),
    ("live data bytes", "liveBytes"),
    ("small data files (<75%)", "smallFiles"),
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


def lake_state(table: Any) -> dict[str, Any]:
    """The table's statistics (``table.statistics()``: the model ``lakeformat inspect`` prints) and the
    range and kind of its snapshots, the same for both formats."""
    stats = table.statistics()
    snapshots = table.snapshots()
    # Iceberg snapshot ids are random: its range is shown by sequence number, Paimon's by id.
    numbers = [s.extra.get("sequenceNumber", s.id) for s in snapshots]
    prefix = "seq " if snapshots and "sequenceNumber" in snapshots[0].extra else ""
    latest = next((s for s in snapshots if s.id == stats.snapshot_id), None)
    return {
        "snapshots": stats.snapshot_count,
        "range": f"{prefix}{min(numbers)}..{max(numbers)}" if numbers else "-",
        "latestKind": latest.operation.upper() if latest is not None and latest.operation else "-",
        "liveFiles": stats.data_file_count,
        "liveRows": stats.record_count,
        "smallFiles": stats.small_file_count,
        "liveBytes": stats.data_file_bytes,
        "manifests": stats.manifest_count,
    }


def table_state(uri: str, conn_id: str | None = None) -> dict[str, Any]:
    table = open_lake_table(uri, conn_id)
    state = lake_state(table)
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


def print_asset_events(table: str, conn_id: str | None = None) -> None:
    """The events of the table's Asset as the DAGs name it: ``lakeformat://<conn_id>/<db>.<table>`` for a name
    the connection places (``demo.events``), the root URI for a path."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_lakeformat.hooks.assets import DEFAULT_CONN_ID, table_asset_uri

    uri = table_asset_uri(table, conn_id or DEFAULT_CONN_ID)
    with create_session() as session:
        events = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        ).all()
        snapshots = [(e.extra or {}).get("snapshotId") for e in events]
        sources = sorted({f"{e.source_dag_id}.{e.source_task_id}" for e in events})
    print(f"   Asset {uri}: {len(snapshots)} events from {', '.join(sources)}, snapshots {snapshots}")


def main(argv: list[str]) -> int:
    if len(argv) in (3, 4) and argv[0] == "summary":
        print_summary(argv[1], argv[2], *argv[3:])
    elif len(argv) in (3, 4) and argv[0] == "compare":
        print_comparison(argv[1], argv[2], *argv[3:])
    elif len(argv) == 3 and argv[0] == "root":
        print(open_lake_table(argv[1], argv[2]).native.root)
    elif len(argv) == 2 and argv[0] == "log":
        print_log(argv[1])
    elif len(argv) in (2, 3) and argv[0] == "assets":
        print_asset_events(*argv[1:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
