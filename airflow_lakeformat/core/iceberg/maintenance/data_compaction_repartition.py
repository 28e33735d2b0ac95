"""Rewriting a group of files of an older partition spec into the current spec: the rows fanned out by partition.

Java's ``rewrite_data_files`` writes every group in the table's current spec (``output-spec-id`` defaults to it),
so files of an older spec come out re-partitioned: a file of spec 0 partitioned by ``category`` holds rows of
several ``bucket(4, id)`` / ``months(event_date)`` partitions of spec 2. Here (``data_compaction_rewrite.rewrite_group``
calls :func:`rewrite_repartitioned` for such groups):

1. Each input file's live rows are read as for any group (``read_live_rows``: current schema by field id,
   position deletes masked, equality deletes dropped).
2. Every batch is split by the current spec's partition values (``write.partitioned.split_by_partition``: the
   transforms with Java's semantics through ``pyiceberg-core``, a null value its own partition).
3. Each output partition has its own rolling writer (``_RollingWriter``: Parquet with field ids, a new file after
   ``split_size`` bytes of input, in proportion to the rows), so a group's rows are never all in memory; only one
   open file per output partition the group reaches.

The new files carry the current spec id and their partition; the ``replace`` commit is the same as for any group
(``data_compaction_commit``). The sort strategy on such a group is refused (typed) for now: its rows would have to
be sorted per output partition.

Example:
    >>> rewritten = rewrite_repartitioned(table, group, files)  # doctest: +SKIP
    >>> {f.spec_id for f in rewritten.outputs} == {table.metadata.default_spec_id}  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import (
    PositionDeletes,
    RewrittenFiles,
    _RollingWriter,
    equality_delete_keys,
    read_live_rows,
)
from airflow_lakeformat.core.iceberg.write.partitioned import split_by_partition

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

    from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def rewrite_repartitioned(
    table: IcebergTable,
    group: FileGroup,
    files: Mapping[str, DataFile],
) -> RewrittenFiles:
    """Read ``group``'s files with their deletes applied and write their rows in the current spec's partitions.

    Args:
        table: the table (its current schema, spec, properties and FileIO).
        group: a planned group holding files of an older spec (``data_compaction_plan``).
        files: the ``DataFile`` of every input and delete file of the group, by path.

    Returns:
        The new files (written, not committed, one or more per output partition) and row counts.

    Raises:
        UnsupportedFormatError: the group is to be sorted (the sort strategy).
    """
    if group.sort_keys:
        raise UnsupportedFormatError(
            table.name,
            "sorting files of an older partition spec into the current one is not supported yet; compact them "
            "with the bin-pack strategy first",
        )
    metadata = table.metadata
    spec, schema = metadata.spec(), metadata.schema()
    equality = {
        d.path: equality_delete_keys(table, files[d.path])
        for c in group.files
        for d in c.deletes
        if d.content == "equality"
    }
    result, deletes = RewrittenFiles(group), PositionDeletes(table)
    writers: dict[tuple[Any, ...], _RollingWriter] = {}
    try:
        for candidate in group.files:
            result.rows_read += candidate.record_count
            bytes_per_row = candidate.file_size / max(1, candidate.record_count)
            for batch in read_live_rows(table, candidate, files, equality, deletes):
                result.rows_written += batch.num_rows
                for part in split_by_partition(spec, schema, pa.Table.from_batches([batch])):
                    writer = writers.get(part.partition)
                    if writer is None:
                        writer = writers[part.partition] = _RollingWriter(
                            table, part.partition, group.split_size
                        )
                    for piece in part.rows.to_batches():
                        writer.write(piece, piece.num_rows * bytes_per_row)
        for writer in writers.values():
            writer.close()
    finally:
        result.outputs = [f for writer in writers.values() for f in writer.written]
        result.locations = [location for writer in writers.values() for location in writer.locations]
    return result
