"""The Java Iceberg oracle itself: its jars are complete, every scenario builds with the shape the interop tests
rely on, Java's files/snapshots/rows come back and are self-consistent, pyiceberg 0.12 agrees with Java on
every scenario, and the shared JDBC (SQLite) catalog works in both directions. Every assertion would fail if the
oracle (or .venv-iceberg) were broken; nothing is skipped when the oracle is missing, it fails."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
import json
import math
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.support.java_iceberg import (
    JDBC_CATALOG,
    RELOCATE_SCRIPT,
    SCENARIOS,
    VENV,
    JavaIcebergOracleError,
    JavaIcebergWarehouse,
    check_jackson_jar,
    oracle_jars,
    pyiceberg_sql_catalog,
    run_oracle,
)

pytestmark = pytest.mark.interop

SHADED = "org/apache/iceberg/shaded/com/fasterxml/jackson/"
DAY_MS = 24 * 3600 * 1000
FORMAT_VERSIONS = {
    "v1": 1,
    "v2_cow": 2,
    "v2_mor": 2,
    "v1_to_v2": 2,
    "partition_evolution": 2,
    "tags_branches": 2,
    "many_commits": 2,
    "v3_dv": 3,
}


def _relocate_module() -> ModuleType:
    """scripts/relocate_jackson.py imported as a module (scripts/ is not a package)."""
    if "relocate_jackson" not in sys.modules:
        spec = importlib.util.spec_from_file_location("relocate_jackson", RELOCATE_SCRIPT)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
        spec.loader.exec_module(module)
    return sys.modules["relocate_jackson"]


# ---- the jars ----------------------------------------------------------------------------------


def test_relocated_jackson_resolves_every_runtime_reference() -> None:
    jars = oracle_jars()
    status, report = check_jackson_jar(jars["runtime"], [jars["jackson"]])
    assert status == 0, report
    assert report["ok"]
    # Iceberg 1.10.2's runtime jar uses ~90 shaded Jackson classes and ~230 of their members.
    assert report["runtime_class_refs"] >= 80
    assert report["runtime_member_refs"] >= 200
    assert report["internal_member_refs"] > 5000  # the relocated Jackson's references to itself
    assert report["missing_classes"] == [] and report["missing_members"] == []
    assert report["unrelocated"] == []
    assert report["assumed_external"] == []  # every JDK supertype was read from $JAVA_HOME/jmods


def test_reference_check_reports_gaps_in_an_incomplete_jar(tmp_path: Path) -> None:
    relocate = _relocate_module()
    jars = oracle_jars()
    broken = tmp_path / "broken-jackson.jar"
    dropped = f"{SHADED}core/JsonFactoryBuilder.class"
    renamed_in = f"{SHADED}databind/node/ObjectNode.class"
    with zipfile.ZipFile(jars["jackson"]) as source, zipfile.ZipFile(broken, "w") as target:
        names = source.namelist()
        assert dropped in names and renamed_in in names
        for info in source.infolist():
            if info.filename == dropped:
                continue
            payload = source.read(info)
            if info.filename == renamed_in:  # same length, so the class stays valid; the method is "gone"
                payload = relocate.rewrite_utf8(payload, lambda v: b"putArraX" if v == b"putArray" else v)
            target.writestr(info, payload)
    status, report = check_jackson_jar(jars["runtime"], [broken])
    assert status == 1
    assert not report["ok"]
    missing_classes = report["missing_classes"]
    assert any(
        m.startswith(f"{SHADED}core/JsonFactoryBuilder ") and "iceberg-spark-runtime" in m
        for m in missing_classes
    ), missing_classes
    missing_members = report["missing_members"]
    assert any(
        f"{SHADED}databind/node/ObjectNode.putArray(" in m and "iceberg-spark-runtime" in m
        for m in missing_members
    ), missing_members
    # Nothing else is reported missing: the check is precise, not just noisy.
    assert all("JsonFactoryBuilder" in m for m in missing_classes)
    assert all(".putArray(" in m for m in missing_members)


def test_relocation_rewrites_only_the_constant_pool() -> None:
    relocate = _relocate_module()
    [jackson_core] = sorted(VENV.glob("lib/python*/site-packages/pyspark/jars/jackson-core-2.*.jar"))
    with zipfile.ZipFile(jackson_core) as jar:
        original = jar.read("com/fasterxml/jackson/core/JsonFactory.class")
    relocated = relocate.relocate_class(original)
    before, after = relocate.parse_class(original), relocate.parse_class(relocated)
    assert after.info.name == f"{SHADED}core/JsonFactory"
    assert after.info.super_name == f"{SHADED}core/TokenStreamFactory"
    assert {name for name, _ in after.info.methods} == {name for name, _ in before.info.methods}
    assert not any(b"com/fasterxml/jackson/" in v and SHADED.encode() not in v for v in after.utf8)
    # Everything after the constant pool is byte-identical (nothing else addresses the pool's bytes).
    pool_end_before, _ = relocate._constant_pool_end(original)
    pool_end_after, _ = relocate._constant_pool_end(relocated)
    assert original[pool_end_before:] == relocated[pool_end_after:]
    assert pool_end_after > pool_end_before


def test_oracle_failures_raise_with_stderr(tmp_path: Path) -> None:
    # Rejected before any Spark session starts, so this costs an interpreter start only.
    with pytest.raises(
        JavaIcebergOracleError, match=r"(?s)exit 2.*--conf wants KEY=VALUE, got 'no-equals-sign'"
    ):
        run_oracle("rows", "--table", "db.v1", "--conf", "no-equals-sign", warehouse=tmp_path)


# ---- Java's view of every scenario (one oracle process) ------------------------------------------


@pytest.fixture(scope="module")
def java_views(java_iceberg_warehouse: JavaIcebergWarehouse) -> dict[str, dict[str, Any]]:
    """Per scenario: the build's baseline (files at every snapshot/ref through the Java API, snapshots, current
    rows) plus, from one more oracle process, Spark SQL's ``files`` metadata table and ref reads."""
    commands: list[list[str]] = []
    for name in SCENARIOS:
        table = java_iceberg_warehouse.tables[name]["identifier"]
        # SQL time travel over all 42 snapshots of many_commits costs ~10 s: current snapshot only there.
        commands.append(["files", "--table", table] + ([] if name == "many_commits" else ["--all"]))
    commands.append(["rows", "--table", "db.tags_branches", "--all"])
    commands.append(["rows", "--table", "db.tags_branches", "--ref", "audit"])
    results = java_iceberg_warehouse.batch(commands)
    views = {name: dict(java_iceberg_warehouse.baseline[name]) for name in SCENARIOS}
    for index, name in enumerate(SCENARIOS):
        views[name]["files_sql"] = results[index]
    views["tags_branches"]["rows_all"] = results[-2]
    views["tags_branches"]["rows_audit"] = results[-1]
    return views


