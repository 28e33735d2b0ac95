"""The planning step of Iceberg manifest compaction (``manifest_compaction`` has the algorithm, commits a
plan and returns the result): the arguments checked, the branch head's manifests read and grouped, and
per spec the manifests a ``full`` rewrite (``manifest_rewrite``) or a ``minor`` merge (``manifest_merge``)
would write, as a :class:`ManifestCompactionPlan`; and :func:`validate_replace`, the check a commit attempt
makes that the manifests it replaces are still current.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pyiceberg.manifest import ManifestContent, ManifestFile
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.errors import CommitConflictError, CorruptMetadataError, TagNotFoundError
from airflow_lakeformat.core.iceberg.errors import MAX_WRITE_FORMAT_VERSION, UnsupportedWriteVersionError
from airflow_lakeformat.core.iceberg.maintenance.manifest_merge import plan_merge
from airflow_lakeformat.core.iceberg.maintenance.manifest_rewrite import needs_rewrite, rewrite_group
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore, read_entries

Mode = Literal["full", "minor"]
TARGET_SIZE_PROPERTY = "commit.manifest.target-size-bytes"
TARGET_SIZE_DEFAULT = 8 * 1024 * 1024
MIN_COUNT_PROPERTY = "commit.manifest.min-count-to-merge"
MIN_COUNT_DEFAULT = 100
MERGE_ENABLED_PROPERTY = "commit.manifest-merge.enabled"


def _int_property(properties: dict[str, str], name: str, default: int) -> int:
    try:
        return int(properties.get(name, default))
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class ManifestCompactionPlan:
    """What one compaction does (or would do) to the head of a branch.

    Attributes:
        table: The table's display name.
        mode: ``full`` or ``minor``.
        branch: The branch compacted.
        snapshot_before: The head it is based on (None: the branch has no snapshot).
        target_size_bytes: The manifest target size used.
        manifests_before: The head's manifest list (data and delete manifests).
        data_after: The data manifests of the new list, in order (created and kept).
        delete_manifests: The delete manifests, carried over.
        replaced: The data manifests that leave the list.
        created: The new manifests (paths that a dry run did not write).
        kept: The data manifests carried over.
        entries_rewritten: Live entries written into new manifests.
        split_offsets_cleared: Entries written with ``split_offsets`` null.
    """

    table: str
    mode: Mode
    branch: str
    snapshot_before: int | None
    target_size_bytes: int
    manifests_before: tuple[ManifestFile, ...] = ()
    data_after: tuple[ManifestFile, ...] = ()
    delete_manifests: tuple[ManifestFile, ...] = ()
    replaced: tuple[ManifestFile, ...] = ()
    created: tuple[ManifestFile, ...] = ()
    kept: tuple[ManifestFile, ...] = ()
    entries_rewritten: int = 0
    split_offsets_cleared: int = 0

    @property
    def changed(self) -> bool:
        """True when committing the plan changes the manifest list."""
        return bool(self.replaced)

    @property
    def manifests_after(self) -> tuple[ManifestFile, ...]:
        """The new manifest list (the old one when nothing changes)."""
        if not self.changed:
            return self.manifests_before
        return (*self.data_after, *self.delete_manifests)


def check_arguments(table: IcebergTable, mode: str, target_size_bytes: int | None) -> None:
    if mode not in ("full", "minor"):
        raise ValueError(f"mode must be 'full' or 'minor', not {mode!r}")
    if target_size_bytes is not None and target_size_bytes <= 0:
        raise ValueError(f"target_size_bytes must be positive, not {target_size_bytes}")
    if table.format_version > MAX_WRITE_FORMAT_VERSION:
        raise UnsupportedWriteVersionError(table.metadata_location, table.format_version)


def _branch_head(table: IcebergTable, metadata: TableMetadata, branch: str) -> Snapshot | None:
    ref = metadata.refs.get(branch)
    if ref is None:
        if branch == MAIN_BRANCH:
            return None
        known = ", ".join(sorted(metadata.refs)) or "none"
        raise TagNotFoundError(f"{table.name}: no branch named {branch!r} (refs: {known})")
    if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
        raise ValueError(f"{table.name}: {branch!r} is a tag; manifests are compacted on branches")
    return metadata.snapshot_by_id(ref.snapshot_id)


@dataclass
class _Rewrite:
    """What one mode's pass decided: manifests replaced, created and kept, the data manifests after it."""

    data_after: list[ManifestFile] = field(default_factory=list)
    replaced: list[ManifestFile] = field(default_factory=list)
    created: list[ManifestFile] = field(default_factory=list)
    kept: list[ManifestFile] = field(default_factory=list)
    entries: int = 0
    cleared: int = 0

    def add(self, done: Any) -> None:
        """Fold in one ``rewrite_group`` result."""
        self.replaced.extend(done.replaced)
        self.created.extend(done.created)
        self.entries += done.entries
        self.cleared += done.split_offsets_cleared


