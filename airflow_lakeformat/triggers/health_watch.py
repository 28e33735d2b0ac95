"""The waiting rule the health sensor and its trigger share: a table whose health crosses a threshold.

A :class:`HealthRule` holds the conditions, validated when it is built (so a DAG with a typo fails when it is
parsed, naming the key). ``rule.poll(table)`` reloads the table's metadata, computes ``table.health()`` (the
metadata only: no data file is read; with a condition on ``orphans.*`` the orphan cleanup's dry run too,
which lists the table's location) and evaluates every condition against the health document
(``TableHealth.to_json()``, described in ``core/health/model.py``). It returns a :class:`HealthMatch`, saying
which conditions crossed and with which values, or None.

Conditions (a mapping; by default ANY crossed condition matches, ``require="all"`` needs every one):

* ``"<metric>": N``: the metric is at least ``N``. ``"<metric>": {"below": N}``: under ``N``;
  ``{"at_least": N}`` spells the default out. A metric is a path into the document: ``files.smallFiles``,
  ``deletes.deleteRecords``, ``snapshots.expirable``, ``manifests.small``, ``orphans.files``, ``score``, ...
  (:data:`METRICS`), or its last part when only one section has it (``smallFiles``, ``deleteRecords``,
  ``expirable``; ``count`` and ``bytes`` are ambiguous and refused). ``expirablePartitions`` counts the
  partitions past their expiration time. A metric the document leaves null (``deletes.maxSortedRuns`` of an
  append table) never crosses.
* ``"score_below": N``: the score (0-100) is under ``N``.
* ``"operations": ["compact_data", ...]``: health recommends at least one of these operations (a single name
  may be given as a string; ``"*"`` means any operation).

Example:
    >>> rule = HealthRule({"smallFiles": 500, "operations": ["expire_snapshots"]})
    >>> rule.poll(open_table("/wh/db.db/events"))  # doctest: +SKIP
    HealthMatch(table='/wh/db.db/events', ..., crossed=[{'condition': 'smallFiles', 'value': 612, ...}])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.health.policy import HealthPolicy

#: The operations health recommends (``core/health/model.py``'s ``Operation``; a test keeps them in step).
OPERATIONS = (
    "compact_data",
    "compact_deletes",
    "compact_manifests",
    "expire_snapshots",
    "remove_orphan_files",
    "expire_partitions",
)

#: The numeric measures of the health document a condition can name, by path.
METRICS = (
    "score",
    "metadataBytes",
    "expirablePartitions",
    "files.dataFiles",
    "files.dataBytes",
    "files.records",
    "files.smallFiles",
    "files.compactableSmallFiles",
    "files.averageFileSize",
    "files.partitions",
    "deletes.deleteFiles",
    "deletes.deleteBytes",
    "deletes.positionDeleteFiles",
    "deletes.positionDeleteRecords",
    "deletes.equalityDeleteFiles",
    "deletes.equalityDeleteRecords",
    "deletes.deleteRecords",
    "deletes.maxSortedRuns",
    "deletes.bucketsOverTrigger",
    "snapshots.count",
    "snapshots.oldestAgeMs",
    "snapshots.expirable",
    "snapshots.expiryFiles",
    "snapshots.expiryBytes",
    "manifests.count",
    "manifests.bytes",
    "manifests.averageBytes",
    "manifests.small",
    "orphans.files",
    "orphans.bytes",
    "penalties.smallFiles",
    "penalties.deleteLoad",
    "penalties.positionDeletes",
)

# The sections whose measures may be named by their last part (penalties repeat the files' names: spelled out).
_SHORT_SECTIONS = ("files", "deletes", "snapshots", "manifests", "orphans")
# The parts of the document an event carries: the measures and the recommendations, not the per-partition
# rows, histograms or snapshot times (an Asset event's extra is stored in the metadata database).
_SUMMARY_KEYS = (
    "table",
    "format",
    "snapshotId",
    "score",
    "penalties",
    "files",
    "deletes",
    "snapshots",
    "manifests",
    "metadataBytes",
    "expirablePartitions",
    "orphans",
    "policy",
    "recommendations",
)
_BULKY = frozenset({"times"})

Require = Literal["any", "all"]


def _short_names() -> dict[str, str | None]:
    """Last part -> path, None when two sections share it (ambiguous)."""
    names: dict[str, str | None] = {}
    for path in METRICS:
        section, _, leaf = path.rpartition(".")
        if section in _SHORT_SECTIONS:
            names[leaf] = None if leaf in names else path
    return names


_SHORT = _short_names()


def resolve_metric(key: str) -> str:
    """The metric's path for a condition key (a path of :data:`METRICS` or a unique last part).

    Raises:
        UsageError: an unknown or ambiguous name, naming it and what is known.
    """
    if key in METRICS:
        return key
    if key in _SHORT:
        path = _SHORT[key]
        if path is None:
            choices = [p for p in METRICS if p.rpartition(".")[2] == key]
            raise UsageError(f"health condition {key!r} is ambiguous: spell out one of {', '.join(choices)}")
        return path
    raise UsageError(
        f"unknown health condition {key!r}: give score_below, operations, or a metric of the health document "
        f"({', '.join(METRICS)}; or the last part of one, e.g. smallFiles)"
    )


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"health condition {key!r}: the threshold must be a number, not {value!r}")
    return value


@dataclass(frozen=True)
class Condition:
    """One condition: ``metric`` compared with ``threshold`` (``>=`` or ``<``), or ``operations`` recommended."""

    key: str
    metric: str
    comparison: Literal[">=", "<", "any of"]
    threshold: float | tuple[str, ...]

    @classmethod
    def parse(cls, key: Any, value: Any) -> Condition:
        """The condition ``key: value`` of a conditions mapping (module docstring). Raises UsageError."""
        if not isinstance(key, str) or not key.strip():
            raise UsageError(f"health condition names must be non-empty text, not {key!r}")
        key = key.strip()
        if key == "score_below":
            return cls(key, "score", "<", _number(key, value))
        if key == "operations":
            return cls(key, "recommendations", "any of", _operations(value))
        metric = resolve_metric(key)
        if isinstance(value, Mapping):
            if len(value) != 1 or next(iter(value)) not in ("below", "at_least"):
                raise UsageError(
                    f"health condition {key!r}: give a number, {{'below': N}} or {{'at_least': N}}, not {value!r}"
                )
            ((how, bound),) = value.items()
            return cls(key, metric, "<" if how == "below" else ">=", _number(key, bound))
        return cls(key, metric, ">=", _number(key, value))

    def value_in(self, document: Mapping[str, Any]) -> Any:
        """What the document says of this condition's metric (the recommended operations for ``operations``)."""
        if self.comparison == "any of":
            return [r.get("operation") for r in document.get("recommendations") or []]
        node: Any = document
        for part in self.metric.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, list):  # expirablePartitions: the partitions
            return len(node)
        return node

    def crossed_by(self, value: Any) -> bool:
        if self.comparison == "any of":
            assert isinstance(self.threshold, tuple)
            return any(op in self.threshold or "*" in self.threshold for op in value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False  # null: not measured (orphans without the dry run, sorted runs of an append table)
        assert isinstance(self.threshold, (int, float))
        return value >= self.threshold if self.comparison == ">=" else value < self.threshold

    def to_json(self, value: Any) -> dict[str, Any]:
        threshold = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        return {
            "condition": self.key,
            "metric": self.metric,
            "comparison": self.comparison,
            "threshold": threshold,
            "value": value,
        }


def _operations(value: Any) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not names or not all(isinstance(n, str) for n in names):
        raise UsageError(f"health condition 'operations': give a list of operation names, not {value!r}")
    unknown = sorted(set(names) - set(OPERATIONS) - {"*"})
    if unknown:
        raise UsageError(
            f"health condition 'operations': unknown operation(s) {unknown}; known: {', '.join(OPERATIONS)} "
            "or '*' (any)"
        )
    return tuple(names)


def parse_conditions(conditions: Mapping[str, Any] | None) -> list[Condition]:
    """Validated conditions (module docstring); UsageError naming the bad key, or for none at all."""
    if not isinstance(conditions, Mapping) or not conditions:
        raise UsageError(
            f"health conditions must be a non-empty mapping, e.g. {{'smallFiles': 500}}, not {conditions!r}"
        )
    return [Condition.parse(key, value) for key, value in conditions.items()]


def summary_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """The health document's measures and recommendations (no per-partition rows, histogram or snapshot times)."""
    summary: dict[str, Any] = {}
    for key in _SUMMARY_KEYS:
        if key not in document:
            continue
        value = document[key]
        if isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k not in _BULKY}
        summary[key] = value
    return summary


