"""Iceberg data compaction on SeaweedFS S3 as on local disk: the same plan, the same rows, nothing left over;
a truncated input file fails typed and leaves nothing; a run killed before its commit converges.

The compose stack runs the Iceberg maintenance DAG's compact_data on S3; this is the same operation in-process
against the shared SeaweedFS server, with the deletes applied and a refused run leaving no object behind.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.typedef import Record

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files
from tests.iceberg.scenarios import SCHEMA, SPEC, rows
from tests.iceberg.test_data_compaction_crash import shared_zygote
from tests.support.seaweedfs import SeaweedFSServer
from tests.unit.test_cli import run

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


def _cli_options(server: SeaweedFSServer) -> list[str]:
    return [
        "--storage-option", f"key={server.access_key}", "--storage-option", f"secret={server.secret_key}",
        "--storage-option", f"endpoint_url={server.endpoint_url}",
        "--storage-option", f"client_kwargs.region_name={server.region}",
    ]  # fmt: skip


def _small_files_table(server: SeaweedFSServer, root: str) -> IcebergTable:
    """2 partitions x 2 appends of 2 rows, on S3 in the Hadoop layout."""
    options = server.storage_options()
    HadoopLayoutCatalog(storage_options=options).create_table(
        root, schema=SCHEMA, partition_spec=SPEC, properties={"format-version": "2"}
    )
    table = open_path_table(root, options)
    for first in (0, 2):  # one file per partition per commit
        write.append(table, pa.concat_tables([rows([first, first + 1], cat, DAY) for cat in ("a", "b")]))
    table.refresh()
    return table


def _objects(server: SeaweedFSServer, root: str) -> set[str]:
    return {f"s3://{key}" for key in server.fs().find(root.removeprefix("s3://"))}


def _cli_json(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code == 0, f"lakeformat {' '.join(argv)}: exit {code}\n{err}"
    document: dict[str, Any] = json.loads(out)
    return document


def test_a_truncated_input_file_on_s3_fails_typed_and_leaves_nothing(
    seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    root = f"{s3_bucket}/warehouse/corrupt"
    table = _small_files_table(seaweedfs, root)
    plan = compact_data(table, {"min-input-files": "2"}, dry_run=True).plan
    victim = plan.groups[-1].files[1].path  # in the group rewritten last: the first group's file is written
    fs = seaweedfs.fs()
    data = fs.cat_file(victim.removeprefix("s3://"))
    fs.pipe_file(victim.removeprefix("s3://"), data[: len(data) // 2])
    before, head = _objects(seaweedfs, root), table.metadata.current_snapshot_id

    with pytest.raises(CorruptMetadataError) as caught:
        compact_data(open_path_table(root, seaweedfs.storage_options()), {"min-input-files": "2"})
    assert victim in str(caught.value)
    assert _objects(seaweedfs, root) == before, "the failed run left objects behind"
    assert open_path_table(root, seaweedfs.storage_options()).metadata.current_snapshot_id == head


@pytest.mark.slow
def test_a_compaction_killed_before_its_commit_on_s3_converges(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    """The crash test's ``staged`` point (tests/iceberg/test_data_compaction_crash.py) on S3: the process dies
    with its files and manifests written, uncommitted; a re-run equals a clean run; remove-orphans keeps them
    inside the window (S3's modification times cannot be set back: a window of 1 hour, then of 2 seconds) and then
    deletes exactly them."""
    clean_root, root = f"{s3_bucket}/warehouse/clean", f"{s3_bucket}/warehouse/crashed"
    options = _cli_options(seaweedfs)
    clean = _small_files_table(seaweedfs, clean_root)
    _cli_json("compact-data", clean_root, *options, "--min-input-files", "2")
    table = _small_files_table(seaweedfs, root)
    before, head = _objects(seaweedfs, root), table.metadata.current_snapshot_id

    argv = ["compact-data", root, *options, "--min-input-files", "2", "--json"]
    answer = shared_zygote().crash("staged", argv, tmp_path / "crash.log")
    assert answer["signal"] == 9, (tmp_path / "crash.log").read_text()
    crashed = _objects(seaweedfs, root) - before
    assert crashed and open_path_table(root, seaweedfs.storage_options()).metadata.current_snapshot_id == head

    assert _cli_json("compact-data", root, *options, "--min-input-files", "2")["snapshotId"] is not None
    ours, theirs = (open_path_table(r, seaweedfs.storage_options()) for r in (root, clean_root))
    assert _shape(ours) == _shape(theirs) and ours.table.scan().to_arrow().sort_by("id").equals(
        theirs.table.scan().to_arrow().sort_by("id")
    )
    del clean

    on_store = _objects(seaweedfs, root)
    orphans = ["remove-orphans", root, *options, "--apply", "--allow-short-older-than"]
    _cli_json(*orphans, "--older-than", "1 h")
    assert _objects(seaweedfs, root) == on_store, "deleted inside the orphan window"
    time.sleep(2.5)
    _cli_json(*orphans, "--older-than", "2 s")
    assert on_store - _objects(seaweedfs, root) == crashed


def _shape(table: IcebergTable) -> list[tuple[int, Any, int]]:
    head = table.snapshot(ref="main")
    assert head is not None
    return sorted((f.content, f.partition, f.record_count) for f in live_files(table, head))
