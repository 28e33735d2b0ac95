"""The options of Iceberg data compaction, with Java's names, defaults and validation.

Follows ``RewriteDataFilesSparkAction.validateAndInitOptions``, ``SizeBasedFileRewritePlanner`` and
``BinPackRewriteFilePlanner`` of Java Iceberg 1.10.2 (``rewrite_data_files``; apache/iceberg #12493 introduced the
planner classes). The target size comes from the option, else the table property
``write.target-file-size-bytes``, else 512 MiB; the minimum and maximum file sizes default to 75% and 180% of the
target. An option Java does not know is refused as Java refuses it ("Cannot use options [...]"), so a typo never
silently falls back to a default.

The strategy is Java's procedure argument: ``binpack`` (the default) or ``sort``; a ``sort_order`` given without a
strategy means sort, and ``binpack`` with a ``sort_order`` is refused (Java's action refuses a second rewriter).
The sort-only options ``compression-factor`` and ``shuffle-partitions-per-file`` are known only with ``sort`` (with
bin-pack they are unknown, as in Java); z-order (``zorder(...)`` in the sort order) is refused, not supported yet.

Example:
    >>> opts = CompactionOptions.from_options({"min-input-files": "2"}, {"write.target-file-size-bytes": "1000"})
    >>> (opts.target_file_size_bytes, opts.min_file_size_bytes, opts.max_file_size_bytes, opts.min_input_files)
    (1000, 750, 1800, 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_sort import parse_sort_order

TARGET_FILE_SIZE_PROPERTY = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 536_870_912  # 512 MiB, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
MIN_FILE_SIZE_RATIO = 0.75
MAX_FILE_SIZE_RATIO = 1.80
DEFAULT_MIN_INPUT_FILES = 5
DEFAULT_MAX_FILE_GROUP_SIZE = 107_374_182_400  # 100 GiB
DEFAULT_DELETE_FILE_THRESHOLD = 2_147_483_647  # Integer.MAX_VALUE: off
DEFAULT_DELETE_RATIO_THRESHOLD = 0.3
DEFAULT_MAX_CONCURRENT_GROUPS = (
    5  # max-concurrent-file-group-rewrites; this process runs min(it, cpus) at once
)

Strategy = Literal["binpack", "sort"]
STRATEGIES: tuple[str, ...] = ("binpack", "sort")
# SparkShufflingDataRewritePlanner / SparkShufflingFileRewriteRunner: known to the sort (and z-order) rewriter only
SORT_OPTIONS = frozenset({"compression-factor", "shuffle-partitions-per-file"})

JobOrder = Literal["none", "bytes-asc", "bytes-desc", "files-asc", "files-desc"]
JOB_ORDERS: tuple[str, ...] = ("none", "bytes-asc", "bytes-desc", "files-asc", "files-desc")

KNOWN_OPTIONS = frozenset(
    {
        "target-file-size-bytes",
        "min-file-size-bytes",
        "max-file-size-bytes",
        "min-input-files",
        "rewrite-all",
        "max-file-group-size-bytes",
        "delete-file-threshold",
        "delete-ratio-threshold",
        "max-files-to-rewrite",
        "rewrite-job-order",
        "partial-progress.enabled",
        "partial-progress.max-commits",
        "use-starting-sequence-number",
        "remove-dangling-deletes",
        "max-concurrent-file-group-rewrites",
    }
)


def _integer(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    text = options.get(key)
    if text is None:
        return default
    try:
        return int(str(text).strip())
    except ValueError:
        raise UsageError(f"option {key} must be an integer, not {text!r}") from None


def _boolean(options: Mapping[str, str], key: str, default: bool) -> bool:
    text = options.get(key)
    if text is None:
        return default
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise UsageError(f"option {key} must be true or false, not {text!r}")
    return value == "true"


def _ratio(options: Mapping[str, str], key: str, default: float) -> float:
    text = options.get(key)
    if text is None:
        return default
    try:
        return float(str(text).strip())
    except ValueError:
        raise UsageError(f"option {key} must be a number, not {text!r}") from None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise UsageError(message)


@dataclass(frozen=True)
class CompactionOptions:
    """What the planner and the commit read; every field is Java's option of the same (kebab-case) name."""

    target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE
    min_file_size_bytes: int = int(DEFAULT_TARGET_FILE_SIZE * MIN_FILE_SIZE_RATIO)
    max_file_size_bytes: int = int(DEFAULT_TARGET_FILE_SIZE * MAX_FILE_SIZE_RATIO)
    min_input_files: int = DEFAULT_MIN_INPUT_FILES
    rewrite_all: bool = False
    max_file_group_size_bytes: int = DEFAULT_MAX_FILE_GROUP_SIZE
    delete_file_threshold: int = DEFAULT_DELETE_FILE_THRESHOLD
    delete_ratio_threshold: float = DEFAULT_DELETE_RATIO_THRESHOLD
    max_files_to_rewrite: int | None = None
    rewrite_job_order: JobOrder = "none"
    partial_progress_enabled: bool = False
    partial_progress_max_commits: int = 10
    use_starting_sequence_number: bool = True
    remove_dangling_deletes: bool = False
    max_concurrent_file_group_rewrites: int = DEFAULT_MAX_CONCURRENT_GROUPS
    strategy: Strategy = "binpack"
    sort_order: str | None = (
        None  # the text given (None: the table's sort order), checked against the schema later
    )
    compression_factor: float = 1.0
    shuffle_partitions_per_file: int = 1

    @property
    def write_max_file_size(self) -> int:
        """Where one output file rolls over: halfway between target and maximum (1.4 x target by default)."""
        target = self.target_file_size_bytes
        return int(target + (self.max_file_size_bytes - target) * 0.5)

    @classmethod
    def from_options(
        cls,
        options: Mapping[str, str] | None = None,
        table_properties: Mapping[str, str] | None = None,
        *,
        strategy: str | None = None,
        sort_order: str | None = None,
    ) -> CompactionOptions:
        """Java's options (text values, as the procedure's ``options => map(...)`` takes them), validated.

        Args:
            options: option name to value, e.g. ``{"min-input-files": "2", "rewrite-all": "true"}``.
            table_properties: the table's properties (``write.target-file-size-bytes`` is read from them).
            strategy: ``binpack`` or ``sort`` (Java's procedure argument); default: ``sort`` when a
                ``sort_order`` is given, else ``binpack``.
            sort_order: Java's ``sort_order`` text, ``"id DESC NULLS LAST, name"`` (default: the table's).

        Raises:
            UsageError: an unknown option, or a value Java would refuse (named, with the rule); an unknown strategy,
                ``binpack`` with a sort order, a malformed sort order or a z-order.

        Example:
            >>> CompactionOptions.from_options({"compression-factor": "2"}, sort_order="id DESC").strategy
            'sort'
        """
        options = dict(options or {})
        chosen = _strategy(strategy, sort_order)
        known = KNOWN_OPTIONS | SORT_OPTIONS if chosen == "sort" else KNOWN_OPTIONS
        unknown = sorted(set(options) - known)
        _require(not unknown, f"Cannot use options {unknown}, they are not supported by data compaction")
        table_target = _integer(
            dict(table_properties or {}), TARGET_FILE_SIZE_PROPERTY, DEFAULT_TARGET_FILE_SIZE
        )
        target = _integer(options, "target-file-size-bytes", table_target)
        assert target is not None
        _require(target > 0, f"target-file-size-bytes must be > 0, not {target}")
        minimum = _integer(options, "min-file-size-bytes", int(target * MIN_FILE_SIZE_RATIO))
        maximum = _integer(options, "max-file-size-bytes", int(target * MAX_FILE_SIZE_RATIO))
        assert minimum is not None and maximum is not None
        _require(minimum >= 0, f"min-file-size-bytes must be >= 0, not {minimum}")
        _require(
            minimum < target, f"min-file-size-bytes ({minimum}) must be < target-file-size-bytes ({target})"
        )
        _require(
            maximum > target, f"max-file-size-bytes ({maximum}) must be > target-file-size-bytes ({target})"
        )
        return cls(
            target_file_size_bytes=target,
            min_file_size_bytes=minimum,
            max_file_size_bytes=maximum,
            **_planner_fields(options),
            **_commit_fields(options),
            **_sort_fields(options, chosen, sort_order),
        )

    def to_json(self) -> dict[str, Any]:
        """The options of the plan as Java names them (how many groups run at once is the run's, not shown)."""
        return {
            "target-file-size-bytes": self.target_file_size_bytes,
            "min-file-size-bytes": self.min_file_size_bytes,
            "max-file-size-bytes": self.max_file_size_bytes,
            "min-input-files": self.min_input_files,
            "rewrite-all": self.rewrite_all,
            "max-file-group-size-bytes": self.max_file_group_size_bytes,
            "delete-file-threshold": self.delete_file_threshold,
            "delete-ratio-threshold": self.delete_ratio_threshold,
            "max-files-to-rewrite": self.max_files_to_rewrite,
            "rewrite-job-order": self.rewrite_job_order,
            "partial-progress.enabled": self.partial_progress_enabled,
            "partial-progress.max-commits": self.partial_progress_max_commits,
            "use-starting-sequence-number": self.use_starting_sequence_number,
            "remove-dangling-deletes": self.remove_dangling_deletes,
        } | (
            {
                "compression-factor": self.compression_factor,
                "shuffle-partitions-per-file": self.shuffle_partitions_per_file,
            }
            if self.strategy == "sort"
            else {}
        )


