"""Java's ``expire_snapshots`` and ours on identical tables: the same files left on disk, the same snapshots and
refs, and Java reads the same rows at every remaining snapshot and ref (Java Iceberg 1.10.2, Spark 3.5).

"Identical" means the same table restored at the same path before each side runs (metadata holds absolute
paths). For every table of the oracle's set (v1; v2 copy-on-write; v2 merge-on-read; v1 upgraded to v2; three
partition specs; tags and branches with their own retention; 42 commits; the JDBC catalog table) and a table
built here with tags and branches with and without their own retention, ``history.expire.max-ref-age-ms`` set so
that refs without retention expire, and table and partition statistics files, three argument sets run:
an ``older_than`` between snapshots with ``retain_last => 1``; a future ``older_than`` with ``retain_last => 2``
and ``clean_expired_metadata``; an explicit ``snapshot_ids`` inside the retention window. Each side runs all
tables in one pass (one Spark session for Java's procedures, one for Java's views after each side).

The v3 table (deletion vectors) cannot be committed by pyiceberg 0.12: ours refuses the real run (exit 5) and
its dry run must list exactly the files Java's ``expireFiles()`` would delete.
"""

from __future__ import annotations

import json
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots
from airflow_lakeformat.core.iceberg.maintenance.expiry_files import to_fs_path
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from tests.support.java_iceberg import (
    HADOOP_CATALOG,
    JDBC_CATALOG,
    JavaIcebergWarehouse,
    run_oracle_batch,
)

pytestmark = [pytest.mark.interop, pytest.mark.slow]

STATS_TABLE = f"{HADOOP_CATALOG}.db.stats_refs"
_COLUMNS = "id BIGINT, category STRING, amount DECIMAL(10, 2), event_date DATE"


def _values(first: int, count: int) -> str:
    cats = ("alpha", "beta", "gamma")
    return ", ".join(
        f"({i}, '{cats[i % 3]}', {i}.50, DATE '2024-01-{1 + i % 28:02d}')"
        for i in range(first, first + count)
    )


def _stats_table_statements() -> list[list[str]]:
    """Tags and branches with and without retention, refs without retention expiring after 1 s (the table's
    ``history.expire.max-ref-age-ms``), table statistics (Puffin) and partition statistics on two snapshots of
    main: the second one (no ref keeps it) and the one before the head."""
    t = STATS_TABLE
    statements = [
        f"CREATE TABLE {t} ({_COLUMNS}) USING iceberg PARTITIONED BY (category) TBLPROPERTIES ("
        "'format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
        "'history.expire.max-ref-age-ms' = '1000')",
        f"INSERT INTO {t} VALUES {_values(0, 9)}",
        f"ALTER TABLE {t} CREATE TAG t_plain",
        f"ALTER TABLE {t} CREATE TAG t_week RETAIN 7 DAYS",
        f"INSERT INTO {t} VALUES {_values(9, 9)}",
        f"CALL {HADOOP_CATALOG}.system.compute_table_stats(table => 'db.stats_refs')",
        f"CALL {HADOOP_CATALOG}.system.compute_partition_stats(table => 'db.stats_refs')",
        f"ALTER TABLE {t} CREATE BRANCH b_plain",
        f"INSERT INTO {t}.branch_b_plain VALUES {_values(100, 6)}",
        f"ALTER TABLE {t} CREATE BRANCH b_kept RETAIN 30 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
        f"INSERT INTO {t}.branch_b_kept VALUES {_values(200, 6)}",
        f"DELETE FROM {t}.branch_b_kept WHERE id % 4 = 0",
        f"INSERT INTO {t} VALUES {_values(18, 9)}",
        f"DELETE FROM {t} WHERE id % 5 = 1",
        f"CALL {HADOOP_CATALOG}.system.compute_table_stats(table => 'db.stats_refs')",
        f"CALL {HADOOP_CATALOG}.system.compute_partition_stats(table => 'db.stats_refs')",
        f"INSERT INTO {t} VALUES {_values(27, 6)}",
    ]
    return [["sql", "--statement", statement] for statement in statements]


@pytest.fixture(scope="module")
def stats_warehouse(tmp_path_factory: pytest.TempPathFactory) -> JavaIcebergWarehouse:
    """The statistics/refs table, built once by Java in a warehouse of its own, with a pristine tarball."""
    base = tmp_path_factory.mktemp("java-iceberg-expiry")
    warehouse, catalog_db = base / "warehouse", base / "catalog.db"
    run_oracle_batch(_stats_table_statements(), warehouse=warehouse)
    pristine = base / "pristine.tar"
    with tarfile.open(pristine, "w") as archive:
        archive.add(warehouse, arcname=warehouse.name)
    location = warehouse / "db" / "stats_refs"
    build = {"tables": {"stats_refs": {"identifier": STATS_TABLE, "path": str(location)}}}
    return JavaIcebergWarehouse(warehouse=warehouse, catalog_db=catalog_db, build=build, pristine=pristine)


