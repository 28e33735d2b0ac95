"""We write, Java reads: our appends and manifest compactions on Java Iceberg 1.10.2's tables, checked by Java.

On the pristine oracle warehouse (restored in place), for each writable table (v1, v2 copy-on-write, v2
merge-on-read, v1 upgraded to v2, three partition specs with a renamed column, tags and branches, 42
commits) we run, as a user would:

1. an append (``lakeformat write T --from rows.parquet``, rows in the table's current schema),
2. a full manifest compaction (``lakeformat compact-manifests T``),
3. another append,
4. a minor manifest compaction (``lakeformat compact-manifests T --minor``), which commits nothing: below
   ``commit.manifest.min-count-to-merge`` (100) Java's merge rule keeps the bin of the newest manifest,
5. ``commit.manifest.min-count-to-merge=2`` set on the table (our commit loop, no snapshot) with a branch
   ``lf_probe`` at the head, then the minor compaction again, which now merges the data manifests of the
   newest manifest's bin.

After each step we record what we see (the new snapshot, its parent, the metadata file, ``lakeformat files
--json`` at the head), and at the end ``lakeformat files --json`` at every snapshot and every ref. Then
ONE Spark session of Java Iceberg checks all of it:

* Java loads each step's metadata file and sees that step's head, lineage and live files;
* Java's rows at EVERY snapshot and ref equal what pyiceberg read before we started plus the rows we
  appended (old snapshots unchanged);
* Java's live files equal ours at every snapshot and ref; at each of our new snapshots Java's ``files``
  metadata table (Spark SQL) equals ``lakeformat files --json`` too;
* Java's snapshots carry our operations (``append``, ``replace``), parents and sequence numbers; the refs
  other than main did not move;
* Java's own merge (an empty ``newAppend()``, i.e. ``MergeAppend``) committed to ``lf_probe``, the state
  our last minor compaction started from, with the same properties, gives the same data manifests as ours:
  same order, same spec, same live-file counts, the same kept manifests.

``partition_evolution``'s current spec is bucket(4, id) + months(event_date): pyiceberg 0.12's Arrow append
refuses two fields of one spec on one column, so there the appends go through our
``write.append_data_files`` with Parquet files written per partition by pyiceberg's ``write_file``; the CLI
on that table partitions the rows itself with ``pyiceberg-core`` (:func:`test_cli_write_into_bucket_and_month_transforms`).

``v3_dv`` must be refused (write and both compactions: exit 5) and stay unchanged, on disk and for Java.

The shared SQLite catalog: Java's ``jc.jdb.jdbc_basic`` (JdbcCatalog) is compacted by us through pyiceberg's
SqlCatalog (``--catalog jc --catalog-property type=sql ...``); Java then sees our ``replace`` as current.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from tests.support.java_iceberg import JDBC_CATALOG, JavaIcebergWarehouse
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

WRITABLE = (
    "v1",
    "v2_cow",
    "v2_mor",
    "v1_to_v2",
    "partition_evolution",
    "tags_branches",
    "many_commits",
)
CONTENT = {0: "data", 1: "position-deletes", 2: "equality-deletes"}
CATEGORIES = ("alpha", "beta", "gamma", "delta")  # "delta" is a partition value no Java commit wrote
EXIT_UNSUPPORTED = 5


# ---- normalised views (the oracle's JSON forms) --------------------------------------------------


def normalise(value: Any) -> Any:
    """A value read by pyiceberg in the oracle's normalised JSON form (decimal -> str, date -> ISO)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return value


def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def pyiceberg_rows(table: IcebergTable, snapshot_id: int) -> list[dict[str, Any]]:
    """pyiceberg's rows at a snapshot (its schema), normalised and sorted."""
    arrow = table.table.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted_rows([{k: normalise(v) for k, v in row.items()} for row in arrow.to_pylist()])


def java_file_keys(files: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (CONTENT[f["content"]], f["file_path"], f["file_format"].lower(), f["spec_id"], f["record_count"],
         f["file_size_in_bytes"])
        for f in files
    )  # fmt: skip


