"""The remove_orphan_files and expire_snapshots Spark jobs, run through a real ``spark-submit`` (local[2]), or,
for dry runs and the orphan runs beside a submitted expiry, through the job's ``main`` on the process's shared
``local[2]`` session (``tests/spark/conftest.py``).

Every job run is compared with the driver-side operation on an identical copy of the table: the
same result document (less the table path, duration, job and mode), the same files left behind.
Each submit costs 15-20 s on two cores, so each test groups its assertions around few runs.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots
from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.spark.deleting import FAIL_AFTER_DELETES_ENV
from airflow_lakeformat.spark.jobs import expire_snapshots as expire_job
from airflow_lakeformat.spark.jobs import remove_orphan_files as orphan_job
from airflow_lakeformat.spark.runtime import ERROR_PREFIX
from tests.support.maintenance import OLD, OLD_ORPHANS, assert_intact, build_history, plant_files, tree
from tests.support.pypaimon import run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer, upload_tree
from tests.support.spark import SparkRun, run_in_process, run_job

pytestmark = pytest.mark.spark

FRESH = ["manifest/manifest-1111-fresh-0", "dt=d0/bucket-0/data-1111-fresh-0.parquet"]
OUTSIDE_LAYOUT = [
    "dt=d0/bucket-0/pack-0.managed.blob",
    "notes/readme.txt",
    "dt=d0/not-a-bucket/data-x.parquet",
]
# What a driver-side and a Spark run may differ in.
VOLATILE = frozenset({"table", "durationSeconds", "sessionSeconds", "job", "mode"})


def _history_with_orphans(root: Path, snapshots: int = 8) -> None:
    """build_history plus a tag, old orphans everywhere, fresh files and files outside the layout."""
    history = build_history(root, snapshots=snapshots)
    history.builder.tag("t3", history.builder.snapshots[2])
    plant_files(root, OLD_ORPHANS, OLD)
    plant_files(root, FRESH, None)
    plant_files(root, OUTSIDE_LAYOUT, OLD)
    (root / "dt=d9" / "bucket-3").mkdir(parents=True)  # an old, empty bucket directory
    os.utime(root / "dt=d9" / "bucket-3", (OLD, OLD))


def _comparable(document: dict[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in document.items() if key not in VOLATILE}
    if "orphanPaths" in out:
        # Each run lists its own copy of the table: the orphans compared relative to it, as a sorted list
        # (the driver-side run names them in listing order, the job by path).
        root = document["table"].rstrip("/") + "/"
        out["orphanPaths"] = sorted(path.removeprefix(root) for path in out["orphanPaths"])
    return out


def _ok(run: SparkRun, job: str) -> dict[str, Any]:
    assert run.returncode == 0 and run.result is not None, run.describe()
    assert run.result["job"] == job and run.result["mode"] == "spark"
    return run.result


def _failed(run: SparkRun, code: int) -> str:
    """The job's one error line. spark-submit's PythonRunner merges the driver's stderr into stdout."""
    assert run.returncode == code, run.describe()
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith(ERROR_PREFIX)]
    assert run.result is None and len(lines) == 1, run.describe()
    return lines[0]


def _copy(source: Path, target: Path) -> Table:
    shutil.copytree(source, target, symlinks=True)
    return Table.open(str(target))


# -- without a Spark session -------------------------------------------------------------------


def test_refusals_and_empty_ranges_end_before_a_session_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_history(tmp_path / "t", snapshots=4)
    before = tree(Table.open(str(tmp_path / "t")))
    assert orphan_job.main(["--table", str(tmp_path / "t"), "--older-than", "59min"]) == 9
    assert "under 1:00:00" in capsys.readouterr().err
    assert orphan_job.main(["--table", str(tmp_path / "nothing")]) == 3
    # The job takes both formats (opened through the facade), so a missing table is named as neither.
    assert "no Paimon or Iceberg table here" in capsys.readouterr().err
    # retain-min above the snapshot count: nothing to expire, the driver-side result without Spark
    result_path = tmp_path / "expire.json"
    code = expire_job.main(
        ["--table", str(tmp_path / "t"), "--retain-min", "10", "--result", str(result_path)]
    )
    assert code == 0, capsys.readouterr().err
    document = json.loads(result_path.read_text())
    core = expire_snapshots(Table.open(str(tmp_path / "t")), dry_run=False, retain_min=10).to_json()
    assert _comparable(document) == _comparable(core) and document["snapshotsExpired"] == []
    # Nothing deleted; the EARLIEST hint written where it was missing, as the driver-side run does.
    assert set(tree(Table.open(str(tmp_path / "t")))) - set(before) == {"snapshot/EARLIEST"}
    assert set(before) <= set(tree(Table.open(str(tmp_path / "t"))))


# -- local tables ------------------------------------------------------------------------------


