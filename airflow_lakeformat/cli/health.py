"""``lakeformat health TABLE [--json] [--html FILE] [--orphans] [--policy FILE]``: what a table needs, from its
metadata only, on either format.

The command reads the policy first when given (``--policy``: ``core/health/policy.HealthPolicy.load``, a YAML
or JSON file; a bad one is refused before the table is opened, a ``PolicyError``: exit code 2 as every usage
mistake, naming the key path), opens the table through the facade (``cli.tables.open_command_table``: the
format is chosen in ``core/tables.py``) and computes ``table.health(policy=...)``. It prints, with ``--json``,
the document of ``core/health/model.py`` (``{table, format, snapshotId, score, penalties, files, deletes,
fileSizes, snapshots, manifests, metadataBytes, expirablePartitions, orphans, thresholds, partitions,
recommendations, policy}``); as text the summary line, one line per recommendation (``operation: reason
(metric value >= threshold); expected``), one per recommendation the policy suppressed, and the
per-partition table. ``--html FILE`` also writes the report with its charts as one self-contained file
(``core/health/report_html.write_report``) and, as text, says where. It changes nothing and reads no data
file; ``--orphans`` adds the orphan cleanup's dry run (a listing of the table's location, the format's age
rule).

Example:
    lakeformat health /wh/db.db/events --policy health-policy.yaml --html events.html --json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
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
    """Print the health report of ``args.table`` (the JSON document with ``--json``); ``--policy`` applies a
    policy file, ``--html`` also writes the HTML report."""
    from airflow_lakeformat.core.health.policy import HealthPolicy

    policy = HealthPolicy.load(Path(args.policy)) if args.policy else None
    report = open_command_table(args).health(
        progress.for_stream(sys.stderr), orphans=args.orphans, policy=policy
    )
    document = report.to_json()
    written = None
    if args.html:
        from airflow_lakeformat.core.health.report_html import write_report

        written = write_report(document, args.html)
    if args.json:
        emit_json(document, out)
        return
    out.write(report.summary() + "\n")
    for r in report.recommendations:
        out.write(
            f"  {r.operation}: {r.reason} ({r.metric} {r.value} >= {r.threshold}); expected: {r.expected}\n"
        )
    for s in (document.get("policy") or {}).get("suppressed", []):
        out.write(f"  suppressed {s['operation']} ({s['rule']}): {s['reason']}\n")
    if written is not None:
        out.write(f"  HTML report: {written}\n")
    if report.partitions:
        print_rows([p.to_json() for p in report.partitions], PARTITION_COLUMNS, out)
