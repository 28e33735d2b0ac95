"""``lakeformat create-table`` for Iceberg: in a SQL catalog or at a Hadoop-layout path, with the schema,
partition spec and properties asked for; and every refusal is one typed line with nothing created anywhere."""

from __future__ import annotations

import datetime
import decimal
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table as PyIcebergTable

from airflow_lakeformat import cli
from airflow_lakeformat.core.errors import TableAlreadyExistsError, exit_code_for
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from tests.unit.test_cli import run

# Every SQL type with a faithful Iceberg type, and what it becomes (Arrow names too, as --schema takes them).
TYPES = [
    ("id", "BIGINT NOT NULL", "long", True),
    ("tiny", "TINYINT", "int", False),
    ("small", "SMALLINT", "int", False),
    ("n", "INT", "int", False),
    ("f", "FLOAT", "float", False),
    ("d", "DOUBLE", "double", False),
    ("amount", "DECIMAL(12, 2) NOT NULL", "decimal(12, 2)", True),
    ("name", "STRING", "string", False),
    ("code", "VARCHAR(10)", "string", False),
    ("letter", "CHAR(1)", "string", False),
    ("blob", "BYTES", "binary", False),
    ("vb", "VARBINARY(8)", "binary", False),
    ("fixed4", "BINARY(4)", "fixed[4]", False),
    ("day", "DATE", "date", False),
    ("t", "TIME", "time", False),
    ("ts", "TIMESTAMP(6)", "timestamp", False),
    ("ts3", "TIMESTAMP(3)", "timestamp", False),
    ("tz", "TIMESTAMP(6) WITH LOCAL TIME ZONE", "timestamptz", False),
    ("ok", "BOOLEAN", "boolean", False),
    ("arrow_long", "int64", "long", False),
    ("arrow_tz", "timestamp[us, tz=UTC]", "timestamptz", False),
    ("region", "STRING NOT NULL", "string", True),
]
SIMPLE = [
    {"name": "id", "type": "BIGINT NOT NULL"},
    {"name": "region", "type": "STRING"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
    {"name": "v", "type": "DOUBLE", "description": "a value"},
]


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def sql_catalog_args(base: Path) -> list[str]:
    return [
        "--catalog-property=type=sql",
        f"--catalog-property=uri=sqlite:///{base}/catalog.db",
        f"--catalog-property=warehouse=file://{base}/warehouse",
    ]


def sql_catalog(base: Path) -> SqlCatalog:
    return SqlCatalog("default", uri=f"sqlite:///{base}/catalog.db", warehouse=f"file://{base}/warehouse")


def listing(base: Path) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in base.rglob("*"))


def catalog_rows(base: Path) -> tuple[list[Any], list[Any]]:
    """Every table row and namespace row of the SQLite catalog, read without pyiceberg (which would create
    the database if it were missing)."""
    database = base / "catalog.db"
    if not database.exists():
        return [], []
    with sqlite3.connect(database) as connection:
        tables = connection.execute("SELECT * FROM iceberg_tables ORDER BY 1, 2, 3").fetchall()
        namespaces = connection.execute(
            "SELECT * FROM iceberg_namespace_properties ORDER BY 1, 2, 3"
        ).fetchall()
    return tables, namespaces


def arrow_rows(table: PyIcebergTable, rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as Arrow with exactly the table's types (what pyiceberg itself writes for this schema)."""
    return pa.Table.from_pylist(rows, schema=schema_to_pyarrow(table.schema(), include_field_ids=False))


def test_creates_the_iceberg_table_in_the_sql_catalog_not_a_paimon_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    schema = write_json(tmp_path / "s.json", [{"name": n, "type": t} for n, t, _, _ in TYPES])
    code, out, err = run(
        "create-table", "demo.events", "--schema", str(schema), "--format", "iceberg",
        *sql_catalog_args(tmp_path),
        "--partition-keys", "region, days(ts), bucket(16, id), truncate(4, name), months(day), hours(tz)",
        "--primary-keys", "id,amount",
        "--option", "write.target-file-size-bytes=1048576", "--option", "commit.retry.num-retries=7",
        "--json",
    )  # fmt: skip

    assert code == 0, err
    assert err == ""
    assert not (tmp_path / "demo.events").exists()  # the defect: a Paimon directory in the cwd
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db", "s.json", "warehouse"]
    document = json.loads(out)
    table = sql_catalog(tmp_path).load_table("demo.events")
    assert (document["table"], document["format"]) == ("demo.events", "iceberg")
    assert document["location"] == table.location()
    assert document["metadataLocation"] == table.metadata_location
    assert table.metadata.format_version == document["formatVersion"] == 2
    assert [(f.name, str(f.field_type), f.required) for f in table.schema().fields] == [
        (name, iceberg, required) for name, _, iceberg, required in TYPES
    ]
    assert table.schema().identifier_field_names() == {"id", "amount"}
    assert document["schema"] == json.loads(table.schema().model_dump_json())
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("region", "identity"),
        ("ts_day", "day"),
        ("id_bucket", "bucket[16]"),
        ("name_trunc", "truncate[4]"),
        ("day_month", "month"),
        ("tz_hour", "hour"),
    ]
    assert document["partitionSpec"] == json.loads(table.spec().model_dump_json())
    assert table.properties["write.target-file-size-bytes"] == "1048576"
    assert table.properties["commit.retry.num-retries"] == "7"
    assert document["properties"] == table.properties
    assert sql_catalog(tmp_path).list_namespaces() == [("demo",)]


