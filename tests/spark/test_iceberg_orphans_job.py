"""The ``remove_orphan_files`` Spark job on Iceberg tables, through a real ``spark-submit`` (local[2]); dry runs
through the job's ``main`` on the process's shared ``local[2]`` session (``tests/spark/conftest.py``).

Every run is compared with the in-process operation (``core/iceberg/maintenance/orphans.py``): on the same table for dry
runs, and on an identical table built alongside (same history, planted files, ages) for real runs, whose
remaining files must match, path for path relative to the table root.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.spark.deleting import FAIL_AFTER_DELETES_ENV
from airflow_lakeformat.spark.jobs import remove_orphan_files as orphan_job
from tests.iceberg.orphan_support import build_planted, files_under
from tests.support.seaweedfs import SeaweedFSServer
from tests.support.spark import SparkRun, run_in_process, run_job

pytestmark = pytest.mark.spark

# What an in-process and a Spark run may differ in (the cutoff is "now" of each run).
VOLATILE = frozenset(
    {
        "table",
        "durationSeconds",
        "sessionSeconds",
        "job",
        "mode",
        "cutoff",
        "decisions",
        "locations",
        "report",
    }
)


def comparable(document: dict[str, Any], root: str) -> dict[str, Any]:
    kept = {k: v for k, v in document.items() if k not in VOLATILE}
    kept["orphanPaths"] = sorted(p.removeprefix(root) for p in document["orphanPaths"])
    return kept


def ok(run: SparkRun) -> dict[str, Any]:
    assert run.returncode == 0 and run.result is not None, run.describe()
    assert run.result["job"] == "remove_orphan_files" and run.result["mode"] == "spark"
    return run.result


def assert_intact(root: Path) -> None:
    table = open_path_table(str(root))
    for snapshot in table.metadata.snapshots:
        assert os.path.exists(snapshot.manifest_list.removeprefix("file:"))
        for f in files_document(table, snapshot_id=snapshot.snapshot_id)["files"]:
            assert os.path.exists(f["path"].removeprefix("file:")), f["path"]


def test_refusals_end_before_a_session_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted = build_planted(tmp_path)
    assert orphan_job.main(["--table", str(planted.root), "--older-than", "2 h"]) == 9
    assert "under 24 h" in capsys.readouterr().err
    with planted.table.table.transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})
    assert orphan_job.main(["--table", str(planted.root)]) == 9
    assert "gc.enabled" in capsys.readouterr().err
    assert planted.old_orphans <= files_under(tmp_path)


@pytest.mark.usefixtures("spark")
def test_job_matches_the_in_process_run_and_converges_after_an_executor_failure(tmp_path: Path) -> None:
    spark_side = build_planted(tmp_path / "spark")
    core_side = build_planted(tmp_path / "core")
    work = tmp_path / "work"
    root = str(spark_side.root)
    spark_before, core_before = files_under(tmp_path / "spark"), files_under(tmp_path / "core")
    expected_spark = spark_side.expected()

    dry = ok(run_in_process("remove_orphan_files", root, "--dry-run", work_dir=work))
    core_dry = remove_orphan_files(open_path_table(root)).to_json()
    assert comparable(dry, root) == comparable(core_dry, root)
    assert set(dry["orphanPaths"]) == spark_side.expected() and dry["files"]
    assert spark_side.old_orphans <= files_under(tmp_path / "spark")

    # An executor dies after two deletes: the job fails with the files it did not reach still there ...
    failed = run_job(
        "remove_orphan_files", root, "--parallelism", "1", work_dir=work, env={FAIL_AFTER_DELETES_ENV: "2"}
    )
    assert failed.returncode != 0 and failed.result is None, failed.describe()
    assert len(spark_side.expected() & files_under(tmp_path / "spark")) == len(spark_side.expected()) - 2
    # ... and a re-run finishes the work: the same files remain as after one in-process run.
    ok(run_job("remove_orphan_files", root, work_dir=work))
    expected_core = core_side.expected()
    core = remove_orphan_files(open_path_table(str(core_side.root)), dry_run=False).to_json()
    assert set(core["orphanPaths"]) == expected_core
    # Table file names hold random UUIDs: compare what each run removed, relative to its root.
    spark_removed = spark_before - files_under(tmp_path / "spark")
    core_removed = core_before - files_under(tmp_path / "core")
    assert spark_removed == expected_spark and core_removed == expected_core
    assert {p.removeprefix(str(spark_side.root)) for p in spark_removed} == {
        p.removeprefix(str(core_side.root)) for p in core_removed
    }
    assert spark_side.fresh_orphans | spark_side.never <= files_under(tmp_path / "spark")
    assert_intact(spark_side.root)
    again = ok(run_in_process("remove_orphan_files", root, "--dry-run", work_dir=work))
    assert again["orphans"] == 0


@pytest.mark.usefixtures("spark")
@pytest.mark.s3
def test_job_on_s3_matches_the_in_process_run(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    from tests.iceberg.test_orphans_s3 import S3Planted

    planted = S3Planted(seaweedfs, s3_bucket)
    options = planted.options
    time.sleep(1.1)  # S3 objects cannot be back-dated: with a 1 s limit everything above is a candidate
    args = ("--older-than", "1s", "--allow-short-older-than")
    dry = ok(
        run_in_process(
            "remove_orphan_files",
            planted.root,
            *args,
            "--dry-run",
            work_dir=tmp_path,
            storage_options=options,
        )
    )
    core_dry = remove_orphan_files(
        planted.open(), older_than=timedelta(seconds=1), allow_short_older_than=True
    ).to_json()
    assert comparable(dry, planted.root) == comparable(core_dry, planted.root)
    assert set(dry["orphanPaths"]) == {f"s3://{k}" for k in planted.old | planted.fresh}

    before = planted.objects()
    run = run_job("remove_orphan_files", planted.root, *args, work_dir=tmp_path, storage_options=options)
    assert options["secret"] not in " ".join(run.command)
    wet = ok(run)
    assert wet["orphans"] == len(planted.old | planted.fresh) and not wet["dryRun"]
    assert planted.objects() == before - planted.old - planted.fresh
    assert planted.s3a_key in planted.objects() and planted.never <= planted.objects()
    assert sorted(planted.open().table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 50, 51]
