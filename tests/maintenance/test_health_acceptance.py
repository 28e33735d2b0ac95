"""Issue 28's acceptance for ``table.health()`` beyond ``test_health.py`` (which has one problem per table):
the problems ``test_health.py`` does not make, and every problem at once.

- Paimon merge-on-read deletes: a primary-key table's DELETE (``-D``) records recommend ``compact_data`` with
  ``mode="full"`` (the full compaction drops them at the highest level); none after it.
- Iceberg: five position-delete files in a partition whose deletes stay under ``delete-ratio`` recommend
  ``compact_deletes`` alone (rewriting the delete files is enough); none after it.
- Every problem at once, per format (the builders below, shared with ``tests/s3/test_health_s3.py``):
  a Paimon primary-key table with level-0 runs, DELETE records, snapshots past retention, small manifests,
  a partition past ``partition.expiration-time`` and a planted orphan; an Iceberg table with small files,
  position and equality deletes, snapshots past retention, small manifests and a planted orphan. Health
  recommends exactly the operations that fix them, in the order to run them; each is run as
  ``getattr(table.maintenance, r.operation)(**r.arguments)``; then ``health(orphans=True)`` recommends
  nothing and scores 100.

The builders take a URI and fsspec storage options, so the S3 test makes the same tables on SeaweedFS.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.core import url_to_fs
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from airflow_lakeformat.cli import main
from airflow_lakeformat.core.health.model import TableHealth
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable, open_table
from tests.iceberg.helpers import commit_delete_files

Table = PaimonTable | IcebergLakeTable
SCHEMA = [{"name": "p", "type": "STRING"}, {"name": "k", "type": "BIGINT"}, {"name": "v", "type": "STRING"}]
FILE_PATH_FIELD_ID = 2147483546  # the position delete's file_path column (Iceberg spec, reserved id)
OLD_PARTITION, NEW_PARTITION = "2020-01-01", "2999-01-01"
PAIMON_PROBLEMS = (
    "bucket=1",
    "num-sorted-run.compaction-trigger=3",
    "snapshot.time-retained=1 ms",
    "snapshot.num-retained.min=1",
    "partition.expiration-time=7 d",
    "partition.timestamp-formatter=yyyy-MM-dd",
    "lakeformat.health.max-small-manifests=3",
)
ICEBERG_PROBLEMS = (
    "lakeformat.health.min-small-files=3",
    "history.expire.max-snapshot-age-ms=1",
    "history.expire.min-snapshots-to-keep=1",
    "lakeformat.health.max-small-manifests=3",
)
#: What health recommends on the tables with every problem, in this order.
PAIMON_FIXES = ["expire_partitions", "compact_data", "compact_manifests", "expire_snapshots"]
ICEBERG_FIXES = ["compact_data", "compact_manifests", "expire_snapshots"]


def create(
    uri: str,
    fmt: str,
    options: tuple[str, ...] = (),
    *,
    storage: Mapping[str, Any] | None = None,
    primary_keys: str | None = None,
) -> Table:
    """``lakeformat create-table`` (partitioned by ``p``), opened with ``storage``."""
    schema = [
        {**f, "type": f["type"] + " NOT NULL"} if primary_keys and f["name"] in primary_keys.split(",") else f
        for f in SCHEMA
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(schema, handle)
    argv = ["create-table", uri, "--format", fmt, "--schema", handle.name, "--partition-keys", "p"]
    if primary_keys:
        argv += ["--primary-keys", primary_keys]
    for option in options:
        argv += ["--option", option]
    for key, value in _flat(storage or {}).items():
        argv += ["--storage-option", f"{key}={value}"]
    out = io.StringIO()
    code = main(argv, out)
    os.unlink(handle.name)
    assert code == 0, out.getvalue()
    return open_table(uri, storage_options=storage)


def _flat(options: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = str(value)
    return flat


def write(
    table: Table, keys: list[int], partition: str | list[str], commit: int, kind: str | None = None
) -> None:
    """One commit of the rows ``keys`` in ``partition`` (one per key when a list; ``kind``: their Paimon row
    kind, e.g. ``-D``)."""
    columns: dict[str, Any] = {
        "p": [partition] * len(keys) if isinstance(partition, str) else partition,
        "k": pa.array(keys, pa.int64()),
        "v": [f"v{k}" for k in keys],
    }
    if kind is not None:
        columns["kind"] = [kind] * len(keys)
    extra = {"row_kind_column": "kind"} if kind is not None else {}
    table.writes().write_rows(pa.table(columns), commit_user="health", commit_identifier=commit, **extra)


def plant_orphan(table: Table, storage: Mapping[str, Any] | None = None) -> str:
    """A 100-byte file no snapshot uses, beside the table's data files; its URI."""
    path = table.files()[0].path.rsplit("/", 1)[0] + "/planted-orphan.parquet"
    fs, key = url_to_fs(path, **dict(storage or {}))
    fs.pipe_file(key, b"x" * 100)
    return path


