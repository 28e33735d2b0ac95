"""Typed errors for broken tables, and detect_format on Paimon, Iceberg and neither."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pydantic
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import ValidationError as PyIcebergValidationError

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    MissingMetadataError,
    TableNotFoundError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.formats import detect_format
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_document
from airflow_lakeformat.core.iceberg.metadata.live_files import PyIcebergDecoder
from airflow_lakeformat.core.iceberg.metadata.manifests import manifests_document
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import local_path
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)


def two_commit_table(root: Path) -> str:
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC)
    table = open_path_table(str(root))
    write.append(table, rows([1], "a", DAY))
    write.append(table, rows([2], "b", DAY))
    return str(root / "metadata" / "v3.metadata.json")


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        (b"{not json", CorruptMetadataError, "not a valid table metadata JSON"),
        (b"[1, 2]", CorruptMetadataError, "not a JSON object"),
        (b'{"location": "x"}', CorruptMetadataError, "no format-version"),
        (b'{"format-version": 2, "location": "x"}', CorruptMetadataError, "invalid table metadata"),
        (b'{"format-version": 4, "location": "x"}', UnsupportedFormatError, "format-version 4"),
        (b"\x1f\x8b\x08\x00garbage", CorruptMetadataError, "gzip"),
    ],
)
def test_bad_metadata_json_names_the_file(
    tmp_path: Path, content: bytes, error: type[Exception], message: str
) -> None:
    latest = two_commit_table(tmp_path / "t")
    Path(latest).write_bytes(content)
    for uri in (str(tmp_path / "t"), latest):
        with pytest.raises(error, match=message) as info:
            open_path_table(uri)
        assert "v3.metadata.json" in str(info.value)
        assert not isinstance(info.value, pydantic.ValidationError)
        assert not isinstance(info.value, PyIcebergValidationError)


def test_truncated_metadata_json_is_corrupt(tmp_path: Path) -> None:
    latest = Path(two_commit_table(tmp_path / "t"))
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptMetadataError, match=r"v3\.metadata\.json"):
        open_path_table(str(tmp_path / "t"))


def test_corrupt_metadata_behind_a_sql_catalog_is_typed(tmp_path: Path) -> None:
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/wh"}
    catalog = SqlCatalog("c", **properties)
    catalog.create_namespace("db")
    location = catalog.create_table("db.t", schema=SCHEMA).metadata_location
    Path(local_path(location)).write_text("{garbage")
    with pytest.raises(CorruptMetadataError, match=r"db\.t"):
        open_catalog_table("db.t", catalog_name="c", catalog_properties=properties)


def test_missing_manifest_list_and_manifest_name_the_file(tmp_path: Path) -> None:
    two_commit_table(tmp_path / "t")
    table = open_path_table(str(tmp_path / "t"))
    snapshot = table.snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.table.io)
    manifest_path = local_path(manifests[0].manifest_path)
    os.unlink(manifest_path)
    for call in (lambda: files_document(table), lambda: inspect_document(table)):
        with pytest.raises(MissingMetadataError, match=os.path.basename(manifest_path)):
            call()
    with pytest.raises(MissingMetadataError, match=os.path.basename(manifest_path)):
        files_document(table, decoder=PyIcebergDecoder())
    list_path = local_path(snapshot.manifest_list)
    os.unlink(list_path)
    for call in (lambda: files_document(table), lambda: manifests_document(table)):
        with pytest.raises(MissingMetadataError, match=os.path.basename(list_path)) as info:
            call()
        assert isinstance(info.value, FileNotFoundError)


def test_garbage_manifest_and_manifest_list_are_corrupt(tmp_path: Path) -> None:
    two_commit_table(tmp_path / "t")
    table = open_path_table(str(tmp_path / "t"))
    snapshot = table.snapshot()
    assert snapshot is not None
    manifest_path = local_path(snapshot.manifests(table.table.io)[0].manifest_path)
    data = Path(manifest_path).read_bytes()
    Path(manifest_path).write_bytes(data[: len(data) // 2])
    for decoder in (None, PyIcebergDecoder()):
        with pytest.raises(CorruptMetadataError, match=os.path.basename(manifest_path)):
            files_document(table, decoder=decoder)
    Path(manifest_path).write_bytes(b"not avro at all")
    with pytest.raises(CorruptMetadataError, match=os.path.basename(manifest_path)):
        files_document(table)
    list_path = local_path(snapshot.manifest_list)
    Path(list_path).write_bytes(b"Obj\x01garbage")
    with pytest.raises(CorruptMetadataError, match=os.path.basename(list_path)):
        manifests_document(table)


def test_detect_format(tmp_path: Path) -> None:
    latest = two_commit_table(tmp_path / "iceberg")
    assert detect_format(str(tmp_path / "iceberg")) == "iceberg"
    assert detect_format(f"file://{tmp_path}/iceberg") == "iceberg"
    assert detect_format(latest) == "iceberg"
    paimon = tmp_path / "paimon"
    (paimon / "schema").mkdir(parents=True)
    (paimon / "schema" / "schema-0").write_text(json.dumps({"id": 0}))
    assert detect_format(str(paimon)) == "paimon"
    snapshot_only = tmp_path / "paimon2"
    (snapshot_only / "snapshot").mkdir(parents=True)
    assert detect_format(str(snapshot_only)) == "paimon"
    neither = tmp_path / "neither"
    (neither / "metadata").mkdir(parents=True)
    (neither / "metadata" / "notes.txt").write_text("x")
    for path, reason in (
        (neither, "found neither"),
        (tmp_path / "absent", "does not exist"),
        (tmp_path / "absent.metadata.json", "does not exist"),
    ):
        with pytest.raises(TableNotFoundError, match=reason) as info:
            detect_format(str(path))
        assert str(path) in str(info.value)
    with pytest.raises(TableNotFoundError, match="schema/"):
        detect_format(str(neither))
