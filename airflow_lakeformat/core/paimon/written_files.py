"""Committing data files this run has just written, and discarding them when nothing will reference them.

Every writer (the CLI's ``write``, the write operator, the Spark ``write`` job) writes Parquet files into
the table's layout first and commits them afterwards. Two outcomes leave those files referenced by no
snapshot, ever:

* the commit is *refused* (a conflict, retries exhausted, an overwrite whose new rows fall outside the
  overwritten partition): nothing was published;
* the commit had *already landed*: an earlier run with the same commit user and identifier published
  it (Paimon's exactly-once rule, ``FileStoreCommitImpl.filterCommitted``), so this run's files are a
  second copy that no snapshot will ever name.

Both discard this run's files at once, instead of leaving them for an orphan cleanup past its age window.
The landed snapshot's own files are never touched: a file it references is kept even if this run's
list named it. A commit whose outcome is *unknown* keeps every file (the snapshot may reference them):
:class:`~airflow_lakeformat.core.errors.CommitStateUnknownError` propagates untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    RegisterError,
)
from airflow_lakeformat.core.maintenance.deletion import discard_unpublished
from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot

# Errors after which nothing of this commit was published.
REFUSED = (CommitConflictError, CommitRetriesExhaustedError, RegisterError, ValueError)


@dataclass
class WrittenCommit:
    """The outcome of :func:`commit_written_files`."""

    result: CommitResult
    deletes: list[ManifestEntry]
    discarded: int = 0


def commit_written_files(
    committer: Committer,
    added: Sequence[ManifestEntry],
    *,
    overwrite: bool = False,
    partition_filter: Mapping[str, str | None] | None = None,
    commit_identifier: int,
) -> WrittenCommit:
    """Commit files this run wrote (as an append, or an overwrite of ``partition_filter``), exactly once.

    Args:
        committer: commits as the run's commit user.
        added: ADD entries of files this run wrote (never files a user placed: those are not ours to delete).
        overwrite: replace the live files of ``partition_filter`` (None: the whole table).
        partition_filter: the overwritten partition, matched by value (see ``Committer.overwrite_entries``).
        commit_identifier: with the commit user, identifies the commit across re-runs.

    Returns:
        The commit result and the DELETE entries of the overwrite; ``discarded`` counts this run's files
        removed because the same commit had already landed.

    Raises:
        The committer's errors. On a refusal this run's files are discarded first; on an unknown
        outcome they are kept.

    Example:
        >>> added = write_data_files(table, rows)
        >>> done = commit_written_files(Committer(table, "etl"), added, commit_identifier=7)
        >>> done.result.already_committed, done.discarded  # a re-run: (True, len(added))
    """
    kind = CommitKind.OVERWRITE if overwrite else CommitKind.APPEND
    try:
        deletes = committer.overwrite_entries(partition_filter, added) if overwrite else []
        result = committer.commit(
            [*deletes, *added], kind=kind, commit_identifier=commit_identifier, check_conflicts=True
        )
    except REFUSED:
        _discard(committer, added, keep=set())
        raise
    discarded = 0
    if result.already_committed and added:
        discarded = _discard(committer, added, keep=_added_by(committer, result.snapshot))
    return WrittenCommit(result, deletes, discarded)


def _added_by(committer: Committer, snapshot: Snapshot) -> set[str]:
    """File names the snapshot's own delta added: what the landed commit references of its own."""
    table = committer.table
    owner = f"snapshot {snapshot.id}"
    names: set[str] = set()
    for meta in table.manifest_list(snapshot.delta_manifest_list, owner):
        names.update(table.manifest_file_names(meta.file_name, owner, meta.file_size))
    return names


def _discard(committer: Committer, added: Sequence[ManifestEntry], keep: set[str]) -> int:
    table = committer.table
    paths = DataFilePaths(table.schema)
    doomed = [
        table.io.join(table.root, paths.relative_path(e))
        for e in added
        # This writer never writes external paths; a file there is not provably ours.
        if e.file.file_name not in keep and not e.file.external_path
    ]
    return discard_unpublished(table.io, doomed, "data-file").total_files
