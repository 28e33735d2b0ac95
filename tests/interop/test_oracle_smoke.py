"""Smoke tests of the pypaimon oracle itself: the scenario tables have the shape the interop tests
rely on. Each assertion would fail if the oracle (or the pypaimon venv) were broken."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tests.support import java_iceberg
from tests.support.pypaimon import SCENARIOS, oracle_append, oracle_plan, oracle_read, run_oracle_batch

pytestmark = pytest.mark.interop

EXPECTED_SNAPSHOTS = {
    "append_partitioned": 5,
    "pk_buckets": 5,
    "unpartitioned": 3,
    "unpartitioned_pk": 3,
    "overwrite_tag_consumer": 5,
    "many_commits": 45,
    "typed_partitions": 3,
}
MIN_TYPED_PARTITION_KEYS = 20
DELETE = 1  # ManifestEntry._KIND


def _table(build: dict[str, Any], name: str) -> Path:
    return Path(build["tables"][name]["path"])


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _manifest_entries(table: Path, manifest_list: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    with (table / "manifest" / manifest_list).open("rb") as handle:
        manifests = [record["_FILE_NAME"] for record in fastavro.reader(handle)]
    for manifest in manifests:
        with (table / "manifest" / manifest).open("rb") as handle:
            entries.extend(fastavro.reader(handle))
    return entries


def _file_names(plan: dict[str, Any]) -> set[str]:
    return {f["fileName"] for f in plan["files"]}


QUERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # key: (subcommand, table, extra args) -- all run in ONE oracle process (see run_oracle_batch)
    "overwrite_plans": ("plan", "overwrite_tag_consumer", ("--all",)),
    "append_plan": ("plan", "append_partitioned", ()),
    "append_rows": ("read", "append_partitioned", ()),
    "pk_plan": ("plan", "pk_buckets", ()),
    "pk_rows": ("read", "pk_buckets", ()),
    "unpartitioned_plan": ("plan", "unpartitioned", ()),
    "unpartitioned_pk_plan": ("plan", "unpartitioned_pk", ()),
    "unpartitioned_pk_rows": ("read", "unpartitioned_pk", ()),
    "many_plans": ("plan", "many_commits", ("--all",)),
    "typed_plan": ("plan", "typed_partitions", ()),
    "typed_rows": ("read", "typed_partitions", ()),
}


@pytest.fixture(scope="module")
def views(pypaimon_warehouse: dict[str, Any]) -> dict[str, Any]:
    """pypaimon's plans and rows of the shared warehouse, fetched in one batch."""
    commands = [
        [command, str(_table(pypaimon_warehouse, table)), *extra]
        for command, table, extra in QUERIES.values()
    ]
    return dict(zip(QUERIES, run_oracle_batch(commands), strict=True))


def test_build_reports_every_scenario(pypaimon_warehouse: dict[str, Any]) -> None:
    assert pypaimon_warehouse["pypaimonVersion"] == "2.1.0"
    assert set(pypaimon_warehouse["tables"]) == set(SCENARIOS)
    for name, expected in EXPECTED_SNAPSHOTS.items():
        table = pypaimon_warehouse["tables"][name]
        assert table["snapshots"] == list(range(1, expected + 1)), name
        path = Path(table["path"])
        assert path.is_absolute() and path.parent.name == "db.db" and path.name == name
        assert (path / "snapshot" / f"snapshot-{expected}").is_file()
        assert (path / "schema" / "schema-0").is_file()
        # pypaimon writes LATEST but never EARLIEST
        assert (path / "snapshot" / "LATEST").read_text().strip() == str(expected)


