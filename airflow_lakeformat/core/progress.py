"""Progress reporting for long work (reading thousands of manifests, listing millions of files).

The core reports to a :class:`Progress`; the CLI passes a terminal reporter when stderr is a TTY,
the Airflow layer a logging one, tests nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Protocol, TextIO


class Progress(Protocol):
    def start(self, task: str, total: int | None) -> None: ...

    def advance(self, count: int = 1) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    def start(self, task: str, total: int | None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass

    def finish(self) -> None:
        pass


NO_PROGRESS = NoProgress()


class TerminalProgress:
    """One self-overwriting status line, redrawn at most every ``interval`` seconds (thread-safe)."""

    def __init__(self, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self._lock = threading.Lock()
        self._task = ""
        self._total: int | None = None
        self._done = 0
        self._started = 0.0
        self._drawn = 0.0

    def start(self, task: str, total: int | None) -> None:
        with self._lock:
            self._task, self._total, self._done = task, total, 0
            self._started = self._drawn = time.monotonic()

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self._done += count
            now = time.monotonic()
            if now - self._drawn >= self.interval:
                self._drawn = now
                self._draw(now)

    def finish(self) -> None:
        with self._lock:
            if self._drawn > self._started:  # only clean up if we ever drew
                self.stream.write("\r\033[K")
                self.stream.flush()

    def _draw(self, now: float) -> None:
        total = f"/{self._total}" if self._total is not None else ""
        rate = self._done / max(now - self._started, 1e-9)
        self.stream.write(f"\r\033[K{self._task}: {self._done}{total} ({rate:,.0f}/s)")
        self.stream.flush()


def for_stream(stream: TextIO) -> Progress:
    """A terminal reporter when ``stream`` is a TTY, otherwise nothing (keeps logs and pipes clean)."""
    return TerminalProgress(stream) if stream.isatty() else NO_PROGRESS
