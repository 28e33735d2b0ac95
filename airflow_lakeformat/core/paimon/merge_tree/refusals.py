"""What a primary-key compaction outside Paimon's JVM refuses, before anything is written.

A merge-tree compaction only merges files. Tables whose semantics need more at compaction time (a
changelog to emit, deletion vectors to apply and maintain, postponed buckets to distribute) or whose
files we cannot write are refused with :class:`~airflow_lakeformat.core.errors.UnsupportedFormatError`
naming the option, never half-handled (reference: ``paimon-pk-compaction.md`` section 3.8, Java's
``MergeTreeCompactManagerFactory``, ``SchemaValidation``).

Two checks:

* :func:`check_table` reads only the schema (options, keys, field types); it runs first, so a refused
  table is refused without reading a manifest.
* :func:`check_bucket_files` looks at one (partition, bucket)'s live files, once the plan has read them:
  one ``_TOTAL_BUCKETS`` per partition (a rescale in progress otherwise), no external paths, Parquet only,
  and every file of an older schema with the current schema's field list (no schema evolution is
  applied). Both run before the first file is written.

The merge engine's own options (sequence fields, partial-update, aggregation functions) are refused by
``merge_spec.MergeSpec.from_schema``; ``first-row`` is allowed in full mode only (batch readers skip level 0
and read levels >= 1 without merging, so its output must be the one max-level run), which the plan
enforces per bucket (:func:`check_first_row_output`).

Example:
    >>> check_table(table, "full")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.layout import PARQUET_EXTENSION

log = logging.getLogger(__name__)

MODES = ("full", "minor")
DYNAMIC_BUCKET = -1
POSTPONE_BUCKET = -2
WHAT = "primary-key compaction of a table with"

# Options whose mere presence (set to anything other than their off value) needs work we do not do.
_REFUSED_FLAGS: dict[str, str] = {
    "deletion-vectors.enabled": "deletion vectors must be applied on read and rewritten after a compaction",
    "row-tracking.enabled": "row ids are not maintained by a merge",
    "data-evolution.enabled": "files of partial columns are not merged",
    "sequence.snapshot-ordering": "the ordering key is the commit's snapshot id, not in the files",
    "chain-table.enabled": "chain tables keep deletes for the chain",
}
_REFUSED_SET: dict[str, str] = {
    "data-file.external-paths": "files written outside the table are not written here",
    "pk-clustering-override": "the clustering order replaces the key order",
}
_CHANGELOG_PRODUCERS = ("lookup", "full-compaction")


def _refuse(table: Table, problem: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(table.uri, f"{WHAT} {problem}")


def check_table(table: Table, mode: str) -> None:
    """Refuse a table (by its schema alone) that this compaction cannot compact safely.

    Args:
        table: the table, at its current schema.
        mode: ``"full"`` or ``"minor"``.

    Raises:
        UnsupportedFormatError: naming the option or property refused, with the reason.
        ValueError: an unknown ``mode``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be 'full' or 'minor', not {mode!r}")
    schema = table.schema
    options = schema.table_options
    if not schema.is_primary_key_table:
        raise UnsupportedFormatError(
            table.uri,
            "a primary-key compaction of a table without primary keys (append tables are bin-packed)",
        )
    producer = (options.get("changelog-producer") or "none").lower()
    if producer in _CHANGELOG_PRODUCERS:
        raise _refuse(
            table,
            f"changelog-producer={producer} (that compaction must emit the changelog; streaming consumers "
            "would miss every change it merges)",
        )
    for flag, why in _REFUSED_FLAGS.items():
        if parse_bool(options.get(flag) or "false"):
            raise _refuse(table, f"{flag}=true ({why})")
    for key, why in _REFUSED_SET.items():
        if (options.get(key) or "").strip():
            raise _refuse(table, f"{key} set ({why})")
    _check_buckets(table)
    if options.file_format != "parquet":
        raise _refuse(table, f"file.format={options.file_format} (only parquet files are written)")
    blobs = [f.name for f in schema.fields if f.type.root == "BLOB"]
    if blobs:
        raise _refuse(table, f"BLOB fields {blobs} (blob files are not rewritten)")
    if options.get("commit.strict-mode.last-safe-snapshot"):
        log.warning(
            "%s: commit.strict-mode.last-safe-snapshot is set: the writers' next commit aborts after this COMPACT",
            table.uri,
        )


