"""Snapshot JSON (``snapshot/snapshot-N``, tags, long-lived changelogs), version 3.

A rewrite must not drop what a newer Paimon wrote, so every field we do not model is kept in
``extra`` and written back. Tags are snapshots with ``tagCreateTime``/``tagTimeRetained`` among
those extra fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

SNAPSHOT_VERSION = 3
# Batch and maintenance commits use Long.MAX_VALUE as commit identifier.
BATCH_COMMIT_IDENTIFIER = 2**63 - 1


class CommitKind(str, Enum):
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


# (JSON key, attribute) for the fields we model, in Paimon's write order.
_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "version"),
    ("id", "id"),
    ("schemaId", "schema_id"),
    ("baseManifestList", "base_manifest_list"),
    ("baseManifestListSize", "base_manifest_list_size"),
    ("deltaManifestList", "delta_manifest_list"),
    ("deltaManifestListSize", "delta_manifest_list_size"),
    ("changelogManifestList", "changelog_manifest_list"),
    ("changelogManifestListSize", "changelog_manifest_list_size"),
    ("indexManifest", "index_manifest"),
    ("commitUser", "commit_user"),
    ("commitIdentifier", "commit_identifier"),
    ("commitKind", "commit_kind"),
    ("timeMillis", "time_millis"),
    ("totalRecordCount", "total_record_count"),
    ("deltaRecordCount", "delta_record_count"),
    ("changelogRecordCount", "changelog_record_count"),
    ("watermark", "watermark"),
    ("statistics", "statistics"),
    ("properties", "properties"),
    ("nextRowId", "next_row_id"),
)
_REQUIRED = (
    "version",
    "id",
    "schemaId",
    "baseManifestList",
    "deltaManifestList",
    "commitUser",
    "commitIdentifier",
    "commitKind",
    "timeMillis",
)


@dataclass(frozen=True)
class Snapshot:
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int | None = None
    delta_record_count: int | None = None
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = None
    version: int = SNAPSHOT_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Snapshot:
        """Build from parsed JSON; raises ``KeyError``/``ValueError`` on a malformed document."""
        missing = [key for key in _REQUIRED if key not in obj]
        if missing:
            raise KeyError(f"missing field(s) {', '.join(missing)}")
        values: dict[str, Any] = {}
        for key, attr in _FIELDS:
            if obj.get(key) is not None:
                values[attr] = obj[key]
        values["commit_kind"] = CommitKind(obj["commitKind"])
        for attr in ("id", "schema_id", "commit_identifier", "time_millis", "version"):
            values[attr] = int(values[attr])
        known = {key for key, _ in _FIELDS}
        return cls(**values, extra={k: v for k, v in obj.items() if k not in known})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, attr in _FIELDS:
            value = getattr(self, attr)
            if value is None:
                continue
            out[key] = value.value if isinstance(value, CommitKind) else value
        out.update(self.extra)
        return out

    def to_bytes(self) -> bytes:
        """Jackson-like pretty JSON; Paimon readers ignore layout and key order."""
        return json.dumps(self.to_json(), indent=2, separators=(",", " : "), ensure_ascii=False).encode(
            "utf-8"
        )

    @property
    def tag_create_time(self) -> Any:
        return self.extra.get("tagCreateTime")
