"""What the latest snapshot says about the partitions files are added to: live names, sequence numbers, bucket counts.

* **Sequence numbers.** ``RowDataFileSequenceNumberTracker`` gives a file ``[counter - rows,
  counter - 1]`` of its writer's counter, which ``AppendOnlyWriter`` starts at the restored maximum
  + 1. Unaware-bucket writers never restore (``AppendFileStoreWrite`` forces
  ``ignorePreviousFiles``), so they count from 0; fixed-bucket writers restore the bucket's live
  files and continue after their maximum. We do the same, one counter per partition and bucket.
* **Bucket counts.** A fixed-bucket partition keeps the bucket count its live files were written with
  (``_TOTAL_BUCKETS``): new files for it under another count are refused until it is rescaled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, merge_entries
from airflow_lakeformat.core.paimon.manifest_merge import partition_may_contain
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.layout import Layout, table_layout


@dataclass
class LiveState:
    """Live files of some partitions: their names, the highest sequence number per bucket, bucket counts."""

    names: set[tuple[bytes, int, str]] = field(default_factory=set)
    max_sequence: dict[tuple[bytes, int], int] = field(default_factory=dict)
    total_buckets: dict[bytes, int] = field(default_factory=dict)


def read_live_state(table: Table, partitions: Iterable[bytes]) -> LiveState:
    """Live files of the latest snapshot in these partitions (reads only manifests that may hold them)."""
    state = LiveState()
    wanted = set(partitions)
    latest = table.snapshot_manager.latest_snapshot()
    if latest is None or not wanted:
        return state
    base, delta = table.data_manifests(latest)
    types = table.schema.partition_types
    relevant = [m for m in base + delta if any(partition_may_contain(m, p, types) for p in wanted)]
    merged: dict[tuple[Any, ...], ManifestEntry] = {}
    for entries in table.read_manifests(relevant, f"snapshot {latest.id}"):
        merge_entries((e for e in entries if e.partition in wanted), merged)
    for entry in merged.values():
        if entry.kind is not FileKind.ADD:
            continue
        state.names.add((entry.partition, entry.bucket, entry.file.file_name))
        key = (entry.partition, entry.bucket)
        state.max_sequence[key] = max(state.max_sequence.get(key, -1), entry.file.max_sequence_number)
        if entry.total_buckets is not None:
            state.total_buckets.setdefault(entry.partition, entry.total_buckets)
    return state


def check_total_buckets(layout: Layout, state: LiveState, partition: bytes, where: str) -> None:
    """Refuses new files for a fixed-bucket partition whose live files have another bucket count."""
    existing = state.total_buckets.get(partition)
    if layout.fixed and existing is not None and existing != layout.bucket:
        raise RegisterError(
            where,
            f"the partition was written with {existing} buckets but the table now says {layout.bucket}; "
            "rescale the partition first",
        )


def next_sequence_numbers(table: Table, keys: Iterable[tuple[bytes, int]]) -> dict[tuple[bytes, int], int]:
    """The first sequence number of new files per (partition, bucket), as Paimon's append writers pick it.

    Fixed-bucket tables continue after the bucket's live maximum; unaware-bucket writers never
    restore, so they start at 0. Refuses a partition whose live files were written with another
    bucket count.
    """
    layout = table_layout(table)
    wanted = set(keys)
    if not layout.fixed:
        return dict.fromkeys(wanted, 0)
    state = read_live_state(table, {partition for partition, _ in wanted})
    starts = {}
    for partition, bucket in wanted:
        where = table.io.uri(table.io.join(table.root, layout.paths.bucket_directory(partition, bucket)))
        check_total_buckets(layout, state, partition, where)
        starts[(partition, bucket)] = state.max_sequence.get((partition, bucket), -1) + 1
    return starts
