"""Concurrent committers in separate processes: every commit lands once, ids are contiguous, nothing overwritten."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.paimon.commit import COMMIT_ID_PROPERTY, Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files
from tests.support.pypaimon import oracle_read
from tests.support.seaweedfs import SeaweedFSServer

WORKERS, COMMITS = 4, 25
FIELDS = [{"name": "p", "type": "STRING"}, {"name": "v", "type": "BIGINT"}]


def worker(uri: str, options: dict[str, Any] | None, worker_id: int) -> list[tuple[int, str, str]]:
    table = Table.open(uri, options)
    committer = Committer(table, f"worker-{worker_id}", max_retries=200, max_retry_wait=0.5)
    published = []
    for i in range(COMMITS):
        rows = pa.table({"p": [f"p{i % 3}"], "v": [worker_id * 1000 + i]})
        [entry] = write_data_files(table, rows)
        result = committer.commit([entry], check_conflicts=True)
        assert result.snapshot.properties is not None
        published.append(
            (result.snapshot.id, result.snapshot.properties[COMMIT_ID_PROPERTY], entry.file.file_name)
        )
    return published


def run_concurrently(uri: str, options: dict[str, Any] | None, local_copy: Path) -> None:
    create_table(uri, schema_from_fields(FIELDS, ["p"]), options)
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        results = pool.starmap(worker, [(uri, options, w) for w in range(WORKERS)])
    published = [row for rows in results for row in rows]
    table = Table.open(uri, options)
    manager = table.snapshot_manager
    ids = manager.list_snapshot_ids()
    assert ids == list(range(1, WORKERS * COMMITS + 1)), "snapshot ids are contiguous"
    assert sorted(r[0] for r in published) == ids, "every commit was published exactly once"
    for snapshot_id, commit_id, _ in published:
        # The file at the id each committer believed it published is its own: nothing was overwritten.
        assert (manager.snapshot(snapshot_id).properties or {})[COMMIT_ID_PROPERTY] == commit_id
    latest = manager.latest_snapshot()
    assert latest is not None and latest.total_record_count == WORKERS * COMMITS
    names = sorted(e.file.file_name for e in live_entries(table, latest))
    assert names == sorted(r[2] for r in published)
    if table.io.protocol != "file":
        table.io.fs.get(table.root + "/", str(local_copy) + "/", recursive=True)
    # The real peer reads every committed row.
    rows = oracle_read(local_copy)
    assert sorted(r["v"] for r in rows) == sorted(
        w * 1000 + i for w in range(WORKERS) for i in range(COMMITS)
    )


@pytest.mark.slow
@pytest.mark.interop
def test_four_processes_commit_concurrently_on_the_local_filesystem(tmp_path: Path) -> None:
    run_concurrently(str(tmp_path / "t"), None, tmp_path / "t")


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.interop
def test_four_processes_commit_concurrently_on_s3(
    seaweedfs: SeaweedFSServer, s3_bucket: str, tmp_path: Path
) -> None:
    options = {
        "key": seaweedfs.access_key,
        "secret": seaweedfs.secret_key,
        "endpoint_url": seaweedfs.endpoint_url,
        "client_kwargs": {"region_name": seaweedfs.region},
    }
    run_concurrently(f"{s3_bucket}/t", options, tmp_path / "copy")
