"""How a ``lakeformat`` command prints: its one JSON document, a table of rows, a cell, a time.

Every command's ``--json`` document goes through :func:`emit_json` (exactly one document on stdout; on an
error :func:`error_document`); the commands that change a table end with :func:`finish` (the document, or
the summary line with its decisions, warnings and a dry run's last line); the read commands' text forms use
:func:`print_rows`, :func:`cell` and :func:`format_time`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TextIO


def emit_json(document: Any, out: TextIO) -> None:
    """The command's document, indented, non-ASCII kept, one trailing newline."""
    json.dump(document, out, indent=2, ensure_ascii=False)
    out.write("\n")


def error_document(kind: str, message: str, exit_code: int) -> dict[str, Any]:
    """What ``--json`` prints on stdout when a command fails (the one line still goes to stderr)."""
    return {"error": {"type": kind, "message": message, "exitCode": exit_code}}


def print_rows(rows: list[dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    """A left-aligned table: a header of the column names, then one line per row."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for row_cells in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row_cells, widths, strict=True)).rstrip() + "\n")


def cell(value: Any) -> str:
    """A table cell: ``-`` for nothing, ``k=v,...`` for a mapping, else the value's text."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    return str(value)


def format_time(millis: int | None) -> str:
    """Epoch milliseconds as ``YYYY-MM-DD HH:MM:SS UTC`` (``-`` for none)."""
    if millis is None:
        return "-"
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


DELETING_OPERATIONS = ("expire-snapshots", "remove-orphan-files")


def finish(json_output: bool, document: dict[str, Any], summary: str, out: TextIO) -> None:
    """The one output tail of every command that changes (or would change) a table: the JSON document with
    ``--json``; else the summary line, each decision and warning indented, and for a dry run of a deleting
    command the line saying nothing was deleted (:func:`dry_run_tail`).

    Args:
        json_output: the command's ``--json``.
        document: the command's result document (its ``to_json()``).
        summary: the one line saying what happened (usually ``result.summary()``).
        out: stdout.
    """
    document = command_document(document)
    if json_output:
        emit_json(document, out)
        return
    print_outcome(document, summary, out)


LEAD_KEYS = ("operation", "format", "table", "dryRun")


def command_document(document: dict[str, Any]) -> dict[str, Any]:
    """One shape for a changing command's document, whichever format made it.

    ``operation``, ``format``, ``table``, ``dryRun`` come first. For the deleting operations ``bytesFreed``
    is what was freed (0 in a dry run, on both formats: Paimon's results put the would-free total there)
    and ``bytesToFree`` what ``--apply`` would free (0 after a real run); the per-kind ``bytes`` are the
    kinds' sizes either way. Keys are camelCase (``javaCounts``' columns were Java's snake_case names).

    Example:
        >>> command_document({"bytes": {"data-file": 5}, "dryRun": True, "bytesFreed": 5,
        ...                   "operation": "expire-snapshots", "format": "paimon", "table": "/t"})
        {'operation': 'expire-snapshots', 'format': 'paimon', 'table': '/t', 'dryRun': True, 'bytes': {'data-file': 5}, 'bytesFreed': 0, 'bytesToFree': 5}
    """
    lead = {key: document[key] for key in LEAD_KEYS if key in document}
    shaped = {**lead, **{k: v for k, v in document.items() if k not in lead}}
    if shaped.get("operation") in DELETING_OPERATIONS:
        total = sum((shaped.get("bytes") or {}).values())
        dry = bool(shaped.get("dryRun"))
        shaped["bytesFreed"] = 0 if dry else shaped.get("bytesFreed", total)
        shaped["bytesToFree"] = total if dry else 0
    if isinstance(shaped.get("javaCounts"), dict):
        shaped["javaCounts"] = {camel_case(k): v for k, v in shaped["javaCounts"].items()}
    return shaped


def camel_case(name: str) -> str:
    """``deleted_data_files_count`` -> ``deletedDataFilesCount``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def print_outcome(document: dict[str, Any], summary: str, out: TextIO) -> None:
    """A maintenance result as text: its summary, then each decision, warning and orphan path indented,
    then (for a dry run of a deleting command) the line saying nothing was deleted."""
    out.write(summary + "\n")
    for line in document.get("decisions", []) + document.get("warnings", []):
        out.write(f"  {line}\n")
    paths = document.get("orphanPaths") or []
    for path in paths:
        out.write(f"  orphan: {path}\n")
    if document.get("orphanPathsTruncated"):
        more = (document.get("orphans") or 0) - len(paths)
        out.write(f"  ... and {more} more (--max-listed N lists more, --report FILE every one)\n")
    tail = dry_run_tail(document)
    if tail:
        out.write(tail + "\n")


def dry_run_tail(document: dict[str, Any]) -> str | None:
    """The last line of a deleting command's dry run: nothing was deleted, what ``--apply`` would delete.

    Example:
        >>> dry_run_tail({"operation": "expire-snapshots", "dryRun": True, "files": {"data-file": 2}, "bytes": {"data-file": 2048}})
        'dry run: nothing was deleted; 2 files (2.0 KiB) would be deleted: re-run with --apply to delete them'
    """
    from airflow_lakeformat.core.maintenance.results import human_bytes

    if not document.get("dryRun") or document.get("operation") not in DELETING_OPERATIONS:
        return None
    files = sum((document.get("files") or {}).values())
    size = sum((document.get("bytes") or {}).values())
    if not files:
        return "dry run: nothing was deleted, and --apply would delete nothing now"
    pronoun = "it" if files == 1 else "them"
    return (
        f"dry run: nothing was deleted; {plural(files, 'file')} ({human_bytes(size)}) would be deleted: "
        f"re-run with --apply to delete {pronoun}"
    )


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 file``, ``5 files``, ``0 files`` (``nouns`` for an irregular plural).

    Example:
        >>> plural(1, "snapshot"), plural(5, "snapshot"), plural(2, "entry", "entries")
        ('1 snapshot', '5 snapshots', '2 entries')
    """
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"