def test_overwrite_tags_and_consumer(pypaimon_warehouse: dict[str, Any], views: dict[str, Any]) -> None:
    table = _table(pypaimon_warehouse, "overwrite_tag_consumer")
    info = pypaimon_warehouse["tables"]["overwrite_tag_consumer"]
    assert info["tags"] == ["after", "before_overwrite"]
    assert _read_json(table / "tag" / "tag-before_overwrite")["id"] == 3
    assert _read_json(table / "tag" / "tag-after")["id"] == 5
    assert _read_json(table / "consumer" / "consumer-my-consumer") == {"nextSnapshot": 2}
    assert info["consumers"] == {"my-consumer": 2}

    kinds = [_read_json(table / "snapshot" / f"snapshot-{i}")["commitKind"] for i in range(1, 6)]
    assert kinds == ["APPEND", "APPEND", "APPEND", "OVERWRITE", "APPEND"]

    plans = views["overwrite_plans"]
    assert sorted(plans["snapshots"], key=int) == ["1", "2", "3", "4", "5"]
    assert plans["tags"]["before_overwrite"] == plans["snapshots"]["3"]
    assert plans["tags"]["after"] == plans["snapshots"]["5"]

    def in_partition(plan: dict[str, Any], dt: str) -> set[str]:
        return {f["fileName"] for f in plan["files"] if f["partition"] == {"dt": dt}}

    before = in_partition(plans["snapshots"]["3"], "2024-01-01")
    after = in_partition(plans["snapshots"]["4"], "2024-01-01")
    assert len(before) == 2 and len(after) == 1 and not before & after
    # other partitions are untouched by the overwrite
    for dt in ("2024-01-02", "2024-01-03"):
        assert in_partition(plans["snapshots"]["3"], dt) == in_partition(plans["snapshots"]["4"], dt)

    # The OVERWRITE's delta manifests hold one DELETE entry per replaced file.
    snapshot4 = _read_json(table / "snapshot" / "snapshot-4")
    delta = _manifest_entries(table, snapshot4["deltaManifestList"])
    deleted = {entry["_FILE"]["_FILE_NAME"] for entry in delta if entry["_KIND"] == DELETE}
    assert deleted == before
    assert len([entry for entry in delta if entry["_KIND"] != DELETE]) == 1


def test_append_partitioned_escaping_and_default_partitions(
    pypaimon_warehouse: dict[str, Any], views: dict[str, Any]
) -> None:
    table = _table(pypaimon_warehouse, "append_partitioned")
    plan = views["append_plan"]
    assert plan["snapshotId"] == 5
    partitions = {json.dumps(f["partition"], sort_keys=True) for f in plan["files"]}
    values_s = {f["partition"]["s"] for f in plan["files"]}
    values_d = {f["partition"]["d"] for f in plan["files"]}
    assert {"a/b:c=d", "x#y%z?", "sp ace", "quote'\"", "é", "", " ", None} <= values_s
    assert values_d == {"2024-01-01", "2024-02-29", None}
    # NULL, '' and ' ' are different partitions (BinaryRow keeps the value) ...
    assert json.dumps({"d": "2024-01-01", "s": ""}, sort_keys=True) in partitions
    assert json.dumps({"d": "2024-01-01", "s": None}, sort_keys=True) in partitions
    # ... but share the __DEFAULT_PARTITION__ directory; DATE uses the legacy day number
    assert (table / "d=19723" / "s=__DEFAULT_PARTITION__" / "bucket-0").is_dir()
    assert (table / "d=19723" / "s=a%2Fb%3Ac%3Dd" / "bucket-0").is_dir()
    assert (table / "d=19782" / "s=x%23y%25z%3F" / "bucket-0").is_dir()
    assert (table / "d=__DEFAULT_PARTITION__" / "s=__DEFAULT_PARTITION__" / "bucket-0").is_dir()
    for f in plan["files"]:
        assert f["bucket"] == 0 and f["level"] == 0 and f["rowCount"] >= 1 and f["fileSize"] > 0

    rows = views["append_rows"]
    assert len(rows) == sum(f["rowCount"] for f in plan["files"])
    assert sorted(row["id"] for row in rows) == list(range(len(rows)))
    assert {"d": None, "s": None} in [{"d": row["d"], "s": row["s"]} for row in rows]


