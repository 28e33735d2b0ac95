"""Which delete files apply to a data file, by Iceberg's sequence-number rules: the index a compaction plans with.

Follows Java's ``DeleteFileIndex.forDataFile`` (1.10.2) for format versions 1 and 2 (deletion vectors, v3, are
refused upstream until their writing is supported):

* an **equality delete** applies to a data file whose data sequence number is strictly lower than the delete's,
  within the same spec and partition, or to every data file when the delete's spec is unpartitioned (a global
  delete);
* a **position delete** applies to a data file whose data sequence number is at most the delete's: a
  *file-scoped* one (``referenced_data_file`` set, or equal lower and upper bounds of ``file_path``) only to the
  file it names, a *partition-scoped* one to every data file of the same spec and partition (not pruned by path
  bounds, as Java since #9251).

Equality deletes are not pruned by column bounds here (Java prunes them with ``canContainEqDeletesForFile``):
attaching one that matches no row changes no row that a rewrite writes; it only counts towards
``delete-file-threshold`` where Java would not, which is noted in the plan.

Example:
    >>> index = DeleteIndex([DeleteEntry("d.parquet", "position", 0, (), 3, 1, referenced_path="f.parquet")])
    >>> [d.path for d in index.for_data_file("f.parquet", 0, (), data_sequence_number=3)]
    ['d.parquet']
    >>> index.for_data_file("g.parquet", 0, (), data_sequence_number=3)
    ()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import AttachedDelete

DeleteKind = Literal["position", "equality"]


@dataclass(frozen=True)
class DeleteEntry:
    """One live delete file of the starting snapshot.

    ``referenced_path`` is the one data file a file-scoped position delete names (its ``referenced_data_file``,
    or its ``file_path`` bounds when they are equal); None for partition-scoped and equality deletes.
    ``spec_unpartitioned`` marks a delete written under a spec without partition fields.
    """

    path: str
    content: DeleteKind
    spec_id: int
    partition: tuple[Any, ...]
    sequence_number: int
    record_count: int
    referenced_path: str | None = None
    spec_unpartitioned: bool = False
    equality_ids: tuple[int, ...] = ()

    def attached(self) -> AttachedDelete:
        return AttachedDelete(
            self.path, self.content, self.record_count, file_scoped=self.referenced_path is not None
        )


class DeleteIndex:
    """The deletes of one snapshot, looked up per data file (by path, by spec and partition, and global)."""

    def __init__(self, deletes: Iterable[DeleteEntry]) -> None:
        self._by_path: dict[str, list[DeleteEntry]] = {}
        self._by_partition: dict[tuple[int, tuple[Any, ...]], list[DeleteEntry]] = {}
        self._global: list[DeleteEntry] = []
        for entry in deletes:
            if entry.content == "position" and entry.referenced_path is not None:
                self._by_path.setdefault(entry.referenced_path, []).append(entry)
            elif entry.content == "equality" and entry.spec_unpartitioned:
                self._global.append(entry)
            else:
                self._by_partition.setdefault((entry.spec_id, entry.partition), []).append(entry)

    def for_data_file(
        self, path: str, spec_id: int, partition: tuple[Any, ...], *, data_sequence_number: int
    ) -> tuple[DeleteEntry, ...]:
        """The deletes that apply to one data file, in the order: by path, by partition, global.

        Args:
            path: the data file's path as the manifests hold it.
            spec_id, partition: the data file's spec and partition tuple.
            data_sequence_number: the data file's data sequence number (0 for a v1 table).
        """
        found = [e for e in self._by_path.get(path, ()) if e.sequence_number >= data_sequence_number]
        for entry in self._by_partition.get((spec_id, partition), ()):
            if applies(entry, data_sequence_number):
                found.append(entry)
        found.extend(e for e in self._global if e.sequence_number > data_sequence_number)
        return tuple(found)

    def all_deletes(self) -> tuple[DeleteEntry, ...]:
        """Every delete of the index, once."""
        entries = [e for es in self._by_path.values() for e in es]
        entries += [e for es in self._by_partition.values() for e in es]
        return tuple(entries + self._global)


def applies(entry: DeleteEntry, data_sequence_number: int) -> bool:
    """The sequence-number rule: position deletes at or above the file's number, equality deletes above it."""
    if entry.content == "position":
        return entry.sequence_number >= data_sequence_number
    return entry.sequence_number > data_sequence_number


def dangling_deletes(
    index: DeleteIndex, live_data: Iterable[tuple[str, int, tuple[Any, ...], int]]
) -> list[str]:
    """Delete files that apply to no live data file (Java's remove-dangling-deletes removes them).

    Args:
        index: the deletes of the snapshot after the rewrite.
        live_data: ``(path, spec_id, partition, data_sequence_number)`` of every live data file after it.
    """
    used: set[str] = set()
    for path, spec_id, partition, sequence in live_data:
        used.update(
            e.path for e in index.for_data_file(path, spec_id, partition, data_sequence_number=sequence)
        )
    return sorted({e.path for e in index.all_deletes()} - used)
