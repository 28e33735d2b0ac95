"""From a collector's :class:`HealthInputs` to the :class:`TableHealth` report: measures, score, recommendations.

The rules (the thresholds are ``core/health/thresholds.py``'s, the score ``core/health/score.py``'s):

- ``compact_data`` (small files): a compaction group (Iceberg: a partition; Paimon append table: a
  (partition, bucket)) holding at least ``min-small-files`` small data files. Expected: those files rewritten
  into about ``ceil(bytes / target)`` files per group.
- ``compact_data`` (merge-on-read load): a Paimon primary-key bucket with at least ``max-sorted-runs`` sorted
  runs (the table's ``num-sorted-run.compaction-trigger``, the point where Paimon's writer compacts); or a
  partition whose delete records reach ``delete-ratio`` of its data records (Iceberg position and equality
  deletes, Paimon DELETE records): a compaction applies them.
- ``compact_deletes`` (Iceberg): a partition with at least ``min-small-files`` position-delete files while
  its delete ratio is under ``delete-ratio`` (rewriting the delete files is enough).
- ``compact_manifests``: at least ``max-small-manifests`` manifests under the manifest target size.
- ``expire_snapshots``: the expiry plan, a dry run with the table's own retention, would remove at least
  ``min-expirable-snapshots`` snapshots. Expected: its snapshot, file and byte counts. When the plan stopped
  at Paimon's ``snapshot.expire.limit`` (at most that many snapshots per run) short of what the retention
  expires, the arguments add ``max_deletes`` (the facade's limit of the run) to cover them all, and the
  expectation names both counts (the files and bytes are the limited plan's).
- ``remove_orphan_files`` (only when asked, ``health(orphans=True)`` / ``--orphans``): the orphan cleanup's
  dry run (the format's age rule: Paimon 1 day, Iceberg 3 days) finds at least ``min-orphan-files`` files.
- ``expire_partitions`` (Paimon): at least ``min-expirable-partitions`` partitions past
  ``partition.expiration-time`` (the partition expiry's dry run).

There is at most one ``compact_data`` recommendation: when several findings ask for it, their reasons and
expectations are joined and the first finding's metric is kept. Each recommendation carries the facade
``arguments`` that fix it (``getattr(table.maintenance, operation)(**arguments)``): ``{"dry_run": False}``
for the expiry; for Iceberg deletes ``options`` ``delete-file-threshold=1`` (every file with a delete is
rewritten) and ``remove-dangling-deletes=true`` (the deletes then left pointing at nothing are dropped);
Paimon's ``mode="full"`` for DELETE records.

Recommendations come in the order to run them: partitions first (fewer files to compact), then data and
deletes, manifests, snapshot expiry (it deletes what the others replaced), orphan cleanup last.

With a policy (``core/health/policy.py``, resolved for the table: :class:`AppliedPolicy`) the thresholds are
the policy's, and a recommendation whose operation the policy does not allow is removed and listed in the
document's ``policy.suppressed`` (``{"operation", "reason", "rule"}``: the finding's reason and the key
path, or table property, that left the operation out). The score is the table's, whatever the policy allows.

This module is neutral: it imports no format.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from airflow_lakeformat.core.health.model import (
    ChartFacts,
    FileFacts,
    FileGroup,
    HealthInputs,
    PartitionHealth,
    Recommendation,
    TableHealth,
)
from airflow_lakeformat.core.health.policy import AppliedPolicy
from airflow_lakeformat.core.health.score import health_score, ratio_load
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest
from airflow_lakeformat.core.maintenance.results import human_bytes

DELETE_CONTENTS = ("position-deletes", "equality-deletes")
GroupKey = tuple[str, int | None]  # (partition, bucket)


def compaction_groups(inputs: HealthInputs) -> dict[GroupKey, FileGroup]:
    """The live data files by compaction group: the collector's :class:`FileGroup` s with its data
    :class:`FileFacts` counted in."""
    groups: dict[GroupKey, FileGroup] = {}
    for g in inputs.groups:
        key = (g.partition, g.bucket)
        if key in groups:  # a collector may hand one group in parts
            merged = groups[key]
            merged.sizes += g.sizes
            merged.records += g.records
            merged.delete_records += g.delete_records
            merged.level0 += g.level0
            merged.levels |= g.levels
        else:
            groups[key] = FileGroup(g.partition, g.bucket, list(g.sizes), g.records, g.delete_records,
                                    g.level0, set(g.levels))  # fmt: skip
    for f in inputs.files:
        if f.content == "data":
            key = (f.partition, f.bucket)
            group = groups.get(key)
            if group is None:
                group = groups[key] = FileGroup(f.partition, f.bucket)
            group.add(f)
    return groups


def assess(inputs: HealthInputs, policy: AppliedPolicy | None = None) -> TableHealth:
    """The report: measures, per-partition figures, the score and the recommendations.

    Args:
        inputs: what the format's collector read.
        policy: the policy resolved for the table (its thresholds replace ``inputs.thresholds``; the
            operations it does not allow are suppressed), or None.
    """
    if policy is not None:
        inputs = replace(inputs, thresholds=policy.thresholds)
    t = inputs.thresholds
    small_limit = int(inputs.target_file_size * t.small_file_ratio)
    deletes = [f for f in inputs.files if f.content in DELETE_CONTENTS]
    groups = compaction_groups(inputs)
    small = {key: _small(g.sizes, small_limit) for key, g in groups.items()}
    small_groups = {
        key: found for key, found in small.items() if not inputs.primary_key and found[0] >= t.min_small_files
    }
    runs = {key: g.sorted_runs for key, g in groups.items()} if inputs.primary_key else {}
    over_trigger = {key: n for key, n in runs.items() if n >= t.max_sorted_runs}
    partitions = _partitions(groups, small, deletes, runs)
    data_files = sum(len(g.sizes) for g in groups.values())
    data_bytes = sum(sum(g.sizes) for g in groups.values())
    records = sum(g.records for g in groups.values())
    compactable_small = sum(n for n, _ in small_groups.values())
    deletes_section = _delete_section(inputs, groups, deletes, runs, over_trigger)
    score, penalties = _score(inputs, deletes_section, data_files, compactable_small, records, len(runs))
    manifests_small = sum(1 for n in inputs.manifest_sizes if n < inputs.manifest_target_size)
    recommendations = [
        *_partition_expiry(inputs),
        *_data_compaction(inputs, small_groups, over_trigger, partitions),
        *_manifest_compaction(inputs, manifests_small),
        *_snapshot_expiry(inputs),
        *_orphan_cleanup(inputs),
    ]
    recommendations, policy_section = _apply_policy(recommendations, policy)
    return TableHealth(
        format=inputs.format,
        table=inputs.table,
        snapshot_id=inputs.snapshot_id,
        score=score,
        penalties=penalties,
        files={
            "dataFiles": data_files,
            "dataBytes": data_bytes,
            "records": records,
            "smallFiles": sum(n for n, _ in small.values()),
            "compactableSmallFiles": compactable_small,
            "smallFileThreshold": small_limit,
            "targetFileSize": inputs.target_file_size,
            "averageFileSize": data_bytes // data_files if data_files else 0,
            "partitions": len(partitions),
        },
        deletes=deletes_section,
        snapshots=_snapshots(inputs),
        manifests=_manifest_section(inputs, manifests_small),
        metadata_bytes=inputs.metadata_bytes,
        expirable_partitions=inputs.expirable_partitions,
        orphans=None
        if inputs.orphan_files is None
        else {"files": inputs.orphan_files, "bytes": inputs.orphan_bytes},
        thresholds=t,
        partitions=partitions,
        recommendations=recommendations,
        policy=policy_section,
        charts=ChartFacts.of(inputs),
    )


def _small(sizes: list[int], small_limit: int) -> tuple[int, int]:
    """(how many, their bytes) of ``sizes`` under ``small_limit``."""
    found = [size for size in sizes if size < small_limit]
    return len(found), sum(found)


def _delete_section(
    inputs: HealthInputs,
    groups: dict[GroupKey, FileGroup],
    deletes: list[FileFacts],
    runs: dict[GroupKey, int],
    over_trigger: dict[GroupKey, int],
) -> dict[str, Any]:
    """The document's ``deletes`` section."""
    return {
        "deleteFiles": len(deletes),
        "deleteBytes": sum(f.size for f in deletes),
        "positionDeleteFiles": sum(1 for f in deletes if f.content == "position-deletes"),
        "positionDeleteRecords": sum(f.records for f in deletes if f.content == "position-deletes"),
        "equalityDeleteFiles": sum(1 for f in deletes if f.content == "equality-deletes"),
        "equalityDeleteRecords": sum(f.records for f in deletes if f.content == "equality-deletes"),
        "deleteRecords": sum(g.delete_records for g in groups.values()),
        "maxSortedRuns": max(runs.values()) if runs else None,
        "bucketsOverTrigger": len(over_trigger) if inputs.primary_key else None,
    }


