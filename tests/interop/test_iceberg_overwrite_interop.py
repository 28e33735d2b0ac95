"""Our partition overwrite against Spark's own ``INSERT OVERWRITE`` (Java Iceberg 1.10.2), on identical tables
(issue 26, point 8).

Java builds three tables in one request, with several commits each: ``ident`` (identity ``cat``, with a null
partition and a merge-on-read position delete in partition ``a``), ``daily`` (``days(ts)``, rows before and
after 1970 and a null ``ts``) and ``static`` (identity ``cat``). The warehouse is tarred once; before Spark's
run and before ours it is restored at the same path (Iceberg metadata holds absolute paths). Per case:

* Spark: ``SET spark.sql.sources.partitionOverwriteMode=dynamic`` then ``INSERT OVERWRITE t VALUES ...``
  (dynamic), or ``INSERT OVERWRITE t PARTITION (cat = 'a') SELECT ...`` (static), and Java's rows and live
  files after it;
* us: ``lakeformat write T --from rows.parquet --overwrite`` (dynamic) or ``--overwrite-filter "cat = 'a'"``,
  after a ``--dry-run`` that names exactly the partitions the real run replaces;
* Java then reads the same rows as after Spark's overwrite, sees our snapshot as an ``overwrite``, and its live
  files hold the same records per partition (delete files of replaced partitions gone, as Spark's leaves them).
"""

from __future__ import annotations

import datetime as dt
import json
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.java_iceberg import run_oracle
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

MOR = "'format-version' = '2', 'write.delete.mode' = 'merge-on-read'"
BUILD = [
    "CREATE NAMESPACE IF NOT EXISTS hc.db",
    f"CREATE TABLE hc.db.ident (id BIGINT, cat STRING) USING iceberg PARTITIONED BY (cat) TBLPROPERTIES ({MOR})",
    "INSERT INTO hc.db.ident VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, NULL)",
    "INSERT INTO hc.db.ident VALUES (5, 'a'), (6, NULL), (7, 'c')",
    "DELETE FROM hc.db.ident WHERE id = 2",
    "CREATE TABLE hc.db.daily (id BIGINT, ts TIMESTAMP_NTZ) USING iceberg PARTITIONED BY (days(ts)) "
    "TBLPROPERTIES ('format-version' = '2')",
    "INSERT INTO hc.db.daily VALUES (1, TIMESTAMP_NTZ '1969-12-31 23:59:59.999999'), "
    "(2, TIMESTAMP_NTZ '2024-05-01 00:00:00'), (3, TIMESTAMP_NTZ '2024-05-01 23:59:59'), (4, NULL)",
    "INSERT INTO hc.db.daily VALUES (5, TIMESTAMP_NTZ '2024-05-02 08:00:00'), (6, TIMESTAMP_NTZ '1970-01-01 00:00:00')",
    "CREATE TABLE hc.db.static (id BIGINT, cat STRING) USING iceberg PARTITIONED BY (cat) "
    "TBLPROPERTIES ('format-version' = '2')",
    "INSERT INTO hc.db.static VALUES (1, 'a'), (2, 'b'), (3, NULL)",
    "INSERT INTO hc.db.static VALUES (4, 'a'), (5, 'b')",
]
DYNAMIC = "SET spark.sql.sources.partitionOverwriteMode=dynamic"
CASES = {
    # table: (Spark's statements, our input rows, our overwrite flags, the partitions replaced)
    "ident": (
        [DYNAMIC, "INSERT OVERWRITE hc.db.ident VALUES (10, 'a'), (11, NULL), (12, 'a')"],
        [{"id": 10, "cat": "a"}, {"id": 11, "cat": None}, {"id": 12, "cat": "a"}],
        ["--overwrite"],
        [{"cat": None}, {"cat": "a"}],
    ),
    "daily": (
        [DYNAMIC, "INSERT OVERWRITE hc.db.daily VALUES (10, TIMESTAMP_NTZ '2024-05-01 12:00:00'), "
         "(11, TIMESTAMP_NTZ '1969-12-31 00:00:00')"],
        [{"id": 10, "ts": dt.datetime(2024, 5, 1, 12)}, {"id": 11, "ts": dt.datetime(1969, 12, 31)}],
        ["--overwrite"],
        [{"ts_day": "1969-12-31"}, {"ts_day": "2024-05-01"}],
    ),
    "static": (
        ["INSERT OVERWRITE hc.db.static PARTITION (cat = 'a') SELECT 20 AS id UNION ALL SELECT 21"],
        [{"id": 20, "cat": "a"}, {"id": 21, "cat": "a"}],
        ["--overwrite-filter", "cat = 'a'"],
        [{"cat": "a"}],
    ),
}  # fmt: skip
ARROW = {
    "ident": pa.schema([("id", pa.int64()), ("cat", pa.string())]),
    "daily": pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))]),
    "static": pa.schema([("id", pa.int64()), ("cat", pa.string())]),
}


