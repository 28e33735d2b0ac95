"""Registering existing Parquet files: ADD entries for files already sitting in the table's layout.

A file is registered only if Paimon would read it as it is: in the directory of its partition and
bucket (:mod:`.layout`), of columns the table reads (:mod:`.parquet_columns`), not already live, with
sequence numbers after the bucket's live ones (:mod:`.live_state`) and, in a fixed-bucket table,
holding only rows that hash to its bucket (:mod:`.bucketing`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon.arrow_types import arrow_type
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.bucketing import row_buckets
from airflow_lakeformat.core.paimon.write.data_file_meta import data_file_meta_from_parquet
from airflow_lakeformat.core.paimon.write.layout import (
    Layout,
    check_data_file_name,
    locate_in_layout,
    table_layout,
    table_relative_path,
)
from airflow_lakeformat.core.paimon.write.live_state import check_total_buckets, read_live_state


def _check_rows_in_bucket(table: Table, layout: Layout, full: str, bucket: int, where: str) -> None:
    with table.io.fs.open(full, "rb") as handle:
        pf = pq.ParquetFile(handle)
        present = [k for k in layout.bucket_keys if k in pf.schema_arrow.names]
        data = pf.read(columns=present)
    for key, dtype in zip(layout.bucket_keys, layout.bucket_key_types, strict=True):
        if key not in present:  # a missing (nullable) column reads as nulls
            data = data.append_column(key, pa.nulls(data.num_rows, arrow_type(dtype)))
    wrong = [
        b
        for b in row_buckets(data, layout.bucket_keys, layout.bucket_key_types, layout.bucket)
        if b != bucket
    ]
    if wrong:
        raise RegisterError(
            where,
            f"{len(wrong)} rows hash to other buckets (e.g. bucket {wrong[0]}) than the file's bucket-{bucket} "
            f"(bucket-key {', '.join(layout.bucket_keys)}, {layout.bucket} buckets)",
        )


def register_files(table: Table, paths: Sequence[str]) -> list[ManifestEntry]:
    """ADD entries for existing Parquet files in the table's layout, ready for ``Committer.commit``.

    Refuses primary-key tables, files outside the table's directory layout, files whose schema the
    table cannot read, files already live in the latest snapshot and (for fixed-bucket tables) files
    whose rows do not hash to their bucket.
    """
    layout = table_layout(table)
    located: list[tuple[str, str, bytes, int]] = []
    seen: set[str] = set()
    for path in paths:
        rel = table_relative_path(table, path)
        where = table.io.uri(table.io.join(table.root, rel))
        if rel in seen:
            raise RegisterError(where, "is listed twice")
        seen.add(rel)
        check_data_file_name(posixpath.basename(rel), where)
        partition, bucket = locate_in_layout(layout, rel, where)
        located.append((rel, where, partition, bucket))
    state = read_live_state(table, {p for _, _, p, _ in located})
    next_sequence: dict[tuple[bytes, int], int] = {}
    entries = []
    for rel, where, partition, bucket in located:
        if (partition, bucket, posixpath.basename(rel)) in state.names:
            raise RegisterError(where, "is already a live data file of the table")
        check_total_buckets(layout, state, partition, where)
        key = (partition, bucket)
        start = next_sequence.get(key)
        if start is None:
            start = state.max_sequence.get(key, -1) + 1 if layout.fixed else 0
        meta = data_file_meta_from_parquet(table, rel, min_sequence_number=start)
        if layout.fixed:
            _check_rows_in_bucket(table, layout, table.io.join(table.root, rel), bucket, where)
        next_sequence[key] = meta.max_sequence_number + 1
        entries.append(ManifestEntry.create(FileKind.ADD, partition, bucket, layout.total_buckets, meta))
    return entries