def _current_files(view: dict[str, Any]) -> list[dict[str, Any]]:
    files = view["files"]
    return files["snapshots"][str(files["current_snapshot_id"])]


@pytest.mark.slow
def test_build_reports_every_scenario(java_iceberg_warehouse: JavaIcebergWarehouse) -> None:
    build = java_iceberg_warehouse.build
    assert set(build["tables"]) == {*SCENARIOS, "jdbc_basic"}
    for name, version in FORMAT_VERSIONS.items():
        table = build["tables"][name]
        assert table["identifier"] == f"hc.db.{name}"
        assert table["format_version"] == version, name
        assert Path(table["path"]) == java_iceberg_warehouse.warehouse / "db" / name
        assert Path(urlparse(table["metadata_location"]).path).is_file()
        assert table["refs"]["main"] == table["current_snapshot_id"]
    jdbc = build["tables"]["jdbc_basic"]
    assert jdbc["identifier"] == "jc.jdb.jdbc_basic"
    assert Path(jdbc["path"]) == java_iceberg_warehouse.warehouse / "jdb" / "jdbc_basic"
    assert build["tables"]["many_commits"]["snapshot_count"] >= 42
    assert build["tables"]["partition_evolution"]["spec_ids"] == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_java_views_are_consistent(java_views: dict[str, dict[str, Any]], name: str) -> None:
    view = java_views[name]
    snapshots = view["snapshots"]
    ids = [s["snapshot_id"] for s in snapshots["snapshots"]]
    assert set(view["files"]["snapshots"]) == {str(i) for i in ids}
    assert snapshots["current_snapshot_id"] == view["files"]["current_snapshot_id"] == ids[-1]
    assert {n: r["snapshot_id"] for n, r in snapshots["refs"].items()} == {
        n: r["snapshot_id"] for n, r in view["files"]["refs"].items()
    }
    # The Java-API manifest reading and Spark's `files` metadata table agree.
    if name == "many_commits":
        assert view["files_sql"] == _current_files(view)
    else:
        assert view["files_sql"] == view["files"]
    # Rows agree with the files: live data records minus position deletes / DV cardinalities.
    current = _current_files(view)
    data = sum(f["record_count"] for f in current if f["content"] == 0)
    deleted = sum(f["record_count"] for f in current if f["content"] == 1)
    assert len(view["rows"]) == data - deleted
    assert len(view["rows"]) > 0
    assert snapshots["format_version"] == FORMAT_VERSIONS[name]


