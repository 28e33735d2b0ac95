"""Key-value data files of primary-key tables: ``merge_tree.kv_files.read_kv`` / ``write_kv`` (issue 27).

read_kv on pypaimon's files (no field ids, ``_KEY_*`` columns), on thin files and on a Java-style file
(field ids, INT96 nanosecond timestamps); its typed refusals. write_kv round trips and the exact
``DataFileMeta`` fields Java writes (min/max key bytes, key stats, sequence range, deleteRowCount, size,
rolling), thin mode, stats modes, per-level formats.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    MaintenanceRefusedError,
    MissingMetadataError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.kv_files import (
    holds_retractions,
    read_kv,
    retraction_check,
    write_kv,
)
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import (
    KEY_FIELD_ID_START,
    SEQUENCE_NUMBER,
    SEQUENCE_NUMBER_FIELD_ID,
    VALUE_KIND,
    kv_arrow_schema,
)
from airflow_lakeformat.core.paimon.merge_tree.kv_stats import truncate_max, truncate_min
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import DataType

FIELDS = [
    {"name": "dt", "type": "STRING"},
    {"name": "k1", "type": "STRING"},
    {"name": "k2", "type": "INT"},
    {"name": "v", "type": "DOUBLE"},
    {"name": "s", "type": "STRING"},
    {"name": "d", "type": "DECIMAL(20, 2)"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
]
PARTITION = binary_row.encode(["2024-01-01"], [DataType("VARCHAR", length=2147483647)])


def make_table(path: Path, **options: str) -> Table:
    schema = schema_from_fields(FIELDS, ["dt"], ["dt", "k1", "k2"], {"bucket": "2", **options})
    return create_table(str(path), schema)


def kv_rows(schema: TableSchema, count: int, *, start_seq: int = 100) -> pa.Table:
    """``count`` unique keys in Java order: k1 (short and long strings) then k2; -D, -U, +U and +I rows."""
    keys = sorted((f"key-{i // 3:05d}" + ("-long-suffix" if i % 2 else ""), i % 3 - 1) for i in range(count))
    keys.sort(key=lambda k: (k[0].encode(), k[1]))
    rows = len(keys)
    columns: dict[str, Any] = {
        "_KEY_k1": [k[0] for k in keys],
        "_KEY_k2": [k[1] for k in keys],
        SEQUENCE_NUMBER: [start_seq + (i * 37) % rows for i in range(rows)],
        VALUE_KIND: [3 if i % 7 == 0 else 1 if i % 13 == 0 else 2 if i % 5 == 0 else 0 for i in range(rows)],
        "dt": ["2024-01-01"] * rows,
        "k1": [k[0] for k in keys],
        "k2": [k[1] for k in keys],
        "v": [None if i % 11 == 0 else i / 3 for i in range(rows)],
        "s": [f"a-long-value-of-more-than-sixteen-characters-{i}" if i % 4 else None for i in range(rows)],
        "d": [Decimal(f"{i}.25") for i in range(rows)],
        "ts": [1_700_000_000_000_000 + i for i in range(rows)],
    }
    target = kv_arrow_schema(schema)
    return pa.Table.from_arrays([pa.array(columns[f.name], f.type) for f in target], schema=target)


def entry_for(meta: DataFileMeta, partition: bytes = PARTITION, bucket: int = 0) -> ManifestEntry:
    return ManifestEntry.create(FileKind.ADD, partition, bucket, 2, meta)


def file_path(table: Table, entry: ManifestEntry) -> str:
    return os.path.join(table.root, DataFilePaths(table.schema).relative_path(entry))


def write(table: Table, data: list[pa.Table], level: int = 5, target: int = 1 << 20) -> list[DataFileMeta]:
    return write_kv(
        table,
        table.schema,
        partition=PARTITION,
        bucket=0,
        total_buckets=2,
        level=level,
        data=data,
        target_file_size=target,
    )


def write_parquet(data: pa.Table, path: str, **options: Any) -> None:
    """``pq.write_table`` without its import of ``pyarrow.dataset`` (seconds on a busy machine)."""
    with pq.ParquetWriter(path, data.schema, **options) as writer:
        writer.write_table(data)


def key_types(schema: TableSchema) -> list[DataType]:
    return [schema.field(k).type for k in schema.trimmed_primary_keys]


# -- read_kv ---------------------------------------------------------------------------------------


def test_read_kv_on_pypaimon_files(sample_tables: Path) -> None:
    table = Table.open(str(sample_tables / "pk_tbl"))
    schema = table.schema
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    entries = live_entries(table, snapshot)
    assert entries
    for entry in entries:
        kv = read_kv(table, entry, schema)
        assert kv.schema == kv_arrow_schema(schema)
        assert kv.num_rows == entry.file.row_count
        raw = pq.ParquetFile(file_path(table, entry)).read()
        assert kv.column("_KEY_pk").to_pylist() == raw.column("pk").to_pylist() == kv.column("pk").to_pylist()
        assert kv.column(SEQUENCE_NUMBER).to_pylist() == raw.column(SEQUENCE_NUMBER).to_pylist()
        assert kv.column("v").to_pylist() == raw.column("v").to_pylist()
        seqs = kv.column(SEQUENCE_NUMBER).to_pylist()
        assert (min(seqs), max(seqs)) == (entry.file.min_sequence_number, entry.file.max_sequence_number)


def test_read_kv_derives_keys_of_a_thin_file(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    kv = kv_rows(table.schema, 20)
    meta = DataFileMeta.create("data-thin-0.parquet", 0, kv.num_rows, schema_id=0)
    path = file_path(table, entry_for(meta))
    os.makedirs(os.path.dirname(path))
    write_parquet(kv.drop_columns(["_KEY_k1", "_KEY_k2"]), path)
    assert read_kv(table, entry_for(meta), table.schema).equals(kv)
    # Some but not all key columns: corrupt.
    write_parquet(kv.drop_columns(["_KEY_k2"]), path)
    with pytest.raises(CorruptMetadataError, match="_KEY_k2"):
        read_kv(table, entry_for(meta), table.schema)


def test_read_kv_on_a_java_style_file(tmp_path: Path) -> None:
    """Field ids, Java's column order, TIMESTAMP(9) as INT96 and TIMESTAMP_LTZ(3) as UTC-adjusted millis."""
    fields = [
        {"name": "id", "type": "BIGINT"},
        {"name": "name", "type": "VARCHAR(20)"},
        {"name": "t9", "type": "TIMESTAMP(9)"},
        {"name": "ltz", "type": "TIMESTAMP(3) WITH LOCAL TIME ZONE"},
        {"name": "small", "type": "TINYINT"},
    ]
    table = create_table(str(tmp_path / "java"), schema_from_fields(fields, [], ["id"], {"bucket": "1"}))
    target = kv_arrow_schema(table.schema)
    assert target.field("_KEY_id").metadata[b"PARQUET:field_id"] == str(KEY_FIELD_ID_START).encode()
    data = pa.Table.from_arrays(
        [
            pa.array([1, 2], pa.int64()),
            pa.array([5, 6], pa.int64()),
            pa.array([0, 3], pa.int8()),
            pa.array([1, 2], pa.int64()),
            pa.array(["a", "b"]),
            pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns")),
            pa.array([1_700_000_000_123, 5], pa.timestamp("ms", tz="UTC")),
            pa.array([-3, 4], pa.int8()),
        ],
        schema=target,
    )
    meta = DataFileMeta.create("data-java-0.parquet", 0, 2, schema_id=0)
    entry = ManifestEntry.create(FileKind.ADD, binary_row.EMPTY_ROW, 0, 1, meta)
    path = file_path(table, entry)
    os.makedirs(os.path.dirname(path))
    write_parquet(data, path, use_deprecated_int96_timestamps=True, store_decimal_as_integer=True)
    physical = pq.ParquetFile(path).schema
    assert physical.column(5).physical_type == "INT96"
    assert (
        pq.read_schema(path).field(SEQUENCE_NUMBER).metadata[b"PARQUET:field_id"]
        == str(SEQUENCE_NUMBER_FIELD_ID).encode()
    )
    kv = read_kv(table, entry, table.schema)
    assert kv.equals(data)
    assert kv.column("t9").to_pylist()[0].value == 1_700_000_000_123_456_789


