"""One human summary per operation, computed from the operation's JSON result.

Every operation's result has a ``to_json()`` document with at least ``operation``, ``format`` and
``dryRun`` (and ``table`` where the caller knows it). The CLI prints :func:`summary` of that document and
the Airflow operators log the same line, whether the work ran in the worker or came back from a Spark
job as JSON: one formatting, so the two can never drift apart. Unknown operations get a generic line.

Example:
    >>> summary({"operation": "compact-manifests", "table": "/wh/t", "dryRun": False, "merge": "none",
    ...          "mode": "full", "manifestsBefore": 3})
    '/wh/t: full manifest compaction: nothing to merge (3 manifests)'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def human_bytes(n: int | None) -> str:
    """``1536`` -> ``"1.5 KiB"`` (bytes below 1 KiB as ``"512 B"``)."""
    size = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def plural(count: int, noun: str) -> str:
    """``1 snapshot``, ``5 snapshots``, ``2 data-files``, ``3 directories``, ``2 statistics``."""
    if count == 1 or noun.endswith("s"):
        return f"{count} {noun}"
    return f"{count} {noun[:-1]}ies" if noun.endswith("y") else f"{count} {noun}s"


def kinds(files: Mapping[str, int] | None, sizes: Mapping[str, int] | None) -> str:
    """``{"data-file": 4}`` and their bytes -> ``"4 data-files (1.2 KiB)"``; ``"nothing"`` when empty."""
    sizes = sizes or {}
    return ", ".join(
        f"{plural(n, kind)} ({human_bytes(sizes.get(kind, 0))})" for kind, n in (files or {}).items()
    ) or ("nothing")


def _prefix(d: Mapping[str, Any]) -> str:
    table = d.get("table")
    return f"{table}: " if table else ""


def _expire(d: Mapping[str, Any]) -> str:
    expired = d.get("snapshotsExpired") or []
    verb = "would expire" if d.get("dryRun") else "expired"
    span = f"snapshots {expired[0]}..{expired[-1]}" if expired else "no snapshots"
    deleted = "to delete" if d.get("dryRun") else "deleted"
    known = [
        f"{k} {d[v]}"
        for k, v in (("earliest now", "earliestAfter"), ("latest", "latest"))
        if d.get(v) is not None
    ]
    where = f" ({', '.join(known)})" if known else ""
    return f"{verb} {span}{where}; files {deleted}: {kinds(d.get('files'), d.get('bytes'))}"


def _expire_iceberg(d: Mapping[str, Any]) -> str:
    """Iceberg snapshot ids are random, so the line counts them instead of showing a range."""
    expired = d.get("snapshotsExpired") or []
    verb = "would expire" if d.get("dryRun") else "expired"
    refs = sorted(d.get("refsRemoved") or {})
    removed = f", {'remove' if d.get('dryRun') else 'removed'} refs {', '.join(refs)}" if refs else ""
    deleted = "to delete" if d.get("dryRun") else "deleted"
    return (
        f"{verb} {len(expired)} of {plural(d.get('snapshotsBefore') or 0, 'snapshot')}{removed}; "
        f"files {deleted}: {kinds(d.get('files'), d.get('bytes'))}"
    )


def _orphans(d: Mapping[str, Any]) -> str:
    """No "N old enough": a name-only local listing reads the age of unused files only, so that count
    would claim in-use files old enough; ``orphaned`` is unused *and* older than the cutoff."""
    deleted = "to delete" if d.get("dryRun") else "deleted"
    recent = f" ({d['tooRecent']} too recent)" if d.get("tooRecent") else ""
    return (
        f"listed {plural(d.get('filesListed') or 0, 'file')}{recent}, {d.get('orphans')} orphaned; "
        f"files {deleted}: {kinds(d.get('files'), d.get('bytes'))}"
    )


def _compact_manifests(d: Mapping[str, Any]) -> str:
    mode = d.get("mode", "full")
    if d.get("merge") == "none":
        return f"{mode} manifest compaction: nothing to merge ({plural(d.get('manifestsBefore') or 0, 'manifest')})"
    verb = "would merge" if d.get("dryRun") else "merged"
    committed = f"; committed snapshot {d['snapshotId']}" if d.get("snapshotId") else ""
    return (
        f"{mode} manifest compaction {verb} {plural(d.get('manifestsBefore') or 0, 'manifest')} "
        f"({human_bytes(d.get('bytesBefore'))}) into {d.get('manifestsAfter')} "
        f"({human_bytes(d.get('bytesAfter'))}){committed}"
    )


def _compact_primary_key(d: Mapping[str, Any]) -> str:
    """Paimon's merge-tree compaction of a primary-key table: buckets, files rewritten and upgraded, skipped."""
    head = f"{d.get('mode')} primary-key compaction"
    skipped = d.get("skippedBuckets") or []
    tail = f"; skipped {plural(len(skipped), 'bucket')} changed meanwhile" if skipped else ""
    if not d.get("groups"):
        return f"{head}: nothing to compact{tail}"
    verb = "would rewrite" if d.get("dryRun") else "rewrote"
    written = (
        "" if d.get("dryRun") else f" into {d.get('filesWritten')} ({human_bytes(d.get('bytesWritten'))})"
    )
    committed = f"; committed snapshot {d['snapshotId']}" if d.get("snapshotId") is not None else ""
    return (
        f"{head} {verb} {plural(d.get('filesRewritten') or 0, 'file')} ({human_bytes(d.get('bytesRewritten'))})"
        f"{written}, {'would upgrade' if d.get('dryRun') else 'upgraded'} {d.get('filesUpgraded') or 0}, in "
        f"{plural(d.get('groups') or 0, 'bucket')}"
        f"{committed}{tail}"
    )


