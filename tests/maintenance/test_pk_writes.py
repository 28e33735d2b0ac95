"""Primary-key writes by our writer (``core/paimon/write/pk_writes.py``), read back by pypaimon 2.1.

Every table is a private copy of a prepared fixture table pypaimon wrote (``tests/fixtures/paimon_pk``) or a
table made here. The expected rows are a model of the merge engine applied to pypaimon's own read of the
table before the write; pypaimon's read after the write must equal it. Structural invariants are checked
with F's checker (``tests/support/paimon_pk.check_pk_table``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import (
    CommitConflictError,
    RegisterError,
    UnsupportedFormatError,
    UsageError,
)
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.kv_read import read_kv
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write import pk_writes
from airflow_lakeformat.core.paimon.write.pk_writes import write_primary_key_rows
from tests.support.paimon_pk import (  # noqa: F401  (fixtures)
    check_pk_table,
    listing,
    paimon_pk_pristine_fixture,
    paimon_pk_tables_fixture,
)

Copy = Callable[[str], tuple[str, dict[str, Any]]]
Key = tuple[str, int]


def live(path: str) -> list[ManifestEntry]:
    table = Table.open(path)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    return live_entries(table, snapshot)


def bucket_max(entries: Iterable[ManifestEntry]) -> dict[tuple[bytes, int], int]:
    out: dict[tuple[bytes, int], int] = {}
    for e in entries:
        key = (e.partition, e.bucket)
        out[key] = max(out.get(key, -1), e.file.max_sequence_number)
    return out


def check_newer(
    path: str, before: list[ManifestEntry], *, source: FileSource | None = None
) -> list[ManifestEntry]:
    """The files added since ``before``: level 0, numbered after every live file of their bucket."""
    old = {e.file.file_name for e in before}
    highest = bucket_max(before)
    added = [e for e in live(path) if e.file.file_name not in old]
    assert added
    for e in added:
        assert e.file.level == 0
        if source is not None:
            assert e.file.file_source == source
        assert e.file.min_sequence_number > highest.get((e.partition, e.bucket), -1), e.file.file_name
    return added


def dedup(model: dict[Key, dict[str, Any]], rows: Iterable[dict[str, Any]], kind: str = "op") -> None:
    """Deduplicate engine, rows in order: -U/-D remove the key, +I/+U replace it."""
    for row in rows:
        key = (row["p"], row["k"])
        if row.get(kind) in ("-D", "-U"):
            model.pop(key, None)
        else:
            model[key] = dict(row)


def by_key(rows: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(r["p"], r["k"]): r for r in rows}


def upserts(path: str, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    """One pypaimon commit of ``rows``."""
    from tests.support.pypaimon import run_oracle

    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(rows))
    run_oracle("pk-upserts", path, "--rows", rows_file)


@pytest.mark.interop
def test_upserts_and_deletes_interleaved_with_pypaimon_then_compacted(
    paimon_pk_tables: Copy, tmp_path: Path
) -> None:
    """pypaimon writes, we write (row kinds from ``rowkind.field``), pypaimon writes: sequence numbers grow per
    bucket, the last write of a key wins, our -D removes pypaimon's key; a full compaction keeps the rows."""
    from tests.support.pypaimon import oracle_read, run_oracle_batch

    path, _ = paimon_pk_tables("pk_dedup")
    model = by_key(oracle_read(path))
    keys = sorted(model)
    gone, updated, twice = keys[0], keys[1], keys[2]
    first = [{"p": twice[0], "k": twice[1], "v": "pypaimon", "n": 1, "op": "+U"}]
    upserts(path, first, tmp_path)
    dedup(model, first)

    before = live(path)
    ours = [
        {"p": updated[0], "k": updated[1], "v": "ours-1", "n": 2, "op": "+U"},
        {"p": gone[0], "k": gone[1], "v": None, "n": None, "op": "-D"},
        {"p": "new", "k": 7, "v": "a", "n": 3, "op": "+I"},
        {"p": updated[0], "k": updated[1], "v": "ours-2", "n": 4, "op": "+U"},  # same key twice in one batch
        {"p": twice[0], "k": twice[1], "v": "ours", "n": 5, "op": "+U"},
    ]
    writes = open_table(path).writes()
    done = writes.write_rows(pa.Table.from_pylist(ours), commit_user="cdc", commit_identifier=1)
    dedup(model, ours)
    assert done["commitKind"] == "APPEND" and done["rowsWritten"] == 4, (
        done
    )  # the two versions merged into one
    added = check_newer(path, before, source=FileSource.APPEND)
    table = Table.open(path)
    assert table.snapshot_manager.latest_snapshot().commit_kind is CommitKind.APPEND
    kinds = pa.concat_tables(read_kv(table, e, table.schema) for e in added).column("_VALUE_KIND").to_pylist()
    assert sorted(kinds) == [0, 2, 2, 3]  # +I new, +U (two versions merged), -D, +U
    assert sum(e.file.delete_row_count for e in added) == 1
    assert check_pk_table(path) == []
    again = writes.write_rows(pa.Table.from_pylist(ours), commit_user="cdc", commit_identifier=1)
    assert again["alreadyCommitted"] and again["snapshotId"] == done["snapshotId"]

    before = live(path)
    last = [{"p": twice[0], "k": twice[1], "v": "pypaimon-last", "n": 6, "op": "+U"}]
    rows_file = tmp_path / "last.json"
    rows_file.write_text(json.dumps(last))
    _, after_rows = run_oracle_batch([["pk-upserts", path, "--rows", str(rows_file)], ["read", path]])
    dedup(model, last)
    check_newer(path, before)
    assert by_key(after_rows) == model and len(after_rows) == len(model)

    result = open_table(path).maintenance.compact_data(mode="full")
    assert result.to_json()["snapshotId"] is not None
    assert by_key(oracle_read(path)) == model
    assert check_pk_table(path) == []