def _restore(pristine: Path, warehouse: Path) -> None:
    import shutil

    shutil.rmtree(warehouse, ignore_errors=True)
    with tarfile.open(pristine) as archive:
        archive.extractall(warehouse.parent, filter="tar")


def _by_partition(files: list[dict[str, Any]]) -> Counter[tuple[int, str]]:
    """Records per (content, partition) of Java's live files: the same table, whatever the file names."""
    counts: Counter[tuple[int, str]] = Counter()
    for f in files:
        counts[(f["content"], json.dumps(f["partition"], sort_keys=True))] += f["record_count"]
    return counts


def _views(warehouse: Path, statements: list[str]) -> dict[str, dict[str, Any]]:
    """After running ``statements`` (one session), Java's rows, live files and snapshots of every case's table."""
    argv = [arg for s in statements for arg in ("--statement", s)]
    commands = [["sql", *argv]] if argv else []
    for name in CASES:
        commands += [["rows", "--table", f"hc.db.{name}"], ["files", "--table", f"hc.db.{name}"]]
        commands += [["snapshots", "--table", f"hc.db.{name}"]]
    results = run_oracle("batch", warehouse=warehouse, stdin=json.dumps(commands))[
        len(commands) - 3 * len(CASES) :
    ]
    return {
        name: {"rows": results[3 * i], "files": results[3 * i + 1], "snapshots": results[3 * i + 2]}
        for i, name in enumerate(CASES)
    }


def test_overwrite_equals_sparks_insert_overwrite(tmp_path: Path) -> None:
    """One request builds the tables, one runs Spark's three overwrites and reads them, one reads ours."""
    warehouse = tmp_path / "warehouse"
    run_oracle("sql", *(arg for s in BUILD for arg in ("--statement", s)), warehouse=warehouse)
    pristine = tmp_path / "pristine.tar"
    with tarfile.open(pristine, "w") as archive:
        archive.add(warehouse, arcname=warehouse.name)
    # the tables are independent: Spark overwrites each once, in one session (the SET applies from there on,
    # so the static case, a PARTITION clause with a literal, is run first: static either way)
    java = _views(
        warehouse, [statement for name in ("static", "ident", "daily") for statement in CASES[name][0]]
    )
    _restore(pristine, warehouse)
    documents = {}
    for name, (_spark, rows, flags, replaced) in CASES.items():
        path = str(warehouse / "db" / name)
        source = tmp_path / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=ARROW[name]), source)
        code, out, err = run("write", path, "--from", str(source), *flags, "--dry-run", "--json")
        assert code == 0, err
        plan = json.loads(out)["overwrite"]
        found = sorted((p["partition"] for p in plan["replacedPartitions"]), key=json.dumps)
        assert found == sorted(replaced, key=json.dumps), plan
        code, out, err = run("write", path, "--from", str(source), *flags, "--json")
        assert code == 0, err
        documents[name] = json.loads(out)
        assert documents[name]["commitKind"] == "OVERWRITE" and documents[name]["overwrite"] == plan
    ours = _views(warehouse, [])
    for name, document in documents.items():
        assert ours[name]["rows"] == java[name]["rows"], (name, ours[name]["rows"], java[name]["rows"])
        assert _by_partition(ours[name]["files"]) == _by_partition(java[name]["files"]), name
        snapshots = ours[name]["snapshots"]
        [head] = [s for s in snapshots["snapshots"] if s["snapshot_id"] == document["snapshotId"]]
        assert head["operation"] == "overwrite" and snapshots["current_snapshot_id"] == head["snapshot_id"]
