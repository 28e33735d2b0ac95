"""Iceberg data compaction: plan which small files and delete-laden files Java's ``rewrite_data_files`` would
rewrite, and report it as a value.

The entry point of the data-compaction room (Java's ``RewriteDataFilesSparkAction``, 1.10.2):

1. refuse what cannot be rewritten safely yet: format v3 (deletion vectors and row lineage; pyiceberg 0.12 cannot
   write v3 metadata) and data files in a format other than Parquet;
2. fix the starting snapshot: ``main``'s head (an empty table plans nothing);
3. scan it (``data_compaction_scan``: each live data file with the deletes that apply to it);
4. plan groups (``data_compaction_plan``: Java's bin-pack planner with Java's options,
   ``data_compaction_options``).

With ``strategy="sort"`` the sort order (the one given, else the table's) is resolved against the current schema
first (``data_compaction_sort.resolve_sort_order``; an unsorted table without one is refused before anything is
read), and every group carries its keys: the rewrite sorts the group's rows across its output files.

Executing the plan (rewrite, the validated ``replace`` commit, partial progress) is ``data_compaction_run``.

Example:
    >>> plan = plan_data_compaction(table, {"min-input-files": "2"})  # doctest: +SKIP
    >>> plan.summary()  # doctest: +SKIP
    'db.events: data compaction would rewrite 12 files (3.1 MiB) in 2 groups into about 2 files'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_filter import partition_filter
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup, plan_file_groups
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import (
    scan_for_compaction,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_sort import (
    SortKey,
    describe_sort_order,
    resolve_sort_order,
)

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

REWRITABLE_FORMATS = ("PARQUET",)


@dataclass(frozen=True)
class IcebergDataCompactionPlan:
    """What an Iceberg data compaction would rewrite, against one starting snapshot."""

    table: str
    snapshot_id: int | None
    sequence_number: int
    options: CompactionOptions
    live_data_files: int
    live_delete_files: int
    groups: tuple[FileGroup, ...]
    sort_keys: tuple[SortKey, ...] = ()

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(g.files) for g in self.groups)

    @property
    def bytes_to_rewrite(self) -> int:
        return sum(g.input_bytes for g in self.groups)

    @property
    def expected_output_files(self) -> int:
        return sum(g.expected_output_files for g in self.groups)

    @property
    def delete_files_applied(self) -> int:
        return len({path for g in self.groups for path in g.delete_files})

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "compact-data",
            "format": "iceberg",
            "table": self.table,
            "dryRun": True,
            "snapshotId": self.snapshot_id,
            "sequenceNumber": self.sequence_number,
            "strategy": self.options.strategy,
            "sortOrder": describe_sort_order(self.sort_keys) if self.sort_keys else None,
            "liveDataFiles": self.live_data_files,
            "liveDeleteFiles": self.live_delete_files,
            "filesToRewrite": self.files_to_rewrite,
            "bytesToRewrite": self.bytes_to_rewrite,
            "deleteFilesApplied": self.delete_files_applied,
            "expectedOutputFiles": self.expected_output_files,
            "options": self.options.to_json(),
            "groups": [g.to_json() for g in self.groups],
        }

    def summary(self) -> str:
        """The one line the CLI prints and the operator logs (``core/maintenance/results.py``)."""
        from airflow_lakeformat.core.maintenance.results import summary

        return summary(self.to_json())

    def __repr__(self) -> str:
        return f"<IcebergDataCompactionPlan {self.summary()}>"


def check_rewritable(table: IcebergTable) -> None:
    """Refuse, typed and before anything is read or written, what this release does not rewrite."""
    if table.format_version >= 3:
        raise UnsupportedFormatError(
            table.name,
            f"data compaction of format-version {table.format_version} tables is not supported "
            "(deletion vectors and row lineage: pyiceberg 0.12 cannot write v3 metadata)",
        )


def plan_data_compaction(
    table: IcebergTable,
    options: Mapping[str, str] | CompactionOptions | None = None,
    *,
    where: str | None = None,
    strategy: str | None = None,
    sort_order: str | None = None,
) -> IcebergDataCompactionPlan:
    """Which files of ``main``'s head a compaction rewrites, grouped as Java's bin-pack planner groups them.

    Args:
        table: the table.
        options: Java's ``rewrite_data_files`` options by their names (``{"min-input-files": "2"}``), or
            :class:`CompactionOptions`; the target size defaults to ``write.target-file-size-bytes``.
        where: only files whose partition may hold rows matching this predicate (``"cat = 'a'"``; see
            ``data_compaction_filter``); each selected file is rewritten with all its rows.
        strategy, sort_order: Java's procedure arguments (``"sort"``, ``"id DESC NULLS LAST"``), when ``options``
            is a mapping (a :class:`CompactionOptions` carries its own).

    Raises:
        UnsupportedFormatError: a v3 table, or a group holding a data file that is not Parquet; a table sort
            order with a transform.
        UsageError: an unknown option or a value Java refuses; a sort without a sort order, a z-order.
    """
    check_rewritable(table)
    if not isinstance(options, CompactionOptions):
        options = CompactionOptions.from_options(
            options, table.metadata.properties, strategy=strategy, sort_order=sort_order
        )
    keys: tuple[SortKey, ...] = ()
    if options.strategy == "sort":
        keys = resolve_sort_order(table.metadata, table.name, options.sort_order)
    head = table.snapshot(ref="main")
    if head is None:
        return IcebergDataCompactionPlan(table.name, None, 0, options, 0, 0, (), keys)
    keep = partition_filter(table.metadata, where) if where else None
    scan = scan_for_compaction(table, head)
    candidates = [c for c in scan.candidates if keep is None or keep(c.spec_id, c.partition)]
    groups = plan_file_groups(candidates, current_spec_id=table.metadata.default_spec_id, options=options)
    if keys:
        groups = [replace(g, sort_keys=keys) for g in groups]
    formats = {f.path: f.file_format.upper() for f in scan.data_files}
    for group in groups:
        for candidate in group.files:
            if formats.get(candidate.path) not in REWRITABLE_FORMATS:
                raise UnsupportedFormatError(
                    candidate.path,
                    f"data files in {formats.get(candidate.path)} are not rewritten (Parquet only)",
                )
    return IcebergDataCompactionPlan(
        table=table.name,
        snapshot_id=scan.snapshot_id,
        sequence_number=scan.sequence_number,
        options=options,
        live_data_files=len(scan.candidates),
        live_delete_files=len(scan.deletes.all_deletes()),
        groups=tuple(groups),
        sort_keys=keys,
    )