def paimon_with_every_problem(uri: str, storage: Mapping[str, Any] | None = None) -> Table:
    """A primary-key table (compaction trigger 3): an old partition, 3 level-0 runs in the new one (the last
    a DELETE), 4 snapshots past retention."""
    table = create(uri, "paimon", PAIMON_PROBLEMS, storage=storage, primary_keys="p,k")
    write(table, [0], OLD_PARTITION, 1)
    for i in range(2):
        write(table, [i], NEW_PARTITION, 2 + i)
    write(table, [0], NEW_PARTITION, 4, kind="-D")
    return open_table(uri, storage_options=storage)


def iceberg_with_every_problem(uri: str, storage: Mapping[str, Any] | None = None) -> Table:
    """Three one-row files in ``a`` (small-file threshold 3; one with a position delete), one file in ``b``
    with an equality delete, 4 snapshots past retention."""
    table = create(uri, "iceberg", ICEBERG_PROBLEMS, storage=storage)
    write(table, [0, 100, 101], ["a", "b", "b"], 1)
    for i in range(1, 3):
        write(table, [i], "a", 1 + i)
    assert isinstance(table, IcebergLakeTable)
    native = open_table(uri, storage_options=storage).native
    assert isinstance(native, type(table.native))
    head = native.snapshot(ref="main")
    a_file = min(f.path for f in live_files(native, head) if f.partition == ("a",))
    key = native.metadata.schema().find_field("k").field_id
    deletes = [
        _delete_file(native, "pos", pa.table({"file_path": [a_file], "pos": pa.array([0], pa.int64())}), "a"),
        _delete_file(native, "eq", pa.table({"k": pa.array([100], pa.int64())}), "b", [key]),
    ]
    commit_delete_files(native, deletes)
    return open_table(uri, storage_options=storage)


def _delete_file(
    native: Any, name: str, rows: pa.Table, partition: str, equality_ids: list[int] | None = None
) -> DataFile:
    """A position (no ``equality_ids``) or equality delete file written under the table's data directory; a
    position delete of one data file carries that path as its ``file_path`` bounds, as Iceberg's writers
    write it (file-scoped: once that file is rewritten, the delete is dangling and the compaction drops it)."""
    path = f"{native.metadata.location}/data/p={partition}/{name}-delete.parquet"
    sink = io.BytesIO()
    pq.write_table(rows, sink)
    with native.table.io.new_output(path).create(overwrite=True) as out:
        out.write(sink.getvalue())
    content = DataFileContent.EQUALITY_DELETES if equality_ids else DataFileContent.POSITION_DELETES
    paths = set() if equality_ids else set(rows.column("file_path").to_pylist())
    bounds = {FILE_PATH_FIELD_ID: paths.pop().encode()} if len(paths) == 1 else None
    delete = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(partition),
        record_count=rows.num_rows,
        file_size_in_bytes=len(sink.getvalue()),
        equality_ids=equality_ids,
        lower_bounds=bounds,
        upper_bounds=bounds,
    )
    delete.spec_id = native.metadata.default_spec_id
    return delete


def fix(table: Table, **health_arguments: Any) -> TableHealth:
    """Run what health recommends, each as the recommendation says; the health that recommended it."""
    health = table.health(**health_arguments)
    for r in health.recommendations:
        time.sleep(
            0.01
        )  # the retention is 1 ms: the snapshot the previous operation committed is then past it
        getattr(table.maintenance, r.operation)(**r.arguments)
    return health


