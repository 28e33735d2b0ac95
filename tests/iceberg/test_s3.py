"""A Hadoop-layout table on S3 (a real SeaweedFS server): create, append twice, read back."""

from __future__ import annotations

import datetime

import pytest

from airflow_lakeformat.core.formats import detect_format
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_document
from airflow_lakeformat.core.iceberg.metadata.snapshots import snapshots_document
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.io import FileIO
from tests.iceberg.helpers import document_files, pyiceberg_files
from tests.iceberg.scenarios import SCHEMA, SPEC, rows
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.s3
DAY = datetime.date(2024, 1, 1)


def test_hadoop_table_on_s3(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    options = {
        "key": seaweedfs.access_key,
        "secret": seaweedfs.secret_key,
        "endpoint_url": seaweedfs.endpoint_url,
        "client_kwargs": {"region_name": seaweedfs.region},
    }
    root = f"{s3_bucket}/warehouse/events"
    HadoopLayoutCatalog(storage_options=options).create_table(root, schema=SCHEMA, partition_spec=SPEC)
    table = open_path_table(root, options)
    first = write.append(table, rows([1, 2], "a", DAY))
    second = write.append(open_path_table(root, options), rows([3], "b", DAY))

    fs = seaweedfs.fs()
    metadata_dir = f"{root.removeprefix('s3://')}/metadata"
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(metadata_dir) if p.endswith(".metadata.json"))
    assert names == ["v1.metadata.json", "v2.metadata.json", "v3.metadata.json"]
    assert fs.cat_file(f"{metadata_dir}/version-hint.text") == b"3"

    reopened = open_path_table(root, options)
    assert reopened.metadata_location == f"{root}/metadata/v3.metadata.json"
    assert [s["id"] for s in snapshots_document(reopened)["snapshots"]] == [first, second]
    doc = files_document(reopened)
    assert all(f["path"].startswith(f"{root}/data/") for f in doc["files"])
    assert document_files(doc) == pyiceberg_files(reopened.table, second)
    assert sum(f["recordCount"] for f in doc["files"]) == 3
    assert len(files_document(reopened, snapshot_id=first)["files"]) == 1
    for f in doc["files"]:
        assert fs.size(f["path"].removeprefix("s3://")) == f["fileSize"]
    assert sorted(reopened.table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert inspect_document(reopened)["statistics"]["dataFileCount"] == 2
    io, _ = FileIO.for_uri(root, options)
    assert detect_format(root, io) == "iceberg"
    with pytest.raises(FileExistsError):  # the primitive the catalog's commits rely on, on this server
        io.create_exclusive(f"{metadata_dir}/v3.metadata.json", b"{}")
    assert fs.cat_file(f"{metadata_dir}/v3.metadata.json") != b"{}"
    # without a region option: pyiceberg's FileIO must not ask AWS where the bucket is (it gets us-east-1)
    no_region = {
        "key": seaweedfs.access_key,
        "secret": seaweedfs.secret_key,
        "endpoint_url": seaweedfs.endpoint_url,
    }
    assert document_files(files_document(open_path_table(root, no_region))) == document_files(doc)