def _planner_fields(options: Mapping[str, str]) -> dict[str, Any]:
    min_input = _integer(options, "min-input-files", DEFAULT_MIN_INPUT_FILES)
    group_size = _integer(options, "max-file-group-size-bytes", DEFAULT_MAX_FILE_GROUP_SIZE)
    delete_files = _integer(options, "delete-file-threshold", DEFAULT_DELETE_FILE_THRESHOLD)
    delete_ratio = _ratio(options, "delete-ratio-threshold", DEFAULT_DELETE_RATIO_THRESHOLD)
    max_files = _integer(options, "max-files-to-rewrite", None)
    order = str(options.get("rewrite-job-order", "none")).strip().lower()
    assert min_input is not None and group_size is not None and delete_files is not None
    _require(min_input > 0, f"min-input-files must be > 0, not {min_input}")
    _require(group_size > 0, f"max-file-group-size-bytes must be > 0, not {group_size}")
    _require(delete_files >= 0, f"delete-file-threshold must be >= 0, not {delete_files}")
    _require(0 < delete_ratio <= 1, f"delete-ratio-threshold must be in (0, 1], not {delete_ratio}")
    _require(max_files is None or max_files > 0, f"max-files-to-rewrite must be > 0, not {max_files}")
    _require(order in JOB_ORDERS, f"rewrite-job-order must be one of {', '.join(JOB_ORDERS)}, not {order!r}")
    return {
        "min_input_files": min_input,
        "rewrite_all": _boolean(options, "rewrite-all", False),
        "max_file_group_size_bytes": group_size,
        "delete_file_threshold": delete_files,
        "delete_ratio_threshold": delete_ratio,
        "max_files_to_rewrite": max_files,
        "rewrite_job_order": order,
    }


