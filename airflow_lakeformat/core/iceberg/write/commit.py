"""The one commit-retry loop every Iceberg commit of this package goes through.

Iceberg commits are optimistic (spec "Optimistic Concurrency"; Java ``SnapshotProducer.commit`` with
``Tasks.foreach(...).exponentialBackoff(...).onlyRetryOn(CommitFailedException)``; reference 2.1):

1. Build a fresh pyiceberg ``Transaction`` on the current table and let the caller stage its updates
   (``stage(tx)``) against that base.
2. ``commit_transaction``: the catalog checks the requirements (``assert-ref-snapshot-id``, ``assert-table-uuid``,
   ...) and swaps the pointer.
3. ``CommitFailedException`` (a requirement failed or another writer won the swap) means nothing was
   published: wait ``min(min_wait * 2^attempt, max_wait)`` plus up to 10% jitter, refresh the table, and go
   to 1, at most ``commit.retry.num-retries`` times and within ``commit.retry.total-timeout-ms`` (Java's
   properties and defaults: 4, 100 ms, 60 s, 30 min). Then :class:`CommitRetriesExhaustedError`.
4. ``CommitStateUnknownException`` (REST 5xx, a lost response, an S3 PUT that may have landed) is never
   retried: it becomes :class:`CommitStateUnknownError`, and files written for the commit must be kept
   (apache/iceberg #12792). ``ValidationException`` (a concurrent change the operation cannot tolerate)
   becomes :class:`CommitConflictError`.

pyiceberg 0.12 itself retries *inside* ``commit_transaction`` when the transaction holds a snapshot
producer (append, overwrite, delete, add_files): it refreshes, rebuilds the manifest list on the new
head and re-validates, without rewriting data files. This loop is the outer one: it re-stages from
scratch only when pyiceberg gives up, and it is the only retry for metadata-only commits (properties,
refs, expiry, and the manifest rewrites to come), which pyiceberg does not retry.

Unreadable metadata is a typed error naming the file (CLI exit 4), never a bare decoder error:

* Before each attempt stages, the manifest list of every branch head is read with typed errors
  (``manifests.read_manifests``; one small file per branch). A snapshot producer reads its branch head's
  list only after it has written the new data files and manifest (pyiceberg ``_SnapshotProducer._manifests``),
  so a truncated list would otherwise fail the commit with an untyped ``zlib.error`` and leave those files
  behind. A metadata-only commit planned from lists it has read (expiry) skips this (``check_heads=False``).
* Staging and committing run with the table's FileIO wrapped (``avro_guard.checked_io``): an Avro file
  pyiceberg reads for itself (``add_files``' duplicate check, a merge append, an overwrite) has its framing
  checked first, since pyiceberg 0.12's decoder reads past the buffer of a truncated file; a head's manifest
  is also checked against the length its list records (a cut at a block boundary frames as a whole file).
* A decoder or IO error raised while staging or committing names no file; the heads' manifest lists and
  manifests are then read with typed errors (``live_files``), and the first unreadable one is raised
  instead. If they all read, the original error propagates. This costs reads only on the failure path.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException
from pyiceberg.table import Transaction
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    LakeformatError,
)
from airflow_lakeformat.core.iceberg.metadata.avro_guard import checked_io
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.manifests import AVRO_DECODE_ERRORS, read_manifests
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

T = TypeVar("T")
log = logging.getLogger(__name__)
# What pyiceberg raises on a truncated, garbage or missing manifest list or manifest.
UNREADABLE_METADATA_ERRORS: tuple[type[BaseException], ...] = (*AVRO_DECODE_ERRORS, OSError)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff (Java ``commit.retry.*`` semantics)."""

    num_retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 1_800_000

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RetryPolicy:
        """The policy a table's ``commit.retry.*`` properties ask for (Java defaults otherwise)."""

        def read(name: str, default: int) -> int:
            try:
                return max(0, int(properties.get(name, default)))
            except (TypeError, ValueError):
                return default

        return cls(
            num_retries=read("commit.retry.num-retries", cls.num_retries),
            min_wait_ms=read("commit.retry.min-wait-ms", cls.min_wait_ms),
            max_wait_ms=read("commit.retry.max-wait-ms", cls.max_wait_ms),
            total_timeout_ms=read("commit.retry.total-timeout-ms", cls.total_timeout_ms),
        )

    def wait_ms(self, attempt: int) -> float:
        """Backoff before retry ``attempt + 1``: capped exponential plus up to 10% jitter."""
        base = float(min(self.min_wait_ms * (2**attempt), self.max_wait_ms))
        return base + random.uniform(0.0, 0.1 * base)


