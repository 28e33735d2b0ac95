"""Small primary-key tables for the merge-tree compaction tests, written without pypaimon.

Level-0 files are written with ``kv_files.write_kv`` (the compaction's own writer, at level 0, each file
relabelled APPEND as a writer's flush is) and committed as APPEND snapshots, so a test controls every
key, sequence number, row kind and bucket. Rows are read back the way a merge-on-read reader sees them:
every live file of a bucket read with ``read_kv``, merged with ``merge_kv`` (retractions dropped), then
rows of kind -U/-D left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.kv_files import read_kv, write_kv
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import (
    RETRACT_KINDS,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    kv_arrow_schema,
)
from airflow_lakeformat.core.paimon.table import Table

FIELDS = [
    {"name": "p", "type": "STRING NOT NULL"},
    {"name": "k", "type": "BIGINT NOT NULL"},
    {"name": "v", "type": "STRING"},
]
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
Row = tuple[int, str | None, int, int]  # key, value, sequence number, kind


def pk_table(root: Path, **options: str) -> Table:
    """A table partitioned by ``p`` with primary key ``(p, k)`` and 2 fixed buckets unless ``bucket`` is given."""
    return create_table(str(root), schema_from_fields(FIELDS, ["p"], ["p", "k"], {"bucket": "2", **options}))


def partition_bytes(table: Table, value: str) -> bytes:
    return binary_row.encode([value], list(table.schema.partition_types))


def kv_rows(table: Table, partition: str, rows: Iterable[Row]) -> pa.Table:
    """A KV table of ``rows`` (sorted by key here), in the schema's layout."""
    ordered = sorted(rows)
    schema = kv_arrow_schema(table.schema)
    return pa.table(
        {
            "_KEY_k": [r[0] for r in ordered],
            SEQUENCE_NUMBER: [r[2] for r in ordered],
            VALUE_KIND: [r[3] for r in ordered],
            "p": [partition] * len(ordered),
            "k": [r[0] for r in ordered],
            "v": [r[1] for r in ordered],
        },
        schema=schema,
    )


def level0_entries(
    table: Table, partition: str, bucket: int, rows: Sequence[Row], *, level: int = 0, total_buckets: int = 2
) -> list[ManifestEntry]:
    """Write ``rows`` (one per key) as one data file at ``level``; its ADD entry (not committed)."""
    metas = write_kv(
        table,
        table.schema,
        partition=partition_bytes(table, partition),
        bucket=bucket,
        total_buckets=total_buckets,
        level=level,
        data=[kv_rows(table, partition, rows)],
        target_file_size=128 << 20,
    )
    entries = []
    for meta in metas:
        if level == 0:
            meta.record["_FILE_SOURCE"] = int(FileSource.APPEND)
        entries.append(
            ManifestEntry.create(FileKind.ADD, partition_bytes(table, partition), bucket, total_buckets, meta)
        )
    return entries


def append(
    table: Table, partition: str, bucket: int, rows: Sequence[Row], *, user: str = "writer", level: int = 0
) -> int:
    """Commit one file of ``rows`` as an APPEND snapshot; returns its id."""
    entries = level0_entries(table, partition, bucket, rows, level=level)
    return Committer(table, user).commit(entries).snapshot.id


def live(table: Table) -> list[ManifestEntry]:
    latest = table.snapshot_manager.latest_snapshot()
    return live_entries(table, latest) if latest is not None else []


def visible_rows(table: Table) -> list[tuple[Any, ...]]:
    """(p, k, v, sequence) of every row a merge-on-read batch reader returns, sorted."""
    from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
    from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

    spec = MergeSpec.from_schema(table.schema, table.uri)
    buckets: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for entry in live(table):
        buckets.setdefault((entry.partition, entry.bucket), []).append(entry)
    out: list[tuple[Any, ...]] = []
    for entries in buckets.values():
        merged = merge_kv(
            pa.concat_tables([read_kv(table, e, table.schema) for e in entries]), spec, drop_deletes=True
        )
        for row in merged.to_pylist():
            if row[VALUE_KIND] not in RETRACT_KINDS:
                out.append((row["p"], row["k"], row["v"], row[SEQUENCE_NUMBER]))
    return sorted(out, key=repr)


def levels_by_bucket(table: Table) -> dict[tuple[bytes, int], list[int]]:
    """The sorted levels of every bucket's live files."""
    out: dict[tuple[bytes, int], list[int]] = {}
    for entry in live(table):
        out.setdefault((entry.partition, entry.bucket), []).append(entry.file.level)
    return {key: sorted(levels) for key, levels in out.items()}


def listing(root: Path) -> list[str]:
    """Every file under the table's root, relative, sorted (to show a refusal wrote nothing)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
