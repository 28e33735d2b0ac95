"""Partition expiry (Paimon's ``expire_partitions``): time extraction, selection, the OVERWRITE commit, and what
snapshot expiry and orphan cleanup do with the dropped files afterwards."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import fastavro
import pyarrow as pa
import pytest

from airflow_lakeformat.cli import main
from airflow_lakeformat.core.errors import MaintenanceRefusedError, UsageError
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.partition_expiry import expire_partitions
from airflow_lakeformat.core.paimon.maintenance.partition_time import (
    PartitionTimeExtractor,
    UnparsablePartitionTime,
)
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from airflow_lakeformat.core.table_maintenance import IcebergMaintenance
from airflow_lakeformat.core.tables import open_table
from tests.support.maintenance import tree
from tests.support.pypaimon import run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer, upload_tree
from tests.support.tables import TableBuilder

# -- the time of a partition (Java's PartitionTimeExtractor) ---------------------------------------


@pytest.mark.parametrize(
    ("pattern", "formatter", "keys", "values", "expected"),
    [
        (None, None, ["dt"], ["2024-01-02"], datetime(2024, 1, 2)),
        (None, None, ["dt"], ["2024-1-2 3:4:5.25"], datetime(2024, 1, 2, 3, 4, 5, 250000)),
        (None, None, ["dt"], ["2024-13-01"], datetime(2025, 1, 1)),  # LENIENT: the month carries
        (None, None, ["dt"], ["2024-01-01 24:00:00"], datetime(2024, 1, 2)),
        (None, "yyyyMMdd", ["dt"], ["20240102"], datetime(2024, 1, 2)),
        (None, "yyyyMMddHH", ["dt"], ["2024010207"], datetime(2024, 1, 2, 7)),
        (
            None,
            "yyyy-MM-dd HH:mm:ss",
            ["dt"],
            ["2024-02-30 10:00:00"],
            datetime(2024, 2, 29, 10),
        ),  # SMART clamp
        (None, "yyyy/MM/dd'T'HH", ["dt"], ["2024/01/02T05"], datetime(2024, 1, 2, 5)),
        (None, "yyMMdd", ["dt"], ["240102"], datetime(2024, 1, 2)),
        ("$dt $hh:00:00", None, ["dt", "hh"], ["2024-01-02", "7"], datetime(2024, 1, 2, 7)),
        # longest key names first: $dt must not eat the head of $dt1
        ("$dt1 $dt:00:00", None, ["dt", "dt1"], ["7", "2024-01-02"], datetime(2024, 1, 2, 7)),
        ("$dt", None, ["other", "dt"], ["x", "2024-01-02"], datetime(2024, 1, 2)),
    ],
)
def test_partition_time_as_java_extracts_it(
    pattern: str | None, formatter: str | None, keys: list[str], values: list[str], expected: datetime
) -> None:
    assert PartitionTimeExtractor(pattern, formatter).extract(keys, values) == expected


@pytest.mark.parametrize(
    ("pattern", "formatter", "values"),
    [
        (None, None, ["19723"]),  # a DATE partition's day number
        (None, None, ["2024-01-01T10:00"]),  # a TIMESTAMP's toString
        (None, None, ["2024-01-01 10:00"]),  # no seconds
        (None, None, [None]),
        (None, "yyyyMMdd", ["2024011"]),
        (None, "yyyyMMdd", ["20241301"]),  # SMART: month 13 is an error
        (None, "yyyy-MM-dd HH", ["2024-01-01"]),  # a date-time pattern does not take a date alone
        ("$dt $hh:00:00", None, ["2024-01-01", None]),
    ],
)
def test_unparsable_partition_values_are_reported(
    pattern: str | None, formatter: str | None, values: list[str | None]
) -> None:
    keys = ["dt", "hh"][: len(values)]
    with pytest.raises(UnparsablePartitionTime):
        PartitionTimeExtractor(pattern, formatter).extract(keys, values)


@pytest.mark.parametrize(
    "formatter", ["yyyy-MMM-dd", "yyyyMMdd a", "yyyy-MM-dd[ HH]", "yyyyMM", "yyyyMMddmm"]
)
def test_unsupported_formatters_are_refused_typed(formatter: str) -> None:
    with pytest.raises(MaintenanceRefusedError, match=r"partition\.timestamp-formatter"):
        PartitionTimeExtractor(None, formatter, location="/t")


# -- tables ----------------------------------------------------------------------------------------

NOW = datetime(2024, 1, 5, 12, 0)
DAYS = ["20240101", "20240102", "20240103", "20240104", "20240105"]


def day_table(root: Path, **options: str) -> Table:
    """``dt STRING`` partitions: five days, an unparsable one and a null one; 20240101 has two files."""
    fields = [{"name": "dt", "type": "STRING"}, {"name": "v", "type": "BIGINT"}]
    table = create_table(str(root), schema_from_fields(fields, ["dt"], options=options))
    committer = Committer(table, "writer")
    dts: list[str | None] = [*DAYS, "bad", None]
    committer.commit(write_data_files(table, pa.table({"dt": dts, "v": list(range(len(dts)))})))
    committer.commit(write_data_files(table, pa.table({"dt": ["20240101"], "v": [100]})))
    return Table.open(str(root))


def specs(partitions: list[Any]) -> list[str]:
    return [",".join(p.spec.values()) for p in partitions]


def expired_specs(result: Any) -> list[str]:
    return specs(result.plan.expired)


def data_paths(table: Table, snapshot_id: int | None = None) -> set[str]:
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest_snapshot()
    assert snapshot is not None
    paths = DataFilePaths(table.schema)
    return {paths.relative_path(e) for e in live_entries(table, snapshot)}


def test_dry_run_changes_nothing_and_reports_every_partition(tmp_path: Path) -> None:
    table = day_table(tmp_path / "t", **{"partition.timestamp-formatter": "yyyyMMdd"})
    before = tree(table)
    result = open_table(str(tmp_path / "t")).maintenance.expire_partitions(
        expiration_time="2 d", now=NOW, dry_run=True
    )
    assert tree(table) == before
    assert expired_specs(result) == ["20240101", "20240102", "20240103"]  # 20240103 00:00 < 20240103 12:00
    document = result.to_json()
    assert (document["dryRun"], document["snapshotId"], document["files"], document["partitionsKept"]) == (
        True,
        None,
        4,
        2,
    )
    skipped = {",".join(p["spec"].values()): p["reason"] for p in document["partitionsSkipped"]}
    assert set(skipped) == {"bad", "__DEFAULT_PARTITION__"}
    assert "null" in skipped["__DEFAULT_PARTITION__"] and "'bad'" in skipped["bad"]
    assert "would expire 3 partitions (dt=20240101, dt=20240102, dt=20240103): 4 files" in result.summary()


def test_the_test_is_strict_and_max_expires_keeps_the_first_in_sorted_order(tmp_path: Path) -> None:
    table = day_table(tmp_path / "t")
    at_midnight = expire_partitions(
        table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=datetime(2024, 1, 5), dry_run=True
    )
    assert expired_specs(at_midnight) == ["20240101", "20240102"]  # 20240103 == the threshold: kept
    limited = expire_partitions(
        table, expiration_time="2 d", timestamp_formatter="yyyyMMdd", now=NOW, max_expires=2, dry_run=True
    )
    assert expired_specs(limited) == ["20240101", "20240102"]
    assert specs(limited.plan.over_limit) == ["20240103"]


def test_pattern_over_two_keys_and_java_string_order(tmp_path: Path) -> None:
    builder = TableBuilder(tmp_path / "t", [("dt", "STRING"), ("hh", "INT"), ("v", "BIGINT")], ["dt", "hh"])
    entries = [builder.entry(("2024-01-01", h)) for h in (9, 10, 11, 23)] + [builder.entry(("2024-01-02", 1))]
    builder.commit(entries)
    table = Table.open(str(tmp_path / "t"))
    result = expire_partitions(
        table,
        expiration_time="1 h",
        timestamp_pattern="$dt $hh:00:00",
        now=datetime(2024, 1, 1, 23, 30),
        max_expires=2,
        dry_run=True,
    )
    # 9, 10 and 11 o'clock expire (23:00 is within the hour); as text "2024-01-01,10" < ",11" < ",9"
    assert expired_specs(result) == ["2024-01-01,10", "2024-01-01,11"]
    assert specs(result.plan.over_limit) == ["2024-01-01,9"]
    assert result.plan.kept == 2


def test_date_partitions_never_expire_and_nulls_are_skipped(tmp_path: Path) -> None:
    builder = TableBuilder(tmp_path / "t", [("d", "DATE"), ("v", "BIGINT")], ["d"])
    builder.commit([builder.entry((date(2020, 1, 1),)), builder.entry((None,))])
    result = expire_partitions(Table.open(str(tmp_path / "t")), expiration_time="1 d", now=NOW, dry_run=True)
    assert result.plan.expired == []
    reasons = {",".join(p.spec.values()): p.reason or "" for p in result.plan.skipped}
    assert set(reasons) == {"18262", "__DEFAULT_PARTITION__"}  # Java's toString of a DATE: its day number
    assert "DATE" in reasons["18262"]


def test_update_time_takes_the_newest_file_of_a_partition(tmp_path: Path) -> None:
    builder = TableBuilder(tmp_path / "t", [("p", "STRING"), ("v", "BIGINT")], ["p"])
    old, recent = datetime(2024, 1, 1, 8), datetime(2024, 1, 5, 11)
    builder.commit(
        [
            builder.entry(("old",), creation_time=old),
            builder.entry(("mixed",), creation_time=old),
            builder.entry(("mixed",), creation_time=recent),
            builder.entry(("not-a-date",), creation_time=old),
        ]
    )
    result = expire_partitions(
        Table.open(str(tmp_path / "t")), expiration_time="1 d", strategy="update-time", now=NOW, dry_run=True
    )
    assert expired_specs(result) == ["not-a-date", "old"]
    assert result.plan.kept == 1 and result.plan.skipped == []
    assert result.plan.expired[1].time == old


def test_refusals_are_typed_and_name_the_option(tmp_path: Path) -> None:
    table = day_table(tmp_path / "t")
    with pytest.raises(MaintenanceRefusedError, match=r"partition\.expiration-time"):
        expire_partitions(table, now=NOW)
    with pytest.raises(MaintenanceRefusedError, match="no partition keys"):
        unpartitioned = TableBuilder(tmp_path / "u", [("v", "BIGINT")])
        unpartitioned.commit([unpartitioned.entry()])
        expire_partitions(Table.open(str(tmp_path / "u")), expiration_time="1 d")
    metastore = TableBuilder(
        tmp_path / "m", [("p", "STRING")], ["p"], options={"metastore.partitioned-table": "true"}
    )
    metastore.commit([metastore.entry(("2020-01-01",))])
    with pytest.raises(MaintenanceRefusedError, match=r"metastore\.partitioned-table"):
        expire_partitions(Table.open(str(tmp_path / "m")), expiration_time="1 d")
    with pytest.raises(MaintenanceRefusedError, match="expiration-strategy"):
        expire_partitions(table, expiration_time="1 d", strategy="custom")
    with pytest.raises(UsageError, match="Paimon"):
        IcebergMaintenance(cast(Any, SimpleNamespace(name="ns.t"))).expire_partitions(expiration_time="1 d")


class AppendingFirst(Committer):
    """A committer whose first commit finds a concurrent writer's append in a partition being dropped."""

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "appended", False):
            self.appended = True
            Committer(self.table, "writer").commit(
                write_data_files(self.table, pa.table({"dt": ["20240101"], "v": [7]}))
            )
        return super().commit(*args, **kwargs)


