"""Half of a CPU-bound metadata read in a forked process, the other half here.

Reading the metadata of a table with thousands of snapshots is pure CPU (inflating, scanning), and
Python's GIL keeps threads from sharing it: a thread that releases the GIL for a short ``inflate`` waits
up to a switch interval (5 ms) to get it back while another thread runs Python. A forked process starts
in milliseconds with everything already imported and compiled, so the second core does half of the work.

Algorithm (:func:`run_split`):

1. Only when :func:`fork_allowed`: Linux (``os.fork``), more than one CPU in this process's affinity
   mask, ``LAKEFORMAT_DECODE_PROCESSES`` not set to ``1``, not inside such a process already, and this is
   the only *Python* thread (a lock another Python thread holds at the fork would stay locked in the
   child; threads that are not Python's, such as pyarrow's jemalloc thread, hold none of ours and are
   never used by the child).
2. The first half, ``fn(*args)``, runs in the plan's :class:`Helper` when one is open (:func:`helper`:
   one process forked for a whole plan, which receives ``fn`` and ``args`` pickled; every fork costs the
   parent a copy-on-write fault on each page it writes afterwards, so one fork beats one per read), else
   in a child forked for this call. The result comes back pickled through a pipe.
3. This process runs ``parent_part()`` meanwhile, then reads the result.
4. **The first half is never lost**: when the other process fails (an exception, a crash, a short or
   unreadable result, no answer in time), this process runs ``fn(*args)`` itself, so errors (a missing
   or corrupt file) are raised here exactly as a one-process run raises them. A failure of
   ``parent_part()`` stops a per-call child (a helper is closed with its plan) and is raised.

Example::

    with helper({"table": table}):
        first, second = run_split(decode, (files[:k],), lambda: decode(files[k:]))
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

A = TypeVar("A")
B = TypeVar("B")

ENV_PROCESSES = "LAKEFORMAT_DECODE_PROCESSES"
PIPE_SIZE = 1 << 20  # the largest pipe an unprivileged process may ask for by default (pipe-max-size)
CHILD_TIMEOUT_FLOOR = 60.0  # seconds the parent waits for the other half beyond its own, at least
_in_child = False  # set in a forked process: it never forks again
_helper: Helper | None = None  # the open helper of this process's plan
_context: dict[str, Any] = {}  # what the open helper was forked with (read there by task functions)


def fork_allowed() -> bool:
    """Whether :func:`run_split` may fork here (module docstring, step 1)."""
    if _in_child or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if os.environ.get(ENV_PROCESSES, "").strip() in ("0", "1"):
        return False
    if len(os.sched_getaffinity(0)) < 2:
        return False
    return threading.active_count() == 1


def helper_open() -> bool:
    """Whether a :class:`Helper` is open (and alive) in this process."""
    return _helper is not None and _helper.alive


def release_helper() -> None:
    """Let the open helper leave now, its work done (the rest of the plan runs here; it is reaped when
    the ``helper`` block ends)."""
    if _helper is not None:
        _helper.release()


def context() -> dict[str, Any]:
    """What the open helper was forked with (``helper(context)``), in the helper and here."""
    return _context


def _pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer round trips for results
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return read_fd, write_fd


def _fork() -> int:
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() with other threads alive; step 1 admits only threads that hold
        # no lock the child takes (the child never calls into the libraries that own them).
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _write_message(fd: int, payload: bytes) -> None:
    view = memoryview(len(payload).to_bytes(8, "little") + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytearray | None:
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
        got = os.readv(fd, [view[done:]])
        if not got:
            return None
        done += got
    return buffer  # pickle reads it as it is: no copy of a result that may be tens of MB


def _read_message(fd: int, deadline: float | None) -> bytearray | None:
    header = _read_exactly(fd, 8, deadline)
    return _read_exactly(fd, int.from_bytes(header, "little"), deadline) if header else None


def _reap(pid: int, kill: bool) -> int | None:
    """Wait for a child (killed first when ``kill``); its status, or None when the host process reaps its
    children itself (a SIGCHLD handler, or SIGCHLD ignored)."""
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return status


def _deadline(started: float) -> float:
    return time.monotonic() + max(CHILD_TIMEOUT_FLOOR, 20 * (time.monotonic() - started))


class Helper:
    """One process forked for a whole plan, running the first half of each :func:`run_split`.

    Requests are ``(fn, args)`` pickled (``fn`` a module-level function); replies ``("ok", result)`` or
    ``("failed", None)``. A helper that fails to answer is killed, and the rest runs here.
    """

    def __init__(self) -> None:
        self.answered = 0  # tasks the helper did (the rest ran here)
        self._leaving: int | None = None  # its pid once released
        self._closed = False
        request_read, self._requests = _pipe()
        self._replies, reply_write = _pipe()
        self.pid: int | None = _fork()
        if self.pid == 0:  # pragma: no cover - the helper (coverage does not follow it)
            os.close(self._requests)
            os.close(self._replies)
            _serve(request_read, reply_write)
        os.close(request_read)
        os.close(reply_write)

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def call(self, fn: Callable[..., A], args: tuple[Any, ...], parent_part: Callable[[], B]) -> tuple[A, B]:
        """``(fn(*args), parent_part())``, the first in the helper (module docstring, steps 2 to 4)."""
        try:
            request = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # not picklable (a lambda): run it here
            return fn(*args), parent_part()
        try:
            _write_message(self._requests, request)
        except OSError:
            self.close(kill=True)
            return fn(*args), parent_part()
        started = time.monotonic()
        try:
            mine = parent_part()
        except BaseException:
            self.close(kill=True)  # its reply would answer the next request
            raise
        reply = _read_message(self._replies, _deadline(started))
        if reply is None:
            self.close(kill=True)
            return fn(*args), mine
        try:
            status, value = pickle.loads(reply)  # our own helper's bytes, over a pipe only it holds
        except Exception:
            self.close(kill=True)
            return fn(*args), mine
        if status != "ok":
            return fn(*args), mine
        self.answered += 1
        return value, mine

    def release(self) -> None:
        """Tell the helper its work is done (an empty request ends it) without waiting for it to leave:
        its exit (unmapping its memory) overlaps whatever this process does next; :meth:`close` reaps it."""
        if self.pid is None or self._leaving is not None:
            return
        self._leaving, self.pid = self.pid, None
        with contextlib.suppress(OSError):
            _write_message(self._requests, b"")

    def close(self, kill: bool = False) -> None:
        """Stop the helper and reap it (killed when ``kill``, or when it does not leave within 2 s)."""
        if self._closed:
            return
        if not kill:
            self.release()
        pid = self._leaving if self._leaving is not None else self.pid
        self.pid, self._closed = None, True
        if not kill:
            # It closes its end of the reply pipe by leaving: wait up to 2 s for that, then reap it.
            with contextlib.suppress(OSError):
                kill = not select.select([self._replies], [], [], 2.0)[0] or bool(os.read(self._replies, 1))
        os.close(self._requests)
        os.close(self._replies)
        if pid is not None:
            _reap(pid, kill=kill)


def _serve(requests: int, replies: int) -> None:  # pragma: no cover - runs in the helper
    global _in_child
    _in_child = True
    # No cyclic GC here: a collection would walk (and so copy, page by page) the whole heap inherited
    # from the parent; the tasks allocate acyclic data, freed by reference counting.
    gc.disable()
    status = 0
    try:
        while True:
            request = _read_message(requests, None)
            if not request:  # the plan is over (or the parent is gone)
                break
            try:
                fn, args = pickle.loads(request)
                reply = ("ok", fn(*args))
            except BaseException:  # any failure: the parent runs this half itself
                reply = ("failed", None)
            try:
                payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                payload = pickle.dumps(("failed", None))
            _write_message(replies, payload)
    except BaseException:
        status = 1
    finally:
        os._exit(status)


@contextlib.contextmanager
def helper(with_context: dict[str, Any] | None = None) -> Iterator[Helper | None]:
    """Open a :class:`Helper` for the block when :func:`fork_allowed` (else yield None).

    Args:
        with_context: Objects the helper's task functions read with :func:`context` (e.g. the table).

    Example::

        with helper({"table": table}):
            plan = ...  # every run_split in here uses the helper
    """
    global _helper, _context
    if _helper is not None or not fork_allowed():
        yield None
        return
    _context = dict(with_context or {})
    try:
        opened = Helper()
    except OSError:
        _context = {}
        yield None
        return
    _helper = opened
    try:
        yield opened
    finally:
        _helper, _context = None, {}
        opened.close()


def run_split(
    fn: Callable[..., A], args: tuple[Any, ...], parent_part: Callable[[], B], *, fork: bool | None = None
) -> tuple[A, B]:
    """``(fn(*args), parent_part())``, the first in another process when allowed (module docstring).

    Args:
        fn: The first half; run in the open :class:`Helper` it must be a module-level function and its
            ``args`` must pickle (else it runs here), in a child forked for this call anything goes.
        args: Its arguments.
        parent_part: The half to run in this process meanwhile.
        fork: True: a child forked for this call (not the helper); False: both halves here; default:
            the helper if one is open (both here once it died), else a forked child if
            :func:`fork_allowed`.

    Example:
        >>> run_split(sum, (range(10),), lambda: 2 + 2, fork=False)
        (45, 4)
    """
    if fork is None and _helper is not None:  # a helper that died leaves the rest of its plan here
        if _helper.alive:
            return _helper.call(fn, args, parent_part)
        return fn(*args), parent_part()
    if not (fork_allowed() if fork is None else fork):
        return fn(*args), parent_part()
    read_fd, write_fd = _pipe()
    try:
        pid = _fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return fn(*args), parent_part()
    if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
        os.close(read_fd)
        _child(write_fd, fn, args)
    os.close(write_fd)
    try:
        started = time.monotonic()
        try:
            mine = parent_part()
        except BaseException:
            _reap(pid, kill=True)
            raise
        body = _read_message(read_fd, _deadline(started))
        status = _reap(pid, kill=body is None)
    finally:
        os.close(read_fd)
    if body is None or status not in (0, None):  # a whole result with no status: reaped by the host
        return fn(*args), mine
    try:
        theirs: A = pickle.loads(body)  # our own child's bytes, over a pipe only it holds
    except Exception:  # an unreadable result: run the half here
        return fn(*args), mine
    return theirs, mine


def _child(write_fd: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:  # pragma: no cover
    global _in_child
    _in_child = True
    gc.disable()  # as in the helper (_serve)
    status = 1
    try:
        _write_message(write_fd, pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    except BaseException:  # any failure: the parent runs this half itself
        pass
    finally:
        os._exit(status)
