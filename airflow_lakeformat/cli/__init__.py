"""``lakeformat``: inspect and maintain Apache Paimon and Apache Iceberg tables from a shell.

The contract is stable: scripts depend on it. ``--json`` prints exactly one JSON document on
stdout: the command's, or on an error ``{"error": {"type", "message", "exitCode"}}``. Errors print one line
on stderr (argparse's usage mistakes: its usage and one line) and exit non-zero:

====  =========================================================
code  meaning
====  =========================================================
1     any other failure (storage, credentials, bad arguments)
2     command-line usage error
3     no Paimon or Iceberg table at the path (a Delta Lake or Hudi one is named as such)
4     corrupt or missing metadata (the message names the file)
5     a format version or feature this release refuses
6     the requested snapshot, tag or branch does not exist
7     a commit was refused (conflict, retries exhausted): nothing was published
8     a commit's outcome is unknown: re-run with the same --commit-user and --commit-identifier
9     maintenance refused (unsafe settings, unsupported feature, outdated plan): nothing was deleted
10    some files could not be deleted after retries: later phases were not run; re-run to finish
11    the input does not fit the table (a value, a column, a type, a file): nothing was written
====  =========================================================

The package: ``parser`` builds the argument parser (nothing heavy imported), ``output`` prints (JSON
documents, the one output tail ``finish``, row tables), ``tables`` maps the flags to the facade's
``open_table`` (the format is picked there), and one module per command group runs the commands on either
format: ``read``, ``maintenance`` (``table.maintenance.*``), ``write``, ``create``; ``completion`` prints
shell completion scripts. A command's module is imported only when the command runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from airflow_lakeformat.cli.output import emit_json, error_document
from airflow_lakeformat.cli.parser import build_parser as build_parser

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
from airflow_lakeformat.core.errors import LakeformatError, exit_code_for

if TYPE_CHECKING:
    from airflow_lakeformat.cli.create import load_fields as load_fields


def __getattr__(name: str) -> Any:
    if name == "load_fields":  # create-table's schema reader lives with the command (create.py)
        from airflow_lakeformat.cli.create import load_fields

        return load_fields
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe


def _parse(argv: Sequence[str] | None, out: TextIO) -> Any:
    """The parsed arguments. A usage mistake exits 2 as argparse makes it (usage and message on stderr),
    and with ``--json`` also prints the error document on stdout."""
    words = list(sys.argv[1:] if argv is None else argv)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return build_parser().parse_args(words)
    except SystemExit as exc:
        text = captured.getvalue()
        sys.stderr.write(text)
        if exc.code == EXIT_USAGE and "--json" in words:
            message = text.strip().splitlines()[-1] if text.strip() else "usage error"
            emit_json(error_document("UsageError", message.split("error: ", 1)[-1], EXIT_USAGE), out)
            out.flush()
        raise


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = _parse(argv, out)
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
    except Exception as exc:
        described = _describe(exc)
        if described is None or args.debug:
            raise
        kind, message, code = described
        print(f"lakeformat: error: {message}", file=sys.stderr)
        if getattr(args, "json", False):
            with contextlib.suppress(OSError, ValueError):
                emit_json(error_document(kind, message.removeprefix(f"{kind}: "), code), out)
                out.flush()
        return code
    return 0


def _describe(exc: Exception) -> tuple[str, str, int] | None:
    """(type name, the one line, exit code) of an error the CLI reports as a line; None: a bug, re-raised.

    Typed errors, ``OSError`` and ``ValueError`` keep their exit codes; an object-store client's error
    (a missing credential, an unreachable endpoint: ``cli/errors.py``) is one line with exit 1.
    """
    if isinstance(exc, (LakeformatError, OSError, ValueError)):
        message = str(exc) or type(exc).__name__
        if not isinstance(exc, LakeformatError):
            message = f"{type(exc).__name__}: {message}"
        return type(exc).__name__, message, exit_code_for(type(exc))
    from airflow_lakeformat.cli.errors import storage_error

    found = storage_error(exc)
    return None if found is None else (found[0], found[1], EXIT_ERROR)
