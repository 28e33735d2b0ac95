"""The ``expire_snapshots`` Spark job on Iceberg tables, through a real ``spark-submit`` (local[2]); dry runs
through the job's ``main`` on the process's shared ``local[2]`` session (``tests/spark/conftest.py``).

Dry runs are compared with the in-process operation (``core/iceberg/maintenance/expiry.py``) on the same table; real runs
with the in-process run on a table with the same history built alongside: the same files by kind, the same
snapshots and refs left, every remaining file intact, nothing else left.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots
from airflow_lakeformat.spark.deleting import FAIL_AFTER_DELETES_ENV
from airflow_lakeformat.spark.jobs import expire_snapshots as expire_job
from tests.iceberg import expiry_support as support
from tests.support.seaweedfs import SeaweedFSServer
from tests.support.spark import SparkRun, run_in_process, run_job

pytestmark = pytest.mark.spark

# What an in-process and a Spark run of the same plan may differ in.
VOLATILE = frozenset(
    {"table", "durationSeconds", "sessionSeconds", "job", "mode", "options", "metadataLocation"}
)
# ... and runs on two tables with the same history (snapshot ids and paths are random).
PER_TABLE = VOLATILE | {"snapshotsExpired", "refsRemoved", "decisions", "bytes", "bytesFreed"}


def comparable(document: dict[str, Any], volatile: frozenset[str] = VOLATILE) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in volatile}


def ok(run: SparkRun) -> dict[str, Any]:
    assert run.returncode == 0 and run.result is not None, run.describe()
    assert run.result["job"] == "expire_snapshots" and run.result["mode"] == "spark"
    return run.result


def build(root: Path) -> tuple[str, list[int]]:
    table = support.create(root)
    ids = support.history(table)
    table.table.manage_snapshots().create_tag(ids[0], "old", max_ref_age_ms=1).commit()
    return table.root, ids


def test_refusals_end_before_a_session_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = build(tmp_path)
    assert expire_job.main(["--table", root, "--max-deletes", "3"]) == 2  # a usage mistake (UsageError)
    assert "max_deletes: only for Paimon tables" in capsys.readouterr().err
    assert expire_job.main(["--table", root, "--retain-last", "0"]) == 9
    assert "at least 1" in capsys.readouterr().err
    support.assert_converged(open_path_table(root))


@pytest.mark.usefixtures("spark")
def test_job_matches_the_in_process_run_and_converges_after_an_executor_failure(tmp_path: Path) -> None:
    spark_root, spark_ids = build(tmp_path / "spark")
    core_root, core_ids = build(tmp_path / "core")
    work = tmp_path / "work"
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    args = ["--older-than", future, "--retain-last", "1"]

    dry = ok(run_in_process("expire_snapshots", spark_root, *args, "--dry-run", work_dir=work))
    core_dry = expire_snapshots(open_path_table(spark_root), dry_run=True, older_than=future, retain_last=1)
    assert comparable(dry) == comparable(core_dry.to_json())
    assert dry["files"]["data-file"] == 1 and dry["refsRemoved"] == {"old": spark_ids[0]}

    # An executor dies after two deletes (one task per phase): the job fails, the journal stays ...
    failed = run_job(
        "expire_snapshots",
        spark_root,
        *args,
        "--parallelism",
        "1",
        work_dir=work,
        env={FAIL_AFTER_DELETES_ENV: "2"},
    )
    assert failed.returncode != 0, failed.describe()
    table = open_path_table(spark_root)
    assert [s.snapshot_id for s in table.metadata.snapshots] == [spark_ids[-1]]
    assert support.journals(table)
    # ... and a re-run finishes the deletes from it.
    rerun = ok(run_job("expire_snapshots", spark_root, *args, work_dir=work))
    assert rerun["recoveredRuns"] and rerun["snapshotsExpired"] == []
    support.assert_converged(open_path_table(spark_root))

    # The in-process run on the table with the same history deletes the same files by kind.
    core = expire_snapshots(open_path_table(core_root), dry_run=False, older_than=future, retain_last=1)
    assert core.to_json()["files"] == dry["files"]
    assert [s.snapshot_id for s in open_path_table(core_root).metadata.snapshots] == [core_ids[-1]]
    support.assert_converged(open_path_table(core_root))
    assert support.table_rows(open_path_table(spark_root)) == support.table_rows(open_path_table(core_root))


def test_real_job_run_equals_an_in_process_run(tmp_path: Path) -> None:
    spark_root, _ = build(tmp_path / "spark")
    core_root, _ = build(tmp_path / "core")
    work = tmp_path / "work"
    spark = ok(
        run_job("expire_snapshots", spark_root, "--older-than", "0 ms", "--retain-min", "2", work_dir=work)
    )
    core = expire_snapshots(open_path_table(core_root), dry_run=False, older_than="0 ms", retain_last=2)
    assert comparable(spark, PER_TABLE) == comparable(core.to_json(), PER_TABLE)
    assert len(spark["snapshotsExpired"]) == len(core.plan.expired) == 3
    for root in (spark_root, core_root):
        support.assert_converged(open_path_table(root))


@pytest.mark.usefixtures("spark")
@pytest.mark.s3
def test_job_on_s3_matches_the_in_process_run(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    options = {
        "key": seaweedfs.access_key,
        "secret": seaweedfs.secret_key,
        "endpoint_url": seaweedfs.endpoint_url,
        "client_kwargs": {"region_name": seaweedfs.region},
    }
    table = support.create(f"{s3_bucket}/wh", storage_options=options)
    ids = support.history(table)
    uri = f"s3://{table.root}"
    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    args = ("--older-than", future, "--retain-last", "1")
    dry = ok(
        run_in_process(
            "expire_snapshots", uri, *args, "--dry-run", work_dir=tmp_path, storage_options=options
        )
    )
    core_dry = expire_snapshots(open_path_table(uri, options), dry_run=True, older_than=future, retain_last=1)
    assert comparable(dry) == comparable(core_dry.to_json()) and dry["files"]["data-file"] == 1
    before = support.stored_files(table)
    run = run_job("expire_snapshots", uri, *args, work_dir=tmp_path, storage_options=options)
    assert options["secret"] not in " ".join(run.command)
    wet = ok(run)
    assert not wet["dryRun"] and wet["files"] == dry["files"]
    after = open_path_table(uri, options)
    assert [s.snapshot_id for s in after.metadata.snapshots] == [ids[-1]]
    assert before - support.stored_files(after) == {r.path for r in core_dry.plan.deletions}
    support.assert_converged(after)
