"""Reading, writing and deleting Paimon tag files (``tag/tag-<name>``), as Java's ``TagManager`` does.

**Shape** (Java ``Tag``/``TagManager#createOrReplaceTag``; reference paimon-format §5): the tagged snapshot's
JSON, every field kept. With a time retention, two more fields: ``tagCreateTime``, a ``LocalDateTime`` as
Jackson's JavaTimeModule writes it (an array ``[year, month, day, hour, minute]``, then ``second`` if second
or nanos are not zero, then ``nanos`` if not zero), and ``tagTimeRetained``, a ``Duration`` as decimal
seconds (``86400.0``). Without a retention Java writes the plain snapshot JSON (readers of Paimon <= 0.7
cannot read the extra fields), and so do we. The create time is this machine's local wall-clock time, as
Java's ``LocalDateTime.now()`` is the JVM's.

**Writing**: a new tag is published with the store's create-if-absent (local: link of a hidden temp file;
S3: a conditional PUT), so two creators of one name never overwrite each other and a reader never sees a
partial file; on a store without it, check-then-write (a PUT is atomic). Replacing a tag (asked for
explicitly) overwrites it atomically.

**Deleting** goes through the core's one deletion module (``core/maintenance/deletion.py``), as snapshot
expiry deletes snapshot files: one ordered delete per tag file, kind ``tag``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_lakeformat.core.errors import CorruptMetadataError, DeletionFailedError, UsageError
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, FileDeleter
from airflow_lakeformat.core.maintenance.tag_results import TagInfo
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import SnapshotManager

CREATE_TIME = "tagCreateTime"
TIME_RETAINED = "tagTimeRetained"


def local_datetime_to_json(value: datetime) -> list[int]:
    """A naive date-time as Jackson writes a ``LocalDateTime`` (trailing zero second/nanos omitted).

    Example:
        >>> local_datetime_to_json(datetime(2024, 1, 2, 3, 4))
        [2024, 1, 2, 3, 4]
        >>> local_datetime_to_json(datetime(2024, 1, 2, 3, 4, 5, 6))
        [2024, 1, 2, 3, 4, 5, 6000]
    """
    out = [value.year, value.month, value.day, value.hour, value.minute]
    nanos = value.microsecond * 1000
    if value.second or nanos:
        out.append(value.second)
        if nanos:
            out.append(nanos)
    return out


def local_datetime_from_json(value: Any) -> datetime:
    """A ``LocalDateTime`` array (or an ISO text, which Jackson writes without JavaTimeModule) as a naive
    date-time; nanos below a microsecond are dropped.

    Raises:
        ValueError: neither form.
    """
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    if not isinstance(value, list) or not 5 <= len(value) <= 7:
        raise ValueError(f"not a LocalDateTime: {value!r}")
    parts = [int(v) for v in value] + [0] * (7 - len(value))
    year, month, day, hour, minute, second, nanos = parts[:7]
    return datetime(year, month, day, hour, minute, second, nanos // 1000)


def duration_from_json(value: Any) -> timedelta:
    """A Jackson ``Duration``: decimal seconds (``86400.0``), or an ISO-8601 text (``PT24H``)."""
    if isinstance(value, (int, float)):
        return timedelta(seconds=float(value))
    text = str(value).strip().upper()
    if text.startswith("PT"):
        total, number = 0.0, ""
        for char in text[2:]:
            if char.isdigit() or char == ".":
                number += char
                continue
            total += float(number) * {"H": 3600, "M": 60, "S": 1}[char]
            number = ""
        return timedelta(seconds=total)
    return timedelta(seconds=float(text))


@dataclass(frozen=True)
class PaimonTag:
    """A tag file: its name, the snapshot it holds, its retention fields and the file's modification time."""

    name: str
    snapshot: Snapshot
    create_time: datetime | None
    time_retained: timedelta | None
    mtime: datetime | None  # local, naive

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def expires_at(self) -> datetime | None:
        """``create + retained`` (Java ``TagTimeExpire``), None without both fields."""
        if self.create_time is None or self.time_retained is None:
            return None
        return self.create_time + self.time_retained

    def info(self) -> TagInfo:
        def ms(value: datetime | None) -> int | None:
            return None if value is None else int(value.timestamp() * 1000)

        retained = self.time_retained
        return TagInfo(
            name=self.name,
            snapshot_id=self.snapshot.id,
            schema_id=self.snapshot.schema_id,
            snapshot_time_ms=self.snapshot.time_millis,
            create_time_ms=ms(self.create_time),
            time_retained_ms=None if retained is None else int(retained.total_seconds() * 1000),
            expires_at_ms=ms(self.expires_at),
            file_mtime_ms=ms(self.mtime),
        )