def _score(
    inputs: HealthInputs,
    d: dict[str, Any],
    data_files: int,
    compactable_small: int,
    records: int,
    buckets: int,
) -> tuple[int, dict[str, float]]:
    """The score and its penalties (``d``: the ``deletes`` section; ``buckets``: a primary-key table's)."""
    ratio = inputs.thresholds.delete_ratio
    if inputs.primary_key:
        delete_load = d["bucketsOverTrigger"] / buckets if buckets else 0.0
        position_load = ratio_load(d["deleteRecords"], records, ratio)
    else:
        delete_load = ratio_load(d["equalityDeleteRecords"], records, ratio)
        position_load = ratio_load(d["positionDeleteRecords"] + d["deleteRecords"], records, ratio)
    return health_score(
        small=compactable_small / data_files if data_files else 0.0,
        deletes=delete_load,
        positions=position_load,
    )


def _apply_policy(
    recommendations: list[Recommendation], policy: AppliedPolicy | None
) -> tuple[list[Recommendation], dict[str, Any] | None]:
    """The recommendations the policy allows, and the document's ``policy`` section (None: no policy)."""
    if policy is None:
        return recommendations, None
    kept = [r for r in recommendations if policy.allows(r.operation)]
    suppressed = [
        {"operation": r.operation, "reason": r.reason, "rule": policy.rule}
        for r in recommendations
        if not policy.allows(r.operation)
    ]
    return kept, policy.to_json(suppressed)