def test_write_and_commit_work_on_created_tables(tmp_path: Path) -> None:
    """``write`` on an identity-partitioned table; ``commit --add`` on one partitioned by ``days`` and
    ``truncate`` (a pyarrow append through those transforms needs pyiceberg-core; add_files does not)."""
    schema = write_json(tmp_path / "s.json", SIMPLE)
    catalog = sql_catalog_args(tmp_path)
    assert (
        run("create-table", "demo.plain", "--schema", str(schema), *catalog, "--partition-keys", "region")[0]
        == 0
    )
    code, _, err = run(
        "create-table", "demo.daily", "--schema", str(schema), *catalog,
        "--partition-keys", "days(ts),truncate(2, region)",
    )  # fmt: skip
    assert code == 0, err
    plain = sql_catalog(tmp_path).load_table("demo.plain")
    rows = [
        {"id": i, "region": r, "ts": datetime.datetime(2024, 1, d, 12), "v": i / 2}
        for i, r, d in [(1, "eu", 1), (2, "us", 2), (3, "eu", 2)]
    ]
    pq.write_table(arrow_rows(plain, rows), tmp_path / "rows.parquet")

    code, out, err = run("write", "demo.plain", "--from", str(tmp_path / "rows.parquet"), *catalog, "--json")

    assert code == 0, err
    assert json.loads(out)["rowsAdded"] == 3
    assert sorted(
        sql_catalog(tmp_path).load_table("demo.plain").scan().to_arrow().to_pylist(), key=str
    ) == sorted(rows, key=str)

    daily = sql_catalog(tmp_path).load_table("demo.daily")
    one_partition = [r for r in rows if r["ts"].day == 2 and r["region"] == "us"]
    pq.write_table(arrow_rows(daily, one_partition), tmp_path / "day2-us.parquet")
    code, out, err = run(
        "commit", "demo.daily", "--add", str(tmp_path / "day2-us.parquet"), *catalog, "--json"
    )
    assert code == 0, err
    daily = sql_catalog(tmp_path).load_table("demo.daily")
    assert daily.scan().to_arrow().to_pylist() == one_partition
    (task,) = daily.scan().plan_files()
    assert (task.file.partition[0], task.file.partition[1]) == (
        (datetime.date(2024, 1, 2) - datetime.date(1970, 1, 1)).days,
        "us",
    )


def test_creates_a_hadoop_layout_table_at_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    schema = write_json(tmp_path / "s.json", SIMPLE)

    code, out, err = run(
        "create-table", "./lake/events", "--format", "iceberg", "--schema", str(schema),
        "--partition-keys", "region", "--option", "format-version=1",
    )  # fmt: skip

    assert code == 0, err
    root = tmp_path / "lake" / "events"
    assert out.startswith(f"created {root} (iceberg, format v1, 4 fields, metadata ")
    assert out.rstrip().endswith("v1.metadata.json)")
    assert sorted(p.name for p in (root / "metadata").iterdir()) == ["v1.metadata.json", "version-hint.text"]
    table = open_path_table(str(root))
    assert table.metadata.format_version == 1
    assert [f.name for f in table.table.schema().fields] == ["id", "region", "ts", "v"]
    assert table.table.schema().find_field("v").doc == "a value"
    assert [(f.name, str(f.transform)) for f in table.table.spec().fields] == [("region", "identity")]

    rows = [{"id": 1, "region": "eu", "ts": datetime.datetime(2024, 1, 1), "v": 0.5}]
    pq.write_table(arrow_rows(table.table, rows), tmp_path / "rows.parquet")
    code, _, err = run("write", str(root), "--from", str(tmp_path / "rows.parquet"))
    assert code == 0, err
    assert open_path_table(str(root)).table.scan().to_arrow().to_pylist() == rows