@pytest.mark.slow
def test_scenario_shapes(java_views: dict[str, dict[str, Any]]) -> None:
    def operations(name: str) -> list[str]:
        return [s["operation"] for s in java_views[name]["snapshots"]["snapshots"]]

    def all_files(name: str) -> list[dict[str, Any]]:
        return [f for files in java_views[name]["files"]["snapshots"].values() for f in files]

    assert operations("v1") == ["append"] * 3 + ["delete", "overwrite", "append"]
    assert all(f["content"] == 0 for f in all_files("v1"))
    assert "overwrite" in operations("v2_cow") and all(f["content"] == 0 for f in all_files("v2_cow"))

    mor_deletes = [f for f in _current_files(java_views["v2_mor"]) if f["content"] == 1]
    assert mor_deletes and all(f["file_format"] == "PARQUET" for f in mor_deletes)

    upgraded = java_views["v1_to_v2"]["snapshots"]
    assert [s["sequence_number"] for s in upgraded["snapshots"][:3]] == [0, 0, 0]  # written while v1
    assert [s["sequence_number"] for s in upgraded["snapshots"][3:]] == [1, 2, 3]
    first_metadata = Path(urlparse(upgraded["metadata_log"][0][1]).path)
    assert json.loads(first_metadata.read_text())["format-version"] == 1
    assert any(f["content"] == 1 for f in _current_files(java_views["v1_to_v2"]))

    evolution = java_views["partition_evolution"]
    assert {f["spec_id"] for f in _current_files(evolution)} == {0, 1, 2}
    assert {tuple(f["partition"]) for f in _current_files(evolution)} == {
        ("category",),
        ("category", "id_bucket"),
        ("id_bucket", "event_month"),
    }
    assert set(evolution["rows"][0]) == {"id", "category", "price", "event_date", "note"}

    refs = java_views["tags_branches"]["snapshots"]["refs"]
    assert set(refs) == {"main", "audit", "dev", "t_first", "t_second", "t_audit"}
    assert refs["t_first"] == {
        "type": "TAG",
        "snapshot_id": refs["t_first"]["snapshot_id"],
        "max_reference_age_in_ms": 7 * DAY_MS,
        "min_snapshots_to_keep": None,
        "max_snapshot_age_in_ms": None,
    }
    assert refs["t_second"]["max_reference_age_in_ms"] is None
    assert refs["audit"]["type"] == "BRANCH"
    assert (refs["audit"]["max_reference_age_in_ms"], refs["audit"]["min_snapshots_to_keep"]) == (
        30 * DAY_MS,
        3,
    )
    assert refs["audit"]["max_snapshot_age_in_ms"] == 2 * DAY_MS
    assert refs["dev"]["min_snapshots_to_keep"] == 1
    assert refs["t_audit"]["snapshot_id"] == refs["audit"]["snapshot_id"]
    assert refs["t_audit"]["max_reference_age_in_ms"] == DAY_MS
    rows_all = java_views["tags_branches"]["rows_all"]
    dev_ids = {row["id"] for row in rows_all["refs"]["dev"]["rows"]}
    main_ids = {row["id"] for row in rows_all["refs"]["main"]["rows"]}
    assert set(range(200, 206)) <= dev_ids and not dev_ids & (main_ids - set(range(9)))
    assert {row["id"] for row in rows_all["refs"]["t_first"]["rows"]} == set(range(9))
    # Ref reads through the `rows --ref` path agree with the --all ones.
    assert java_views["tags_branches"]["rows_audit"] == rows_all["refs"]["audit"]["rows"]

    many = java_views["many_commits"]["snapshots"]["snapshots"]
    assert len(many) >= 42
    assert [s["parent_id"] for s in many[1:]] == [s["snapshot_id"] for s in many[:-1]]  # one linear chain

    dvs = [f for f in _current_files(java_views["v3_dv"]) if f["content"] == 1]
    assert dvs and all(f["file_format"] == "PUFFIN" for f in dvs)
    assert all(f["referenced_data_file"] and f["content_offset"] is not None for f in dvs)
    assert max(Counter(f["file_path"] for f in dvs).values()) >= 2  # several DVs share one Puffin file


