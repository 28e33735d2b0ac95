"""``write`` then ``compact_data`` on a SeaweedFS S3 table through real ``spark-submit`` runs.

Spark has no S3 connector here, so the write job reads the ``s3://`` source in Python on the
executors. Credentials reach the jobs only through ``$LAKEFORMAT_STORAGE_OPTIONS``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from tests.support.pypaimon import run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer
from tests.support.spark import FIELDS, expected_rows, run_job, source_table

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.interop, pytest.mark.slow]


def test_write_and_compact_data_jobs_on_an_s3_table(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    options = seaweedfs.storage_options()
    uri = f"{s3_bucket}/wh/db.db/t"
    table = create_table(
        uri, schema_from_fields(FIELDS, ["dt"], options={"target-file-size": "64 kb"}), options
    )
    committer = Committer(table, "seed")
    seed = [source_table(i * 100, 100) for i in range(6)]
    for rows in seed:
        committer.commit(write_data_files(table, rows))  # snapshots 1-6: 18 tiny files
    fs = seaweedfs.fs()
    bucket = s3_bucket.removeprefix("s3://")
    source = [source_table(10_000, 4000), source_table(20_000, 4000), source_table(30_000, 100)]
    for index, rows in enumerate(source):
        with fs.open(f"{bucket}/incoming/part-{index}.parquet", "wb") as handle:
            pq.write_table(rows, handle)
    fs.pipe_file(f"{bucket}/incoming/_SUCCESS", b"")  # marker files are skipped, as Spark skips them
    work = tmp_path / "work"

    write = run_job(
        "write", uri, "--source", f"{s3_bucket}/incoming", "--source-format", "parquet",
        "--commit-user", "s3-writer", "--commit-identifier", "1", work_dir=work, storage_options=options,
    )  # fmt: skip
    assert write.returncode == 0 and write.result is not None, write.describe()
    assert seaweedfs.secret_key not in " ".join(write.command)
    assert (write.result["snapshotId"], write.result["rowsWritten"]) == (7, 8100)

    table = Table.open(uri, options)
    files_before = len(live_entries(table, table.snapshot_manager.snapshot(7)))
    compact = run_job("compact_data", uri, "--min-file-count", "3", work_dir=work, storage_options=options)
    assert compact.returncode == 0 and compact.result is not None, compact.describe()
    assert seaweedfs.secret_key not in " ".join(compact.command)
    result = compact.result
    assert (result["snapshotBefore"], result["snapshotId"], result["dryRun"]) == (7, 8, False)
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.commit_kind.value == "COMPACT"
    files_after = len(live_entries(table, latest))
    assert files_after == files_before - result["filesRewritten"] + result["filesWritten"] < files_before

    local = tmp_path / "copy" / "db.db" / "t"
    table.io.fs.get(table.root + "/", str(local) + "/", recursive=True)
    at_6, at_7, at_8 = run_oracle_batch([["read", str(local), "--snapshot", str(i)] for i in (6, 7, 8)])
    assert at_6 == expected_rows(pa.concat_tables(seed))
    assert at_7 == expected_rows(pa.concat_tables(seed + source))
    assert at_8 == at_7