@pytest.mark.usefixtures("spark")
def test_orphan_job_dry_run_executor_failure_and_rerun_match_the_driver_side_run(tmp_path: Path) -> None:
    _history_with_orphans(tmp_path / "spark")
    spark_table = Table.open(str(tmp_path / "spark"))
    core_table = _copy(tmp_path / "spark", tmp_path / "core")
    before = tree(spark_table)
    work = tmp_path / "work"

    dry = _ok(
        run_in_process("remove_orphan_files", spark_table.uri, "--dry-run", work_dir=work),
        "remove_orphan_files",
    )
    assert tree(spark_table) == before
    core_dry = remove_orphan_files(core_table, dry_run=True).to_json()
    assert _comparable(dry) == _comparable(core_dry)
    assert dry["orphans"] == len(OLD_ORPHANS) and dry["dryRun"] is True
    assert dry["files"] == {
        "data-file": 3,
        "index-file": 1,
        "manifest": 2,
        "stale-temp-file": 2,
        "statistics": 1,
    }

    # One task deletes everything (--parallelism 1) and dies after its third delete.
    crashed = run_job(
        "remove_orphan_files",
        spark_table.uri,
        "--parallelism",
        "1",
        work_dir=work,
        env={FAIL_AFTER_DELETES_ENV: "3"},
    )
    assert "InjectedFailureError" in _failed(crashed, 1)
    gone = set(before) - set(tree(spark_table))
    assert len(gone) == 3 and gone < set(OLD_ORPHANS)
    assert assert_intact(spark_table, from_id=1) == 9  # 8 snapshots and the tag
    assert (tmp_path / "spark" / "dt=d9" / "bucket-3").is_dir()  # directories wait for a clean run

    rerun = _ok(run_job("remove_orphan_files", spark_table.uri, work_dir=work), "remove_orphan_files")
    core = remove_orphan_files(core_table, dry_run=False).to_json()
    assert tree(spark_table) == tree(core_table)
    assert set(before) - set(tree(spark_table)) == set(OLD_ORPHANS)
    # The rerun finds what the crashed run left: three files fewer than a clean run.
    for key in ("filesListed", "candidates", "orphans"):
        assert rerun[key] == core[key] - 3, key
    assert sum(rerun["files"].values()) == 6 and core["files"] == dry["files"]
    same = ("directoriesRemoved", "manifestsRead", "keptByRecheck", "alreadyMissing", "failed")
    assert {k: rerun[k] for k in same} == {k: core[k] for k in same}
    assert rerun["directoriesRemoved"] == 1
    assert not (tmp_path / "spark" / "dt=d9" / "bucket-3").exists()
    assert assert_intact(spark_table, from_id=1) == 9


def test_a_missing_manifest_aborts_the_orphan_job_with_nothing_deleted(tmp_path: Path) -> None:
    _history_with_orphans(tmp_path / "t")
    table = Table.open(str(tmp_path / "t"))
    delta = table.manifest_list(table.snapshot_manager.snapshot(2).delta_manifest_list)
    os.remove(tmp_path / "t" / "manifest" / delta[0].file_name)
    before = tree(table)
    run = run_job("remove_orphan_files", table.uri, work_dir=tmp_path / "work")
    message = _failed(run, 4)
    assert delta[0].file_name in message and "snapshot 2" in message
    assert tree(table) == before


def test_expiry_job_executor_failure_and_rerun_converge_to_the_driver_side_run(tmp_path: Path) -> None:
    history = build_history(tmp_path / "spark", snapshots=15)
    history.builder.tag("keep3", history.builder.snapshots[2])
    spark_table = Table.open(str(tmp_path / "spark"))
    core_table = _copy(tmp_path / "spark", tmp_path / "core")
    before = tree(spark_table)
    args = ("--retain-min", "3", "--older-than", "0s", "--parallelism", "1")
    work = tmp_path / "work"

    crashed = run_job(
        "expire_snapshots", spark_table.uri, *args, work_dir=work, env={FAIL_AFTER_DELETES_ENV: "2"}
    )
    assert "InjectedFailureError" in _failed(crashed, 1)
    gone = set(before) - set(tree(spark_table))
    assert len(gone) == 2 and all("bucket-" in p for p in gone), "only data files go in the data phase"
    assert spark_table.snapshot_manager.earliest_snapshot_id() == 1
    assert assert_intact(spark_table, from_id=13) == 4  # the retained snapshots and the tag

    rerun = _ok(run_job("expire_snapshots", spark_table.uri, *args, work_dir=work), "expire_snapshots")
    core = expire_snapshots(core_table, dry_run=False, retain_min=3, older_than=timedelta(0)).to_json()
    assert tree(spark_table) == tree(core_table)
    assert rerun["snapshotsExpired"] == core["snapshotsExpired"] == list(range(1, 13))
    # The two data files the crashed run deleted are already missing; everything else is the same.
    assert rerun["files"] == core["files"] | {"data-file": core["files"]["data-file"] - 2}
    assert rerun["alreadyMissing"] == 2 and rerun["earliestAfter"] == core["earliestAfter"] == 13
    same = (
        "decisions",
        "warnings",
        "manifestListsRead",
        "manifestsRead",
        "latest",
        "earliestBefore",
        "failed",
    )
    assert {k: rerun[k] for k in same} == {k: core[k] for k in same}
    assert assert_intact(spark_table) == 4