def our_file_keys(document: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (f["content"], f["path"], f["fileFormat"].lower(), f["specId"], f["recordCount"], f["fileSize"])
        for f in document["files"]
    )


def cli_json(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code == 0, f"lakeformat {' '.join(argv)}: exit {code}\n{err}"
    document: dict[str, Any] = json.loads(out)
    return document


# ---- our side -----------------------------------------------------------------------------------


def new_rows(table: IcebergTable, step: int) -> list[dict[str, Any]]:
    """Six rows in the table's CURRENT schema (partition_evolution: price instead of amount, plus note)."""
    names = [f.name for f in table.table.schema().fields]
    rows = []
    for i in range(6):
        row_id = 100_000 + 100 * step + i
        row: dict[str, Any] = {
            "id": row_id,
            "category": CATEGORIES[(row_id + step) % len(CATEGORIES)],
            "event_date": dt.date(2024, 1 + (i + step) % 12, 1 + i),
        }
        row["price" if "price" in names else "amount"] = decimal.Decimal(f"{step}.{i:02d}")
        if "note" in names:
            row["note"] = f"ours-{step}-{i}"
        assert set(row) == set(names), (names, row)
        rows.append({name: row[name] for name in names})
    return rows


def append_with_cli(table_path: str, rows: list[dict[str, Any]], scratch: Path) -> int:
    schema = open_path_table(table_path).table.schema().as_arrow()
    source = scratch / f"rows-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), source)
    document = cli_json("write", table_path, "--from", str(source))
    assert document["rowsAdded"] == len(rows)
    return int(document["snapshotId"])


def append_with_data_files(table_path: str, rows: list[dict[str, Any]]) -> int:
    """Our append for tables whose spec pyiceberg's Arrow writer cannot partition without pyiceberg-core:
    pyiceberg's ``write_file`` per partition (transforms computed in Python), then our
    ``append_data_files`` (the same retry loop and fast append as ``write``)."""
    from pyiceberg.io.pyarrow import write_file
    from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
    from pyiceberg.table import WriteTask

    from airflow_lakeformat.core.iceberg.write.write import append_data_files

    table = open_path_table(table_path)
    metadata = table.metadata
    schema, spec = metadata.schema(), metadata.spec()
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = tuple(
            f.transform.transform(schema.find_field(f.source_id).field_type)(
                _internal(row[schema.find_field(f.source_id).name])
            )
            for f in spec.fields
        )
        groups.setdefault(key, []).append(row)
    arrow_schema = schema.as_arrow()
    write_uuid = uuid.uuid4()
    tasks = [
        WriteTask(
            write_uuid=write_uuid,
            task_id=index,
            schema=schema,
            record_batches=pa.Table.from_pylist(group, schema=arrow_schema).to_batches(),
            partition_key=PartitionKey(
                field_values=[PartitionFieldValue(f, v) for f, v in zip(spec.fields, key, strict=True)],
                partition_spec=spec,
                schema=schema,
            ),
        )
        for index, (key, group) in enumerate(sorted(groups.items()))
    ]
    data_files = list(write_file(table.table.io, metadata, iter(tasks)))
    return append_data_files(table, data_files)


def _internal(value: Any) -> Any:
    """A Python value in the representation pyiceberg's transforms take (dates as days)."""
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


@dataclass
class Step:
    kind: str  # "append" | "full" | "minor"
    parent_id: int
    snapshot_id: int | None  # None: nothing committed
    head: int
    metadata_location: str
    files: Counter[tuple[Any, ...]]
    document: dict[str, Any] = field(default_factory=dict)
    min_count_to_merge: int | None = None  # the table's commit.manifest.min-count-to-merge for a minor


@dataclass
class TableRun:
    name: str
    path: str
    expected_rows: dict[int, list[dict[str, Any]]]  # snapshot id -> rows we expect Java to read
    pyiceberg_new_rows: dict[int, list[dict[str, Any]]]  # pyiceberg's rows at our new snapshots
    steps: list[Step] = field(default_factory=list)
    probe_head: int = 0  # where the branch PROBE_BRANCH points: the state our last minor started from
    manifests_at_probe: list[dict[str, Any]] = field(default_factory=list)  # our `manifests --json` there
    manifests_final: list[dict[str, Any]] = field(default_factory=list)  # ... and at the final head
    ours_at_snapshots: dict[int, Counter[tuple[Any, ...]]] = field(default_factory=dict)
    ours_at_refs: dict[str, Counter[tuple[Any, ...]]] = field(default_factory=dict)
    java: dict[str, Any] = field(default_factory=dict)


PROBE_BRANCH = "lf_probe"
MIN_COUNT = "commit.manifest.min-count-to-merge"


def lower_min_count_and_branch(table_path: str) -> int:
    """``commit.manifest.min-count-to-merge=2`` and a branch PROBE_BRANCH at the head, in one commit of our
    retry loop (metadata only, no snapshot); returns the head."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.update import AssertRefSnapshotId, SetSnapshotRefUpdate

    from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry

    table = open_path_table(table_path)
    head = table.metadata.current_snapshot_id
    assert head is not None

    def stage(tx: Any) -> None:
        tx.set_properties({MIN_COUNT: "2"})
        tx._apply(
            (SetSnapshotRefUpdate(snapshot_id=head, ref_name=PROBE_BRANCH, type=SnapshotRefType.BRANCH),),  # type: ignore[call-arg]
            (AssertRefSnapshotId(snapshot_id=None, ref=PROBE_BRANCH),),  # type: ignore[call-arg]
        )

    commit_with_retry(table, stage, description="test: min-count-to-merge=2 and a probe branch")
    return head


def run_our_steps(name: str, table_path: str, scratch: Path) -> TableRun:
    table = open_path_table(table_path)
    pristine = table.metadata
    expected = {s.snapshot_id: pyiceberg_rows(table, s.snapshot_id) for s in pristine.snapshots}
    run_ = TableRun(name, table_path, expected, {})
    for index, kind in enumerate(("append", "full", "append", "minor", "minor")):
        min_count = None
        if index == 4:
            run_.probe_head = lower_min_count_and_branch(table_path)
            run_.manifests_at_probe = cli_json("manifests", table_path)["manifests"]
        if kind == "minor":
            min_count = int(open_path_table(table_path).metadata.properties.get(MIN_COUNT, 100))
        parent = open_path_table(table_path).metadata.current_snapshot_id
        assert parent is not None
        document: dict[str, Any] = {}
        if kind == "append":
            rows = new_rows(table, index)
            if name == "partition_evolution":
                snapshot_id: int | None = append_with_data_files(table_path, rows)
            else:
                snapshot_id = append_with_cli(table_path, rows, scratch)
            assert snapshot_id is not None
            expected[snapshot_id] = sorted_rows(
                expected[parent] + [{k: normalise(v) for k, v in r.items()} for r in rows]
            )
        else:
            argv = ["compact-manifests", table_path] + (["--minor"] if kind == "minor" else [])
            document = cli_json(*argv)
            snapshot_id = document["snapshotId"]
            if snapshot_id is not None:
                expected[snapshot_id] = expected[parent]
        after = open_path_table(table_path)
        head = after.metadata.current_snapshot_id
        assert head is not None and head == (snapshot_id if snapshot_id is not None else parent), (name, kind)
        if snapshot_id is not None:
            run_.pyiceberg_new_rows[snapshot_id] = pyiceberg_rows(after, snapshot_id)
        run_.steps.append(
            Step(kind, parent, snapshot_id, head, after.metadata_location,
                 our_file_keys(cli_json("files", table_path)), document, min_count)
        )  # fmt: skip
    run_.manifests_final = cli_json("manifests", table_path)["manifests"]
    # `lakeformat files --json` at every snapshot and every ref of the final table.
    final = open_path_table(table_path).metadata
    for snapshot in final.snapshots:
        document = cli_json("files", table_path, "--snapshot", str(snapshot.snapshot_id))
        run_.ours_at_snapshots[snapshot.snapshot_id] = our_file_keys(document)
    for ref in final.refs:
        run_.ours_at_refs[ref] = our_file_keys(cli_json("files", table_path, "--ref", ref))
    return run_


@dataclass
class WriteRun:
    tables: dict[str, TableRun]
    v3: dict[str, Any]
    jdbc: dict[str, Any]


def table_commands(table_run: TableRun) -> list[list[str]]:
    """Java's views of one table after our steps; the last command commits (on PROBE_BRANCH)."""
    table = f"db.{table_run.name}"
    new_ids = [step.snapshot_id for step in table_run.steps if step.snapshot_id is not None]
    return [
        ["rows", "--table", table, "--all"],
        ["files", "--table", table, "--all", "--source", "java"],
        ["snapshots", "--table", table],
        *(["load-metadata", "--metadata", step.metadata_location] for step in table_run.steps),
        *(["files", "--table", table, "--snapshot", str(i)] for i in new_ids),  # the `files` table (SQL)
        ["manifest-list", "--table", table],
        ["merge-append", "--table", table, "--branch", PROBE_BRANCH],  # commits: after the reads
    ]


@pytest.fixture(scope="module")
def write_run(
    java_iceberg_warehouse: JavaIcebergWarehouse, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WriteRun]:
    """Everything we do, on the pristine warehouse restored in place, then Java's views in ONE session."""
    warehouse = java_iceberg_warehouse
    scratch = tmp_path_factory.mktemp("write-interop")
    warehouse.restore()
    try:
        runs = {name: run_our_steps(name, warehouse.tables[name]["path"], scratch) for name in WRITABLE}
        v3 = refuse_v3(warehouse, scratch)
        jdbc = compact_jdbc(warehouse)
        per_table = {name: table_commands(table_run) for name, table_run in runs.items()}
        commands = [command for group in per_table.values() for command in group]
        commands += [
            ["snapshots", "--table", "db.v3_dv"],
            ["snapshots", "--table", jdbc["identifier"]],
            ["rows", "--table", jdbc["identifier"]],
            ["files", "--table", jdbc["identifier"], "--all", "--source", "java"],
            ["files", "--table", jdbc["identifier"]],  # the `files` table at the head (our replace)
        ]
        results = warehouse.batch(commands)
        for name, table_run in runs.items():
            count, steps = len(per_table[name]), len(table_run.steps)
            views, results = results[:count], results[count:]
            table_run.java = {
                "rows": views[0],
                "files": views[1],
                "snapshots": views[2],
                "loaded": views[3 : 3 + steps],
                "files_sql": views[3 + steps : -2],
                "manifest_list": views[-2],
                "merge_probe": views[-1],
            }
        v3["java_snapshots"] = results[0]
        jdbc["java"] = {
            "snapshots": results[1],
            "rows": results[2],
            "files": results[3],
            "files_sql": results[4],
        }
        yield WriteRun(runs, v3, jdbc)
    finally:
        warehouse.restore()


def refuse_v3(warehouse: JavaIcebergWarehouse, scratch: Path) -> dict[str, Any]:
    path = warehouse.tables["v3_dv"]["path"]
    listing = {str(p): p.stat().st_size for p in Path(path).rglob("*") if p.is_file()}
    source = scratch / "v3.parquet"
    rows = [
        {"id": 1, "category": "alpha", "amount": decimal.Decimal("1.00"), "event_date": dt.date(2024, 1, 1)}
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=open_path_table(path).table.schema().as_arrow()), source)
    outcomes = {
        "write": run("write", path, "--from", str(source), "--json"),
        "full": run("compact-manifests", path, "--json"),
        "minor": run("compact-manifests", path, "--minor", "--json"),
    }
    after = {str(p): p.stat().st_size for p in Path(path).rglob("*") if p.is_file()}
    return {"outcomes": outcomes, "listing_unchanged": listing == after}


