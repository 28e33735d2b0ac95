"""Partition directory names, computed as Paimon Java computes them."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.paths import (
    DataFilePaths,
    PartitionCodec,
    PartitionFilter,
    bucket_directory_name,
    escape_path_name,
    format_partition_spec,
    parse_overwrite_spec,
    parse_partition_spec,
    unescape_path_name,
)
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import DataField, parse_type
from airflow_lakeformat.core.paimon.values import (
    cast_partition_string,
    from_python,
    java_float_to_string,
    legacy_partition_string,
    to_json_value,
)


@pytest.mark.parametrize(
    ("value", "single", "expected"),
    [
        (1.0, False, "1.0"),
        (0.001, False, "0.001"),
        (1e-4, False, "1.0E-4"),
        (9999999.0, False, "9999999.0"),
        (1e7, False, "1.0E7"),
        (-2.5e-5, False, "-2.5E-5"),
        (123.456, False, "123.456"),
        (0.1, True, "0.1"),
        (3.4028234663852886e38, True, "3.4028235E38"),
        (float("nan"), False, "NaN"),
        (float("-inf"), False, "-Infinity"),
        (-0.0, False, "-0.0"),
    ],
)
def test_java_floating_point_to_string(value: float, single: bool, expected: str) -> None:
    assert java_float_to_string(value, single_precision=single) == expected


@pytest.mark.parametrize(
    ("type_sql", "value", "legacy", "cast"),
    [
        ("DATE", 19723, "19723", "2024-01-01"),
        ("INT", -5, "-5", "-5"),
        ("BOOLEAN", True, "true", "true"),
        ("DECIMAL(10, 2)", Decimal("12.30"), "12.30", "12.30"),
        ("DECIMAL(10, 2)", Decimal(0).scaleb(-2), "0.00", "0.00"),
        ("TIMESTAMP(3)", Timestamp(1704164645123, 0), "2024-01-02T03:04:05.123", "2024-01-02 03:04:05.123"),
        ("TIMESTAMP(6)", Timestamp(1704164640000, 0), "2024-01-02T03:04", "2024-01-02 03:04:00.000000"),
        ("TIMESTAMP(0)", Timestamp(1704164645000, 0), "2024-01-02T03:04:05", "2024-01-02 03:04:05"),
        (
            "TIMESTAMP(9)",
            Timestamp(1704164645000, 1),
            "2024-01-02T03:04:05.000000001",
            "2024-01-02 03:04:05.000000001",
        ),
        ("TIMESTAMP(6)", Timestamp(-1, 0), "1969-12-31T23:59:59.999", "1969-12-31 23:59:59.999000"),
        ("TIME(3)", 3_723_004, "3723004", "01:02:03.004"),
        ("STRING", "a b", "a b", "a b"),
    ],
)
def test_legacy_and_cast_partition_strings(type_sql: str, value: object, legacy: str, cast: str) -> None:
    dtype = parse_type(type_sql)
    assert legacy_partition_string(value, dtype) == legacy
    assert cast_partition_string(value, dtype) == cast


def test_binary_partition_keys_follow_pypaimon_naming() -> None:
    # Java would print an identity hash; pypaimon's repr is the only reproducible name.
    assert legacy_partition_string(b"\x01\xff'", parse_type("BYTES")) == 'b"\\x01\\xff\'"'


def test_escaping_matches_paimon_character_set() -> None:
    assert escape_path_name("a/b:c=d") == "a%2Fb%3Ac%3Dd"
    assert escape_path_name("x#y%z?") == "x%23y%25z%3F"
    assert escape_path_name("\x00\x1f\x7f") == "%00%1F%7F"
    assert escape_path_name("\"'*\\{}[]^") == "%22%27%2A%5C%7B%7D%5B%5D%5E"
    assert escape_path_name("é space-_.~") == "é space-_.~"
    for text in ["a/b:c=d", "100%", "%zz", "plain"]:
        assert unescape_path_name(escape_path_name(text)) == text


def _schema(fields: list[tuple[str, str]], keys: list[str], **options: str) -> TableSchema:
    return TableSchema(
        id=0,
        fields=tuple(DataField(i, n, parse_type(t)) for i, (n, t) in enumerate(fields)),
        partition_keys=tuple(keys),
        options=dict(options),
    )


def _entry(partition: bytes, bucket: int = 0, external: str | None = None) -> ManifestEntry:
    meta = DataFileMeta.create("data-1-0.parquet", 10, 1, external_path=external)
    return ManifestEntry.create(FileKind.ADD, partition, bucket, -1, meta)


def test_data_file_paths_follow_paimon_layout() -> None:
    schema = _schema([("d", "DATE"), ("s", "STRING"), ("v", "INT")], ["d", "s"])
    types = schema.partition_types
    paths = DataFilePaths(schema)
    row = binary_row.encode([from_python(date(2024, 1, 1), types[0]), "a/b"], types)
    assert paths.relative_path(_entry(row, 3)) == "d=19723/s=a%2Fb/bucket-3/data-1-0.parquet"
    for blank in (None, "", "  "):
        row = binary_row.encode([None, blank], types)
        assert paths.bucket_directory(row, 0) == "d=__DEFAULT_PARTITION__/s=__DEFAULT_PARTITION__/bucket-0"
    assert paths.partitions.to_json(binary_row.encode([19723, None], types)) == {"d": "2024-01-01", "s": None}


def test_options_change_the_layout() -> None:
    schema = _schema(
        [("d", "DATE"), ("v", "INT")],
        ["d"],
        **{
            "partition.legacy-name": "false",
            "partition.default-name": "NULLS",
            "data-file.path-directory": "data",
        },
    )
    paths = DataFilePaths(schema)
    row = binary_row.encode([19723], schema.partition_types)
    assert paths.bucket_directory(row, -2) == "data/d=2024-01-01/bucket-postpone"
    assert (
        paths.bucket_directory(binary_row.encode([None], schema.partition_types), 1)
        == "data/d=NULLS/bucket-1"
    )


def test_unpartitioned_and_external_files() -> None:
    schema = _schema([("v", "INT")], [])
    paths = DataFilePaths(schema)
    assert paths.relative_path(_entry(binary_row.EMPTY_ROW, 0)) == "bucket-0/data-1-0.parquet"
    external = "s3://other-bucket/ext/bucket-0/data-1-0.parquet"
    assert paths.relative_path(_entry(binary_row.EMPTY_ROW, 0, external)) == external
    assert bucket_directory_name(-2) == "bucket-postpone"


def test_json_rendering_and_python_conversion() -> None:
    ts = parse_type("TIMESTAMP(6)")
    value = from_python(datetime(2024, 1, 2, 3, 4, 5, 123456), ts)
    assert value == Timestamp(1704164645123, 456000)
    assert to_json_value(value, ts) == "2024-01-02T03:04:05.123456"
    assert to_json_value(b"\x01\xff", parse_type("BYTES")) == "01ff"
    assert to_json_value(3_723_004, parse_type("TIME(3)")) == "01:02:03.004000"
    assert to_json_value(Decimal("1.50"), parse_type("DECIMAL(5, 2)")) == "1.50"


def test_partition_specs_parse_from_strings_and_mappings() -> None:
    assert parse_partition_spec("dt=2024-01-01, region=eu") == {"dt": "2024-01-01", "region": "eu"}
    assert parse_partition_spec({"dt": 20240101}) == {"dt": "20240101"}
    assert parse_partition_spec("dt=") == {"dt": ""}
    for whole_table in ("*", "", " ", None, {}):
        assert parse_partition_spec(whole_table) is None
    with pytest.raises(ValueError, match="'dt' is not of the form KEY=VALUE"):
        parse_partition_spec("dt")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_partition_spec("=x")


def test_only_an_explicit_star_overwrites_the_whole_table() -> None:
    assert parse_overwrite_spec("*") is None and parse_overwrite_spec(" * ") is None
    assert parse_overwrite_spec("dt=1") == {"dt": "1"}
    for names_nothing in (",", "", {}):
        with pytest.raises(ValueError, match="expected '\\*' or k=v"):
            parse_overwrite_spec(names_nothing)


def test_json_specs_keep_awkward_values_exactly() -> None:
    assert parse_partition_spec('{"p": " ", "q": null}') == {"p": " ", "q": None}
    assert parse_partition_spec('{"p": "a,b=c", "n": 7, "b": true}') == {"p": "a,b=c", "n": "7", "b": "true"}
    assert parse_overwrite_spec('{"p": ""}') == {"p": ""}
    for bad in ('{"p": ', '{"p": {"x": 1}}', '{"p": [1]}'):
        with pytest.raises(ValueError, match=r"JSON object|not a scalar"):
            parse_partition_spec(bad)


@given(
    st.dictionaries(
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(
            lambda k: k.strip() == k and "," not in k and "=" not in k and not k.startswith("{")
        ),
        st.none() | st.text(st.characters(blacklist_categories=("Cs",))),
        min_size=1,
        max_size=3,
    )
)
def test_format_partition_spec_round_trips_every_value(spec: dict[str, str | None]) -> None:
    assert parse_partition_spec(format_partition_spec(spec)) == spec


def _string_partition(*values: str | None) -> tuple[PartitionCodec, list[bytes]]:
    schema = _schema([("p", "STRING"), ("v", "INT")], ["p"])
    codec = PartitionCodec(schema)
    return codec, [binary_row.encode([v], schema.partition_types) for v in values]


def test_the_default_partition_name_selects_null_only_never_blank_strings() -> None:
    codec, rows = _string_partition(None, "", " ", "plain", "__DEFAULT_PARTITION__")
    # NULL, '' and ' ' share one directory; selection is by value.
    assert len({codec.path(r) for r in rows[:3]}) == 1

    def selected(spec: dict[str, str | None]) -> list[str | None]:
        match = PartitionFilter(codec, [spec])
        return [codec.values(r)[0] for r in rows if match(r)]

    assert selected({"p": "__DEFAULT_PARTITION__"}) == [None]
    assert selected({"p": None}) == [None]
    assert selected({"p": ""}) == [""]
    assert selected({"p": " "}) == [" "]
    assert selected({"p": "plain"}) == ["plain"]
    assert PartitionFilter(codec, None)(rows[1]) and PartitionFilter(codec, [])(rows[2])
    either = PartitionFilter(codec, [{"p": ""}, {"p": "plain"}])
    assert [codec.values(r)[0] for r in rows if either(r)] == ["", "plain"]
    with pytest.raises(ValueError, match=r"\['v'\] are not partition keys"):
        PartitionFilter(codec, [{"v": "1"}])


def test_typed_partition_values_match_by_value_in_any_unambiguous_spelling() -> None:
    schema = _schema([("d", "DATE"), ("n", "INT"), ("b", "BOOLEAN"), ("x", "STRING")], ["d", "n", "b"])
    codec = PartitionCodec(schema)
    day = from_python(date(2024, 1, 1), schema.partition_types[0])
    row = binary_row.encode([day, 7, True], schema.partition_types)
    null_row = binary_row.encode([None, None, None], schema.partition_types)
    for spec in (
        {"d": "2024-01-01"},
        {"d": str(day)},
        {"n": "7"},
        {"b": "true"},
        {"d": "2024-01-01", "n": "7"},
    ):
        assert PartitionFilter(codec, [spec])(row), spec
        assert not PartitionFilter(codec, [spec])(null_row), spec
    for spec in ({"d": "2024-01-02"}, {"n": "8"}, {"b": "false"}, {"n": "07x"}):
        assert not PartitionFilter(codec, [spec])(row), spec
    assert PartitionFilter(codec, [{"d": "__DEFAULT_PARTITION__", "n": None}])(null_row)
