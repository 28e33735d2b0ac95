"""The write commands: ``write --from FILE`` and ``commit --add PATH...``, on either format.

The table is opened through the facade (:func:`~airflow_lakeformat.cli.tables.open_command_table`); the
input rows are read with the facade table's ``write_schema()`` (``core/sources``). An Iceberg write goes
through the facade's writer, as the operators' do (``table.writes()``, ``core/table_writes.IcebergWrites``:
append, ``--overwrite`` of the input's partitions or of ``k=v``/``'*'``, ``--overwrite-filter EXPR``,
``add_files``; exactly once when ``--commit-user`` and ``--commit-identifier`` are both given). A Paimon write
goes through ``PaimonWrites.commit`` (Paimon's ``Committer``, exactly once per ``--commit-user`` and
``--commit-identifier``); on a primary-key table the rows are upserted as Paimon's writer does, their kinds
(``+I``, ``-U``, ``+U``, ``-D``) read from the table's ``rowkind.field`` or ``--row-kind-column``.
:data:`_COMMITS` only picks how each format's fields become the document.

Both commit unless ``--dry-run`` (the rule of every command that only adds files): a dry run reads and
checks the input (``write``: every row against the table's columns; ``commit`` on Paimon: each file's place
in the layout, its schema and bucket; on Iceberg: each file's footer) and writes and commits nothing.

Both formats print one document: ``operation``, ``format``, ``table``, ``dryRun``, ``snapshotId``,
``commitKind``, ``commitUser``, ``alreadyCommitted``, ``filesAdded``, ``filesDeleted``, ``rowsAdded``,
``filesDiscarded``, ``totalRecordCount``, ``rowsToAdd`` (and for ``commit`` ``filesToAdd``): what a real run
would add (0 after one, as ``bytesToFree`` of the deleting commands), then what one format adds (Paimon's
``commitIdentifier``, ``attempts``, ``manifestMerge``; an Iceberg overwrite's ``overwrite``: ``mode``,
``filter``, ``inputPartitions``, ``replacedPartitions``, ``replacedFiles``, ``replacedRows``,
``replacedDeleteFiles``, what it replaced or, in a dry run, would replace).

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
from airflow_lakeformat.core.table_writes import DYNAMIC_OVERWRITE

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable


def commit(args: argparse.Namespace, out: TextIO) -> None:
    """``commit TABLE --add PATH... [--overwrite SPEC] [--commit-user U] [--commit-identifier N]``."""
    _run(args, out, rows=None)


def write(args: argparse.Namespace, out: TextIO) -> None:
    """``write TABLE --from FILE [--overwrite SPEC] [--commit-user U] [--commit-identifier N]
    [--row-kind-column C]``."""
    from airflow_lakeformat.core.sources import read_source
    from airflow_lakeformat.core.sources.schema import with_row_kind_column

    table = open_command_table(args)
    schema = with_row_kind_column(table.write_schema(), getattr(args, "row_kind_column", None))
    rows = read_source(args.source, schema, parse_storage_options(args.storage_option))
    _run(args, out, rows=rows, table=table)


def _run(
    args: argparse.Namespace,
    out: TextIO,
    rows: pa.Table | None,
    table: PaimonTable | IcebergLakeTable | None = None,
) -> None:
    table = table or open_command_table(args)
    if args.dry_run:
        fields = _CHECKS[table.format](table, args, rows)
    else:
        fields = _COMMITS[table.format](table, args, rows)
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
    replaced = document.get("overwrite")
    if document["dryRun"]:
        files = f"{plural(document['filesToAdd'], 'file')} with " if "filesToAdd" in document else ""
        would = (
            f"; would replace {plural(len(replaced['replacedFiles']), 'file')} "
            f"({plural(replaced['replacedRows'], 'row')}) in {plural(len(replaced['replacedPartitions']), 'partition')}"
            if replaced
            else ""
        )
        return (
            f"dry run: nothing was written or committed; {files}{plural(document['rowsToAdd'], 'row')} "
            f"checked{would}: re-run without --dry-run to commit"
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


def _refuse_for_paimon(args: argparse.Namespace) -> None:
    """What a Paimon write refuses: a dynamic overwrite (no partition named) and ``--overwrite-filter``."""
    if getattr(args, "overwrite_filter", None) is not None:
        raise UsageError(
            "--overwrite-filter: only for Iceberg tables (a Paimon overwrite names its partition)"
        )
    if args.overwrite == DYNAMIC_OVERWRITE:
        raise UsageError(
            "--overwrite without a value (the partitions of the input) is for Iceberg tables; name the Paimon "
            "partition: --overwrite k=v[,k=v] or '*'"
        )


def _paimon(facade: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """Through the facade's writer (``PaimonWrites.commit``): write ``rows`` or register ``--add`` files, then
    commit once (APPEND, or OVERWRITE of a partition)."""
    _refuse_for_paimon(args)
    done = facade.writes().commit(
        rows,
        [] if rows is not None else list(args.add),
        commit_user=args.commit_user,
        commit_identifier=args.commit_identifier,
        overwrite=args.overwrite,
        row_kind_column=getattr(args, "row_kind_column", None),
    )
    fields: dict[str, Any] = done.to_json()
    return fields


# -- Iceberg -----------------------------------------------------------------------------------------


def _iceberg(table: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """Through the facade's writer (``core/table_writes.IcebergWrites``): an append or an overwrite of
    ``rows``, or ``add_files`` of ``--add``; exactly once when ``--commit-user`` and ``--commit-identifier``
    are both given."""
    writes = table.writes()
    if getattr(args, "row_kind_column", None) is not None:
        raise UsageError("--row-kind-column: only for Paimon primary-key tables")
    identity = {"commit_user": args.commit_user, "commit_identifier": args.commit_identifier}
    if rows is None:
        fields = writes.commit_files(list(args.add), overwrite=args.overwrite, **identity)
        return _iceberg_fields(fields, args, 0)
    fields = writes.write_rows(
        rows,
        overwrite=args.overwrite,
        overwrite_filter=getattr(args, "overwrite_filter", None),
        dry_run=bool(args.dry_run),
        **identity,
    )
    replaced = fields.pop("overwrite", None)
    if args.dry_run:
        document = _dry_run_fields(args, rows.num_rows, None)
    else:
        document = _iceberg_fields(fields, args, fields.get("rowsWritten", 0))
    return {**document, **({} if replaced is None else {"overwrite": replaced})}


def _iceberg_fields(fields: dict[str, Any], args: argparse.Namespace, rows: int) -> dict[str, Any]:
    """The shared keys of the CLI's document from the writer's fields (0 added when already committed)."""
    again = bool(fields.get("alreadyCommitted"))
    return {
        "snapshotId": fields.get("snapshotId"),
        "commitKind": fields.get("commitKind"),
        "commitUser": fields.get("commitUser", args.commit_user),
        "alreadyCommitted": again,
        "filesAdded": 0 if again else fields.get("filesWritten", fields.get("filesAdded", 0)),
        "filesDeleted": 0 if again else fields.get("filesDeleted", 0),
        "rowsAdded": 0 if again else rows or fields.get("deltaRecordCount", 0),
        "filesDiscarded": 0,
        "totalRecordCount": fields.get("totalRecordCount"),
    }


def _check_paimon(facade: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """A Paimon dry run: ``commit --add`` files are registered (layout, schema, bucket checked), not committed."""
    _refuse_for_paimon(args)
    writes = facade.writes()
    writes.check_overwrite(args.overwrite)
    identifier = writes.default_identifier() if args.commit_identifier is None else args.commit_identifier
    own = {"commitIdentifier": identifier, "attempts": 0, "manifestMerge": None, "deltaRecordCount": None}
    if rows is not None:
        writes.check_rows_table()  # what a real run refuses of the table
        return {**_dry_run_fields(args, rows.num_rows, None), **own}
    counted, files = writes.check_files(args.add)
    return {**_dry_run_fields(args, counted, files), **own}


def _check_iceberg(table: Any, args: argparse.Namespace, rows: pa.Table | None) -> dict[str, Any]:
    """An Iceberg dry run: ``write`` goes to the writer (it checks the rows and plans an overwrite);
    ``commit`` counts the files' rows from their footers."""
    import fsspec
    import pyarrow.parquet as pq

    if rows is not None:
        return _iceberg(table, args, rows)
    table.writes().check_overwrite(args.overwrite)
    if args.overwrite is not None:
        raise UnsupportedFormatError(
            table.uri, "registering files with an overwrite is not implemented for Iceberg tables; write the "
            "rows with an overwrite instead (write --overwrite)"
        )  # fmt: skip
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
