"""Paimon tag operations: create, delete, list, expire, and the scheduled (period-named) tag.

Java: ``AbstractFileStoreTable#createTag``/``deleteTag``, ``TagManager``, ``TagTimeExpire``,
``TagAutoCreation`` (reference paimon-pk-compaction §5.2). Every function returns a
:class:`~airflow_lakeformat.core.maintenance.tag_results.TagResult`.

* **create**: the tagged snapshot is ``snapshot_id`` (default the latest); a snapshot that has expired but
  is still held by another tag is taken from that tag, as Java does; otherwise
  :class:`SnapshotNotFoundError`. The retention is ``time_retained``, else the table's
  ``tag.default-time-retained`` (Java applies it to every new tag), else none. An existing name is refused
  (:class:`TagAlreadyExistsError`) unless ``ignore_if_exists`` (left as it is; Java's ``ignoreIfExists``) or
  ``replace`` (overwritten).
* **delete** (Java's safe subset): only the tag file is deleted. When the tagged snapshot has expired, data
  and manifest files only this tag held are left to orphan cleanup (Java deletes them at once through
  ``TagDeletion``); the result says so. Branches are checked first: a branch made from this tag keeps its own
  copy of the tag, which keeps protecting those files (our expiry and orphan cleanup read every branch's tags).
* **expire**: ``tag_expiry.expired_tags``; the files as for delete.
* **scheduled tag**: the name from ``core/maintenance/tag_periods`` (the period that ended at ``when``), created
  with ``ignore_if_exists``, then ``tag.num-retained-max`` applied to auto tags only, oldest first.

Example:
    >>> create_tag(Table.open("/wh/db.db/t"), "before-backfill")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow_lakeformat.core.errors import SnapshotNotFoundError, TagAlreadyExistsError, UsageError
from airflow_lakeformat.core.maintenance.deletion import FileDeleter
from airflow_lakeformat.core.maintenance.tag_periods import PeriodHandler, oldest_auto_tags
from airflow_lakeformat.core.maintenance.tag_results import DeletedTag, TagResult
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import SnapshotManager
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.tags.tag_expiry import expired_tags, local_naive
from airflow_lakeformat.core.paimon.tags.tag_files import (
    PaimonTag,
    check_tag_name,
    delete_tag_files,
    read_tag,
    read_tags,
    write_tag,
)

Clock = Callable[[], datetime]
LEFT_TO_ORPHAN_CLEANUP = (
    "only the tag file is deleted: data and manifest files only it held are left to snapshot expiry and "
    "orphan cleanup"
)


def _result(table: Table, operation: str, dry_run: bool) -> TagResult:
    return TagResult(operation, table.uri, "paimon", dry_run=dry_run)


def _option_duration(table: Table, key: str) -> timedelta | None:
    from airflow_lakeformat.core.units import parse_duration

    value = table.schema.table_options.get(key)
    if value is None or not value.strip():
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{table.uri}: table option {key}: {exc}") from None


def tagged_snapshot(table: Table, snapshot_id: int | None) -> Snapshot:
    """The snapshot to tag (module docstring)."""
    manager = table.snapshot_manager
    if snapshot_id is None:
        latest = manager.latest_snapshot()
        if latest is None:
            raise SnapshotNotFoundError(f"{table.uri}: the table has no snapshot to tag")
        return latest
    try:
        return manager.snapshot(snapshot_id)
    except SnapshotNotFoundError:
        for tag in read_tags(manager):
            if tag.snapshot_id == snapshot_id:
                return tag.snapshot
        raise


def create_tag(
    table: Table,
    name: str,
    snapshot_id: int | None = None,
    time_retained: timedelta | None = None,
    *,
    ignore_if_exists: bool = False,
    replace: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
) -> TagResult:
    """Create tag ``name`` (module docstring).

    Args:
        table: the table (its branch is the tag's branch).
        name: the tag's name.
        snapshot_id: the snapshot to tag (default: the latest).
        time_retained: the tag's retention (default: ``tag.default-time-retained``, else none).
        ignore_if_exists: an existing tag of that name is left as it is (reported in ``alreadyExisted``).
        replace: an existing tag of that name is overwritten.
        dry_run: report, write nothing.
        now: the create time (default: the local time now).

    Raises:
        SnapshotNotFoundError: no such snapshot (or the table has none).
        TagAlreadyExistsError: the tag exists, and neither ``ignore_if_exists`` nor ``replace``.
    """
    check_tag_name(name)
    result = _result(table, "create-tag", dry_run)
    manager = table.snapshot_manager
    existing = {t.name: t for t in read_tags(manager)}
    if name in existing and not replace:
        if not ignore_if_exists:
            raise TagAlreadyExistsError(
                f"{table.uri}: tag {name!r} already exists (on snapshot {existing[name].snapshot_id})"
            )
        result.already_existed.append(existing[name].info())
        result.tags = [t.info() for t in existing.values()]
        return result
    snapshot = tagged_snapshot(table, snapshot_id)
    retained = (
        time_retained if time_retained is not None else _option_duration(table, "tag.default-time-retained")
    )
    created_at = local_naive(now) if now is not None else datetime.now()
    tag = PaimonTag(name, snapshot, created_at if retained is not None else None, retained, None)
    if not dry_run:
        try:
            write_tag(
                manager, name, snapshot, time_retained=retained, create_time=created_at, replace=replace
            )
        except FileExistsError:
            raise TagAlreadyExistsError(f"{table.uri}: tag {name!r} was created concurrently") from None
        tag = read_tag(manager, name)
    if name in existing:
        result.decisions.append(f"replaced tag {name} (was on snapshot {existing[name].snapshot_id})")
    existing[name] = tag
    result.created.append(tag.info())
    result.tags = [existing[n].info() for n in sorted(existing)]
    return result


def _delete(
    table: Table,
    result: TagResult,
    doomed: list[tuple[PaimonTag, str]],
    deleter: FileDeleter | None,
) -> None:
    """Delete the tag files of ``doomed`` (dry run: none) and record them with notes on files and branches."""
    manager = table.snapshot_manager
    branch_tags = _branch_tags(table)
    for tag, reason in doomed:
        result.deleted.append(DeletedTag(tag.info(), reason))
        if not manager.snapshot_exists(tag.snapshot_id):
            result.decisions.append(
                f"tag {tag.name}: snapshot {tag.snapshot_id} has expired; {LEFT_TO_ORPHAN_CLEANUP}"
            )
        holders = sorted(b for b, snaps in branch_tags.items() if tag.snapshot_id in snaps)
        if holders:
            result.decisions.append(
                f"tag {tag.name}: branch(es) {', '.join(holders)} hold a tag of snapshot {tag.snapshot_id}, "
                "which keeps protecting its files"
            )
    delete_tag_files(manager, [t.name for t, _ in doomed], dry_run=result.dry_run, deleter=deleter)


def _branch_tags(table: Table) -> dict[str, set[int]]:
    """Snapshot ids tagged in each other branch (a branch made from a tag copies that tag)."""
    manager = table.snapshot_manager
    branches = [b for b in manager.branches() if b != table.branch]
    if table.branch != "main":
        branches.append("main")
    result = {}
    for branch in branches:
        other = SnapshotManager(table.io, table.root, branch)
        result[branch] = {t.snapshot_id for t in read_tags(other)}
    return result


def delete_tag(
    table: Table, name: str, *, dry_run: bool = False, deleter: FileDeleter | None = None
) -> TagResult:
    """Delete tag ``name``: its file only (module docstring).

    Raises:
        TagNotFoundError: no such tag.
    """
    tag = read_tag(table.snapshot_manager, name)
    result = _result(table, "delete-tag", dry_run)
    _delete(table, result, [(tag, "asked for")], deleter)
    result.decisions.append(LEFT_TO_ORPHAN_CLEANUP)
    result.tags = _remaining(table, result)
    return result


def _remaining(table: Table, result: TagResult) -> list[Any]:
    gone = {d.tag.name for d in result.deleted}
    return [t.info() for t in read_tags(table.snapshot_manager) if t.name not in gone]


def list_tags(table: Table) -> TagResult:
    """Every tag of the table's branch with its snapshot, schema, create time, retention and expiry."""
    result = _result(table, "list-tags", False)
    result.tags = [t.info() for t in read_tags(table.snapshot_manager)]
    return result


def expire_tags(
    table: Table,
    *,
    older_than: timedelta | datetime | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    deleter: FileDeleter | None = None,
) -> TagResult:
    """Delete the tags whose time retention ended, and with ``older_than`` those created before it.

    Args:
        table: the table.
        older_than: a duration before ``now`` or a point in time (module ``tag_expiry``).
        dry_run: report, delete nothing.
        now: the current time (default: now).
        deleter: delete with this deleter (default: the core's).
    """
    result = _result(table, "expire-tags", dry_run)
    doomed = expired_tags(read_tags(table.snapshot_manager), now=now or datetime.now(), older_than=older_than)
    _delete(table, result, doomed, deleter)
    if doomed:
        result.decisions.append(LEFT_TO_ORPHAN_CLEANUP)
    result.tags = _remaining(table, result)
    return result


def create_period_tag(
    table: Table,
    when: datetime,
    *,
    overrides: Mapping[str, str | timedelta | None] | None = None,
    num_retained_max: int | None = None,
    time_retained: timedelta | None = None,
    snapshot_id: int | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
) -> TagResult:
    """The scheduled tag of the period that ended at ``when`` (module docstring), then auto-tag retention.

    Args:
        table: the table.
        when: the end of the period (a DAG run's data interval end), a local date-time.
        overrides: ``tag.creation-period``, ``tag.creation-period-duration``, ``tag.period-formatter`` over
            the table's options.
        num_retained_max: keep at most this many auto tags (default: ``tag.num-retained-max``, else all).
        time_retained: the new tag's retention (default: ``tag.default-time-retained``).
        snapshot_id: the snapshot to tag (default: the latest).
        dry_run: report, change nothing.
        now: the create time (default: now).
    """
    options = table.schema.table_options
    keys = ("tag.creation-period", "tag.creation-period-duration", "tag.period-formatter")
    handler = PeriodHandler.from_options({k: options.get(k) for k in keys}, overrides)
    name = handler.tag_name_at(when)
    result = create_tag(
        table, name, snapshot_id, time_retained, ignore_if_exists=True, dry_run=dry_run, now=now
    )
    result.decisions.insert(0, f"period {handler.description}: the period ending {when} is tag {name}")
    if num_retained_max is None:
        configured = (options.get("tag.num-retained-max") or "").strip()
        if configured and not configured.isdigit():
            raise UsageError(f"{table.uri}: table option tag.num-retained-max={configured!r} is not a count")
        num_retained_max = int(configured) if configured else None
    if num_retained_max is None:
        return result
    doomed = oldest_auto_tags(result.tags, handler, num_retained_max)
    by_name = {t.name: t for t in read_tags(table.snapshot_manager)}
    pairs = [
        (by_name[t.name], f"tag.num-retained-max {num_retained_max}") for t in doomed if t.name in by_name
    ]
    _delete(table, result, pairs, None)
    gone = {t.name for t in doomed}
    result.tags = [t for t in result.tags if t.name not in gone]
    return result
