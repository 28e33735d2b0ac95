"""The facade's exactly-once commit of staged files (``core/table_writes.py``), what the commit operator calls.

An overwrite must not publish staged files of another partition: Paimon's ``FileStoreCommitImpl.overwrite``
refuses it, and so does ``Committer.overwrite_entries`` when it is given the files being added. The operator
path once called it without them, so an overwrite of ``cat=a`` with a file of ``cat=b`` deleted ``a``'s rows and
kept the new ``b`` file: the rows meant to replace ``a`` never landed there.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.table_writes import table_writes
from tests.unit.test_register import make_table, put


def test_an_overwrite_with_a_staged_file_of_another_partition_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    native = make_table(tmp_path / "t", [("id", "BIGINT"), ("cat", "STRING")], partition_keys=("cat",))
    writes = table_writes(open_table(str(tmp_path / "t")))
    a = put(native, "cat=a/bucket-0/data-a.parquet", pa.table({"id": pa.array([1], pa.int64())}))
    writes.commit_files([a], commit_user="u", commit_identifier=1)
    b = put(native, "cat=b/bucket-0/data-b.parquet", pa.table({"id": pa.array([2], pa.int64())}))
    with pytest.raises(ValueError, match="outside it"):
        writes.commit_files([b], commit_user="u", commit_identifier=2, overwrite={"cat": "a"})
    latest = native.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == 1
    assert [e.file.row_count for e in live_entries(native, latest)] == [1]
    # inside the partition the same overwrite goes through
    a2 = put(native, "cat=a/bucket-0/data-a2.parquet", pa.table({"id": pa.array([3, 4], pa.int64())}))
    result = writes.commit_files([a2], commit_user="u", commit_identifier=3, overwrite={"cat": "a"})
    assert result["commitKind"] == "OVERWRITE" and result["filesDeleted"] == 1
