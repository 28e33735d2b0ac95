"""What the demo prints: a table's state before and after maintenance, and the gist of each DAG run's log.

    demo_report.py summary TABLE SAVE.json      print the table's state and save it
    demo_report.py compare TABLE BEFORE.json    print before -> after for the same table
    demo_report.py log LOGFILE                  the Lakeformat lines and the outcome of `airflow dags test`
    demo_report.py assets TABLE                 the Asset events Airflow recorded for the table

The state is read with the package's core (snapshots, live files and manifests of the latest snapshot)
plus a walk of the table directory, which is what expiry and orphan cleanup shrink.
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
from airflow_lakeformat.core.paimon.table import Table

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


def table_state(uri: str) -> dict[str, Any]:
    summary = summarize_table(Table.open(uri))
    data_files = data_bytes = all_files = 0
    for directory, subdirectories, names in os.walk(uri):
        if LOCK_DIR in subdirectories:
            subdirectories.remove(LOCK_DIR)  # maintenance-lock records, not table files
        for name in names:
            all_files += 1
            if name.startswith("data-"):
                data_files += 1
                data_bytes += os.path.getsize(os.path.join(directory, name))
    return {
        "snapshots": summary.snapshot_count,
        "range": f"{summary.earliest_snapshot}..{summary.latest_snapshot}",
        "latestKind": summary.latest_commit_kind,
        "liveFiles": summary.live_file_count,
        "liveRows": summary.live_row_count,
        "manifests": summary.manifest_count,
        "dataFilesOnDisk": data_files,
        "dataBytesOnDisk": data_bytes,
        "filesOnDisk": all_files,
    }


def print_summary(uri: str, save: str) -> None:
    state = table_state(uri)
    Path(save).write_text(json.dumps(state))
    print(f"table {uri}")
    for label, key in ROWS:
        print(f"  {label:<24} {state[key]}")


def print_comparison(uri: str, before_path: str) -> None:
    before = json.loads(Path(before_path).read_text())
    after = table_state(uri)
    print(f"table {uri}")
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
    if len(argv) == 3 and argv[0] == "summary":
        print_summary(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "compare":
        print_comparison(argv[1], argv[2])
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
