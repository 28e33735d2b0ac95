"""The health report's model, the same for both formats: what a collector gives, what the report says.

A format's collector (``core/paimon/maintenance/health.py``, ``core/iceberg/maintenance/health.py``) reads
the table's METADATA only (snapshots, manifest lists, manifests, the expiry plan's dry run; never a data
file) and fills a :class:`HealthInputs`: the live files, one :class:`FileFacts` each (Iceberg) or summed
per compaction group while scanning, :class:`FileGroup` (Paimon: 100,000 files, no object each), the
manifests' sizes, the snapshots' times, the table's target sizes and retention, what snapshot (and Paimon partition) expiry would
remove. ``core/health/assess.py`` turns it into a :class:`TableHealth`: per-partition figures
(:class:`PartitionHealth`), the score (``core/health/score.py``) and the :class:`Recommendation` list.

``TableHealth.to_json()`` is the document ``lakeformat health --json`` prints::

    {"table", "format", "snapshotId", "score", "penalties": {"smallFiles", "deleteLoad", "positionDeletes"},
     "files": {"dataFiles", "dataBytes", "records", "smallFiles", "smallFileThreshold", "targetFileSize",
               "averageFileSize", "partitions"},
     "deletes": {"deleteFiles", "deleteBytes", "positionDeleteFiles", "positionDeleteRecords",
                 "equalityDeleteFiles", "equalityDeleteRecords", "deleteRecords", "maxSortedRuns",
                 "bucketsOverTrigger"},
     "fileSizes": {"edges", "counts", "targetFileSize", "smallFileThreshold"},
     "snapshots": {"count", "oldestAgeMs", "retention": {...}, "expirable", "expiryFiles", "expiryBytes",
                   "times", "nowMs", "retentionMs", "minRetained"},
     "manifests": {"count", "bytes", "averageBytes", "small", "targetBytes"},
     "metadataBytes", "expirablePartitions", "orphans": {"files", "bytes"} | null, "thresholds": {...},
     "partitions": [{"partition", "dataFiles", "dataBytes", "records", "smallFiles", "averageFileSize",
                     "deleteFiles", "deleteRecords", "sortedRuns"}],
     "recommendations": [{"operation", "reason", "metric", "value", "threshold", "expected", "arguments"}],
     "policy": {"source", "table", "levels", "thresholds", "operations", "suppressed": [{"operation",
                "reason", "rule"}]} | null}

(``policy``: the health policy applied, ``core/health/policy.py``; null without one.)

The charts of the HTML report (``core/health/charts.py``) need two more things, :class:`ChartFacts`:

- ``fileSizes``: a histogram of the live DATA files' sizes (from the manifests, as every measure).
  Log-spaced buckets: ``edges`` are powers of 2 (of 4 when that makes more than 20 buckets) from the largest
  one at or below the smallest file to the smallest one above both the largest file and the target size,
  so the target always lies inside; ``counts[i]`` is the number of files with
  ``edges[i] <= size < edges[i+1]`` (an empty file counts in the first bucket). No data file: both empty.
- ``snapshots.times``: the commit times (ms, ascending) the collector read (``HealthInputs.snapshot_times_ms``,
  possibly fewer than ``count`` or none), ``nowMs`` the time of the report, ``retentionMs`` the age past
  which the table's retention expires a snapshot and ``minRetained`` the snapshots it always keeps (Iceberg
  ``history.expire.max-snapshot-age-ms`` / ``min-snapshots-to-keep``, Paimon ``snapshot.time-retained`` /
  ``snapshot.num-retained.min``; None when the retention names neither).

This module is neutral: it imports no format.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_lakeformat.core.formats import TableFormat
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.maintenance.results import human_bytes
from airflow_lakeformat.core.units import parse_duration

Operation = Literal[
    "compact_data",
    "compact_deletes",
    "compact_manifests",
    "expire_snapshots",
    "remove_orphan_files",
    "expire_partitions",
]


@dataclass(frozen=True)
class FileFacts:
    """One live file as the manifests describe it.

    Attributes:
        partition: the partition as text (``dt=2024-01-01/h=3``; ``""`` unpartitioned).
        content: ``data``, ``position-deletes`` or ``equality-deletes``.
        records: records of a data file; rows a delete file deletes.
        size: bytes.
        bucket: Paimon's bucket (None for Iceberg).
        level: Paimon's LSM level (None for Iceberg).
        delete_records: Paimon: the DELETE (-U/-D) records the file's metadata counts (0 when unknown).
    """

    partition: str
    content: str
    records: int
    size: int
    bucket: int | None = None
    level: int | None = None
    delete_records: int = 0


@dataclass
class FileGroup:
    """The live data files of one compaction group, summed as a collector scans them (Paimon: a (partition,
    bucket); 100,000 files of 50 groups make 50 of these instead of 100,000 :class:`FileFacts`).

    Attributes:
        partition, bucket: as in :class:`FileFacts`.
        sizes: each data file's size (the small-file count and the size histogram need every one).
        records: the files' records.
        delete_records: the DELETE records their metadata counts (Paimon).
        level0: files at Paimon's LSM level 0.
        levels: the other levels the files are at (sorted runs: ``level0 + len(levels)``).
    """

    partition: str
    bucket: int | None
    sizes: list[int] = field(default_factory=list)
    records: int = 0
    delete_records: int = 0
    level0: int = 0
    levels: set[int | None] = field(default_factory=set)

    @property
    def sorted_runs(self) -> int:
        """Paimon's sorted runs: each level-0 file, plus one per non-empty higher level."""
        return self.level0 + len(self.levels)

    def add(self, f: FileFacts) -> None:
        """Count one data file in."""
        self.sizes.append(f.size)
        self.records += f.records
        self.delete_records += f.delete_records
        if f.level == 0:
            self.level0 += 1
        else:
            self.levels.add(f.level)


