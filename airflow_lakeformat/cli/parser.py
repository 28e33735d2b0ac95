"""The ``lakeformat`` argument parser: every command, its flags and its handler, importing nothing heavy.

A command's handler is named ``"module:function"`` (a module of this package) and wrapped by
:func:`lazy_handler`, which imports the module only when the command runs: ``--version``, ``--help`` and
``COMMAND --help`` load neither a table format nor pyarrow, pyiceberg, fastavro or fsspec. The flag types
(``cli/arg_types.py``: :func:`~airflow_lakeformat.cli.arg_types.duration`, ``older_than_argument``) import
only ``core.units`` up front; the compaction and partition commands are registered from
``cli/parser_compaction.py``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import TextIO

from airflow_lakeformat.cli.arg_types import count, duration, older_than_argument
from airflow_lakeformat.cli.parser_compaction import add_compaction_commands, add_partition_commands
from airflow_lakeformat.version import __version__

Handler = Callable[[argparse.Namespace, TextIO], None]


def lazy_handler(name: str) -> Handler:
    """The handler ``"module:function"`` of ``airflow_lakeformat.cli``, its module imported on the first call.

    Example:
        >>> lazy_handler("read:snapshots").__name__
        'snapshots'
    """
    module_name, _, function_name = name.partition(":")

    def run(args: argparse.Namespace, out: TextIO) -> None:
        module = importlib.import_module(f"airflow_lakeformat.cli.{module_name}")
        getattr(module, function_name)(args, out)

    run.__name__ = run.__qualname__ = function_name
    return run


EPILOG_FORMAT = "example:\n  {}"


def build_parser() -> argparse.ArgumentParser:
    """The ``lakeformat`` parser: the top level, then each command group's commands.

    Example:
        >>> build_parser().parse_args(["expire", "/wh/db.db/t", "--apply"]).dry_run
        False
    """
    parser = argparse.ArgumentParser(
        prog="lakeformat",
        description="Inspect and maintain Apache Paimon and Apache Iceberg tables.",
        epilog="The commands that delete files (expire, remove-orphans) are dry runs unless --apply; "
        "the ones that add files and commit (write, commit, compact-manifests, compact-data, compact-deletes) "
        "commit unless --dry-run.\n" + EPILOG_FORMAT.format("lakeformat snapshots /wh/db.db/t"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="print a traceback on errors (default: off)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    add = command_adder(sub, common)
    add_read_commands(add)
    add_maintenance_commands(add)
    add_compaction_commands(add)
    add_partition_commands(add)
    add_write_commands(add)
    add_create_command(add)
    from airflow_lakeformat.cli.tags import add_tag_commands  # tag create|delete|list, expire-tags

    add_tag_commands(sub, common, add, EPILOG_FORMAT, lazy_handler, duration)
    add_completion_command(sub)
    return parser


Adder = Callable[[str, str, str, str], argparse.ArgumentParser]


def common_options() -> argparse.ArgumentParser:
    """The options every table command takes: the table, how to open it, and the output."""
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
    common.add_argument(
        "--catalog", metavar="NAME", help="an Iceberg catalog from pyiceberg's configuration (default: none)"
    )
    common.add_argument(
        "--catalog-property",
        action="append",
        metavar="KEY=VALUE",
        help="an Iceberg catalog property as pyiceberg's load_catalog takes it (repeatable; default: none), "
        "e.g. type=sql uri=sqlite:////path/catalog.db warehouse=file:///path",
    )
    common.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="fsspec storage option (repeatable; default: none); S3 also reads AWS_* variables and "
        "AWS_ENDPOINT_URL",
    )
    common.add_argument("--branch", default="main", help="the Paimon branch (default: main)")
    common.add_argument("--json", action="store_true", help="print one JSON document (default: text)")
    # Accepted after the command too; SUPPRESS keeps a --debug given before it.
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return common


def command_adder(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> Adder:
    """``add(name, handler, help, example)``: a command with the common options, its handler and an example."""

    def add(name: str, handler: str, help_text: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=help_text,
            epilog=EPILOG_FORMAT.format(example),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=lazy_handler(handler))
        return p

    return add


def add_read_commands(add: Adder) -> None:
    """``snapshots``, ``files``, ``manifests``, ``inspect``: they change nothing."""
    add(
        "snapshots",
        "read:snapshots",
        "list snapshots with record and manifest counts",
        "lakeformat snapshots /wh/db.db/t --json",
    )
    files = add(
        "files",
        "read:files",
        "list the live data files of a snapshot or tag (default: latest)",
        "lakeformat files /wh/db.db/t --tag nightly",
    )
    which = files.add_mutually_exclusive_group()
    which.add_argument("--snapshot", type=int, metavar="ID", help=SNAPSHOT_HELP)
    which.add_argument("--tag", metavar="NAME", help="a Paimon tag: its snapshot (default: the latest)")
    which.add_argument("--ref", metavar="NAME", help="an Iceberg branch or tag (default: main)")
    manifests = add(
        "manifests",
        "read:manifests",
        "list the data manifests of a snapshot (default: latest)",
        "lakeformat manifests /wh/db.db/t --snapshot 3",
    )
    manifests.add_argument("--snapshot", type=int, metavar="ID", help=SNAPSHOT_HELP)
    add(
        "inspect",
        "read:inspect",
        "summarize schema, options, snapshots, tags, consumers, files and manifests",
        "lakeformat inspect s3://lake/db.db/t --storage-option endpoint_url=http://127.0.0.1:8333",
    )
    health = add(
        "health",
        "health:health",
        "score a table from its metadata and recommend the maintenance it needs (reads no data file)",
        "lakeformat health /wh/db.db/t --json",
    )
    health.add_argument(
        "--orphans",
        action="store_true",
        help="also list the table's location for orphan files (the remove-orphans dry run; default: off)",
    )
    health.add_argument(
        "--policy",
        metavar="FILE",
        help="a health policy (YAML or JSON): thresholds and the operations allowed, with defaults, "
        "namespaces and tables (docs/health.md); recommendations it does not allow are listed as suppressed "
        "(default: none, the table's lakeformat.health.* properties and the built-in thresholds)",
    )
    health.add_argument(
        "--html",
        metavar="FILE",
        help="also write the report with its charts as one self-contained HTML file (default: none, no file)",
    )


SNAPSHOT_HELP = "a snapshot id (default: the latest snapshot)"


def add_maintenance_commands(add: Adder) -> None:
    """``compact-manifests`` (commits unless --dry-run), ``expire`` and ``remove-orphans`` (dry runs unless
    --apply)."""
    compact = add(
        "compact-manifests",
        "maintenance:compact_manifests",
        "merge manifests and commit (unless --dry-run): --full is Paimon's compact_manifest and Java "
        "Iceberg's rewrite_manifests (default), --minor the ordinary merge policy",
        "lakeformat compact-manifests /wh/db.db/t --dry-run",
    )
    kind = compact.add_mutually_exclusive_group()
    kind.add_argument("--full", action="store_true", help="forced full merge (the default)")
    kind.add_argument("--minor", action="store_true", help="the table's ordinary merge policy (default: off)")
    compact.add_argument(
        "--dry-run", action="store_true", help="report what would be merged, write nothing (default: commit)"
    )
    expire = add(
        "expire",
        "maintenance:expire",
        "expire old snapshots and delete the files only they used (a dry run unless --apply)",
        "lakeformat expire /wh/db.db/t --older-than 7d --apply",
    )
    add_expire_arguments(expire)
    add_deleting_run_flags(expire)
    orphans = add(
        "remove-orphans",
        "maintenance:remove_orphans",
        "delete old files no snapshot, tag or changelog uses (a dry run unless --apply)",
        "lakeformat remove-orphans /wh/db.db/t --older-than 3d --report orphans.jsonl --apply",
    )
    add_orphan_arguments(orphans)
    add_deleting_run_flags(orphans)


def add_write_commands(add: Adder) -> None:
    """``commit`` and ``write``: they add files and commit."""
    commit = add(
        "commit",
        "write:commit",
        "commit Parquet files already written under the table's layout",
        "lakeformat commit /wh/db.db/t --add dt=2024-01-01/bucket-0/data-1.parquet",
    )
    commit.add_argument(
        "--add", nargs="+", required=True, metavar="PATH", help="data files (relative to the table)"
    )
    add_commit_options(commit)
    write = add(
        "write",
        "write:write",
        "write rows from a Parquet, CSV or JSON-lines file into the table and commit",
        "lakeformat write /wh/db.db/t --from rows.csv --overwrite dt=2024-01-01",
    )
    write.add_argument(
        "--from", dest="source", required=True, metavar="FILE", help="a *.parquet, *.csv or *.jsonl file"
    )
    add_commit_options(write)
    write.add_argument(
        "--overwrite-filter",
        metavar="EXPR",
        help="Iceberg: replace the rows this filter selects, e.g. \"cat = 'a'\"; every input row must match it "
        "(default: append)",
    )
    write.add_argument(
        "--row-kind-column",
        metavar="COLUMN",
        help="Paimon primary-key tables: the input column holding each row's kind (+I, -U, +U, -D); a column "
        "the table lacks is not written (default: the table's rowkind.field, else every row is +I)",
    )


def add_commit_options(p: argparse.ArgumentParser) -> None:
    """The options of a commit: partition overwrite, commit user and identifier, and ``--dry-run``."""
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read and check the input, write and commit nothing (default: commit)",
    )
    p.add_argument(
        "--overwrite",
        metavar="PARTITION_SPEC",
        nargs="?",
        const="dynamic",
        help="replace the partitions k=v[,k=v] ('*' = all); Iceberg, without a value: the partitions the rows "
        "fall into (default: append)",
    )
    p.add_argument("--commit-user", help="commit user (default: a new lakeformat-<uuid>)")
    p.add_argument(
        "--commit-identifier",
        type=int,
        help="with the same --commit-user, a re-run never commits twice (default: Paimon one batch id, Iceberg "
        "none)",
    )


def add_create_command(add: Adder) -> None:
    """``create-table``."""
    create = add(
        "create-table",
        "create:create_table",
        "create a Paimon table (schema/schema-0), or an Iceberg table (format v2) with --format iceberg or a "
        "catalog: namespace.table in the catalog, else a Hadoop-layout table at the path",
        "lakeformat create-table /wh/db.db/t --schema schema.json --partition-keys dt --primary-keys dt,id",
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
        help="partition columns (default: none); Iceberg also takes transforms: years(ts) months(ts) "
        "days(ts) hours(ts) bucket(16, id) truncate(4, name)",
    )
    create.add_argument(
        "--primary-keys",
        metavar="A,B",
        help="Paimon: the primary key columns, which must include the partition keys; Iceberg: the "
        "identifier fields (NOT NULL columns) (default: none, an append table)",
    )
    create.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="table option; Iceberg table property, format-version=1|2 (repeatable; default: none)",
    )


def add_completion_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``completion bash|zsh``: a completion script generated from this parser (no table involved)."""
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="print a shell completion script generated from lakeformat's commands and options",
        epilog=EPILOG_FORMAT.format("lakeformat completion bash > ~/.lakeformat-completion.bash"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    completion.add_argument(
        "shell",
        choices=("bash", "zsh"),
        help='the shell to complete in (load: eval "$(lakeformat completion bash)")',
    )
    completion.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    completion.set_defaults(func=lazy_handler("completion:completion"), json=False)


def add_deleting_run_flags(parser: argparse.ArgumentParser) -> None:
    """``--apply`` / ``--dry-run`` of a command that deletes files: a dry run unless ``--apply``.

    The one dry-run rule of every surface (the Python API's ``dry_run=True`` default, the deleting
    operators' default): ``--dry-run`` is accepted and changes nothing; both together are a usage error.
    """
    run = parser.add_mutually_exclusive_group()
    run.add_argument(
        "--apply",
        dest="dry_run",
        action="store_false",
        default=True,
        help="delete for real (default: a dry run that reports what would be deleted)",
    )
    run.add_argument(
        "--dry-run",
        dest="dry_run",
        action="store_true",
        default=True,
        help="report what would be deleted, delete nothing (the default; for scripts that say so)",
    )


def add_expire_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``expire`` flags: Paimon's ``expire_snapshots`` settings and Java Iceberg's procedure arguments."""
    parser.add_argument(
        "--retain-min",
        type=count,
        metavar="N",
        help="keep at least N snapshots (default: the table's snapshot.num-retained.min, 10); for Iceberg "
        "tables the same as --retain-last",
    )
    parser.add_argument(
        "--retain-max",
        type=count,
        metavar="N",
        help="Paimon: keep at most N snapshots (default: the table's snapshot.num-retained.max, unlimited)",
    )
    parser.add_argument(
        "--older-than",
        type=older_than_argument,
        metavar="DURATION",
        help="Paimon: expire a snapshot only if its successor is older than this (default: "
        "snapshot.time-retained, 1 h); Iceberg: expire snapshots older than this duration or ISO-8601 "
        "timestamp (default: history.expire.max-snapshot-age-ms, 5 d). A duration needs a unit: 30 min, "
        "12 h, 7d",
    )
    parser.add_argument(
        "--max-deletes",
        type=count,
        metavar="N",
        help="Paimon: expire at most N snapshots per run (it counts snapshots, not files; default: "
        "snapshot.expire.limit, 50)",
    )
    parser.add_argument(
        "--retain-last",
        type=count,
        metavar="N",
        help="Iceberg: keep at least N ancestors of each branch head (default: "
        "history.expire.min-snapshots-to-keep, 1); --retain-min means the same for Iceberg tables",
    )
    parser.add_argument(
        "--snapshot-id",
        type=int,
        action="append",
        metavar="ID",
        help="Iceberg: expire this snapshot too, in addition to the age rule (repeatable; default: none)",
    )
    parser.add_argument(
        "--clean-expired-metadata",
        action="store_true",
        help="Iceberg: also remove partition specs and schemas no remaining snapshot uses (default: off)",
    )


def add_orphan_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``remove-orphans`` flags: the age rule, the report, and Java Iceberg's procedure arguments."""
    parser.add_argument(
        "--older-than",
        type=duration,
        default=None,
        metavar="DURATION",
        help="only files older than this are candidates (default: Paimon 1 d, Iceberg 3 d; under 1 h "
        "(Paimon) or 24 h (Iceberg) needs --allow-short-older-than)",
    )
    parser.add_argument(
        "--allow-short-older-than",
        action="store_true",
        help="accept --older-than under the floor, only when no writer is running (default: refused)",
    )
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="write every deleted (dry run: would-be-deleted) path and why, one JSON line each "
        "(default: no report)",
    )
    parser.add_argument(
        "--max-listed",
        type=count,
        default=None,
        metavar="N",
        help="how many orphan paths the output lists (default: 1000; --report has them all)",
    )
    parser.add_argument(
        "--equal-scheme",
        action="append",
        metavar="FROM=TO",
        help="Iceberg: schemes naming the same store (repeatable; default: none beyond s3a=s3 and s3n=s3, "
        "which always apply)",
    )
    parser.add_argument(
        "--equal-authority",
        action="append",
        metavar="FROM=TO",
        help="Iceberg: authorities (buckets, name nodes) naming the same store (repeatable; default: none)",
    )
    parser.add_argument(
        "--prefix-mismatch",
        choices=("error", "ignore"),
        default=None,
        help="Iceberg: a listed file valid under another scheme or authority aborts the run (error, "
        "the default) or is kept (ignore); it is never deleted",
    )