def test_read_kv_refusals(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    kv = kv_rows(table.schema, 10)
    meta = write(table, [kv])[0]
    entry = entry_for(meta)
    assert read_kv(table, entry, table.schema).equals(kv)

    wrong_count = entry_for(DataFileMeta({**meta.record, "_ROW_COUNT": 11}))
    with pytest.raises(CorruptMetadataError, match="holds 10 rows but its manifest entry says 11"):
        read_kv(table, wrong_count, table.schema)

    missing = entry_for(DataFileMeta({**meta.record, "_FILE_NAME": "data-gone-0.parquet"}))
    with pytest.raises(MissingMetadataError, match=re.escape("data-gone-0.parquet")):
        read_kv(table, missing, table.schema)

    garbage = entry_for(DataFileMeta({**meta.record, "_FILE_NAME": "data-garbage-0.parquet"}))
    Path(file_path(table, garbage)).write_bytes(b"not parquet at all")
    with pytest.raises(CorruptMetadataError, match=re.escape("data-garbage-0.parquet")):
        read_kv(table, garbage, table.schema)

    orc = entry_for(DataFileMeta({**meta.record, "_FILE_NAME": "data-x-0.orc"}))
    with pytest.raises(UnsupportedFormatError, match=re.escape("data-x-0.orc")):
        read_kv(table, orc, table.schema)

    # A file of schema 1 whose fields differ from the current schema 0 is refused, naming the file.
    evolved = TableSchema.from_json({**table.schema.to_json(), "id": 1})
    evolved = TableSchema.from_json(
        {**evolved.to_json(), "fields": [*evolved.to_json()["fields"], {"id": 7, "name": "x", "type": "INT"}]}
    )
    (Path(table.schema_dir) / "schema-1").write_bytes(evolved.to_bytes())
    with pytest.raises(MaintenanceRefusedError, match=meta.file_name):
        read_kv(table, entry, evolved)
    # Same fields under another id are fine.
    same = TableSchema.from_json({**table.schema.to_json(), "id": 2})
    assert read_kv(table, entry, same).num_rows == 10


# -- write_kv --------------------------------------------------------------------------------------


def _key_values(kv: pa.Table, row: int) -> list[Any]:
    return [kv.column("_KEY_k1")[row].as_py(), kv.column("_KEY_k2")[row].as_py()]


def test_write_kv_round_trip_and_exact_meta(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    schema = table.schema
    kv = kv_rows(schema, 300)
    metas = write(table, [kv.slice(0, 120), kv.slice(120)], level=4)
    assert len(metas) == 1
    meta = metas[0]
    entry = entry_for(meta)
    back = read_kv(table, entry, schema)
    assert back.equals(kv)
    path = file_path(table, entry)
    assert meta.file_size == os.path.getsize(path)
    assert meta.row_count == 300
    assert meta.level == 4
    assert meta.file_source is FileSource.COMPACT
    assert meta.schema_id == schema.id
    assert meta.extra_files == [] and meta.external_path is None and meta.embedded_index is None
    assert meta.file_name.startswith("data-") and meta.file_name.endswith("-0.parquet")
    assert meta.min_key == binary_row.encode(_key_values(kv, 0), key_types(schema))
    assert meta.max_key == binary_row.encode(_key_values(kv, 299), key_types(schema))
    seqs = kv.column(SEQUENCE_NUMBER).to_pylist()
    assert (meta.min_sequence_number, meta.max_sequence_number) == (min(seqs), max(seqs))
    kinds = kv.column(VALUE_KIND).to_pylist()
    assert meta.delete_row_count == sum(1 for k in kinds if k in (1, 3)) > 0
    # Key stats: every key field, exact per-field bounds.
    stats = meta.key_stats
    k1 = kv.column("k1").to_pylist()
    k2 = kv.column("k2").to_pylist()
    assert binary_row.decode(stats.min_values, key_types(schema)) == [min(k1), min(k2)]
    assert binary_row.decode(stats.max_values, key_types(schema)) == [max(k1), max(k2)]
    assert stats.null_counts == [0, 0]
    # Field ids as Java writes them; the written _KEY_ columns equal the value columns.
    file_schema = pq.read_schema(path)
    assert file_schema.names == kv_arrow_schema(schema).names
    assert file_schema.field("_KEY_k2").metadata[b"PARQUET:field_id"] == str(KEY_FIELD_ID_START + 2).encode()
    raw = pq.ParquetFile(path).read()
    assert raw.column("_KEY_k1").equals(raw.column("k1")) and raw.column("_KEY_k2").equals(raw.column("k2"))


def test_write_kv_value_stats_default_truncate_16(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    kv = kv_rows(table.schema, 40)
    meta = write(table, [kv])[0]
    cols = meta.value_stats_cols
    # DOUBLE gets no statistics (NaN order), as the append writer decides; the rest are dense.
    assert cols == ["dt", "k1", "k2", "s", "d", "ts"]
    types = [table.schema.field(c).type for c in cols]
    low = binary_row.decode(meta.value_stats.min_values, types)
    high = binary_row.decode(meta.value_stats.max_values, types)
    strings = [x for x in kv.column("s").to_pylist() if x is not None]
    assert low[3] == min(strings)[:16] and len(low[3]) == 16
    assert high[3] == truncate_max(max(strings), 16) and high[3] > max(strings)[:16]
    assert low[2] == min(kv.column("k2").to_pylist()) and low[4] == Decimal("0.25")
    assert meta.value_stats.null_counts == [0, 0, 0, kv.column("s").null_count, 0, 0]


@pytest.mark.parametrize(
    "options, cols, first_min",
    [
        ({"metadata.stats-mode": "none"}, [], None),
        ({"metadata.stats-mode": "counts"}, None, None),
        ({"metadata.stats-mode": "full"}, ["dt", "k1", "k2", "s", "d", "ts"], "2024-01-01"),
        ({"metadata.stats-mode": "none", "fields.k2.stats-mode": "full"}, ["k2"], -1),
        ({"metadata.stats-mode.per.level": "5:none"}, [], None),
        (
            {"metadata.stats-mode": "full", "metadata.stats-keep-first-n-columns": "2"},
            ["dt", "k1"],
            "2024-01-01",
        ),
    ],
)
def test_write_kv_value_stats_modes(
    tmp_path: Path, options: dict[str, str], cols: Any, first_min: Any
) -> None:
    table = make_table(tmp_path / "t", **options)
    kv = kv_rows(table.schema, 12)
    meta = write(table, [kv], level=5)
    assert meta[0].value_stats_cols == cols
    names = cols if cols is not None else [f.name for f in table.schema.fields]
    if names:
        types = [table.schema.field(c).type for c in names]
        assert binary_row.decode(meta[0].value_stats.min_values, types)[0] == first_min
    if options.get("metadata.stats-mode") == "counts":
        assert meta[0].value_stats.null_counts == [kv.column(f.name).null_count for f in table.schema.fields]


def test_truncation_of_string_and_binary_bounds() -> None:
    assert truncate_min("abcdef", 3) == "abc" and truncate_max("abcdef", 3) == "abd"
    assert truncate_max("ab", 3) == "ab"
    assert truncate_max("a\U0010ffffz", 2) == "b"
    assert truncate_max("\U0010ffff\U0010ffffz", 2) is None
    assert truncate_max(b"\x01\xff\x07", 2) == b"\x02" and truncate_max(b"\xff\xff\x01", 2) is None


def test_write_kv_rolls_at_the_target_size(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    schema = table.schema
    kv = kv_rows(schema, 3000)
    target = 16 << 10
    written: list[str] = []
    metas = write_kv(
        table,
        schema,
        partition=PARTITION,
        bucket=0,
        total_buckets=2,
        level=3,
        data=[kv],
        target_file_size=target,
        written=written,
    )
    assert len(metas) > 2
    assert sorted(written) == sorted(file_path(table, entry_for(m)) for m in metas)
    assert len({m.file_name for m in metas}) == len(metas)
    assert all(m.file_size >= target for m in metas[:-1])
    assert all(m.file_size < 4 * target for m in metas)
    parts = [read_kv(table, entry_for(m), schema) for m in metas]
    assert pa.concat_tables(parts).equals(kv)
    offset = 0
    types = key_types(schema)
    for meta, part in zip(metas, parts, strict=True):
        assert meta.row_count == part.num_rows
        assert meta.min_key == binary_row.encode(_key_values(kv, offset), types)
        assert meta.max_key == binary_row.encode(_key_values(kv, offset + part.num_rows - 1), types)
        seqs = part.column(SEQUENCE_NUMBER).to_pylist()
        assert (meta.min_sequence_number, meta.max_sequence_number) == (min(seqs), max(seqs))
        assert meta.delete_row_count == sum(1 for k in part.column(VALUE_KIND).to_pylist() if k in (1, 3))
        offset += part.num_rows


def test_write_kv_thin_mode_leaves_out_the_key_columns(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", **{"data-file.thin-mode": "true"})
    kv = kv_rows(table.schema, 30)
    meta = write(table, [kv])[0]
    path = file_path(table, entry_for(meta))
    assert pq.read_schema(path).names == kv_arrow_schema(table.schema, thin=True).names
    assert "_KEY_k1" not in pq.read_schema(path).names
    assert read_kv(table, entry_for(meta), table.schema).equals(kv)
    # Value statistics skip the two system columns, not the (absent) key columns.
    assert meta.value_stats_cols == ["dt", "k1", "k2", "s", "d", "ts"]
    types = [table.schema.field(c).type for c in meta.value_stats_cols]
    assert binary_row.decode(meta.value_stats.min_values, types)[2] == -1
    assert binary_row.decode(meta.key_stats.min_values, key_types(table.schema)) == [
        min(kv.column("k1").to_pylist()),
        -1,
    ]


def test_write_kv_refuses_other_formats_and_honours_per_level_compression(tmp_path: Path) -> None:
    table = make_table(
        tmp_path / "t", **{"file.format.per.level": "0:avro,5:orc", "file.compression.per.level": "4:snappy"}
    )
    kv = kv_rows(table.schema, 5)
    with pytest.raises(UnsupportedFormatError, match="orc data files at level 5"):
        write(table, [kv], level=5)
    meta = write(table, [kv], level=4)[0]
    path = file_path(table, entry_for(meta))
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "SNAPPY"
    meta = write(table, [kv], level=3)[0]
    assert (
        pq.ParquetFile(file_path(table, entry_for(meta))).metadata.row_group(0).column(0).compression
        == "ZSTD"
    )
    assert write(table, [kv.slice(0, 0)], level=3) == []


def test_retractions_are_read_from_the_rows_not_the_metadata(tmp_path: Path) -> None:
    """pypaimon 2.1 records ``_DELETE_ROW_COUNT`` 0 for files holding -D rows: a zero is checked on the rows."""
    table = make_table(tmp_path / "t")
    kv = kv_rows(table.schema, 30)
    with_deletes = write(table, [kv])[0]
    clean_rows = kv.filter(pc.equal(kv.column(VALUE_KIND), 0))
    clean = write(table, [clean_rows])[0]
    assert with_deletes.delete_row_count and clean.delete_row_count == 0
    assert holds_retractions(table, entry_for(with_deletes), table.schema)
    assert not holds_retractions(table, entry_for(clean), table.schema)
    lying = DataFileMeta({**with_deletes.record, "_DELETE_ROW_COUNT": 0})
    unknown = DataFileMeta(
        {**clean.record, "_FILE_NAME": "data-unknown-0.parquet", "_DELETE_ROW_COUNT": None}
    )
    entries = {m.file_name: entry_for(m) for m in (lying, clean, unknown)}
    check = retraction_check(table, table.schema, entries)
    assert check(lying) and not check(clean)
    assert check(unknown)  # null: may hold deletes, without reading (the file does not even exist)


def test_write_kv_refuses_input_out_of_key_order(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    kv = kv_rows(table.schema, 20)
    written: list[str] = []
    with pytest.raises(ValueError, match="not sorted by unique key"):
        write_kv(
            table,
            table.schema,
            partition=PARTITION,
            bucket=0,
            total_buckets=2,
            level=5,
            data=[kv.slice(10), kv.slice(0, 10)],
            target_file_size=1 << 20,
            written=written,
        )
    assert len(written) == 1  # the file begun is reported for orphan accounting
    with pytest.raises(ValueError, match="not sorted by unique key"):
        write(table, [kv.slice(0, 10), kv.slice(9)])
