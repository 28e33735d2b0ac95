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

v3 tables are refused up front (pyiceberg 0.12 cannot write their manifests). :func:`overwrite` is a partition
overwrite, dynamic or by a filter (``overwrite.py``), one ``overwrite`` snapshot.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import DataFile
from pyiceberg.table import Transaction
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.utils.properties import property_as_bool

from airflow_lakeformat.core.errors import CommitStateUnknownError
from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA, LiveFile
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.partition_values import partition_json, partition_result_types
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.iceberg.write.overwrite import (
    StagedOverwrite,
    describe_partitions,
    main_head,
    plan_removed,
    stage_overwrite,
)
from airflow_lakeformat.core.iceberg.write.overwrite_scope import OverwriteScope
from airflow_lakeformat.core.iceberg.write.partitioned import (
    split_by_partition,
    write_groups,
    write_partitioned,
)
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
def discard_on_failure(
    table: IcebergTable, locations: Sequence[str] | Callable[[], Sequence[str]]
) -> Iterator[None]:
    """Delete ``locations`` (files this write made; a function is asked when the block fails) when the block
    fails for sure; an unknown commit state (:class:`CommitStateUnknownError`: the commit may have landed)
    keeps them, as Java does (#12792)."""
    try:
        yield
    except CommitStateUnknownError:
        raise
    except Exception:
        _delete(table, locations() if callable(locations) else locations)
        raise


def _delete(table: IcebergTable, locations: Sequence[str]) -> None:
    """Hand the unpublished files to the one deletion module (one attempt, failures only logged)."""
    if not locations:
        return
    from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

    fs = table.io.fs
    discard_unpublished(table.io, [str(fs._strip_protocol(p)) for p in locations], kind="unpublished")


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


@dataclass
class OverwriteResult:
    """What a partition overwrite committed (or, in a dry run, would commit): ``overwrite.py``."""

    mode: str
    filter_text: str | None
    dry_run: bool
    snapshot_id: int | None
    rows_added: int
    files_added: list[DataFile] = field(default_factory=list)
    removed: list[LiveFile] = field(default_factory=list)
    input_partitions: list[dict[str, Any]] = field(default_factory=list)
    replaced_partitions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"mode", "filter", "inputPartitions", "replacedPartitions", "replacedFiles", "replacedRows",
        "replacedDeleteFiles"}``: the scope and what it replaces (dry run: would replace)."""
        data = [f for f in self.removed if f.content == CONTENT_DATA]
        return {
            "mode": self.mode,
            "filter": self.filter_text,
            "inputPartitions": self.input_partitions,
            "replacedPartitions": self.replaced_partitions,
            "replacedFiles": [f.path for f in data],
            "replacedRows": sum(f.record_count for f in data),
            "replacedDeleteFiles": [f.path for f in self.removed if f.content != CONTENT_DATA],
        }


def overwrite(
    table: IcebergTable,
    data: pa.Table,
    *,
    row_filter: str | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
    source: str = "input",
    dry_run: bool = False,
) -> OverwriteResult:
    """Replace the partitions the rows fall into (dynamic) or the rows ``row_filter`` selects, in one
    ``overwrite`` snapshot on ``main`` (``overwrite.py``; Spark's dynamic ``INSERT OVERWRITE`` and
    ``INSERT OVERWRITE ... WHERE``).

    Args:
        table: A writable table (not read-only, format v1 or v2).
        data: The rows, as for :func:`append`.
        row_filter: None for a dynamic overwrite; else Iceberg's expression syntax (``"cat = 'a'"``, ``"*"``).
        snapshot_properties: Extra snapshot summary properties.
        policy: Retry policy (default: the table's ``commit.retry.*``).
        source: The rows' origin for errors.
        dry_run: Plan on the current head and report what would be replaced; write nothing.

    Returns:
        The snapshot (None when nothing was committed: a dry run, or a dynamic overwrite without rows), the
        files added and what was replaced.

    Raises:
        UsageError: The filter does not parse or names no column. RegisterError: a row outside the filter, or
            rows that do not fit the table. UnsupportedFormatError: the filter selects part of a data file.
        CommitConflictError: A commit since the start added files to the replaced partitions.
        CommitRetriesExhaustedError, CommitStateUnknownError: See ``commit_with_retry``.

    Example:
        >>> overwrite(table, rows)  # replace the days present in rows  # doctest: +SKIP
        >>> overwrite(table, rows, row_filter="cat = 'a'")  # doctest: +SKIP
    """
    data = conform_table(data, write_schema(table), source)
    table.check_writable()
    metadata = table.metadata
    scope = OverwriteScope.from_filter(metadata, row_filter) if row_filter is not None else None
    if scope is not None:
        scope.check_rows(data, source)
    groups = split_by_partition(metadata.spec(), metadata.schema(), data)
    scope = scope or OverwriteScope.dynamic(metadata, [g.partition for g in groups])
    head = main_head(metadata)
    types = partition_result_types(metadata.spec(), metadata.schemas)
    result = OverwriteResult(
        scope.mode, row_filter, dry_run, None, data.num_rows,
        input_partitions=[partition_json(metadata.spec(), types, g.partition) for g in groups],
    )  # fmt: skip
    if dry_run or (scope.mode == "dynamic" and not groups):
        live = live_files(table, head) if head is not None and dry_run else []
        result.removed = plan_removed(table, head, scope, live)
        result.replaced_partitions = describe_partitions(metadata, result.removed)
        return result
    written = write_groups(table, metadata, groups)
    staged = StagedOverwrite()

    def stage(tx: Transaction) -> StagedOverwrite:
        start_id = head.snapshot_id if head is not None else None
        return stage_overwrite(
            tx, table, start_id=start_id, scope=scope, added=written, properties=dict(snapshot_properties or {}),
            staged=staged,
        )  # fmt: skip

    made = lambda: [f.file_path for f in written] + staged.earlier_manifests + staged.manifests_written  # noqa: E731
    with discard_on_failure(table, made):
        commit_with_retry(table, stage, description=f"overwrite of {scope.describe()}", policy=policy)
    _delete(table, staged.earlier_manifests)  # attempts that lost the race
    result.snapshot_id, result.files_added, result.removed = staged.snapshot_id, written, staged.removed
    result.replaced_partitions = describe_partitions(table.metadata, staged.removed)
    return result
