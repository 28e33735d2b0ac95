"""pypaimon-side primary-key tables for the merge-tree compaction acceptance suite (issue 27).

Runs ONLY inside ``.venv-pypaimon``: ``tests/interop/pypaimon_oracle.py`` registers the commands below
(:func:`add_pk_commands`), so they run in the oracle's long-lived ``serve`` process like its own.

    pk-build WAREHOUSE        write every table of :data:`PK_TABLES` (database ``db``); prints a document
                              ``{"pypaimonVersion", "warehouse", "tables": {name: summary}}``
    pk-upserts TABLE_PATH --rows JSON_FILE [--each] [--prepared FILE --proceed FILE [--wait S]]
                              one pypaimon commit of the rows (or, with ``--each``, one commit per row); with
                              ``--prepared``/``--proceed`` the first commit is held after the writer wrote its
                              files and took its sequence numbers until the caller says proceed: the "writer
                              racing a compaction" of the concurrency tests

Reading (at the latest snapshot, at ``--snapshot N``, at ``--tag NAME``) and single upserts use the oracle's
own ``read`` and ``append`` commands.

Every table has 2 fixed buckets and a STRING partition ``p`` with awkward values (a ``/``, ``:`` and ``=``
in one, a non-ASCII one, a space), primary key ``(p, k)``; each commit is one pypaimon batch write, so it
adds one level-0 file per (partition, bucket) it touches. pypaimon never compacts, so every data file of
these tables is a level-0 file:

* ``pk_dedup``: deduplicate with a row-kind column (``rowkind.field=op``: pypaimon 2.1 writes the
  ``_VALUE_KIND`` of each row from it); +I, +U, -U and -D rows, a -D of a key that never existed, a key
  deleted and inserted again.
* ``pk_minor``: deduplicate, one partition, a large first commit (incompressible values), so that a minor
  compaction of a few small commits on top of its compacted max-level run stops below the max level.
* ``pk_dedup_seq``: deduplicate with ``sequence.field=ts``; late arrivals (a lower ``ts`` written later
  loses) and ties on ``ts`` (the later ``_SEQUENCE_NUMBER`` wins).
* ``pk_partial``: partial-update without deletes (pypaimon's subset): each commit sets a few fields.
* ``pk_agg``: aggregation with sum, product, max, min, last_value, last_non_null_value, first_value,
  first_non_null_value, bool_or, bool_and, listagg, and the default (last_non_null_value) on one field.
* ``pk_first_row``: first-row; its summary carries ``expectedRows`` (the first version of every key),
  because pypaimon reads nothing of it before a compaction (batch reads skip level 0 for first-row).
* ``pk_upgrade``: deduplicate with a 2 kB ``target-file-size`` and disjoint key ranges, so that a full
  compaction may upgrade single-file sections; one of them holds -D rows that pypaimon counts as 0 deletes.
* ``pk_lookup`` (``changelog-producer=lookup``), ``pk_dv`` (``deletion-vectors.enabled``), ``pk_postpone``
  (``bucket=-2``): tables a compactor must refuse, two commits each.

Tags are made along the way (``tag.automatic-creation`` is not involved: ``create_tag`` on a snapshot).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType, DataField, PyarrowFieldParser

DB = "db"
SEED = 27
# A subset of pypaimon_oracle.ESCAPE_STRINGS (copied: the oracle imports this module).
PARTITIONS = ("a/b:c=d", "é", "sp ace")
BUCKETS = "2"

AGG_FUNCTIONS = {
    "s": ("BIGINT", "sum"),
    "pr": ("BIGINT", "product"),
    "mx": ("INT", "max"),
    "mn": ("DOUBLE", "min"),
    "lv": ("STRING", "last_value"),
    "lnn": ("STRING", "last_non_null_value"),
    "fv": ("STRING", "first_value"),
    "fnn": ("STRING", "first_non_null_value"),
    "bo": ("BOOLEAN", "bool_or"),
    "ba": ("BOOLEAN", "bool_and"),
    "la": ("STRING", "listagg"),
    "dflt": ("STRING", None),  # no option: the engine's default, last_non_null_value
}


# ---- helpers ------------------------------------------------------------------------------------


def _fields(*columns: tuple[str, str]) -> list[DataField]:
    return [DataField(i, name, AtomicType(type_name)) for i, (name, type_name) in enumerate(columns)]


def _create(catalog: Any, name: str, fields: list[DataField], options: dict[str, str]) -> Any:
    schema = Schema(fields, partition_keys=["p"], primary_keys=["p", "k"], options=options)
    catalog.create_table(f"{DB}.{name}", schema, False)
    return catalog.get_table(f"{DB}.{name}")


def write_rows(
    table: Any, rows: list[dict[str, Any]], before_commit: Callable[[], None] | None = None
) -> None:
    """One pypaimon batch commit of ``rows`` (missing columns are null); ``before_commit`` runs between the
    writer's ``prepare_commit`` (its files written, sequence numbers taken) and the commit."""
    builder = table.new_batch_write_builder()
    writer = builder.new_write()
    committer = builder.new_commit()
    try:
        schema = PyarrowFieldParser.from_paimon_schema(table.fields)
        writer.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        messages = writer.prepare_commit()
        if before_commit is not None:
            before_commit()
        committer.commit(messages)
    finally:
        writer.close()
        committer.close()


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def _summary(table: Any, commits: int, **extra: Any) -> dict[str, Any]:
    path = os.path.abspath(_local(table.table_path))
    snapshots = sorted(
        int(m.group(1))
        for m in (re.fullmatch(r"snapshot-(\d+)", n) for n in os.listdir(os.path.join(path, "snapshot")))
        if m
    )
    tag_dir = os.path.join(path, "tag")
    tags = sorted(n[len("tag-") :] for n in os.listdir(tag_dir)) if os.path.isdir(tag_dir) else []
    if len(snapshots) != commits:
        raise RuntimeError(f"{path}: {len(snapshots)} snapshots for {commits} commits")
    return {
        "path": path,
        "commits": commits,
        "snapshots": snapshots,
        "tags": tags,
        "options": dict(table.table_schema.options),
        **extra,
    }


