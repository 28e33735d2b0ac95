"""Rewriting a batch's file groups in forked worker processes, so that every core rewrites and none waits on the GIL.

Threads share one core's worth of Python: pyarrow decodes, encodes and compresses without the GIL, but
pyiceberg's projection of each batch onto the table's schema, the delete masks and the writer's bookkeeping do
not, and on a table of many small files that is most of the time. A process forked from this one starts in
milliseconds with everything imported and the plan already in memory (``core/forked.py`` does the same for
metadata reads), so each worker just rewrites groups, exactly as this process would (``rewrite_one``).

Algorithm (:func:`rewrite_in_workers`, the default :data:`~.data_compaction_run.GroupRewriter`):

1. **When** (:func:`worker_count`): ``forked.fork_allowed()`` (Linux, more than one CPU in the affinity mask,
   ``LAKEFORMAT_DECODE_PROCESSES`` not ``1``, not in a forked process already, and this is the only Python
   thread: the fork happens *instead of* the rewrite threads, never after them), at least two groups and two
   rewrites at once (``max-concurrent-file-group-rewrites``, capped at the CPUs), every file of the batch and
   the table's data location on local disk (an S3 client's connections and threads must not cross a fork: such
   tables keep the threads), and at least :data:`MIN_BATCH_BYTES` of input (below it the forks cost more than the
   second core gives). Otherwise ``rewrite_in_process`` rewrites the groups on threads, as before.
2. **Fork**: one token (the group's index, 4 bytes) per group goes into a pipe whose write end is closed before
   the workers are forked; ``min(concurrency, groups, CPUs)`` workers each take the next token (a pipe read of 4
   bytes is atomic), rewrite that group with ``rewrite_one`` and answer on their own pipe; they leave when the
   tokens run out, and die with this process (``PR_SET_PDEATHSIG``). This process only waits and gathers.
3. **Messages** (pickled, length-prefixed): before each output file is created, ``("opened", n, location)``;
   after the group, ``("done", n, facts)`` (the new ``DataFile`` records, the locations, the row counts) or
   ``("failed", n, None)`` (the worker's ``rewrite_one`` already removed what that group wrote).
4. **Stop**: after a failure this process takes the remaining tokens, so no further group starts.
5. **Never lost**: every group without a ``done`` answer (failed, its worker crashed or fell silent for
   :data:`STALL_SECONDS`, or never started) is
   rewritten *here* afterwards, in group order, after removing what its worker announced; so an error (a missing
   or corrupt input file) is raised exactly as a one-process run raises it (typed, naming the file), and a group
   whose worker died for another reason is still rewritten. The first group failing here stops the rest.
6. **Meanwhile**: once the workers are forked, this process runs the work its caller left for that time
   (:func:`while_workers_run`; the run writes the commit's rewritten manifests: ``data_compaction_commit.Prestaged``)
   before it waits; a failure there is logged and changes nothing (the commit writes them itself).
7. **Order**: the results are yielded in the groups' order, then that error raised (the ``GroupRewriter``
   contract); the caller commits exactly as after a one-process run. If this process is interrupted while the
   workers run, they are killed and every file they announced is removed.

Example:
    >>> results = list(rewrite_in_workers(table, plan.groups, files, concurrency=2))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlparse

from airflow_lakeformat.core import forked
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import (
    ARROW_THREADS,
    RewrittenFiles,
    announcing_locations,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import (
    discard_written,
    rewrite_in_process,
    rewrite_one,
)

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

log = logging.getLogger(__name__)

#: A batch with less input than this is rewritten on threads (step 1): forking costs about 10 ms per worker plus
#: the copy-on-write faults of its first writes, which a few small groups do not earn back.
MIN_BATCH_BYTES = 16 * 1024 * 1024
TOKEN_BYTES = 4
#: Tokens are written before any worker reads them: at most what a default pipe holds (64 KiB).
MAX_GROUPS = 65536 // TOKEN_BYTES
PR_SET_PDEATHSIG = 1  # linux/prctl.h
#: A worker that says nothing this long (no output file opened, no group finished) is taken for hung, killed, and
#: its group rewritten here (step 5): a compaction never waits forever on a child. Writing one output file of the
#: default 512 MB takes well under a minute.
STALL_SECONDS = 900.0
#: Where pyiceberg's location providers may put new data files instead of under the table's location.
DATA_LOCATION_PROPERTIES = ("write.data.path", "write.object-storage.path", "write.folder-storage.path")


#: What this process does while its workers rewrite (step 6), set by :func:`while_workers_run`.
_MEANWHILE: ContextVar[Callable[[], None] | None] = ContextVar(
    "lakeformat_compaction_meanwhile", default=None
)


@contextmanager
def while_workers_run(work: Callable[[], None]) -> Iterator[None]:
    """Run ``work`` in this process while forked workers rewrite the groups (never when there are none).

    Example:
        >>> with while_workers_run(lambda: prestaged.write(table, paths)):  # doctest: +SKIP
        ...     results = list(rewrite_in_workers(table, groups, files, concurrency=2))
    """
    token = _MEANWHILE.set(work)
    try:
        yield
    finally:
        _MEANWHILE.reset(token)


def _meanwhile(table: IcebergTable) -> None:
    work = _MEANWHILE.get()
    if work is None:
        return
    try:
        work()
    except Exception as exc:  # only ahead of time: the commit does it itself
        log.warning("%s: work ahead of the commit failed (%s); the commit does it", table.name, exc)


def _is_local(location: str) -> bool:
    return urlparse(location).scheme in ("", "file")


def fork_allowed() -> bool:
    """``forked.fork_allowed()``'s conditions, where the idle threads of pyiceberg's executor do not count."""
    return (
        not forked._in_child
        and sys.platform.startswith("linux")
        and os.environ.get(forked.ENV_PROCESSES, "").strip() not in ("0", "1")
        and len(os.sched_getaffinity(0)) >= 2
        and threads_allow_fork()
    )


def threads_allow_fork() -> bool:
    """This is the main thread, and every other Python thread is an idle worker of pyiceberg's executor.

    pyiceberg keeps the threads of its executor (``ExecutorFactory``) alive once any scan used them. While its
    queue is empty they wait on it and hold no lock the workers take; a forked process never uses that executor
    (pyiceberg makes a new one in a process of another pid). Any other thread forbids the fork: a lock it holds
    would stay locked in the child.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    return threading.active_count() == 1 or _only_idle_pyiceberg_threads()