# ---- pyiceberg 0.12 agrees with Java -------------------------------------------------------------


def _py_value(value: Any) -> Any:
    """pyiceberg/pyarrow values in the oracle's normalised JSON form."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _row_key(row: dict[str, Any]) -> list[tuple[int, Any, str]]:
    """The oracle's row order: per column, nulls, then numbers, then strings."""
    key = []
    for value in row.values():
        if value is None:
            key.append((0, 0, ""))
        elif isinstance(value, (bool, int, float)):
            key.append((1, value, ""))
        elif isinstance(value, str):
            key.append((2, 0, value))
        else:
            key.append((3, 0, json.dumps(value, sort_keys=True)))
    return key


def _file_key(file: dict[str, Any]) -> tuple[Any, ...]:
    return (
        file["content"],
        file["file_path"],
        file["file_format"],
        file["spec_id"],
        json.dumps(file["partition"], sort_keys=True),
        file["record_count"],
        file["file_size_in_bytes"],
    )


def _pyiceberg_files(table: Any, snapshot_id: int) -> Counter[tuple[Any, ...]]:
    specs = table.specs()
    files: Counter[tuple[Any, ...]] = Counter()
    for manifest in table.snapshot_by_id(snapshot_id).manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            data_file = entry.data_file
            content = data_file.content  # an int in v1 manifests, a DataFileContent in v2+
            names = [field.name for field in specs[data_file.spec_id].fields]
            partition = {name: _py_value(data_file.partition[i]) for i, name in enumerate(names)}
            files[
                _file_key(
                    {
                        "content": int(getattr(content, "value", content)),
                        "file_path": data_file.file_path,
                        "file_format": str(data_file.file_format.value).upper(),
                        "spec_id": data_file.spec_id,
                        "partition": partition,
                        "record_count": data_file.record_count,
                        "file_size_in_bytes": data_file.file_size_in_bytes,
                    }
                )
            ] += 1
    return files