@pytest.fixture
def both(
    java_iceberg_warehouse: JavaIcebergWarehouse, stats_warehouse: JavaIcebergWarehouse
) -> Iterator[list[JavaIcebergWarehouse]]:
    """Both warehouses, restored to pristine before and after the test."""
    for w in (java_iceberg_warehouse, stats_warehouse):
        w.restore()
    try:
        yield [java_iceberg_warehouse, stats_warehouse]
    finally:
        for w in (java_iceberg_warehouse, stats_warehouse):
            w.restore()


def _open(w: JavaIcebergWarehouse, identifier: str, path: str) -> IcebergTable:
    catalog, namespace, name = identifier.split(".")
    if catalog == JDBC_CATALOG:
        properties = {"type": "sql", "uri": f"sqlite:///{w.catalog_db}", "warehouse": w.warehouse.as_uri()}
        return open_catalog_table(
            f"{namespace}.{name}", catalog_name=JDBC_CATALOG, catalog_properties=properties
        )
    return open_path_table(path)


def _tables(warehouses: list[JavaIcebergWarehouse]) -> list[tuple[str, JavaIcebergWarehouse, str, str]]:
    """(name, warehouse, identifier, path) of every table compared with a real run (v3 apart)."""
    found = []
    for w in warehouses:
        for name, table in w.tables.items():
            if name != "v3_dv":
                found.append((name, w, table["identifier"], table["path"]))
    return found


