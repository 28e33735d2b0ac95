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
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException
from pyiceberg.table import Transaction

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
)
from airflow_lakeformat.core.iceberg.table import IcebergTable

T = TypeVar("T")
log = logging.getLogger(__name__)


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
) -> T:
    """Stage and commit, retrying on concurrent commits (module docstring).

    Args:
        table: The table (refreshed in place between attempts; current after success).
        stage: Stages the updates on a fresh transaction and returns a result; called once per attempt,
            always against the latest metadata, so it must plan from ``tx.table_metadata``.
        description: What is committed, for messages.
        policy: Retry policy (default: from the table's ``commit.retry.*`` properties).
        sleep: Sleep function taking seconds (tests pass a recorder).

    Returns:
        What the last ``stage`` call returned.

    Raises:
        ReadOnlyTableError, UnsupportedWriteVersionError: The table cannot be committed to.
        CommitRetriesExhaustedError: Other writers kept winning; nothing of this commit was published.
        CommitStateUnknownError: The outcome is unknown; do not delete files written for the commit.
        CommitConflictError: A concurrent change invalidated the operation (pyiceberg ``ValidationException``).

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
        tx = table.table.transaction()
        result = stage(tx)
        try:
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