# -- S3 ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("spark")
@pytest.mark.s3
def test_both_jobs_on_s3_match_the_driver_side_runs(
    tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    local = tmp_path / "t"
    _history_with_orphans(local, snapshots=9)
    fs = seaweedfs.fs()
    options = seaweedfs.storage_options()
    upload_tree(fs, local, f"{s3_bucket}/spark/t")
    upload_tree(fs, local, f"{s3_bucket}/core/t")
    spark_table = Table.open(f"{s3_bucket}/spark/t", options)
    core_table = Table.open(f"{s3_bucket}/core/t", options)
    before = tree(spark_table)
    work = tmp_path / "work"

    submitted = run_job(
        "expire_snapshots",
        spark_table.uri,
        "--retain-min",
        "3",
        "--older-than",
        "0s",
        work_dir=work,
        storage_options=options,
    )
    expired = _ok(submitted, "expire_snapshots")
    assert options["secret"] not in " ".join(submitted.command), "secrets never travel in argv"
    core_expired = expire_snapshots(
        core_table, dry_run=False, retain_min=3, older_than=timedelta(0)
    ).to_json()
    assert _comparable(expired) == _comparable(core_expired)
    assert expired["snapshotsExpired"] == list(range(1, 7)) and expired["files"]["data-file"] > 0
    assert tree(spark_table) == tree(core_table)
    assert assert_intact(spark_table) == 4

    # Objects cannot be back-dated on S3: with no age limit every object is a candidate.
    cleaned = _ok(
        run_in_process(
            "remove_orphan_files",
            spark_table.uri,
            "--older-than",
            "0s",
            "--allow-short-older-than",
            work_dir=work,
            storage_options=options,
        ),
        "remove_orphan_files",
    )
    core_cleaned = remove_orphan_files(
        core_table, dry_run=False, older_than=timedelta(0), allow_short_older_than=True
    ).to_json()
    assert _comparable(cleaned) == _comparable(core_cleaned)
    assert cleaned["orphans"] == len(OLD_ORPHANS) + len(FRESH) and cleaned["candidates"] > cleaned["orphans"]
    after = tree(spark_table)
    assert after == tree(core_table)
    removed = set(before) - set(after)
    assert set(OLD_ORPHANS) | set(FRESH) <= removed
    assert not any(p in removed for p in OUTSIDE_LAYOUT)
    assert assert_intact(spark_table) == 4


# -- tables written by pypaimon ------------------------------------------------------------------


@pytest.mark.usefixtures("spark")
@pytest.mark.interop
def test_pypaimon_reads_the_same_rows_after_both_jobs(
    fresh_pypaimon_warehouse: dict[str, Any], tmp_path: Path
) -> None:
    tables = fresh_pypaimon_warehouse["tables"]
    pk = Path(tables["pk_buckets"]["path"])
    tagged = Path(tables["overwrite_tag_consumer"]["path"])
    # Without its consumer the history is free to expire up to the latest snapshot, through the
    # overwrite whose DELETEd files the tag before it still holds.
    (tagged / "consumer" / "consumer-my-consumer").unlink()
    planted = [
        "p=p0/bucket-0/data-0000-orphan-0.parquet",
        "manifest/manifest-0000-orphan-0",
        "snapshot/.tmp-1",
    ]
    plant_files(pk, planted, OLD)
    reads = [["read", pk], ["read", tagged], ["read", tagged, "--tag", "before_overwrite"]]
    reads.append(["read", tagged, "--tag", "after"])
    rows_before = run_oracle_batch(reads)
    core_pk = _copy(pk, tmp_path / "core" / "pk_buckets")
    core_tagged = _copy(tagged, tmp_path / "core" / "overwrite_tag_consumer")
    work = tmp_path / "work"

    cleaned = _ok(
        run_in_process(
            "remove_orphan_files", str(pk), "--older-than", "0s", "--allow-short-older-than", work_dir=work
        ),
        "remove_orphan_files",
    )
    expired = _ok(
        run_job("expire_snapshots", str(tagged), "--retain-min", "1", "--older-than", "0s", work_dir=work),
        "expire_snapshots",
    )

    core_cleaned = remove_orphan_files(
        core_pk, dry_run=False, older_than=timedelta(0), allow_short_older_than=True
    ).to_json()
    core_expired = expire_snapshots(core_tagged, dry_run=False, retain_min=1, older_than=timedelta(0))
    assert _comparable(cleaned) == _comparable(core_cleaned)
    assert cleaned["orphans"] == len(planted) and cleaned["candidates"] > 20
    assert _comparable(expired) == _comparable(core_expired.to_json())
    assert expired["snapshotsExpired"] == [1, 2, 3, 4]
    assert core_expired.plan.kept_by_tags_or_branches > 0  # the overwrite's files live on in the tag
    assert tree(Table.open(str(pk))) == tree(core_pk)
    assert tree(Table.open(str(tagged))) == tree(core_tagged)
    assert run_oracle_batch(reads) == rows_before
