"""The ``compact_data`` Spark job against the driver-side operation, on copies of one table.

The Spark run ships the package as a ``--py-files`` zip to an interpreter that cannot import the
installed package, so it also proves the zip is enough.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.data_compaction import compact_data, plan_data_compaction
from airflow_lakeformat.core.paimon.manifest import FileKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.spark.locate import job_path, py_files_zip
from tests.support.pypaimon import run_oracle_batch
from tests.support.spark import FIELDS, expected_rows, isolated_python, run_in_process, run_job, source_table

pytestmark = [pytest.mark.spark, pytest.mark.interop, pytest.mark.slow]


def build_small_files(root: Path) -> Table:
    """Three dates x two buckets, eight appends: 48 small files (and 8 * 400 rows)."""
    options = {"bucket": "2", "bucket-key": "v", "target-file-size": "1 mb"}
    table = create_table(str(root), schema_from_fields(FIELDS, ["dt"], options=options))
    committer = Committer(table, "writer")
    for i in range(8):
        committer.commit(write_data_files(table, source_table(i * 400, 400)))
    return table


def compact_snapshot_summary(table: Table) -> dict[str, Any]:
    """What the COMPACT snapshot did, independent of file names chosen at random."""
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    _, delta = table.data_manifests(snapshot)
    entries = [e for manifest in table.read_manifests(delta, "test") for e in manifest]
    added = [e for e in entries if e.kind is FileKind.ADD]
    return {
        "kind": snapshot.commit_kind.value,
        "id": snapshot.id,
        "deleted": sorted(e.file.file_name for e in entries if e.kind is FileKind.DELETE),
        "added": sorted(
            (
                e.partition,
                e.bucket,
                e.total_buckets,
                e.file.row_count,
                e.file.file_size,
                e.file.min_sequence_number,
                e.file.max_sequence_number,
                e.file.file_source,
            )
            for e in added
        ),
        "live": len(live_entries(table, snapshot)),
    }


def test_spark_and_driver_side_compaction_make_the_same_plan_and_result(tmp_path: Path) -> None:
    driver_table = build_small_files(tmp_path / "driver" / "db.db" / "t")
    spark_root = tmp_path / "spark" / "db.db" / "t"
    shutil.copytree(driver_table.root, spark_root)
    spark_table = Table.open(str(spark_root))
    plan = plan_data_compaction(driver_table, min_file_count=3)
    same_plan = plan_data_compaction(spark_table, min_file_count=3)
    assert {**plan.to_json(), "table": None} == {**same_plan.to_json(), "table": None}
    assert len(plan.groups) == 6 and plan.files_to_rewrite == 48
    work = tmp_path / "work"

    # A dry run reports the plan and commits nothing (and needs no Spark session).
    dry = run_in_process("compact_data", str(spark_root), "--min-file-count", "3", "--dry-run", work_dir=work)
    assert dry.returncode == 0 and dry.result is not None, dry.describe()
    assert (dry.result["dryRun"], dry.result["snapshotId"], dry.result["groups"]) == (True, None, 6)
    assert {**dry.result["plan"], "table": None} == {**plan.to_json(), "table": None}
    assert spark_table.snapshot_manager.latest_snapshot_id() == 8

    # The real run, with the package only in a --py-files zip.
    script = tmp_path / "job" / "compact_data.py"
    script.parent.mkdir()
    shutil.copy(job_path("compact_data"), script)
    spark = run_job(
        "compact_data", str(spark_root), "--min-file-count", "3", work_dir=work,
        py_files=py_files_zip(str(tmp_path / "zip")), script=str(script), python=isolated_python(tmp_path),
    )  # fmt: skip
    assert spark.returncode == 0 and spark.result is not None, spark.describe()
    driver = compact_data(driver_table, min_file_count=3).to_json()

    compared = ("snapshotBefore", "snapshotId", "groups", "filesRewritten", "filesWritten", "bytesRewritten",
                "bytesWritten", "rowsRewritten")  # fmt: skip
    assert {k: spark.result[k] for k in compared} == {k: driver[k] for k in compared}
    assert (spark.result["job"], spark.result["mode"], spark.result["dryRun"]) == (
        "compact_data",
        "spark",
        False,
    )
    assert driver["filesWritten"] == 6 and driver["snapshotId"] == 9
    spark_summary, driver_summary = (
        compact_snapshot_summary(spark_table),
        compact_snapshot_summary(driver_table),
    )
    assert spark_summary == driver_summary
    assert spark_summary["deleted"] == sorted(e.file.file_name for g in plan.groups for e in g.entries)
    assert spark_summary["kind"] == "COMPACT" and spark_summary["live"] == 6

    # Same rows in fewer files, read by pypaimon, before and after, in both copies.
    before, after_spark, after_driver = run_oracle_batch(
        [["read", str(spark_root), "--snapshot", "8"], ["read", str(spark_root)], ["read", driver_table.root]]
    )
    expected = expected_rows(source_table(0, 3200))
    assert before == expected and after_spark == expected and after_driver == expected


def test_job_errors_map_to_the_cli_exit_codes_through_spark_submit(tmp_path: Path) -> None:
    missing = run_job("compact_data", str(tmp_path / "no-table"), work_dir=tmp_path / "work")
    assert missing.returncode == 3 and missing.result is None, missing.describe()
    [line] = missing.error_lines
    assert line.startswith("lakeformat-job: error: ") and "no Paimon or Iceberg table here" in line