def _only_idle_pyiceberg_threads() -> bool:
    from pyiceberg.utils.concurrent import ExecutorFactory

    executor = ExecutorFactory._instance
    if ExecutorFactory._instance_pid != os.getpid() or not isinstance(executor, ThreadPoolExecutor):
        return False
    ours = set(executor._threads)
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    # empty queue, and no thread past its get(): every worker is back waiting (the idle semaphore counts them)
    return (
        all(t in ours for t in others)
        and executor._work_queue.empty()
        and executor._idle_semaphore._value >= len(ours)
    )


def worker_count(table: IcebergTable, groups: Sequence[FileGroup], concurrency: int) -> int:
    """How many worker processes rewrite ``groups`` (0: this process does, on threads; module docstring step 1).

    Args:
        table: the table.
        groups: the batch's groups.
        concurrency: how many groups may be rewritten at once.

    Example:
        >>> worker_count(table, plan.groups, 2)  # doctest: +SKIP
        2
    """
    if concurrency < 2 or not 2 <= len(groups) <= MAX_GROUPS or not fork_allowed():
        return 0
    count = min(concurrency, len(groups), len(os.sched_getaffinity(0)))
    properties = table.metadata.properties
    locations = [table.metadata.location] + [properties.get(key, "") for key in DATA_LOCATION_PROPERTIES]
    locations += [path for g in groups for path in [c.path for c in g.files] + list(g.delete_files)]
    if count < 2 or not all(_is_local(location) for location in locations):
        return 0
    return count if sum(c.file_size for g in groups for c in g.files) >= MIN_BATCH_BYTES else 0


