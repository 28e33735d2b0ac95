"""Iceberg tags: create, delete, list, expire, and the scheduled (period-named) tag, as refs of the metadata.

A tag is a ref of type ``tag`` (spec "Snapshot References"); its time retention is ``max-ref-age-ms``. Every
change is a metadata-only commit of pyiceberg's ``ManageSnapshots`` updates (``set-snapshot-ref`` /
``remove-snapshot-ref`` with ``assert-ref-snapshot-id``) through the package's one commit-retry loop
(``core/iceberg/write/commit.py``): each attempt stages against the latest metadata, so a concurrent commit
makes it re-check and retry instead of failing.

* **create**: on ``snapshot_id`` (default: the current snapshot; a missing one is
  :class:`SnapshotNotFoundError`); an existing ref of that name is refused (:class:`TagAlreadyExistsError`)
  unless ``ignore_if_exists`` (left as it is) or ``replace`` (a tag moved; a branch is never replaced).
* **delete**: removes the ref only; its snapshot stays until snapshot expiry removes it (if nothing else holds
  it), and that expiry deletes the files. Branches are refused (``delete`` takes tags only).
* **expire** (Java ``RemoveSnapshots`` step 2 for tags, without expiring snapshots): a tag goes when
  ``now - snapshot.timestamp-ms > max-ref-age-ms`` (the ref's, else the table's
  ``history.expire.max-ref-age-ms``, else never), when its snapshot is missing (Java drops such refs with a
  warning), or with ``older_than`` when its snapshot's timestamp is before it. ``older_than``: a duration
  before ``now``, or a point in time (naive means UTC, as every Iceberg timestamp argument here).
* **scheduled tag**: Paimon's period naming (``core/maintenance/tag_periods``), ``ignore_if_exists``, then
  ``num_retained_max`` over the auto tags only; retention ``time_retained`` becomes ``max-ref-age-ms``.

Example:
    >>> create_tag(open_table("/wh/db/events"), "before-backfill", time_retained=timedelta(days=7))  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta

from pyiceberg.table import Transaction
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.update.snapshot import ManageSnapshots

from airflow_lakeformat.core.errors import (
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UsageError,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import (
    MAX_REF_AGE_MS,
    MAX_REF_AGE_MS_DEFAULT,
    OlderThan,
    parse_older_than,
)
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry
from airflow_lakeformat.core.maintenance.tag_periods import PeriodHandler, oldest_auto_tags
from airflow_lakeformat.core.maintenance.tag_results import DeletedTag, TagInfo, TagResult

SNAPSHOT_STAYS = (
    "only the ref is removed: its snapshot stays until snapshot expiry removes it (if no other ref holds it), "
    "and that expiry deletes its files"
)


def _now_ms(now: datetime | None) -> int:
    return int((now.timestamp() if now is not None else time.time()) * 1000)


def tag_info(table: IcebergTable, name: str, ref: SnapshotRef) -> TagInfo:
    return _new_tag_info(table, name, ref.snapshot_id, ref.max_ref_age_ms)


def _new_tag_info(table: IcebergTable, name: str, snapshot_id: int, age: int | None) -> TagInfo:
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    stamp = None if snapshot is None else snapshot.timestamp_ms
    return TagInfo(
        name=name,
        snapshot_id=snapshot_id,
        schema_id=None if snapshot is None else snapshot.schema_id,
        snapshot_time_ms=stamp,
        time_retained_ms=age,
        expires_at_ms=None if age is None or stamp is None else stamp + age,
    )


def iceberg_tags(table: IcebergTable) -> dict[str, SnapshotRef]:
    refs = table.metadata.refs.items()
    return {n: r for n, r in sorted(refs) if r.snapshot_ref_type == SnapshotRefType.TAG}


def _result(table: IcebergTable, operation: str, dry_run: bool) -> TagResult:
    return TagResult(operation, table.name, "iceberg", dry_run=dry_run)


def _listing(table: IcebergTable, result: TagResult, *, add: TagInfo | None = None) -> None:
    gone = {d.tag.name for d in result.deleted}
    tags = [tag_info(table, n, r) for n, r in iceberg_tags(table).items() if n not in gone]
    if add is not None:
        tags = sorted([t for t in tags if t.name != add.name] + [add], key=lambda t: t.name)
    result.tags = tags


def _check_name(name: str) -> str:
    if not name or not name.strip():
        raise UsageError("a tag name must not be blank")
    if name == "main":
        raise UsageError("'main' is the main branch, not a tag name")
    return name


def create_tag(
    table: IcebergTable,
    name: str,
    snapshot_id: int | None = None,
    time_retained: timedelta | None = None,
    *,
    ignore_if_exists: bool = False,
    replace: bool = False,
    dry_run: bool = False,
) -> TagResult:
    """Create tag ``name`` (module docstring).

    Args:
        table: the table.
        name: the tag's name.
        snapshot_id: the snapshot to tag (default: the current one).
        time_retained: the tag's ``max-ref-age-ms`` (default: none; the table's ``history.expire.max-ref-age-ms``).
        ignore_if_exists: an existing ref of that name is left as it is (reported in ``alreadyExisted``).
        replace: an existing tag of that name is moved to the snapshot.
        dry_run: report, commit nothing.

    Raises:
        SnapshotNotFoundError: no such snapshot (or the table has none).
        TagAlreadyExistsError: the ref exists (a branch always; a tag unless ``ignore_if_exists``/``replace``).
    """
    _check_name(name)
    result = _result(table, "create-tag", dry_run)
    existing = table.metadata.refs.get(name)
    if existing is not None:
        if existing.snapshot_ref_type != SnapshotRefType.TAG:
            raise TagAlreadyExistsError(f"{table.name}: {name!r} is a branch")
        if ignore_if_exists and not replace:
            result.already_existed.append(tag_info(table, name, existing))
            _listing(table, result)
            return result
        if not replace:
            raise TagAlreadyExistsError(
                f"{table.name}: tag {name!r} already exists (on snapshot {existing.snapshot_id})"
            )
    snapshot = table.snapshot(snapshot_id)
    if snapshot is None:
        raise SnapshotNotFoundError(f"{table.name}: the table has no snapshot to tag")
    age = None if time_retained is None else int(time_retained.total_seconds() * 1000)
    if age is not None and age <= 0:
        raise UsageError(f"time_retained must be positive, not {time_retained}")
    target = snapshot.snapshot_id
    if not dry_run:

        def stage(tx: Transaction) -> None:
            current = tx.table_metadata.refs.get(name)
            if current is not None and not replace:
                raise TagAlreadyExistsError(f"{table.name}: tag {name!r} was created concurrently")
            if tx.table_metadata.snapshot_by_id(target) is None:
                raise SnapshotNotFoundError(f"{table.name}: snapshot {target} does not exist")
            ManageSnapshots(tx).create_tag(target, name, max_ref_age_ms=age).commit()

        table.check_writable()
        commit_with_retry(table, stage, description=f"create tag {name}", check_heads=False)
    if existing is not None:
        result.decisions.append(f"replaced tag {name} (was on snapshot {existing.snapshot_id})")
    info = _new_tag_info(table, name, target, age)
    result.created.append(info)
    _listing(table, result, add=info)
    return result


def _remove(table: IcebergTable, names: list[str], description: str) -> None:
    """Commit the removal of the tags ``names`` (those still there; a concurrent removal is fine)."""

    def stage(tx: Transaction) -> None:
        manage = ManageSnapshots(tx)
        for name in names:
            ref = tx.table_metadata.refs.get(name)
            if ref is not None and ref.snapshot_ref_type == SnapshotRefType.TAG:
                manage.remove_tag(name)
        manage.commit()

    table.check_writable()
    commit_with_retry(table, stage, description=description, check_heads=False)


def delete_tag(table: IcebergTable, name: str, *, dry_run: bool = False) -> TagResult:
    """Remove tag ``name`` (module docstring).

    Raises:
        TagNotFoundError: no tag of that name (a branch is refused as a usage mistake).
    """
    ref = table.metadata.refs.get(name)
    if ref is not None and ref.snapshot_ref_type != SnapshotRefType.TAG:
        raise UsageError(f"{table.name}: {name!r} is a branch, not a tag")
    if ref is None:
        known = ", ".join(iceberg_tags(table)) or "none"
        raise TagNotFoundError(f"{table.name}: no tag named {name!r} (tags: {known})")
    result = _result(table, "delete-tag", dry_run)
    result.deleted.append(DeletedTag(tag_info(table, name, ref), "asked for"))
    if not dry_run:
        _remove(table, [name], f"delete tag {name}")
    result.decisions.append(SNAPSHOT_STAYS)
    _listing(table, result)
    return result


def list_tags(table: IcebergTable) -> TagResult:
    """Every tag with its snapshot, schema, retention (``max-ref-age-ms``) and when it expires."""
    result = _result(table, "list-tags", False)
    _listing(table, result)
    return result


def expired_tags(
    table: IcebergTable, *, now_ms: int, older_than: OlderThan = None
) -> list[tuple[str, SnapshotRef, str]]:
    """The tags ``expire_tags`` removes, with reasons (module docstring)."""
    properties = table.metadata.properties
    try:
        default_age = int(str(properties.get(MAX_REF_AGE_MS, MAX_REF_AGE_MS_DEFAULT)).strip())
        cutoff = parse_older_than(older_than, now_ms)
    except ValueError as exc:
        raise UsageError(f"{table.name}: {exc}") from None
    doomed = []
    for name, ref in iceberg_tags(table).items():
        snapshot = table.metadata.snapshot_by_id(ref.snapshot_id)
        age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_age
        if snapshot is None:
            doomed.append((name, ref, f"its snapshot {ref.snapshot_id} does not exist"))
        elif now_ms - snapshot.timestamp_ms > age:
            doomed.append((name, ref, f"its snapshot is older than max-ref-age-ms {age}"))
        elif cutoff is not None and snapshot.timestamp_ms < cutoff:
            doomed.append((name, ref, f"its snapshot's timestamp {snapshot.timestamp_ms} is before {cutoff}"))
    return doomed


def expire_tags(
    table: IcebergTable, *, older_than: OlderThan = None, dry_run: bool = False, now: datetime | None = None
) -> TagResult:
    """Remove the tags whose ``max-ref-age-ms`` has passed, whose snapshot is missing, or (with
    ``older_than``) whose snapshot is older (module docstring); one commit.

    Args:
        table: the table.
        older_than: a duration before ``now``, or a point in time (naive: UTC).
        dry_run: report, commit nothing.
        now: the current time (default: now).
    """
    result = _result(table, "expire-tags", dry_run)
    doomed = expired_tags(table, now_ms=_now_ms(now), older_than=older_than)
    result.deleted = [DeletedTag(tag_info(table, n, r), reason) for n, r, reason in doomed]
    if doomed and not dry_run:
        _remove(table, [n for n, _, _ in doomed], f"expire {len(doomed)} tag(s)")
    if doomed:
        result.decisions.append(SNAPSHOT_STAYS)
    _listing(table, result)
    return result


def create_period_tag(
    table: IcebergTable,
    when: datetime,
    *,
    overrides: Mapping[str, str | timedelta | None] | None = None,
    num_retained_max: int | None = None,
    time_retained: timedelta | None = None,
    snapshot_id: int | None = None,
    dry_run: bool = False,
) -> TagResult:
    """The scheduled tag of the period that ended at ``when`` (module docstring), then auto-tag retention.

    Args:
        table: the table.
        when: the end of the period (a DAG run's data interval end), a wall-clock date-time.
        overrides: ``tag.creation-period``, ``tag.creation-period-duration``, ``tag.period-formatter``
            (an Iceberg table has no such properties: defaults daily, with_dashes).
        num_retained_max: keep at most this many auto tags (default: all).
        time_retained: the new tag's ``max-ref-age-ms``.
        snapshot_id: the snapshot to tag (default: the current one).
        dry_run: report, commit nothing.
    """
    handler = PeriodHandler.from_options({}, overrides)
    name = handler.tag_name_at(when)
    result = create_tag(table, name, snapshot_id, time_retained, ignore_if_exists=True, dry_run=dry_run)
    result.decisions.insert(0, f"period {handler.description}: the period ending {when} is tag {name}")
    if num_retained_max is None:
        return result
    doomed = oldest_auto_tags(result.tags, handler, num_retained_max)
    refs = table.metadata.refs
    result.deleted = [DeletedTag(t, f"num_retained_max {num_retained_max}") for t in doomed if t.name in refs]
    if result.deleted and not dry_run:
        _remove(table, [d.tag.name for d in result.deleted], "tag retention")
    gone = {t.name for t in doomed}
    result.tags = [t for t in result.tags if t.name not in gone]
    return result
