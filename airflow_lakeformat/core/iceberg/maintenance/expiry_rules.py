"""Which Iceberg snapshots and refs an expiry removes: Java 1.10.2 ``RemoveSnapshots.internalApply``, as a value.

Options (``RemoveSnapshots`` constructor, ``expireOlderThan``, ``retainLast``, ``expireSnapshotId``; the
``expire_snapshots`` procedure passes its arguments to them; reference 3a and 2.3):

* ``now`` is captured once; ``older_than`` (a timestamp, or a duration before ``now``) defaults to
  ``now - history.expire.max-snapshot-age-ms`` (5 days); ``retain_last`` (at least 1) defaults to
  ``history.expire.min-snapshots-to-keep`` (1); refs without ``max-ref-age-ms`` use
  ``history.expire.max-ref-age-ms`` (never). ``gc.enabled=false`` refuses everything, as in Java.

Selection (:func:`select_expired`, step numbers of reference 3a):

2. ``main`` is always kept. Another ref is kept iff its snapshot exists and ``now - timestamp <=
   max-ref-age-ms``; a ref to a missing snapshot is dropped with a warning. An explicit id that is the
   head of a kept ref is refused ("Cannot expire %s. Still referenced by refs").
3. For each kept *branch*: ``olderThan = now - max-snapshot-age-ms`` of the ref if set, else the call's
   ``older_than``; ``minKeep`` = the ref's ``min-snapshots-to-keep``, else the call's ``retain_last``.
   Walk ancestors from the head keeping a snapshot while ``kept < minKeep`` or ``timestamp >= olderThan``;
   stop at the first that fails both. Per-ref values override the call's arguments.
4. Snapshots neither an ancestor of a kept branch nor a kept tag's are retained iff ``timestamp >=
   older_than``.
5. Every ref not kept is removed; every snapshot not retained is removed, and explicit ids are removed
   in addition (even inside the retention window) unless they head a kept ref. An explicit id that does
   not exist is ignored (Java ignores it too); we add a warning.

The metadata side effects (statistics, snapshot log, dangling parents) are in ``expiry_commit``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.units import parse_duration

MAIN_BRANCH = "main"
GC_ENABLED = "gc.enabled"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_SNAPSHOT_AGE_MS_DEFAULT = 5 * 24 * 60 * 60 * 1000
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MIN_SNAPSHOTS_TO_KEEP_DEFAULT = 1
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
MAX_REF_AGE_MS_DEFAULT = 2**63 - 1  # Java's Long.MAX_VALUE: refs never expire by default

OlderThan = timedelta | datetime | date | str | int | None


def parse_older_than(value: OlderThan, now_ms: int) -> int | None:
    """An ``older_than`` argument as epoch milliseconds (None: not given).

    Accepts a ``timedelta`` (before ``now``), a ``datetime``/``date`` (naive means UTC), an int (epoch ms),
    or text: a duration (``"5 d"``, ``"36h"``, the syntax of every duration argument) or an ISO-8601
    timestamp (``"2024-05-01T12:00:00Z"``, ``"2024-05-01 12:00:00+02:00"``, ``"2024-05-01"``; no zone means UTC).

    Raises:
        ValueError: text that is neither a duration nor an ISO-8601 timestamp.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"older_than must be a duration or a timestamp, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        return now_ms - int(value.total_seconds() * 1000)
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return int(moment.timestamp() * 1000)
    if isinstance(value, date):
        return parse_older_than(datetime(value.year, value.month, value.day), now_ms)
    text = str(value).strip()
    if re.match(r"^\d{4}-\d{2}-\d{2}", text):
        iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            return parse_older_than(datetime.fromisoformat(iso), now_ms)
        except ValueError as exc:
            raise ValueError(f"not an ISO-8601 timestamp: {text!r} ({exc})") from exc
    try:
        return parse_older_than(parse_duration(text), now_ms)
    except ValueError as exc:
        raise ValueError(
            f"older_than {text!r} is neither a duration ('5 d', '36 h') nor an ISO-8601 timestamp "
            "('2024-05-01T00:00:00Z')"
        ) from exc


def _property_long(properties: Mapping[str, str], name: str, default: int, where: str) -> int:
    raw = properties.get(name)
    if raw is None:
        return default
    try:
        return int(str(raw).strip())
    except ValueError as exc:
        raise MaintenanceRefusedError(where, f"table property {name}={raw!r} is not a number") from exc


def check_gc_enabled(properties: Mapping[str, str], where: str) -> None:
    """Java's ``RemoveSnapshots`` refuses every expiry (even metadata-only) when ``gc.enabled`` is false."""
    if str(properties.get(GC_ENABLED, "true")).strip().lower() == "false":
        raise MaintenanceRefusedError(
            where, "Cannot expire snapshots: GC is disabled (deleting files may corrupt other tables)"
        )