@dataclass(frozen=True)
class HealthInputs:
    """What a format's collector read from the metadata.

    Attributes:
        format, table, snapshot_id: the table and the snapshot described (None: no snapshot).
        files: the live files of the snapshot the collector gives one by one (Iceberg: every one).
        groups: the live data files it summed by compaction group instead (Paimon); a file is in ``files``
            or in ``groups``, never both.
        manifest_sizes: the size of each manifest the snapshot reads.
        manifest_target_size: the manifest target size; a manifest under it is small.
        snapshot_count: the snapshots the table keeps.
        oldest_snapshot_ms: the commit time of the oldest of them (None: no snapshot).
        now_ms: the time of the report.
        target_file_size: the table's target data file size.
        thresholds: the resolved thresholds.
        retention: the table's snapshot retention settings as the format names them (reported as is).
        expirable_snapshots, expiry_files, expiry_bytes: what the expiry plan (dry run) would remove.
        primary_key: a Paimon primary-key table (its delete load is its sorted runs).
        expirable_partitions: partitions past ``partition.expiration-time`` (None: no expiration set).
        metadata_bytes: bytes of the table's metadata files (None when not measured).
        orphan_files, orphan_bytes: what the orphan cleanup's dry run found (None: not asked, ``--orphans``).
        orphan_arguments: the facade arguments of that dry run (``older_than``), repeated in the recommendation.
        delete_arguments: the ``compact_data`` arguments that apply and drop the table's deletes (the format's
            own: Iceberg's ``delete-file-threshold`` and ``remove-dangling-deletes`` options, a Paimon
            primary-key table's ``mode="full"``).
        compact_data_options: options every ``compact_data`` recommendation carries (Iceberg with delete files:
            ``remove-dangling-deletes``, so a compaction leaves no delete file behind).
        delete_files_compactable: the format rewrites delete files on their own (``compact_deletes``: Iceberg's
            ``rewrite_position_delete_files``).
        snapshot_times_ms: commit times of the snapshots the collector read, ascending (the report's
            snapshot chart; empty when not read).
        expire_limit: the most snapshots one expiry run removes (Paimon ``snapshot.expire.limit``; None: no
            limit), which bounds ``expirable_snapshots``.
        expirable_unlimited: the snapshots past the retention without that limit (None: not computed); the
            recommendation then adds ``expiry_arguments`` (the facade's ``max_deletes``) so that one run
            expires them all.
    """

    format: TableFormat
    table: str
    snapshot_id: int | None
    files: list[FileFacts]
    manifest_sizes: list[int]
    manifest_target_size: int
    snapshot_count: int
    oldest_snapshot_ms: int | None
    now_ms: int
    target_file_size: int
    thresholds: Thresholds
    retention: dict[str, Any] = field(default_factory=dict)
    expirable_snapshots: int = 0
    expiry_files: int = 0
    expiry_bytes: int = 0
    primary_key: bool = False
    expirable_partitions: list[str] | None = None
    metadata_bytes: int | None = None
    orphan_files: int | None = None
    orphan_bytes: int | None = None
    orphan_arguments: dict[str, Any] = field(default_factory=dict)
    delete_arguments: dict[str, Any] = field(default_factory=dict)
    compact_data_options: dict[str, str] = field(default_factory=dict)
    delete_files_compactable: bool = False
    snapshot_times_ms: list[int] = field(default_factory=list)
    groups: list[FileGroup] = field(default_factory=list)
    expire_limit: int | None = None
    expirable_unlimited: int | None = None
    expiry_arguments: dict[str, Any] = field(default_factory=dict)