def test_paimon_json_says_its_format(tmp_path: Path) -> None:
    schema = write_json(tmp_path / "s.json", SIMPLE)
    code, out, err = run("create-table", str(tmp_path / "p"), "--schema", str(schema), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert (document["format"], document["table"]) == ("paimon", str(tmp_path / "p"))
    assert (tmp_path / "p" / "schema" / "schema-0").is_file()


# -- refusals: one typed line, nothing created anywhere ------------------------------------------------

ALREADY_EXISTS = exit_code_for(TableAlreadyExistsError)
REFUSALS: list[tuple[str, list[str], list[dict[str, Any]] | str, int, str]] = [
    # (case, arguments after "create-table", schema, exit code, what the error line names)
    ("unknown type", ["demo.new", "@catalog"], [{"name": "x", "type": "NOPE"}], cli.EXIT_USAGE, "NOPE"),
    ("not a field list", ["demo.new", "@catalog"], '{"a": 1}', cli.EXIT_USAGE, "expected a list of fields"),
    ("schema not JSON", ["demo.new", "@catalog"], "[{", cli.EXIT_USAGE, "--schema"),
    ("duplicate column", ["demo.new", "@catalog"], [SIMPLE[0], SIMPLE[0]], cli.EXIT_USAGE, "duplicate"),
    ("nanoseconds", ["demo.new", "@catalog"], [{"name": "ns", "type": "TIMESTAMP(9)"}], cli.EXIT_UNSUPPORTED,
     "column 'ns'"),
    ("array", ["demo.new", "@catalog"], [{"name": "xs", "type": {"type": "ARRAY", "element": "INT"}}],
     cli.EXIT_UNSUPPORTED, "column 'xs'"),
    ("unknown partition column", ["demo.new", "@catalog", "--partition-keys", "nope"], SIMPLE, cli.EXIT_USAGE,
     "'nope' is not a column"),
    ("transform of a wrong type", ["demo.new", "@catalog", "--partition-keys", "days(region)"], SIMPLE,
     cli.EXIT_USAGE, "days(region)"),
    ("bucket without a count", ["demo.new", "@catalog", "--partition-keys", "bucket(id)"], SIMPLE,
     cli.EXIT_USAGE, "bucket(N, column)"),
    ("unknown transform", ["demo.new", "@catalog", "--partition-keys", "weeks(ts)"], SIMPLE, cli.EXIT_USAGE,
     "unknown transform 'weeks'"),
    ("unbalanced parentheses", ["demo.new", "@catalog", "--partition-keys", "days(ts"], SIMPLE,
     cli.EXIT_USAGE, "unbalanced"),
    ("nullable primary key", ["demo.new", "@catalog", "--primary-keys", "region"], SIMPLE, cli.EXIT_USAGE,
     "'region' is nullable"),
    ("format v3", ["demo.new", "@catalog", "--option", "format-version=3"], SIMPLE, cli.EXIT_UNSUPPORTED,
     "format-version 3"),
    ("format vx", ["demo.new", "@catalog", "--option", "format-version=x"], SIMPLE, cli.EXIT_USAGE,
     "format-version 'x'"),
    ("malformed option", ["demo.new", "@catalog", "--option", "novalue"], SIMPLE, cli.EXIT_USAGE, "novalue"),
    ("unknown catalog", ["demo.new", "--catalog", "nosuch"], SIMPLE, cli.EXIT_USAGE, "catalog 'nosuch'"),
    ("unknown catalog type", ["demo.new", "--catalog-property", "type=bogus"], SIMPLE, cli.EXIT_USAGE,
     "bogus"),
    ("paimon with a catalog", ["demo.new", "--format", "paimon", "@catalog"], SIMPLE, cli.EXIT_USAGE,
     "--format paimon"),
    ("identifier without a catalog", ["demo.new", "--format", "iceberg"], SIMPLE, cli.EXIT_USAGE,
     "needs a catalog"),
    ("path with a catalog", ["./demo/new", "@catalog"], SIMPLE, cli.EXIT_USAGE, "not a path"),
    ("paimon transform", ["./p", "--partition-keys", "days(ts)"], SIMPLE, cli.EXIT_USAGE,
     "partition transforms are Iceberg's"),
    ("existing catalog table", ["demo.existing", "@catalog"], SIMPLE, ALREADY_EXISTS, "already has this table"),
    ("existing iceberg path", ["./iceberg_t", "--format", "iceberg"], SIMPLE, ALREADY_EXISTS,
     "an Iceberg table already exists"),
    ("existing paimon path", ["./paimon_t", "--format", "iceberg"], SIMPLE, ALREADY_EXISTS,
     "a Paimon table already exists"),
    ("paimon over iceberg", ["./iceberg_t"], SIMPLE, ALREADY_EXISTS, "an Iceberg table already exists"),
]  # fmt: skip


@pytest.fixture
def existing_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cwd holds a SQL catalog with ``demo.existing``, a Hadoop-layout Iceberg table and a Paimon table."""
    monkeypatch.chdir(tmp_path)
    schema = write_json(tmp_path / "existing.json", SIMPLE)
    for argv in (
        ["demo.existing", *sql_catalog_args(tmp_path)],
        ["./iceberg_t", "--format", "iceberg"],
        ["./paimon_t"],
    ):
        code, _, err = run("create-table", *argv, "--schema", str(schema))
        assert code == 0, err
    return tmp_path


@pytest.mark.parametrize(
    ("arguments", "schema", "code", "named"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_a_refusal_is_one_typed_line_and_creates_nothing(
    existing_tables: Path, arguments: list[str], schema: Any, code: int, named: str
) -> None:
    base = existing_tables
    schema_file = base / "s.json"
    schema_file.write_text(schema if isinstance(schema, str) else json.dumps(schema), encoding="utf-8")
    argv = [a for arg in arguments for a in (sql_catalog_args(base) if arg == "@catalog" else [arg])]
    files_before, catalog_before = listing(base), catalog_rows(base)

    exit_code, out, err = run("create-table", *argv, "--schema", str(schema_file))

    assert (exit_code, out) == (code, "")
    (line,) = err.splitlines()
    assert line.startswith("lakeformat: error: ") and named in line, line
    assert listing(base) == files_before
    assert catalog_rows(base) == catalog_before


def test_a_refusal_before_the_catalog_leaves_no_catalog_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    schema = write_json(tmp_path / "s.json", SIMPLE)
    code, _, err = run(
        "create-table",
        "demo.t",
        "--schema",
        str(schema),
        *sql_catalog_args(tmp_path),
        "--partition-keys",
        "days(v)",
    )
    assert code == cli.EXIT_USAGE, err
    assert listing(tmp_path) == ["s.json"]


def test_a_failed_create_drops_the_namespace_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQL catalog without a warehouse cannot place the table: the namespace made for it goes again."""
    monkeypatch.chdir(tmp_path)
    schema = write_json(tmp_path / "s.json", SIMPLE)
    code, _, err = run(
        "create-table", "fresh.t", "--schema", str(schema),
        "--catalog-property=type=sql", f"--catalog-property=uri=sqlite:///{tmp_path}/catalog.db",
    )  # fmt: skip
    assert code == cli.EXIT_USAGE, err
    (line,) = err.splitlines()
    assert "fresh.t: the catalog cannot create this table: No default path" in line
    assert catalog_rows(tmp_path) == ([], [])
    assert listing(tmp_path) == ["catalog.db", "s.json"]


def test_decimal_and_binary_values_round_trip_through_a_created_table(tmp_path: Path) -> None:
    """The mapped types hold the values they promise: a DECIMAL(12, 2) and a BINARY(4) written and read."""
    schema = write_json(
        tmp_path / "s.json",
        [{"name": "amount", "type": "DECIMAL(12, 2)"}, {"name": "code", "type": "BINARY(4)"}],
    )
    root = tmp_path / "t"
    assert run("create-table", str(root), "--format", "iceberg", "--schema", str(schema))[0] == 0
    table = open_path_table(str(root))
    rows = [{"amount": decimal.Decimal("1234567890.12"), "code": b"abcd"}]
    pq.write_table(arrow_rows(table.table, rows), tmp_path / "rows.parquet")
    code, _, err = run("write", str(root), "--from", str(tmp_path / "rows.parquet"))
    assert code == 0, err
    assert open_path_table(str(root)).table.scan().to_arrow().to_pylist() == rows
