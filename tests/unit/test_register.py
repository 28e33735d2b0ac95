"""Registering Parquet files and writing Arrow data as data files of an append table."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries, live_files
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import parse_type
from airflow_lakeformat.core.paimon.values import from_python
from airflow_lakeformat.core.paimon.write.bucketing import default_bucket
from airflow_lakeformat.core.paimon.write.data_file_meta import data_file_meta_from_parquet
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.core.paimon.write.layout import locate
from airflow_lakeformat.core.paimon.write.register import register_files
from airflow_lakeformat.core.sources import WriteSchema, read_source


def make_table(
    root: Path,
    fields: list[tuple[str, str]],
    partition_keys: tuple[str, ...] = (),
    options: dict[str, str] | None = None,
    primary_keys: tuple[str, ...] = (),
) -> Table:
    schema = schema_from_fields(
        [{"name": n, "type": t} for n, t in fields],
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options,
    )
    return create_table(str(root), schema)


def put(table: Table, rel: str, data: pa.Table, **kwargs: Any) -> str:
    path = Path(table.root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, **kwargs)
    return rel


def decoded_stats(table: Table, meta: DataFileMeta) -> dict[str, tuple[Any, Any, int | None]]:
    """Column -> (min, max, null count) decoded with the types of the included columns."""
    cols = meta.value_stats_cols
    names = [f.name for f in table.schema.fields] if cols is None else cols
    types = [table.schema.field(n).type for n in names]
    stats = meta.value_stats
    mins = binary_row.decode(stats.min_values, types)
    maxs = binary_row.decode(stats.max_values, types)
    assert binary_row.arity_of(stats.min_values) == len(names)
    assert stats.null_counts is not None and len(stats.null_counts) == len(names)
    return {n: (mins[i], maxs[i], stats.null_counts[i]) for i, n in enumerate(names)}


def expected_internal(column: pa.ChunkedArray, type_sql: str) -> tuple[Any, Any, int]:
    """The true min/max/null count of a column as Paimon internal values, via pyarrow.compute."""
    dtype = parse_type(type_sql)
    null_count = column.null_count
    if null_count == len(column):
        return None, None, null_count
    if pa.types.is_timestamp(column.type):
        ints = column.cast(pa.int64())
        per_milli = {"ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
        mm = pc.min_max(ints).as_py()
        conv = [Timestamp(v // per_milli, (v % per_milli) * (1_000_000 // per_milli)) for v in mm.values()]
        return conv[0], conv[1], null_count
    mm = pc.min_max(column).as_py()
    return from_python(mm["min"], dtype), from_python(mm["max"], dtype), null_count


ALL_TYPES = [
    ("ti", "TINYINT", pa.int8()),
    ("si", "SMALLINT", pa.int16()),
    ("i", "INT", pa.int32()),
    ("bi", "BIGINT", pa.int64()),
    ("s", "STRING", pa.string()),
    ("b", "BYTES", pa.binary()),
    ("flag", "BOOLEAN", pa.bool_()),
    ("d", "DATE", pa.date32()),
    ("t", "TIME", pa.time32("ms")),
    ("ts3", "TIMESTAMP(3)", pa.timestamp("ms")),
    ("ts6", "TIMESTAMP(6)", pa.timestamp("us")),
    ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE", pa.timestamp("us", tz="UTC")),
    ("dec", "DECIMAL(10, 2)", pa.decimal128(10, 2)),
    ("big", "DECIMAL(30, 5)", pa.decimal128(30, 5)),
    ("f", "FLOAT", pa.float32()),
    ("db", "DOUBLE", pa.float64()),
    ("nothing", "INT", pa.int32()),
]


def all_types_data() -> pa.Table:
    rows = 9
    values: dict[str, list[Any]] = {
        "ti": [-128, 5, None, 127, 0, 1, 2, 3, 4],
        "si": [3, -32768, 1, None, 9, 32767, 0, 0, 0],
        "i": [10, 20, None, -5, 7, 2**31 - 1, -(2**31), 0, 1],
        "bi": [2**63 - 1, -(2**63), 1, 2, 3, None, 4, 5, 6],
        # Non-ASCII sorts by UTF-8 bytes ("é" > "z"); long values go to the variable part.
        "s": ["zebra", "é-accent", "a", None, "longer than seven bytes", "日本", "Z", "", "~"],
        "b": [b"\xff\x00", b"\x00", None, b"\x7f", b"", b"\x80abcdefghij", b"a", b"b", b"c"],
        "flag": [True, None, True, True, None, True, True, True, True],
        "d": [dt.date(2024, 1, 1), dt.date(1960, 2, 29), None, dt.date(2100, 12, 31)]
        + [dt.date(2000, 1, 1)] * 5,
        "t": [0, 86_399_999, None, 3_600_000, 1, 2, 3, 4, 5],
        "ts3": [dt.datetime(2024, 1, 1, 0, 0, 0, 123000), dt.datetime(1969, 12, 31, 23, 59, 59, 999000)]
        + [None] * 7,
        "ts6": [
            dt.datetime(2024, 1, 1, 0, 0, 0, 123456),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            None,
            dt.datetime(2030, 5, 5, 5, 5, 5, 5),
        ]
        + [dt.datetime(2000, 1, 1)] * 5,
        "ltz": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] + [None] * 8,
        "dec": [Decimal("1.50"), Decimal("-99999999.99"), None, Decimal("99999999.99")] + [Decimal("0")] * 5,
        "big": [Decimal("1234567890123456789012345.12345"), Decimal("-0.00001"), None] + [Decimal("7")] * 6,
        "f": [1.0, float("nan"), 2.0, None, 0.5, 1, 1, 1, 1],
        "db": [1.0, -2.0, None, 3.5, 1, 1, 1, 1, 1],
        "nothing": [None] * rows,
    }
    return pa.table({n: pa.array(values[n], at) for n, _, at in ALL_TYPES})


def test_stats_are_the_true_values_for_every_supported_type(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [(n, t) for n, t, _ in ALL_TYPES])
    data = all_types_data()
    # Three rows per row group: every column's min and max sit in different row groups.
    rel = put(table, "bucket-0/file.parquet", data, row_group_size=3, store_decimal_as_integer=True)
    assert pq.ParquetFile(Path(table.root) / rel).metadata.num_row_groups == 3
    meta = data_file_meta_from_parquet(table, rel)
    stats = decoded_stats(table, meta)
    # Floating-point columns are left out (NaN); everything else is there, in schema order.
    assert meta.value_stats_cols == [n for n, _, _ in ALL_TYPES if n not in ("f", "db")]
    for name, type_sql, _ in ALL_TYPES:
        if name in ("f", "db"):
            continue
        assert stats[name] == expected_internal(data.column(name), type_sql), name
    assert stats["s"][:2] == ("", "日本")  # UTF-8 byte order, not Python's casefold or locale
    assert stats["b"][:2] == (b"", b"\xff\x00")  # unsigned bytes
    assert meta.row_count == data.num_rows
    assert meta.file_size == (Path(table.root) / rel).stat().st_size
    assert (meta.min_sequence_number, meta.max_sequence_number) == (0, data.num_rows - 1)
    assert (meta.level, meta.extra_files, meta.delete_row_count, meta.schema_id) == (0, [], 0, 0)


def test_decimals_stored_as_binary_and_int96_timestamps(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("dec", "DECIMAL(10, 2)"), ("ts", "TIMESTAMP(9)")])
    data = pa.table(
        {
            "dec": pa.array([Decimal("-3.25"), Decimal("7.00"), None], pa.decimal128(10, 2)),
            "ts": pa.array([1, 2, 3], pa.timestamp("ns")),
        }
    )
    rel = put(table, "bucket-0/f.parquet", data, use_deprecated_int96_timestamps=True)
    meta = data_file_meta_from_parquet(table, rel)
    # INT96 has no defined order in Parquet: readable, but no statistics.
    assert meta.value_stats_cols == ["dec"]
    assert decoded_stats(table, meta)["dec"] == (Decimal("-3.25"), Decimal("7.00"), 1)


def test_all_columns_included_means_null_stats_cols(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT"), ("s", "STRING")])
    rel = put(table, "bucket-0/f.parquet", pa.table({"a": pa.array([3, 1], pa.int32()), "s": ["x", None]}))
    meta = data_file_meta_from_parquet(table, rel)
    assert meta.value_stats_cols is None  # Java's dense mode writes null when nothing is left out
    assert decoded_stats(table, meta) == {"a": (1, 3, 0), "s": ("x", "x", 1)}


def test_column_without_statistics_is_left_out(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT"), ("b", "INT"), ("c", "STRING")])
    data = pa.table({"a": pa.array([1, 2], pa.int32()), "b": pa.array([5, 6], pa.int32()), "c": ["p", "q"]})
    rel = put(table, "bucket-0/f.parquet", data, write_statistics=["a", "c"])
    meta = data_file_meta_from_parquet(table, rel)
    assert meta.value_stats_cols == ["a", "c"]
    assert decoded_stats(table, meta) == {"a": (1, 2, 0), "c": ("p", "q", 0)}


def test_row_group_without_min_max_drops_the_column(tmp_path: Path) -> None:
    # parquet-cpp keeps the null count but drops min/max above 4 KiB: the other group's range
    # alone would be too narrow and hide the long value from filters.
    table = make_table(tmp_path / "t", [("a", "INT"), ("s", "STRING")])
    data = pa.table({"a": pa.array([1, 2, 3, 4], pa.int32()), "s": ["b", "c", "z" * 10_000, None]})
    rel = put(table, "bucket-0/f.parquet", data, row_group_size=2)
    groups = pq.ParquetFile(Path(table.root) / rel).metadata
    assert [groups.row_group(i).column(1).statistics.has_min_max for i in range(2)] == [True, False]
    meta = data_file_meta_from_parquet(table, rel)
    assert meta.value_stats_cols == ["a"]


def test_no_statistics_at_all_gives_empty_stats_cols(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT"), ("f", "DOUBLE")])
    data = pa.table({"a": pa.array([1], pa.int32()), "f": [0.5]})
    meta = data_file_meta_from_parquet(table, put(table, "bucket-0/f.parquet", data, write_statistics=False))
    assert meta.value_stats_cols == []
    assert binary_row.arity_of(meta.value_stats.min_values) == 0
    assert meta.value_stats.null_counts == []


def test_timestamp_finer_than_the_column_has_no_stats(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("ts", "TIMESTAMP(3)"), ("ts9", "TIMESTAMP(9)")])
    data = pa.table(
        {
            "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1)], pa.timestamp("us")),
            "ts9": pa.array([1_500_000_123], pa.timestamp("ns")),
        }
    )
    meta = data_file_meta_from_parquet(table, put(table, "bucket-0/f.parquet", data))
    assert meta.value_stats_cols == ["ts9"]
    assert decoded_stats(table, meta)["ts9"][:2] == (Timestamp(1500, 123),) * 2


def test_missing_nullable_column_has_exact_null_stats(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT"), ("later", "STRING")])
    meta = data_file_meta_from_parquet(
        table, put(table, "bucket-0/f.parquet", pa.table({"a": pa.array([4, 2, 9], pa.int32())}))
    )
    assert decoded_stats(table, meta) == {"a": (2, 9, 0), "later": (None, None, 3)}


@pytest.mark.parametrize(
    ("table_type", "column", "message"),
    [
        ("INT", pa.array([1], pa.int64()), "cannot be read as INT"),  # narrowing
        ("BIGINT", pa.array([1], pa.uint32()), "unsigned"),
        ("DATE", pa.array(["2024-01-01"]), "cannot be read as DATE"),
        ("DECIMAL(10, 3)", pa.array([Decimal("1.50")], pa.decimal128(10, 2)), r"DECIMAL\(10, 3\)"),
        ("TIME", pa.array([1], pa.time64("us")), "cannot be read as TIME"),
        ("STRING", pa.array([b"x"]), "cannot be read as STRING"),
        ("ARRAY<INT>", pa.array([1], pa.int32()), "cannot be read as ARRAY"),
    ],
)
def test_incompatible_column_types_are_refused(
    tmp_path: Path, table_type: str, column: pa.Array, message: str
) -> None:
    if table_type.startswith("ARRAY"):
        schema = schema_from_fields([{"name": "c", "type": {"type": "ARRAY", "element": "INT"}}])
        table = create_table(str(tmp_path / "t"), schema)
    else:
        table = make_table(tmp_path / "t", [("c", table_type)])
    rel = put(table, "bucket-0/f.parquet", pa.table({"c": column}))
    with pytest.raises(RegisterError, match=message) as info:
        data_file_meta_from_parquet(table, rel)
    assert "bucket-0/f.parquet" in str(info.value)  # the error names the file


def test_extra_and_missing_not_null_columns_are_refused(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT NOT NULL"), ("b", "STRING")])
    extra = put(table, "bucket-0/x.parquet", pa.table({"a": pa.array([1], pa.int32()), "zz": [1]}))
    with pytest.raises(RegisterError, match=r"\['zz'\] are not in the table"):
        data_file_meta_from_parquet(table, extra)
    missing = put(table, "bucket-0/y.parquet", pa.table({"b": ["x"]}))
    with pytest.raises(RegisterError, match="NOT NULL column 'a' is missing"):
        data_file_meta_from_parquet(table, missing)
    nulls = put(table, "bucket-0/z.parquet", pa.table({"a": pa.array([1, None], pa.int32())}))
    with pytest.raises(RegisterError, match="may hold nulls"):
        data_file_meta_from_parquet(table, nulls)
    fine = put(table, "bucket-0/ok.parquet", pa.table({"a": pa.array([1, 2], pa.int32())}))
    assert data_file_meta_from_parquet(table, fine).row_count == 2


def test_nested_columns_are_checked_by_name_and_get_no_stats(tmp_path: Path) -> None:
    schema = schema_from_fields(
        [
            {"name": "id", "type": "INT"},
            {"name": "r", "type": {"type": "ROW", "fields": [{"id": 2, "name": "x", "type": "STRING"}]}},
        ]
    )
    table = create_table(str(tmp_path / "t"), schema)
    good = pa.table({"id": pa.array([1], pa.int32()), "r": pa.array([{"x": "a"}])})
    meta = data_file_meta_from_parquet(table, put(table, "bucket-0/a.parquet", good))
    assert meta.value_stats_cols == ["id"]
    bad = pa.table({"id": pa.array([1], pa.int32()), "r": pa.array([{"y": "a"}])})
    with pytest.raises(RegisterError, match="'r'"):
        data_file_meta_from_parquet(table, put(table, "bucket-0/b.parquet", bad))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ints=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=30),
    texts=st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=30, max_size=30),
    micros=st.lists(st.integers(-(2**50), 2**50), min_size=30, max_size=30),
    group=st.integers(1, 7),
)
def test_stats_property(
    tmp_path: Path, ints: list[int | None], texts: list[str | None], micros: list[int], group: int
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "t"
    table = make_table(root, [("v", "BIGINT"), ("s", "STRING"), ("ts", "TIMESTAMP(6)")])
    n = len(ints)
    data = pa.table(
        {
            "v": pa.array(ints, pa.int64()),
            "s": pa.array(texts[:n], pa.string()),
            "ts": pa.array(micros[:n], pa.int64()).cast(pa.timestamp("us")),
        }
    )
    meta = data_file_meta_from_parquet(table, put(table, "bucket-0/f.parquet", data, row_group_size=group))
    stats = decoded_stats(table, meta)
    for name, type_sql in (("v", "BIGINT"), ("s", "STRING"), ("ts", "TIMESTAMP(6)")):
        assert stats[name] == expected_internal(data.column(name), type_sql)


# -- locate ------------------------------------------------------------------------------------


def partition_of(table: Table, rel: str) -> tuple[list[Any], int]:
    partition, bucket = locate(table, rel)
    return binary_row.decode(partition, table.schema.partition_types), bucket


def test_locate_unescapes_and_parses_legacy_names(tmp_path: Path) -> None:
    table = make_table(
        tmp_path / "t",
        [("s", "STRING"), ("dt", "DATE"), ("ts", "TIMESTAMP(3)"), ("v", "INT")],
        partition_keys=("s", "dt", "ts"),
    )
    rel = "s=a%2Fb%3Ac%3Dd/dt=19723/ts=2024-01-01T10%3A00%3A01.500/bucket-0/f.parquet"
    assert partition_of(table, rel) == (["a/b:c=d", 19723, Timestamp(1704103201500, 0)], 0)
    # The BinaryRow is what the writer would produce for those values.
    partition, _ = locate(table, rel)
    types = table.schema.partition_types
    assert partition == binary_row.encode(["a/b:c=d", 19723, Timestamp(1704103201500, 0)], types)
    default = "s=__DEFAULT_PARTITION__/dt=__DEFAULT_PARTITION__/ts=2024-01-01T10%3A00/bucket-0/f.parquet"
    assert partition_of(table, default)[0] == [None, None, Timestamp(1704103200000, 0)]
    # Full paths and URIs of files inside the table work too.
    full = f"{table.root}/{rel}"
    assert locate(table, full) == locate(table, "file://" + full) == (partition, 0)


@pytest.mark.parametrize(
    ("rel", "message"),
    [
        ("s=x/dt=2024-01-01/bucket-0/f.parquet", "not a value of dt DATE"),  # Paimon writes dt=19723
        ("s=x/dt=019723/bucket-0/f.parquet", "Paimon would put"),  # not canonical
        ("s=a/b/dt=1/bucket-0/f.parquet", "laid out as"),  # unescaped slash
        ("dt=1/s=x/bucket-0/f.parquet", "not the partition key 's'"),  # key order
        ("s=x/dt=1/bucket-1/f.parquet", "bucket-0"),  # unaware tables use bucket-0
        ("s=x/dt=1/f.parquet", "laid out as"),
        ("s=x/dt=1/bucket-x/f.parquet", "bucket-<n>"),
        ("s=/dt=1/bucket-0/f.parquet", "Paimon would put"),  # blank values are the default name
        ("../elsewhere/s=x/dt=1/bucket-0/f.parquet", "outside the table"),
        ("/tmp/s=x/dt=1/bucket-0/f.parquet", "outside the table"),
    ],
)
def test_locate_refuses_files_where_paimon_would_not_look(tmp_path: Path, rel: str, message: str) -> None:
    table = make_table(
        tmp_path / "t", [("s", "STRING"), ("dt", "DATE"), ("v", "INT")], partition_keys=("s", "dt")
    )
    with pytest.raises(RegisterError, match=message):
        locate(table, rel)


def test_locate_with_path_directory_and_cast_names(tmp_path: Path) -> None:
    table = make_table(
        tmp_path / "t",
        [("dt", "DATE"), ("v", "INT")],
        partition_keys=("dt",),
        options={"data-file.path-directory": "data", "partition.legacy-name": "false"},
    )
    assert partition_of(table, "data/dt=2024-01-01/bucket-0/f.parquet") == ([19723], 0)
    with pytest.raises(RegisterError, match=r"data-file\.path-directory"):
        locate(table, "dt=2024-01-01/bucket-0/f.parquet")
    with pytest.raises(RegisterError, match="not a value of dt DATE"):
        locate(table, "data/dt=19723/bucket-0/f.parquet")


# -- register and write end to end --------------------------------------------------------------


def live(table: Table) -> dict[str, Any]:
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return {f.path: f for f in live_files(table, snapshot)}


def test_write_commit_and_read_back(tmp_path: Path) -> None:
    table = make_table(
        tmp_path / "t",
        [
            ("dt", "DATE"),
            ("region", "STRING"),
            ("id", "BIGINT"),
            ("amount", "DECIMAL(12, 2)"),
            ("at", "TIMESTAMP(6)"),
        ],
        partition_keys=("dt", "region"),
    )
    n = 3000
    data = pa.table(
        {
            "dt": [dt.date(2024, 1, 1 + i % 3) for i in range(n)],
            "region": [None if i % 7 == 0 else ["eu", "a/b"][i % 2] for i in range(n)],
            "id": list(range(n)),
            "amount": [Decimal(i) / 4 for i in range(n)],
            "at": [dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=i) for i in range(n)],
        }
    )
    entries = write_data_files(table, data, target_file_size=8 * 1024)
    assert all(e.kind is FileKind.ADD and e.total_buckets == -1 and e.bucket == 0 for e in entries)
    by_partition: dict[bytes, list[Any]] = {}
    for e in entries:
        by_partition.setdefault(e.partition, []).append(e.file)
    assert len(by_partition) == 9
    # Rolled files of one writer continue its sequence numbers from 0.
    assert any(len(metas) > 1 for metas in by_partition.values())
    for metas in by_partition.values():
        ranges = [(f.min_sequence_number, f.max_sequence_number) for f in metas]
        assert ranges[0][0] == 0
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))

    Committer(table).commit(entries)
    files = live(Table.open(str(tmp_path / "t")))
    assert sum(f.entry.file.row_count for f in files.values()) == n
    assert {e.file.file_name for e in entries} == {f.entry.file.file_name for f in files.values()}
    # Files are where the partition says, and together hold exactly the input rows.
    read_back = []
    for path, f in files.items():
        part = pq.read_table(Path(table.root) / path)
        assert part.num_rows == f.entry.file.row_count
        assert set(part.column("region").to_pylist()) == {f.partition["region"]}
        assert set(map(str, part.column("dt").to_pylist())) == {f.partition["dt"]}
        read_back.append(part)
    merged = pa.concat_tables(read_back).sort_by("id")
    assert merged.column("id").to_pylist() == list(range(n))
    assert merged.column("amount").to_pylist() == data.column("amount").to_pylist()
    assert pq.ParquetFile(Path(table.root) / next(iter(files))).schema.column(3).physical_type == "INT64"


def test_creation_time_is_local_wall_clock_stored_as_utc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Java: Timestamp.fromLocalDateTime(LocalDateTime.now()); fastavro would shift a naive datetime.
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        table = make_table(tmp_path / "t", [("a", "INT")])
        before = dt.datetime.now()
        Committer(table).commit(write_data_files(table, pa.table({"a": [1]})))
        snapshot = table.snapshot_manager.latest_snapshot()
        assert snapshot is not None
        [entry] = live_entries(table, snapshot)
        created = entry.file.creation_time
        assert created is not None
        assert abs(created.replace(tzinfo=None) - before) < dt.timedelta(minutes=1)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_register_existing_files(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("p", "INT"), ("v", "STRING")], partition_keys=("p",))
    one = put(table, "p=1/bucket-0/a.parquet", pa.table({"p": pa.array([1, 1], pa.int32()), "v": ["x", "y"]}))
    two = put(table, "p=2/bucket-0/b.parquet", pa.table({"v": ["z"]}))  # partition column not stored
    entries = register_files(table, [one, f"{table.root}/{two}"])
    assert [binary_row.decode(e.partition, table.schema.partition_types) for e in entries] == [[1], [2]]
    Committer(table).commit(entries)
    files = live(table)
    assert sorted(files) == [one, two]
    assert sum(f.entry.file.row_count for f in files.values()) == 3
    with pytest.raises(RegisterError, match="already a live data file"):
        register_files(table, [one])
    three = put(table, "p=3/bucket-0/c.parquet", pa.table({"v": ["w"]}))
    with pytest.raises(RegisterError, match="listed twice"):
        register_files(table, [three, three])
    with pytest.raises(RegisterError, match="does not exist"):
        register_files(table, ["p=3/bucket-0/missing.parquet"])
    with pytest.raises(RegisterError, match=r"\*\.parquet"):
        register_files(table, ["p=3/bucket-0/c.csv"])
    empty = put(table, "p=3/bucket-0/empty.parquet", pa.table({"v": pa.array([], pa.string())}))
    with pytest.raises(RegisterError, match="no rows"):
        register_files(table, [empty])


def test_primary_key_tables_are_refused(tmp_path: Path) -> None:
    table = make_table(
        tmp_path / "t", [("k", "INT"), ("v", "STRING")], primary_keys=("k",), options={"bucket": "2"}
    )
    rel = put(table, "bucket-0/f.parquet", pa.table({"k": pa.array([1], pa.int32()), "v": ["x"]}))
    with pytest.raises(RegisterError, match="primary-key table's files need sorted keys"):
        register_files(table, [rel])
    with pytest.raises(RegisterError, match="primary-key"):
        write_data_files(table, pa.table({"k": pa.array([1], pa.int32()), "v": ["x"]}))


def test_write_refuses_data_that_does_not_fit(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("a", "INT NOT NULL"), ("b", "STRING")])
    with pytest.raises(RegisterError, match=r"\['c'\] are not in the table"):
        write_data_files(table, pa.table({"a": [1], "c": [1]}))
    with pytest.raises(RegisterError, match="has 1 nulls"):
        write_data_files(table, pa.table({"a": [1, None]}))
    with pytest.raises(RegisterError, match="cannot be cast to INT"):
        write_data_files(table, pa.table({"a": ["one"]}))
    with pytest.raises(RegisterError, match="cannot be cast to INT"):
        write_data_files(table, pa.table({"a": [2**40]}))  # overflow is not silently wrapped
    assert not list(Path(table.root).glob("bucket-0/*"))
    [entry] = write_data_files(table, pa.table({"a": [1, 2]}))  # missing nullable column: nulls
    assert decoded_stats(table, entry.file)["b"] == (None, None, 2)


# -- fixed buckets -------------------------------------------------------------------------------


def test_default_bucket_matches_java_test_vectors() -> None:
    # FixedBucketRowKeyExtractorTest.testBucket: row (5, 6, 7) of INTs, 100 buckets.
    int_type = parse_type("INT")
    assert default_bucket(binary_row.encode([5], [int_type]), 100) == 96
    assert default_bucket(binary_row.encode([5, 6], [int_type] * 2), 100) == 27
    assert default_bucket(binary_row.encode([5, 6, 7], [int_type] * 3), 100) == 40


def test_fixed_bucket_write_and_register(tmp_path: Path) -> None:
    options = {"bucket": "4", "bucket-key": "k"}
    table = make_table(tmp_path / "t", [("k", "STRING"), ("v", "INT")], options=options)
    keys = [f"key-{i}" for i in range(200)]
    data = pa.table({"k": keys, "v": pa.array(range(200), pa.int32())})
    entries = write_data_files(table, data)
    assert {e.bucket for e in entries} == {0, 1, 2, 3}
    string = parse_type("STRING")
    for e in entries:
        assert e.total_buckets == 4
        rows = pq.read_table(Path(table.root) / f"bucket-{e.bucket}" / e.file.file_name)
        assert {
            default_bucket(binary_row.encode([k], [string]), 4) for k in rows.column("k").to_pylist()
        } == {e.bucket}
    Committer(table).commit(entries)
    # A second writer continues each bucket's sequence numbers after the live files.
    again = write_data_files(table, data.slice(0, 50))
    first = {e.bucket: e.file.max_sequence_number for e in entries}
    assert all(e.file.min_sequence_number == first[e.bucket] + 1 for e in again)
    # A file whose rows belong to other buckets is refused; the right rows are accepted.
    right = [k for k in keys if default_bucket(binary_row.encode([k], [string]), 4) == 2]
    good = put(
        table, "bucket-2/good.parquet", pa.table({"k": right, "v": pa.array([0] * len(right), pa.int32())})
    )
    bad = put(table, "bucket-2/bad.parquet", data)
    [entry] = register_files(table, [good])
    assert (entry.bucket, entry.total_buckets) == (2, 4)
    with pytest.raises(RegisterError, match="hash to other buckets"):
        register_files(table, [bad])
    with pytest.raises(RegisterError, match="out of range"):
        locate(table, "bucket-4/f.parquet")


def test_fixed_bucket_needs_a_bucket_key(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", [("k", "INT")], options={"bucket": "2"})
    with pytest.raises(RegisterError, match="bucket-key"):
        write_data_files(table, pa.table({"k": [1]}))


# -- sources -------------------------------------------------------------------------------------


def test_read_source_formats(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,name\n1,x\n2,y\n")
    (tmp_path / "a.jsonl").write_text(
        "\n".join(json.dumps({"id": i, "name": n}) for i, n in [(1, "x"), (2, "y")])
    )
    pq.write_table(pa.table({"id": [1, 2], "name": ["x", "y"]}), tmp_path / "a.parquet")
    schema = WriteSchema(pa.schema([("id", pa.int32()), ("name", pa.string())]), {"id": "INT"})
    for name in ("a.csv", "a.jsonl", "a.parquet"):
        read = read_source(str(tmp_path / name), schema)
        assert read.schema == schema.arrow  # the table's types, whatever the file held (int64 for parquet)
        assert read.column("id").to_pylist() == [1, 2] and read.column("name").to_pylist() == ["x", "y"]
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(RegisterError, match="unsupported source format"):
        read_source(str(tmp_path / "a.txt"), schema)