def test_a_concurrent_append_into_a_dropped_partition_is_dropped_too(tmp_path: Path) -> None:
    table = day_table(tmp_path / "t", **{"partition.timestamp-formatter": "yyyyMMdd"})
    result = expire_partitions(
        table, expiration_time="4 d", now=NOW, committer=AppendingFirst(table, "expiry")
    )
    assert expired_specs(result) == ["20240101"] and result.attempts == 2
    assert len(result.plan.expired[0].entries) == 3  # the two planned files and the concurrent one
    latest = Table.open(str(tmp_path / "t")).snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == result.snapshot_id == 4 and latest.commit_user == "expiry"
    assert not any("20240101" in p for p in data_paths(Table.open(str(tmp_path / "t"))))


# -- the real run, the readers, and the cleanups afterwards ----------------------------------------


def _age_everything(root: Path, seconds: float) -> None:
    old = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))


@pytest.mark.interop
def test_the_drop_is_an_overwrite_that_pypaimon_reads_and_expiry_cleans(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = day_table(
        root, **{"partition.expiration-time": "2 d", "partition.timestamp-formatter": "yyyyMMdd"}
    )
    before_paths = data_paths(table)
    before_id = table.snapshot_manager.latest_snapshot_id()
    assert before_id is not None
    out = io.StringIO()
    code = main(["expire-partitions", str(root), "--json"], out=out)
    assert code == 0
    document = json.loads(out.getvalue())
    assert document["operation"] == "expire-partitions" and document["snapshotBefore"] == before_id
    # "now" is the clock: every dated partition is older than two days
    assert [",".join(p["spec"].values()) for p in document["partitionsExpired"]] == DAYS
    table = Table.open(str(root))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == document["snapshotId"] == before_id + 1
    assert latest.commit_kind is CommitKind.OVERWRITE and latest.delta_record_count == -(len(DAYS) + 1)
    dropped = before_paths - data_paths(table)
    assert len(dropped) == len(DAYS) + 1 and all((root / p).exists() for p in dropped)

    # pypaimon reads exactly the remaining partitions, and the previous snapshot still has them all
    now_rows, then_rows = run_oracle_batch([["read", root], ["read", root, "--snapshot", before_id]])
    assert sorted(str(r["dt"]) for r in now_rows) == ["None", "bad"]
    assert len(then_rows) == len(DAYS) + 3

    # orphan cleanup leaves the dropped files: snapshots 1 and 2 still reference them
    _age_everything(root, 3 * 86400)
    orphans = table_facade(root).remove_orphan_files(dry_run=False, older_than=timedelta(days=1))
    assert orphans.to_json()["orphans"] == 0 and all((root / p).exists() for p in dropped)

    # snapshot expiry down to the OVERWRITE snapshot deletes them, and only them
    expiry = table_facade(root).expire_snapshots(dry_run=False, retain_min=1, older_than=timedelta(0))
    assert expiry.to_json()["files"].get("data-file") == len(dropped)
    assert not any((root / p).exists() for p in dropped)
    assert all((root / p).exists() for p in data_paths(Table.open(str(root))))
    assert sorted(str(r["dt"]) for r in run_oracle_batch([["read", root]])[0]) == ["None", "bad"]


def table_facade(root: Path) -> Any:
    return open_table(str(root)).maintenance


def _index_manifest(root: Path, partition: bytes) -> str:
    """An index manifest holding one dynamic-bucket hash index file of ``partition`` (Paimon's record layout)."""
    schema = {
        "type": "record",
        "name": "org.apache.paimon.avro.generated.record",
        "fields": [
            {"name": "_VERSION", "type": "int"},
            {"name": "_KIND", "type": "int"},
            {"name": "_PARTITION", "type": "bytes"},
            {"name": "_BUCKET", "type": "int"},
            {"name": "_INDEX_TYPE", "type": "string"},
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_ROW_COUNT", "type": "long"},
        ],
    }
    record = {
        "_VERSION": 1,
        "_KIND": 0,
        "_PARTITION": partition,
        "_BUCKET": 0,
        "_INDEX_TYPE": "HASH",
        "_FILE_NAME": "index-0-0",
        "_FILE_SIZE": 8,
        "_ROW_COUNT": 1,
    }
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), [record])
    name = "index-manifest-0000-0"
    (root / "manifest" / name).write_bytes(buffer.getvalue())
    return name


