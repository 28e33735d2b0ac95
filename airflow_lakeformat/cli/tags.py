"""The tag commands: ``tag create|delete|list`` and ``expire-tags``, on either format.

Each opens its table through the facade (:func:`~airflow_lakeformat.cli.tables.open_command_table`) and calls
``table.maintenance.create_tag`` / ``delete_tag`` / ``list_tags`` / ``expire_tags``, the API the Python user and
the operators call. Every command prints the one tag result document (``--json``: ``operation``, ``format``,
``table``, ``dryRun``, ``created``, ``alreadyExisted``, ``deleted``, ``tags``, ``decisions``, ``warnings``), or its
summary line (``tag list``: a table of the tags). Deleting a tag deletes the tag only (a Paimon tag file, an
Iceberg ref), never a data file. ``tag delete`` names the one tag to delete and runs unless ``--dry-run``;
``expire-tags`` chooses its tags by age, so it follows the rule of every command that deletes by age
(``expire``, ``remove-orphans``): a dry run unless ``--apply``. :func:`add_tag_commands` registers the commands on the ``lakeformat`` parser (imported by
``cli/parser.py`` when it builds the parser; this module imports no format and nothing heavy).

Example:
    >>> from airflow_lakeformat.cli import main
    >>> main(["tag", "create", "/wh/db.db/t", "nightly", "--retain", "7d"])  # doctest: +SKIP
    >>> main(["expire-tags", "/wh/db.db/t", "--older-than", "30d"])  # doctest: +SKIP (a dry run)
    >>> main(["expire-tags", "/wh/db.db/t", "--older-than", "30d", "--apply"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from airflow_lakeformat.cli.output import emit_json, finish, format_time, print_rows

SubParsers = Any  # argparse._SubParsersAction[argparse.ArgumentParser]
LIST_COLUMNS = ("name", "snapshot", "schema", "created", "retained", "expires")


def add_tag_commands(
    sub: SubParsers,
    common: argparse.ArgumentParser,
    add: Callable[[str, str, str, str], argparse.ArgumentParser],
    epilog: str,
    handler: Callable[[str], Any],
    duration: Callable[[str], Any],
) -> None:
    """``tag create|delete|list`` (a command with sub-commands) and ``expire-tags``.

    Args:
        sub: the top-level sub-parsers.
        common: the options every table command takes (the table first).
        add: the parser's ``add(name, handler, help, example)``.
        epilog: the parser's example format (``"example:\\n  {}"``).
        handler: the parser's lazy handler factory (``"module:function"``).
        duration: the parser's duration flag type.
    """
    tag = sub.add_parser(
        "tag",
        help="create, delete or list tags (Paimon tag files, Iceberg tag refs)",
        description="create, delete or list tags: a Paimon tag file or an Iceberg tag ref",
        epilog=epilog.format("lakeformat tag create /wh/db.db/t nightly --retain 7d"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tag.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    actions = tag.add_subparsers(dest="tag_command", required=True, metavar="ACTION")

    def action(name: str, function: str, help_text: str, example: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=help_text,
            epilog=epilog.format(example),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=handler(f"tags:{function}"))
        return p

    create = action(
        "create",
        "create_tag",
        "create a tag on a snapshot (default: the latest); refused if the tag exists",
        "lakeformat tag create /wh/db.db/t nightly --snapshot 42 --retain 7d",
    )
    _add_create_arguments(create, duration)
    delete = action(
        "delete",
        "delete_tag",
        "delete a tag (the tag only: files only it held go with snapshot expiry and orphan cleanup)",
        "lakeformat tag delete /wh/db.db/t nightly --dry-run",
    )
    delete.add_argument("name", help="the tag's name")
    delete.add_argument("--dry-run", action="store_true", help="report, delete nothing (default: delete)")
    action(
        "list",
        "list_tags",
        "list tags with snapshot, retention and expiry",
        "lakeformat tag list /wh/db.db/t",
    )
    _add_expire_tags_command(add)


def _add_create_arguments(create: argparse.ArgumentParser, duration: Callable[[str], Any]) -> None:
    """``tag create``'s flags: the name, the snapshot, the retention, what to do when the tag exists."""
    create.add_argument("name", help="the tag's name")
    create.add_argument(
        "--snapshot", type=int, metavar="ID", help="the snapshot to tag (default: the latest snapshot)"
    )
    create.add_argument(
        "--retain",
        type=duration,
        metavar="DURATION",
        help="time retention: Paimon tagTimeRetained, Iceberg max-ref-age-ms, e.g. 7d (default: Paimon "
        "tag.default-time-retained, else none)",
    )
    exists = create.add_mutually_exclusive_group()
    exists.add_argument(
        "--ignore-if-exists", action="store_true", help="leave an existing tag as it is (default: refuse)"
    )
    exists.add_argument("--replace", action="store_true", help="overwrite an existing tag (default: refuse)")
    create.add_argument("--dry-run", action="store_true", help="report, write nothing (default: create)")