@dataclass(frozen=True)
class IcebergExpiryOptions:
    """The resolved knobs of one run (module docstring); ``now_ms`` is fixed for the whole run."""

    now_ms: int
    older_than_ms: int
    retain_last: int
    max_ref_age_ms: int
    snapshot_ids: tuple[int, ...] = ()
    clean_expired_metadata: bool = False
    sources: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        properties: Mapping[str, str],
        where: str,
        *,
        now_ms: int,
        older_than: OlderThan = None,
        retain_last: int | None = None,
        snapshot_ids: Iterable[int] = (),
        clean_expired_metadata: bool = False,
    ) -> IcebergExpiryOptions:
        """Arguments over the table's ``history.expire.*`` properties over Java's defaults.

        Raises:
            MaintenanceRefusedError: ``gc.enabled=false``, ``retain_last < 1``, a malformed property or
                ``older_than``.
        """
        check_gc_enabled(properties, where)
        sources: dict[str, str] = {}
        try:
            parsed = parse_older_than(older_than, now_ms)
        except ValueError as exc:
            raise MaintenanceRefusedError(where, str(exc)) from exc
        if parsed is None:
            age = _property_long(properties, MAX_SNAPSHOT_AGE_MS, MAX_SNAPSHOT_AGE_MS_DEFAULT, where)
            parsed = now_ms - age
            sources["olderThan"] = (
                MAX_SNAPSHOT_AGE_MS if MAX_SNAPSHOT_AGE_MS in properties else "default (5 d)"
            )
        else:
            sources["olderThan"] = "argument"
        if retain_last is None:
            keep = _property_long(properties, MIN_SNAPSHOTS_TO_KEEP, MIN_SNAPSHOTS_TO_KEEP_DEFAULT, where)
            sources["retainLast"] = (
                MIN_SNAPSHOTS_TO_KEEP if MIN_SNAPSHOTS_TO_KEEP in properties else "default (1)"
            )
        else:
            keep = int(retain_last)
            sources["retainLast"] = "argument"
            if keep < 1:
                raise MaintenanceRefusedError(
                    where, f"Number of snapshots to retain must be at least 1, cannot be: {keep}"
                )
        max_ref_age = _property_long(properties, MAX_REF_AGE_MS, MAX_REF_AGE_MS_DEFAULT, where)
        return cls(
            now_ms=now_ms,
            older_than_ms=parsed,
            retain_last=keep,
            max_ref_age_ms=max_ref_age,
            snapshot_ids=tuple(dict.fromkeys(int(i) for i in snapshot_ids)),
            clean_expired_metadata=bool(clean_expired_metadata),
            sources=sources,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "nowMs": self.now_ms,
            "olderThanMs": self.older_than_ms,
            "olderThan": _iso(self.older_than_ms),
            "retainLast": self.retain_last,
            "maxRefAgeMs": None if self.max_ref_age_ms == MAX_REF_AGE_MS_DEFAULT else self.max_ref_age_ms,
            "snapshotIds": list(self.snapshot_ids),
            "cleanExpiredMetadata": self.clean_expired_metadata,
            "sources": dict(self.sources),
        }


def _iso(millis: int) -> str:
    try:
        return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(millis)


@dataclass(frozen=True)
class Selection:
    """What :func:`select_expired` decided on one metadata version."""

    expired_ids: tuple[int, ...]  # in the metadata's snapshot order
    retained_ids: frozenset[int]
    refs_removed: dict[str, int]  # name -> snapshot id it pointed at
    refs_kept: dict[str, int]
    decisions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def _ancestors(head: int, by_id: Mapping[int, Any]) -> Iterable[Any]:
    """``SnapshotUtil.ancestorsOf``: the head, then parents while they exist."""
    current = by_id.get(head)
    while current is not None:
        yield current
        parent = current.parent_snapshot_id
        current = by_id.get(parent) if parent is not None else None


def _ref_type(ref: Any) -> str:
    kind = ref.snapshot_ref_type
    return str(getattr(kind, "value", kind)).lower()


