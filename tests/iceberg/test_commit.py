"""The commit retry loop: retried conflicts, exhausted retries, unknown outcomes never retried."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.table import Transaction
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate

from airflow_lakeformat.core.errors import CommitRetriesExhaustedError, CommitStateUnknownError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)


def new_table(root: Path) -> IcebergTable:
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC)
    table = open_path_table(str(root))
    write.append(table, rows([1], "a", DAY))
    return table


def guarded_property(bases: list[int | None]) -> object:
    """A metadata-only stage that requires main to be where this attempt saw it (pyiceberg does not retry
    those itself), recording each attempt's base."""

    def stage(tx: Transaction) -> None:
        head = tx.table_metadata.current_snapshot_id
        bases.append(head)
        tx._apply(
            (SetPropertiesUpdate(updates={"owner": f"attempt-{len(bases)}"}),),
            (AssertRefSnapshotId(snapshot_id=head, ref="main"),),
        )

    return stage


def test_conflict_is_retried_on_the_refreshed_base(tmp_path: Path) -> None:
    stale = new_table(tmp_path / "t")
    other = open_path_table(str(tmp_path / "t"))
    moved_to = write.append(other, rows([2], "b", DAY))
    sleeps: list[float] = []
    bases: list[int | None] = []
    commit_with_retry(stale, guarded_property(bases), description="set owner", sleep=sleeps.append)  # type: ignore[arg-type]
    first_base = bases[0]
    assert bases == [first_base, moved_to] and first_base != moved_to
    assert len(sleeps) == 1 and 0.1 <= sleeps[0] <= 0.11  # min-wait 100 ms plus at most 10% jitter
    final = open_path_table(str(tmp_path / "t"))
    assert final.metadata.properties["owner"] == "attempt-2"
    assert final.metadata.current_snapshot_id == moved_to  # the other writer's append survived
    assert stale.metadata.properties["owner"] == "attempt-2"  # the wrapper is current after success


def test_retries_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = new_table(tmp_path / "t")
    calls: list[int] = []

    def always_conflicting(self: HadoopLayoutCatalog, *args: object) -> None:
        calls.append(1)
        raise CommitFailedException("someone else won")

    monkeypatch.setattr(HadoopLayoutCatalog, "commit_table", always_conflicting)
    sleeps: list[float] = []
    with pytest.raises(CommitRetriesExhaustedError, match="3 attempts"):
        commit_with_retry(
            table,
            guarded_property([]),
            policy=RetryPolicy(num_retries=2, min_wait_ms=10, max_wait_ms=15),
            sleep=sleeps.append,  # type: ignore[arg-type]
        )
    assert len(calls) == 3
    assert len(sleeps) == 2 and 0.010 <= sleeps[0] <= 0.011 and 0.015 <= sleeps[1] <= 0.0165  # capped


def test_retry_policy_reads_table_properties() -> None:
    policy = RetryPolicy.from_properties({"commit.retry.num-retries": "7", "commit.retry.min-wait-ms": "x"})
    assert policy == RetryPolicy(
        num_retries=7, min_wait_ms=100, max_wait_ms=60_000, total_timeout_ms=1_800_000
    )


def test_unknown_commit_state_is_never_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = new_table(tmp_path / "t")
    calls: list[int] = []

    def lost_response(self: HadoopLayoutCatalog, *args: object) -> None:
        calls.append(1)
        raise CommitStateUnknownException("504 from the catalog")

    monkeypatch.setattr(HadoopLayoutCatalog, "commit_table", lost_response)
    for stage in (guarded_property([]), lambda tx: tx.append(rows([5], "a", DAY))):
        calls.clear()
        with pytest.raises(CommitStateUnknownError, match="may have landed"):
            commit_with_retry(table, stage, sleep=lambda _: pytest.fail("must not sleep"))  # type: ignore[arg-type]
        assert len(calls) == 1


def test_s3_publish_failure_is_an_unknown_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-local create that fails with an OSError may have landed: CommitStateUnknownError."""
    from airflow_lakeformat.core.io import FileIO

    table = new_table(tmp_path / "t")

    def flaky(self: FileIO, path: str, data: bytes) -> None:
        raise OSError("connection reset")

    monkeypatch.setattr(FileIO, "create_exclusive", flaky)
    monkeypatch.setattr(FileIO, "is_local", property(lambda self: False))
    with pytest.raises(CommitStateUnknownError):
        commit_with_retry(table, guarded_property([]), sleep=lambda _: pytest.fail("must not sleep"))  # type: ignore[arg-type]
