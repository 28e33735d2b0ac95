"""Hadoop-layout commits: version files and hint, concurrency, stale hints, codecs, read-only and v3."""

from __future__ import annotations

import datetime
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.update import SetPropertiesUpdate, UpgradeFormatVersionUpdate

from airflow_lakeformat.core.errors import TableNotFoundError, UnsupportedFormatError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.errors import (
    IcebergTableNotFoundError,
    ReadOnlyTableError,
    UnsupportedWriteVersionError,
)
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.io import FileIO
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)


def metadata_names(root: Path) -> list[str]:
    return sorted(
        n for n in os.listdir(root / "metadata") if n.endswith(".metadata.json") or ".metadata." in n
    )


def make(root: Path, **properties: str) -> None:
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC, properties=properties)


def count_rows(root: Path) -> int:
    return open_path_table(str(root)).table.scan().to_arrow().num_rows


def test_commits_publish_consecutive_versions_and_hint(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root)
    assert metadata_names(root) == ["v1.metadata.json"]
    assert (root / "metadata" / "version-hint.text").read_text() == "1"
    table = open_path_table(str(root))
    write.append(table, rows([1, 2], "a", DAY))
    write.append(table, rows([3], "b", DAY))
    assert metadata_names(root) == ["v1.metadata.json", "v2.metadata.json", "v3.metadata.json"]
    assert (root / "metadata" / "version-hint.text").read_text() == "3"
    reopened = open_path_table(str(root))
    assert reopened.metadata_location == str(root / "metadata" / "v3.metadata.json")
    assert [e.metadata_file for e in reopened.metadata.metadata_log] == [
        str(root / "metadata" / "v1.metadata.json"),
        str(root / "metadata" / "v2.metadata.json"),
    ]
    # written exactly as pyiceberg serialises (ToOutputFile.table_metadata)
    written = (root / "metadata" / "v3.metadata.json").read_bytes()
    assert written == reopened.metadata.model_dump_json(exclude_none=True).encode()
    assert count_rows(root) == 3