def select_expired(metadata: Any, options: IcebergExpiryOptions, where: str) -> Selection:
    """Java's ``internalApply`` selection on one metadata version (module docstring).

    Args:
        metadata: pyiceberg ``TableMetadata``.
        options: the run's options.
        where: the table's name, for errors.

    Raises:
        MaintenanceRefusedError: an explicit id heads a kept ref.
    """
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    decisions: list[str] = []
    warnings: list[str] = []
    kept_refs, removed_refs = _expire_refs(metadata.refs, by_id, options, decisions, warnings)
    _check_explicit_ids(options.snapshot_ids, kept_refs, by_id, where, warnings)
    retained, referenced = _retained_by_refs(kept_refs, by_id, options, decisions)
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id not in referenced and snapshot.timestamp_ms >= options.older_than_ms:
            retained.add(snapshot.snapshot_id)
    explicit = set(options.snapshot_ids)
    expired = tuple(
        s.snapshot_id
        for s in metadata.snapshots
        if s.snapshot_id not in retained or s.snapshot_id in explicit
    )
    expired_set = set(expired)
    decisions.append(
        f"{len(expired)} of {len(metadata.snapshots)} snapshot(s) expire (older than {_iso(options.older_than_ms)}, "
        f"retain-last {options.retain_last}"
        + (f", {len(explicit & expired_set)} given explicitly" if explicit else "")
        + ")"
    )
    return Selection(
        expired_ids=expired,
        retained_ids=frozenset(s for s in by_id if s not in expired_set),
        refs_removed=removed_refs,
        refs_kept={name: ref.snapshot_id for name, ref in kept_refs.items()},
        decisions=tuple(decisions),
        warnings=tuple(warnings),
    )


def _expire_refs(
    refs: Mapping[str, Any],
    by_id: Mapping[int, Any],
    options: IcebergExpiryOptions,
    decisions: list[str],
    warnings: list[str],
) -> tuple[dict[str, Any], dict[str, int]]:
    """Step 1: the refs kept and removed (``max-ref-age-ms``; a ref to a missing snapshot is removed; ``main``
    is always kept)."""
    kept_refs: dict[str, Any] = {}
    removed_refs: dict[str, int] = {}
    for name, ref in refs.items():
        if name == MAIN_BRANCH:
            kept_refs[name] = ref
            continue
        snapshot = by_id.get(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else options.max_ref_age_ms
        if snapshot is None:
            warnings.append(f"removing invalid ref {name}: snapshot {ref.snapshot_id} does not exist")
            removed_refs[name] = ref.snapshot_id
        elif options.now_ms - snapshot.timestamp_ms <= max_age:
            kept_refs[name] = ref
        else:
            removed_refs[name] = ref.snapshot_id
            decisions.append(
                f"{_ref_type(ref)} {name} expires: its snapshot {ref.snapshot_id} is older than "
                f"max-ref-age-ms {max_age}"
            )
    return kept_refs, removed_refs


def _check_explicit_ids(
    snapshot_ids: Iterable[int],
    kept_refs: Mapping[str, Any],
    by_id: Mapping[int, Any],
    where: str,
    warnings: list[str],
) -> None:
    """Step 2: an explicit id may not head a kept ref (Java's message); a missing one is a warning."""
    heads: dict[int, list[str]] = {}
    for name, ref in kept_refs.items():
        heads.setdefault(ref.snapshot_id, []).append(name)
    for snapshot_id in snapshot_ids:
        if snapshot_id in heads:
            raise MaintenanceRefusedError(
                where, f"Cannot expire {snapshot_id}. Still referenced by refs: {sorted(heads[snapshot_id])}"
            )
        if snapshot_id not in by_id:
            warnings.append(f"snapshot {snapshot_id} (given explicitly) does not exist")


def _retained_by_refs(
    kept_refs: Mapping[str, Any],
    by_id: Mapping[int, Any],
    options: IcebergExpiryOptions,
    decisions: list[str],
) -> tuple[set[int], set[int]]:
    """Step 3: the snapshots the kept refs retain (heads, and each branch's ancestors by its retention), and
    every snapshot a ref reaches; ``(retained, referenced)``."""
    retained: set[int] = {ref.snapshot_id for ref in kept_refs.values() if ref.snapshot_id in by_id}
    referenced: set[int] = set()
    for name, ref in kept_refs.items():
        if _ref_type(ref) != "branch":
            referenced.add(ref.snapshot_id)
            continue
        custom_age = ref.max_snapshot_age_ms is not None
        older_than = options.now_ms - ref.max_snapshot_age_ms if custom_age else options.older_than_ms
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else options.retain_last
        kept: set[int] = set()
        walking = True
        for ancestor in _ancestors(ref.snapshot_id, by_id):
            referenced.add(ancestor.snapshot_id)
            if walking and (len(kept) < min_keep or ancestor.timestamp_ms >= older_than):
                kept.add(ancestor.snapshot_id)
            else:
                walking = False
        retained |= kept
        if custom_age or ref.min_snapshots_to_keep is not None:
            decisions.append(
                f"branch {name} keeps {len(kept)} snapshot(s) by its own retention "
                f"(min-snapshots-to-keep {min_keep}, older than {_iso(older_than)} expires)"
            )
    return retained, referenced


__all__ = [
    "MAIN_BRANCH",
    "IcebergExpiryOptions",
    "Selection",
    "check_gc_enabled",
    "parse_older_than",
    "select_expired",
]
