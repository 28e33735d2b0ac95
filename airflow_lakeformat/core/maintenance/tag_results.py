"""The one result shape of the tag operations of both formats: create, delete, list and expire tags.

A Paimon tag is a file (``tag/tag-<name>``: the tagged snapshot's JSON, plus ``tagCreateTime`` and
``tagTimeRetained`` when it has a retention); an Iceberg tag is a ref in the table metadata (``max-ref-age-ms``
its retention). Both are described by :class:`TagInfo`, and every tag operation returns a :class:`TagResult`
whose ``to_json()`` has the same keys on both formats: ``operation`` (``create-tag``, ``delete-tag``,
``list-tags``, ``expire-tags``), ``format``, ``table``, ``dryRun``, then ``created``, ``alreadyExisted``,
``deleted`` (each with the ``reason``), ``tags`` (the listing: every tag after the operation), ``decisions``
and ``warnings``.

Deleting a tag deletes only the tag (a file or a ref): data files and manifests that only the tag still held
are left to snapshot expiry and orphan cleanup, which is safe and lazy (Paimon's ``TagManager#deleteTag``
cleans them at once when the tagged snapshot has expired; we do not, see ``docs/tags.md``).

Nothing here imports a format package.

Example:
    >>> info = TagInfo("nightly", snapshot_id=3, schema_id=0, snapshot_time_ms=1_000)
    >>> TagResult("list-tags", "/wh/t", "paimon", tags=[info]).summary()
    '/wh/t: 1 tag: nightly (snapshot 3)'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.maintenance.result_repr import short_repr

__all__ = ["DeletedTag", "TagInfo", "TagResult"]


@dataclass(frozen=True)
class TagInfo:
    """One tag as both formats describe it.

    ``create_time_ms`` is Paimon's ``tagCreateTime`` (a local date-time, read in this machine's zone as
    Java's REST catalog does) or None (Iceberg refs and Paimon tags without retention have none);
    ``time_retained_ms`` is Paimon's ``tagTimeRetained`` or Iceberg's ``max-ref-age-ms``; ``expires_at_ms``
    is when time retention removes it (Paimon: create time + retained; Iceberg: snapshot time + max age).
    """

    name: str
    snapshot_id: int
    schema_id: int | None = None
    snapshot_time_ms: int | None = None
    create_time_ms: int | None = None
    time_retained_ms: int | None = None
    expires_at_ms: int | None = None
    file_mtime_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "snapshotId": self.snapshot_id,
            "schemaId": self.schema_id,
            "snapshotTimeMs": self.snapshot_time_ms,
            "createTimeMs": self.create_time_ms,
            "timeRetainedMs": self.time_retained_ms,
            "expiresAtMs": self.expires_at_ms,
        }


@dataclass(frozen=True)
class DeletedTag:
    """A tag deleted (or, in a dry run, to delete) and why."""

    tag: TagInfo
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**self.tag.to_json(), "reason": self.reason}


@short_repr
@dataclass
class TagResult:
    """What a tag operation did (or, in a dry run, would do); one shape for every tag operation and format.

    Args:
        operation: ``create-tag``, ``delete-tag``, ``list-tags`` or ``expire-tags``.
        table: the table's URI.
        format: ``paimon`` or ``iceberg``.
        dry_run: nothing was changed.
        created: tags created.
        already_existed: tags a create found already there (``ignore_if_exists``): left as they were.
        deleted: tags deleted, with the reason.
        tags: every tag of the table after the operation (a dry run: as it would be).
        decisions, warnings: lines for the log.
    """

    operation: str
    table: str
    format: str
    dry_run: bool = False
    created: list[TagInfo] = field(default_factory=list)
    already_existed: list[TagInfo] = field(default_factory=list)
    deleted: list[DeletedTag] = field(default_factory=list)
    tags: list[TagInfo] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "format": self.format,
            "table": self.table,
            "dryRun": self.dry_run,
            "created": [t.to_json() for t in self.created],
            "alreadyExisted": [t.to_json() for t in self.already_existed],
            "deleted": [d.to_json() for d in self.deleted],
            "tags": [t.to_json() for t in self.tags],
            "decisions": list(self.decisions),
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        """One line (the CLI's and the operators' log line); see :func:`tag_summary`."""
        return f"{self.table}: {tag_summary(self.to_json())}"


def _names(items: list[dict[str, Any]]) -> str:
    return ", ".join(f"{t.get('name')} (snapshot {t.get('snapshotId')})" for t in items)


def tag_summary(d: dict[str, Any]) -> str:
    """The summary of a tag operation's document (without the table prefix).

    Example:
        >>> tag_summary({"operation": "expire-tags", "dryRun": True, "deleted": [], "tags": []})
        'no tag expires (0 tags)'
    """
    dry = bool(d.get("dryRun"))
    created, existed = d.get("created") or [], d.get("alreadyExisted") or []
    deleted, tags = d.get("deleted") or [], d.get("tags") or []
    parts: list[str] = []
    if created:
        parts.append(f"{'would create' if dry else 'created'} tag {_names(created)}")
    if existed:
        parts.append(f"tag {_names(existed)} already exists")
    if deleted:
        verb = "would delete" if dry else "deleted"
        parts.append(f"{verb} {len(deleted)} tag{'s' if len(deleted) != 1 else ''}: {_names(deleted)}")
    operation = d.get("operation")
    if operation == "list-tags":
        noun = "tag" if len(tags) == 1 else "tags"
        return f"{len(tags)} {noun}" + (f": {_names(tags)}" if tags else "")
    if operation == "expire-tags" and not deleted:
        parts.append(f"no tag expires ({len(tags)} tag{'s' if len(tags) != 1 else ''})")
    if operation == "delete-tag" and not deleted:
        parts.append("no tag deleted")
    return "; ".join(parts) or "nothing to do"