def _arguments(table: IcebergTable, case: str, now_ms: int) -> dict[str, Any]:
    """One argument set for a table, from its pristine metadata (the same for Java and us)."""
    main = []
    snapshot = table.snapshot()
    while snapshot is not None:
        main.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = table.metadata.snapshot_by_id(parent) if parent is not None else None
    main.reverse()  # oldest first
    heads = {ref.snapshot_id for ref in table.metadata.refs.values()}
    if case == "middle":
        return {"older_than": main[len(main) // 2].timestamp_ms, "retain_last": 1}
    if case == "future":
        return {"older_than": now_ms, "retain_last": 2, "clean_expired_metadata": True}
    explicit = [s.snapshot_id for s in main[1:-1] if s.snapshot_id not in heads][:2]
    return {"older_than": main[0].timestamp_ms, "retain_last": 1, "snapshot_ids": explicit}


def _java_call(identifier: str, arguments: dict[str, Any]) -> list[str]:
    args: dict[str, Any] = {"older_than": {"timestamp_ms": arguments["older_than"]}}
    args["retain_last"] = arguments["retain_last"]
    if arguments.get("snapshot_ids"):
        args["snapshot_ids"] = arguments["snapshot_ids"]
    if arguments.get("clean_expired_metadata"):
        args["clean_expired_metadata"] = True
    return ["call", "--procedure", "expire_snapshots", "--table", identifier, "--args", json.dumps(args)]


def _views(identifier: str) -> list[list[str]]:
    return [["snapshots", "--table", identifier], ["rows", "--table", identifier, "--all"]]


def _state(snapshots: dict[str, Any]) -> dict[str, Any]:
    """What must be equal after both expiries: snapshots (ids, parents), refs, the current snapshot, the
    snapshot log's ids, the partition specs."""
    return {
        "snapshots": sorted((s["snapshot_id"], s["parent_id"]) for s in snapshots["snapshots"]),
        "refs": snapshots["refs"],
        "current": snapshots["current_snapshot_id"],
        "snapshot_log": [entry[1] for entry in snapshots["snapshot_log"]],
        "spec_ids": snapshots["spec_ids"],
    }


def _disk(w: JavaIcebergWarehouse) -> tuple[dict[str, int], dict[str, int]]:
    """(every file but metadata JSON and their checksums -> size, table directory -> metadata JSON count).
    New metadata files are named differently by each side (the JDBC catalog's names hold a UUID), and only
    Java's Hadoop FileSystem writes ``.crc`` checksums for the ones it writes."""
    files, metadata = {}, {}
    for path, size in w.listing().items():
        name = path.rsplit("/", 1)[-1]
        if name.endswith((".metadata.json", ".metadata.json.crc")):
            directory = path.rsplit("/metadata/", 1)[0]
            if name.endswith(".metadata.json"):
                metadata[directory] = metadata.get(directory, 0) + 1
            continue
        if name in ("version-hint.text", ".version-hint.text.crc", "catalog.db"):
            continue
        files[path] = size
    return files, metadata


@pytest.mark.parametrize("case", ["middle", "future", "explicit"])
def test_expire_snapshots_leaves_what_java_leaves(both: list[JavaIcebergWarehouse], case: str) -> None:
    warehouses = both
    tables = _tables(warehouses)
    now_ms = int(time.time() * 1000) + 1000
    arguments = {name: _arguments(_open(w, i, p), case, now_ms) for name, w, i, p in tables}

    # Java: every table in one Spark session per warehouse, then Java's views of the result.
    java: dict[str, Any] = {}
    java_disk = {}
    for w in warehouses:
        mine = [(n, i) for n, ww, i, _ in tables if ww is w]
        commands = [cmd for n, i in mine for cmd in (_java_call(i, arguments[n]), *_views(i))]
        results = w.batch(commands)
        for k, (n, _) in enumerate(mine):
            java[n] = {"output": results[3 * k], "snapshots": results[3 * k + 1], "rows": results[3 * k + 2]}
        java_disk[id(w)] = _disk(w)

    # Ours on the same tables restored at the same paths, then Java's views of our result.
    ours: dict[str, Any] = {}
    for w in warehouses:
        w.restore()
    for name, w, identifier, path in tables:
        result = expire_snapshots(_open(w, identifier, path), dry_run=False, **arguments[name])
        assert not result.report.failed, name
        ours[name] = {"result": result.to_json()}
    for w in warehouses:
        mine = [(n, i) for n, ww, i, _ in tables if ww is w]
        results = w.batch([cmd for _, i in mine for cmd in _views(i)])
        for k, (n, _) in enumerate(mine):
            ours[n].update(snapshots=results[2 * k], rows=results[2 * k + 1])
        assert _disk(w) == java_disk[id(w)], f"files on disk differ from Java's ({case})"

    expired_somewhere = False
    for name, *_ in tables:
        java_state, our_state = _state(java[name]["snapshots"]), _state(ours[name]["snapshots"])
        assert our_state == java_state, f"{name} ({case}): {arguments[name]}"
        assert ours[name]["rows"] == java[name]["rows"], f"{name} ({case}): rows differ"
        java_counts = java[name]["output"][0]
        assert ours[name]["result"]["javaCounts"] == java_counts, f"{name} ({case})"
        expired_somewhere |= bool(ours[name]["result"]["snapshotsExpired"])
    assert expired_somewhere  # the comparison is not between two no-ops
    if case == "future":
        stats = ours["stats_refs"]["result"]
        assert (
            stats["refsRemoved"]
            and stats["files"].get("statistics")
            and stats["files"].get("partition-statistics")
        )


def test_v3_dry_run_lists_what_java_would_delete(java_iceberg_warehouse: JavaIcebergWarehouse) -> None:
    w = java_iceberg_warehouse
    w.restore()
    try:
        table = w.tables["v3_dv"]
        ours = _open(w, table["identifier"], table["path"])
        arguments = {"older_than": int(time.time() * 1000) + 1000, "retain_last": 1}
        with pytest.raises(UnsupportedFormatError):
            expire_snapshots(ours, dry_run=False, **arguments)
        assert _disk(w)[0] == _disk_after_restore(w)
        dry = expire_snapshots(_open(w, table["identifier"], table["path"]), dry_run=True, **arguments)
        ours_paths = {r.path: r.kind for r in dry.plan.deletions}
        java = w.run(
            "expire-files",
            "--table",
            table["identifier"],
            "--older-than-ms",
            arguments["older_than"],
            "--retain-last",
            arguments["retain_last"],
        )
        java_paths = {to_fs_path(ours.io, f["path"]): f["type"] for f in java}
        kinds = {"DATA": "data-file", "POSITION_DELETES": "position-delete-file", "Manifest": "manifest"}
        kinds.update({"Manifest List": "manifest-list", "EQUALITY_DELETES": "equality-delete-file"})
        assert {p: k for p, k in ours_paths.items() if k != "checksum-file"} == {
            p: kinds[t] for p, t in java_paths.items()
        }
        assert ours_paths  # the comparison is not between two empty sets
        # The deletion-vector Puffin files live at the head (one per DELETE/UPDATE, each still holding live
        # DVs) are read as content files and kept.
        from airflow_lakeformat.core.iceberg.metadata.live_files import live_files

        head = live_files(ours, ours.snapshot())
        puffins = {
            to_fs_path(ours.io, f.path) for f in head if f.content == 1 and f.file_format.lower() == "puffin"
        }
        assert puffins and not puffins & set(ours_paths)
    finally:
        w.restore()


def _disk_after_restore(w: JavaIcebergWarehouse) -> dict[str, int]:
    w.restore()
    return _disk(w)[0]