def _check_buckets(table: Table) -> None:
    schema = table.schema
    bucket = schema.table_options.bucket
    if bucket == POSTPONE_BUCKET:
        raise _refuse(table, "bucket=-2 (postponed rows are moved into buckets by Paimon's own compaction)")
    if bucket < POSTPONE_BUCKET or bucket == 0:
        raise _refuse(table, f"bucket={bucket}")
    missing = [k for k in schema.partition_keys if k not in schema.primary_keys]
    if bucket == DYNAMIC_BUCKET and missing:
        raise _refuse(
            table,
            f"bucket=-1 and partition keys {missing} outside the primary key (cross-partition upsert keeps a "
            "global key index)",
        )


def check_bucket_files(table: Table, entries: Iterable[ManifestEntry]) -> None:
    """Refuse files a merge cannot read or rewrite as they are: external, not Parquet, or of another field list.

    Args:
        table: the table.
        entries: live ADD entries of one or more buckets.

    Raises:
        UnsupportedFormatError: naming the file and the reason.
        MaintenanceRefusedError: a file of an older schema whose field list differs (``kv_read``'s rule).
    """
    from airflow_lakeformat.core.paimon.merge_tree.kv_read import check_file_schema

    current = table.schema
    checked: set[int] = {current.id}
    for entry in entries:
        f = entry.file
        if f.external_path:
            raise _refuse(table, f"data file {f.file_name} at an external path ({f.external_path})")
        if not f.file_name.endswith(PARQUET_EXTENSION):
            raise _refuse(table, f"data file {f.file_name} (only parquet files are read)")
        if f.schema_id not in checked:
            # the reader's own rule, applied before anything is written (MaintenanceRefusedError)
            check_file_schema(table, entry, current, f"{table.uri}: data file {f.file_name}")
            checked.add(f.schema_id)


def check_total_buckets(
    table: Table, by_partition: Mapping[bytes, set[int | None]], describe: Callable[[bytes], object]
) -> None:
    """Refuse a partition whose live files disagree on ``_TOTAL_BUCKETS`` (a rescale in progress).

    Args:
        table: the table.
        by_partition: partition bytes -> the ``_TOTAL_BUCKETS`` values of its live files.
        describe: turns partition bytes into text for the message (``PartitionCodec.to_json``).
    """
    for partition, values in by_partition.items():
        if len(values) > 1:
            shown = sorted(str(v) for v in values)
            raise _refuse(
                table,
                f"partition {describe(partition)} whose files have "
                f"several _TOTAL_BUCKETS values {shown} (a bucket rescale is in progress)",
            )


def check_output_format(table: Table, level: int) -> None:
    """Refuse an output level whose file format (``file.format.per.level``, else ``file.format``) is not Parquet."""
    from airflow_lakeformat.core.paimon.merge_tree.kv_files import level_format

    file_format = level_format(table.schema, level)
    if file_format != "parquet":
        raise _refuse(table, f"file format {file_format} at level {level} (only parquet files are written)")


def check_first_row_output(table: Table, engine: str, output_level: int, max_level: int, where: str) -> None:
    """``first-row`` readers read levels >= 1 without merging: its compaction must write the one max-level run.

    Raises:
        UnsupportedFormatError: when a first-row unit's output level is below the bucket's max level.
    """
    if engine == "first-row" and output_level != max_level:
        raise _refuse(
            table,
            f"merge-engine=first-row: {where} would be compacted to level {output_level}, below the max level "
            f"{max_level} (first-row tables are compacted in full mode only: use mode='full' / --full)",
        )