def _compact_data(d: Mapping[str, Any]) -> str:
    if d.get("primaryKey"):
        return _compact_primary_key(d)
    if not d.get("groups"):
        return "no group of at least the minimum file count to compact"
    if d.get("dryRun"):
        return (
            f"would rewrite {d.get('filesRewritten')} files ({human_bytes(d.get('bytesRewritten'))}) "
            f"in {d.get('groups')} group(s)"
        )
    return (
        f"rewrote {d.get('filesRewritten')} files in {d.get('groups')} group(s) into {d.get('filesWritten')} "
        f"({human_bytes(d.get('bytesRewritten'))} -> {human_bytes(d.get('bytesWritten'))}); "
        f"committed snapshot {d.get('snapshotId')}"
    )


def _compact_data_iceberg(d: Mapping[str, Any]) -> str:
    """Iceberg's document names Java's figures (files to rewrite, groups as a list, one or more commits)."""
    groups = len(d.get("groups") or [])
    if not groups:
        return f"data compaction: nothing to rewrite ({plural(d.get('liveDataFiles') or 0, 'data file')})"
    planned = (
        f"{plural(d.get('filesToRewrite') or 0, 'file')} ({human_bytes(d.get('bytesToRewrite'))}) in "
        f"{plural(groups, 'group')}"
    )
    if d.get("dryRun"):
        return (
            f"data compaction would rewrite {planned} into about {plural(d.get('expectedOutputFiles') or 0, 'file')}"
            f", applying {plural(d.get('deleteFilesApplied') or 0, 'delete file')}"
        )
    commits = d.get("snapshotIds") or []
    skipped = len(d.get("conflicts") or []) + len(d.get("failedCommits") or [])
    tail = f"; {skipped} skipped (groups or commits that met concurrent changes)" if skipped else ""
    if not commits:
        return f"data compaction of {planned} committed nothing{tail}"
    return (
        f"data compaction rewrote {plural(d.get('filesRewritten') or 0, 'file')} in {d.get('groupsCommitted')} of "
        f"{plural(groups, 'group')} into {plural(d.get('filesAdded') or 0, 'file')} "
        f"({human_bytes(d.get('bytesAdded'))}), {plural(d.get('rowsPurged') or 0, 'deleted row')} purged, "
        f"{plural(d.get('deleteFilesRemoved') or 0, 'delete file')} removed; {plural(len(commits), 'commit')}, "
        f"last snapshot {d.get('snapshotId')}{tail}"
    )


