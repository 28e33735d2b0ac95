"""The ``write`` Spark job through a real ``spark-submit`` (``local[2]``), read back by real pypaimon (the last,
idempotent re-run in process, on the shared session of ``tests/spark/conftest.py``).

One table goes through an executor failure mid-write, a driver killed before its commit, the
re-run that converges, and a second re-run that finds the landed snapshot; orphan cleanup then
removes exactly what the failed runs left. CSV and JSON-lines sources are checked on a second table.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.spark.runtime import FAIL_AFTER_FILES_ENV, KILL_BEFORE_COMMIT_ENV
from tests.support.pypaimon import run_oracle_batch
from tests.support.spark import (
    FIELDS,
    data_files,
    expected_rows,
    run_in_process,
    run_job,
    source_table,
    write_parquet_source,
)

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.slow]

TARGET = 32 << 10


def referenced_files(table: Table) -> set[str]:
    """Data files (relative paths) referenced by any snapshot of the table."""
    paths = DataFilePaths(table.schema)
    manager = table.snapshot_manager
    out = set()
    for snapshot_id in manager.list_snapshot_ids():
        out |= {paths.relative_path(e) for e in live_entries(table, manager.snapshot(snapshot_id))}
    return out


@pytest.mark.usefixtures("spark")
def test_write_job_survives_a_failed_task_and_a_killed_driver_and_reruns_idempotently(tmp_path: Path) -> None:
    root = tmp_path / "wh" / "db.db" / "t"
    table = create_table(
        str(root), schema_from_fields(FIELDS, ["dt"], options={"target-file-size": f"{TARGET} b"})
    )
    seed = source_table(0, 300)
    Committer(table, "seed").commit(write_data_files(table, seed))
    source = write_parquet_source(tmp_path / "source", [source_table(1000, 9000), source_table(20000, 9000)])
    args = [
        "--source",
        str(source),
        "--source-format",
        "parquet",
        "--commit-user",
        "job-1",
        "--commit-identifier",
        "42",
    ]
    work = tmp_path / "work"
    seed_files = data_files(root)

    # 1. A task fails after writing 2 files (spark.task.maxFailures=1): the job fails, nothing is committed.
    failed = run_job("write", str(root), *args, work_dir=work, env={FAIL_AFTER_FILES_ENV: "2"})
    assert failed.returncode == 1 and failed.result is None, failed.describe()
    [line] = failed.error_lines
    assert re.search(r"a Spark task failed: InjectedFailureError: injected failure after \d+ files", line)
    assert table.snapshot_manager.list_snapshot_ids() == [1]
    left_by_failure = data_files(root) - seed_files
    assert len(left_by_failure) >= 2

    # 2. The driver dies (SIGKILL) after the executors wrote everything, right before the commit.
    killed = run_job("write", str(root), *args, work_dir=work, env={KILL_BEFORE_COMMIT_ENV: "1"})
    assert killed.returncode != 0 and killed.result is None, killed.describe()
    assert table.snapshot_manager.list_snapshot_ids() == [1]
    left_by_kill = data_files(root) - seed_files - left_by_failure
    assert left_by_kill

    # 3. The re-run converges to exactly one new snapshot.
    ok = run_job("write", str(root), *args, work_dir=work)
    assert ok.returncode == 0 and ok.result is not None, ok.describe()
    result = ok.result
    assert (result["job"], result["mode"], result["snapshotId"], result["alreadyCommitted"]) == (
        "write",
        "spark",
        2,
        False,
    )
    assert (result["commitUser"], result["commitIdentifier"], result["rowsWritten"]) == ("job-1", 42, 18000)
    assert table.snapshot_manager.list_snapshot_ids() == [1, 2]
    snapshot = table.snapshot_manager.snapshot(2)
    assert (snapshot.commit_user, snapshot.commit_identifier, snapshot.commit_kind.value) == (
        "job-1",
        42,
        "APPEND",
    )
    new = [
        e for e in live_entries(table, snapshot) if e.file.file_name not in {Path(f).name for f in seed_files}
    ]
    assert len(new) == result["filesWritten"] and sum(e.file.file_size for e in new) == result["bytesWritten"]
    assert len(new) > len({e.partition for e in new})  # rolled at the target size
    assert max(e.file.file_size for e in new) < 2 * TARGET
    # One writer's numbering per partition and bucket: consecutive from 0 (unaware-bucket table).
    by_bucket: dict[tuple[bytes, int], list[tuple[int, int]]] = {}
    for e in new:
        by_bucket.setdefault((e.partition, e.bucket), []).append(
            (e.file.min_sequence_number, e.file.max_sequence_number)
        )
    for ranges in by_bucket.values():
        ranges.sort()
        assert ranges[0][0] == 0 and all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))

    # 4. A second re-run finds the landed snapshot and writes nothing.
    on_disk = data_files(root)
    again = run_in_process("write", str(root), *args, work_dir=work)
    assert again.returncode == 0 and again.result is not None, again.describe()
    assert (again.result["snapshotId"], again.result["alreadyCommitted"], again.result["filesWritten"]) == (
        2,
        True,
        0,
    )
    assert table.snapshot_manager.list_snapshot_ids() == [1, 2] and data_files(root) == on_disk

    # pypaimon reads the seed alone at snapshot 1 and seed + source at snapshot 2.
    at_1, at_2 = run_oracle_batch(
        [["read", str(root), "--snapshot", "1"], ["read", str(root), "--snapshot", "2"]]
    )
    assert at_1 == expected_rows(seed)
    assert at_2 == expected_rows(pa.concat_tables([seed, *map(source_table, (1000, 20000), (9000, 9000))]))

    # The failed runs left only orphans, and orphan cleanup removes exactly those.
    orphans = data_files(root) - referenced_files(table)
    assert orphans == left_by_failure | left_by_kill
    cleanup = remove_orphan_files(table, dry_run=False, older_than=timedelta(0), allow_short_older_than=True)
    assert cleanup.to_json()["files"] == {"data-file": len(orphans)}
    assert data_files(root) == referenced_files(table)
    assert run_oracle_batch([["read", str(root)]]) == [at_2]


def test_write_job_reads_a_csv_source_as_text_and_overwrites_a_partition(tmp_path: Path) -> None:
    root = tmp_path / "wh" / "db.db" / "formats"
    table = create_table(str(root), schema_from_fields(FIELDS, ["dt"]))
    seed = source_table(0, 9)  # three rows in each of 2024-01-01, -02 and -03
    Committer(table, "seed").commit(write_data_files(table, seed))
    csv = tmp_path / "in.csv"
    csv.write_text(
        "dt,s,v,ts,price\n"
        # Every row lies in the overwritten partition: Paimon refuses an overwrite whose rows fall outside it.
        '2024-01-02,"quoted, with comma",1,2024-02-01 10:00:00.123456,1.50\n'
        "2024-01-02,,2,2024-02-01T11:00:00,2.25\n"
        # Digits Spark would infer as a double survive as the exact BIGINT and DECIMAL the table says.
        "2024-01-02,0042,9007199254740993,,12345678.91\n"
    )
    run = run_job(
        "write", str(root), "--source", str(csv), "--source-format", "csv", "--overwrite", "dt=2024-01-02",
        work_dir=tmp_path / "work",
    )  # fmt: skip
    assert run.returncode == 0 and run.result is not None, run.describe()
    result = run.result
    assert (result["rowsWritten"], result["snapshotId"], result["commitKind"]) == (3, 2, "OVERWRITE")
    assert result["filesDeleted"] == 1
    [rows] = run_oracle_batch([["read", str(root)]])
    csv_rows = [
        {
            "dt": "2024-01-02",
            "s": "quoted, with comma",
            "v": 1,
            "ts": "2024-02-01T10:00:00.123456",
            "price": "1.50",
        },
        {"dt": "2024-01-02", "s": None, "v": 2, "ts": "2024-02-01T11:00:00", "price": "2.25"},
        {"dt": "2024-01-02", "s": "0042", "v": 9007199254740993, "ts": None, "price": "12345678.91"},
    ]
    kept = [r for r in expected_rows(seed) if r["dt"] != "2024-01-02"]
    assert len(kept) == 6
    assert rows == sorted(kept + csv_rows, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))


def test_write_job_tasks_read_json_lines_with_the_table_types_and_refuse_a_bad_value(tmp_path: Path) -> None:
    """The tasks' own reader (``--source-reader python``): strings exactly as written, numbers as their column;
    a value that does not fit fails the job with exit 11 naming the file, the line and the column, and no
    snapshot is committed."""
    root = tmp_path / "wh" / "db.db" / "json"
    table = create_table(str(root), schema_from_fields(FIELDS, ["dt"]))
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"dt": "2024-01-04", "s": "2026-11-29", "v": "7", "ts": "2024-02-01T10:00:00.000000", "price": 0.10}\n'
        '{"dt": "2024-01-04", "s": "007", "v": 9007199254740993, "ts": null, "price": "-1"}\n'
    )
    ok = run_job(
        "write", str(root), "--source", str(good), "--source-format", "json", "--source-reader", "python",
        work_dir=tmp_path / "work",
    )  # fmt: skip
    assert ok.returncode == 0 and ok.result is not None and ok.result["sourceReader"] == "python", (
        ok.describe()
    )
    [rows] = run_oracle_batch([["read", str(root)]])
    assert rows == [
        {"dt": "2024-01-04", "s": "007", "v": 9007199254740993, "ts": None, "price": "-1.00"},
        {"dt": "2024-01-04", "s": "2026-11-29", "v": 7, "ts": "2024-02-01T10:00:00", "price": "0.10"},
    ]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dt": "2024-01-05", "s": "x", "v": 1}\n{"dt": "2024-01-05", "s": 5, "v": 2}\n')
    failed = run_job(
        "write", str(root), "--source", str(bad), "--source-format", "json", "--source-reader", "python",
        work_dir=tmp_path / "work2",
    )  # fmt: skip
    assert failed.returncode == 11 and failed.result is None, failed.describe()
    [line] = failed.error_lines
    assert f"{bad}: line 2, column 's': a number (5) cannot be stored in STRING" in line
    assert table.snapshot_manager.list_snapshot_ids() == [1]