class _Writer:
    """Commits rows to one table, counts the commits, tags the latest snapshot on request."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.commits = 0

    def commit(self, rows: list[dict[str, Any]], tag: str | None = None) -> None:
        write_rows(self.table, rows)
        self.commits += 1
        if tag is not None:
            self.table.create_tag(tag, snapshot_id=self.commits)


# ---- the tables ---------------------------------------------------------------------------------


def build_dedup(catalog: Any, rng: random.Random) -> dict[str, Any]:
    columns = (("p", "STRING"), ("k", "BIGINT"), ("v", "STRING"), ("n", "BIGINT"), ("op", "STRING"))
    table = _create(catalog, "pk_dedup", _fields(*columns), {"bucket": BUCKETS, "rowkind.field": "op"})
    w = _Writer(table)
    w.commit([{"p": p, "k": k, "v": f"base-{k}", "n": 1, "op": "+I"} for p in PARTITIONS for k in range(120)])
    kinds = ["+I"] * 7 + ["+U"] + ["-U"] + ["-D"] * 2
    for commit in range(2, 17):
        rows = []
        for p in rng.sample(PARTITIONS, rng.randint(1, 3)):
            for k in rng.sample(range(130), rng.randint(2, 5)):
                rows.append({"p": p, "k": k, "v": f"c{commit}-{rng.randint(0, 999)}", "n": commit})
                rows[-1]["op"] = rng.choice(kinds)
        if commit == 5:  # a delete of a key that never existed, in every partition
            rows += [{"p": p, "k": 900, "v": None, "n": commit, "op": "-D"} for p in PARTITIONS]
        if commit == 6:  # delete a base key everywhere ...
            rows = [r for r in rows if r["k"] != 7]
            rows += [{"p": p, "k": 7, "v": None, "n": commit, "op": "-D"} for p in PARTITIONS]
        if commit == 11:  # ... and insert it again in one partition
            rows = [r for r in rows if not (r["p"] == PARTITIONS[1] and r["k"] == 7)]
            rows.append({"p": PARTITIONS[1], "k": 7, "v": "reborn", "n": commit, "op": "+I"})
        w.commit(rows, tag={3: "t3", 9: "t9", 14: "t14"}.get(commit))
    return _summary(table, w.commits)


def build_minor(catalog: Any, rng: random.Random) -> dict[str, Any]:
    """Deduplicate, one partition, a large first commit (incompressible values): after a full compaction its
    max-level runs outweigh a few small commits, so a minor compaction of those stops below the max level."""
    columns = (("p", "STRING"), ("k", "BIGINT"), ("v", "STRING"), ("op", "STRING"))
    table = _create(catalog, "pk_minor", _fields(*columns), {"bucket": BUCKETS, "rowkind.field": "op"})
    w = _Writer(table)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    p = PARTITIONS[1]
    w.commit(
        [
            {"p": p, "k": k, "v": "".join(rng.choice(letters) for _ in range(24)), "op": "+I"}
            for k in range(800)
        ]
    )
    w.commit([{"p": p, "k": k, "v": f"c2-{k}", "op": "+U"} for k in rng.sample(range(800), 6)])
    w.commit([{"p": p, "k": k, "v": None, "op": "-D"} for k in rng.sample(range(800), 3)], tag="t3")
    return _summary(table, w.commits)


def build_dedup_seq(catalog: Any, rng: random.Random) -> dict[str, Any]:
    columns = (("p", "STRING"), ("k", "BIGINT"), ("ts", "BIGINT"), ("v", "STRING"))
    table = _create(catalog, "pk_dedup_seq", _fields(*columns), {"bucket": BUCKETS, "sequence.field": "ts"})
    w = _Writer(table)
    parts = PARTITIONS[:2]
    for commit in range(1, 13):
        rows = []
        for p in parts:
            for k in rng.sample(range(16), rng.randint(3, 6)):
                late = rng.random() < 0.3
                ts = rng.randint(0, commit * 10 - 5) if late else commit * 10
                rows.append({"p": p, "k": k, "ts": ts, "v": f"c{commit}{'-late' if late else ''}"})
        if commit in (4, 5):  # the same ts for key 99 twice: the later commit (higher sequence) wins
            rows.append({"p": parts[0], "k": 99, "ts": 42, "v": f"tie-c{commit}"})
        w.commit(rows, tag={6: "t6"}.get(commit))
    return _summary(table, w.commits)


def build_partial(catalog: Any, rng: random.Random) -> dict[str, Any]:
    columns = (("p", "STRING"), ("k", "BIGINT"), ("a", "STRING"), ("b", "BIGINT"), ("c", "DOUBLE"))
    options = {"bucket": BUCKETS, "merge-engine": "partial-update"}
    table = _create(catalog, "pk_partial", _fields(*columns), options)
    w = _Writer(table)
    for commit in range(1, 13):
        rows = []
        for p in (PARTITIONS[0], PARTITIONS[2]):
            for k in rng.sample(range(12), rng.randint(2, 5)):
                row: dict[str, Any] = {"p": p, "k": k}
                for name in rng.sample(["a", "b", "c"], rng.randint(1, 2)):
                    row[name] = {"a": f"a{commit}", "b": commit * 100 + k, "c": commit + k / 4}[name]
                rows.append(row)
        w.commit(rows, tag={5: "t5", 10: "t10"}.get(commit))
    return _summary(table, w.commits)


def build_agg(catalog: Any, rng: random.Random) -> dict[str, Any]:
    columns = (("p", "STRING"), ("k", "BIGINT"), *((n, t) for n, (t, _f) in AGG_FUNCTIONS.items()))
    options = {"bucket": BUCKETS, "merge-engine": "aggregation"}
    options.update({f"fields.{n}.aggregate-function": f for n, (_t, f) in AGG_FUNCTIONS.items() if f})
    table = _create(catalog, "pk_agg", _fields(*columns), options)
    w = _Writer(table)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.2 else value

    for commit in range(1, 13):
        rows = []
        for p in PARTITIONS[:2]:
            for k in rng.sample(range(10), rng.randint(2, 5)):
                rows.append(
                    {
                        "p": p,
                        "k": k,
                        "s": maybe(rng.randint(-50, 50)),
                        "pr": maybe(rng.choice([1, 2, 3, -1])),
                        "mx": maybe(rng.randint(-1000, 1000)),
                        "mn": maybe(rng.randint(-1000, 1000) / 8),
                        "lv": maybe(f"lv{commit}"),
                        "lnn": maybe(f"lnn{commit}"),
                        "fv": maybe(f"fv{commit}"),
                        "fnn": maybe(f"fnn{commit}"),
                        "bo": maybe(rng.random() < 0.2),
                        "ba": maybe(rng.random() < 0.8),
                        "la": maybe(f"l{commit}"),
                        "dflt": maybe(f"d{commit}"),
                    }
                )
        w.commit(rows, tag={4: "t4", 9: "t9"}.get(commit))
    return _summary(table, w.commits)


def build_first_row(catalog: Any, rng: random.Random) -> dict[str, Any]:
    columns = (("p", "STRING"), ("k", "BIGINT"), ("v", "STRING"), ("n", "BIGINT"))
    options = {"bucket": BUCKETS, "merge-engine": "first-row"}
    table = _create(catalog, "pk_first_row", _fields(*columns), options)
    w = _Writer(table)
    first: dict[tuple[str, int], dict[str, Any]] = {}
    for commit in range(1, 11):
        rows = []
        for p in (PARTITIONS[1], PARTITIONS[2]):
            for k in rng.sample(range(14), rng.randint(2, 5)):
                rows.append({"p": p, "k": k, "v": f"c{commit}-{rng.randint(0, 99)}", "n": commit})
                first.setdefault((p, k), rows[-1])
        w.commit(rows, tag={3: "t3", 8: "t8"}.get(commit))
    expected = sorted(first.values(), key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
    return _summary(table, w.commits, expectedRows=expected)


def build_upgrade(catalog: Any, rng: random.Random) -> dict[str, Any]:
    """Small ``target-file-size``: single-file sections big enough to be upgraded instead of rewritten.

    pypaimon 2.1 writes ``_DELETE_ROW_COUNT = 0`` even for files holding -D rows (``data_writer.py``), so a
    compactor that trusts it would upgrade the -D file of commit 2 to the max level unchanged, where
    raw-convertible reads (pypaimon's and Java's) return its retractions as rows.
    """
    columns = (("p", "STRING"), ("k", "BIGINT"), ("v", "STRING"), ("op", "STRING"))
    options = {"bucket": BUCKETS, "rowkind.field": "op", "target-file-size": "2 kb"}
    table = _create(catalog, "pk_upgrade", _fields(*columns), options)
    w = _Writer(table)

    def value(k: int) -> str:
        return f"{k}-" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40))

    w.commit([{"p": PARTITIONS[0], "k": k, "v": value(k), "op": "+I"} for k in range(60)])
    w.commit(
        [
            {"p": PARTITIONS[0], "k": k, "v": value(k), "op": "-D" if k % 7 == 0 else "+I"}
            for k in range(1000, 1060)
        ]
    )
    w.commit([{"p": PARTITIONS[0], "k": k, "v": value(k), "op": "+I"} for k in (3, 4, 5)], tag="t3")
    return _summary(table, w.commits)


def _refused(name: str, options: dict[str, str]) -> Callable[[Any, random.Random], dict[str, Any]]:
    def build(catalog: Any, rng: random.Random) -> dict[str, Any]:
        columns = (("p", "STRING"), ("k", "BIGINT"), ("v", "STRING"))
        table = _create(catalog, name, _fields(*columns), options)
        w = _Writer(table)
        for commit in (1, 2):
            w.commit([{"p": p, "k": k, "v": f"c{commit}"} for p in PARTITIONS[:2] for k in range(commit, 6)])
        return _summary(table, w.commits)

    return build


PK_TABLES: dict[str, Callable[[Any, random.Random], dict[str, Any]]] = {
    "pk_dedup": build_dedup,
    "pk_minor": build_minor,
    "pk_dedup_seq": build_dedup_seq,
    "pk_partial": build_partial,
    "pk_agg": build_agg,
    "pk_first_row": build_first_row,
    "pk_upgrade": build_upgrade,
    "pk_lookup": _refused("pk_lookup", {"bucket": BUCKETS, "changelog-producer": "lookup"}),
    "pk_dv": _refused("pk_dv", {"bucket": BUCKETS, "deletion-vectors.enabled": "true"}),
    "pk_postpone": _refused("pk_postpone", {"bucket": "-2"}),
}


# ---- commands -----------------------------------------------------------------------------------


def cmd_pk_build(args: argparse.Namespace) -> dict[str, Any]:
    """Build every table of :data:`PK_TABLES` into a new warehouse."""
    from pypaimon._version import VERSION

    warehouse = os.path.abspath(args.warehouse)
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(DB, True)
    tables = {name: build(catalog, random.Random(f"{SEED}-{name}")) for name, build in PK_TABLES.items()}
    return {"pypaimonVersion": VERSION, "warehouse": warehouse, "database": DB, "tables": tables}


def cmd_pk_upserts(args: argparse.Namespace) -> dict[str, Any]:
    """Commit rows to a table: all in one commit, or one commit per row with ``--each``. With ``--prepared``
    and ``--proceed`` (two file paths), the first commit's files are written and its sequence numbers taken,
    then the file ``--prepared`` is created and the commit waits (at most ``--wait`` seconds) for the file
    ``--proceed`` to appear: the caller runs whatever should race the commit in between."""
    from pypaimon.table.file_store_table import FileStoreTable

    path = os.path.abspath(args.table_path)
    with open(args.rows, encoding="utf-8") as handle:
        rows = json.load(handle)
    table = FileStoreTable.from_path(path)
    batches = [[row] for row in rows] if args.each else [rows]

    def hold() -> None:
        with open(args.prepared, "w", encoding="utf-8"):
            pass
        deadline = time.monotonic() + args.wait
        while not os.path.exists(args.proceed):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args.proceed} did not appear within {args.wait} s; nothing committed")
            time.sleep(0.02)

    for index, batch in enumerate(batches):
        write_rows(table, batch, hold if index == 0 and args.prepared else None)
    return {"commits": len(batches), "rowCount": len(rows)}


def add_pk_commands(sub: Any) -> None:
    """Register ``pk-build`` and ``pk-upserts`` on the oracle's subcommand parser."""
    build = sub.add_parser("pk-build", help="write the primary-key compaction fixture tables")
    build.add_argument("warehouse")
    build.set_defaults(func=cmd_pk_build)
    upserts = sub.add_parser("pk-upserts", help="commit rows to a primary-key table")
    upserts.add_argument("table_path")
    upserts.add_argument("--rows", required=True, help="JSON file: a list of row objects")
    upserts.add_argument("--each", action="store_true", help="one commit per row")
    upserts.add_argument("--prepared", help="created once the first commit's files are written")
    upserts.add_argument("--proceed", help="the first commit waits for this file (with --prepared)")
    upserts.add_argument("--wait", type=float, default=120.0, help="seconds to wait for --proceed")
    upserts.set_defaults(func=cmd_pk_upserts)
