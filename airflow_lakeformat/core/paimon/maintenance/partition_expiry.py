"""Partition expiry: drop the partitions older than ``partition.expiration-time``, as Paimon's ``expire_partitions``.

Java: ``core/operation/NormalPartitionExpire.java``, ``core/partition/PartitionValuesTimeExpireStrategy.java``,
``PartitionUpdateTimeExpireStrategy.java`` and ``FileStoreCommitImpl#dropPartitions``. The algorithm:

1. **Settings**: the arguments, else the table's options ``partition.expiration-time`` (required),
   ``partition.expiration-strategy`` (``values-time``, or ``update-time``), ``partition.timestamp-formatter``,
   ``partition.timestamp-pattern`` and ``partition.expiration-max-num`` (100). Refused, typed
   (:class:`~airflow_lakeformat.core.errors.MaintenanceRefusedError` naming the option) before anything is
   read: no expiration time, no partition keys, ``metastore.partitioned-table=true`` (Java drops those through
   the catalog, which a filesystem maintainer cannot), another strategy (Java's SPI), an unsupported formatter.
2. **Threshold**: ``now - expiration`` with ``now`` the local wall clock (Java's ``LocalDateTime.now()``: the
   scheduler's time zone decides); a partition expires when its time is **strictly** before it.
3. **Time of a partition** (the live partitions of the latest snapshot): ``values-time`` reads it from the
   values (:mod:`~airflow_lakeformat.core.paimon.maintenance.partition_time`; a partition whose values do
   not parse, a null value, a DATE partition's day number, is skipped and reported, never expired);
   ``update-time`` takes the newest ``_CREATION_TIME`` of its live files (a local wall-clock time, compared
   at millisecond precision as Java's epoch-millisecond comparison does in one zone).
4. **Selection**: each expired partition's values as Java's ``toString()`` (``partition.default-name`` for a
   null) joined with ``,``, sorted as Java sorts strings (UTF-16 code units), the first
   ``partition.expiration-max-num`` kept; the partitions themselves are matched by their exact values, never
   by splitting the joined text (apache/paimon#9277).
5. **Commit** (not in a dry run): one OVERWRITE snapshot whose delta holds a DELETE entry for every live file
   of those partitions, through the ordinary :class:`~airflow_lakeformat.core.paimon.commit.Committer`. Java
   recomputes the drop from the snapshot it commits on; here every publish attempt first checks that the
   partitions still hold exactly the planned files (a concurrent append or compaction in one of them), and
   when they do not the plan is made again on the new latest snapshot, up to :data:`COMMIT_ATTEMPTS` times. Nothing is deleted from
   disk: snapshot expiry deletes the files once no retained snapshot or tag references them, and orphan
   cleanup never takes them while one does (both read DELETE entries as references).

What Java does differently, on purpose or by scope: one commit for the whole selection
(``partition.expiration-batch-size`` is not split into several); a table whose index manifest holds entries
(deletion vectors, dynamic-bucket hash indexes) for a selected partition is refused, since Java also drops
those index entries and this release does not rewrite index manifests.

Example:
    >>> result = expire_partitions(table, expiration_time=timedelta(days=7), dry_run=True)  # doctest: +SKIP
    >>> [p.spec for p in result.plan.expired]  # doctest: +SKIP
    [{'dt': '2024-01-01'}]
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from airflow_lakeformat.core.errors import CommitConflictError, MaintenanceRefusedError, UsageError
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.partition_time import (
    PartitionTimeExtractor,
    UnparsablePartitionTime,
)
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import PartitionCodec
from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import BINARY_ROOTS
from airflow_lakeformat.core.paimon.values import legacy_partition_string
from airflow_lakeformat.core.units import parse_duration

STRATEGIES = ("values-time", "update-time")
DEFAULT_MAX_EXPIRES = 100  # partition.expiration-max-num
COMMIT_ATTEMPTS = 3
_INDEX_ADD = 0


@dataclass(frozen=True)
class PartitionExpirySettings:
    """The settings of one run, each from its argument or else the table's option."""

    expiration_time: timedelta
    strategy: str
    timestamp_formatter: str | None
    timestamp_pattern: str | None
    max_expires: int
    now: datetime
    sources: dict[str, str] = field(default_factory=dict)  # setting -> "argument" or the option's name

    @property
    def expire_before(self) -> datetime:
        return self.now - self.expiration_time

    def to_json(self) -> dict[str, Any]:
        return {
            "expirationTime": duration_text(self.expiration_time),
            "expirationTimeSeconds": self.expiration_time.total_seconds(),
            "strategy": self.strategy,
            "timestampFormatter": self.timestamp_formatter,
            "timestampPattern": self.timestamp_pattern,
            "maxExpires": self.max_expires,
            "now": self.now.isoformat(),
            "expireBefore": self.expire_before.isoformat(),
            "settingSources": dict(self.sources),
        }