@pytest.mark.interop
def test_row_kind_column_sequence_field_and_partition_overwrite(paimon_pk_tables: Copy) -> None:
    """An input column names the kinds (not a table column: dropped); ``sequence.field`` orders a batch's
    versions before the sequence number; an overwrite replaces one partition, numbered from 0."""
    from tests.support.pypaimon import oracle_read

    path, _ = paimon_pk_tables("pk_dedup_seq")
    model = by_key(oracle_read(path))
    (p, k), (p2, k2) = sorted(model)[:2]
    late = [
        {"p": p, "k": k, "ts": 10**12, "v": "newest", "op": "+U"},
        {"p": p, "k": k, "ts": 10**12 - 1, "v": "late arrival", "op": "+U"},  # loses: smaller ts
        {"p": p2, "k": k2, "ts": 10**12, "v": None, "op": "-D"},
    ]
    writes = open_table(path).writes()
    writes.commit(pa.Table.from_pylist(late), commit_user="u", commit_identifier=None, row_kind_column="op")
    model[(p, k)] = {"p": p, "k": k, "ts": 10**12, "v": "newest"}
    model.pop((p2, k2))

    replaced = [{"p": "é", "k": 1, "ts": 1, "v": "only"}, {"p": "é", "k": 2, "ts": 1, "v": "two"}]
    done = writes.write_rows(
        pa.Table.from_pylist(replaced), commit_user="u", commit_identifier=2, overwrite="p=é"
    )
    assert done["commitKind"] == "OVERWRITE" and done["filesDeleted"] > 0
    model = {key: row for key, row in model.items() if key[0] != "é"} | by_key(replaced)
    assert by_key(oracle_read(path)) == model
    ours = [
        e for e in live(path) if e.file.file_source == FileSource.APPEND and e.file.min_sequence_number == 0
    ]
    assert ours and {e.file.level for e in ours} == {0}
    assert check_pk_table(path) == []