def rewrite_in_workers(
    table: IcebergTable, groups: Sequence[FileGroup], files: Mapping[str, DataFile], concurrency: int = 1
) -> Iterator[RewrittenFiles]:
    """Rewrite the groups in forked workers when :func:`worker_count` allows it, else on threads here.

    Args:
        table: the table.
        groups: the batch's groups.
        files: the ``DataFile`` of every input and delete file of the groups, by path.
        concurrency: how many groups are rewritten at once.

    Returns:
        One :class:`RewrittenFiles` per group, in the groups' order; raises the first failing group's error after
        yielding what the others wrote (module docstring, steps 5 and 6).

    Example:
        >>> [r.group for r in rewrite_in_workers(table, groups, files, concurrency=2)] == list(groups)  # doctest: +SKIP
        True
    """
    count = worker_count(table, groups, concurrency)
    if not count:
        yield from rewrite_in_process(table, groups, files, concurrency=concurrency)
        return
    pool = _Pool(table, groups, files, count)
    try:
        _meanwhile(table)
        pool.gather()
    except BaseException:
        pool.abandon()
        raise
    done, error = pool.done, None
    for n, group in enumerate(groups):
        if n in done:
            continue
        discard_written(table, pool.announced.pop(n, []), "its worker did not finish it")
        try:
            done[n] = rewrite_one(table, group, files)  # here, as a one-process run: its error is the run's
        except BaseException as exc:
            error = exc
            break
    yield from (done[n] for n in sorted(done))
    if error is not None:
        raise error