def build_plan(
    table: IcebergTable,
    metadata: TableMetadata,
    mode: Mode,
    branch: str,
    target_size_bytes: int | None,
    store: ManifestStore,
    snapshot_id: int,
) -> ManifestCompactionPlan:
    """Plan (and, unless the store is a dry run, write the manifests of) one compaction on ``metadata``."""
    properties = dict(metadata.properties)
    target = target_size_bytes or _int_property(properties, TARGET_SIZE_PROPERTY, TARGET_SIZE_DEFAULT)
    head = _branch_head(table, metadata, branch)
    if head is None:
        return ManifestCompactionPlan(table.name, mode, branch, None, target)
    manifests = read_manifests(table, head)
    data = [m for m in manifests if m.content != ManifestContent.DELETES]
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    base = ManifestCompactionPlan(
        table.name, mode, branch, head.snapshot_id, target, tuple(manifests), tuple(data), tuple(deletes)
    )
    rewrite = _RewriteContext(table, metadata, store, snapshot_id, target, f"snapshot {head.snapshot_id}")
    done = rewrite.full(data) if mode == "full" else rewrite.minor(data, properties)
    if done is None or not done.replaced:
        return base
    return ManifestCompactionPlan(
        table=table.name,
        mode=mode,
        branch=branch,
        snapshot_before=head.snapshot_id,
        target_size_bytes=target,
        manifests_before=tuple(manifests),
        data_after=tuple(done.data_after),
        delete_manifests=tuple(deletes),
        replaced=tuple(done.replaced),
        created=tuple(done.created),
        kept=tuple(done.kept),
        entries_rewritten=done.entries,
        split_offsets_cleared=done.cleared,
    )


@dataclass
class _RewriteContext:
    """The two modes' passes over the head's data manifests, writing through ``store``."""

    table: IcebergTable
    metadata: TableMetadata
    store: ManifestStore
    snapshot_id: int
    target: int
    referenced_by: str

    def _write(self, spec: Any, decoded: list[Any], target: int | None, cluster: bool) -> Any:
        return rewrite_group(
            self.metadata, spec, decoded, snapshot_id=self.snapshot_id, store=self.store,
            target_size_bytes=target, cluster=cluster,
        )  # fmt: skip

    def full(self, data: Sequence[ManifestFile]) -> _Rewrite:
        """Java ``RewriteManifests``: per spec, cluster by partition and cut at the target size, unless the
        spec's manifests need no rewrite (or the metadata no longer has the spec)."""
        out = _Rewrite()
        specs = self.metadata.specs()
        groups: dict[int, list[ManifestFile]] = {}
        for manifest in data:
            groups.setdefault(manifest.partition_spec_id, []).append(manifest)
        for spec_id in sorted(groups):
            group = groups[spec_id]
            spec = specs.get(spec_id)
            if spec is None:  # a spec the metadata no longer has: leave its manifests alone
                out.kept.extend(group)
                continue
            decoded = list(read_entries(self.table, group, self.referenced_by))
            if not needs_rewrite(decoded, self.target):
                out.kept.extend(group)
                continue
            out.add(self._write(spec, decoded, self.target, cluster=True))
        out.data_after = [*out.created, *out.kept]
        return out

    def minor(self, data: Sequence[ManifestFile], properties: dict[str, str]) -> _Rewrite | None:
        """Java's commit-time merge policy; None when no bin merges."""
        enabled = str(properties.get(MERGE_ENABLED_PROPERTY, "true")).strip().lower() == "true"
        min_count = _int_property(properties, MIN_COUNT_PROPERTY, MIN_COUNT_DEFAULT)
        bins = (
            plan_merge(data, target_size_bytes=self.target, min_count_to_merge=min_count) if enabled else []
        )
        if not any(b.merge for b in bins):
            return None
        out = _Rewrite()
        specs = self.metadata.specs()
        listed = {m.manifest_path for b in bins for m in b.manifests}
        out.replaced.extend(m for m in data if m.manifest_path not in listed)  # no live files: dropped
        for bin_ in bins:
            spec = specs.get(bin_.spec_id)
            if not bin_.merge or spec is None:
                out.data_after.extend(bin_.manifests)
                out.kept.extend(bin_.manifests)
                continue
            decoded = list(read_entries(self.table, bin_.manifests, self.referenced_by))
            done = self._write(spec, decoded, None, cluster=False)
            out.data_after.extend(done.created)
            out.add(done)
        return out