def test_pk_buckets_have_several_files_per_bucket(views: dict[str, Any]) -> None:
    plan = views["pk_plan"]
    per_bucket = Counter((f["partition"]["p"], f["bucket"]) for f in plan["files"])
    assert set(per_bucket) == {(p, b) for p in ("p0", "p1") for b in range(4)}
    assert max(per_bucket.values()) >= 3
    assert all(f["level"] == 0 for f in plan["files"])  # pypaimon does no compaction
    rows = views["pk_rows"]
    # keys 0..43 in both partitions, deduplicated by merge-on-read
    assert len(rows) == 2 * 44 < sum(f["rowCount"] for f in plan["files"])
    assert len({(row["p"], row["pk"]) for row in rows}) == len(rows)
    latest = {(row["p"], row["pk"]): row["n"] for row in rows}
    assert latest[("p0", 0)] == 2 and latest[("p1", 43)] == 4 and latest[("p0", 7)] == 3


def test_unpartitioned_tables(views: dict[str, Any]) -> None:
    plan = views["unpartitioned_plan"]
    assert {json.dumps(f["partition"]) for f in plan["files"]} == {"{}"}
    assert len(plan["files"]) == 3
    pk_plan = views["unpartitioned_pk_plan"]
    assert {f["bucket"] for f in pk_plan["files"]} == {0, 1, 2}
    assert len(pk_plan["files"]) >= 6
    assert len(views["unpartitioned_pk_rows"]) == 30


def test_many_commits_time_travel(pypaimon_warehouse: dict[str, Any], views: dict[str, Any]) -> None:
    table = _table(pypaimon_warehouse, "many_commits")
    plans = views["many_plans"]
    assert len(plans["snapshots"]) == 45 and plans["tags"] == {}
    previous: set[str] = set()
    for snapshot_id in range(1, 46):
        plan = plans["snapshots"][str(snapshot_id)]
        assert plan["snapshotId"] == snapshot_id
        files = _file_names(plan)
        assert previous < files  # append-only: every commit adds files, none disappear
        previous = files
    assert {f["partition"]["k"] for f in plans["snapshots"]["45"]["files"]} <= {0, 1, 2, 3}
    # the single-command path agrees with the batch path
    assert oracle_plan(table, snapshot=7) == plans["snapshots"]["7"]


def test_typed_partitions_golden_rows(pypaimon_warehouse: dict[str, Any], views: dict[str, Any]) -> None:
    info = pypaimon_warehouse["tables"]["typed_partitions"]
    assert isinstance(info["skipped_types"], dict)
    assert pypaimon_warehouse["skipped_types"] == info["skipped_types"]
    types = info["partitionTypes"]
    assert len(types) >= MIN_TYPED_PARTITION_KEYS
    assert len(types) + len(info["skipped_types"]) == 25
    keys = info["partitionKeys"]
    assert len(keys) == len(types)

    golden = info["partitionRows"]
    assert len(golden) == 3
    for row in golden:
        raw = bytes.fromhex(row["hex"])
        assert int.from_bytes(raw[:4], "big") == len(keys)  # arity prefix
        assert set(row["values"]) == set(keys)
    all_null = [row for row in golden if all(v is None for v in row["values"].values())]
    assert len(all_null) == 1
    row_a = next(row["values"] for row in golden if row["values"].get("p_int") == 70000)
    expected_a = {
        "p_boolean": True,
        "p_bigint": 2**40,
        "p_decimal_10_2": "12.30",
        "p_decimal_38_10": "12345678901234567890.0123456789",
        "p_date": "2024-01-02",
        "p_time_3": "03:04:05.123000",
        "p_ts_3": "2024-01-02T03:04:05.123000",
        "p_ts_6": "2024-01-02T03:04:05.123456",
        "p_ts_ltz_3": "2024-01-02T03:04:05.123000",
        "p_string": "héllo wörld, long",
        "p_binary": "01020304",
        "p_bytes": "deadbeef0001020304",
    }
    for key, value in expected_a.items():
        if key in row_a:
            assert row_a[key] == value, key

    plan = views["typed_plan"]
    assert sorted(json.dumps(f["partition"], sort_keys=True) for f in plan["files"]) == sorted(
        json.dumps(row["values"], sort_keys=True) for row in golden
    )
    assert len(views["typed_rows"]) == 6