def test_a_partition_with_index_files_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    builder = TableBuilder(root, [("dt", "STRING"), ("v", "BIGINT")], ["dt"])
    snapshot = builder.commit([builder.entry(("2020-01-01",)), builder.entry(("2020-01-02",))])
    indexed = dataclasses.replace(
        snapshot, index_manifest=_index_manifest(root, builder.partition("2020-01-02"))
    )
    (root / "snapshot" / "snapshot-1").write_bytes(indexed.to_bytes())
    table = Table.open(str(root))
    with pytest.raises(MaintenanceRefusedError, match="index files"):
        expire_partitions(table, expiration_time="1 d", now=NOW, dry_run=True)
    # the other partition alone is not indexed: its drop goes ahead, and the index manifest is carried
    result = expire_partitions(table, expiration_time="1 d", now=datetime(2020, 1, 2, 12), dry_run=False)
    assert expired_specs(result) == ["2020-01-01"]
    latest = Table.open(str(root)).snapshot_manager.latest_snapshot()
    assert latest is not None and latest.index_manifest == indexed.index_manifest


@pytest.mark.s3
def test_partition_expiry_on_s3_matches_the_local_run(
    tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    local = tmp_path / "t"
    day_table(local, **{"partition.timestamp-formatter": "yyyyMMdd"})
    remote = f"{s3_bucket}/partitions/t"
    upload_tree(seaweedfs.fs(), local, remote)
    table = Table.open(remote, seaweedfs.storage_options())
    result = expire_partitions(table, expiration_time="2 d", now=NOW)
    local_result = expire_partitions(Table.open(str(local)), expiration_time="2 d", now=NOW)
    assert expired_specs(result) == expired_specs(local_result) == ["20240101", "20240102", "20240103"]
    assert result.snapshot_id == local_result.snapshot_id == 3
    remote_live = {p.split("/", 1)[0] for p in data_paths(Table.open(remote, seaweedfs.storage_options()))}
    assert remote_live == {p.split("/", 1)[0] for p in data_paths(Table.open(str(local)))}
    assert remote_live == {"dt=20240104", "dt=20240105", "dt=bad", "dt=__DEFAULT_PARTITION__"}