@dataclass(frozen=True)
class HealthMatch:
    """A poll whose health crossed the conditions: which ones, with their values, and the health summary."""

    table: str
    format: str
    snapshot_id: int | None
    score: int
    crossed: list[dict[str, Any]]
    operations: list[str]
    summary: str
    health: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "format": self.format,
            "snapshotId": self.snapshot_id,
            "score": self.score,
            "crossed": self.crossed,
            "operations": self.operations,
            "summary": self.summary,
            "health": self.health,
        }


class HealthRule:
    """The conditions a table's health is watched for, and one look at a table (:meth:`poll`).

    Args:
        conditions: the conditions (module docstring), e.g. ``{"smallFiles": 500, "score_below": 60}``.
        require: ``"any"`` (default): one crossed condition matches; ``"all"``: every one must cross.
        policy: the health policy the table is assessed with (``core/health/policy.py``: its thresholds
            and allowed operations decide the score and the recommendations an ``operations`` condition
            watches), or None: the table's properties and the defaults, as ``lakeformat health`` without
            ``--policy``.

    Raises:
        UsageError: a condition that is unknown, ambiguous or malformed (naming its key), or ``require``.

    Example:
        >>> HealthRule({"files.smallFiles": 500}).needs_orphans
        False
    """

    def __init__(
        self, conditions: Mapping[str, Any], require: str = "any", policy: HealthPolicy | None = None
    ) -> None:
        self.policy = policy
        if require not in ("any", "all"):
            raise UsageError(f"health condition require={require!r}: give 'any' or 'all'")
        self.require: Require = "any" if require == "any" else "all"
        self.conditions = parse_conditions(conditions)
        self.needs_orphans = any(c.metric.startswith("orphans.") for c in self.conditions)

    def evaluate(self, document: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The crossed conditions with their values, or None when the document does not match."""
        crossed = []
        for condition in self.conditions:
            value = condition.value_in(document)
            if condition.crossed_by(value):
                crossed.append(condition.to_json(value))
        if not crossed or (self.require == "all" and len(crossed) < len(self.conditions)):
            return None
        return crossed

    def poll(self, table: Any) -> HealthMatch | None:
        """Reload the facade ``table`` (``core/tables.py``), compute its health; the match or None."""
        refresh = getattr(table.native, "refresh", None)
        if callable(
            refresh
        ):  # a table that caches its metadata (Iceberg) reloads it; Paimon reads the latest
            refresh()
        health = table.health(orphans=self.needs_orphans, policy=self.policy)
        document = health.to_json()
        crossed = self.evaluate(document)
        if crossed is None:
            return None
        return HealthMatch(
            table=str(document["table"]),
            format=str(document["format"]),
            snapshot_id=document.get("snapshotId"),
            score=int(document["score"]),
            crossed=crossed,
            operations=list(health.operations),
            summary=health.summary(),
            health=summary_document(document),
        )