def check_tag_name(name: str) -> str:
    """Refuse a name Paimon refuses (blank) or one that is no file name (``/``, leading/trailing blanks)."""
    if not name or not name.strip():
        raise UsageError("a tag name must not be blank")
    if name != name.strip() or "/" in name or "\\" in name or name in (".", ".."):
        raise UsageError(f"tag name {name!r}: no '/', no leading or trailing blanks")
    return name


def tag_path(manager: SnapshotManager, name: str) -> str:
    return manager.io.join(manager.tag_dir, paths.TAG_PREFIX + name)


def encode_tag(snapshot: Snapshot, time_retained: timedelta | None, create_time: datetime) -> bytes:
    """The tag file's bytes (module docstring): the snapshot's JSON, with both tag fields only when retained."""
    document = snapshot.to_json()
    for key in (CREATE_TIME, TIME_RETAINED):
        document.pop(key, None)
    if time_retained is not None:
        document[CREATE_TIME] = local_datetime_to_json(create_time)
        document[TIME_RETAINED] = time_retained.total_seconds()
    return json.dumps(document, indent=2, separators=(",", " : "), ensure_ascii=False).encode("utf-8")


def read_tags(manager: SnapshotManager) -> list[PaimonTag]:
    """Every tag of the manager's branch, by name; a tag deleted while listing is skipped.

    Raises:
        CorruptMetadataError: a tag file that is no snapshot, or whose tag fields do not parse.
    """
    result = []
    for status in manager.io.list_dir(manager.tag_dir):
        if status.is_dir or not status.name.startswith(paths.TAG_PREFIX):
            continue
        name = status.name[len(paths.TAG_PREFIX) :]
        try:
            snapshot = manager.read_snapshot_file(status.path)
        except FileNotFoundError:
            continue
        mtime = None if status.mtime is None else datetime.fromtimestamp(status.mtime)
        result.append(_with_fields(manager, name, snapshot, mtime, status.path))
    return sorted(result, key=lambda t: t.name)


def read_tag(manager: SnapshotManager, name: str) -> PaimonTag:
    """One tag (``TagNotFoundError`` if there is none)."""
    snapshot = manager.tag(check_tag_name(name))
    path = tag_path(manager, name)
    mtime = next((s.mtime for s in manager.io.list_dir(manager.tag_dir) if s.path == path), None)
    return _with_fields(
        manager, name, snapshot, None if mtime is None else datetime.fromtimestamp(mtime), path
    )


def _with_fields(
    manager: SnapshotManager, name: str, snapshot: Snapshot, mtime: datetime | None, path: str
) -> PaimonTag:
    try:
        created = snapshot.extra.get(CREATE_TIME)
        retained = snapshot.extra.get(TIME_RETAINED)
        return PaimonTag(
            name=name,
            snapshot=snapshot,
            create_time=None if created is None else local_datetime_from_json(created),
            time_retained=None if retained is None else duration_from_json(retained),
            mtime=mtime,
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptMetadataError(manager.io.uri(path), f"tag fields do not parse ({exc})") from exc


def write_tag(
    manager: SnapshotManager,
    name: str,
    snapshot: Snapshot,
    *,
    time_retained: timedelta | None,
    create_time: datetime,
    replace: bool,
) -> None:
    """Publish the tag file (module docstring); ``FileExistsError`` if it exists and ``replace`` is False."""
    data = encode_tag(snapshot, time_retained, create_time)
    path = tag_path(manager, name)
    io = manager.io
    if replace:
        if io.is_local:
            os.makedirs(manager.tag_dir, exist_ok=True)
        io.write_atomic(path, data)
    elif io.supports_exclusive_create:
        io.create_exclusive(path, data)
    else:
        io.write_unsafe(path, data)


def delete_tag_files(
    manager: SnapshotManager, names: list[str], *, dry_run: bool, deleter: FileDeleter | None = None
) -> None:
    """Delete tag files through the deletion module, in order (module docstring).

    Raises:
        DeletionFailedError: a tag file could not be deleted (the ones before it are gone).
    """
    if not names:
        return
    deleter = deleter or FileDeleter(manager.io, dry_run=dry_run)
    requests = [DeleteRequest("tag", tag_path(manager, name)) for name in names]
    report = deleter.delete_in_order(requests, task="deleting tags")
    if report.failed:
        failed = ", ".join(f"{f.path} ({f.error})" for f in report.failed)
        raise DeletionFailedError(f"could not delete tag file(s): {failed}", report)