@pytest.mark.interop
def test_first_row_and_partial_update_tables(paimon_pk_tables: Copy) -> None:
    """first-row: our level-0 rows are invisible until a full compaction, which keeps the first version;
    partial-update: a batch's partial rows merge field by field with what pypaimon wrote."""
    from tests.support.pypaimon import oracle_read, run_oracle_batch

    first, summary = paimon_pk_tables("pk_first_row")
    partial, _ = paimon_pk_tables("pk_partial")
    visible, partial_rows = run_oracle_batch([["read", first], ["read", partial]])
    expected = by_key(summary["expectedRows"])
    old = sorted(expected)[0]
    rows = [{"p": old[0], "k": old[1], "v": "not first", "n": 0}, {"p": "new", "k": 1, "v": "first", "n": 1},
            {"p": "new", "k": 1, "v": "second", "n": 2}]  # fmt: skip
    open_table(first).writes().write_rows(pa.Table.from_pylist(rows), commit_user="u", commit_identifier=1)
    assert by_key(oracle_read(first)) == by_key(visible), "batch readers skip level 0 of a first-row table"
    open_table(first).maintenance.compact_data(mode="full")
    expected[("new", 1)] = rows[1]
    assert by_key(oracle_read(first)) == expected

    model = by_key(partial_rows)
    key = sorted(model)[0]
    batch = [{"p": key[0], "k": key[1], "a": None, "b": 99, "c": None},
             {"p": "new", "k": 5, "a": "x", "b": None, "c": 1.5},
             {"p": "new", "k": 5, "a": None, "b": 7, "c": None}]  # fmt: skip
    open_table(partial).writes().write_rows(pa.Table.from_pylist(batch), commit_user="u", commit_identifier=1)
    model[key] = {**model[key], "b": 99}
    model[("new", 5)] = {"p": "new", "k": 5, "a": "x", "b": 7, "c": 1.5}
    assert by_key(oracle_read(partial)) == model
    assert check_pk_table(first) == [] and check_pk_table(partial) == []


# ---- tables made here (no pypaimon) ----------------------------------------------------------------


def make_pk(root: Path, options: dict[str, str], fields: list[tuple[str, str]] | None = None,
            partition_keys: tuple[str, ...] = ("p",), primary_keys: tuple[str, ...] = ("p", "k")) -> Table:  # fmt: skip
    fields = fields or [("p", "STRING NOT NULL"), ("k", "BIGINT NOT NULL"), ("v", "STRING"), ("op", "STRING")]
    schema = schema_from_fields(
        [{"name": n, "type": t} for n, t in fields],
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options={"bucket": "2", **options},
    )
    return create_table(str(root), schema)


def merged_rows(table: Table) -> dict[Key, tuple[Any, int]]:
    """What a batch reader sees, by our own merge of every live file: key -> (v, kind)."""
    from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
    from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

    table = Table.open(table.root)
    entries = live(table.root)
    kv = pa.concat_tables(read_kv(table, e, table.schema) for e in entries)
    merged = merge_kv(kv, MergeSpec.from_schema(table.schema, table.uri), drop_deletes=True)
    return {(r["p"], r["k"]): (r["v"], r["_VALUE_KIND"]) for r in merged.to_pylist()}


def test_ignore_delete_and_update_before_filter_at_write_time(tmp_path: Path) -> None:
    table = make_pk(tmp_path / "t", {"rowkind.field": "op", "ignore-update-before": "true"})
    rows = pa.Table.from_pylist(
        [
            {"p": "a", "k": 1, "v": "x", "op": "+I"},
            {"p": "a", "k": 2, "v": "y", "op": "+I"},
            {"p": "a", "k": 1, "v": "x", "op": "-U"},
            {"p": "a", "k": 2, "v": None, "op": "-D"},
        ]
    )
    done = write_primary_key_rows(table, rows, commit_user="u")
    assert done.rows_filtered == 1 and sum(e.file.row_count for e in done.added) == 2
    assert merged_rows(table) == {("a", 1): ("x", 0)}, "-U ignored, -D applied"
    bucket_of = {
        (r["p"], r["k"]): e.bucket for e in done.added for r in read_kv(table, e, table.schema).to_pylist()
    }
    kept = [("a", 1), ("a", 2), ("a", 2)]  # the -U took no sequence number
    numbers = [sum(bucket_of[x] == bucket_of[key] for x in kept[:i]) for i, key in enumerate(kept)]
    written = {
        (r["p"], r["k"]): r["_SEQUENCE_NUMBER"]
        for e in done.added
        for r in read_kv(table, e, table.schema).to_pylist()
    }
    assert written == {("a", 1): numbers[0], ("a", 2): numbers[2]}, "numbered in input order per bucket"

    ignoring = make_pk(tmp_path / "i", {"rowkind.field": "op", "ignore-delete": "true"})
    done = write_primary_key_rows(ignoring, rows, commit_user="u")
    assert done.rows_filtered == 2
    assert merged_rows(ignoring) == {("a", 1): ("x", 0), ("a", 2): ("y", 0)}
    assert check_pk_table(ignoring.root) == []


