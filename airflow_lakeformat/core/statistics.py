"""One model of a table's statistics for both formats: :class:`TableStatistics`, the health report's seed.

What a maintainer asks of a table before and after maintenance: how many snapshots it keeps, how many
live data files (and bytes, records, partitions) its current snapshot reads, how many delete files and
manifests, and how many of the data files are *small*. Each format computes the inputs from its own
metadata (``core/paimon/summary.py``, ``core/iceberg/metadata/inspect.py``) and builds the model with
:meth:`TableStatistics.build`, so the counting and the small-file rule below exist once.

**A small file** is a live data file under 75% of the table's target file size
(:data:`SMALL_FILE_RATIO`): the ``min-file-size`` default of Java Iceberg's bin-pack rewrite planner
(``SizeBasedFileRewritePlanner.MIN_FILE_SIZE_DEFAULT_RATIO = 0.75``), which selects exactly these files
for ``rewrite_data_files``. The target file size is the table's own setting, else its format's default:
Iceberg ``write.target-file-size-bytes`` (512 MiB, ``TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT``);
Paimon ``target-file-size`` (``CoreOptions.targetFileSize(hasPrimaryKey)``: 128 MiB for a primary-key
table, 256 MiB for an append table). Paimon's own compaction picks files under 70% of it
(``CoreOptions.compactionFileSize``); the statistics use the one definition for both formats so the two
can be compared.

This module is neutral: it imports no format.

Example:
    >>> stats = TableStatistics.build(
    ...     format="iceberg", table="db.events", snapshot_id=7, snapshot_count=3,
    ...     target_file_size=512 * 1024**2, data_files=[(1024, 10, ("a",)), (600 * 1024**2, 99, ("b",))],
    ...     delete_files=[], manifests=[4096])
    >>> (stats.small_file_count, stats.partition_count, stats.small_file_share)
    (1, 2, 0.5)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from airflow_lakeformat.core.formats import TableFormat
from airflow_lakeformat.core.maintenance.results import human_bytes

#: A live data file under this share of the table's target file size is small (Java Iceberg's
#: ``SizeBasedFileRewritePlanner`` ``min-file-size`` default: 0.75 x target).
SMALL_FILE_RATIO = 0.75


def small_file_threshold(target_file_size: int) -> int:
    """The size in bytes below which a data file is small: 75% of ``target_file_size``, rounded down."""
    return int(target_file_size * SMALL_FILE_RATIO)


@dataclass(frozen=True)
class TableStatistics:
    """File counts and sizes of one snapshot of a table, and its small files, the same for both formats.

    Attributes:
        format: ``"paimon"`` or ``"iceberg"``.
        table: the table's URI or catalog identifier.
        snapshot_id: the snapshot the file figures describe (the current one unless asked otherwise);
            None for a table without snapshots (every figure below but ``snapshot_count`` is then 0).
        snapshot_count: snapshots the table keeps (Paimon: snapshot files of the branch; Iceberg: the
            metadata's snapshot list, every branch and tag).
        data_file_count: live data files (Iceberg content ``data``; every Paimon data file, all levels).
        data_file_bytes: their total size.
        record_count: the records their metadata counts, before deletes are applied (a Paimon
            primary-key table's levels are not merged: an upper bound of its rows).
        partition_count: distinct partition values among the live data files (1 for an unpartitioned
            table with files; Iceberg counts a value per partition spec).
        delete_file_count: live delete files: Iceberg position and equality deletes (deletion vectors
            included); Paimon deletion-vector index files. Paimon's DELETE rows inside data files of a
            primary-key table are records, not files, and are not counted here.
        delete_file_bytes: their total size.
        manifest_count: manifests the snapshot reads (Iceberg: data and delete manifests of its manifest
            list; Paimon: base and delta data manifests).
        manifest_bytes: their total size.
        target_file_size: the table's target data file size in bytes (its setting or the format's
            default, see the module docstring).
        small_file_threshold: ``target_file_size * 0.75``: a data file below it is small.
        small_file_count: live data files below ``small_file_threshold``.
    """

    format: TableFormat
    table: str
    snapshot_id: int | None
    snapshot_count: int
    data_file_count: int
    data_file_bytes: int
    record_count: int
    partition_count: int
    delete_file_count: int
    delete_file_bytes: int
    manifest_count: int
    manifest_bytes: int
    target_file_size: int
    small_file_threshold: int
    small_file_count: int

    @classmethod
    def build(
        cls,
        *,
        format: TableFormat,
        table: str,
        snapshot_id: int | None,
        snapshot_count: int,
        target_file_size: int,
        data_files: Iterable[tuple[int, int, Hashable]],
        delete_files: Iterable[int],
        manifests: Iterable[int],
    ) -> TableStatistics:
        """The statistics from each format's raw figures, applying the one small-file rule.

        Args:
            format: the table's format.
            table: its URI or identifier.
            snapshot_id: the snapshot described, None for a table without one.
            snapshot_count: how many snapshots the table keeps.
            target_file_size: the table's target file size in bytes.
            data_files: ``(file size, record count, partition key)`` of each live data file; the key is
                any hashable value that is equal for files of one partition.
            delete_files: the size of each live delete file.
            manifests: the size of each manifest the snapshot reads.

        Returns:
            The statistics.

        Example:
            >>> TableStatistics.build(format="paimon", table="/wh/t", snapshot_id=None, snapshot_count=0,
            ...     target_file_size=128 << 20, data_files=[], delete_files=[], manifests=[]).summary()
            '/wh/t (paimon): no snapshot'
        """
        threshold = small_file_threshold(target_file_size)
        sizes, records, partitions = [], 0, set()
        for size, count, partition in data_files:
            sizes.append(size)
            records += count
            partitions.add(partition)
        deletes = list(delete_files)
        manifest_sizes = list(manifests)
        return cls(
            format=format,
            table=table,
            snapshot_id=snapshot_id,
            snapshot_count=snapshot_count,
            data_file_count=len(sizes),
            data_file_bytes=sum(sizes),
            record_count=records,
            partition_count=len(partitions),
            delete_file_count=len(deletes),
            delete_file_bytes=sum(deletes),
            manifest_count=len(manifest_sizes),
            manifest_bytes=sum(manifest_sizes),
            target_file_size=target_file_size,
            small_file_threshold=threshold,
            small_file_count=sum(1 for size in sizes if size < threshold),
        )

    @property
    def small_file_share(self) -> float:
        """Small data files over all live data files (0.0 without data files), rounded to 4 places."""
        return round(self.small_file_count / self.data_file_count, 4) if self.data_file_count else 0.0

    def to_json(self) -> dict[str, Any]:
        """The fields in camelCase, plus ``smallFileShare``.

        Example:
            >>> table.statistics().to_json()["smallFileCount"]  # doctest: +SKIP
            4
        """
        return {
            "format": self.format,
            "table": self.table,
            "snapshotId": self.snapshot_id,
            "snapshotCount": self.snapshot_count,
            "dataFileCount": self.data_file_count,
            "dataFileBytes": self.data_file_bytes,
            "recordCount": self.record_count,
            "partitionCount": self.partition_count,
            "deleteFileCount": self.delete_file_count,
            "deleteFileBytes": self.delete_file_bytes,
            "manifestCount": self.manifest_count,
            "manifestBytes": self.manifest_bytes,
            "targetFileSize": self.target_file_size,
            "smallFileThreshold": self.small_file_threshold,
            "smallFileCount": self.small_file_count,
            "smallFileShare": self.small_file_share,
        }

    def summary(self) -> str:
        """One line: snapshots, data files, small files, delete files and manifests.

        Example:
            >>> table.statistics().summary()  # doctest: +SKIP
            '/wh/t (paimon): 4 snapshots; 3 data files (2.1 KiB, 3 records, 2 partitions); 3 small (100%,
            under 192.0 MiB); 0 delete files (0 B); 4 manifests (6.3 KiB)'
        """
        head = f"{self.table} ({self.format})"
        if self.snapshot_id is None:
            return f"{head}: no snapshot"
        return (
            f"{head}: {_count(self.snapshot_count, 'snapshot')}; "
            f"{_count(self.data_file_count, 'data file')} ({human_bytes(self.data_file_bytes)}, "
            f"{_count(self.record_count, 'record')}, {_count(self.partition_count, 'partition')}); "
            f"{self.small_file_count} small ({self.small_file_share:.0%}, under "
            f"{human_bytes(self.small_file_threshold)}); "
            f"{_count(self.delete_file_count, 'delete file')} ({human_bytes(self.delete_file_bytes)}); "
            f"{_count(self.manifest_count, 'manifest')} ({human_bytes(self.manifest_bytes)})"
        )

    def __repr__(self) -> str:
        return f"<TableStatistics {self.summary()}>"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