def test_concurrent_commit_is_refused_by_exclusive_create_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writer A publishes v3 between writer B's read of v2 and B's create of v3 (a real race, made
    deterministic): B's create is refused, B's retry re-reads v3 and lands at v4, nothing is lost."""
    root = tmp_path / "t"
    make(root)
    write.append(open_path_table(str(root)), rows([1], "a", DAY))  # v2
    a = open_path_table(str(root))
    b = open_path_table(str(root))  # same base (v2) as a
    creates: list[tuple[str, str]] = []
    race = {"armed": True}
    snapshots: dict[str, int] = {}
    original = FileIO.create_exclusive

    def racing(self: FileIO, path: str, data: bytes) -> None:
        if race["armed"]:
            race["armed"] = False
            snapshots["a"] = write.append(a, rows([10, 11], "a", DAY))  # A wins v3 now
        try:
            original(self, path, data)
        except FileExistsError:
            creates.append((os.path.basename(path), "refused"))
            raise
        creates.append((os.path.basename(path), "created"))

    monkeypatch.setattr(FileIO, "create_exclusive", racing)
    snapshots["b"] = write.append(b, rows([20], "b", DAY))
    assert creates == [
        ("v3.metadata.json", "created"),  # A
        ("v3.metadata.json", "refused"),  # B's first attempt, prepared on v2
        ("v4.metadata.json", "created"),  # B's retry on v3
    ]
    assert (root / "metadata" / "version-hint.text").read_text() == "4"
    final = open_path_table(str(root))
    assert final.metadata.current_snapshot_id == snapshots["b"]
    parent = final.metadata.snapshot_by_id(snapshots["b"])
    assert parent is not None and parent.parent_snapshot_id == snapshots["a"]
    assert sorted(final.table.scan().to_arrow().column("id").to_pylist()) == [1, 10, 11, 20]
    assert len(files_document(final)["files"]) == 3


@pytest.mark.parametrize("hint", ["1", "garbage", None, "v1", "v2.metadata.json"])
def test_stale_missing_or_garbage_hint_finds_the_latest_version_and_commits_after_it(
    tmp_path: Path, hint: str | None
) -> None:
    root = tmp_path / "t"
    make(root)
    table = open_path_table(str(root))
    write.append(table, rows([1], "a", DAY))
    write.append(table, rows([2], "a", DAY))  # v3
    hint_file = root / "metadata" / "version-hint.text"
    if hint is None:
        hint_file.unlink()
    else:
        hint_file.write_text(hint)
    stale = open_path_table(str(root))
    assert stale.metadata_location.endswith("v3.metadata.json")
    write.append(stale, rows([3], "b", DAY))
    assert metadata_names(root)[-1] == "v4.metadata.json"
    assert hint_file.read_text() == "4"
    assert count_rows(root) == 3


def test_hint_pointing_past_the_last_version_falls_back_to_listing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root)
    (root / "metadata" / "version-hint.text").write_text("9")
    assert open_path_table(str(root)).metadata_location.endswith("v1.metadata.json")


def test_gzip_codec_writes_gz_metadata_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root, **{"write.metadata.compression-codec": "gzip"})
    table = open_path_table(str(root))
    write.append(table, rows([1], "a", DAY))
    assert metadata_names(root) == ["v1.gz.metadata.json", "v2.gz.metadata.json"]
    data = (root / "metadata" / "v2.gz.metadata.json").read_bytes()
    assert data[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(data))["format-version"] == 2
    assert count_rows(root) == 1


def test_unknown_metadata_codec_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match="compression-codec"):
        make(tmp_path / "t", **{"write.metadata.compression-codec": "zstd"})
    assert not (tmp_path / "t" / "metadata").exists() or metadata_names(tmp_path / "t") == []


def test_create_over_an_existing_table_fails(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root)
    with pytest.raises(Exception, match="already exists"):
        make(root)
    assert metadata_names(root) == ["v1.metadata.json"]


def test_metadata_json_path_is_read_only(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root)
    table = open_path_table(str(root))
    write.append(table, rows([1], "a", DAY))
    write.append(table, rows([2], "a", DAY))
    v2 = open_path_table(str(root / "metadata" / "v2.metadata.json"))
    assert v2.read_only
    assert v2.metadata.current_snapshot_id != table.metadata.current_snapshot_id
    assert len(files_document(v2)["files"]) == 1 and len(files_document(table)["files"]) == 2
    with pytest.raises(ReadOnlyTableError, match=r"v2\.metadata\.json"):
        write.append(v2, rows([3], "a", DAY))
    with pytest.raises(ReadOnlyTableError):
        v2.table.append(rows([3], "a", DAY))  # pyiceberg's own commit path reaches our refusing catalog
    assert metadata_names(root)[-1] == "v3.metadata.json"


def _as_v3(metadata: dict[str, Any]) -> dict[str, Any]:
    return {**metadata, "format-version": 3, "next-row-id": 0}


def test_v3_tables_are_readable_but_refused_for_writing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    with pytest.raises(UnsupportedWriteVersionError, match="format-version 3"):
        make(root, **{"format-version": "3"})
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    with pytest.raises(NotImplementedError):  # pyiceberg 0.12 cannot even write v3 metadata
        catalog.create_table("db.t", schema=SCHEMA, properties={"format-version": "3"})

    make(root)
    write.append(open_path_table(str(root)), rows([1], "a", DAY))
    v2 = json.loads((root / "metadata" / "v2.metadata.json").read_text())
    (root / "metadata" / "v3.metadata.json").write_text(json.dumps(_as_v3(v2)))
    table = open_path_table(str(root))
    assert table.format_version == 3
    assert [f["path"] for f in files_document(table)["files"]] == [
        f["path"]
        for f in files_document(open_path_table(str(root / "metadata" / "v2.metadata.json")))["files"]
    ]
    with pytest.raises(UnsupportedWriteVersionError):
        write.append(table, rows([2], "a", DAY))
    with pytest.raises(UnsupportedWriteVersionError):  # the catalog itself refuses, whoever calls it
        table.table.catalog.commit_table(table.table, (), (SetPropertiesUpdate(updates={"k": "v"}),))
    assert metadata_names(root)[-1] == "v3.metadata.json"


def test_upgrade_to_v3_is_refused_before_anything_is_published(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make(root)
    table = open_path_table(str(root))
    with pytest.raises(ValueError, match="version: 3"):  # pyiceberg's own API refuses first
        table.table.transaction().upgrade_table_version(3)
    with pytest.raises(ValueError, match="version: 3"):  # so does its metadata update, used by our catalog
        table.table.catalog.commit_table(table.table, (), (UpgradeFormatVersionUpdate(format_version=3),))
    assert metadata_names(root) == ["v1.metadata.json"]


def test_missing_tables_raise_table_not_found(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "absent", tmp_path / "absent" / "v1.metadata.json"):
        with pytest.raises(IcebergTableNotFoundError) as info:
            open_path_table(str(path))
        assert isinstance(info.value, TableNotFoundError) and isinstance(info.value, FileNotFoundError)
        assert str(path) in str(info.value)
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/c.db", "warehouse": f"file://{tmp_path}/wh"}
    SqlCatalog("c", **properties).create_namespace("db")
    with pytest.raises(IcebergTableNotFoundError, match=r"db\.nope"):
        open_catalog_table("db.nope", catalog_name="c", catalog_properties=properties)
