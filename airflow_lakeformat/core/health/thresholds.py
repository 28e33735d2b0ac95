"""The thresholds of the health report: defaults, the format's own settings, and per-table overrides.

Each threshold has a default taken from the rule the fixing operation itself applies, so that "health
recommends X" means "X would do something":

- ``small-file-ratio`` (0.75): a data file under this share of the table's target file size is small
  (Java Iceberg's ``SizeBasedFileRewritePlanner`` ``min-file-size`` default, ``core/statistics.py``).
- ``min-small-files`` (5): a partition (Paimon: a bucket of an append table) needs ``compact_data`` when it
  holds at least this many small files (Iceberg's ``min-input-files`` default 5; Paimon's
  ``compaction.min.file-num`` 5). One small file per partition is what a compaction leaves: healthy.
- ``max-sorted-runs`` (Paimon primary-key tables): a bucket with this many sorted runs needs ``compact_data``
  (the table's ``num-sorted-run.compaction-trigger``, default 5).
- ``delete-ratio`` (0.1): delete records over data records of a partition at or above which its deletes
  should be applied by ``compact_data`` (Iceberg position/equality deletes; Paimon DELETE records).
- ``max-small-manifests``: small manifests (under the manifest target size: Iceberg
  ``commit.manifest.target-size-bytes`` 8 MiB, Paimon ``manifest.target-file-size`` 8 MB) at or above which
  ``compact_manifests`` is recommended (Iceberg ``commit.manifest.min-count-to-merge`` 100, Paimon
  ``manifest.merge-min-count`` 30).
- ``min-expirable-snapshots`` (1): snapshots the expiry plan (dry run, the table's own retention) would
  remove at or above which ``expire_snapshots`` is recommended.
- ``min-orphan-files`` (1): orphan files (the orphan cleanup's dry run, only when asked: ``--orphans``) at
  or above which ``remove_orphan_files`` is recommended.
- ``min-expirable-partitions`` (1): partitions past ``partition.expiration-time`` (Paimon) at or above which
  ``expire_partitions`` is recommended.

Every threshold can be set per table by a table property (Iceberg) / option (Paimon) named
``lakeformat.health.<name>``, e.g. ``lakeformat.health.min-small-files=10``; a value that is not a number is
refused with :class:`~airflow_lakeformat.core.errors.UsageError` naming the property. A health policy
(``core/health/policy.py``: defaults, namespaces, tables) overrides them in turn; the precedence, lowest first:
these defaults, the format's settings, the table's properties, the policy's defaults, namespaces, table.

This module is neutral: it imports no format.

Example:
    >>> t = Thresholds.resolve({"lakeformat.health.min-small-files": "10"}, max_small_manifests=30)
    >>> (t.min_small_files, t.max_small_manifests)
    (10, 30)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from airflow_lakeformat.core.errors import UsageError

#: The prefix of the table properties that override a threshold.
PROPERTY_PREFIX = "lakeformat.health."


@dataclass(frozen=True)
class Thresholds:
    """The limits the recommendations compare the measures with (see the module docstring)."""

    small_file_ratio: float = 0.75
    min_small_files: int = 5
    max_sorted_runs: int = 5
    delete_ratio: float = 0.1
    max_small_manifests: int = 100
    min_expirable_snapshots: int = 1
    min_expirable_partitions: int = 1
    min_orphan_files: int = 1

    @classmethod
    def resolve(cls, properties: Mapping[str, str], **format_defaults: Any) -> Thresholds:
        """The defaults, then the format's own settings (``format_defaults``), then the table's overrides.

        Args:
            properties: the table's properties (Iceberg) or options (Paimon), as strings.
            format_defaults: threshold values the format's settings give (field names, e.g.
                ``max_sorted_runs=3``).

        Raises:
            UsageError: an override that is not a number, or not positive, naming the property.
        """
        base = replace(cls(), **format_defaults)
        changes: dict[str, Any] = {}
        for f in fields(cls):
            name = PROPERTY_PREFIX + f.name.replace("_", "-")
            raw = properties.get(name)
            if raw is None:
                continue
            kind = float if isinstance(getattr(base, f.name), float) else int
            try:
                value = kind(str(raw).strip())
            except ValueError:
                raise UsageError(f"table property {name}={raw!r} is not a number") from None
            if value <= 0:
                raise UsageError(f"table property {name}={raw!r} must be positive")
            changes[f.name] = value
        return replace(base, **changes)

    def to_json(self) -> dict[str, Any]:
        """The thresholds by their property names (without the prefix)."""
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}