def plan_manifest_compaction(
    table: IcebergTable,
    mode: Mode = "full",
    *,
    branch: str = MAIN_BRANCH,
    target_size_bytes: int | None = None,
) -> ManifestCompactionPlan:
    """Plan a manifest compaction of the head of ``branch`` without writing or committing anything.

    The new manifests are encoded in memory, so the plan's sizes are those a real run writes.

    Args:
        table: The table (its current in-memory metadata is planned on).
        mode: ``full`` (Java ``RewriteManifests``) or ``minor`` (Java's merge policy).
        branch: The branch whose head is compacted.
        target_size_bytes: Manifest target size (default: ``commit.manifest.target-size-bytes``, 8 MiB).

    Returns:
        The plan: manifests before and after, replaced, created and kept, entries rewritten.

    Raises:
        UnsupportedWriteVersionError: A v3 table.
        TagNotFoundError: No such branch.

    Example:
        >>> plan = plan_manifest_compaction(open_table("/wh/events"), "minor")  # doctest: +SKIP
        >>> plan.changed, len(plan.manifests_after)  # doctest: +SKIP
        (False, 12)
    """
    check_arguments(table, mode, target_size_bytes)
    metadata = table.metadata
    store = ManifestStore(table, metadata, dry_run=True)
    return build_plan(table, metadata, mode, branch, target_size_bytes, store, metadata.new_snapshot_id())


# -- committing ------------------------------------------------------------------------------------


def validate_replace(plan: ManifestCompactionPlan, current: Sequence[ManifestFile]) -> None:
    """Java ``BaseRewriteManifests`` checks: replaced manifests are in ``current``, live counts match.

    Raises:
        CommitConflictError: A replaced manifest is not in the current snapshot.
        CorruptMetadataError: The manifest list's file counts disagree with the entries rewritten.
    """
    present = {m.manifest_path for m in current}
    missing = [m.manifest_path for m in plan.replaced if m.manifest_path not in present]
    if missing:
        raise CommitConflictError(
            f"{plan.table}: manifest is missing from the current snapshot: {missing[0]}"
        )
    created = sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in plan.created)
    if created != plan.entries_rewritten:
        raise CorruptMetadataError(
            plan.table, f"wrote {created} live files for {plan.entries_rewritten} entries"
        )
    if all(m.added_files_count is not None and m.existing_files_count is not None for m in plan.replaced):
        replaced = sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in plan.replaced)
        if replaced != created:
            raise CorruptMetadataError(
                plan.table,
                f"replaced and created manifests must have the same number of active files: {created} (new), "
                f"{replaced} (old)",
            )


__all__ = [
    "ManifestCompactionPlan",
    "Mode",
    "build_plan",
    "check_arguments",
    "plan_manifest_compaction",
    "validate_replace",
]
