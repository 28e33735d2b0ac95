"""Appending to Iceberg tables, committed by ``commit.commit_with_retry``.

* :func:`append` writes an Arrow table as new data files and commits them as one ``append`` snapshot
  (``fast_append``, or ``merge_append`` when ``commit.manifest-merge.enabled=true``, as pyiceberg's
  ``Transaction.append`` chooses). The rows are first made into the table's columns by ``core/sources``
  (:func:`write_schema`): a column is converted only where no value can change, anything else is a one-line
  typed error naming the column, raised before a file is written. They are then partitioned by the current
  spec, identity or transform (``partitioned.write_partitioned``: bucket, truncate, year, month, day, hour
  through ``pyiceberg-core``, Java's semantics), written once, and only the commit is retried: a retry of
  the loop re-stages the same files on the new head. Files of a write whose commit fails for sure (a
  conflict, retries exhausted, a typed refusal) are deleted; after ``CommitStateUnknownError`` they are kept.
* :func:`add_files` registers existing Parquet files (``Transaction.add_files``; partition values are read
  from the footers' statistics, so each file must hold one partition of non-identity transforms).
* :func:`append_data_files` commits ``DataFile`` records built by the caller (``fast_append`` +
  ``append_data_file``), for files whose metadata is already known.

v3 tables are refused up front (pyiceberg 0.12 cannot write their manifests). A partition overwrite is
``overwrite.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFile
from pyiceberg.table import Transaction
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.utils.properties import property_as_bool

from airflow_lakeformat.core.errors import CommitStateUnknownError
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.iceberg.write.partitioned import write_partitioned
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
            truncate, year, month, day, hour; a dependency of this package) and it is missing; raised before
            any file is written.
        CommitRetriesExhaustedError, CommitStateUnknownError, CommitConflictError: See ``commit_with_retry``.

    Example:
        >>> snapshot_id = append(open_table("/wh/events"), pa.table({"id": [1, 2]}))  # doctest: +SKIP
    """
    properties = dict(snapshot_properties or {})
    data = conform_table(data, write_schema(table), source)
    table.check_writable()
    written = write_partitioned(table, data)
    merge = property_as_bool(table.metadata.properties, "commit.manifest-merge.enabled", False)

    def stage(tx: Transaction) -> None:
        producer = tx.update_snapshot(snapshot_properties=properties, branch=branch)
        with producer.merge_append() if merge else producer.fast_append() as operation:
            for data_file in written:
                operation.append_data_file(data_file)

    with discard_on_failure(table, [f.file_path for f in written]):
        commit_with_retry(table, stage, description=f"append of {data.num_rows} rows", policy=policy)
    return _head(table, branch)


@contextlib.contextmanager
def discard_on_failure(table: IcebergTable, locations: Sequence[str]) -> Iterator[None]:
    """Delete ``locations`` (files this write made) when the block fails for sure; an unknown commit state
    (:class:`CommitStateUnknownError`: the commit may have landed) keeps them, as Java does (#12792)."""
    try:
        yield
    except CommitStateUnknownError:
        raise
    except Exception:
        io = table.table.io
        for location in locations:
            with contextlib.suppress(OSError):
                io.delete(location)
        raise


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