def test_a_concurrent_writer_taking_the_sequence_numbers_makes_the_batch_write_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = make_pk(tmp_path / "t", {"rowkind.field": "op"})
    real = pk_writes.write_pk_files
    calls = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(len(calls))
        if len(calls) == 1:  # another writer commits to the same bucket before our commit
            other = pa.Table.from_pylist([{"p": "a", "k": 1, "v": "other", "op": "+I"}])
            monkeypatch.setattr(pk_writes, "write_pk_files", real)
            write_primary_key_rows(table, other, commit_user="other")
            monkeypatch.setattr(pk_writes, "write_pk_files", racing)
        return out

    monkeypatch.setattr(pk_writes, "write_pk_files", racing)
    ours = pa.Table.from_pylist([{"p": "a", "k": 1, "v": "ours", "op": "+U"}])
    done = write_primary_key_rows(table, ours, commit_user="ours")
    assert len(calls) == 2, "written again after the conflict"
    assert done.added[0].file.min_sequence_number == 1
    assert merged_rows(table) == {("a", 1): ("ours", 2)}, "the later commit wins"
    names = {e.file.file_name for e in live(table.root)}
    on_disk = {p.name for p in Path(table.root).rglob("data-*.parquet")}
    assert on_disk == names, "the first attempt's files were discarded"

    def always(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        monkeypatch.setattr(pk_writes, "write_pk_files", real)
        write_primary_key_rows(table, ours, commit_user="again")
        monkeypatch.setattr(pk_writes, "write_pk_files", always)
        return out

    monkeypatch.setattr(pk_writes, "write_pk_files", always)
    with pytest.raises(CommitConflictError, match="concurrent writer"):
        write_primary_key_rows(table, ours, commit_user="loser")


def test_an_overwrite_replaces_an_append_committed_after_it_was_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java makes an overwrite's deletes on each attempt: a concurrent append into the partition that lands
    between our plan and our publish is replaced too, instead of surviving with sequence numbers above the
    overwrite's (numbered from 0) and winning over its rows."""
    table = make_pk(tmp_path / "t", {"rowkind.field": "op"})
    write_primary_key_rows(table, pa.Table.from_pylist([{"p": "a", "k": 1, "v": "old", "op": "+I"}]))
    real = pk_writes.Committer.overwrite_entries
    raced: list[str] = []

    def racing(self: Any, *args: Any, **kwargs: Any) -> Any:
        planned = real(self, *args, **kwargs)
        if not raced:  # another writer appends to the partition right after our deletes were made
            raced.append("late")
            late = pa.Table.from_pylist([{"p": "a", "k": 1, "v": "late", "op": "+U"}])
            write_primary_key_rows(table, late, commit_user="other")
        return planned

    monkeypatch.setattr(pk_writes.Committer, "overwrite_entries", racing)
    ours = pa.Table.from_pylist([{"p": "a", "k": 1, "v": "new", "op": "+I"}])
    done = write_primary_key_rows(
        table, ours, commit_user="ours", overwrite=True, partition_filter={"p": "a"}
    )
    assert raced and done.result is not None
    assert {e.file.file_name for e in live(table.root)} == {e.file.file_name for e in done.added}
    assert merged_rows(table) == {("a", 1): ("new", 0)}, "the overwrite's row, not the late append's"
    assert check_pk_table(table.root) == []


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"bucket": "-1"}, UnsupportedFormatError, "bucket=-1 \\(dynamic bucket"),
        ({"bucket": "-2"}, UnsupportedFormatError, "bucket=-2"),
        ({"changelog-producer": "input"}, UnsupportedFormatError, "changelog-producer=input"),
        ({"deletion-vectors.enabled": "true"}, UnsupportedFormatError, "deletion-vectors.enabled=true"),
        (
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"},
            UnsupportedFormatError,
            "collect",
        ),
        ({"merge-engine": "first-row"}, RegisterError, "first-row cannot accept"),
        ({"merge-engine": "partial-update"}, RegisterError, "partial-update cannot accept"),
        (
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "max"},
            RegisterError,
            "cannot retract",
        ),
        ({"rowkind.field": "v"}, UsageError, "row_kind_column='op' but the table's rowkind.field is 'v'"),
    ],
)
def test_refusals_are_typed_and_write_nothing(
    tmp_path: Path, options: dict[str, str], error: type[Exception], message: str
) -> None:
    fields = [("p", "STRING NOT NULL"), ("k", "BIGINT NOT NULL"), ("v", "STRING")]
    if options.get("fields.v.aggregate-function") == "max":
        fields[2] = ("v", "BIGINT")
    table = make_pk(tmp_path / "t", options, fields)
    before = listing(table.root)
    rows = pa.Table.from_pylist(
        [{"p": "a", "k": 1, "v": None, "op": "+I"}, {"p": "a", "k": 2, "v": None, "op": "-D"}]
    )
    with pytest.raises(error, match=message):
        open_table(table.root).writes().write_rows(
            rows, commit_user="u", commit_identifier=1, row_kind_column="op"
        )
    assert listing(table.root) == before


