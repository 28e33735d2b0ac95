"""Appending to Iceberg tables through pyiceberg's ``Transaction``, committed by ``commit.commit_with_retry``.

* :func:`append` writes an Arrow table as new data files (pyiceberg ``Transaction.append``: Parquet files,
  then a ``fast_append`` snapshot, or ``merge_append`` when ``commit.manifest-merge.enabled=true``). The rows
  are first made into the table's columns by ``core/sources`` (:func:`write_schema`): a column is converted
  only where no value can change, anything else is a one-line typed error naming the column, raised before
  a file is written (pyiceberg's own check answers with a multi-line table).
* :func:`add_files` registers existing Parquet files (``Transaction.add_files``; partition values are read
  from the footers' statistics, so each file must hold one partition of non-identity transforms).
* :func:`append_data_files` commits ``DataFile`` records built by the caller (``fast_append`` +
  ``append_data_file``), for files whose metadata is already known.

Each attempt of the retry loop stages afresh: if pyiceberg's own in-transaction retries are exhausted and
our loop retries, ``append`` writes its data files again and the first attempt's files become orphans
(reclaimed by orphan cleanup). v3 tables are refused up front (pyiceberg 0.12 cannot write their
manifests). Not done yet: overwrite of a partition by value (pyiceberg ``Transaction.overwrite`` with a
filter, or ``dynamic_partition_overwrite``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NotInstalledError
from pyiceberg.manifest import DataFile
from pyiceberg.table import Transaction
from pyiceberg.table.refs import MAIN_BRANCH

from airflow_lakeformat.core.iceberg.errors import MissingWriteDependencyError
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.sources import WriteSchema, conform_table

if TYPE_CHECKING:
    import pyarrow as pa


def _head(table: IcebergTable, branch: str) -> int:
    ref = table.metadata.refs.get(branch)
    if ref is None:  # pragma: no cover - a successful snapshot commit always sets its branch
        raise RuntimeError(f"{table.name}: branch {branch!r} missing after commit")
    return ref.snapshot_id


def write_schema(table: IcebergTable) -> WriteSchema:
    """The current schema's columns as a write must deliver them (pyiceberg's Arrow types, ``required``
    fields not nullable), with Iceberg's type names for errors."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = table.metadata.schema()
    arrow = schema_to_pyarrow(schema, include_field_ids=False)
    return WriteSchema(arrow, {f.name: str(f.field_type) for f in schema.fields})


def append(
    table: IcebergTable,
    data: pa.Table,
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
    policy: RetryPolicy | None = None,
    source: str = "input",
) -> int:
    """Append the rows of an Arrow table as a new snapshot.

    Args:
        table: A writable table (not read-only, format v1 or v2).
        data: The rows: the table's columns (a missing nullable column is NULL); a column of another type
            is converted only where no value can change (``int32`` -> ``long``), else refused.
        source: The rows' origin for errors (the input file's path).
        snapshot_properties: Extra snapshot summary properties.
        branch: The branch to commit to.
        policy: Retry policy (default: the table's ``commit.retry.*``).

    Returns:
        The id of the new head of ``branch``.

    Raises:
        RegisterError: A column the table lacks, a missing required column, a type that could change
            values if converted (``SourceValueError`` for a NULL in a required column).
        ReadOnlyTableError, UnsupportedWriteVersionError: Not writable.
        MissingWriteDependencyError: The table's partition transforms need ``pyiceberg-core`` (bucket,
            truncate, year, month, day, hour), which is not installed; raised before any file is written.
        CommitRetriesExhaustedError, CommitStateUnknownError, CommitConflictError: See ``commit_with_retry``.

    Example:
        >>> snapshot_id = append(open_table("/wh/events"), pa.table({"id": [1, 2]}))  # doctest: +SKIP
    """
    properties = dict(snapshot_properties or {})
    data = conform_table(data, write_schema(table), source)

    def stage(tx: Transaction) -> None:
        try:
            tx.append(data, snapshot_properties=properties, branch=branch)
        except NotInstalledError as exc:  # raised while partitioning the rows, before any file is written
            raise MissingWriteDependencyError(table.name, str(exc)) from exc

    commit_with_retry(table, stage, description=f"append of {data.num_rows} rows", policy=policy)
    return _head(table, branch)


def add_files(
    table: IcebergTable,
    paths: Sequence[str],
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    check_duplicate_files: bool = True,
    branch: str = MAIN_BRANCH,
    policy: RetryPolicy | None = None,
) -> int:
    """Register existing Parquet files as data files of a new snapshot.

    Args:
        table: A writable table.
        paths: File URIs as they should be recorded (pyiceberg reads each footer through its FileIO).
        snapshot_properties: Extra snapshot summary properties.
        check_duplicate_files: Refuse files the table already references (pyiceberg's check).
        branch: The branch to commit to.
        policy: Retry policy.

    Returns:
        The id of the new head of ``branch``.

    Example:
        >>> add_files(table, ["s3://bucket/landing/part-0.parquet"])  # doctest: +SKIP
    """
    properties = dict(snapshot_properties or {})
    file_paths = list(paths)

    def stage(tx: Transaction) -> None:
        tx.add_files(
            file_paths,
            snapshot_properties=properties,
            check_duplicate_files=check_duplicate_files,
            branch=branch,
        )

    commit_with_retry(table, stage, description=f"add_files of {len(file_paths)} files", policy=policy)
    return _head(table, branch)


def append_data_files(
    table: IcebergTable,
    data_files: Iterable[DataFile],
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
    policy: RetryPolicy | None = None,
) -> int:
    """Commit caller-built ``DataFile`` records (a ``fast_append`` snapshot).

    Args:
        table: A writable table.
        data_files: The records (``DataFile.from_args(...)``), ``spec_id`` set to a spec of the table.
        snapshot_properties: Extra snapshot summary properties.
        branch: The branch to commit to.
        policy: Retry policy.

    Returns:
        The id of the new head of ``branch``.
    """
    files = list(data_files)
    properties = dict(snapshot_properties or {})

    def stage(tx: Transaction) -> None:
        with tx.update_snapshot(snapshot_properties=properties, branch=branch).fast_append() as fast:
            for data_file in files:
                fast.append_data_file(data_file)

    commit_with_retry(table, stage, description=f"append of {len(files)} data files", policy=policy)
    return _head(table, branch)