def _partitions(
    groups: dict[GroupKey, FileGroup],
    small: dict[GroupKey, tuple[int, int]],
    deletes: list[FileFacts],
    runs: dict[GroupKey, int],
) -> list[PartitionHealth]:
    by_partition: dict[str, list[GroupKey]] = defaultdict(list)
    for key in groups:
        by_partition[key[0]].append(key)
    deletes_of: dict[str, list[FileFacts]] = defaultdict(list)
    for f in deletes:
        deletes_of[f.partition].append(f)
        by_partition.setdefault(f.partition, [])
    result = []
    for name in sorted(by_partition):
        keys = by_partition[name]
        part_deletes = deletes_of.get(name, [])
        part_runs = [runs[key] for key in keys if key in runs]
        result.append(
            PartitionHealth(
                partition=name,
                data_files=sum(len(groups[key].sizes) for key in keys),
                data_bytes=sum(sum(groups[key].sizes) for key in keys),
                records=sum(groups[key].records for key in keys),
                small_files=sum(small[key][0] for key in keys),
                delete_files=len(part_deletes),
                delete_records=sum(f.records for f in part_deletes)
                + sum(groups[key].delete_records for key in keys),
                sorted_runs=max(part_runs) if part_runs else None,
            )
        )
    return result


def _data_compaction(
    inputs: HealthInputs,
    small_groups: dict[GroupKey, tuple[int, int]],
    over_trigger: dict[GroupKey, int],
    partitions: list[PartitionHealth],
) -> list[Recommendation]:
    """At most one ``compact_data`` (its reasons joined, the first one's metric) and Iceberg's ``compact_deletes``."""
    t = inputs.thresholds
    found: list[Recommendation] = []
    if small_groups:
        worst = max(n for n, _ in small_groups.values())
        count = sum(n for n, _ in small_groups.values())
        size = sum(b for _, b in small_groups.values())
        after = sum(max(1, -(-b // inputs.target_file_size)) for _, b in small_groups.values())
        found.append(
            Recommendation(
                "compact_data",
                f"{len(small_groups)} partition(s) hold at least {t.min_small_files} small files "
                f"(under {human_bytes(int(inputs.target_file_size * t.small_file_ratio))})",
                "smallFilesPerPartition",
                worst,
                t.min_small_files,
                f"{count} small files ({human_bytes(size)}) rewritten into about {after}",
            )
        )
    if over_trigger:
        found.append(
            Recommendation(
                "compact_data",
                f"{len(over_trigger)} bucket(s) have at least {t.max_sorted_runs} sorted runs "
                "(num-sorted-run.compaction-trigger): reads merge them all",
                "sortedRunsPerBucket",
                max(over_trigger.values()),
                t.max_sorted_runs,
                f"the sorted runs of {len(over_trigger)} bucket(s) merged below the trigger",
            )
        )
    heavy = [p for p in partitions if p.records and p.delete_records / p.records >= t.delete_ratio]
    if heavy:
        found.append(
            Recommendation(
                "compact_data",
                f"{len(heavy)} partition(s) carry delete records of at least {t.delete_ratio:.0%} of their rows",
                "deleteRatioPerPartition",
                round(max(p.delete_records / p.records for p in heavy), 4),
                t.delete_ratio,
                f"{sum(p.delete_records for p in heavy)} delete records applied and dropped",
                _delete_arguments(inputs),
            )
        )
    out = [_merged(found, inputs)] if found else []
    many_deletes = [p for p in partitions if p.delete_files >= t.min_small_files and p not in heavy]
    if many_deletes and inputs.delete_files_compactable:
        out.append(
            Recommendation(
                "compact_deletes",
                f"{len(many_deletes)} partition(s) hold at least {t.min_small_files} delete files",
                "deleteFilesPerPartition",
                max(p.delete_files for p in many_deletes),
                t.min_small_files,
                f"{sum(p.delete_files for p in many_deletes)} delete files rewritten into one per partition",
            )
        )
    return out


def _delete_arguments(inputs: HealthInputs) -> dict[str, object]:
    """How ``compact_data`` applies the deletes, as the format's collector says (Iceberg rewrites every file
    with a delete and drops the deletes left dangling; Paimon's full compaction drops DELETE records at the
    highest level)."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in inputs.delete_arguments.items()}


def _merged(found: list[Recommendation], inputs: HealthInputs) -> Recommendation:
    """One ``compact_data``: the first finding's metric, every reason and expectation, the arguments merged."""
    arguments: dict[str, object] = {}
    options: dict[str, str] = {}
    for r in found:
        for key, value in r.arguments.items():
            if key == "options" and isinstance(value, dict):
                options.update(value)
            else:
                arguments[key] = value
    for key, value in inputs.compact_data_options.items():
        options.setdefault(key, value)
    if options:
        arguments["options"] = options
    first = found[0]
    return Recommendation(
        "compact_data",
        "; ".join(r.reason for r in found),
        first.metric,
        first.value,
        first.threshold,
        "; ".join(r.expected for r in found),
        arguments,
    )


def _manifest_compaction(inputs: HealthInputs, small: int) -> list[Recommendation]:
    t = inputs.thresholds
    if small < t.max_small_manifests:
        return []
    size = sum(inputs.manifest_sizes)
    after = max(1, -(-size // inputs.manifest_target_size))
    return [
        Recommendation(
            "compact_manifests",
            f"{small} manifests are under the manifest target size ({human_bytes(inputs.manifest_target_size)})",
            "smallManifests",
            small,
            t.max_small_manifests,
            f"{len(inputs.manifest_sizes)} manifests ({human_bytes(size)}) merged into about {after}",
        )
    ]


def _snapshot_expiry(inputs: HealthInputs) -> list[Recommendation]:
    """``expire_snapshots``; when the expiry plan stopped at the format's per-run limit (Paimon
    ``snapshot.expire.limit``) before the end of what the retention expires, the arguments lift the limit
    for the run (``inputs.expiry_arguments``: ``max_deletes``) and the expectation says so."""
    t = inputs.thresholds
    planned = inputs.expirable_snapshots
    if planned < t.min_expirable_snapshots:
        return []
    total = max(planned, inputs.expirable_unlimited or 0)
    freed = f"{inputs.expiry_files} files ({human_bytes(inputs.expiry_bytes)}) deleted"
    expected = f"{planned} snapshot(s) removed, {freed}"
    arguments: dict[str, Any] = {"dry_run": False}
    if total > planned:
        expected = (
            f"{total} snapshot(s) removed in one run (max_deletes={total} lifts snapshot.expire.limit "
            f"{inputs.expire_limit}); the first {planned}: {freed}"
        )
        arguments.update(inputs.expiry_arguments)
    return [
        Recommendation(
            "expire_snapshots",
            f"{total} snapshot(s) are past the table's retention",
            "expirableSnapshots",
            planned,
            t.min_expirable_snapshots,
            expected,
            arguments,
        )
    ]


def with_orphans(
    inputs: HealthInputs, orphans: Sequence[DeleteRequest], arguments: dict[str, Any] | None = None
) -> HealthInputs:
    """``inputs`` with the orphan cleanup's dry run (its orphan files; ``arguments``: how it was planned)."""
    return replace(
        inputs,
        orphan_files=len(orphans),
        orphan_bytes=sum(o.size or 0 for o in orphans),
        orphan_arguments=dict(arguments or {}),
    )


def _orphan_cleanup(inputs: HealthInputs) -> list[Recommendation]:
    t = inputs.thresholds
    if inputs.orphan_files is None or inputs.orphan_files < t.min_orphan_files:
        return []
    return [
        Recommendation(
            "remove_orphan_files",
            f"{inputs.orphan_files} file(s) under the table's location are used by no snapshot, tag or branch",
            "orphanFiles",
            inputs.orphan_files,
            t.min_orphan_files,
            f"{inputs.orphan_files} files ({human_bytes(inputs.orphan_bytes or 0)}) deleted",
            {"dry_run": False, **inputs.orphan_arguments},
        )
    ]


def _partition_expiry(inputs: HealthInputs) -> list[Recommendation]:
    t = inputs.thresholds
    found = inputs.expirable_partitions or []
    if len(found) < t.min_expirable_partitions:
        return []
    return [
        Recommendation(
            "expire_partitions",
            f"{len(found)} partition(s) are older than partition.expiration-time",
            "expirablePartitions",
            len(found),
            t.min_expirable_partitions,
            f"partitions dropped: {', '.join(found[:5])}{' ...' if len(found) > 5 else ''}",
        )
    ]


def _manifest_section(inputs: HealthInputs, small: int) -> dict[str, int]:
    sizes = inputs.manifest_sizes
    return {
        "count": len(sizes),
        "bytes": sum(sizes),
        "averageBytes": sum(sizes) // len(sizes) if sizes else 0,
        "small": small,
        "targetBytes": inputs.manifest_target_size,
    }


def _snapshots(inputs: HealthInputs) -> dict[str, object]:
    oldest = inputs.oldest_snapshot_ms
    return {
        "count": inputs.snapshot_count,
        "oldestAgeMs": None if oldest is None else inputs.now_ms - oldest,
        "retention": inputs.retention,
        "expirable": inputs.expirable_snapshots,
        "expiryFiles": inputs.expiry_files,
        "expiryBytes": inputs.expiry_bytes,
    }