def _add_expire_tags_command(add: Callable[[str, str, str, str], argparse.ArgumentParser]) -> None:
    """``expire-tags``: by retention, and with ``--older-than`` by age; a dry run unless ``--apply``."""
    from airflow_lakeformat.cli.parser import add_deleting_run_flags

    expire = add(
        "expire-tags",
        "tags:expire_tags",
        "delete tags whose time retention has passed, and with --older-than older ones (a dry run unless --apply)",
        "lakeformat expire-tags /wh/db.db/t --older-than 30d --apply",
    )
    expire.add_argument(
        "--older-than",
        metavar="TS|DURATION",
        help="also expire tags created (Paimon; no create time: the file's mtime) or whose snapshot was "
        "committed (Iceberg) before this timestamp or this long ago, e.g. 30d or 2024-05-01T00:00:00 "
        "(default: retention only)",
    )
    add_deleting_run_flags(expire)


def create_tag(args: argparse.Namespace, out: TextIO) -> None:
    """``tag create TABLE NAME [--snapshot ID] [--retain DUR] [--ignore-if-exists | --replace] [--dry-run]``."""
    from airflow_lakeformat.cli.tables import open_command_table

    table = open_command_table(args)
    result = table.maintenance.create_tag(
        args.name,
        args.snapshot,
        args.retain,
        ignore_if_exists=args.ignore_if_exists,
        replace=args.replace,
        dry_run=args.dry_run,
    )
    finish(args.json, result.to_json(), result.summary(), out)


def delete_tag(args: argparse.Namespace, out: TextIO) -> None:
    """``tag delete TABLE NAME [--dry-run]``."""
    from airflow_lakeformat.cli.tables import open_command_table

    table = open_command_table(args)
    result = table.maintenance.delete_tag(args.name, dry_run=args.dry_run)
    finish(args.json, result.to_json(), result.summary(), out)


def list_tags(args: argparse.Namespace, out: TextIO) -> None:
    """``tag list TABLE``: the tag result document, or a table of the tags."""
    from airflow_lakeformat.cli.tables import open_command_table

    result = open_command_table(args).maintenance.list_tags()
    if args.json:
        emit_json(result.to_json(), out)
        return
    rows = [
        {
            "name": t.name,
            "snapshot": t.snapshot_id,
            "schema": t.schema_id,
            "created": format_time(t.create_time_ms) if t.create_time_ms is not None else None,
            "retained": _duration_text(t.time_retained_ms),
            "expires": format_time(t.expires_at_ms) if t.expires_at_ms is not None else None,
        }
        for t in result.tags
    ]
    print_rows(rows, LIST_COLUMNS, out)


def expire_tags(args: argparse.Namespace, out: TextIO) -> None:
    """``expire-tags TABLE [--older-than TS|DURATION] [--apply | --dry-run]`` (a dry run unless ``--apply``)."""
    from airflow_lakeformat.cli.tables import open_command_table
    from airflow_lakeformat.core.errors import UsageError
    from airflow_lakeformat.core.maintenance.facade_base import expiry_older_than

    table = open_command_table(args)
    older_than = args.older_than
    if older_than is not None and older_than.strip().isdigit():
        raise UsageError(f"--older-than {older_than!r} has no unit: give one, e.g. '{older_than.strip()} d'")
    if older_than is not None:
        try:
            older_than = expiry_older_than(older_than)
        except UsageError as exc:
            raise UsageError(f"--older-than: {str(exc).removeprefix('older_than: ')}") from None
    result = table.maintenance.expire_tags(older_than, dry_run=args.dry_run)
    finish(args.json, result.to_json(), result.summary(), out)


def _duration_text(millis: int | None) -> str | None:
    """``86400000`` -> ``"1 d"``; the largest whole unit (``"90 min"``), else milliseconds."""
    if millis is None:
        return None
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size} {unit}"
    return f"{millis} ms"
