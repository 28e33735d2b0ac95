"""merge_kv and MergeSpec on hand-made KV tables: each engine, the merge order, ambiguity and refusals.

Expected values follow Java's merge functions (``DeduplicateMergeFunction``, ``FirstRowMergeFunction``,
``PartialUpdateMergeFunction``, ``AggregateMergeFunction`` with ``ReducerMergeFunctionWrapper``).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from airflow_lakeformat.core.errors import AmbiguousSequenceError, MaintenanceRefusedError
from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec
from tests.maintenance.merge_tree_merge_support import INS, UA, UB, D, kv_table, make_schema, merged

KV = {"k": "BIGINT NOT NULL", "v": "STRING", "n": "INT"}


def rows_of(result: list[dict], *names: str) -> list[tuple]:
    return [tuple(r[name] for name in names) for r in result]


# -- deduplicate -----------------------------------------------------------------------------------------


def test_deduplicate_keeps_the_last_record_by_sequence_number_whatever_the_input_order() -> None:
    schema = make_schema(KV)
    rows = [
        {"k": 2, "v": "b2", "seq": 7},
        {"k": 1, "v": "late", "seq": 9},
        {"k": 1, "v": "early", "seq": 3},
        {"k": 3, "v": "gone", "seq": 4},
        {"k": 3, "v": "gone", "seq": 5, "kind": D},
    ]
    out = merged(schema, rows)
    assert rows_of(out, "k", "v", "seq", "kind") == [
        (1, "late", 9, INS),
        (2, "b2", 7, INS),
        (3, "gone", 5, D),
    ]
    assert rows_of(merged(schema, rows, drop=True), "k") == [(1,), (2,)]


def test_a_lone_record_passes_through_with_its_kind() -> None:
    schema = make_schema(KV, options={"merge-engine": "partial-update", "ignore-delete": "true"})
    rows = [{"k": 1, "v": None, "n": 4, "seq": 1, "kind": UB}, {"k": 2, "v": "x", "seq": 2, "kind": UA}]
    assert rows_of(merged(schema, rows), "k", "v", "n", "kind") == [(1, None, 4, UB), (2, "x", None, UA)]
    assert rows_of(merged(schema, rows, drop=True), "k", "kind") == [(2, UA)]


def test_deduplicate_ignore_delete_skips_retractions_of_merged_keys_only() -> None:
    schema = make_schema(KV, options={"deduplicate.ignore-delete": "true"})  # a fallback key
    rows = [
        {"k": 1, "v": "a", "seq": 1},
        {"k": 1, "v": "a", "seq": 2, "kind": D},
        {"k": 2, "v": "b", "seq": 3, "kind": D},
        {"k": 2, "v": "b", "seq": 4, "kind": UB},
        {"k": 3, "v": "c", "seq": 5, "kind": D},
    ]
    assert rows_of(merged(schema, rows), "k", "seq", "kind") == [(1, 1, INS), (3, 5, D)]


def test_sequence_field_orders_late_arrivals_before_the_sequence_number() -> None:
    fields = {"k": "BIGINT NOT NULL", "v": "STRING", "ts": "BIGINT"}
    rows = [
        {"k": 1, "v": "newest-ts", "ts": 20, "seq": 1},
        {"k": 1, "v": "late-arrival", "ts": 10, "seq": 2},
        {"k": 1, "v": "null-ts", "ts": None, "seq": 3},
        {"k": 2, "v": "tie-a", "ts": 5, "seq": 4},
        {"k": 2, "v": "tie-b", "ts": 5, "seq": 5},
    ]
    ascending = make_schema(fields, options={"sequence.field": "ts"})
    assert rows_of(merged(ascending, rows), "k", "v", "seq") == [(1, "newest-ts", 1), (2, "tie-b", 5)]
    descending = make_schema(
        fields, options={"sequence.field": " ts ", "sequence.field.sort-order": "DESCENDING"}
    )
    # Descending: the smallest ts wins; nulls still sort first, so they never win over a value.
    assert rows_of(merged(descending, rows), "k", "v") == [(1, "late-arrival"), (2, "tie-b")]


def test_two_sequence_fields_compare_in_order() -> None:
    fields = {"k": "INT NOT NULL", "a": "INT", "b": "STRING"}
    schema = make_schema(fields, options={"sequence.field": "a,b"})
    rows = [
        {"k": 1, "a": 1, "b": "z", "seq": 1},
        {"k": 1, "a": 1, "b": "é", "seq": 0},
        {"k": 1, "a": 0, "seq": 9},
    ]
    assert rows_of(merged(schema, rows), "b", "seq") == [("é", 0)]


# -- key order -----------------------------------------------------------------------------------------


def test_keys_sort_as_java_nulls_first_unsigned_bytes() -> None:
    schema = make_schema({"s": "STRING", "b": "BYTES", "v": "INT"}, keys=("s", "b"))
    rows = [
        {"s": "z", "b": b"a", "v": 1, "seq": 1},
        {"s": "é", "b": b"a", "v": 2, "seq": 2},
        {"s": None, "b": b"a", "v": 3, "seq": 3},
        {"s": "z", "b": b"\xff", "v": 4, "seq": 4},
        {"s": "z", "b": None, "v": 5, "seq": 5},
        {"s": "", "b": b"", "v": 6, "seq": 6},
        {"s": "z", "b": b"a\x00", "v": 7, "seq": 7},
    ]
    out = merged(schema, rows)
    assert [r["v"] for r in out] == [3, 6, 5, 1, 7, 4, 2]


def test_float_keys_follow_float_compare() -> None:
    schema = make_schema({"f": "DOUBLE", "g": "FLOAT", "v": "INT"}, keys=("f", "g"))
    nan = float("nan")
    values = [nan, 1.0, None, -0.0, 0.0, math.inf, -math.inf, -1.5]
    rows = [{"f": x, "g": 1.0, "v": i, "seq": i} for i, x in enumerate(values)]
    rows.append({"f": float("-nan"), "g": 1.0, "v": 99, "seq": 99})  # every NaN is one key in Java
    out = merged(schema, rows)
    assert [r["v"] for r in out] == [2, 6, 7, 3, 4, 1, 5, 99]
    assert math.copysign(1.0, out[3]["f"]) == -1.0 and math.copysign(1.0, out[4]["f"]) == 1.0
    floats = [{"f": 1.0, "g": x, "v": i, "seq": i} for i, x in enumerate([0.0, -0.0, nan, -math.inf])]
    assert [r["v"] for r in merged(schema, floats)] == [3, 1, 0, 2]


def test_partition_only_primary_key_merges_everything_into_one_key() -> None:
    schema = make_schema({"p": "STRING NOT NULL", "v": "INT"}, keys=("p",), partitions=("p",))
    rows = [{"p": "x", "v": 1, "seq": 2}, {"p": "x", "v": 2, "seq": 1}]
    assert rows_of(merged(schema, rows), "v", "seq") == [(1, 2)]


# -- ambiguity -------------------------------------------------------------------------------------------


def test_same_key_and_sequence_is_refused_naming_the_key() -> None:
    schema = make_schema(KV)
    rows = [{"k": 1, "v": "a", "seq": 1}, {"k": 7, "v": "b", "seq": 4}, {"k": 7, "v": "c", "seq": 4}]
    with pytest.raises(AmbiguousSequenceError, match=r"_KEY_k=7") as info:
        merged(schema, rows)
    assert "_SEQUENCE_NUMBER=4" in str(info.value)


def test_same_sequence_number_with_different_sequence_field_is_not_ambiguous() -> None:
    schema = make_schema({"k": "INT NOT NULL", "ts": "INT"}, options={"sequence.field": "ts"})
    rows = [{"k": 1, "ts": 2, "seq": 4}, {"k": 1, "ts": 1, "seq": 4}]
    assert rows_of(merged(schema, rows), "ts") == [(2,)]
    with pytest.raises(AmbiguousSequenceError):
        merged(schema, [*rows, {"k": 1, "ts": 2, "seq": 4}])


# -- first-row -------------------------------------------------------------------------------------------


def test_first_row_keeps_the_oldest_record() -> None:
    schema = make_schema(KV, options={"merge-engine": "first-row"})
    rows = [
        {"k": 1, "v": "new", "seq": 5},
        {"k": 1, "v": "old", "seq": 2},
        {"k": 2, "v": "x", "seq": 3, "kind": UA},
    ]
    assert rows_of(merged(schema, rows), "k", "v", "kind") == [(1, "old", INS), (2, "x", UA)]


def test_first_row_refuses_retractions_unless_ignore_delete() -> None:
    rows = [
        {"k": 1, "v": "a", "seq": 1, "kind": D},
        {"k": 1, "v": "b", "seq": 2},
        {"k": 2, "v": "c", "seq": 3},
    ]
    with pytest.raises(MaintenanceRefusedError, match=r"first-row.*_KEY_k=1.*ignore-delete"):
        merged(make_schema(KV, options={"merge-engine": "first-row"}), rows)
    schema = make_schema(KV, options={"merge-engine": "first-row", "first-row.ignore-delete": "true"})
    assert rows_of(merged(schema, rows), "k", "v") == [(1, "b"), (2, "c")]
    only_retractions = [
        {"k": 1, "seq": 1, "kind": D},
        {"k": 1, "seq": 2, "kind": UB},
        {"k": 2, "seq": 3, "kind": D},
    ]
    assert merged(schema, only_retractions) == []


def test_first_row_applies_the_function_to_a_lone_record_too() -> None:
    """Java compacts first-row through the lookup rewriter (no reducer): a lone retraction meets the function."""
    lone = [{"k": 1, "v": "a", "seq": 1}, {"k": 2, "v": "b", "seq": 2, "kind": D}]
    with pytest.raises(MaintenanceRefusedError, match=r"first-row.*_KEY_k=2"):
        merged(make_schema(KV, options={"merge-engine": "first-row"}), lone)
    schema = make_schema(KV, options={"merge-engine": "first-row", "ignore-delete": "true"})
    assert rows_of(merged(schema, lone), "k") == [(1,)]


# -- partial-update --------------------------------------------------------------------------------------


def test_partial_update_takes_each_fields_last_non_null_value() -> None:
    schema = make_schema(KV, options={"merge-engine": "partial-update"})
    rows = [
        {"k": 1, "v": "a", "n": 1, "seq": 1},
        {"k": 1, "v": None, "n": 2, "seq": 2, "kind": UA},
        {"k": 1, "v": "c", "n": None, "seq": 3},
    ]
    assert rows_of(merged(schema, rows), "v", "n", "seq", "kind") == [("c", 2, 3, INS)]


def test_partial_update_refuses_a_retraction_by_default() -> None:
    schema = make_schema(KV, options={"merge-engine": "partial-update"})
    rows = [{"k": 1, "v": "a", "seq": 1}, {"k": 1, "seq": 2, "kind": D}]
    with pytest.raises(MaintenanceRefusedError, match="remove-record-on-delete"):
        merged(schema, rows)


def test_partial_update_ignore_delete_keeps_the_sequence_and_a_first_retraction_initialises_the_row() -> None:
    schema = make_schema(
        KV, options={"merge-engine": "partial-update", "partial-update.ignore-delete": "true"}
    )
    rows = [
        {"k": 1, "v": "a", "n": 1, "seq": 1},
        {"k": 1, "v": "x", "n": 9, "seq": 2, "kind": D},
        {"k": 2, "v": "from-delete", "n": 5, "seq": 3, "kind": D},
        {"k": 2, "v": None, "n": 6, "seq": 4},
        {"k": 3, "v": "d1", "seq": 5, "kind": D},
        {"k": 3, "v": "d2", "seq": 6, "kind": UB},
    ]
    out = merged(schema, rows)
    assert rows_of(out, "k", "v", "n", "seq", "kind") == [
        (1, "a", 1, 1, INS),
        (2, "from-delete", 6, 4, INS),
        (3, "d1", None, 0, D),  # no insert seen: DELETE; the skipped retractions never set the sequence
    ]
    assert [r["k"] for r in merged(schema, rows, drop=True)] == [1, 2]


def test_partial_update_remove_record_on_delete() -> None:
    options = {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}
    schema = make_schema(KV, options=options)
    rows = [
        {"k": 1, "v": "a", "n": 1, "seq": 1},
        {"k": 1, "v": "del", "n": None, "seq": 2, "kind": D},
        {"k": 2, "v": "a", "n": 1, "seq": 3},
        {"k": 2, "v": "del", "n": None, "seq": 4, "kind": D},
        {"k": 2, "v": None, "n": 7, "seq": 5},
        {"k": 3, "v": "a", "n": 1, "seq": 6},
        {"k": 3, "v": "ub", "n": 2, "seq": 7, "kind": UB},
    ]
    assert rows_of(merged(schema, rows), "k", "v", "n", "seq", "kind") == [
        (1, "del", None, 2, D),
        (2, "del", 7, 5, INS),  # the -D's values stay under the later insert's nulls
        (3, "a", 1, 7, INS),  # a -U only moves the sequence number
    ]


def test_partial_update_not_null_field_must_stay_filled() -> None:
    schema = make_schema(
        {"k": "INT NOT NULL", "v": "STRING NOT NULL"}, options={"merge-engine": "partial-update"}
    )
    rows = [{"k": 1, "v": "a", "seq": 1}, {"k": 1, "v": None, "seq": 2}]
    with pytest.raises(MaintenanceRefusedError, match=r"NOT NULL field 'v'.*_KEY_k=1"):
        merged(schema, rows)


# -- aggregation -----------------------------------------------------------------------------------------

AGG_FIELDS = {
    "k": "INT NOT NULL",
    "s": "INT",
    "f": "FLOAT",
    "p": "BIGINT",
    "mx": "STRING",
    "mn": "DOUBLE",
    "lv": "STRING",
    "lnn": "STRING",
    "fv": "STRING",
    "fnn": "STRING",
    "ba": "BOOLEAN",
    "bo": "BOOLEAN",
    "la": "STRING",
    "d": "DECIMAL(5, 2)",
    "dflt": "STRING",
}
AGG_OPTIONS = {
    "merge-engine": "aggregation",
    "fields.s.aggregate-function": "sum",
    "fields.f.aggregate-function": "sum",
    "fields.p.aggregate-function": "product",
    "fields.mx.aggregate-function": "max",
    "fields.mn.aggregate-function": "min",
    "fields.lv.aggregate-function": "last_value",
    "fields.lnn.aggregate-function": "last_non_null_value",
    "fields.fv.aggregate-function": "first_value",
    "fields.fnn.aggregate-function": "first_not_null_value",  # the legacy name
    "fields.ba.aggregate-function": "bool_and",
    "fields.bo.aggregate-function": "bool_or",
    "fields.la.aggregate-function": "listagg",
    "fields.d.aggregate-function": "sum",
}


def test_every_aggregate_function_on_inserts() -> None:
    from decimal import Decimal

    schema = make_schema(AGG_FIELDS, options=AGG_OPTIONS)
    a = {
        "k": 1,
        "s": 1,
        "f": 0.1,
        "p": 3,
        "mx": "z",
        "mn": 2.0,
        "lv": "a",
        "lnn": "a",
        "fv": None,
        "fnn": None,
    }
    b = {"k": 1, "s": None, "f": 0.2, "p": None, "mx": "é", "mn": -0.0, "lv": None, "lnn": None, "fv": "b"}
    c = {"k": 1, "s": 2**31 - 2, "f": 0.3, "p": -4, "mx": None, "mn": float("nan"), "fnn": "c", "la": "x"}
    a |= {"ba": True, "bo": None, "la": None, "d": Decimal("1.25"), "dflt": "first", "seq": 1}
    b |= {"ba": None, "bo": False, "la": " \t", "d": None, "dflt": None, "seq": 2, "kind": UA}
    c |= {"ba": False, "bo": True, "d": Decimal("998.70"), "dflt": "third", "seq": 3}
    [out] = merged(schema, [a, b, c])
    expected_float = pa.array([0.1], pa.float32())[0].as_py()
    for x in (0.2, 0.3):  # float32 additions, one at a time, as Java's (float) + (float)
        expected_float = pa.array([expected_float + pa.array([x], pa.float32())[0].as_py()], pa.float32())[
            0
        ].as_py()
    assert out["s"] == 2**31 - 1 and out["p"] == -12 and out["f"] == expected_float
    assert (out["mx"], out["mn"]) == ("é", -0.0) and math.copysign(1.0, out["mn"]) == -1.0
    assert (out["lv"], out["lnn"], out["fv"], out["fnn"]) == (None, "a", None, "c")
    assert (out["ba"], out["bo"], out["la"], out["d"], out["dflt"]) == (
        False,
        True,
        "x",
        Decimal("999.95"),
        "third",
    )
    assert (out["seq"], out["kind"]) == (3, INS)


def test_listagg_delimiter_distinct_and_blanks() -> None:
    fields = {"k": "INT NOT NULL", "a": "STRING", "b": "STRING"}
    options = {
        "merge-engine": "aggregation",
        "fields.a.aggregate-function": "listagg",
        "fields.a.list-agg-delimiter": "|",
        "fields.b.aggregate-function": "listagg",
        "fields.b.distinct": "true",
    }
    values = [("x", "p,q"), ("\u00a0", "q,,r"), (None, "p"), ("", "s,p")]
    rows = [{"k": 1, "a": a, "b": b, "seq": i} for i, (a, b) in enumerate(values)]
    [out] = merged(make_schema(fields, options=options), rows)
    assert out["a"] == "x|\u00a0"  # a non-breaking space is not Java whitespace
    assert out["b"] == "p,q,r,s"


def test_first_value_keeps_a_null_first_and_max_min_skip_nulls() -> None:
    fields = {"k": "INT NOT NULL", "fv": "INT", "mx": "TIMESTAMP(6)"}
    options = {"merge-engine": "aggregation", "fields.fv.aggregate-function": "first_value"}
    options["fields.mx.aggregate-function"] = "max"
    from datetime import datetime

    rows = [
        {"k": 1, "fv": None, "mx": None, "seq": 1},
        {"k": 1, "fv": 5, "mx": datetime(2024, 1, 2), "seq": 2},
        {"k": 1, "fv": 6, "mx": datetime(2023, 1, 1), "seq": 3},
    ]
    [out] = merged(make_schema(fields, options=options), rows)
    assert (out["fv"], out["mx"]) == (None, datetime(2024, 1, 2))


def test_aggregation_retractions_as_java() -> None:
    fields = {"k": "INT NOT NULL", "s": "BIGINT", "p": "INT", "lv": "STRING", "lnn": "STRING", "x": "INT"}
    options = {
        "merge-engine": "aggregation",
        "fields.s.aggregate-function": "sum",
        "fields.p.aggregate-function": "product",
        "fields.lv.aggregate-function": "last_value",
        "fields.x.aggregate-function": "max",
        "fields.x.ignore-retract": "true",
    }
    rows = [
        {"k": 1, "s": 10, "p": -7, "lv": "a", "lnn": "a", "x": 1, "seq": 1},
        {"k": 1, "s": 3, "p": 2, "lv": "b", "lnn": "b", "x": 9, "seq": 2, "kind": UB},
        {"k": 2, "s": 4, "p": 3, "lv": "c", "lnn": None, "x": 5, "seq": 3, "kind": D},
        {"k": 2, "s": None, "p": None, "lv": None, "lnn": "z", "x": 2, "seq": 4},
    ]
    out = merged(make_schema(fields, options=options), rows)
    assert rows_of(out, "k", "s", "p", "lv", "lnn", "x", "kind") == [
        (
            1,
            7,
            -3,
            None,
            None,
            1,
            INS,
        ),  # -7 / 2 truncates toward zero; last_non_null retracts a non-null to null
        (2, -4, None, None, "z", 2, INS),  # sum retract from null negates; product retract keeps the null
    ]


def test_aggregation_refuses_retraction_of_a_function_without_it() -> None:
    fields = {"k": "INT NOT NULL", "x": "INT"}
    schema = make_schema(
        fields, options={"merge-engine": "aggregation", "fields.x.aggregate-function": "max"}
    )
    rows = [{"k": 1, "x": 1, "seq": 1}, {"k": 1, "x": 1, "seq": 2, "kind": UB}]
    with pytest.raises(
        MaintenanceRefusedError, match=r"'max' of field 'x'.*_KEY_k=1.*fields.x.ignore-retract"
    ):
        merged(schema, rows)
    lone = [{"k": 1, "x": 1, "seq": 2, "kind": UB}]
    assert rows_of(merged(schema, lone), "kind") == [(UB,)]  # a lone record never meets the function


def test_aggregation_remove_record_on_delete() -> None:
    fields = {"k": "INT NOT NULL", "s": "INT", "fv": "STRING"}
    options = {
        "merge-engine": "aggregation",
        "aggregation.remove-record-on-delete": "true",
        "fields.s.aggregate-function": "sum",
        "fields.fv.aggregate-function": "first_value",
    }
    rows = [
        {"k": 1, "s": 1, "fv": "a", "seq": 1},
        {"k": 1, "s": 5, "fv": "d", "seq": 2, "kind": D},
        {"k": 2, "s": 1, "fv": "a", "seq": 3},
        {"k": 2, "s": 5, "fv": "d", "seq": 4, "kind": D},
        {"k": 2, "s": 2, "fv": "b", "seq": 5},
    ]
    out = merged(make_schema(fields, options=options), rows)
    # The -D replaces the row; later inserts aggregate onto its values, first_value stays initialised.
    assert rows_of(out, "k", "s", "fv", "seq", "kind") == [(1, 5, "d", 2, D), (2, 7, "d", 5, INS)]


@pytest.mark.parametrize(
    ("dtype", "function", "values"),
    [
        ("INT", "sum", [2**31 - 1, 1]),
        ("TINYINT", "sum", [-100, -29]),
        ("BIGINT", "sum", [2**63 - 1, 1]),
        ("BIGINT", "product", [2**32, 2**31]),
        ("SMALLINT", "product", [300, 300]),
    ],
)
def test_integer_overflow_is_refused(dtype: str, function: str, values: list[int]) -> None:
    fields = {"k": "INT NOT NULL", "x": dtype}
    schema = make_schema(
        fields, options={"merge-engine": "aggregation", "fields.x.aggregate-function": function}
    )
    rows = [{"k": 3, "x": v, "seq": i} for i, v in enumerate(values)]
    with pytest.raises(MaintenanceRefusedError, match=r"overflow.*_KEY_k=3"):
        merged(schema, rows)


def test_decimal_sum_beyond_its_precision_is_refused() -> None:
    from decimal import Decimal

    fields = {"k": "INT NOT NULL", "d": "DECIMAL(3, 1)"}
    schema = make_schema(
        fields, options={"merge-engine": "aggregation", "fields.d.aggregate-function": "sum"}
    )
    rows = [{"k": 1, "d": Decimal("99.9"), "seq": 1}, {"k": 1, "d": Decimal("0.1"), "seq": 2}]
    with pytest.raises(MaintenanceRefusedError, match="exceeds DECIMAL"):
        merged(schema, rows)


def test_many_keys_many_versions_stay_aligned() -> None:
    """Runs of different lengths interleaved with lone keys: each key gets its own sum and last value."""
    fields = {"k": "INT NOT NULL", "s": "BIGINT", "v": "STRING"}
    schema = make_schema(
        fields, options={"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"}
    )
    rows = [
        {"k": k, "s": j, "v": f"{k}-{j}", "seq": 100 * j + k} for k in range(50) for j in range(k % 7 + 1)
    ]
    out = merged(schema, list(reversed(rows)))
    assert [(r["k"], r["s"], r["v"]) for r in out] == [
        (k, sum(range(k % 7 + 1)), f"{k}-{k % 7}") for k in range(50)
    ]


# -- refusals --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"merge-engine": "upsert"}, "'merge-engine'='upsert'"),
        ({"merge-engine": "partial-update", "force-lookup": "true"}, "'force-lookup'='true'"),
        ({"sequence.snapshot-ordering": "true"}, "'sequence.snapshot-ordering'"),
        ({"sequence.field": "nope"}, "'sequence.field'='nope'"),
        ({"sequence.field": "n", "sequence.field.sort-order": "up"}, "'sequence.field.sort-order'='up'"),
        ({"merge-engine": "first-row", "sequence.field": "n"}, "'sequence.field'='n'"),
        ({"ignore-delete": "yes"}, "'ignore-delete'='yes'"),
        ({"merge-engine": "partial-update", "fields.n.sequence-group": "v"}, "'fields.n.sequence-group'='v'"),
        (
            {"merge-engine": "partial-update", "partial-update.remove-record-on-sequence-group": "n"},
            "'partial-update.remove-record-on-sequence-group'='n'",
        ),
        (
            {"merge-engine": "partial-update", "fields.n.aggregate-function": "sum"},
            "'fields.n.aggregate-function'",
        ),
        (
            {
                "merge-engine": "partial-update",
                "ignore-delete": "true",
                "partial-update.remove-record-on-delete": "true",
            },
            "'partial-update.remove-record-on-delete'",
        ),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"}, "'collect'"),
        ({"merge-engine": "aggregation", "fields.n.aggregate-function": "rbm64"}, "'rbm64'"),
        (
            {"merge-engine": "aggregation", "fields.default-aggregate-function": "theta_sketch"},
            "'theta_sketch'",
        ),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "merge_map"}, "'merge_map'"),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "average"}, "'average'"),
        (
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
            "'fields.v.aggregate-function'='sum'",
        ),
        ({"merge-engine": "aggregation", "fields.n.aggregate-function": "bool_or"}, "'bool_or'"),
        (
            {
                "merge-engine": "aggregation",
                "aggregation.remove-record-on-delete": "true",
                "fields.n.ignore-retract": "true",
            },
            "'fields.n.ignore-retract'",
        ),
    ],
)
def test_refusals_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(MaintenanceRefusedError, match="refused") as info:
        MergeSpec.from_schema(make_schema(KV, options=options), "t")
    assert named in str(info.value)


def test_listagg_needs_an_unbounded_string_and_product_of_decimal_is_refused() -> None:
    fields = {"k": "INT NOT NULL", "c": "VARCHAR(10)", "d": "DECIMAL(10, 2)"}
    with pytest.raises(MaintenanceRefusedError, match="STRING field"):
        MergeSpec.from_schema(
            make_schema(
                fields, options={"merge-engine": "aggregation", "fields.c.aggregate-function": "listagg"}
            ),
            "t",
        )
    with pytest.raises(MaintenanceRefusedError, match="DECIMAL"):
        MergeSpec.from_schema(
            make_schema(
                fields, options={"merge-engine": "aggregation", "fields.d.aggregate-function": "product"}
            ),
            "t",
        )


def test_spec_defaults_and_resolution() -> None:
    schema = make_schema(
        {"p": "STRING NOT NULL", "k": "INT NOT NULL", "ts": "BIGINT", "v": "INT", "w": "INT"},
        keys=("p", "k"),
        partitions=("p",),
        options={
            "merge-engine": "Aggregation",
            "sequence.field": "ts",
            "fields.ts.aggregate-function": "sum",
            "fields.default-aggregate-function": "max",
            "fields.w.aggregate-function": "min",
            "ignore-update-before": "TRUE",
        },
    )
    spec = MergeSpec.from_schema(schema, "t")
    assert spec.key_columns == ("_KEY_k",)
    assert [(a.field, a.function) for a in spec.aggregates] == [
        ("p", "primary_key"),
        ("k", "primary_key"),
        ("ts", "last_value"),
        ("v", "max"),
        ("w", "min"),
    ]
    assert spec.ignore_update_before and not spec.ignore_delete
    plain = MergeSpec.from_schema(make_schema(KV), "t")
    assert (plain.engine, plain.sequence_fields, plain.aggregates) == ("deduplicate", (), ())


def test_empty_input_gives_an_empty_table() -> None:
    schema = make_schema(KV)
    empty = kv_table(schema, [])
    assert merge_kv(empty, MergeSpec.from_schema(schema, "t"), drop_deletes=True).num_rows == 0


@pytest.mark.parametrize("engine", ["deduplicate", "first-row", "partial-update", "aggregation"])
def test_output_keeps_the_kv_schema_field_ids_and_nullability(engine: str) -> None:
    fields = {"k": "INT NOT NULL", "s": "INT NOT NULL", "v": "STRING"}
    options = (
        {"merge-engine": engine, "fields.s.aggregate-function": "sum"} if engine == "aggregation" else {}
    )
    schema = make_schema(fields, options=options | {"merge-engine": engine})
    kv = kv_table(
        schema, [{"k": 2, "s": 1, "seq": 1}, {"k": 1, "s": 2, "seq": 2}, {"k": 2, "s": 3, "v": "x", "seq": 3}]
    )
    out = merge_kv(kv, MergeSpec.from_schema(schema, "t"), drop_deletes=False)
    assert out.schema.equals(kv.schema, check_metadata=True)
    assert out.column("_KEY_k").to_pylist() == [1, 2]
