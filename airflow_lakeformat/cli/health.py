"""``lakeformat health TABLE [--json] [--orphans]``: what a table needs, from its metadata only, on either format.

The command opens the table through the facade (``cli.tables.open_command_table``: the format is chosen
in ``core/tables.py``) and prints ``table.health()``: with ``--json`` the document of
``core/health/model.py`` (``{table, format, snapshotId, score, penalties, files, deletes, snapshots,
manifests, metadataBytes, expirablePartitions, orphans, thresholds, partitions, recommendations}``); as text the
summary line, one line per recommendation (``operation: reason (metric value >= threshold); expected``) and
the per-partition table. It changes nothing and reads no data file; ``--orphans`` adds the
orphan cleanup's dry run (a listing of the table's location, the format's age rule). Not built yet:
``--html``, ``--policy`` (issue 28 points 2-3).

Example:
    lakeformat health /wh/db.db/events --json
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from airflow_lakeformat.cli.output import emit_json, print_rows
from airflow_lakeformat.cli.tables import open_command_table
from airflow_lakeformat.core import progress

PARTITION_COLUMNS = [
    "partition",
    "dataFiles",
    "dataBytes",
    "smallFiles",
    "averageFileSize",
    "deleteFiles",
    "deleteRecords",
    "sortedRuns",
]


def health(args: argparse.Namespace, out: TextIO) -> None:
    """Print the health report of ``args.table`` (the JSON document with ``--json``)."""
    report = open_command_table(args).health(progress.for_stream(sys.stderr), orphans=args.orphans)
    if args.json:
        emit_json(report.to_json(), out)
        return
    out.write(report.summary() + "\n")
    for r in report.recommendations:
        out.write(
            f"  {r.operation}: {r.reason} ({r.metric} {r.value} >= {r.threshold}); expected: {r.expected}\n"
        )
    if report.partitions:
        print_rows([p.to_json() for p in report.partitions], PARTITION_COLUMNS, out)
