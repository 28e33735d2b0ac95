"""Iceberg orphan cleanup on S3 (a real SeaweedFS server): prefix boundary, ``s3a://`` spellings,
authority mismatches, corrupt metadata, a concurrent commit, and bulk deletes.

S3 modification times are the server's, so "old" and "fresh" are told apart by a split time: files written
before ``split`` are old for a clock that reads ``split + older_than``; files written 1.5 s after it are fresh.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import (
    DEFAULT_OLDER_THAN,
    PrefixMismatchError,
    plan_orphan_cleanup,
)
from airflow_lakeformat.core.iceberg.maintenance.orphans import execute_orphan_cleanup, remove_orphan_files
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.orphan_support import DAY
from tests.iceberg.scenarios import SCHEMA, SPEC, rows
from tests.support.seaweedfs import SeaweedFSServer

pytestmark = pytest.mark.s3


def options_for(server: SeaweedFSServer) -> dict[str, Any]:
    return {
        "key": server.access_key,
        "secret": server.secret_key,
        "endpoint_url": server.endpoint_url,
        "client_kwargs": {"region_name": server.region},
    }


def parquet_bytes(ids: list[int], cat: str) -> bytes:
    sink = io.BytesIO()
    pq.write_table(rows(ids, cat, DAY), sink)
    return sink.getvalue()


class S3Planted:
    """``s3://<bucket>/wh/events`` with appends, a file registered as ``s3a://``, old and fresh orphans,
    hidden files, and a sibling table ``events_v2`` plus a key ``wh/events.bak`` sharing the prefix."""

    def __init__(self, server: SeaweedFSServer, bucket_uri: str) -> None:
        self.fs = server.fs()
        self.options = options_for(server)
        self.bucket = bucket_uri.removeprefix("s3://")
        self.root = f"{bucket_uri}/wh/events"
        self.key_root = f"{self.bucket}/wh/events"
        HadoopLayoutCatalog(storage_options=self.options).create_table(
            self.root, schema=SCHEMA, partition_spec=SPEC, properties={"format-version": "2"}
        )
        table = self.open()
        mapping = table.metadata.schema().name_mapping.model_dump_json()
        with table.table.transaction() as tx:  # registered files carry no field ids
            tx.set_properties({"schema.name-mapping.default": mapping})
        for i in range(3):
            write.append(table, rows([i], "a", DAY))
        self.s3a_key = f"{self.key_root}/data/cat=a/s3a-written.parquet"
        self.fs.pipe_file(self.s3a_key, parquet_bytes([50, 51], "a"))
        self.register(table, f"s3a://{self.s3a_key}", self.s3a_key)
        self.old = {
            f"{self.key_root}/data/orphan-0.parquet",
            f"{self.key_root}/data/cat=a/orphan-1.parquet",
            f"{self.key_root}/metadata/0f1e2d3c-m0.avro",
            f"{self.key_root}/metadata/snap-4242-0-0f1e2d3c.avro",
        }
        self.never = {
            f"{self.key_root}/data/_SUCCESS",
            f"{self.key_root}/data/_temporary/0/part.parquet",
            f"{self.bucket}/wh/events_v2/data/sibling.parquet",
            f"{self.bucket}/wh/events_v2/metadata/v1.metadata.json",
            f"{self.bucket}/wh/events.bak",
        }
        for key in sorted(self.old | self.never):
            self.fs.pipe_file(key, b"orphan")
        time.sleep(1.1)
        self.split = time.time()
        time.sleep(1.5)
        self.fresh = {f"{self.key_root}/data/fresh.parquet", f"{self.key_root}/metadata/fresh-m0.avro"}
        for key in sorted(self.fresh):
            self.fs.pipe_file(key, b"fresh")

    def open(self) -> IcebergTable:
        return open_path_table(self.root, self.options)

    def clock(self) -> Callable[[], float]:
        return lambda: self.split + DEFAULT_OLDER_THAN.total_seconds()

    def register(self, table: IcebergTable, spelled: str, key: str) -> int:
        df = DataFile.from_args(
            content=DataFileContent.DATA, file_path=spelled, file_format=FileFormat.PARQUET,
            partition=Record("a"), record_count=2, file_size_in_bytes=self.fs.size(key),
        )  # fmt: skip
        df.spec_id = table.metadata.default_spec_id
        return write.append_data_files(table, [df])

    def objects(self) -> set[str]:
        return set(self.fs.find(f"{self.bucket}/", detail=False))


def test_dry_run_then_real_run_on_s3(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    planted = S3Planted(seaweedfs, s3_bucket)
    before = planted.objects()
    table = planted.open()

    dry = remove_orphan_files(table, clock=planted.clock()).to_json()
    assert set(dry["orphanPaths"]) == {f"s3://{k}" for k in planted.old}
    assert dry["hiddenSkipped"] == 2 and dry["outsideBoundary"] == 0 and dry["prefixMismatches"] == []
    assert planted.objects() == before

    wet = remove_orphan_files(table, dry_run=False, clock=planted.clock()).to_json()
    assert wet["files"] == {"data-file": 2, "manifest": 1, "manifest-list": 1}
    assert planted.objects() == before - planted.old
    assert planted.s3a_key in planted.objects()  # valid through its s3a:// spelling
    assert planted.never <= planted.objects() and planted.fresh <= planted.objects()
    ids = sorted(planted.open().table.scan().to_arrow().column("id").to_pylist())
    assert ids == [0, 1, 2, 50, 51]


def test_without_scheme_equivalence_the_s3a_file_would_be_a_mismatch(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    """The s3a-written file is kept because s3a maps to s3: declaring s3a its own scheme (overriding the
    default equivalence) makes the same file a prefix mismatch, which aborts; nothing is deleted."""
    planted = S3Planted(seaweedfs, s3_bucket)
    before = planted.objects()
    with pytest.raises(PrefixMismatchError, match="s3a://"):
        remove_orphan_files(
            planted.open(), dry_run=False, clock=planted.clock(), equal_schemes={"s3a": "s3a"}
        )
    assert planted.objects() == before


def test_an_authority_mismatch_aborts_unless_declared_equal(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    planted = S3Planted(seaweedfs, s3_bucket)
    key = f"{planted.key_root}/data/cat=a/renamed-bucket.parquet"
    planted.fs.pipe_file(key, parquet_bytes([60], "a"))
    table = planted.open()
    other = "old-bucket-name"
    planted.register(table, f"s3://{other}/{key.split('/', 1)[1]}", key)
    before = planted.objects()
    time.sleep(1.1)
    clock = lambda: time.time() + DEFAULT_OLDER_THAN.total_seconds()  # noqa: E731  (everything is old)
    with pytest.raises(PrefixMismatchError, match=other):
        remove_orphan_files(table, dry_run=False, clock=clock)
    assert planted.objects() == before
    result = remove_orphan_files(
        table, dry_run=False, clock=clock, equal_authorities={other: planted.bucket}
    ).to_json()
    assert key in planted.objects() and result["prefixMismatches"] == []
    assert f"s3://{key}" not in result["orphanPaths"]
    assert set(result["orphanPaths"]) == {f"s3://{k}" for k in planted.old | planted.fresh}


@pytest.mark.parametrize("damage", ["truncated-manifest-list", "missing-manifest", "garbage-metadata-json"])
def test_corrupt_metadata_on_s3_deletes_nothing(
    seaweedfs: SeaweedFSServer, s3_bucket: str, damage: str
) -> None:
    planted = S3Planted(seaweedfs, s3_bucket)
    table = planted.open()
    snapshot = table.metadata.snapshots[1]
    expected: type[Exception] = CorruptMetadataError
    if damage == "truncated-manifest-list":
        key = snapshot.manifest_list.removeprefix("s3://")
        planted.fs.pipe_file(key, planted.fs.cat_file(key)[:40])
    elif damage == "missing-manifest":
        key = snapshot.manifests(table.table.io)[0].manifest_path.removeprefix("s3://")
        planted.fs.rm_file(key)
        expected = MissingMetadataError
    else:
        version = int(table.metadata_location.rsplit("/v", 1)[1].split(".")[0])
        key = f"{planted.key_root}/metadata/v{version + 1}.metadata.json"
        planted.fs.pipe_file(key, b'{"format-version": 2, "location": ')
    before = planted.objects()
    with pytest.raises(expected, match=key.rsplit("/", 1)[1]):
        remove_orphan_files(table, dry_run=False, clock=planted.clock())
    assert planted.objects() == before


def test_a_commit_during_cleanup_on_s3_loses_nothing(seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    """One old orphan is registered between listing and valid set, another between plan and delete: both
    stay; the rest go in one DeleteObjects batch."""
    planted = S3Planted(seaweedfs, s3_bucket)
    first, second = (f"{planted.key_root}/data/cat=a/late-{i}.parquet" for i in range(2))
    for key in (first, second):
        planted.fs.pipe_file(key, parquet_bytes([70], "a"))
    # both were written after the split: move the split forward so they are old too
    time.sleep(1.1)
    planted.split = time.time()
    table = planted.open()
    writer = planted.open()

    def on_phase(phase: str) -> None:
        if phase == "listed":
            planted.register(writer, f"s3://{first}", first)

    plan = plan_orphan_cleanup(table, clock=planted.clock(), on_phase=on_phase)
    planned = {r.path for r in plan.orphans}
    assert first not in planned and second in planned
    planted.register(writer, f"s3a://{second}", second)
    report = []
    result = execute_orphan_cleanup(table, plan, dry_run=False)
    report.append(result.to_json())
    assert {first, second} <= planted.objects()
    assert report[0]["keptByRecheck"] == 1
    assert planted.objects().isdisjoint(planted.old | planted.fresh)
    ids = planted.open().table.scan().to_arrow().column("id").to_pylist()
    assert ids.count(70) == 2


def test_cli_on_s3(
    seaweedfs: SeaweedFSServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from tests.unit.test_cli import run

    planted = S3Planted(seaweedfs, s3_bucket)
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    report = tmp_path / "audit.jsonl"
    # --older-than 1 s with the override: everything written before the call is a candidate.
    time.sleep(1.1)
    code, out, err = run(
        "remove-orphans", planted.root, "--older-than", "1 s", "--allow-short-older-than",
        "--dry-run", "--json", "--report", str(report),
    )  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert set(document["orphanPaths"]) == {f"s3://{k}" for k in planted.old | planted.fresh}
    lines = [json.loads(x) for x in report.read_text().splitlines()]
    assert {x["path"] for x in lines} == set(document["orphanPaths"])
    assert {x["action"] for x in lines} == {"would-delete"}
    code, _, err = run("remove-orphans", planted.root, "--older-than", "1 s", "--apply", "--json")
    assert code == 9 and "24 h" in err
    assert timedelta(seconds=1) < DEFAULT_OLDER_THAN