def test_append_on_a_private_copy(fresh_pypaimon_warehouse: dict[str, Any]) -> None:
    table = Path(fresh_pypaimon_warehouse["tables"]["append_partitioned"]["path"])
    before = oracle_read(table)
    result = oracle_append(table, [{"d": "2025-05-05", "s": "new", "id": 1000, "v": "appended", "x": 0.5}])
    assert result == {"snapshotId": 6, "previousSnapshotId": 5, "rowCount": 1}
    after, at_5 = run_oracle_batch([["read", table], ["read", table, "--snapshot", 5]])
    assert len(after) == len(before) + 1
    assert {"d": "2025-05-05", "s": "new", "id": 1000, "v": "appended", "x": 0.5} in after
    assert at_5 == before


# ---- the Java Iceberg oracle's server (tests/support/java_iceberg.py) ------------------------------


def _java_server_pid() -> int:
    server = java_iceberg._server
    assert server is not None and server.alive()
    return server.process.pid


def test_java_oracle_server_retargets_and_keeps_no_state(tmp_path: Path) -> None:
    """One server answers for two warehouses in turn, each with its own rows; a JDBC catalog db replaced at the
    same path is read afresh; temporary views, USE and SET end with their request; a failed precondition is
    exit 2, and the server goes on."""
    homes = {name: tmp_path / name for name in ("a", "b")}

    def run(name: str, *statements: str) -> Any:
        args = [arg for statement in statements for arg in ("--statement", statement)]
        home = homes[name]
        return java_iceberg.run_oracle(
            "sql", *args, warehouse=home / "warehouse", catalog_db=home / "catalog.db"
        )

    for value, name in enumerate(homes):
        run(name, "CREATE TABLE hc.db.t (x INT) USING iceberg", f"INSERT INTO hc.db.t VALUES ({value})",
            "CREATE NAMESPACE jc.jdb", "CREATE TABLE jc.jdb.t (x INT) USING iceberg",
            f"INSERT INTO jc.jdb.t VALUES ({10 + value})")  # fmt: skip
    pid = _java_server_pid()
    read = ("SELECT x FROM hc.db.t ORDER BY x", "SELECT x FROM jc.jdb.t ORDER BY x")
    for _ in range(2):
        assert run("a", *read) == [[{"x": 0}], [{"x": 10}]]
        assert run("b", *read) == [[{"x": 1}], [{"x": 11}]]
    # b's catalog db and warehouse put back, at the same paths, to before a commit the server saw.
    shutil.copytree(homes["b"], tmp_path / "b-saved")
    run("b", "INSERT INTO jc.jdb.t VALUES (12)", "INSERT INTO hc.db.t VALUES (2)")
    assert run("b", *read) == [[{"x": 1}, {"x": 2}], [{"x": 11}, {"x": 12}]]
    shutil.rmtree(homes["b"])
    shutil.copytree(tmp_path / "b-saved", homes["b"])
    assert run("b", *read) == [[{"x": 1}], [{"x": 11}]]
    # Session state ends with its request.
    run("a", "CREATE TEMPORARY VIEW v AS SELECT 1 AS one", "USE hc.db", "SET spark.sql.shuffle.partitions=7")
    for statement in ("SELECT * FROM v", "SELECT * FROM t"):
        with pytest.raises(java_iceberg.JavaIcebergOracleError, match=r"exit 1"):
            run("a", statement)
    assert run("a", "SET spark.sql.shuffle.partitions") == [
        [{"key": "spark.sql.shuffle.partitions", "value": "2"}]
    ]
    # A failed precondition: exit 2 and its message, from the same server, which answers the next request.
    with pytest.raises(java_iceberg.JavaIcebergOracleError, match=r"(?s)exit 2.*ref 'nope' not in"):
        java_iceberg.run_oracle(
            "rows", "--table", "db.t", "--ref", "nope", warehouse=homes["a"] / "warehouse"
        )
    assert run("b", read[0]) == [[{"x": 1}]]
    assert _java_server_pid() == pid
