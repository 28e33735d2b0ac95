"""Iceberg data compaction on SeaweedFS S3 as on local disk: the same plan, the same rows, nothing left over.

The compose stack runs the Iceberg maintenance DAG's compact_data on S3; this is the same operation in-process
against the shared SeaweedFS server, with the deletes applied and a refused run leaving no object behind.
"""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.typedef import Record

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files
from tests.iceberg.scenarios import SCHEMA, SPEC, rows
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.s3
DAY = datetime.date(2024, 1, 1)


@pytest.mark.parametrize("partitioned", [True, False], ids=["by-cat", "unpartitioned"])
def test_compaction_on_s3_keeps_every_live_row(
    seaweedfs: SeaweedFSServer, s3_bucket: str, partitioned: bool
) -> None:
    options = {
        "key": seaweedfs.access_key,
        "secret": seaweedfs.secret_key,
        "endpoint_url": seaweedfs.endpoint_url,
        "client_kwargs": {"region_name": seaweedfs.region},
    }
    root = f"{s3_bucket}/warehouse/compacted-{'by-cat' if partitioned else 'unpartitioned'}"
    spec = SPEC if partitioned else UNPARTITIONED_PARTITION_SPEC
    HadoopLayoutCatalog(storage_options=options).create_table(
        root, schema=SCHEMA, partition_spec=spec, properties={"format-version": "2"}
    )
    table = open_path_table(root, options)
    for first in (0, 2, 4):
        write.append(table, rows([first, first + 1], "a", DAY))
    table.refresh()
    equality = f"{root}/landing/eq.parquet"
    fs = seaweedfs.fs()
    with fs.open(equality.removeprefix("s3://"), "wb") as out:
        pq.write_table(pa.table({"id": pa.array([3], pa.int64())}), out)
    delete = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=equality,
        file_format=FileFormat.PARQUET,
        partition=Record("a") if partitioned else Record(),
        record_count=1,
        file_size_in_bytes=fs.size(equality.removeprefix("s3://")),
        equality_ids=[1],
    )
    delete.spec_id = table.metadata.default_spec_id
    commit_delete_files(table, [delete])

    result = compact_data(open_path_table(root, options), {"min-input-files": "2"})
    assert result.snapshot_id is not None and result.files_rewritten == 3 and result.rows_purged == 1
    reopened = open_path_table(root, options)
    head = reopened.snapshot(ref="main")
    live = [f for f in live_files(reopened, head) if f.content == 0]
    assert len(live) == 1 and live[0].record_count == 5
    data = pa.concat_tables(
        [pq.read_table(fs.open(f.path.removeprefix("s3://"), "rb")) for f in live]
    ).column("id")
    assert sorted(data.to_pylist()) == [0, 1, 2, 4, 5]
    # an unpartitioned table's new file lies straight under data/ (S3 refuses an empty path component)
    assert "//" not in live[0].path.removeprefix("s3://")