class _Pool:
    """The workers of one batch (module docstring, steps 2 to 4), gathered by :meth:`gather`."""

    def __init__(
        self, table: IcebergTable, groups: Sequence[FileGroup], files: Mapping[str, DataFile], count: int
    ) -> None:
        self.table = table
        self.groups = groups
        self.done: dict[int, RewrittenFiles] = {}
        self.announced: dict[int, list[str]] = {}  # the locations each group's worker opened
        self._workers: dict[int, int] = {}  # reply pipe -> pid
        self._tokens, tokens_write = os.pipe()
        try:
            payload = memoryview(b"".join(n.to_bytes(TOKEN_BYTES, "little") for n in range(len(groups))))
            while payload:
                payload = payload[os.write(tokens_write, payload) :]
        finally:
            os.close(tokens_write)
        parent = os.getpid()
        for _ in range(count):
            replies, reply_write = forked._pipe()
            try:
                pid = forked._fork()
            except OSError:  # fewer workers; with none, every group is rewritten here (step 5)
                os.close(replies)
                os.close(reply_write)
                break
            if pid == 0:  # pragma: no cover - the worker (coverage does not follow it)
                os.close(replies)
                _work(table, groups, files, self._tokens, reply_write, parent)
            os.close(reply_write)
            self._workers[replies] = pid
        log.debug("%s: %d groups rewritten by %d forked workers", table.name, len(groups), len(self._workers))

    def gather(self) -> None:
        """Read every worker's messages until all have left."""
        try:
            heard = dict.fromkeys(self._workers, time.monotonic())  # when each worker last said something
            while self._workers:
                wait = max(0.0, min(heard[fd] for fd in self._workers) + STALL_SECONDS - time.monotonic())
                ready, _, _ = select.select(list(self._workers), [], [], wait)
                for fd in ready:
                    heard[fd] = time.monotonic()
                    self._receive(fd)
                self._stop_silent(
                    [fd for fd in self._workers if time.monotonic() - heard[fd] >= STALL_SECONDS]
                )
        finally:
            os.close(self._tokens)

    def _stop_silent(self, silent: list[int]) -> None:
        """Workers that said nothing for STALL_SECONDS are killed; their groups are rewritten here (step 5)."""
        for fd in silent:
            log.warning(
                "%s: no word from compaction worker %s in %.0f s; it is killed and its group rewritten here",
                self.table.name,
                self._workers[fd],
                STALL_SECONDS,
            )
            self._leave(fd, kill=True)

    def _receive(self, fd: int) -> None:
        deadline = time.monotonic() + STALL_SECONDS
        message = forked._read_message(fd, deadline)  # None: it left, or it stalled mid-message
        kind: str
        n: int
        value: Any
        kind, n, value = "left", 0, None
        if message is not None:
            try:  # our own worker's bytes over a pipe only it holds
                kind, n, value = pickle.loads(message)
            except Exception:  # unreadable: it broke
                kind = "broken"
        if kind in ("left", "broken"):  # all tokens taken, or it died: what it had not finished is done here
            stalled = message is None and time.monotonic() >= deadline
            self._leave(fd, kill=kind == "broken" or stalled)
        elif kind == "opened":
            self.announced.setdefault(n, []).append(value)
        elif kind == "done":
            outputs, locations, rows_read, rows_written, spilled = value
            self.done[n] = RewrittenFiles(
                self.groups[n], outputs, locations, rows_read, rows_written, spilled
            )
        else:  # failed: no further group starts; this process re-runs it to raise its error (step 5)
            self.announced.pop(n, None)  # the worker's rewrite_one removed them
            self._take_remaining_tokens()

    def _take_remaining_tokens(self) -> None:
        while os.read(self._tokens, 65536):  # the write end is closed: an empty read means none are left
            pass

    def _leave(self, fd: int, kill: bool) -> None:
        pid = self._workers.pop(fd)
        os.close(fd)
        status = forked._reap(pid, kill=kill)
        if status not in (0, None):
            log.warning(
                "%s: a compaction worker ended with status %s; its group is rewritten here",
                self.table.name,
                status,
            )

    def abandon(self) -> None:
        """This process was interrupted: kill the workers and remove every file they announced."""
        for fd in list(self._workers):
            self._leave(fd, kill=True)
        discard_written(
            self.table,
            [location for locations in self.announced.values() for location in locations],
            "the compaction was interrupted",
        )


def _die_with(parent: int) -> None:  # pragma: no cover - runs in a worker
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)


def _work(
    table: IcebergTable,
    groups: Sequence[FileGroup],
    files: Mapping[str, DataFile],
    tokens: int,
    replies: int,
    parent: int,
) -> NoReturn:  # pragma: no cover - runs in a worker
    forked._in_child = True  # it never forks again
    ARROW_THREADS.set(False)  # every core runs a worker: pyarrow decodes on this one
    # What came from the parent is never collected here: a collection would walk (and so copy) its pages.
    gc.freeze()
    status = 0
    try:
        _die_with(parent)

        def send(message: tuple[str, int, Any]) -> None:
            forked._write_message(replies, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

        while len(token := os.read(tokens, TOKEN_BYTES)) == TOKEN_BYTES:
            n = int.from_bytes(token, "little")
            try:
                with announcing_locations(lambda location: send(("opened", n, location))):  # noqa: B023
                    outcome = rewrite_one(table, groups[n], files)
                facts = (outcome.outputs, outcome.locations, outcome.rows_read, outcome.rows_written)
                payload = pickle.dumps(
                    ("done", n, (*facts, outcome.runs_spilled)), protocol=pickle.HIGHEST_PROTOCOL
                )
            except BaseException:  # any failure: the parent re-runs the group and raises its error there
                payload = pickle.dumps(("failed", n, None))
            forked._write_message(replies, payload)
    except BaseException:
        status = 1
    finally:
        os._exit(status)