def _commit_fields(options: Mapping[str, str]) -> dict[str, Any]:
    enabled = _boolean(options, "partial-progress.enabled", False)
    commits = _integer(options, "partial-progress.max-commits", 10)
    concurrent = _integer(options, "max-concurrent-file-group-rewrites", DEFAULT_MAX_CONCURRENT_GROUPS)
    assert commits is not None and concurrent is not None
    _require(not enabled or commits > 0, f"partial-progress.max-commits must be > 0, not {commits}")
    _require(concurrent > 0, f"max-concurrent-file-group-rewrites must be > 0, not {concurrent}")
    return {
        "max_concurrent_file_group_rewrites": concurrent,
        "partial_progress_enabled": enabled,
        "partial_progress_max_commits": commits,
        "use_starting_sequence_number": _boolean(options, "use-starting-sequence-number", True),
        "remove_dangling_deletes": _boolean(options, "remove-dangling-deletes", False),
    }


def _strategy(strategy: str | None, sort_order: str | None) -> Strategy:
    """Java's ``RewriteDataFilesProcedure``: the strategy named, or sort when only a sort order is given."""
    if strategy is None:
        return "sort" if sort_order is not None else "binpack"
    chosen = strategy.strip().lower()
    _require(chosen in STRATEGIES, f"unsupported strategy: {strategy}. Only binpack or sort is supported")
    _require(
        not (chosen == "binpack" and sort_order is not None),
        "Must use only one rewriter type (bin-pack, sort, zorder): strategy binpack takes no sort order",
    )
    return "sort" if chosen == "sort" else "binpack"


def _sort_fields(options: Mapping[str, str], strategy: Strategy, sort_order: str | None) -> dict[str, Any]:
    if strategy != "sort":
        return {}
    if sort_order is not None:
        parse_sort_order(sort_order)  # syntax, z-order and transforms refused before anything is read
    factor = _ratio(options, "compression-factor", 1.0)
    shuffle = _integer(options, "shuffle-partitions-per-file", 1)
    assert shuffle is not None
    _require(factor > 0, f"compression-factor must be > 0, not {factor}")
    _require(shuffle > 0, f"shuffle-partitions-per-file must be > 0, not {shuffle}")
    return {
        "strategy": strategy,
        "sort_order": sort_order,
        "compression_factor": factor,
        "shuffle_partitions_per_file": shuffle,
    }