def compact_jdbc(warehouse: JavaIcebergWarehouse) -> dict[str, Any]:
    """Our full compaction of Java's JDBC table through pyiceberg's SqlCatalog, as the CLI names it."""
    catalog = [
        "--catalog", JDBC_CATALOG,
        "--catalog-property", "type=sql",
        "--catalog-property", f"uri=sqlite:///{warehouse.catalog_db}",
        "--catalog-property", f"warehouse={warehouse.warehouse.as_uri()}",
    ]  # fmt: skip
    before = cli_json("snapshots", "jdb.jdbc_basic", *catalog)
    document = cli_json("compact-manifests", "jdb.jdbc_basic", *catalog)
    files = our_file_keys(cli_json("files", "jdb.jdbc_basic", *catalog))
    return {
        "identifier": f"{JDBC_CATALOG}.jdb.jdbc_basic",
        "head_before": before["currentSnapshotId"],
        "document": document,
        "files": files,
    }


# ---- the checks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", WRITABLE)
def test_java_reads_our_appends_and_compactions(
    write_run: WriteRun, java_iceberg_warehouse: JavaIcebergWarehouse, name: str
) -> None:
    table_run = write_run.tables[name]
    java = table_run.java
    baseline = java_iceberg_warehouse.baseline[name]
    steps = table_run.steps
    assert [s.kind for s in steps] == ["append", "full", "append", "minor", "minor"]
    new_ids = [s.snapshot_id for s in steps if s.snapshot_id is not None]
    final_head = steps[-1].head

    # Our own reads of our snapshots agree with what we appended.
    for snapshot_id, rows in table_run.pyiceberg_new_rows.items():
        assert rows == table_run.expected_rows[snapshot_id], f"{name}: pyiceberg at {snapshot_id}"

    # Java loads each step's metadata file and sees that step's head, its lineage and our live files.
    for step, loaded in zip(steps, java["loaded"], strict=True):
        assert loaded["current_snapshot_id"] == step.head, (name, step.kind)
        assert loaded["refs"]["main"] == step.head
        assert java_file_keys(loaded["files"]) == step.files, f"{name}: files after {step.kind}"
        lineage = {s["snapshot_id"]: s for s in loaded["snapshots"]}
        if step.snapshot_id is not None:
            assert lineage[step.snapshot_id]["parent_id"] == step.parent_id
        assert loaded["format_version"] == baseline["snapshots"]["format_version"]

    # Java's snapshots: every old one kept, ours with the right operation and parent, main at our head.
    snapshots = {s["snapshot_id"]: s for s in java["snapshots"]["snapshots"]}
    pristine = {s["snapshot_id"]: s for s in baseline["snapshots"]["snapshots"]}
    assert set(snapshots) == set(pristine) | set(new_ids)
    for snapshot_id, before in pristine.items():
        assert snapshots[snapshot_id] == before, f"{name}: old snapshot {snapshot_id} changed"
    for step in steps:
        if step.snapshot_id is None:
            continue
        ours = snapshots[step.snapshot_id]
        assert ours["operation"] == ("append" if step.kind == "append" else "replace"), (name, step.kind)
        assert ours["parent_id"] == step.parent_id
        if baseline["snapshots"]["format_version"] >= 2:
            assert ours["sequence_number"] == snapshots[step.parent_id]["sequence_number"] + 1
    assert java["snapshots"]["current_snapshot_id"] == final_head
    refs = java["snapshots"]["refs"]
    assert refs["main"]["snapshot_id"] == final_head
    assert refs[PROBE_BRANCH]["snapshot_id"] == table_run.probe_head
    assert {n: r for n, r in refs.items() if n not in ("main", PROBE_BRANCH)} == {
        n: r for n, r in baseline["snapshots"]["refs"].items() if n != "main"
    }, f"{name}: a ref other than main moved or lost its retention"

    # Java's rows at EVERY snapshot and ref equal what pyiceberg read before plus our rows.
    rows = java["rows"]
    assert set(map(int, rows["snapshots"])) == set(table_run.expected_rows)
    for snapshot_id, java_rows in rows["snapshots"].items():
        assert sorted_rows(java_rows) == table_run.expected_rows[int(snapshot_id)], f"{name} at {snapshot_id}"
    assert set(rows["refs"]) == set(refs)
    for ref, view in rows["refs"].items():
        assert sorted_rows(view["rows"]) == table_run.expected_rows[view["snapshot_id"]], f"{name} at {ref}"

    # Java's live files equal ours at EVERY snapshot and ref; old snapshots also equal the build's baseline.
    files = java["files"]
    assert set(map(int, files["snapshots"])) == set(table_run.ours_at_snapshots)
    for snapshot_id, java_files in files["snapshots"].items():
        assert java_file_keys(java_files) == table_run.ours_at_snapshots[int(snapshot_id)], (
            f"{name} at {snapshot_id}"
        )
    assert set(files["refs"]) == set(table_run.ours_at_refs)
    for ref, view in files["refs"].items():
        assert java_file_keys(view["files"]) == table_run.ours_at_refs[ref], f"{name} at ref {ref}"
    for snapshot_id, pristine_files in baseline["files"]["snapshots"].items():
        assert java_file_keys(files["snapshots"][snapshot_id]) == java_file_keys(pristine_files), (
            f"{name} at {snapshot_id}"
        )
    # ... and at our new snapshots Java's `files` metadata table (Spark SQL) says the same.
    assert len(java["files_sql"]) == len(new_ids)
    for snapshot_id, sql_files in zip(new_ids, java["files_sql"], strict=True):
        assert java_file_keys(sql_files) == table_run.ours_at_snapshots[snapshot_id], (name, snapshot_id)
        step = next(s for s in steps if s.snapshot_id == snapshot_id)
        assert java_file_keys(sql_files) == step.files, (name, step.kind)

    # A manifest compaction changes no live file; the full one rewrote the manifests.
    full = steps[1]
    assert full.snapshot_id is not None, f"{name}: the full compaction committed nothing"
    assert full.files == steps[0].files
    assert full.document["merge"] == "full" and full.document["manifestsRewritten"] >= 2
    assert steps[4].files == steps[3].files == steps[2].files


