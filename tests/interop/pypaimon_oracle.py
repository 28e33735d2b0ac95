"""pypaimon oracle: the real Paimon peer used by the interop tests.

Run ONLY with the interpreter of the separate pypaimon virtualenv (``.venv-pypaimon/bin/python``,
created by ``scripts/setup.sh`` from ``requirements/pypaimon.lock``).  pypaimon pins ``cachetools<6``
and cannot be installed next to Airflow 3.3, so the main package and the main test process never
import it; they call this script through a subprocess (see ``tests/support/pypaimon.py``).

Every subcommand prints exactly one JSON document on stdout (diagnostics go to stderr):

    build WAREHOUSE SCENARIO [SCENARIO ...]   write tables with pypaimon's filesystem catalog (db ``db``)
    plan TABLE_PATH [--snapshot N | --tag NAME | --all]
    read TABLE_PATH [--snapshot N | --tag NAME] [--with-partition]   (each row with its split's _partition)
    append TABLE_PATH --rows JSON_FILE
    batch [FILE]                              several of the above in one process; FILE (default stdin)
                                              holds a JSON list of argument lists; prints the list of results
    serve                                     a long-lived server: JSON lines in, JSON lines out (below)

``serve`` (what ``tests/support/pypaimon.py`` runs, one per pytest process) pays pypaimon's import
once. Each stdin line is a request ``{"argv": [...], "stdin": optional text}``, run exactly as the CLI
runs ``argv`` with that text on stdin; each answer is one line on the real stdout:
``{"ok": true, "result": DOCUMENT}`` or ``{"ok": false, "code": EXIT_STATUS, "error": TEXT}`` (the exit
status the CLI would have had; TEXT is the request's stderr and the message or traceback). File
descriptor 1 points at stderr while serving, so nothing pypaimon prints reaches the protocol. Requests
share nothing: every command opens its catalog and tables afresh (pypaimon 2.1.0's caches, e.g. the
filesystem catalog's file IO and SchemaManager's schemas, live on those objects, not in modules), and
the environment and working directory are restored after each request.

Value normalisation (shared with the ``lakeformat`` CLI): NULL -> null, BOOLEAN -> bool,
integer types -> int, FLOAT/DOUBLE -> float, character types -> str, DATE -> "YYYY-MM-DD",
TIME -> time.isoformat(), TIMESTAMP (any precision, with or without local time zone) -> naive
datetime.isoformat() (LTZ values in UTC), DECIMAL -> str(Decimal) at the column scale,
BINARY/VARBINARY/BYTES -> lowercase hex.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import decimal
import io
import json
import logging
import os
import random
import re
import sys
import traceback
import warnings
from typing import Any

# pypaimon/pyarrow/pandas emit warnings and log lines; keep stdout for the JSON document only.
warnings.filterwarnings("ignore")
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

import pyarrow as pa  # noqa: E402  (after the warning filters on purpose)
from pypaimon import CatalogFactory, Schema  # noqa: E402
from pypaimon.consumer.consumer import Consumer  # noqa: E402
from pypaimon.schema.data_types import AtomicType, DataField, PyarrowFieldParser  # noqa: E402
from pypaimon.table.file_store_table import FileStoreTable  # noqa: E402
from pypaimon.table.row.generic_row import GenericRowDeserializer  # noqa: E402
from pypaimon_pk_scenarios import add_pk_commands  # noqa: E402  (primary-key compaction tables)

DB = "db"
SEED = 20240101
EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH_DATETIME = dt.datetime(1970, 1, 1)
WIDE_DECIMAL = decimal.Context(prec=100)


class OracleError(Exception):
    """A precondition failed; reported on stderr with exit status 2."""


# ----------------------------------------------------------------------------------------------
# Value normalisation
# ----------------------------------------------------------------------------------------------


def _type_name(data_type: Any) -> str:
    """The SQL type string without NOT NULL, upper-case ("DECIMAL(10, 2)", "TIMESTAMP(3)", ...)."""
    name = getattr(data_type, "type", None)
    if not isinstance(name, str):
        return type(data_type).__name__.upper()
    name = name.upper().strip()
    if name.endswith(" NOT NULL"):
        name = name[: -len(" NOT NULL")]
    return name


def _decimal_scale(type_name: str) -> int:
    match = re.fullmatch(r"(?:DECIMAL|NUMERIC)(?:\((\d+)(?:,\s*(\d+))?\))?", type_name)
    if match is None or match.group(2) is None:
        return 0
    return int(match.group(2))


def _naive_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _to_datetime(value: Any) -> dt.datetime:
    if hasattr(value, "to_pydatetime"):  # pandas.Timestamp (arrow ns timestamps)
        value = value.to_pydatetime(warn=False)
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, int):  # epoch millis (internal compact representation)
        return EPOCH_DATETIME + dt.timedelta(milliseconds=value)
    raise TypeError(f"cannot interpret {value!r} as a timestamp")


def normalize_typed(value: Any, type_name: str) -> Any:
    """Normalise one value of a column whose Paimon type string is ``type_name``."""
    if value is None:
        return None
    if type_name in ("BOOLEAN", "BOOL"):
        return bool(value)
    if type_name in ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT"):
        return int(value)
    if type_name in ("FLOAT", "REAL", "DOUBLE"):
        return float(value)
    if type_name.startswith(("DECIMAL", "NUMERIC")):
        scale = _decimal_scale(type_name)
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        # DECIMAL(38, s) needs more digits than the default context's 28.
        return str(number.quantize(decimal.Decimal(1).scaleb(-scale), context=WIDE_DECIMAL))
    if type_name == "DATE":
        if isinstance(value, int):
            value = EPOCH_DATE + dt.timedelta(days=value)
        if isinstance(value, dt.datetime):
            value = value.date()
        return value.isoformat()
    if type_name.startswith("TIMESTAMP"):
        return _naive_utc(_to_datetime(value)).isoformat()
    if type_name.startswith("TIME"):
        if isinstance(value, int):  # millis of day
            value = (EPOCH_DATETIME + dt.timedelta(milliseconds=value)).time()
        return value.isoformat()
    if type_name.startswith(("BINARY", "VARBINARY", "BYTES")):
        return bytes(value).hex()
    if type_name.startswith(("CHAR", "VARCHAR", "STRING")):
        return str(value)
    return normalize_untyped(value)


def normalize_untyped(value: Any) -> Any:
    """Normalise a value by its Python type (used for row data read through Arrow)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if hasattr(value, "to_pydatetime") or isinstance(value, dt.datetime):
        return _naive_utc(_to_datetime(value)).isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): normalize_untyped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize_untyped(v) for v in value]
    raise TypeError(f"cannot normalise {type(value).__name__}: {value!r}")