def commit_with_retry(
    table: IcebergTable,
    stage: Callable[[Transaction], T],
    *,
    description: str = "commit",
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    check_heads: bool = True,
) -> T:
    """Stage and commit, retrying on concurrent commits (module docstring).

    Args:
        table: The table (refreshed in place between attempts; current after success).
        stage: Stages the updates on a fresh transaction and returns a result; called once per attempt,
            always against the latest metadata, so it must plan from ``tx.table_metadata``.
        description: What is committed, for messages.
        policy: Retry policy (default: from the table's ``commit.retry.*`` properties).
        sleep: Sleep function taking seconds (tests pass a recorder).
        check_heads: Read every branch head's manifest list with typed errors before each attempt stages
            (module docstring). A metadata-only commit planned from lists it has already read (expiry)
            passes False: the reads would only widen the window in which a concurrent writer makes it retry.

    Returns:
        What the last ``stage`` call returned.

    Raises:
        ReadOnlyTableError, UnsupportedWriteVersionError: The table cannot be committed to.
        CommitRetriesExhaustedError: Other writers kept winning; nothing of this commit was published.
        CommitStateUnknownError: The outcome is unknown; do not delete files written for the commit.
        CommitConflictError: A concurrent change invalidated the operation (pyiceberg ``ValidationException``).
        CorruptMetadataError, MissingMetadataError: A branch head's manifest list or manifest cannot be read
            (named in the message); nothing was published.

    Example:
        >>> def stage(tx):
        ...     tx.set_properties({"owner": "etl"})
        >>> commit_with_retry(table, stage, description="set owner")  # doctest: +SKIP
    """
    table.check_writable()
    policy = policy or RetryPolicy.from_properties(table.metadata.properties)
    started = time.monotonic()
    attempt = 0
    while True:
        lengths = {
            m.manifest_path: m.manifest_length
            for head in (branch_heads(table) if check_heads else ())
            for m in read_manifests(table, head)
        }
        tx = table.table.transaction()
        with unreadable_metadata_named(table), checked_io(table, lengths):
            result = stage(tx)
        try:
            with unreadable_metadata_named(table), checked_io(table, lengths):
                tx.commit_transaction()
            return result
        except CommitStateUnknownException as exc:
            raise CommitStateUnknownError(
                f"{table.name}: {description}: the catalog could not confirm the commit ({exc}); it may have "
                "landed. Refresh the table and check before retrying; keep the files written for it."
            ) from exc
        except ValidationException as exc:
            raise CommitConflictError(f"{table.name}: {description}: {exc}") from exc
        except CommitFailedException as exc:
            elapsed_ms = (time.monotonic() - started) * 1000
            if attempt >= policy.num_retries or elapsed_ms >= policy.total_timeout_ms:
                raise CommitRetriesExhaustedError(
                    f"{table.name}: {description}: gave up after {attempt + 1} attempts ({exc})"
                ) from exc
            wait = policy.wait_ms(attempt)
            log.info(
                "%s: %s conflicted (%s); retry %d in %.0f ms", table.name, description, exc, attempt + 1, wait
            )
            sleep(wait / 1000.0)
            table.refresh()
            attempt += 1


def branch_heads(table: IcebergTable) -> list[Snapshot]:
    """The head snapshot of every branch, once each. A branch naming a snapshot the metadata lacks is left to
    pyiceberg's own validation, a legacy v1 head without a manifest list to pyiceberg, as before."""
    metadata = table.metadata
    refs = metadata.refs.values()
    ids = sorted({ref.snapshot_id for ref in refs if ref.snapshot_ref_type == SnapshotRefType.BRANCH})
    heads = (metadata.snapshot_by_id(snapshot_id) for snapshot_id in ids)
    return [head for head in heads if head is not None and head.manifest_list]


@contextlib.contextmanager
def unreadable_metadata_named(table: IcebergTable) -> Iterator[None]:
    """Turn a decoder or IO error of pyiceberg's into the typed error naming the unreadable file (module
    docstring); an error no branch head's metadata explains propagates unchanged."""
    try:
        yield
    except LakeformatError:
        raise
    except UNREADABLE_METADATA_ERRORS:
        for head in branch_heads(table):
            live_files(table, head)
        raise