@pytest.mark.parametrize("name", WRITABLE)
def test_minor_compaction_follows_javas_merge_rule(write_run: WriteRun, name: str) -> None:
    """At min-count-to-merge 100 the bin of the newest manifest is kept, and after the full compaction every
    other bin is a single manifest: our minor commits nothing. At 2, it merges that bin; Java's own merge on
    the same state (an empty MergeAppend on PROBE_BRANCH) leaves the same data manifests."""
    table_run = write_run.tables[name]
    kept_minor, merged_minor = table_run.steps[3], table_run.steps[4]
    assert kept_minor.kind == merged_minor.kind == "minor"
    assert kept_minor.min_count_to_merge == 100 and merged_minor.min_count_to_merge == 2
    assert kept_minor.snapshot_id is None and kept_minor.document["merge"] == "none", kept_minor.document
    assert kept_minor.document["manifestsRewritten"] == 0
    assert merged_minor.snapshot_id is not None and merged_minor.document["merge"] == "minor"
    assert merged_minor.parent_id == table_run.probe_head

    # Java lists the same manifests as we do, in the same order, at our final head and at the probe.
    java_list = table_run.java["manifest_list"]
    assert [m["path"] for m in java_list] == [m["path"] for m in table_run.manifests_final]
    probe = table_run.java["merge_probe"]
    assert probe["parent_id"] == table_run.probe_head
    assert [m["path"] for m in probe["manifests_before"]] == [m["path"] for m in table_run.manifests_at_probe]

    # Java's merge and ours: the same data manifests, in the same order (spec groups highest id first):
    # kept ones by path, merged ones as (spec, live files).
    before = {m["path"] for m in table_run.manifests_at_probe}

    def live(added: int | None, existing: int | None) -> int | None:
        return None if added is None or existing is None else added + existing

    def java_data(manifests: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (m["spec_id"], live(m["added_files_count"], m["existing_files_count"]),
             m["path"] if m["path"] in before else "<merged>")
            for m in manifests
            if m["content"] == "DATA"
        ]  # fmt: skip

    ours = [
        (m["specId"], live(m["addedFilesCount"], m["existingFilesCount"]),
         m["path"] if m["path"] in before else "<merged>")
        for m in table_run.manifests_final
        if m["content"] == "data"
    ]  # fmt: skip
    assert java_data(probe["manifests_after"]) == ours, f"{name}: Java merged differently"
    assert "<merged>" in [path for *_, path in ours]
    final = {m["path"] for m in table_run.manifests_final}
    replaced = [m for m in table_run.manifests_at_probe if m["content"] == "data" and m["path"] not in final]
    assert merged_minor.document["manifestsRewritten"] == len(replaced) >= 2