@dataclass
class PartitionState:
    """One live partition of the latest snapshot: its values, files and (when known) time."""

    partition: bytes
    values: dict[str, Any]  # key -> JSON value (None for null)
    spec: dict[str, str]  # key -> Java's toString() of the value (partition.default-name for null)
    entries: list[ManifestEntry] = field(default_factory=list)
    time: datetime | None = None
    reason: str | None = None  # why it is skipped

    @property
    def joined(self) -> str:
        return ",".join(self.spec.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": self.values, "spec": self.spec}
        if self.time is not None:
            out["time"] = self.time.isoformat()
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(
            files=len(self.entries),
            bytes=sum(e.file.file_size for e in self.entries),
            rows=sum(e.file.row_count for e in self.entries),
        )
        return out


@dataclass
class PartitionExpiryPlan:
    """Which partitions expire (selected), which would but wait for a later run, which were skipped and why."""

    table_uri: str
    settings: PartitionExpirySettings
    snapshot_id: int | None
    expired: list[PartitionState] = field(default_factory=list)
    over_limit: list[PartitionState] = field(default_factory=list)
    skipped: list[PartitionState] = field(default_factory=list)
    kept: int = 0

    def delete_entries(self) -> list[ManifestEntry]:
        return [e.to_delete() for p in self.expired for e in p.entries]

    def decisions(self) -> list[str]:
        s = self.settings
        lines = [
            f"{s.strategy}: partitions older than {s.expire_before.isoformat(sep=' ')} (now "
            f"{s.now.isoformat(sep=' ')} - {duration_text(s.expiration_time)}) expire",
        ]
        if self.over_limit:
            lines.append(
                f"max-expires {s.max_expires}: {len(self.over_limit)} more expired partition(s) wait for a later run"
            )
        return lines

    def warnings(self) -> list[str]:
        return [f"skipped {p.joined or '(no values)'}: {p.reason}" for p in self.skipped]


@short_repr
@dataclass
class PartitionExpiryResult:
    """What a partition expiry did (or, in a dry run, would do)."""

    plan: PartitionExpiryPlan
    dry_run: bool
    snapshot_id: int | None = None  # the OVERWRITE snapshot, None for a dry run or when nothing expired
    attempts: int = 0
    duration_seconds: float = 0.0

    def summary(self) -> str:
        """One line: which partitions were (or would be) dropped."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        entries = [e for p in plan.expired for e in p.entries]
        return {
            "operation": "expire-partitions",
            "format": "paimon",
            "table": plan.table_uri,
            "dryRun": self.dry_run,
            **plan.settings.to_json(),
            "snapshotBefore": plan.snapshot_id,
            "snapshotId": self.snapshot_id,
            "partitionsExpired": [p.to_json() for p in plan.expired],
            "partitionsOverLimit": [p.to_json() for p in plan.over_limit],
            "partitionsSkipped": [p.to_json() for p in plan.skipped],
            "partitionsKept": plan.kept,
            "files": len(entries),
            "bytes": sum(e.file.file_size for e in entries),
            "rows": sum(e.file.row_count for e in entries),
            "decisions": plan.decisions(),
            "warnings": plan.warnings(),
            "durationSeconds": round(self.duration_seconds, 3),
        }


# -- settings ------------------------------------------------------------------------------------


def resolve_settings(
    table: Table,
    *,
    expiration_time: timedelta | str | None = None,
    timestamp_formatter: str | None = None,
    timestamp_pattern: str | None = None,
    strategy: str | None = None,
    max_expires: int | None = None,
    now: datetime | None = None,
) -> PartitionExpirySettings:
    """The run's settings (arguments over table options), refusing what cannot be expired safely."""
    options = table.schema.table_options
    uri = table.uri
    if not table.schema.partition_keys:
        raise MaintenanceRefusedError(uri, "partition expiry: the table has no partition keys")
    if (options.get("metastore.partitioned-table") or "false").strip().lower() == "true":
        raise MaintenanceRefusedError(
            uri,
            "metastore.partitioned-table=true: Paimon drops these partitions through the metastore, which a "
            "filesystem maintainer cannot",
        )
    sources: dict[str, str] = {}

    def pick(argument: Any, option: str) -> Any:
        if argument is not None:
            sources[option] = "argument"
            return argument
        value = options.get(option)
        if value is not None:
            sources[option] = "table option"
        return value

    raw_expiration = pick(expiration_time, "partition.expiration-time")
    if raw_expiration is None:
        raise MaintenanceRefusedError(
            uri, "partition expiry needs an expiration time: set partition.expiration-time or pass one"
        )
    expiration = _duration(raw_expiration, uri)
    chosen = str(pick(strategy, "partition.expiration-strategy") or "values-time").strip().lower()
    if chosen not in STRATEGIES:
        raise MaintenanceRefusedError(
            uri, f"partition.expiration-strategy {chosen!r}: only {' and '.join(STRATEGIES)} are implemented"
        )
    limit = pick(max_expires, "partition.expiration-max-num")
    try:
        limit = DEFAULT_MAX_EXPIRES if limit is None else int(limit)
    except ValueError:
        raise MaintenanceRefusedError(
            uri, f"partition.expiration-max-num {limit!r} is not a number"
        ) from None
    if limit < 1:
        raise UsageError(f"max_expires must be at least 1, not {limit}")
    return PartitionExpirySettings(
        expiration_time=expiration,
        strategy=chosen,
        timestamp_formatter=pick(timestamp_formatter, "partition.timestamp-formatter") or None,
        timestamp_pattern=pick(timestamp_pattern, "partition.timestamp-pattern") or None,
        max_expires=limit,
        now=_local_now(now),
        sources=sources,
    )


def _duration(value: timedelta | str, uri: str) -> timedelta:
    if isinstance(value, timedelta):
        result = value
    else:
        try:
            result = parse_duration(str(value))
        except ValueError as exc:
            raise MaintenanceRefusedError(uri, f"partition.expiration-time: {exc}") from None
    if result <= timedelta(0):
        raise UsageError(f"the expiration time must be positive, not {result}")
    return result


def duration_text(value: timedelta) -> str:
    """``timedelta(days=7)`` -> ``"7 d"``: the largest of Paimon's units that holds it whole."""
    millis = round(value.total_seconds() * 1000)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if millis % size == 0:
            return f"{millis // size} {unit}"
    return f"{millis} ms"


def _local_now(now: datetime | None) -> datetime:
    """The local wall clock (Java's ``LocalDateTime.now()``); an aware ``now`` is converted to local time."""
    if now is None:
        return datetime.now()
    return now.astimezone().replace(tzinfo=None) if now.tzinfo is not None else now


# -- planning ------------------------------------------------------------------------------------


def plan_partition_expiry(
    table: Table,
    settings: PartitionExpirySettings,
    live: tuple[Snapshot, list[ManifestEntry]] | None = None,
) -> PartitionExpiryPlan:
    """Judge every live partition of the latest snapshot; changes nothing.

    Args:
        table: the Paimon table.
        settings: from :func:`resolve_settings`.
        live: the latest snapshot and its ``live_entries`` when the caller has read them (health), so they
            are not read twice.
    """
    extractor = PartitionTimeExtractor(
        settings.timestamp_pattern,
        settings.timestamp_formatter,
        "timestamp formatter (partition.timestamp-formatter)",
        table.uri,
    )
    latest = live[0] if live else table.snapshot_manager.latest_snapshot()
    plan = PartitionExpiryPlan(table.uri, settings, latest.id if latest else None)
    if latest is None:
        return plan
    partitions = _live_partitions(table, live[1] if live else live_entries(table, latest))
    judge = _judge_values_time(extractor, table) if settings.strategy == "values-time" else _judge_update_time
    expired: list[PartitionState] = []
    for state in partitions:
        judged = judge(state)
        if judged is None:
            plan.skipped.append(state)
        elif judged < _threshold(settings):
            expired.append(state)
        else:
            plan.kept += 1
    expired.sort(key=lambda p: p.joined.encode("utf-16-be"))  # Java's String order: UTF-16 code units
    plan.expired, plan.over_limit = expired[: settings.max_expires], expired[settings.max_expires :]
    plan.skipped.sort(key=lambda p: p.joined.encode("utf-16-be"))
    _refuse_indexed(table, latest, plan)
    return plan


def _threshold(settings: PartitionExpirySettings) -> datetime:
    before = settings.expire_before
    if settings.strategy == "update-time":  # Java compares epoch milliseconds
        return before.replace(microsecond=before.microsecond // 1000 * 1000)
    return before


def _live_partitions(table: Table, entries: list[ManifestEntry]) -> list[PartitionState]:
    codec = PartitionCodec(table.schema)
    default = table.schema.table_options.partition_default_name
    states: dict[bytes, PartitionState] = {}
    for entry in entries:
        state = states.get(entry.partition)
        if state is None:
            raw = codec.values(entry.partition)
            spec = {
                key: default if value is None else legacy_partition_string(value, dtype)
                for key, value, dtype in zip(codec.keys, raw, codec.types, strict=True)
            }
            state = states[entry.partition] = PartitionState(
                entry.partition, codec.to_json(entry.partition), spec
            )
        state.entries.append(entry)
    return list(states.values())


def _judge_values_time(
    extractor: PartitionTimeExtractor, table: Table
) -> Callable[[PartitionState], datetime | None]:
    codec = PartitionCodec(table.schema)

    def judge(state: PartitionState) -> datetime | None:
        raw = codec.values(state.partition)
        texts: list[str | None] = []
        for key, value, dtype in zip(codec.keys, raw, codec.types, strict=True):
            if value is not None and dtype.root in BINARY_ROOTS:
                state.reason = f"{key} is a binary value, whose Java text (an identity hash) never parses"
                return None
            texts.append(None if value is None else state.spec[key])
        try:
            state.time = extractor.extract(codec.keys, texts)
        except UnparsablePartitionTime as exc:
            dates = [k for k, t in zip(codec.keys, codec.types, strict=True) if t.root == "DATE"]
            hint = (
                " (a DATE value is its day number in Java, which never parses: apache/paimon#6439)"
                if dates
                else ""
            )
            state.reason = f"{exc}{hint}"
            return None
        return state.time

    return judge


def _judge_update_time(state: PartitionState) -> datetime | None:
    times = [e.file.creation_time for e in state.entries]
    if any(t is None for t in times):
        state.reason = "a live file has no _CREATION_TIME"
        return None
    # _CREATION_TIME is a local wall-clock time stored as if UTC: the naive reading is the wall clock.
    state.time = max(t.replace(tzinfo=None) for t in times if t is not None)
    return state.time


def _refuse_indexed(table: Table, snapshot: Snapshot, plan: PartitionExpiryPlan) -> None:
    """Java drops a dropped partition's index entries too; this release does not rewrite index manifests."""
    if not snapshot.index_manifest or not plan.expired:
        return
    path = table.manifest_path(snapshot.index_manifest)
    _, records = avro.read_records(table.io.read_bytes(path), table.io.uri(path))
    indexed = {bytes(r["_PARTITION"]) for r in records if r.get("_KIND", _INDEX_ADD) == _INDEX_ADD}
    hit = [p.joined for p in plan.expired if p.partition in indexed]
    if hit:
        raise MaintenanceRefusedError(
            table.uri,
            f"partitions {hit[:5]} have index files (deletion vectors or dynamic-bucket hash indexes) in the "
            "index manifest, which partition expiry does not drop yet",
        )


# -- the run -------------------------------------------------------------------------------------


def _unchanged_since(table: Table, plan: PartitionExpiryPlan) -> Callable[[Snapshot | None], None]:
    """A check run before every publish attempt: the partitions to drop still hold exactly the planned files.

    Java recomputes the drop from the snapshot it commits on; here a partition that gained or lost a file since
    the plan raises :class:`CommitConflictError`, and :func:`expire_partitions` plans again on the new snapshot.
    """
    selected = {p.partition for p in plan.expired}
    planned = {e.identifier() for p in plan.expired for e in p.entries}

    def validate(latest: Snapshot | None) -> None:
        if latest is None or latest.id == plan.snapshot_id:
            return
        live = {e.identifier() for e in live_entries(table, latest) if e.partition in selected}
        if live != planned:
            raise CommitConflictError(
                f"{table.uri}: the partitions to drop changed in snapshot {latest.id} since the plan (snapshot "
                f"{plan.snapshot_id}); planning again"
            )

    return validate


def expire_partitions(
    table: Table,
    *,
    expiration_time: timedelta | str | None = None,
    timestamp_formatter: str | None = None,
    timestamp_pattern: str | None = None,
    strategy: str | None = None,
    max_expires: int | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    committer: Committer | None = None,
) -> PartitionExpiryResult:
    """Drop the expired partitions in one OVERWRITE snapshot (nothing deleted from disk), or report them.

    Args:
        table: the Paimon table.
        expiration_time: a ``timedelta`` or ``"7 d"`` (default ``partition.expiration-time``; required).
        timestamp_formatter: a Java ``DateTimeFormatter`` pattern (default ``partition.timestamp-formatter``).
        timestamp_pattern: ``"$dt $hh:00:00"`` (default ``partition.timestamp-pattern``, else the first value).
        strategy: ``values-time`` or ``update-time`` (default ``partition.expiration-strategy``, values-time).
        max_expires: at most this many partitions per run (default ``partition.expiration-max-num``, 100).
        dry_run: plan and report, commit nothing.
        now: the local wall-clock "now" (default: the clock; tests pass one).
        committer: commits as its user (default: a new commit user).

    Example:
        >>> expire_partitions(table, expiration_time="30 d", max_expires=10).summary()  # doctest: +SKIP
        '/wh/db.db/t: expired 3 partitions (dt=2024-01-01, ...): 12 files (1.2 MiB) dropped in snapshot 9'
    """
    started = time.monotonic()
    settings = resolve_settings(
        table,
        expiration_time=expiration_time,
        timestamp_formatter=timestamp_formatter,
        timestamp_pattern=timestamp_pattern,
        strategy=strategy,
        max_expires=max_expires,
        now=now,
    )
    plan = plan_partition_expiry(table, settings)
    if dry_run or not plan.expired:
        return PartitionExpiryResult(plan, dry_run, duration_seconds=time.monotonic() - started)
    committer = committer or Committer(table)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            committed = committer.commit(
                plan.delete_entries(), kind=CommitKind.OVERWRITE, validate=_unchanged_since(table, plan)
            )
        except CommitConflictError:
            if attempt == COMMIT_ATTEMPTS:
                raise
            plan = plan_partition_expiry(table, settings)  # a concurrent commit changed those partitions
            if not plan.expired:
                return PartitionExpiryResult(plan, False, duration_seconds=time.monotonic() - started)
            continue
        return PartitionExpiryResult(
            plan, False, committed.snapshot.id, attempt, duration_seconds=time.monotonic() - started
        )
    raise AssertionError("unreachable")
