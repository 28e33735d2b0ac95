"""The planning step of Iceberg orphan-file cleanup (``orphans`` has the algorithm, executes a plan and
runs both steps in one call): the guards (``older_than``, ``gc.enabled``), the listing before the valid
set, the join on normalised paths and the plan it gives (:class:`IcebergOrphanPlan`), with the defaults
and checks the Spark job shares.

Example:
    >>> plan = plan_orphan_cleanup(table)  # doctest: +SKIP
    >>> plan.to_json()["orphans"]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import posixpath
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import (
    HiddenFilter,
    ListedFile,
    ListingRoot,
    TreeListing,
    actual_uri,
    hidden_filter_for,
    list_roots,
    listing_roots,
)
from airflow_lakeformat.core.iceberg.maintenance.orphan_local import list_local_names, resolve_local_names
from airflow_lakeformat.core.iceberg.maintenance.orphan_valid import (
    ValidSet,
    collect_valid,
    refresh_if_changed,
)
from airflow_lakeformat.core.iceberg.metadata.location import (
    PREFIX_MISMATCH_MODES,
    LocationNormaliser,
    PrefixMismatch,
    PrefixMismatchMode,
)
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.reach.reach_split import helper_context, warm_manifest_decoder
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, tally
from airflow_lakeformat.core.maintenance.orphan_age import ICEBERG_ORPHAN_AGE
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

Clock = Callable[[], float]

#: Java's default ``olderThan`` (``DeleteOrphanFilesSparkAction``: now - 3 days), ``core/maintenance/orphan_age.py``.
DEFAULT_OLDER_THAN = ICEBERG_ORPHAN_AGE.default
#: Under this, a run needs ``allow_short_older_than`` (the procedure's 24-hour check).
MINIMUM_OLDER_THAN = ICEBERG_ORPHAN_AGE.minimum
#: How many orphan paths the JSON result lists; the report file has all of them.
DEFAULT_SAMPLE_LIMIT = 1000
GC_ENABLED = "gc.enabled"
READ_ONLY_WARNING = (
    "the table was opened from a metadata file, which may not be the current one: a dry run only"
)


class PrefixMismatchError(MaintenanceRefusedError):
    """Listed files are valid under another scheme or authority (Java's ``PrefixMismatchMode.ERROR``).

    Raised before anything is deleted (or, when a re-check finds one, before the next batch). Declare the
    spellings equal (``equal_schemes`` / ``equal_authorities``) if they name the same store, or pass
    ``prefix_mismatch="ignore"`` to keep such files and clean the rest.
    """

    def __init__(self, location: str, mismatches: list[PrefixMismatch]) -> None:
        shown = "; ".join(f"{m.actual} vs valid {m.valid}" for m in mismatches[:5])
        more = f" (and {len(mismatches) - 5} more)" if len(mismatches) > 5 else ""
        super().__init__(
            location,
            f"{len(mismatches)} listed file(s) are referenced under another scheme or authority: "
            f"{shown}{more}. The run stopped before deleting anything more; declare the spellings equal "
            "(--equal-scheme / "
            "--equal-authority) or use --prefix-mismatch ignore to keep them",
        )
        self.mismatches = mismatches


@dataclass
class IcebergOrphanPlan:
    """What a cleanup would delete, computed by :func:`plan_orphan_cleanup`; nothing has been deleted."""

    table_name: str
    planned_at: float
    older_than: timedelta
    cutoff: float
    roots: list[ListingRoot]
    metadata_dir: str
    listing: TreeListing
    valid: ValidSet
    orphans: list[DeleteRequest]
    mtimes: dict[str, float]
    mismatches: list[PrefixMismatch]
    prefix_mismatch: PrefixMismatchMode
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        return tally(self.orphans)

    def to_json(self, sample_limit: int = DEFAULT_SAMPLE_LIMIT) -> dict[str, Any]:
        files, sizes = self.counts()
        return {
            "operation": "remove-orphan-files",
            "format": "iceberg",
            "table": self.table_name,
            "dryRun": True,
            "olderThanSeconds": self.older_than.total_seconds(),
            "cutoff": utc_iso(self.cutoff),
            "locations": [r.location for r in self.roots],
            **self.listing.counts_json(),
            "validFiles": len(self.valid.locations),
            "orphans": len(self.orphans),
            "orphanPaths": _sample(self, sample_limit),
            "orphanPathsTruncated": len(self.orphans) > sample_limit,
            "prefixMismatches": [
                {"path": m.actual, "valid": m.valid} for m in self.mismatches[:sample_limit]
            ],
            "files": files,
            "bytes": sizes,
            **self.valid.counts_json(),
            "decisions": list(self.decisions),
            "warnings": list(self.warnings),
        }


def _human(duration: timedelta) -> str:
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def utc_iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds")


def _sample(plan: IcebergOrphanPlan, limit: int) -> list[str]:
    return [plan.valid.io.uri(r.path) for r in plan.orphans[:limit]]


def check_older_than(location: str, older_than: timedelta, allow_short: bool) -> None:
    """Refuse a negative ``older_than``, and one under 24 hours without the explicit override."""
    if older_than < timedelta(0):
        raise MaintenanceRefusedError(location, "older_than must not be negative (files from the future)")
    if older_than < MINIMUM_OLDER_THAN and not allow_short:
        raise MaintenanceRefusedError(
            location,
            f"older_than {_human(older_than)} is under {MINIMUM_OLDER_THAN.total_seconds() / 3600:g} h: files of running "
            "writers (written, "
            "not yet committed) could be deleted; pass the explicit override (allow_short_older_than / "
            "--allow-short-older-than) only if no writer is running",
        )


def check_gc_enabled(table: IcebergTable) -> None:
    """Java refuses every file-deleting action when ``gc.enabled`` is false; so do we."""
    if str(table.metadata.properties.get(GC_ENABLED, "true")).strip().lower() == "false":
        raise MaintenanceRefusedError(
            table.name, "gc.enabled is false (deleting files may corrupt other tables sharing them)"
        )


@functools.lru_cache(maxsize=16)
def _kind_prefixes(metadata_dir: str, data_dirs: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    return metadata_dir.rstrip("/") + "/", tuple(d.rstrip("/") + "/" for d in data_dirs)


def kind_of(path: str, metadata_dir: str, data_dirs: tuple[str, ...]) -> str:
    """What an orphan looks like, by where it sits and its name (orphans have no metadata to say so):
    ``data-file`` under a data directory, ``metadata-json``, ``manifest-list``, ``manifest``,
    ``statistics`` or ``metadata-other`` under the metadata directory, else ``other-file``."""
    name = posixpath.basename(path)
    metadata_prefix, data_prefixes = _kind_prefixes(metadata_dir, data_dirs)
    if path.startswith(metadata_prefix):
        if name.endswith((".metadata.json", ".metadata.json.gz")):
            return "metadata-json"
        if name.startswith("snap-") and name.endswith(".avro"):
            return "manifest-list"
        if name.endswith(".avro"):
            return "manifest"
        if name.endswith((".puffin", ".stats")):
            return "statistics"
        return "metadata-other"
    if data_prefixes and path.startswith(data_prefixes):
        return "data-file"
    return "other-file"


@dataclass(frozen=True)
class OrphanStart:
    """What an orphan cleanup checked and decided before it lists anything, in process or on Spark alike.

    ``roots`` are the trees to list, ``metadata_dir`` the metadata folder, ``cutoff`` the epoch second below
    which a file is old enough (``now - older_than``); ``decisions`` and ``warnings`` go into the plan.
    """

    older_than: timedelta
    normaliser: LocationNormaliser
    roots: list[ListingRoot]
    metadata_dir: str
    decisions: list[str]
    now: float
    cutoff: float
    hidden: HiddenFilter
    warnings: list[str]


def start_orphan_cleanup(
    table: IcebergTable,
    *,
    older_than: timedelta | None = None,
    allow_short_older_than: bool = False,
    equal_schemes: Mapping[str, str] | None = None,
    equal_authorities: Mapping[str, str] | None = None,
    prefix_mismatch: str = "error",
    dry_run: bool = True,
    clock: Clock = time.time,
) -> OrphanStart:
    """The opening checks of an orphan cleanup and the listing's roots (every runner calls this first).

    In order: the ``prefix_mismatch`` mode, the ``older_than`` floor (``None``: Java's 3 days,
    ``core/maintenance/orphan_age.py``), a real run on a table opened from a metadata file (refused),
    ``gc.enabled``, then the roots to list (``orphan_listing.listing_roots``: the table location, the
    metadata and data folders when they lie outside it) and the age cutoff.

    Raises:
        ValueError: an unknown ``prefix_mismatch`` mode.
        MaintenanceRefusedError: a too-short ``older_than``, a real run on a read-only table,
            ``gc.enabled=false``, or a listing root that is unsafe to list.

    Example:
        >>> start = start_orphan_cleanup(table, older_than=timedelta(days=7))  # doctest: +SKIP
        >>> [root.path for root in start.roots]  # doctest: +SKIP
    """
    if prefix_mismatch not in PREFIX_MISMATCH_MODES:
        raise ValueError(f"prefix_mismatch must be one of {PREFIX_MISMATCH_MODES}, not {prefix_mismatch!r}")
    older_than = ICEBERG_ORPHAN_AGE.older_than(older_than)
    check_older_than(table.name, older_than, allow_short_older_than)
    if table.read_only and not dry_run:
        raise MaintenanceRefusedError(table.name, "the table was opened from a metadata file; a dry run only")
    check_gc_enabled(table)
    normaliser = LocationNormaliser(equal_schemes, equal_authorities)
    metadata = table.metadata
    roots, metadata_dir, decisions = listing_roots(
        table.io,
        metadata.location,
        dict(metadata.properties),
        table.metadata_location,
        normaliser,
        table.name,
    )
    now = clock()
    return OrphanStart(
        older_than=older_than,
        normaliser=normaliser,
        roots=roots,
        metadata_dir=metadata_dir,
        decisions=decisions,
        now=now,
        cutoff=now - older_than.total_seconds(),
        hidden=hidden_filter_for(metadata),
        warnings=[READ_ONLY_WARNING] if table.read_only else [],
    )


def plan_orphan_cleanup(
    table: IcebergTable,
    *,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    allow_short_older_than: bool = False,
    equal_schemes: Mapping[str, str] | None = None,
    equal_authorities: Mapping[str, str] | None = None,
    prefix_mismatch: PrefixMismatchMode = "error",
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    on_phase: Callable[[str], None] | None = None,
) -> IcebergOrphanPlan:
    """List candidates, then read the valid set, then join. Deletes nothing.

    Args:
        table: the table (re-loaded after the listing, so the valid set is never older than it).
        older_than: only files last modified before ``now - older_than`` are candidates (default 3 days).
        allow_short_older_than: accept ``older_than`` under 24 hours (only when no writer is running).
        equal_schemes: extra scheme equivalences over ``{"s3a": "s3", "s3n": "s3"}``.
        equal_authorities: authority equivalences (none by default).
        prefix_mismatch: ``"error"`` (default: abort when a listed file is valid under another scheme or
            authority) or ``"ignore"`` (keep such files).
        clock: the time source (epoch seconds).
        progress: progress reporter.
        on_phase: called with ``"listed"`` between listing and valid set (tests commit there).

    Returns:
        The plan: the orphans as delete requests, the listing counts, the valid set.

    Raises:
        MaintenanceRefusedError: an unsafe request (see the module docstring); nothing was deleted.
        PrefixMismatchError: in ``error`` mode, files valid under another scheme or authority.
        CorruptMetadataError: metadata that cannot be read (``MissingMetadataError`` for a missing file).

    Example:
        >>> plan = plan_orphan_cleanup(table, older_than=timedelta(days=7))  # doctest: +SKIP
        >>> len(plan.orphans), plan.counts()  # doctest: +SKIP
    """
    start = start_orphan_cleanup(
        table,
        older_than=older_than,
        allow_short_older_than=allow_short_older_than,
        equal_schemes=equal_schemes,
        equal_authorities=equal_authorities,
        prefix_mismatch=prefix_mismatch,
        clock=clock,
    )
    roots, metadata_dir, cutoff = start.roots, start.metadata_dir, start.cutoff
    names, listed = _list_candidates(table, start, progress)
    if on_phase:
        on_phase("listed")
    refresh_if_changed(table)  # the valid set comes from metadata at least as new as the listing
    check_gc_enabled(table)
    with (
        _metadata_helper(table),
        gc_paused(),
    ):  # millions of small acyclic objects (names, paths): the GC finds nothing
        valid = ValidSet(table.io, start.normaliser, metadata_dir)
        collect_valid(table, valid, progress)
        if on_phase:
            on_phase("collected")
        listing = listed if listed is not None else resolve_local_names(names, valid.locations, cutoff)
        del names
        forked.release_helper()  # its last task is done: it leaves while the rest runs here
        data_dirs = tuple(r.path if r.kind == "data" else table.io.join(r.path, "data") for r in roots)
        orphans, mtimes, mismatches = classify(
            table, valid, listing.candidates, metadata_dir, data_dirs, listing.unreferenced
        )
    if mismatches and prefix_mismatch == "error":
        raise PrefixMismatchError(table.name, mismatches)
    start.warnings.extend(plan_warnings(listing, len(orphans), len(mismatches)))
    start.decisions.append(candidates_decision(cutoff, start.older_than, roots))
    return start_plan(table.name, start, listing, valid, mismatches, prefix_mismatch, orphans, mtimes)


def start_plan(
    table_name: str,
    start: OrphanStart,
    listing: TreeListing,
    valid: ValidSet,
    mismatches: list[PrefixMismatch],
    prefix_mismatch: PrefixMismatchMode,
    orphans: list[DeleteRequest] | None = None,
    mtimes: dict[str, float] | None = None,
) -> IcebergOrphanPlan:
    """The plan from its opening (:func:`start_orphan_cleanup`) and what the listing and the join found."""
    return IcebergOrphanPlan(
        table_name=table_name,
        planned_at=start.now,
        older_than=start.older_than,
        cutoff=start.cutoff,
        roots=start.roots,
        metadata_dir=start.metadata_dir,
        listing=listing,
        valid=valid,
        orphans=orphans or [],
        mtimes=mtimes or {},
        mismatches=mismatches,
        prefix_mismatch=prefix_mismatch,
        decisions=start.decisions,
        warnings=start.warnings,
    )


def _metadata_helper(table: IcebergTable) -> contextlib.AbstractContextManager[Any]:
    """On local disk one helper process (core/forked.py), forked after the listing (so it has the warmed
    decoder), takes half of the metadata reads and of the age reads, on the second CPU."""
    if not table.io.is_local:
        return contextlib.nullcontext()
    from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader  # loaded on use

    return forked.helper(helper_context(table, ReachabilityReader))


def _list_candidates(
    table: IcebergTable, start: OrphanStart, progress: Progress
) -> tuple[Any, TreeListing | None]:
    """(names, None) on local disk, listed by name (ages are read afterwards, only of files the valid set
    lacks); (None, listing) on a store, with ages."""
    progress.start("listing the table's files", None)
    try:
        if table.io.is_local:
            with gc_paused():
                # A forked child lists a large tree while this process compiles the manifests' decoder
                # (nothing it reads enters the valid set, which is read whole after the listing).
                names = list_local_names(
                    [r.path for r in start.roots],
                    start.hidden,
                    alongside=lambda: warm_manifest_decoder(table),
                )
            return names, None
        # the collector stays on around the store's client (core/collector.py)
        return None, list_roots(table.io, start.roots, start.cutoff, start.hidden, _thread_map(table))
    finally:
        progress.finish()


def plan_warnings(listing: TreeListing, orphans: int, mismatches: int) -> list[str]:
    """The warnings a plan carries (shared with the Spark job, so both report alike)."""
    warnings = []
    if mismatches:
        warnings.append(f"{mismatches} file(s) valid under another scheme or authority were kept")
    if listing.no_mtime:
        warnings.append(f"{listing.no_mtime} file(s) without a modification time were kept")
    if orphans > 100 and orphans * 2 > listing.files_listed:
        warnings.append(
            f"{orphans} of {listing.files_listed} listed files are orphaned: check that the table "
            "location and the paths in its metadata name the same store"
        )
    return warnings


def candidates_decision(cutoff: float, older_than: timedelta, roots: list[ListingRoot]) -> str:
    """The decision line saying what was a candidate."""
    return (
        f"candidates: files modified before {utc_iso(cutoff)} (older than {_human(older_than)}) under "
        + ", ".join(r.location.rstrip("/") + "/" for r in roots)
    )


def _thread_map(table: IcebergTable) -> Callable[[Callable[[Any], Any], Any], Any]:
    return lambda fn, items: table.parallel_imap(fn, list(items))


def classify(
    table: IcebergTable,
    valid: ValidSet,
    candidates: list[ListedFile],
    metadata_dir: str,
    data_dirs: tuple[str, ...] = (),
    unreferenced: Collection[str] = (),
) -> tuple[list[DeleteRequest], dict[str, float], list[PrefixMismatch]]:
    """The anti-join: candidates no valid location matches (and the prefix mismatches). Candidates in
    ``unreferenced`` were already found absent from the valid set by the listing's join
    (:func:`resolve_local_names`) and are not looked up again."""
    orphans: list[DeleteRequest] = []
    mtimes: dict[str, float] = {}
    mismatches: list[PrefixMismatch] = []
    io = table.io
    classify_uri = valid.locations.classify
    kinds: dict[str, str | None] = {}  # directory -> the kind of every orphan in it (None: by its name)
    for candidate in sorted(candidates, key=_path_of):
        path = candidate.path
        if path in unreferenced:
            verdict, uri = "orphan", None
        else:
            uri = actual_uri(io, path)
            verdict = classify_uri(uri)
        if verdict == "orphan":
            directory = path[: path.rfind("/") + 1]
            try:
                kind = kinds[directory]
            except KeyError:
                kind = kinds[directory] = _kind_of_directory(directory, metadata_dir, data_dirs)
            if kind is None:
                kind = kind_of(path, metadata_dir, data_dirs)
            orphans.append(DeleteRequest(kind, path, candidate.size))
            mtimes[path] = candidate.mtime
        elif verdict == "mismatch" and uri is not None:
            mismatches.append(PrefixMismatch(uri.render(), valid.spelling(uri.path)))
    return orphans, mtimes, mismatches


def _path_of(candidate: ListedFile) -> str:
    return candidate.path


def _kind_of_directory(directory: str, metadata_dir: str, data_dirs: tuple[str, ...]) -> str | None:
    """:func:`kind_of` of every file directly in ``directory`` (given with its trailing ``/``), or None
    under the metadata directory, where the kind depends on the name. A file's path starts with a prefix
    ending in ``/`` exactly when its directory does (a name holds no ``/``)."""
    metadata_prefix, data_prefixes = _kind_prefixes(metadata_dir, data_dirs)
    if directory.startswith(metadata_prefix):
        return None
    return "data-file" if data_prefixes and directory.startswith(data_prefixes) else "other-file"