def test_cross_partition_bad_kinds_and_row_kinds_on_append_tables_are_refused(tmp_path: Path) -> None:
    cross = make_pk(tmp_path / "c", {"bucket": "-1"})
    schema_file = Path(cross.root) / "schema" / "schema-0"
    document = json.loads(schema_file.read_text())
    schema_file.write_text(
        json.dumps({**document, "primaryKeys": ["k"]})
    )  # create_table refuses it; Paimon not
    cross = Table.open(cross.root)
    rows = pa.Table.from_pylist([{"p": "a", "k": 1, "v": "x", "op": "+X"}])
    with pytest.raises(UnsupportedFormatError, match="cross-partition upsert"):
        write_primary_key_rows(cross, rows)
    table = make_pk(tmp_path / "t", {"rowkind.field": "op"})
    before = listing(table.root)
    with pytest.raises(RegisterError, match="row 1: row kind '\\+X'"):
        write_primary_key_rows(table, rows)
    with pytest.raises(RegisterError, match="row-kind column 'kind' is not in the input"):
        write_primary_key_rows(make_pk(tmp_path / "n", {}), rows.drop_columns(["op"]), row_kind_column="kind")
    with pytest.raises(RegisterError, match="primary-key table's files need sorted keys"):
        open_table(table.root).writes().commit(
            None, ["p=a/bucket-0/x.parquet"], commit_user="u", commit_identifier=1
        )
    assert listing(table.root) == before
    append = create_table(
        str(tmp_path / "a"), schema_from_fields([{"name": "v", "type": "STRING"}], options={"bucket": "-1"})
    )
    with pytest.raises(UsageError, match="row_kind_column is for rows written into a primary-key table"):
        open_table(append.root).writes().write_rows(
            pa.table({"v": ["x"]}), commit_user="u", commit_identifier=1, row_kind_column="v"
        )


def test_cli_write_upserts_a_primary_key_table(tmp_path: Path) -> None:
    """``lakeformat write`` goes through the facade: ``rowkind.field`` kinds, level-0 APPEND files."""
    from tests.unit.test_cli import run

    table = make_pk(tmp_path / "t", {"rowkind.field": "op"})
    source = tmp_path / "in.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {"p": "a", "k": 1, "v": "x", "op": "+I"},
                {"p": "a", "k": 1, "v": "y", "op": "+U"},
                {"p": "b", "k": 2, "v": "z", "op": "+I"},
            ]
        ),
        source,
    )
    code, out, err = run("write", table.root, "--from", str(source), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["commitKind"] == "APPEND" and document["rowsAdded"] == 2
    assert merged_rows(table) == {("a", 1): ("y", 2), ("b", 2): ("z", 0)}
    assert {(e.file.level, e.file.file_source) for e in live(table.root)} == {(0, FileSource.APPEND)}
    assert check_pk_table(table.root) == []


def test_cli_row_kind_column_deletes_and_is_refused_elsewhere(tmp_path: Path) -> None:
    """``--row-kind-column``: an input column the table lacks carries the kinds and is not written."""
    from tests.unit.test_cli import run

    fields = [("p", "STRING NOT NULL"), ("k", "BIGINT NOT NULL"), ("v", "STRING")]
    table = make_pk(tmp_path / "t", {}, fields)
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"p": "a", "k": 1, "v": "x", "kind": "+I"}\n{"p": "a", "k": 2, "v": "y", "kind": "+I"}\n'
        '{"p": "a", "k": 1, "v": null, "kind": "-D"}\n'
    )
    code, out, err = run("write", table.root, "--from", str(source), "--row-kind-column", "kind", "--json")
    assert code == 0, err
    assert json.loads(out)["rowsAdded"] == 2
    assert merged_rows(table) == {("a", 2): ("y", 0)}
    written = pq.read_schema(next(Path(table.root).rglob("data-*.parquet"))).names
    assert "v" in written and "kind" not in written
    append = create_table(str(tmp_path / "a"), schema_from_fields([{"name": "v", "type": "STRING"}]))
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"v": "x", "kind": "+I"}\n')
    before = listing(append.root)
    code, out, err = run("write", append.root, "--from", str(plain), "--row-kind-column", "kind")
    assert code == 2 and "row_kind_column is for rows written into a primary-key table" in err
    assert listing(append.root) == before
    postponed = make_pk(tmp_path / "pp", {"bucket": "-2"}, fields)
    code, out, err = run(
        "write", postponed.root, "--from", str(source), "--row-kind-column", "kind", "--dry-run"
    )
    assert code == 5 and "bucket=-2" in err, "a dry run refuses what the real run refuses"


