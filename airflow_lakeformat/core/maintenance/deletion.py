"""The one place that deletes table files.

Everything that removes a file from a table (snapshot expiry, orphan cleanup, empty-directory
cleanup) hands a list of :class:`DeleteRequest` to a :class:`FileDeleter`. Keeping deletion small and
central is how the safety rules stay checkable: dry run is the default, every request says what kind
of file it is, a ``before_batch`` guard lets the caller re-check each batch against the table right
before it goes, failures are retried with back-off and then reported, never swallowed, and ordered
deletes (snapshot files) stop at the first failure so what remains is always a contiguous suffix.

On S3 a batch is one ``DeleteObjects`` request of up to 1000 keys, ``concurrency`` requests in
flight; elsewhere files are deleted one by one on a bounded thread pool. Throttling (a ``503
SlowDown`` of the whole request, or per-key ``SlowDown`` errors inside a ``DeleteObjects`` answer)
is handled twice: the throttled keys are re-sent after an exponential back-off with jitter, and the
deleter's key rate is bounded by :class:`~.rate.AdaptiveRate` (halved on every throttling answer,
raised again additively). How many requests are in flight (at most ``concurrency``) follows the
store's latency (:class:`~.rate.AdaptiveConcurrency`): more while they are served in parallel,
fewer once they only queue at the store. Every re-send is counted in the report (``retries``,
``throttled``, time spent waiting on the bound); a key that still fails after ``max_attempts`` is
reported as failed with its error, never dropped. Keys S3 accepted count as deleted; the rest stay
where they were.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.io import FileIO, StorageRequestError
from airflow_lakeformat.core.maintenance.rate import AdaptiveConcurrency, AdaptiveRate
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

log = logging.getLogger(__name__)

S3_MAX_KEYS_PER_REQUEST = 1000
# S3 error codes worth another attempt; anything else (AccessDenied, ...) will not get better.
_RETRYABLE_S3_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "503"})
# Answers that mean "send less": the rate bound is halved on each.
_THROTTLING_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "503", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
)
_THROTTLING_STATUSES = frozenset({429, 503})

BatchGuard = Callable[[list["DeleteRequest"]], list["DeleteRequest"]]


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """One file to delete: its kind (``data-file``, ``manifest``, ...), fsspec path and size if known."""

    kind: str
    path: str
    size: int | None = None


@dataclass(frozen=True, slots=True)
class FailedDelete:
    path: str
    kind: str
    error: str


@dataclass
class DeletionReport:
    """What a deleter did (or, in a dry run, would do), by kind."""

    dry_run: bool
    files: Counter[str] = field(default_factory=Counter)
    bytes: Counter[str] = field(default_factory=Counter)
    already_missing: int = 0
    skipped_by_guard: int = 0
    failed: list[FailedDelete] = field(default_factory=list)
    requests: int = 0
    duration_seconds: float = 0.0
    retries: int = 0  # requests (or single deletes) sent again, the S3 client's own re-sends included
    throttled: int = 0  # answers that pushed back: 503/429/SlowDown, per-key SlowDown, client re-sends
    rate_limited_seconds: float = 0.0  # time spent waiting on the adaptive rate bound

    @property
    def total_files(self) -> int:
        return sum(self.files.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    def merge(self, other: DeletionReport) -> None:
        self.files.update(other.files)
        self.bytes.update(other.bytes)
        self.already_missing += other.already_missing
        self.skipped_by_guard += other.skipped_by_guard
        self.failed.extend(other.failed)
        self.requests += other.requests
        self.duration_seconds += other.duration_seconds
        self.retries += other.retries
        self.throttled += other.throttled
        self.rate_limited_seconds += other.rate_limited_seconds

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> DeletionReport:
        """The report back from :meth:`to_json` (Spark tasks return their reports as JSON)."""
        return cls(
            dry_run=bool(document["dryRun"]),
            files=Counter(document["files"]),
            bytes=Counter(document["bytes"]),
            already_missing=int(document["alreadyMissing"]),
            skipped_by_guard=int(document["skippedByGuard"]),
            failed=[FailedDelete(f["path"], f["kind"], f["error"]) for f in document["failed"]],
            requests=int(document["requests"]),
            duration_seconds=float(document["durationSeconds"]),
            retries=int(document.get("retries", 0)),
            throttled=int(document.get("throttled", 0)),
            rate_limited_seconds=float(document.get("rateLimitedSeconds", 0.0)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "files": dict(sorted(self.files.items())),
            "bytes": dict(sorted(self.bytes.items())),
            "totalFiles": self.total_files,
            "totalBytes": self.total_bytes,
            "alreadyMissing": self.already_missing,
            "skippedByGuard": self.skipped_by_guard,
            "failed": [{"path": f.path, "kind": f.kind, "error": f.error} for f in self.failed],
            "requests": self.requests,
            "durationSeconds": round(self.duration_seconds, 3),
            "retries": self.retries,
            "throttled": self.throttled,
            "rateLimitedSeconds": round(self.rate_limited_seconds, 3),
        }


def tally(requests: Iterable[DeleteRequest]) -> tuple[dict[str, int], dict[str, int]]:
    """Files and bytes by kind, sorted by kind: what a plan reports before anything is deleted."""
    files: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for request in requests:
        files[request.kind] += 1
        sizes[request.kind] += request.size or 0
    return dict(sorted(files.items())), dict(sorted(sizes.items()))


class FileDeleter:
    """Deletes files of one filesystem: batched, bounded concurrency, retries with back-off, dry run.

    ``max_keys_per_second`` caps the rate of S3 bulk deletes (None: unbounded until the store
    throttles; the bound then adapts, see :mod:`.rate`).
    """

    def __init__(
        self,
        io: FileIO,
        *,
        dry_run: bool = True,
        batch_size: int = S3_MAX_KEYS_PER_REQUEST,
        concurrency: int = 8,
        max_attempts: int = 5,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        progress: Progress = NO_PROGRESS,
        sleep: Callable[[float], None] = time.sleep,
        max_keys_per_second: float | None = None,
    ) -> None:
        if not 1 <= batch_size <= S3_MAX_KEYS_PER_REQUEST:
            raise ValueError(f"batch_size must be between 1 and {S3_MAX_KEYS_PER_REQUEST}, not {batch_size}")
        self.io = io
        self.dry_run = dry_run
        self.batch_size = batch_size
        self.concurrency = max(1, concurrency)
        self.max_attempts = max(1, max_attempts)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.progress = progress
        self.sleep = sleep
        self.rate = AdaptiveRate(max_keys_per_second, sleep=sleep)
        self.in_flight = AdaptiveConcurrency(self.concurrency)
        self._lock = threading.Lock()

    # -- public --------------------------------------------------------------------------------

    def delete(
        self,
        requests: Iterable[DeleteRequest],
        *,
        task: str = "deleting files",
        total: int | None = None,
        before_batch: BatchGuard | None = None,
    ) -> DeletionReport:
        """Delete ``requests`` in batches, in no particular order.

        ``before_batch`` runs on the calling thread right before each batch is sent and returns the
        requests that are still safe to delete; the rest are counted as ``skippedByGuard``.
        """
        report = DeletionReport(dry_run=self.dry_run)
        started = time.monotonic()
        waited = self.rate.waited_seconds
        self.progress.start(task, total)
        try:
            in_flight: set[Future[None]] = set()
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                for batch in _batches(requests, self.batch_size):
                    batch = self._guarded(batch, before_batch, report)
                    if not batch:
                        continue
                    report.requests += len(batch)
                    if self.dry_run:
                        self._count(report, batch)
                        continue
                    while len(in_flight) >= self.concurrency * 2:
                        done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                        for future in done:
                            future.result()
                    in_flight.add(pool.submit(self._delete_batch, batch, report))
                for future in in_flight:
                    future.result()
        finally:
            self.progress.finish()
            report.duration_seconds = time.monotonic() - started
            report.rate_limited_seconds = self.rate.waited_seconds - waited
        return report

    def delete_in_order(
        self, requests: Sequence[DeleteRequest], *, task: str = "deleting files"
    ) -> DeletionReport:
        """Delete one file at a time in the given order, stopping at the first failure.

        Used for snapshot files, which Paimon deletes in ascending order so that a crash leaves the
        remaining snapshots contiguous and a re-run picks up where this one stopped.
        """
        report = DeletionReport(dry_run=self.dry_run)
        started = time.monotonic()
        self.progress.start(task, len(requests))
        try:
            for request in requests:
                report.requests += 1
                if self.dry_run:
                    self._count(report, [request])
                    continue
                self._delete_files([request], report)
                if report.failed:
                    break
        finally:
            self.progress.finish()
            report.duration_seconds = time.monotonic() - started
        return report

    def remove_empty_directories(self, paths: Sequence[str]) -> DeletionReport:
        """Remove directories that are empty right now, deepest first; a non-empty one is left alone.

        Only meaningful on filesystems with real directories; object stores have none to remove.
        """
        report = DeletionReport(dry_run=self.dry_run)
        if not self.io.is_local:
            return report
        for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):
            report.requests += 1
            if self.dry_run:
                report.files["directory"] += 1
                continue
            # rmdir(2) refuses a directory a writer has put a file into since it was listed.
            if self.io.remove_empty_dir(path):
                report.files["directory"] += 1
        return report

    # -- internals -----------------------------------------------------------------------------

    def _guarded(
        self, batch: list[DeleteRequest], guard: BatchGuard | None, report: DeletionReport
    ) -> list[DeleteRequest]:
        if guard is None:
            return batch
        allowed = guard(batch)
        report.skipped_by_guard += len(batch) - len(allowed)
        self.progress.advance(len(batch) - len(allowed))
        return allowed

    def _count(self, report: DeletionReport, done: Iterable[DeleteRequest]) -> None:
        count = 0
        with self._lock:
            for request in done:
                report.files[request.kind] += 1
                report.bytes[request.kind] += request.size or 0
                count += 1
        self.progress.advance(count)

    def _delete_batch(self, batch: list[DeleteRequest], report: DeletionReport) -> None:
        if self.io.protocol == "s3" and len(batch) > 1:
            self._delete_s3_batch(batch, report)
        else:
            self._delete_files(batch, report)

    def _backoff(self, attempt: int) -> None:
        delay = min(self.backoff_max, self.backoff_base * (2**attempt))
        self.sleep(delay * (0.5 + random.random() / 2))

    def _delete_files(self, batch: list[DeleteRequest], report: DeletionReport) -> None:
        for request in batch:
            error: BaseException | None = None
            for attempt in range(self.max_attempts):
                try:
                    existed = self.io.delete_existing(request.path)
                except OSError as exc:
                    error = exc
                    if attempt + 1 < self.max_attempts:
                        self._add(report, retries=1)
                        self._backoff(attempt)
                    continue
                if existed:
                    self._count(report, [request])
                else:
                    with self._lock:
                        report.already_missing += 1
                    self.progress.advance()
                break
            else:
                self._fail(report, request, error)

    def _delete_s3_batch(self, batch: list[DeleteRequest], report: DeletionReport) -> None:
        by_bucket: dict[str, list[DeleteRequest]] = {}
        for request in batch:
            by_bucket.setdefault(request.path.split("/", 1)[0], []).append(request)
        for bucket, requests in by_bucket.items():
            pending = requests
            last_error: dict[str, str] = {}
            for attempt in range(self.max_attempts):
                if attempt:
                    self._add(report, retries=1)
                self.rate.acquire(len(pending))
                self.in_flight.acquire()
                sent = time.monotonic()
                try:
                    answer = self.io.delete_objects(bucket, [r.path.split("/", 1)[1] for r in pending])
                except OSError as exc:  # the whole request failed (network, 5xx): retry all of it
                    retries = getattr(exc, "retries", 0)
                    throttled = _is_throttling(exc)
                    self.in_flight.release(0, 0.0, throttled=bool(throttled or retries))
                    self._add(report, retries=retries, throttled=retries + throttled)
                    if throttled or retries:
                        self.rate.throttled()
                    last_error = {r.path: str(exc) for r in pending}
                    if attempt + 1 < self.max_attempts:
                        self._backoff(attempt)
                    continue
                except BaseException:
                    # Anything else ends the run: give the slot back, or later deletes wait forever.
                    self.in_flight.release(0, 0.0)
                    raise
                # S3 does not say whether a key existed, so every key without an error counts as deleted.
                errors = {f"{bucket}/{key}": error for key, error in answer.errors.items()}
                throttled = any(code in _THROTTLING_CODES for code, _ in errors.values())
                self.in_flight.release(
                    len(pending), time.monotonic() - sent, throttled=bool(throttled or answer.retries)
                )
                self._add(report, retries=answer.retries, throttled=answer.retries + throttled)
                deleted = [r for r in pending if r.path not in errors]
                self._count(report, deleted)
                if throttled or answer.retries:
                    self.rate.throttled()
                else:
                    self.rate.succeeded(len(deleted))
                retryable = {p for p, (code, _) in errors.items() if code in _RETRYABLE_S3_CODES}
                for request in pending:
                    if request.path in errors and request.path not in retryable:
                        self._fail(report, request, errors[request.path][1])
                last_error = {p: errors[p][1] for p in retryable}
                pending = [r for r in pending if r.path in retryable]
                if not pending:
                    break
                if attempt + 1 < self.max_attempts:
                    self._backoff(attempt)
            for request in pending:
                self._fail(report, request, last_error.get(request.path, "unknown error"))

    def _add(self, report: DeletionReport, *, retries: int = 0, throttled: int = 0) -> None:
        if retries or throttled:
            with self._lock:
                report.retries += retries
                report.throttled += throttled

    def _fail(
        self, report: DeletionReport, request: DeleteRequest, error: BaseException | str | None
    ) -> None:
        message = str(error) if error is not None else "unknown error"
        log.warning("could not delete %s (%s): %s", self.io.uri(request.path), request.kind, message)
        with self._lock:
            report.failed.append(FailedDelete(self.io.uri(request.path), request.kind, message))
        self.progress.advance()


def _is_throttling(exc: OSError) -> bool:
    """Whether a failed request was the store pushing back (503, 429, SlowDown...)."""
    if not isinstance(exc, StorageRequestError):
        return False
    return exc.status in _THROTTLING_STATUSES or exc.code in _THROTTLING_CODES


def _batches(requests: Iterable[DeleteRequest], size: int) -> Iterator[list[DeleteRequest]]:
    batch: list[DeleteRequest] = []
    for request in requests:
        batch.append(request)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def discard_unpublished(io: FileIO, paths: Iterable[str], kind: str = "unpublished") -> DeletionReport:
    """Best-effort removal of files this process wrote and that no snapshot references: a commit that
    was definitely not published, or a write that failed half way. One attempt, failures only logged
    (orphan cleanup removes leftovers). Never call this when a commit's outcome is unknown."""
    deleter = FileDeleter(io, dry_run=False, max_attempts=1, concurrency=4)
    report = deleter.delete(DeleteRequest(kind, path) for path in paths)
    return report


def discard_lock_records(io: FileIO, paths: Iterable[str]) -> DeletionReport:
    """Best-effort removal of superseded maintenance-lock lease files (``core/maintenance/lock.py`` picks
    generations far below the one it holds; the highest generation is never among them). One attempt,
    failures only logged: a leftover record costs a directory entry, nothing else."""
    deleter = FileDeleter(io, dry_run=False, max_attempts=1, concurrency=4)
    return deleter.delete(DeleteRequest("lock-record", path) for path in paths)