#: At most this many buckets with a step of 2; beyond, the step is 4.
MAX_DOUBLING_BUCKETS = 20


@dataclass(frozen=True)
class FileSizeHistogram:
    """Live data files by size, in log-spaced buckets (the module docstring gives the rule).

    Example:
        >>> h = FileSizeHistogram.of([1000, 1500, 3000], target_file_size=4096, small_file_threshold=3072)
        >>> (h.edges, h.counts)
        ([512, 1024, 2048, 4096, 8192], [1, 1, 1, 0])
    """

    edges: list[int]
    counts: list[int]
    target_file_size: int
    small_file_threshold: int

    @classmethod
    def of(
        cls, sizes: Sequence[int], *, target_file_size: int, small_file_threshold: int
    ) -> FileSizeHistogram:
        """The histogram of ``sizes`` (bytes) with the table's target and small-file threshold.

        Args:
            sizes: the live data files' sizes.
            target_file_size: the table's target size (it lies inside the edges).
            small_file_threshold: the size under which a file is small.
        """
        if not sizes:
            return cls([], [], target_file_size, small_file_threshold)
        # Files by floor(log2(size)) (0 for sizes <= 1): the bit lengths, counted in C.
        by_log = Counter(map(int.bit_length, sizes))
        if 0 in by_log:
            by_log[1] += by_log.pop(0)
        low = min(by_log) - 1
        high = max(max(by_log) - 1, _log2(target_file_size)) + 1
        step = 1 if high - low <= MAX_DOUBLING_BUCKETS else 2
        high = low + -(-(high - low) // step) * step
        edges = [1 << e for e in range(low, high + 1, step)]
        counts = [0] * (len(edges) - 1)
        for bits, n in by_log.items():
            counts[(bits - 1 - low) // step] += n
        return cls(edges, counts, target_file_size, small_file_threshold)

    def to_json(self) -> dict[str, Any]:
        return {
            "edges": self.edges,
            "counts": self.counts,
            "targetFileSize": self.target_file_size,
            "smallFileThreshold": self.small_file_threshold,
        }


def _log2(n: int) -> int:
    """``floor(log2(n))`` exactly (0 for n <= 1)."""
    return max(1, n).bit_length() - 1


def retention_limits(retention: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(retentionMs, minRetained)`` from the retention settings as the formats name them (None: not named,
    or not a duration/number)."""
    age: int | None = None
    raw_age = retention.get("history.expire.max-snapshot-age-ms", retention.get("snapshot.time-retained"))
    try:
        if raw_age is not None:
            text = str(raw_age).strip()
            age = int(text) if text.isdigit() else int(parse_duration(text).total_seconds() * 1000)
    except ValueError:
        age = None
    raw_min = retention.get(
        "history.expire.min-snapshots-to-keep", retention.get("snapshot.num-retained.min")
    )
    keep = int(raw_min) if raw_min is not None and str(raw_min).strip().isdigit() else None
    return age, keep


@dataclass(frozen=True)
class ChartFacts:
    """What the report's charts need beyond the measures: the file-size histogram and the snapshots' times."""

    file_sizes: FileSizeHistogram
    snapshot_times_ms: list[int]
    now_ms: int | None
    retention_ms: int | None
    min_retained: int | None

    @classmethod
    def of(cls, inputs: HealthInputs) -> ChartFacts:
        """The facts of ``inputs`` (the small-file threshold as ``assess`` computes it)."""
        age, keep = retention_limits(inputs.retention)
        return cls(
            file_sizes=FileSizeHistogram.of(
                [f.size for f in inputs.files if f.content == "data"]
                + [s for g in inputs.groups for s in g.sizes],
                target_file_size=inputs.target_file_size,
                small_file_threshold=int(inputs.target_file_size * inputs.thresholds.small_file_ratio),
            ),
            snapshot_times_ms=sorted(inputs.snapshot_times_ms),
            now_ms=inputs.now_ms,
            retention_ms=age,
            min_retained=keep,
        )

    def snapshot_json(self) -> dict[str, Any]:
        """The keys added to the document's ``snapshots`` section."""
        return {
            "times": self.snapshot_times_ms,
            "nowMs": self.now_ms,
            "retentionMs": self.retention_ms,
            "minRetained": self.min_retained,
        }


@dataclass(frozen=True)
class Recommendation:
    """One operation the table needs: which measure crossed which threshold, and what the operation changes.

    ``arguments`` are the keyword arguments of the facade method that fix it:
    ``getattr(table.maintenance, r.operation)(**r.arguments)`` (e.g. ``{"dry_run": False}`` for an expiry,
    Iceberg's ``{"options": {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}}`` when deletes
    must be applied, Paimon's ``{"mode": "full"}`` to drop DELETE records).
    """

    operation: Operation
    reason: str
    metric: str
    value: float
    threshold: float
    expected: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "reason": self.reason,
            "metric": self.metric,
            "value": self.value,
            "threshold": self.threshold,
            "expected": self.expected,
            "arguments": self.arguments,
        }


@dataclass(frozen=True)
class PartitionHealth:
    """The figures of one partition (``sorted_runs``: the most sorted runs of a bucket, Paimon PK tables)."""

    partition: str
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    delete_files: int
    delete_records: int
    sorted_runs: int | None = None

    @property
    def average_file_size(self) -> int:
        return self.data_bytes // self.data_files if self.data_files else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "dataFiles": self.data_files,
            "dataBytes": self.data_bytes,
            "records": self.records,
            "smallFiles": self.small_files,
            "averageFileSize": self.average_file_size,
            "deleteFiles": self.delete_files,
            "deleteRecords": self.delete_records,
            "sortedRuns": self.sorted_runs,
        }


@dataclass(frozen=True)
class TableHealth:
    """The health report of one table (see the module docstring for the document).

    Attributes:
        score: 0-100 (``core/health/score.py``); 100 with no penalty.
        penalties: the points each measure took off.
        files, deletes, snapshots, manifests: the measures by section, camelCase keys.
        partitions: per-partition figures, by partition text.
        recommendations: the operations the table needs, in the order to run them.
        charts: the file-size histogram and snapshot times of the report's charts (None: not computed;
            the document then has an empty histogram and no times).
    """

    format: TableFormat
    table: str
    snapshot_id: int | None
    score: int
    penalties: dict[str, float]
    files: dict[str, Any]
    deletes: dict[str, Any]
    snapshots: dict[str, Any]
    manifests: dict[str, Any]
    metadata_bytes: int | None
    expirable_partitions: list[str] | None
    orphans: dict[str, Any] | None
    thresholds: Thresholds
    partitions: list[PartitionHealth]
    recommendations: list[Recommendation]
    charts: ChartFacts | None = None
    policy: dict[str, Any] | None = None

    @property
    def operations(self) -> list[str]:
        """The recommended operations' names."""
        return [r.operation for r in self.recommendations]

    def to_json(self) -> dict[str, Any]:
        charts = self.charts
        if charts is None:
            charts = ChartFacts(
                FileSizeHistogram.of(
                    [],
                    target_file_size=self.files.get("targetFileSize", 0),
                    small_file_threshold=self.files.get("smallFileThreshold", 0),
                ),
                [],
                None,
                *retention_limits(self.snapshots.get("retention") or {}),
            )
        return {
            "table": self.table,
            "format": self.format,
            "snapshotId": self.snapshot_id,
            "score": self.score,
            "penalties": self.penalties,
            "files": self.files,
            "deletes": self.deletes,
            "fileSizes": charts.file_sizes.to_json(),
            "snapshots": {**self.snapshots, **charts.snapshot_json()},
            "manifests": self.manifests,
            "metadataBytes": self.metadata_bytes,
            "expirablePartitions": self.expirable_partitions,
            "orphans": self.orphans,
            "thresholds": self.thresholds.to_json(),
            "partitions": [p.to_json() for p in self.partitions],
            "recommendations": [r.to_json() for r in self.recommendations],
            "policy": self.policy,
        }

    def summary(self) -> str:
        """One line: score, files, small files, and the recommended operations (or ``healthy``).

        Example:
            >>> open_table("/wh/db.db/t").health().summary()  # doctest: +SKIP
            '/wh/db.db/t (paimon): score 60; 12 data files (3.1 KiB), 12 small; recommends compact_data'
        """
        todo = ", ".join(self.operations) or "nothing (healthy)"
        return (
            f"{self.table} ({self.format}): score {self.score}; {self.files['dataFiles']} data files "
            f"({human_bytes(self.files['dataBytes'])}), {self.files['smallFiles']} small; recommends {todo}"
        )

    def __repr__(self) -> str:
        return f"<TableHealth {self.summary()}>"