def _pyiceberg_rows(table: Any, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    rows = [{k: _py_value(v) for k, v in row.items()} for row in arrow.to_pylist()]
    return sorted(rows, key=_row_key)


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_pyiceberg_agrees_with_java(
    java_views: dict[str, dict[str, Any]], java_iceberg_warehouse: JavaIcebergWarehouse, name: str
) -> None:
    from pyiceberg.table import StaticTable

    view = java_views[name]
    table = StaticTable.from_metadata(java_iceberg_warehouse.tables[name]["metadata_location"])
    metadata = table.metadata
    assert metadata.format_version == FORMAT_VERSIONS[name]
    assert metadata.current_snapshot_id == view["snapshots"]["current_snapshot_id"]
    java_snapshots = {s["snapshot_id"]: s for s in view["snapshots"]["snapshots"]}
    assert {s.snapshot_id for s in metadata.snapshots} == set(java_snapshots)
    for snapshot in metadata.snapshots:
        java = java_snapshots[snapshot.snapshot_id]
        assert snapshot.parent_snapshot_id == java["parent_id"]
        assert snapshot.sequence_number == java["sequence_number"]
        assert snapshot.timestamp_ms == java["timestamp_ms"]
        assert snapshot.summary is not None and snapshot.summary.operation.value == java["operation"]
    java_refs = view["snapshots"]["refs"]
    assert {n: (r.snapshot_ref_type.value.upper(), r.snapshot_id) for n, r in metadata.refs.items()} == {
        n: (r["type"], r["snapshot_id"]) for n, r in java_refs.items()
    }
    for ref_name, ref in metadata.refs.items():
        java_ref = java_refs[ref_name]
        assert ref.max_ref_age_ms == java_ref["max_reference_age_in_ms"]
        assert ref.min_snapshots_to_keep == java_ref["min_snapshots_to_keep"]
        assert ref.max_snapshot_age_ms == java_ref["max_snapshot_age_in_ms"]
    # Data and delete files (paths, content, format, spec, partition, records, bytes) at EVERY snapshot.
    for snapshot_id, java_files in view["files"]["snapshots"].items():
        expected = Counter(_file_key(f) for f in java_files)
        assert _pyiceberg_files(table, int(snapshot_id)) == expected, f"{name} @ {snapshot_id}"
    # The rows of the current snapshot (pyiceberg applies position deletes and v3 deletion vectors).
    assert _pyiceberg_rows(table) == view["rows"]


# ---- the shared JDBC catalog ---------------------------------------------------------------------


@pytest.mark.slow
def test_pyiceberg_sql_catalog_loads_the_table_java_created(
    java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    summary = java_iceberg_warehouse.tables["jdbc_basic"]
    catalog = pyiceberg_sql_catalog(java_iceberg_warehouse)
    table = catalog.load_table("jdb.jdbc_basic")
    assert table.metadata_location == summary["metadata_location"]
    assert table.metadata.current_snapshot_id == summary["current_snapshot_id"]
    java_files, java_rows = java_iceberg_warehouse.batch(
        [
            ["files", "--table", "jc.jdb.jdbc_basic", "--source", "java"],
            ["rows", "--table", "jc.jdb.jdbc_basic"],
        ]
    )
    assert _pyiceberg_files(table, summary["current_snapshot_id"]) == Counter(
        _file_key(f) for f in java_files
    )
    assert any(f["content"] == 1 for f in java_files)
    assert _pyiceberg_rows(table) == java_rows


@pytest.mark.slow
def test_jdbc_catalog_round_trip(fresh_java_iceberg_warehouse: JavaIcebergWarehouse) -> None:
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    target = fresh_java_iceberg_warehouse
    catalog = pyiceberg_sql_catalog(target)
    # pyiceberg creates a table in the shared SQLite catalog; Java reads it, then commits to it.
    catalog.create_namespace("py")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)
    )
    made = catalog.create_table("py.made_by_pyiceberg", schema=schema)
    made.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}))
    py_snapshot = made.current_snapshot().snapshot_id
    # pyiceberg also commits to the table Java created.
    java_made = catalog.load_table("jdb.jdbc_basic")
    java_schema = java_made.schema().as_arrow()
    java_made.append(
        pa.Table.from_pylist(
            [
                {
                    "id": 900,
                    "category": "delta",
                    "amount": decimal.Decimal("9.99"),
                    "event_date": dt.date(2024, 5, 1),
                }
            ],
            schema=java_schema,
        )
    )
    appended_snapshot = java_made.current_snapshot().snapshot_id

    seen_rows, seen_snapshots, _, jdbc_rows = target.batch(
        [
            ["rows", "--table", f"{JDBC_CATALOG}.py.made_by_pyiceberg"],
            ["snapshots", "--table", f"{JDBC_CATALOG}.py.made_by_pyiceberg"],
            ["sql", "--statement", f"INSERT INTO {JDBC_CATALOG}.py.made_by_pyiceberg VALUES (4, 'd')"],
            ["rows", "--table", f"{JDBC_CATALOG}.jdb.jdbc_basic"],
        ]
    )
    assert seen_rows == [{"id": i, "name": n} for i, n in [(1, "a"), (2, "b"), (3, "c")]]
    assert seen_snapshots["current_snapshot_id"] == py_snapshot
    assert {"id": 900, "category": "delta", "amount": "9.99", "event_date": "2024-05-01"} in jdbc_rows
    assert _pyiceberg_rows(catalog.load_table("jdb.jdbc_basic"), appended_snapshot) == jdbc_rows

    reloaded = catalog.load_table("py.made_by_pyiceberg")
    head = reloaded.current_snapshot()
    assert head.snapshot_id != py_snapshot and head.parent_snapshot_id == py_snapshot
    assert [row["id"] for row in _pyiceberg_rows(reloaded)] == [1, 2, 3, 4]