def assert_clean(uri: str, storage: Mapping[str, Any] | None = None) -> TableHealth:
    after = open_table(uri, storage_options=storage).health(orphans=True)
    assert after.operations == [] and after.score == 100, after.to_json()
    assert after.orphans == {"files": 0, "bytes": 0}
    assert len(after.to_json()["snapshots"]["times"]) == after.snapshots["count"]
    return after


def age_files(root: Path, days: float) -> None:
    """Every file under ``root`` modified ``days`` ago (the orphan cleanup's age rule takes old files only)."""
    old = time.time() - days * 86400
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))


# ---- the problems test_health.py does not make --------------------------------------------------------------


def test_paimon_delete_records_recommend_a_full_compaction(tmp_path: Path) -> None:
    table = create(str(tmp_path / "t"), "paimon", ("bucket=1",), primary_keys="p,k")
    write(table, [1, 2, 3, 4], "a", 1)
    write(table, [1], "a", 2, kind="-D")
    health = table.health()
    assert health.operations == ["compact_data"], health.to_json()["recommendations"]
    rec = health.recommendations[0]
    assert (rec.metric, rec.value, rec.arguments) == ("deleteRatioPerPartition", 0.2, {"mode": "full"})
    assert health.deletes["deleteRecords"] == 1 and health.deletes["maxSortedRuns"] == 2
    assert fix(table).operations == ["compact_data"]
    after = assert_clean(str(tmp_path / "t"))
    assert after.deletes["deleteRecords"] == 0 and after.files["records"] == 3


def test_iceberg_many_light_position_deletes_recommend_compact_deletes(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = create(uri, "iceberg")
    write(table, list(range(100)), "a", 1)  # one file of 100 rows: 5 deleted rows stay under 10%
    native = open_table(uri).native
    data = live_files(native, native.snapshot(ref="main"))[0].path
    for i in range(5):
        rows = pa.table({"file_path": [data], "pos": pa.array([i], pa.int64())})
        commit_delete_files(native, [_delete_file(native, f"pos{i}", rows, "a")])
        native.refresh()
    health = open_table(uri).health()
    assert health.operations == ["compact_deletes"], health.to_json()["recommendations"]
    assert health.recommendations[0].metric == "deleteFilesPerPartition"
    assert health.deletes["positionDeleteFiles"] == 5 and health.deletes["positionDeleteRecords"] == 5
    assert fix(open_table(uri)).operations == ["compact_deletes"]
    after = open_table(uri).health()
    assert after.operations == [] and after.deletes["positionDeleteFiles"] == 1, after.to_json()


# ---- every problem at once ------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_every_problem_at_once_is_fixed_by_what_health_recommends(tmp_path: Path, fmt: str) -> None:
    uri = str(tmp_path / "t")
    build = paimon_with_every_problem if fmt == "paimon" else iceberg_with_every_problem
    table = build(uri)
    planted = plant_orphan(table)
    age_files(tmp_path / "t", days=5)
    fixes = PAIMON_FIXES if fmt == "paimon" else ICEBERG_FIXES
    assert table.health().operations == fixes, table.health().to_json()["recommendations"]
    health = fix(table, orphans=True)
    assert health.operations == [*fixes, "remove_orphan_files"], health.to_json()["recommendations"]
    assert health.orphans == {"files": 1, "bytes": 100}
    times = health.to_json()["snapshots"]["times"]  # each kept snapshot's commit time, ascending
    assert len(times) == health.snapshots["count"] == 4 and times == sorted(times)
    compact = health.recommendations[fixes.index("compact_data")]
    if fmt == "paimon":
        assert health.expirable_partitions == [OLD_PARTITION]
        assert compact.arguments == {"mode": "full"} and health.deletes["maxSortedRuns"] == 3
    else:
        assert compact.arguments == {
            "options": {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}
        }
        assert health.deletes["positionDeleteFiles"] == 1 and health.deletes["equalityDeleteFiles"] == 1
    assert not Path(planted.removeprefix("file://")).exists()
    after = assert_clean(uri)
    assert after.snapshots["count"] == 1 and after.deletes["deleteRecords"] == 0
