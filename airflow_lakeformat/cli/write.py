"""The write commands: ``write --from FILE`` and ``commit --add PATH...``, on either format.

The table is opened through the facade (:func:`~airflow_lakeformat.cli.tables.open_command_table`); the
input rows are read with the facade table's ``write_schema()`` (``core/sources``). The commit itself has no
facade method yet, so this module calls each format's committer (the one format dispatch left here,
:data:`_COMMITS`): Paimon's ``Committer`` (``core/paimon/commit.py``, exactly once per ``--commit-user`` and
``--commit-identifier``), Iceberg's append / ``add_files`` (``core/iceberg/write/write.py``, the commit user
recorded as the ``lakeformat.commit-user`` summary property).

Both commit unless ``--dry-run`` (the rule of every command that only adds files): a dry run reads and
checks the input (``write``: every row against the table's columns; ``commit`` on Paimon: each file's place
in the layout, its schema and bucket; on Iceberg: each file's footer) and writes and commits nothing.

Both formats print one document: ``operation``, ``format``, ``table``, ``dryRun``, ``snapshotId``,
``commitKind``, ``commitUser``, ``alreadyCommitted``, ``filesAdded``, ``filesDeleted``, ``rowsAdded``,
``filesDiscarded``, ``totalRecordCount``, ``rowsToAdd`` (and for ``commit`` ``filesToAdd``): what a real run
would add (0 after one, as ``bytesToFree`` of the deleting commands), then what one format adds (Paimon's
``commitIdentifier``, ``attempts``, ``manifestMerge``).

Example:
    >>> from airflow_lakeformat.cli import main
    >>> main(["write", "/wh/db.db/t", "--from", "rows.parquet"])  # doctest: +SKIP
    committed snapshot 5 (APPEND): +1 file, -0 files, +2 rows
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from airflow_lakeformat.cli.output import finish, plural
from airflow_lakeformat.cli.tables import open_command_table
from airflow_lakeformat.core.errors import UnsupportedFormatError, UsageError
from airflow_lakeformat.core.io import parse_storage_options
from airflow_lakeformat.core.table_maintenance import COMMIT_USER_PROPERTY

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.commit import CommitResult
    from airflow_lakeformat.core.paimon.manifest import ManifestEntry
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable


def commit(args: argparse.Namespace, out: TextIO) -> None:
    """``commit TABLE --add PATH... [--overwrite SPEC] [--commit-user U] [--commit-identifier N]``."""
    _run(args, out, rows=None)


def write(args: argparse.Namespace, out: TextIO) -> None:
    """``write TABLE --from FILE [--overwrite SPEC] [--commit-user U] [--commit-identifier N]``."""
    from airflow_lakeformat.core.sources import read_source

    table = open_command_table(args)
    rows = read_source(args.source, table.write_schema(), parse_storage_options(args.storage_option))
    _run(args, out, rows=rows, table=table)


def _run(
    args: argparse.Namespace,
    out: TextIO,
    rows: pa.Table | None,
    table: PaimonTable | IcebergLakeTable | None = None,
) -> None:
    table = table or open_command_table(args)
    if args.dry_run:
        fields = _CHECKS[table.format](table.native, args, rows)
    else:
        fields = _COMMITS[table.format](table.native, args, rows)
        fields.update(rowsToAdd=0, **({"filesToAdd": 0} if rows is None else {}))
    shared = {key: fields.pop(key) for key in _SHARED_KEYS if key in fields}
    document = {
        "operation": args.command,
        "format": table.format,
        "table": table.uri,
        "dryRun": bool(args.dry_run),
        **shared,
        **fields,
    }
    finish(args.json, document, _summary(document), out)


#: The keys both formats' documents have, in this order (each format's own follow).
_SHARED_KEYS = ("snapshotId", "commitKind", "commitUser", "alreadyCommitted", "filesAdded", "filesDeleted",
                "rowsAdded", "filesDiscarded", "totalRecordCount", "rowsToAdd", "filesToAdd")  # fmt: skip


def _dry_run_fields(args: argparse.Namespace, rows: int, files: int | None) -> dict[str, Any]:
    """A dry run's fields: nothing committed; ``rowsToAdd`` (and ``filesToAdd``) what a real run would add."""
    return {
        "snapshotId": None,
        "commitKind": None,
        "commitUser": args.commit_user,
        "alreadyCommitted": False,
        "filesAdded": 0,
        "filesDeleted": 0,
        "rowsAdded": 0,
        "filesDiscarded": 0,
        "totalRecordCount": None,
        "rowsToAdd": rows,
        **({} if files is None else {"filesToAdd": files}),
    }


def _summary(document: dict[str, Any]) -> str:
    if document["dryRun"]:
        files = f"{plural(document['filesToAdd'], 'file')} with " if "filesToAdd" in document else ""
        return (
            f"dry run: nothing was written or committed; {files}{plural(document['rowsToAdd'], 'row')} "
            "checked: re-run without --dry-run to commit"
        )
    state = "already committed as" if document["alreadyCommitted"] else "committed"
    line = (
        f"{state} snapshot {document['snapshotId']} ({document['commitKind']}): "
        f"+{plural(document['filesAdded'], 'file')}, -{plural(document['filesDeleted'], 'file')}, "
        f"+{plural(document['rowsAdded'], 'row')}"
    )
    if document["filesDiscarded"]:
        line += f" ({plural(document['filesDiscarded'], 'file')} this run wrote were discarded)"
    return line


# -- Paimon ------------------------------------------------------------------------------------------