def _write(d: Mapping[str, Any]) -> str:
    if d.get("alreadyCommitted"):
        discarded = d.get("filesDiscarded")
        extra = f"; discarded the {discarded} file(s) this run wrote" if discarded else ""
        return f"snapshot {d.get('snapshotId')} already holds this write (a re-run){extra}"
    if d.get("dryRun"):
        return f"dry run: would write {d.get('sourceRows', '?')} rows"
    if d.get("snapshotId") is None:
        return "nothing to write"
    return (
        f"wrote {d.get('rowsWritten')} rows in {d.get('filesWritten')} file(s), replaced "
        f"{d.get('filesDeleted', 0)}; committed snapshot {d.get('snapshotId')} ({d.get('commitKind')})"
    )


def _commit(d: Mapping[str, Any]) -> str:
    if d.get("alreadyCommitted"):
        return f"snapshot {d.get('snapshotId')} already holds this commit (a re-run)"
    return (
        f"committed snapshot {d.get('snapshotId')} ({d.get('commitKind')}): +{d.get('filesAdded')} files, "
        f"-{d.get('filesDeleted')} files"
    )


def _expire_partitions(d: Mapping[str, Any]) -> str:
    """Partition expiry drops partitions in a snapshot; their files stay until a snapshot expiry deletes them."""
    expired = d.get("partitionsExpired") or []
    skipped = len(d.get("partitionsSkipped") or [])
    tail = f"; {skipped} skipped (no partition time)" if skipped else ""
    waiting = len(d.get("partitionsOverLimit") or [])
    tail += f"; {waiting} more over max-expires" if waiting else ""
    if not expired:
        return f"no partition to expire ({d.get('strategy')}, before {d.get('expireBefore')}){tail}"
    names = ", ".join(",".join(f"{k}={v}" for k, v in p["spec"].items()) for p in expired[:3])
    names += ", ..." if len(expired) > 3 else ""
    files = f"{plural(d.get('files') or 0, 'file')} ({human_bytes(d.get('bytes'))})"
    if d.get("dryRun"):
        return f"would expire {plural(len(expired), 'partition')} ({names}): {files}{tail}"
    return f"expired {plural(len(expired), 'partition')} ({names}): {files} dropped in snapshot {d.get('snapshotId')}{tail}"


# A format whose document for an operation has its own fields (Iceberg's random snapshot ids, Java's compaction
# figures) has its own line, looked up by (operation, format) before the operation's shared one.
_FORMAT_SUMMARIES: dict[tuple[str, str], Callable[[Mapping[str, Any]], str]] = {
    ("expire-snapshots", "iceberg"): _expire_iceberg,
    ("compact-data", "iceberg"): _compact_data_iceberg,
}
_SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "expire-snapshots": _expire,
    "remove-orphan-files": _orphans,
    "compact-manifests": _compact_manifests,
    "compact-data": _compact_data,
    "expire-partitions": _expire_partitions,
    "write": _write,
    "commit": _commit,
}


def summary(document: Mapping[str, Any]) -> str:
    """One line saying what an operation did (or, in a dry run, would do), from its JSON result.

    Args:
        document: an operation's ``to_json()`` result, or the same document back from a Spark job or XCom.

    Returns:
        ``"<table>: <what happened>"`` (without the prefix when the document names no table), followed by
        ``"; execution: spark"`` (or ``local``) when the document says where it ran.
    """
    operation = str(document.get("operation"))
    render = _FORMAT_SUMMARIES.get((operation, str(document.get("format")))) or _SUMMARIES.get(operation)
    text = render(document) if render else f"{document.get('operation', 'operation')} done"
    where = f"; execution: {document['execution']}" if document.get("execution") else ""
    return _prefix(document) + text + where