@pytest.mark.parametrize(
    "combo", [["BIGINT"], ["SMALLINT", "TINYINT"], ["BOOLEAN", "DATE", "INT"], ["INT"] * 9]
)
def test_vectorized_buckets_equal_the_row_by_row_hash(combo: list[str]) -> None:
    """``row_buckets``' fixed-width fast path against ``default_bucket`` of each row's encoded BinaryRow
    (negative values, nulls, a two-word header)."""
    import numpy as np

    from airflow_lakeformat.core.paimon import binary_row
    from airflow_lakeformat.core.paimon.arrow_types import arrow_type, internal_values
    from airflow_lakeformat.core.paimon.types import parse_type
    from airflow_lakeformat.core.paimon.write.bucketing import default_bucket, row_buckets

    rng = np.random.default_rng(7)
    types = [parse_type(t) for t in combo]
    bits = {"BOOLEAN": 1, "TINYINT": 7, "SMALLINT": 15, "INT": 31, "DATE": 31, "BIGINT": 63}
    columns = {}
    for i, dtype in enumerate(types):
        high = bits[dtype.root]
        low = 0 if high == 1 else -(2**high)
        values = [int(v) for v in rng.integers(low, 2**high - 1 if high > 1 else 2, 500, dtype=np.int64)]
        if dtype.root == "BOOLEAN":
            values = [bool(v) for v in values]
        columns[f"c{i}"] = pa.array([None if rng.random() < 0.1 else v for v in values], arrow_type(dtype))
    data = pa.table(columns)
    rows = zip(
        *(internal_values(data.column(k), t) for k, t in zip(columns, types, strict=True)), strict=True
    )
    encoded = [binary_row.encode(list(row), types) for row in rows]
    for buckets in (1, 3, 16):
        assert row_buckets(data, list(columns), types, buckets) == [
            default_bucket(e, buckets) for e in encoded
        ]


def test_the_write_operator_keeps_primary_key_tables_in_the_worker_with_their_row_kinds(
    tmp_path: Path,
) -> None:
    """The Spark ``write`` job writes append tables only: ``auto`` runs a primary-key table's upserts in the
    worker, ``spark`` is refused before anything is read, and ``row_kind_column`` reaches the writer."""
    from types import SimpleNamespace

    from airflow_lakeformat.operators.write import LakeformatWriteOperator

    table = make_pk(tmp_path / "t", {})
    write_primary_key_rows(table, pa.Table.from_pylist([{"p": "a", "k": 1, "v": "x", "op": None}]))
    lake = open_table(table.root)
    source = tmp_path / "cdc.parquet"
    pq.write_table(pa.Table.from_pylist([{"p": "a", "k": 1, "v": None, "kind": "-D"}]), source)
    auto = LakeformatWriteOperator(
        task_id="w",
        table="x",
        source=str(source),
        execution="auto",
        spark_min_files=0,
        row_kind_column="kind",
        commit_user="cdc",
    )
    assert auto.choose_execution(lake) == "local", "no Spark job writes a primary-key table"
    spark = LakeformatWriteOperator(task_id="s", table="x", source=str(source), execution="spark")
    with pytest.raises(UnsupportedFormatError, match="upserts run in the worker"):
        spark.choose_execution(lake)
    auto.check_table(lake)
    auto.hook = cast(Any, SimpleNamespace(storage_options=lambda _uri: {}))  # the source is a local file
    context = cast(Any, {"ti": SimpleNamespace(dag_id="d", task_id="w", map_index=-1), "run_id": "r"})
    result = auto.run_local(context, lake)
    assert result["rowsWritten"] == 1 and merged_rows(table) == {}, "the -D from the kind column deleted k=1"
