"""Table options with Paimon's defaults (the duration and size parsers are format-neutral: ``core/units.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from airflow_lakeformat.core.units import parse_bool, parse_duration, parse_memory_size

INT_MAX = 2**31 - 1

# Paimon CoreOptions defaults for the options this package reads. Version-dependent defaults
# (``bucket``, ``file.format``) are resolved in :class:`TableOptions`.
DEFAULTS: dict[str, str] = {
    "bucket": "-1",
    "file.format": "parquet",
    "manifest.format": "avro",
    "manifest.compression": "zstd",
    "manifest.target-file-size": "8 mb",
    "manifest.full-compaction-threshold-size": "16 mb",
    "manifest.merge-min-count": "30",
    "target-file-size": "256 mb",
    "partition.default-name": "__DEFAULT_PARTITION__",
    "partition.legacy-name": "true",
    "data-file.prefix": "data-",
    "changelog-file.prefix": "changelog-",
    "changelog-producer": "none",
    "deletion-vectors.enabled": "false",
    "snapshot.num-retained.min": "10",
    "snapshot.num-retained.max": str(INT_MAX),
    "snapshot.time-retained": "1 h",
    "snapshot.expire.limit": "50",
    "snapshot.clean-empty-directories": "false",
    "commit.max-retries": "10",
    "write-only": "false",
}


@dataclass(frozen=True)
class TableOptions:
    """Typed access to a schema's options, falling back to Paimon's defaults.

    ``schema_version`` matters for two defaults: tables written by Paimon 0.7 (schema version 1)
    default to one bucket, and tables of schema version <= 2 default to ORC files.
    """

    raw: Mapping[str, str]
    schema_version: int = 3

    def get(self, key: str) -> str | None:
        if key in self.raw:
            return self.raw[key]
        if key == "bucket" and self.schema_version <= 1:
            return "1"
        if key == "file.format" and self.schema_version <= 2:
            return "orc"
        return DEFAULTS.get(key)

    def effective(self) -> dict[str, str]:
        """Every option this package knows with its effective value, plus every option the table sets."""
        merged = {key: value for key in DEFAULTS if (value := self.get(key)) is not None}
        merged.update(self.raw)
        return dict(sorted(merged.items()))

    def _required(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    @property
    def bucket(self) -> int:
        return int(self._required("bucket"))

    @property
    def file_format(self) -> str:
        return self._required("file.format").lower()

    @property
    def manifest_format(self) -> str:
        return self._required("manifest.format").lower()

    @property
    def manifest_compression(self) -> str:
        return self._required("manifest.compression").lower()

    @property
    def manifest_target_file_size(self) -> int:
        return parse_memory_size(self._required("manifest.target-file-size"))

    @property
    def manifest_full_compaction_threshold_size(self) -> int:
        return parse_memory_size(self._required("manifest.full-compaction-threshold-size"))

    @property
    def manifest_merge_min_count(self) -> int:
        return int(self._required("manifest.merge-min-count"))

    @property
    def target_file_size(self) -> int:
        return parse_memory_size(self._required("target-file-size"))

    @property
    def partition_default_name(self) -> str:
        return self._required("partition.default-name")

    @property
    def partition_legacy_name(self) -> bool:
        return parse_bool(self._required("partition.legacy-name"))

    @property
    def data_file_path_directory(self) -> str | None:
        return self.get("data-file.path-directory")

    @property
    def snapshot_num_retained_min(self) -> int:
        return int(self._required("snapshot.num-retained.min"))

    @property
    def snapshot_num_retained_max(self) -> int:
        return int(self._required("snapshot.num-retained.max"))

    @property
    def snapshot_time_retained(self) -> timedelta:
        return parse_duration(self._required("snapshot.time-retained"))

    @property
    def snapshot_expire_limit(self) -> int:
        return int(self._required("snapshot.expire.limit"))
