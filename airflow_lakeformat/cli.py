"""``lakeformat``: inspect and maintain Apache Paimon tables from a shell.

The contract is stable: scripts depend on it. ``--json`` prints exactly one JSON document on
stdout. Errors print one line on stderr and exit non-zero:

====  =========================================================
code  meaning
====  =========================================================
1     any other failure (storage, credentials, bad arguments)
2     command-line usage error
3     the path is not a Paimon table
4     corrupt or missing metadata (the message names the file)
5     a format version or feature this release refuses
6     the requested snapshot or tag does not exist
7     a commit was refused (conflict, retries exhausted): nothing was published
8     a commit's outcome is unknown: re-run with the same --commit-user and --commit-identifier
9     maintenance refused (unsafe settings, unsupported feature, outdated plan): nothing was deleted
10    some files could not be deleted after retries: later phases were not run; re-run to finish
11    the input does not fit the table (a value, a column, a type, a file): nothing was written
====  =========================================================
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

from airflow_lakeformat import __version__, cli_create, cli_iceberg
from airflow_lakeformat.core import progress

# The exit codes are part of this module's contract (scripts and tests use cli.EXIT_*): re-exported.
from airflow_lakeformat.core.errors import EXIT_COMMIT_REFUSED as EXIT_COMMIT_REFUSED
from airflow_lakeformat.core.errors import EXIT_COMMIT_UNKNOWN as EXIT_COMMIT_UNKNOWN
from airflow_lakeformat.core.errors import EXIT_CORRUPT as EXIT_CORRUPT
from airflow_lakeformat.core.errors import EXIT_DELETE_FAILED as EXIT_DELETE_FAILED
from airflow_lakeformat.core.errors import EXIT_ERROR as EXIT_ERROR
from airflow_lakeformat.core.errors import EXIT_INPUT_REFUSED as EXIT_INPUT_REFUSED
from airflow_lakeformat.core.errors import EXIT_MAINTENANCE_REFUSED as EXIT_MAINTENANCE_REFUSED
from airflow_lakeformat.core.errors import EXIT_NO_TABLE as EXIT_NO_TABLE
from airflow_lakeformat.core.errors import EXIT_NOT_FOUND as EXIT_NOT_FOUND
from airflow_lakeformat.core.errors import EXIT_UNSUPPORTED as EXIT_UNSUPPORTED
from airflow_lakeformat.core.errors import EXIT_USAGE as EXIT_USAGE
from airflow_lakeformat.core.errors import (
    LakeformatError,
    exit_code_for,
)
from airflow_lakeformat.core.io import parse_storage_options
from airflow_lakeformat.core.maintenance.results import human_bytes
from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import Mode, compact_manifests
from airflow_lakeformat.core.paimon.maintenance.orphans import DEFAULT_OLDER_THAN, remove_orphan_files
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.summary import manifest_rows, summarize_snapshots, summarize_table
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.core.paimon.write.register import register_files
from airflow_lakeformat.core.paimon.write.rows import write_schema
from airflow_lakeformat.core.paimon.written_files import commit_written_files
from airflow_lakeformat.core.sources import read_source
from airflow_lakeformat.core.units import parse_duration

load_fields = cli_create.load_fields  # create-table's schema reader lives with the command (cli_create.py)


def _open(args: argparse.Namespace) -> Table:
    return Table.open(args.table, parse_storage_options(args.storage_option), branch=args.branch)


def _selected_snapshot(table: Table, args: argparse.Namespace) -> tuple[Snapshot | None, str | None]:
    manager = table.snapshot_manager
    if getattr(args, "tag", None):
        return manager.tag(args.tag), args.tag
    if getattr(args, "snapshot", None) is not None:
        return manager.snapshot(args.snapshot), None
    return manager.latest_snapshot(), None


def _emit_json(document: Any, out: TextIO) -> None:
    json.dump(document, out, indent=2, ensure_ascii=False)
    out.write("\n")


def _print_rows(rows: list[dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for row_cells in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row_cells, widths, strict=True)).rstrip() + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items()) or "-"
    return str(value)


def _time(millis: int | None) -> str:
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def cmd_snapshots(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.snapshots(iceberg, args, out)
    table = _open(args)
    rows = [s.to_json() for s in summarize_snapshots(table)]
    if args.json:
        _emit_json({"table": table.uri, "snapshots": rows}, out)
        return
    for row in rows:
        row["time"] = _time(row["timeMillis"])
    _print_rows(
        rows,
        ["id", "commitKind", "time", "totalRecordCount", "deltaRecordCount", "baseManifestCount",
         "deltaManifestCount", "schemaId", "commitUser"],
        out,
    )  # fmt: skip


def cmd_files(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.files(iceberg, args, out)
    if args.ref is not None:
        raise ValueError("--ref names an Iceberg branch or tag; on Paimon tables use --tag or --branch")
    table = _open(args)
    snapshot, tag = _selected_snapshot(table, args)
    rows = (
        [f.to_json() for f in live_files(table, snapshot, progress.for_stream(sys.stderr))]
        if snapshot
        else []
    )
    rows.sort(key=lambda r: r["path"])
    if args.json:
        _emit_json(
            {"table": table.uri, "snapshot": snapshot.id if snapshot else None, "tag": tag, "files": rows},
            out,
        )
        return
    _print_rows(
        rows,
        ["path", "bucket", "level", "rowCount", "fileSize", "minSequenceNumber", "maxSequenceNumber"],
        out,
    )


def cmd_manifests(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.manifests(iceberg, args, out)
    table = _open(args)
    snapshot, _ = _selected_snapshot(table, args)
    rows = manifest_rows(table, snapshot) if snapshot else []
    if args.json:
        _emit_json(
            {"table": table.uri, "snapshot": snapshot.id if snapshot else None, "manifests": rows}, out
        )
        return
    _print_rows(rows, ["fileName", "list", "fileSize", "numAddedFiles", "numDeletedFiles", "schemaId"], out)


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.inspect(iceberg, args, out)
    table = _open(args)
    s = summarize_table(table)
    if args.json:
        _emit_json(s.to_json(), out)
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
            f"{s.latest_commit_kind} at {_time(s.latest_time_millis)}",
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


def cmd_compact_manifests(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.compact_manifests(iceberg, args, out)
    table = _open(args)
    mode: Mode = "minor" if args.minor else "full"
    result = compact_manifests(table, mode, dry_run=args.dry_run)
    if args.json:
        _emit_json({"table": table.uri, **result.to_json()}, out)
        return
    out.write(result.summary() + "\n")


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def cmd_expire(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.expire(iceberg, args, out)
    cli_iceberg.refuse_iceberg_only_expire_flags(args)
    table = _open(args)
    result = expire_snapshots(
        table,
        dry_run=args.dry_run,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        older_than=args.older_than,
        max_deletes=args.max_deletes,
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        _emit_json(document, out)
        return
    out.write(result.summary() + "\n")
    for line in document["decisions"] + document["warnings"]:
        out.write(f"  {line}\n")


def cmd_remove_orphans(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.remove_orphans(iceberg, args, out)
    cli_iceberg.refuse_iceberg_only_orphan_flags(args)
    table = _open(args)
    result = remove_orphan_files(
        table,
        dry_run=args.dry_run,
        older_than=DEFAULT_OLDER_THAN if args.older_than is None else args.older_than,
        allow_short_older_than=args.allow_short_older_than,
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        _emit_json(document, out)
        return
    out.write(result.summary() + "\n")


def cmd_create_table(args: argparse.Namespace, out: TextIO) -> None:
    """A Paimon table, or an Iceberg one with --format iceberg or a catalog (``cli_create.py``)."""
    cli_create.create_table(args, out)


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
        _emit_json(document, out)
        return
    state = "already committed as" if result.already_committed else "committed"
    line = (
        f"{state} snapshot {result.snapshot.id} ({result.snapshot.commit_kind.value}): "
        f"+{document['filesAdded']} files, -{document['filesDeleted']} files"
    )
    if discarded:
        line += f" ({discarded} files this run wrote were discarded)"
    out.write(line + "\n")


def cmd_commit(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.commit(iceberg, args, out)
    table = _open(args)
    _commit_files(args, table, register_files(table, args.add), out)


def cmd_write(args: argparse.Namespace, out: TextIO) -> None:
    if (iceberg := cli_iceberg.open_iceberg(args)) is not None:
        return cli_iceberg.write(iceberg, args, out)
    table = _open(args)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakeformat", description="Inspect and maintain Apache Paimon tables."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="print a traceback on errors")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "table",
        help="table root (a local path, file://, s3://, any fsspec URL), an Iceberg *.metadata.json, "
        "or namespace.table with --catalog/--catalog-property",
    )
    common.add_argument(
        "--format",
        choices=("paimon", "iceberg"),
        help="the table format (default: detected: Paimon has snapshot/ and schema/, Iceberg metadata/*.metadata.json)",
    )
    common.add_argument("--catalog", metavar="NAME", help="an Iceberg catalog from pyiceberg's configuration")
    common.add_argument(
        "--catalog-property",
        action="append",
        metavar="KEY=VALUE",
        help="an Iceberg catalog property as pyiceberg's load_catalog takes it (repeatable), e.g. "
        "type=sql uri=sqlite:////path/catalog.db warehouse=file:///path",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="fsspec storage option (repeatable); S3 also reads AWS_* variables and AWS_ENDPOINT_URL",
    )
    common.add_argument("--branch", default="main", help="branch to read (default: main)")
    common.add_argument("--json", action="store_true", help="print one JSON document")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, fn: Callable[[argparse.Namespace, TextIO], None], help_text: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(func=fn)
        return p

    add("snapshots", cmd_snapshots, "list snapshots with record and manifest counts")
    files = add("files", cmd_files, "list the live data files of a snapshot or tag (default: latest)")
    which = files.add_mutually_exclusive_group()
    which.add_argument("--snapshot", type=int, metavar="ID")
    which.add_argument("--tag", metavar="NAME")
    which.add_argument("--ref", metavar="NAME", help="an Iceberg branch or tag")
    manifests = add("manifests", cmd_manifests, "list the data manifests of a snapshot (default: latest)")
    manifests.add_argument("--snapshot", type=int, metavar="ID")
    add("inspect", cmd_inspect, "summarize schema, options, snapshots, tags, consumers, files and manifests")
    compact = add(
        "compact-manifests",
        cmd_compact_manifests,
        "merge manifests: --full is Paimon's compact_manifest (default), --minor the ordinary policy",
    )
    kind = compact.add_mutually_exclusive_group()
    kind.add_argument("--full", action="store_true", help="forced full merge (default)")
    kind.add_argument("--minor", action="store_true", help="the table's ordinary merge policy")
    compact.add_argument("--dry-run", action="store_true", help="report what would be merged, write nothing")

    expire = add("expire", cmd_expire, "expire old snapshots and delete the files only they used")
    expire.add_argument("--retain-min", type=int, metavar="N", help="default: snapshot.num-retained.min (10)")
    expire.add_argument("--retain-max", type=int, metavar="N", help="default: snapshot.num-retained.max")
    expire.add_argument(
        "--older-than",
        type=cli_iceberg.older_than_argument,
        metavar="DURATION",
        help="Paimon: expire a snapshot only if its successor is older than this (default: snapshot.time-retained, "
        "1 h); Iceberg: expire snapshots older than this duration or ISO-8601 timestamp (default: "
        "history.expire.max-snapshot-age-ms, 5 d)",
    )
    expire.add_argument(
        "--max-deletes", type=int, metavar="N", help="snapshots per run (default: snapshot.expire.limit, 50)"
    )
    expire.add_argument("--dry-run", action="store_true", help="report what would be deleted, delete nothing")
    cli_iceberg.add_expire_arguments(expire)
    orphans = add("remove-orphans", cmd_remove_orphans, "delete old files no snapshot, tag or changelog uses")
    orphans.add_argument(
        "--older-than",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="only files older than this are candidates (default: Paimon 1 d, Iceberg 3 d; under 1 h "
        "(Paimon) or 24 h (Iceberg) needs --allow-short-older-than)",
    )
    orphans.add_argument(
        "--allow-short-older-than",
        action="store_true",
        help="accept --older-than under the floor (only when no writer is running)",
    )
    orphans.add_argument(
        "--dry-run", action="store_true", help="report what would be deleted, delete nothing"
    )
    cli_iceberg.add_orphan_arguments(orphans)

    def add_commit_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--overwrite", metavar="PARTITION_SPEC", help="replace the partitions k=v[,k=v] ('*' = all)"
        )
        p.add_argument("--commit-user", help="commit user (default: a new lakeformat-<uuid>)")
        p.add_argument(
            "--commit-identifier", type=int, help="with the same --commit-user, a re-run never commits twice"
        )

    commit = add("commit", cmd_commit, "commit Parquet files already written under the table's layout")
    commit.add_argument(
        "--add", nargs="+", required=True, metavar="PATH", help="data files (relative to the table)"
    )
    add_commit_options(commit)
    write = add(
        "write", cmd_write, "write rows from a Parquet, CSV or JSON-lines file into the table and commit"
    )
    write.add_argument("--from", dest="source", required=True, metavar="FILE")
    add_commit_options(write)
    create = add(
        "create-table",
        cmd_create_table,
        "create a Paimon table (schema/schema-0), or an Iceberg table (format v2) with --format iceberg or a "
        "catalog: namespace.table in the catalog, else a Hadoop-layout table at the path",
    )
    create.add_argument(
        "--schema",
        required=True,
        metavar="FILE",
        help="Paimon-style field list (JSON), Arrow-style JSON, or a Parquet file",
    )
    create.add_argument(
        "--partition-keys",
        metavar="A,B",
        help="partition columns; Iceberg also takes transforms: years(ts) months(ts) days(ts) hours(ts) "
        "bucket(16, id) truncate(4, name)",
    )
    create.add_argument(
        "--primary-keys",
        metavar="A,B",
        help="Paimon primary keys; Iceberg identifier fields (NOT NULL columns)",
    )
    create.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="table option; Iceberg table property, format-version=1|2 (repeatable)",
    )
    return parser


EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = out or sys.stdout
    try:
        args.func(args, out)
        out.flush()
    except BrokenPipeError:
        # The reader went away (``lakeformat files T --json | head -1``): stop quietly, as Unix tools do,
        # with SIGPIPE's conventional status. Point stdout at /dev/null so the interpreter's own final
        # flush of the unwritten rest cannot fail again.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (LakeformatError, OSError, ValueError) as exc:
        if args.debug:
            raise
        message = str(exc) or type(exc).__name__
        if not isinstance(exc, LakeformatError):
            message = f"{type(exc).__name__}: {message}"
        print(f"lakeformat: error: {message}", file=sys.stderr)
        return exit_code_for(type(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