def denormalize_typed(value: Any, type_name: str) -> Any:
    """Inverse of :func:`normalize_typed`: a JSON value to what pyarrow expects for the column."""
    if value is None:
        return None
    if type_name.startswith(("DECIMAL", "NUMERIC")):
        return decimal.Decimal(str(value))
    if type_name == "DATE":
        return dt.date.fromisoformat(value)
    if type_name.startswith("TIMESTAMP"):
        parsed = dt.datetime.fromisoformat(value)
        if "LOCAL TIME ZONE" in type_name or type_name.startswith("TIMESTAMP_LTZ"):
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        return parsed
    if type_name.startswith("TIME"):
        return dt.time.fromisoformat(value)
    if type_name.startswith(("BINARY", "VARBINARY", "BYTES")):
        return bytes.fromhex(value)
    if type_name in ("FLOAT", "REAL", "DOUBLE"):
        return float(value)
    return value


def _dump(document: Any) -> None:
    sys.stdout.write(json.dumps(document, sort_keys=True, ensure_ascii=False, allow_nan=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _sort_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


# ----------------------------------------------------------------------------------------------
# Table helpers
# ----------------------------------------------------------------------------------------------


def _field(field_id: int, name: str, type_name: str) -> DataField:
    return DataField(field_id, name, AtomicType(type_name))


def _arrow_schema(table: FileStoreTable) -> pa.Schema:
    return PyarrowFieldParser.from_paimon_schema(table.fields)


def _column_types(table: FileStoreTable) -> dict[str, str]:
    return {field.name: _type_name(field.type) for field in table.fields}


def _write(
    table: FileStoreTable, rows: list[dict[str, Any]], overwrite: dict[str, Any] | None = None
) -> None:
    """One pypaimon commit with ``rows`` (an overwrite of ``overwrite`` partition when given)."""
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(overwrite)
    writer = builder.new_write()
    committer = builder.new_commit()
    try:
        writer.write_arrow(pa.Table.from_pylist(rows, schema=_arrow_schema(table)))
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()


def _snapshot_ids(table_path: str) -> list[int]:
    directory = os.path.join(table_path, "snapshot")
    if not os.path.isdir(directory):
        return []
    ids = []
    for name in os.listdir(directory):
        match = re.fullmatch(r"snapshot-(\d+)", name)
        if match:
            ids.append(int(match.group(1)))
    return sorted(ids)


def _tag_names(table_path: str) -> list[str]:
    directory = os.path.join(table_path, "tag")
    if not os.path.isdir(directory):
        return []
    return sorted(name[len("tag-") :] for name in os.listdir(directory) if name.startswith("tag-"))


def _consumers(table_path: str) -> dict[str, int]:
    directory = os.path.join(table_path, "consumer")
    if not os.path.isdir(directory):
        return {}
    result = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("consumer-"):
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                result[name[len("consumer-") :]] = int(json.load(handle)["nextSnapshot"])
    return result


def _table_summary(table: FileStoreTable) -> dict[str, Any]:
    path = os.path.abspath(_local_path(table.table_path))
    return {
        "path": path,
        "snapshots": _snapshot_ids(path),
        "tags": _tag_names(path),
        "consumers": _consumers(path),
        "partitionKeys": list(table.partition_keys),
        "primaryKeys": list(table.primary_keys),
        "columnTypes": _column_types(table),
        "options": dict(table.table_schema.options),
    }


def _local_path(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def open_table(table_path: str) -> FileStoreTable:
    """Open a table from its directory: via the filesystem catalog when laid out as one."""
    table_path = os.path.abspath(table_path)
    if not os.path.isdir(os.path.join(table_path, "schema")):
        raise OracleError(f"not a Paimon table (no schema/ directory): {table_path}")
    db_dir = os.path.dirname(table_path)
    if db_dir.endswith(".db"):
        catalog = CatalogFactory.create({"warehouse": os.path.dirname(db_dir)})
        database = os.path.basename(db_dir)[: -len(".db")]
        return catalog.get_table(f"{database}.{os.path.basename(table_path)}")
    return FileStoreTable.from_path(table_path)


# ----------------------------------------------------------------------------------------------
# build: scenarios
# ----------------------------------------------------------------------------------------------


def _create(catalog: Any, name: str, schema: Schema) -> FileStoreTable:
    catalog.create_table(f"{DB}.{name}", schema, False)
    return catalog.get_table(f"{DB}.{name}")


ESCAPE_STRINGS = [
    "a/b:c=d",
    "x#y%z?",
    "sp ace",
    "quote'\"",
    "é",
    "br{a}[c]^*\\",
    "tab\tcontrol\x01",
]


def scenario_append_partitioned(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema(
        [
            _field(0, "d", "DATE"),
            _field(1, "s", "STRING"),
            _field(2, "id", "BIGINT"),
            _field(3, "v", "STRING"),
            _field(4, "x", "DOUBLE"),
        ],
        partition_keys=["d", "s"],
    )
    table = _create(catalog, "append_partitioned", schema)
    d1, d2 = dt.date(2024, 1, 1), dt.date(2024, 2, 29)
    commits: list[list[tuple[Any, Any]]] = [
        [(d1, "plain"), (d1, ESCAPE_STRINGS[0]), (d2, ESCAPE_STRINGS[1])],
        [(d1, ESCAPE_STRINGS[2]), (d2, ESCAPE_STRINGS[3]), (d1, "plain")],
        [(d1, ESCAPE_STRINGS[4]), (d2, ESCAPE_STRINGS[5]), (d2, ESCAPE_STRINGS[6])],
        # NULL, empty and whitespace-only strings all land in __DEFAULT_PARTITION__ directories.
        [(d1, None), (d1, ""), (d2, " "), (d2, None)],
        [(None, "plain"), (None, None), (d1, "plain")],
    ]
    next_id = 0
    for partitions in commits:
        rows = []
        for d, s in partitions:
            for _ in range(rng.randint(1, 3)):
                rows.append({"d": d, "s": s, "id": next_id, "v": f"v{rng.randint(0, 999)}", "x": next_id / 4})
                next_id += 1
        _write(table, rows)
    return _table_summary(table)


def scenario_pk_buckets(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema(
        [
            _field(0, "pk", "BIGINT"),
            _field(1, "p", "STRING"),
            _field(2, "v", "STRING"),
            _field(3, "n", "BIGINT"),
        ],
        partition_keys=["p"],
        primary_keys=["p", "pk"],
        options={"bucket": "4"},
    )
    table = _create(catalog, "pk_buckets", schema)
    # Overlapping key ranges: every commit rewrites keys that earlier commits wrote.
    for commit, (low, high) in enumerate([(0, 24), (10, 34), (0, 40), (5, 15), (20, 44)]):
        rows = [
            {"pk": key, "p": part, "v": f"c{commit}-{rng.randint(0, 99)}", "n": commit}
            for part in ("p0", "p1")
            for key in range(low, high)
        ]
        _write(table, rows)
    return _table_summary(table)


def scenario_unpartitioned(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema([_field(0, "id", "BIGINT"), _field(1, "v", "STRING")])
    table = _create(catalog, "unpartitioned", schema)
    next_id = 0
    for _ in range(3):
        rows = []
        for _ in range(rng.randint(2, 5)):
            rows.append({"id": next_id, "v": f"v{rng.randint(0, 999)}"})
            next_id += 1
        _write(table, rows)
    return _table_summary(table)


def scenario_unpartitioned_pk(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema(
        [_field(0, "pk", "BIGINT"), _field(1, "v", "STRING")],
        primary_keys=["pk"],
        options={"bucket": "3"},
    )
    table = _create(catalog, "unpartitioned_pk", schema)
    for commit, (low, high) in enumerate([(0, 20), (10, 30), (5, 25)]):
        _write(table, [{"pk": key, "v": f"c{commit}-{rng.randint(0, 99)}"} for key in range(low, high)])
    return _table_summary(table)


def scenario_overwrite_tag_consumer(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema(
        [_field(0, "dt", "STRING"), _field(1, "id", "BIGINT"), _field(2, "v", "STRING")],
        partition_keys=["dt"],
    )
    table = _create(catalog, "overwrite_tag_consumer", schema)
    next_id = 0

    def rows_for(*dts: str) -> list[dict[str, Any]]:
        nonlocal next_id
        rows = []
        for value in dts:
            for _ in range(2):
                rows.append({"dt": value, "id": next_id, "v": f"v{rng.randint(0, 999)}"})
                next_id += 1
        return rows

    _write(table, rows_for("2024-01-01", "2024-01-02"))  # snapshot 1
    _write(table, rows_for("2024-01-01"))  # snapshot 2
    _write(table, rows_for("2024-01-02", "2024-01-03"))  # snapshot 3
    table.create_tag("before_overwrite", snapshot_id=3)
    # snapshot 4: OVERWRITE of dt=2024-01-01 -> DELETE entries for the partition's old files
    _write(table, rows_for("2024-01-01"), overwrite={"dt": "2024-01-01"})
    _write(table, rows_for("2024-01-03"))  # snapshot 5
    table.create_tag("after")  # latest snapshot
    table.consumer_manager().reset_consumer("my-consumer", Consumer(next_snapshot=2))
    return _table_summary(table)


def scenario_pk_overwrite_history(catalog: Any, rng: random.Random) -> dict[str, Any]:
    """A history in which expiry has data files to delete and files to keep for tags.

    pypaimon never compacts data, so overwrites are what DELETE data files. Files added after a tag
    and overwritten later are unprotected; files a tag still holds must survive expiry. Snapshot 6
    (the consumer's next snapshot) is itself an overwrite, so the first retained snapshot's delta
    DELETEs files too.
    """
    schema = Schema(
        [
            _field(0, "pk", "BIGINT"),
            _field(1, "p", "STRING"),
            _field(2, "v", "STRING"),
            _field(3, "n", "BIGINT"),
        ],
        partition_keys=["p"],
        primary_keys=["p", "pk"],
        options={"bucket": "3"},
    )
    table = _create(catalog, "pk_overwrite_history", schema)
    commit = 0

    def write(parts: tuple[str, ...], low: int, high: int, overwrite: bool = False) -> None:
        nonlocal commit
        commit += 1
        rows = [
            {"pk": key, "p": part, "v": f"c{commit}-{rng.randint(0, 99)}", "n": commit}
            for part in parts
            for key in range(low, high)
        ]
        _write(table, rows, overwrite={"p": parts[0]} if overwrite else None)

    write(("p0", "p1", "p2"), 0, 12)  # 1
    write(("p0",), 6, 18)  # 2
    table.create_tag("early", snapshot_id=2)
    write(("p1",), 4, 16)  # 3
    write(("p1",), 0, 10, overwrite=True)  # 4: DELETEs p1 of 1 (tag early) and of 3
    write(("p2",), 3, 9)  # 5
    write(("p2",), 0, 6, overwrite=True)  # 6: DELETEs p2 of 1 (tag early) and of 5
    write(("p0",), 0, 8)  # 7
    write(("p0",), 2, 14, overwrite=True)  # 8: DELETEs p0 of 1, 2 (tag early) and of 7
    table.create_tag("mid", snapshot_id=8)
    write(("p1",), 8, 20)  # 9
    write(("p1",), 0, 5, overwrite=True)  # 10: DELETEs p1 of 4 (tag mid) and of 9
    write(("p2",), 1, 4)  # 11
    write(("p0",), 3, 7, overwrite=True)  # 12: DELETEs p0 of 8 (tag mid)
    write(("p1",), 2, 9)  # 13
    table.consumer_manager().reset_consumer("reader", Consumer(next_snapshot=6))
    return _table_summary(table)


def scenario_many_commits(catalog: Any, rng: random.Random) -> dict[str, Any]:
    schema = Schema(
        [_field(0, "k", "INT"), _field(1, "id", "BIGINT"), _field(2, "v", "STRING")],
        partition_keys=["k"],
    )
    table = _create(catalog, "many_commits", schema)
    next_id = 0
    for _ in range(45):
        rows = []
        for _ in range(rng.randint(1, 3)):
            rows.append({"k": rng.randint(0, 3), "id": next_id, "v": f"v{rng.randint(0, 999)}"})
            next_id += 1
        _write(table, rows)
    return _table_summary(table)


# (column name, Paimon type, value in row A, value in row B). Row C has NULL everywhere.
TYPED_PARTITION_COLUMNS: list[tuple[str, str, Any, Any]] = [
    ("p_boolean", "BOOLEAN", True, False),
    ("p_tinyint", "TINYINT", -5, 127),
    ("p_smallint", "SMALLINT", 300, -32768),
    ("p_int", "INT", 70000, -2147483648),
    ("p_bigint", "BIGINT", 2**40, -(2**63)),
    ("p_float", "FLOAT", 1.5, -2.25),
    ("p_double", "DOUBLE", 2.25, -0.5),
    ("p_decimal_10_2", "DECIMAL(10, 2)", decimal.Decimal("12.30"), decimal.Decimal("-99999999.99")),
    ("p_decimal_18_4", "DECIMAL(18, 4)", decimal.Decimal("12345678901234.5678"), decimal.Decimal("0.0001")),
    (
        "p_decimal_38_10",
        "DECIMAL(38, 10)",
        decimal.Decimal("12345678901234567890.0123456789"),
        decimal.Decimal("-0.5000000000"),
    ),
    ("p_date", "DATE", dt.date(2024, 1, 2), dt.date(1969, 12, 31)),
    ("p_time", "TIME", dt.time(3, 4, 5), dt.time(23, 59, 59)),
    ("p_time_3", "TIME(3)", dt.time(3, 4, 5, 123000), dt.time(0, 0, 0, 1000)),
    ("p_ts_0", "TIMESTAMP(0)", dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(1999, 12, 31, 23, 59, 59)),
    (
        "p_ts_3",
        "TIMESTAMP(3)",
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        dt.datetime(1969, 7, 20, 20, 17, 40),
    ),
    ("p_ts_6", "TIMESTAMP(6)", dt.datetime(2024, 1, 2, 3, 4, 5, 123456), dt.datetime(2000, 1, 1, 0, 0, 0, 1)),
    ("p_ts_9", "TIMESTAMP(9)", dt.datetime(2024, 1, 2, 3, 4, 5, 123456), dt.datetime(2038, 1, 19, 3, 14, 8)),
    (
        "p_ts_ltz_3",
        "TIMESTAMP(3) WITH LOCAL TIME ZONE",
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=dt.timezone.utc),
        dt.datetime(2020, 2, 29, 12, 0, 0, tzinfo=dt.timezone.utc),
    ),
    (
        "p_ts_ltz_6",
        "TIMESTAMP(6) WITH LOCAL TIME ZONE",
        dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc),
        dt.datetime(2020, 2, 29, 12, 0, 0, 654321, tzinfo=dt.timezone.utc),
    ),
    ("p_string", "STRING", "héllo wörld, long", "short"),
    ("p_varchar", "VARCHAR(20)", "abc", "seven77"),
    ("p_char", "CHAR(5)", "abcde", "vwxyz"),
    ("p_binary", "BINARY(4)", b"\x01\x02\x03\x04", b"\xff\xfe\x00\x80"),
    ("p_varbinary", "VARBINARY(10)", b"\xff\x00", b"\x00\x01\x02\x03\x04\x05\x06\x07\x08"),
    ("p_bytes", "BYTES", b"\xde\xad\xbe\xef\x00\x01\x02\x03\x04", b""),
]


def _probe_partition_type(catalog: Any, index: int, type_name: str, value: Any) -> str | None:
    """Try one single-key table; returns None if pypaimon handles the type, else the reason."""
    name = f"_probe_{index}"
    try:
        table = _create(
            catalog,
            name,
            Schema([_field(0, "p", type_name), _field(1, "v", "BIGINT")], partition_keys=["p"]),
        )
        _write(table, [{"p": value, "v": 1}, {"p": None, "v": 2}])
        read_builder = table.new_read_builder()
        rows = read_builder.new_read().to_arrow(read_builder.new_scan().plan().splits()).to_pylist()
        got = sorted(normalize_typed(row["p"], type_name) is None for row in rows)
        if got != [False, True]:
            return f"read back {rows!r}"
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:500]
    finally:
        with contextlib.suppress(Exception):
            catalog.drop_table(f"{DB}.{name}", True)


def scenario_typed_partitions(catalog: Any, rng: random.Random) -> dict[str, Any]:
    skipped: dict[str, str] = {}
    columns = []
    for index, (column, type_name, value_a, _value_b) in enumerate(TYPED_PARTITION_COLUMNS):
        reason = _probe_partition_type(catalog, index, type_name, value_a)
        if reason is None:
            columns.append((column, type_name))
        else:
            skipped[type_name] = reason
    fields = [_field(i, column, type_name) for i, (column, type_name) in enumerate(columns)]
    fields.append(_field(len(fields), "id", "BIGINT"))
    fields.append(_field(len(fields), "v", "STRING"))
    table = _create(catalog, "typed_partitions", Schema(fields, partition_keys=[c for c, _ in columns]))
    by_column = {column: (value_a, value_b) for column, _t, value_a, value_b in TYPED_PARTITION_COLUMNS}
    next_id = 0
    for variant in ("A", "B", "C"):  # one commit per partition row, two data rows each
        rows = []
        for _ in range(2):
            row: dict[str, Any] = {"id": next_id, "v": f"{variant}{rng.randint(0, 999)}"}
            for column, _type_name in columns:
                row[column] = {"A": by_column[column][0], "B": by_column[column][1], "C": None}[variant]
            rows.append(row)
            next_id += 1
        _write(table, rows)
    summary = _table_summary(table)
    summary["skipped_types"] = skipped
    summary["partitionTypes"] = [type_name for _c, type_name in columns]
    summary["partitionRows"] = _partition_rows(table)
    return summary


def _partition_rows(table: FileStoreTable) -> list[dict[str, Any]]:
    """Golden data: every distinct ``_PARTITION`` BinaryRow (hex) in the latest snapshot's manifests,
    read straight from the Avro files pypaimon wrote, with the values decoded and normalised."""
    import fastavro

    path = _local_path(table.table_path)
    snapshot_id = max(_snapshot_ids(path))
    with open(os.path.join(path, "snapshot", f"snapshot-{snapshot_id}"), encoding="utf-8") as handle:
        snapshot = json.load(handle)
    manifest_dir = os.path.join(path, "manifest")
    partitions: dict[bytes, None] = {}
    for list_name in (snapshot["baseManifestList"], snapshot["deltaManifestList"]):
        with open(os.path.join(manifest_dir, list_name), "rb") as handle:
            manifests = [record["_FILE_NAME"] for record in fastavro.reader(handle)]
        for manifest in manifests:
            with open(os.path.join(manifest_dir, manifest), "rb") as handle:
                for entry in fastavro.reader(handle):
                    partitions.setdefault(bytes(entry["_PARTITION"]), None)
    types = [_type_name(field.type) for field in table.partition_keys_fields]
    result = []
    for raw in partitions:
        row = GenericRowDeserializer.from_bytes(raw, table.partition_keys_fields)
        values = {
            key: normalize_typed(value, type_name)
            for key, value, type_name in zip(table.partition_keys, row.values, types, strict=True)
        }
        result.append({"hex": raw.hex(), "values": values})
    return sorted(result, key=lambda item: item["hex"])


SCENARIOS = {
    "append_partitioned": scenario_append_partitioned,
    "pk_buckets": scenario_pk_buckets,
    "unpartitioned": scenario_unpartitioned,
    "unpartitioned_pk": scenario_unpartitioned_pk,
    "overwrite_tag_consumer": scenario_overwrite_tag_consumer,
    "many_commits": scenario_many_commits,
    "typed_partitions": scenario_typed_partitions,
    "pk_overwrite_history": scenario_pk_overwrite_history,
}


def cmd_build(args: argparse.Namespace) -> dict[str, Any]:
    names = list(SCENARIOS) if args.scenarios == ["all"] else args.scenarios
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise OracleError(f"unknown scenario(s) {unknown}; known: {sorted(SCENARIOS)} or 'all'")
    warehouse = os.path.abspath(args.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(DB, True)
    tables = {}
    skipped_types: dict[str, str] = {}
    for name in names:
        # One generator per scenario: a table's data does not depend on which others are built.
        rng = random.Random(f"{SEED}-{name}")
        tables[name] = SCENARIOS[name](catalog, rng)
        skipped_types.update(tables[name].get("skipped_types", {}))
    from pypaimon._version import VERSION

    return {
        "pypaimonVersion": VERSION,
        "warehouse": warehouse,
        "database": DB,
        "tables": tables,
        "skipped_types": skipped_types,
    }


# ----------------------------------------------------------------------------------------------
# plan / read / append
# ----------------------------------------------------------------------------------------------


def _travel(table: FileStoreTable, snapshot: int | None, tag: str | None) -> tuple[FileStoreTable, int]:
    """The table pinned to a snapshot or tag, and the snapshot id it must resolve to.

    pypaimon's ``copy()`` silently falls back to the latest snapshot when time travel fails
    (it swallows the exception), so the target is checked up front and the result afterwards."""
    path = _local_path(table.table_path)
    if tag is not None:
        tag_file = os.path.join(path, "tag", f"tag-{tag}")
        if not os.path.isfile(tag_file):
            raise OracleError(f"no tag {tag!r} in {path}")
        with open(tag_file, encoding="utf-8") as handle:
            expected = int(json.load(handle)["id"])
        return table.copy({"scan.tag-name": tag}), expected
    ids = _snapshot_ids(path)
    if not ids:
        raise OracleError(f"table has no snapshot: {path}")
    if snapshot is None:
        return table, ids[-1]
    if snapshot not in ids:
        raise OracleError(f"no snapshot {snapshot} in {path} (have {ids})")
    return table.copy({"scan.snapshot-id": str(snapshot)}), snapshot


def _plan(table: FileStoreTable, snapshot: int | None, tag: str | None) -> dict[str, Any]:
    pinned, expected = _travel(table, snapshot, tag)
    scan = pinned.new_read_builder().new_scan()
    plan = scan.plan()
    if plan.snapshot_id is not None and plan.snapshot_id != expected:
        raise OracleError(f"pypaimon planned snapshot {plan.snapshot_id}, expected {expected}")
    keys = list(pinned.partition_keys)
    types = [_type_name(field.type) for field in pinned.partition_keys_fields]
    files = []
    for split in plan.splits():
        values = list(split.partition.values) if keys else []
        partition = {
            key: normalize_typed(value, t) for key, value, t in zip(keys, values, types, strict=True)
        }
        for meta in split.files:
            files.append(
                {
                    "fileName": meta.file_name,
                    "rowCount": meta.row_count,
                    "fileSize": meta.file_size,
                    "partition": partition,
                    "bucket": split.bucket,
                    "level": meta.level,
                    "minSequenceNumber": meta.min_sequence_number,
                    "maxSequenceNumber": meta.max_sequence_number,
                }
            )
    files.sort(
        key=lambda f: (
            json.dumps(f["partition"], sort_keys=True, ensure_ascii=False),
            f["bucket"],
            f["fileName"],
        )
    )
    # Cross-check: the splits must cover exactly the live (ADD minus DELETE) manifest entries.
    live = {entry.file.file_name for entry in pinned.new_read_builder().new_scan().file_scanner.plan_files()}
    planned = [f["fileName"] for f in files]
    if len(planned) != len(set(planned)) or set(planned) != live:
        raise OracleError(
            f"split files differ from live manifest entries: only in splits {sorted(set(planned) - live)}, "
            f"only in entries {sorted(live - set(planned))}, duplicates {len(planned) - len(set(planned))}"
        )
    return {"snapshotId": expected, "files": files}


def cmd_plan(args: argparse.Namespace) -> dict[str, Any]:
    table = open_table(args.table_path)
    if not args.all:
        return _plan(table, args.snapshot, args.tag)
    path = _local_path(table.table_path)
    return {
        "snapshots": {str(i): _plan(table, i, None) for i in _snapshot_ids(path)},
        "tags": {name: _plan(table, None, name) for name in _tag_names(path)},
    }


def cmd_read(args: argparse.Namespace) -> Any:
    table = open_table(args.table_path)
    pinned, _expected = _travel(table, args.snapshot, args.tag)
    builder = pinned.new_read_builder()
    splits = builder.new_scan().plan().splits()
    types = _column_types(pinned)
    if not getattr(args, "with_partition", False):  # the stateful worker builds its own Namespace
        arrow_table = builder.new_read().to_arrow(splits)
        rows = [] if arrow_table is None else arrow_table.to_pylist()
        normalized = [
            {name: normalize_typed(value, types.get(name, "")) for name, value in row.items()} for row in rows
        ]
        return sorted(normalized, key=_sort_key)
    # Each row with the partition of the split it was read from (the manifest's BinaryRow, decoded).
    keys = list(pinned.partition_keys)
    key_types = [_type_name(field.type) for field in pinned.partition_keys_fields]
    normalized = []
    for split in splits:
        partition = {
            key: normalize_typed(value, t)
            for key, value, t in zip(
                keys, list(split.partition.values) if keys else [], key_types, strict=True
            )
        }
        arrow_table = builder.new_read().to_arrow([split])
        for row in [] if arrow_table is None else arrow_table.to_pylist():
            item = {name: normalize_typed(value, types.get(name, "")) for name, value in row.items()}
            normalized.append({**item, "_partition": partition})
    return sorted(normalized, key=_sort_key)


def cmd_append(args: argparse.Namespace) -> dict[str, Any]:
    table = open_table(args.table_path)
    with open(args.rows, encoding="utf-8") as handle:
        rows = json.load(handle)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise OracleError("--rows must hold a JSON list of objects")
    types = _column_types(table)
    unknown = sorted({key for row in rows for key in row} - set(types))
    if unknown:
        raise OracleError(f"unknown columns {unknown}; table has {sorted(types)}")
    overwrite = None
    if args.overwrite is not None:
        overwrite = json.loads(args.overwrite)
        if not isinstance(overwrite, dict):
            raise OracleError("--overwrite must be a JSON object: partition key -> value")
    path = _local_path(table.table_path)
    before = _snapshot_ids(path)
    _write(
        table,
        [{name: denormalize_typed(row.get(name), t) for name, t in types.items()} for row in rows],
        overwrite,
    )
    after = _snapshot_ids(path)
    return {
        "snapshotId": after[-1] if after else None,
        "previousSnapshotId": before[-1] if before else None,
        "rowCount": len(rows),
    }


# ----------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    build = sub.add_parser("build", help="write the scenario tables")
    build.add_argument("warehouse")
    build.add_argument("scenarios", nargs="+", help=f"any of {sorted(SCENARIOS)}, or 'all'")
    build.set_defaults(func=cmd_build)

    for name, func, with_all in (("plan", cmd_plan, True), ("read", cmd_read, False)):
        command = sub.add_parser(name)
        command.add_argument("table_path")
        group = command.add_mutually_exclusive_group()
        group.add_argument("--snapshot", type=int)
        group.add_argument("--tag")
        if with_all:
            group.add_argument("--all", action="store_true")
        else:
            command.add_argument(
                "--with-partition", action="store_true", help="each row's split partition as _partition"
            )
        command.set_defaults(func=func, all=False, with_partition=False)

    append = sub.add_parser("append")
    append.add_argument("table_path")
    append.add_argument("--rows", required=True, help="JSON file: a list of row objects")
    append.add_argument(
        "--overwrite", help='overwrite this partition (a JSON object, e.g. {"p": "__DEFAULT_PARTITION__"})'
    )
    append.set_defaults(func=cmd_append)
    add_pk_commands(sub)  # pk-build, pk-upserts (tests/interop/pypaimon_pk_scenarios.py)

    batch = sub.add_parser(
        "batch", help="run several subcommands in one process (pypaimon's import takes ~2.5 s)"
    )
    batch.add_argument(
        "file", nargs="?", default="-", help='JSON list of argument lists, e.g. [["plan", "T"]]; "-" = stdin'
    )
    batch.set_defaults(func=cmd_batch)

    sub.add_parser("serve", help="answer JSON-line requests until stdin closes (see above)")
    return parser


def cmd_batch(args: argparse.Namespace) -> list[Any]:
    """Run each argument list in order, in this process; the results in a list, in the same order."""
    if args.file == "-":
        commands = json.load(sys.stdin)
    else:
        with open(args.file, encoding="utf-8") as handle:
            commands = json.load(handle)
    if not isinstance(commands, list) or not all(
        isinstance(argv, list) and argv and all(isinstance(a, (str, int)) for a in argv) for argv in commands
    ):
        raise OracleError("batch input must be a JSON list of non-empty argument lists")
    results = []
    for index, argv in enumerate(commands):
        argv = [str(a) for a in argv]
        if argv[0] in ("batch", "serve"):
            raise OracleError(f"batch commands cannot nest ({argv[0]})")
        try:
            sub_args = _parser().parse_args(argv)
        except SystemExit as exc:
            raise OracleError(f"batch command #{index} {argv}: invalid arguments") from exc
        try:
            results.append(sub_args.func(sub_args))
        except OracleError as exc:
            raise OracleError(f"batch command #{index} {argv}: {exc}") from exc
    return results


def _execute(argv: list[str]) -> Any:
    """Parse ``argv`` and run its command with stdout captured; diagnostics go to stderr."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        raise OracleError("serve cannot be a request")
    # Anything pypaimon prints must not corrupt the JSON on stdout.
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            return args.func(args)
    finally:
        sys.stderr.write(captured.getvalue())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["serve"]:
        return serve()
    try:
        result = _execute(argv)
    except OracleError as exc:
        sys.stderr.write(f"pypaimon_oracle: {exc}\n")
        return 2
    _dump(result)
    return 0


# ----------------------------------------------------------------------------------------------
# serve: one process, many requests
# ----------------------------------------------------------------------------------------------


def _encode(answer: dict[str, Any]) -> str:
    return json.dumps(answer, sort_keys=True, ensure_ascii=False, allow_nan=False)


@contextlib.contextmanager
def _request_scope(stdin_text: str | None, stderr: io.StringIO) -> Any:
    """The request's stdin and stderr; the environment and working directory restored afterwards."""
    environment, cwd, real_stdin = dict(os.environ), os.getcwd(), sys.stdin
    try:
        with contextlib.redirect_stderr(stderr):
            sys.stdin = io.StringIO(stdin_text or "")
            yield
    finally:
        sys.stdin = real_stdin
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environment)


def _answer(line: str) -> str:
    """The protocol line answering one request line."""
    try:
        request = json.loads(line)
        argv = [str(arg) for arg in request["argv"]]
        stdin_text = request.get("stdin")
    except (ValueError, KeyError, TypeError) as exc:
        return _encode(
            {"ok": False, "code": 2, "error": f"pypaimon_oracle: bad request {line[:200]!r}: {exc}"}
        )
    stderr = io.StringIO()
    try:
        with _request_scope(stdin_text, stderr):
            answer = _encode({"ok": True, "result": _execute(argv)})
        sys.stderr.write(stderr.getvalue())  # a success's diagnostics go to the server's log
        return answer
    except OracleError as exc:
        code, message = 2, f"pypaimon_oracle: {exc}"
    except SystemExit as exc:  # argparse: invalid arguments (its usage text is on stderr)
        code, message = exc.code if isinstance(exc.code, int) else 1, ""
    except Exception:
        code, message = 1, traceback.format_exc()
    return _encode({"ok": False, "code": code, "error": (stderr.getvalue() + message).strip()})


def serve() -> int:
    """Answer JSON-line requests from stdin until it closes; see the module docstring."""
    protocol_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    protocol_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # no command can read a request line
    os.dup2(2, 1)  # nor print into an answer
    os.close(devnull)
    sys.stdout = sys.stderr
    for line in protocol_in:
        if line.strip():
            protocol_out.write(_answer(line) + "\n")
            protocol_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