def test_v3_tables_are_refused_and_unchanged(
    write_run: WriteRun, java_iceberg_warehouse: JavaIcebergWarehouse
) -> None:
    for operation, (code, out, err) in write_run.v3["outcomes"].items():
        assert code == EXIT_UNSUPPORTED, (operation, code, out, err)
        assert "format-version 3" in err, (operation, err)
        assert json.loads(out)["error"]["exitCode"] == EXIT_UNSUPPORTED, (operation, out)
    assert write_run.v3["listing_unchanged"]
    assert write_run.v3["java_snapshots"] == java_iceberg_warehouse.baseline["v3_dv"]["snapshots"]


def test_java_sees_our_compaction_through_the_shared_sqlite_catalog(
    write_run: WriteRun, java_iceberg_warehouse: JavaIcebergWarehouse
) -> None:
    jdbc = write_run.jdbc
    baseline = java_iceberg_warehouse.baseline["jdbc_basic"]
    document = jdbc["document"]
    assert document["merge"] == "full" and document["snapshotId"] is not None, document
    assert jdbc["head_before"] == baseline["snapshots"]["current_snapshot_id"]
    java = jdbc["java"]
    snapshots = {s["snapshot_id"]: s for s in java["snapshots"]["snapshots"]}
    ours = snapshots[document["snapshotId"]]
    assert java["snapshots"]["current_snapshot_id"] == document["snapshotId"]
    assert ours["operation"] == "replace" and ours["parent_id"] == jdbc["head_before"]
    assert ours["summary"]["manifests-replaced"] == str(document["manifestsRewritten"])
    # Java found the new metadata through its JDBC catalog row, which our SqlCatalog commit moved.
    assert java["snapshots"]["metadata_location"] != baseline["snapshots"]["metadata_location"]
    assert sorted_rows(java["rows"]) == sorted_rows(baseline["rows"])
    files = java["files"]["snapshots"]
    assert java_file_keys(files[str(document["snapshotId"])]) == jdbc["files"]
    assert java_file_keys(java["files_sql"]) == jdbc["files"]
    assert jdbc["files"] == java_file_keys(files[str(jdbc["head_before"])])


def test_cli_write_into_bucket_and_month_transforms(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse, tmp_path: Path
) -> None:
    """``lakeformat write`` on a table whose spec has bucket/month transforms (two fields pyiceberg's own append
    refuses on one spec): the rows are partitioned by us with ``pyiceberg-core`` (a dependency since issue 26)
    and the append lands as the current snapshot, with every new row read back."""
    path = fresh_java_iceberg_warehouse.tables["partition_evolution"]["path"]
    table = open_path_table(path)
    rows_before = table.table.scan().to_arrow().num_rows
    added = pa.Table.from_pylist(new_rows(table, 0), schema=table.table.schema().as_arrow())
    source = tmp_path / "rows.parquet"
    pq.write_table(added, source)
    code, out, err = run("write", path, "--from", str(source), "--json")
    assert code == 0, (code, out, err)
    after = open_path_table(path)
    assert after.metadata.current_snapshot_id == json.loads(out)["snapshotId"]
    assert after.table.scan().to_arrow().num_rows == rows_before + added.num_rows