def _paimon(native: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """Register ``--add`` files or write ``rows``, then commit once (APPEND, or OVERWRITE of a partition)."""
    from airflow_lakeformat.core.paimon.commit import Committer
    from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec
    from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
    from airflow_lakeformat.core.paimon.write.data_files import write_data_files
    from airflow_lakeformat.core.paimon.write.register import register_files
    from airflow_lakeformat.core.paimon.written_files import commit_written_files

    table: Table = native
    overwrite = parse_overwrite_spec(args.overwrite) if args.overwrite is not None else None
    identifier = BATCH_COMMIT_IDENTIFIER if args.commit_identifier is None else args.commit_identifier
    committer = Committer(table, args.commit_user)
    if rows is not None:
        added = write_data_files(table, rows)
        done = commit_written_files(
            committer,
            added,
            overwrite=args.overwrite is not None,
            partition_filter=overwrite,
            commit_identifier=identifier,
        )
        return _paimon_fields(done.result, added, done.deletes, done.discarded)
    # Files the user placed (``commit --add``): never ours to discard, whatever the outcome.
    added = register_files(table, args.add)
    deletes = committer.overwrite_entries(overwrite, added) if args.overwrite is not None else []
    kind = CommitKind.OVERWRITE if args.overwrite is not None else CommitKind.APPEND
    result = committer.commit(
        [*deletes, *added], kind=kind, commit_identifier=identifier, check_conflicts=True
    )
    return _paimon_fields(result, added, deletes, 0)


def _paimon_fields(
    result: CommitResult, added: list[ManifestEntry], deletes: list[ManifestEntry], discarded: int
) -> dict[str, Any]:
    landed = result.to_json()
    again = result.already_committed
    return {
        "snapshotId": landed.pop("snapshotId"),
        "commitKind": landed.pop("commitKind"),
        "commitUser": landed.pop("commitUser"),
        "alreadyCommitted": landed.pop("alreadyCommitted"),
        "filesAdded": 0 if again else len(added),
        "filesDeleted": 0 if again else len(deletes),
        "rowsAdded": 0 if again else sum(e.file.row_count for e in added),
        "filesDiscarded": discarded,
        **landed,
    }


# -- Iceberg -----------------------------------------------------------------------------------------


def _refuse_for_iceberg(table: IcebergTable, args: argparse.Namespace) -> None:
    """What an Iceberg write from the CLI refuses: a partition overwrite (not implemented) and an identifier."""
    if args.overwrite is not None:
        raise UnsupportedFormatError(
            table.name, "a partition overwrite of Iceberg tables is not implemented yet"
        )
    if args.commit_identifier is not None:
        raise UsageError(
            "--commit-identifier: only for Paimon tables (an Iceberg write from the CLI is not made "
            "idempotent by an identifier)"
        )


def _iceberg(native: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """An append of ``rows`` through pyiceberg, or ``add_files`` of ``--add``; one ``append`` snapshot."""
    from airflow_lakeformat.core.iceberg.write.write import add_files, append

    table: IcebergTable = native
    _refuse_for_iceberg(table, args)
    properties = {} if args.commit_user is None else {COMMIT_USER_PROPERTY: args.commit_user}
    if rows is not None:
        snapshot_id = append(table, rows, source=args.source, snapshot_properties=properties)
    else:
        snapshot_id = add_files(table, list(args.add), snapshot_properties=properties)
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    summary = snapshot.summary if snapshot is not None else None

    def count(key: str) -> int:
        return int(summary.get(key) or 0) if summary is not None else 0

    return {
        "snapshotId": snapshot_id,
        "commitKind": summary.operation.value.upper() if summary is not None else "APPEND",
        "commitUser": args.commit_user,
        "alreadyCommitted": False,
        "filesAdded": count("added-data-files"),
        "filesDeleted": count("deleted-data-files"),
        "rowsAdded": count("added-records"),
        "filesDiscarded": 0,
        "totalRecordCount": count("total-records"),
    }


def _check_paimon(native: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """A Paimon dry run: ``commit --add`` files are registered (layout, schema, bucket checked), not committed."""
    from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec
    from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER
    from airflow_lakeformat.core.paimon.write.register import register_files

    if args.overwrite is not None:
        parse_overwrite_spec(args.overwrite)
    identifier = BATCH_COMMIT_IDENTIFIER if args.commit_identifier is None else args.commit_identifier
    own = {"commitIdentifier": identifier, "attempts": 0, "manifestMerge": None, "deltaRecordCount": None}
    if rows is not None:
        return {**_dry_run_fields(args, rows.num_rows, None), **own}
    added = register_files(native, args.add)
    return {**_dry_run_fields(args, sum(e.file.row_count for e in added), len(added)), **own}


def _check_iceberg(native: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """An Iceberg dry run: the refusals a real run makes, then the rows (``commit``: the files' footers)."""
    import fsspec
    import pyarrow.parquet as pq

    _refuse_for_iceberg(native, args)
    if rows is not None:
        return _dry_run_fields(args, rows.num_rows, None)
    options = parse_storage_options(args.storage_option)
    counted = 0
    for path in args.add:
        with fsspec.open(path, "rb", **options) as handle:
            counted += pq.read_metadata(handle).num_rows
    return _dry_run_fields(args, counted, len(args.add))


_COMMITS: dict[str, Callable[[Any, argparse.Namespace, Any], dict[str, Any]]] = {
    "paimon": _paimon,
    "iceberg": _iceberg,
}
_CHECKS: dict[str, Callable[[Any, argparse.Namespace, Any], dict[str, Any]]] = {
    "paimon": _check_paimon,
    "iceberg": _check_iceberg,
}
