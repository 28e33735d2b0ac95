"""The write commands: ``write --from FILE`` and ``commit --add PATH...`` (Iceberg in ``iceberg.py``)."""

from __future__ import annotations

import argparse
from typing import TextIO

from airflow_lakeformat.cli import iceberg
from airflow_lakeformat.cli.output import emit_json
from airflow_lakeformat.cli.tables import open_iceberg, open_paimon
from airflow_lakeformat.core.io import parse_storage_options
from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.core.paimon.write.register import register_files
from airflow_lakeformat.core.paimon.write.rows import write_schema
from airflow_lakeformat.core.paimon.written_files import commit_written_files
from airflow_lakeformat.core.sources import read_source


def commit(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.commit(table_, args, out)
    table = open_paimon(args)
    _commit_files(args, table, register_files(table, args.add), out)


def write(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.write(table_, args, out)
    table = open_paimon(args)
    data = read_source(args.source, write_schema(table.schema), parse_storage_options(args.storage_option))
    overwrite = parse_overwrite_spec(args.overwrite) if args.overwrite is not None else None
    added = write_data_files(table, data)
    done = commit_written_files(
        Committer(table, args.commit_user),
        added,
        overwrite=args.overwrite is not None,
        partition_filter=overwrite,
        commit_identifier=_identifier(args),
    )
    _print_commit(args, table, done.result, added, done.deletes, out, done.discarded)


def _commit_files(args: argparse.Namespace, table: Table, added: list[ManifestEntry], out: TextIO) -> None:
    """Commit files the user placed (``commit --add``): never ours to discard, whatever the outcome."""
    committer = Committer(table, args.commit_user)
    deletes = (
        committer.overwrite_entries(parse_overwrite_spec(args.overwrite), added)
        if args.overwrite is not None
        else []
    )
    kind = CommitKind.OVERWRITE if args.overwrite is not None else CommitKind.APPEND
    result = committer.commit(
        [*deletes, *added], kind=kind, commit_identifier=_identifier(args), check_conflicts=True
    )
    _print_commit(args, table, result, added, deletes, out)


def _identifier(args: argparse.Namespace) -> int:
    return args.commit_identifier if args.commit_identifier is not None else BATCH_COMMIT_IDENTIFIER


def _print_commit(
    args: argparse.Namespace,
    table: Table,
    result: CommitResult,
    added: list[ManifestEntry],
    deletes: list[ManifestEntry],
    out: TextIO,
    discarded: int = 0,
) -> None:
    document = {
        "operation": "write" if args.command == "write" else "commit",
        "format": "paimon",
        "table": table.uri,
        **result.to_json(),
        "filesAdded": 0 if result.already_committed else len(added),
        "filesDeleted": 0 if result.already_committed else len(deletes),
        "rowsAdded": 0 if result.already_committed else sum(e.file.row_count for e in added),
        "filesDiscarded": discarded,
    }
    if args.json:
        emit_json(document, out)
        return
    state = "already committed as" if result.already_committed else "committed"
    line = (
        f"{state} snapshot {result.snapshot.id} ({result.snapshot.commit_kind.value}): "
        f"+{document['filesAdded']} files, -{document['filesDeleted']} files"
    )
    if discarded:
        line += f" ({discarded} files this run wrote were discarded)"
    out.write(line + "\n")
