"""Half of a CPU-bound metadata decode in a forked child process, the other half here.

Reading the metadata of a table with thousands of snapshots is pure CPU (inflating, scanning), and
Python's GIL keeps threads from sharing it: a thread that releases the GIL for a short ``inflate`` waits
up to a switch interval (5 ms) to get it back while another thread runs Python. A forked child starts in
about 10 ms with everything already imported and compiled (the decoders' scanners), so the second core
does half of the work.

Algorithm (:func:`run_split`):

1. Only when :func:`fork_allowed`: Linux (``os.fork``), more than one CPU in this process's affinity
   mask, ``LAKEFORMAT_DECODE_PROCESSES`` not set to ``1``, not inside such a child already, and this is
   the only *Python* thread (a lock another Python thread holds at the fork would stay locked in the
   child; threads that are not Python's, such as pyarrow's jemalloc thread, hold none of ours and are
   never used by the child).
2. The child runs ``child_part()``, pickles its result, writes its length and the bytes to a pipe and
   leaves with ``os._exit`` (no ``atexit``, no buffers flushed, no finalizers of the parent's objects).
3. The parent runs ``parent_part()`` meanwhile, then reads the child's result.
4. **The child's half is never lost**: when the child fails (an exception, a crash, a short or
   unreadable result, no answer in time), the parent runs ``child_part()`` itself, so errors (a missing
   or corrupt file) are raised here exactly as a one-process run raises them. A failure of
   ``parent_part()`` kills the child and is raised.

Example::

    first, second = run_split(lambda: decode(files[:k]), lambda: decode(files[k:]))
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")

ENV_PROCESSES = "LAKEFORMAT_DECODE_PROCESSES"
PIPE_SIZE = 1 << 20  # the largest pipe an unprivileged process may ask for by default (pipe-max-size)
CHILD_TIMEOUT_FLOOR = 60.0  # seconds the parent waits for the child beyond its own half, at least
_in_child = False  # set in a forked child: it never forks again


def fork_allowed() -> bool:
    """Whether :func:`run_split` may fork here (module docstring, step 1)."""
    if _in_child or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if os.environ.get(ENV_PROCESSES, "").strip() in ("0", "1"):
        return False
    if len(os.sched_getaffinity(0)) < 2:
        return False
    return threading.active_count() == 1


def _read_exactly(fd: int, size: int, deadline: float) -> bytes | None:
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            return None
        got = os.readv(fd, [view[done:]])
        if not got:
            return None
        done += got
    return bytes(buffer)


def _child(write_fd: int, child_part: Callable[[], A]) -> None:  # pragma: no cover - runs in the child
    global _in_child
    _in_child = True
    status = 1
    try:
        payload = pickle.dumps(child_part(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(payload).to_bytes(8, "little") + payload)
        while view:
            view = view[os.write(write_fd, view) :]
        status = 0
    except BaseException:  # any failure: the parent runs this half itself
        pass
    finally:
        os._exit(status)


def _reap(pid: int, kill: bool) -> int:
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status


def run_split(
    child_part: Callable[[], A], parent_part: Callable[[], B], *, fork: bool | None = None
) -> tuple[A, B]:
    """``(child_part(), parent_part())``, the first computed in a forked child when allowed.

    Args:
        child_part: The half to run in the child; its result must pickle. Run here instead when forking
            is not allowed or the child fails (module docstring, step 4).
        parent_part: The half to run in this process meanwhile.
        fork: Force (True) or forbid (False) the fork; default :func:`fork_allowed`.

    Example:
        >>> run_split(lambda: sum(range(10)), lambda: 2 + 2, fork=False)
        (45, 4)
    """
    if not (fork_allowed() if fork is None else fork):
        return child_part(), parent_part()
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer round trips for the result
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns about fork() with other threads alive; step 1 admits only threads that
            # hold no lock the child takes (the child never calls into the libraries that own them).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return child_part(), parent_part()
    if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
        os.close(read_fd)
        _child(write_fd, child_part)
    os.close(write_fd)
    try:
        started = time.monotonic()
        try:
            mine = parent_part()
        except BaseException:
            _reap(pid, kill=True)
            raise
        deadline = time.monotonic() + max(CHILD_TIMEOUT_FLOOR, 20 * (time.monotonic() - started))
        header = _read_exactly(read_fd, 8, deadline)
        body = _read_exactly(read_fd, int.from_bytes(header, "little"), deadline) if header else None
        status = _reap(pid, kill=body is None)
    finally:
        os.close(read_fd)
    if body is None or status != 0:
        return child_part(), mine
    try:
        theirs: A = pickle.loads(body)  # our own child's bytes, over a pipe only it holds
    except Exception:  # an unreadable result: run the half here
        return child_part(), mine
    return theirs, mine