def test_fresh_fixture_restores_the_same_paths(fresh_java_iceberg_warehouse: JavaIcebergWarehouse) -> None:
    target = fresh_java_iceberg_warehouse
    before = target.listing()
    table_path = Path(target.tables["v2_mor"]["path"])
    data_file = next(p for p in sorted((table_path / "data").rglob("*.parquet")))
    data_file.unlink()
    (table_path / "data" / "orphan.parquet").write_bytes(b"junk")
    target.catalog_db.write_bytes(b"not a database")
    assert target.listing() != before
    target.restore()
    assert target.listing() == before
    assert Path(target.tables["v2_mor"]["path"]) == table_path  # restored in place, not copied elsewhere


@pytest.mark.slow
def test_mutating_commands(fresh_java_iceberg_warehouse: JavaIcebergWarehouse, tmp_path: Path) -> None:
    """append (Java API, to a branch, merge-append), remove_orphan_files (dry run, spark.testing lifts the 24 h
    limit) and expire-files (Java's would-delete set, nothing deleted) behave as documented."""
    target = fresh_java_iceberg_warehouse
    mor = target.baseline["v2_mor"]
    audit_head = target.baseline["tags_branches"]["snapshots"]["refs"]["audit"]["snapshot_id"]
    orphan = Path(target.tables["v2_mor"]["path"]) / "data" / "planted-orphan.parquet"
    orphan.write_bytes(b"not parquet")
    rows_file = tmp_path / "rows.json"
    new_row = {"id": 5_000_000_000, "category": "alpha", "amount": "1.25", "event_date": "2024-02-01"}
    rows_file.write_text(json.dumps([[new_row]]))
    future_ms = int(time.time() * 1000) + 3_600_000
    appended, orphans, expired, branch_rows, tags_after, mor_after = target.batch(
        [
            ["append", "--table", "db.tags_branches", "--rows", rows_file, "--ref", "audit", "--merge"],
            [
                "call",
                "--procedure",
                "remove_orphan_files",
                "--table",
                "db.v2_mor",
                "--args",
                json.dumps({"dry_run": True, "older_than": {"timestamp_ms": future_ms}}),
            ],
            ["expire-files", "--table", "db.v2_mor", "--older-than-ms", future_ms, "--retain-last", 1],
            ["rows", "--table", "db.tags_branches", "--ref", "audit"],
            ["snapshots", "--table", "db.tags_branches"],
            ["snapshots", "--table", "db.v2_mor"],
        ],
        conf={"spark.testing": "true"},
    )
    # append: one new snapshot on the branch, child of its old head; main untouched; the long survives.
    [new_head] = appended["snapshot_ids"]
    refs = tags_after["refs"]
    assert refs["audit"]["snapshot_id"] == new_head
    assert refs["main"] == target.baseline["tags_branches"]["snapshots"]["refs"]["main"]
    parent = {s["snapshot_id"]: s["parent_id"] for s in tags_after["snapshots"]}
    assert parent[new_head] == audit_head
    assert new_row in branch_rows
    # remove_orphan_files: exactly the planted file, not deleted (dry run).
    assert [urlparse(r["orphan_file_location"]).path for r in orphans] == [str(orphan)]
    assert orphan.exists()
    # expire-files: every data/delete file only older snapshots referenced, nothing deleted from disk.
    kinds = {0: "DATA", 1: "POSITION_DELETES"}
    current = {(kinds[f["content"]], f["file_path"]) for f in _current_files(mor)}
    ever = {(kinds[f["content"]], f["file_path"]) for fs in mor["files"]["snapshots"].values() for f in fs}
    expired_content = {(e["type"], e["path"]) for e in expired if e["type"] in kinds.values()}
    assert expired_content == ever - current
    assert {kind for kind, _ in expired_content} == {
        "POSITION_DELETES"
    }  # merge-on-read never drops data files
    # FileInfo types: content files carry FileContent names, metadata files BaseSparkAction's labels.
    assert {e["type"] for e in expired} == {"POSITION_DELETES", "Manifest", "Manifest List"}
    assert all(Path(urlparse(e["path"]).path).exists() for e in expired)
    assert [s["snapshot_id"] for s in mor_after["snapshots"]] == [mor["snapshots"]["current_snapshot_id"]]
