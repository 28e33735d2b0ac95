"""The client side of an interop oracle's long-lived ``serve`` process, shared by both oracles.

The oracles (``tests/interop/pypaimon_oracle.py`` in ``.venv-pypaimon``, ``tests/interop/iceberg_oracle.py`` in
``.venv-iceberg``) are slow to start (pypaimon's import ~5 s, a JVM and a Spark session 15-25 s), so each pytest
process keeps ONE ``<script> serve`` process per oracle and sends it its commands:

- **Protocol**: one JSON line per request on the server's stdin, ``{"argv": [...], "stdin": TEXT|null}``; one
  answer line on its stdout, ``{"ok": true, "result": DOCUMENT}`` or ``{"ok": false, "code": EXIT, "error":
  TEXT}`` (the exit status and stderr the same command would have had as a one-shot process). Its stderr goes to
  a temporary log file (a pipe nobody reads would fill up and block it) whose tail the errors quote.
- **Lifecycle** (:class:`OracleClient`): started on first use, stopped at exit (``atexit``); replaced when it
  has died (the restart is announced on stderr with its log) or timed out (it is killed; the next request starts
  a new one); a forked child never stops its parent's server. An answer that is not JSON stops it too (it is out
  of step with its requests).
- **One-shot fallback**: a request made while another thread uses the server, or under an environment the
  server does not serve (the client's ``same_env`` says so), runs in a process of its own, with the same results
  and errors; so do the requests a caller sends with ``shared=False``.

Example:
    >>> client = OracleClient(  # doctest: +SKIP
    ...     name="pypaimon oracle", error=RuntimeError, command=lambda: ["python", "oracle.py"],
    ...     env=lambda: dict(os.environ), log_prefix="pypaimon-oracle-",
    ... )
    >>> client.run(["read", "/tmp/t"], stdin=None, timeout=60)  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def always_same_env(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """An environment comparison for a server that serves every caller's environment."""
    return True


class OracleServer:
    """One ``<command> serve`` process: a request goes to its stdin, a reader thread queues its answer lines."""

    def __init__(self, command: list[str], env: dict[str, str], log_prefix: str) -> None:
        self.env = env
        self.owner = os.getpid()
        fd, name = tempfile.mkstemp(prefix=log_prefix, suffix=".log")
        self.log_path = Path(name)
        try:
            self.process = subprocess.Popen(
                [*command, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fd,
                text=True, encoding="utf-8", env=env, cwd=REPO_ROOT,
            )  # fmt: skip
        finally:
            os.close(fd)
        self.answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read_answers, name=f"{log_prefix}reader", daemon=True).start()

    def _read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.put(line)
        self.answers.put("")  # end of its stdout: it died (or was stopped)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_tail(self, since: int = 0, limit: int = 6000) -> str:
        """The log from byte ``since`` on, at most its last ``limit`` bytes."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(max(since, handle.seek(0, os.SEEK_END) - limit))
                return handle.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def ask(self, argv: list[str], stdin: str | None, timeout: float) -> str:
        """Send one request and wait for its answer line; "" if the server died first.

        Raises:
            queue.Empty: no answer within ``timeout`` seconds (the server still runs).
        """
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"argv": argv, "stdin": stdin}, ensure_ascii=False) + "\n")
            self.process.stdin.flush()
        except OSError:  # BrokenPipeError: it died before reading the request
            return ""
        return self.answers.get(timeout=timeout)

    def stop(self, wait_seconds: float) -> None:
        """Close its stdin (it finishes and exits), kill it after ``wait_seconds``; remove the log."""
        if self.owner != os.getpid():
            return  # a forked child's copy: the parent's server is not ours to stop
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                assert self.process.stdin is not None
                self.process.stdin.close()
            try:
                self.process.wait(timeout=wait_seconds)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.log_path.unlink(missing_ok=True)


class OracleClient:
    """This pytest process's server of one oracle, with the one-shot fallback (module docstring).

    Args:
        name: how errors name the oracle (``"pypaimon oracle"``).
        error: the exception type of a failed command or an unreadable answer.
        command: the oracle's command line without arguments (interpreter and script); called per request, so
            that an unavailable interpreter raises the caller's own error before anything is started.
        env: the environment of a new server or one-shot process.
        log_prefix: prefix of the server's temporary log file.
        same_env: whether the server (started with the first argument) may serve a caller whose environment
            is the second; default: equal environments.
        stop_seconds: how long a stopping server may take before it is killed.
        stderr_limit: the characters of a one-shot process's stderr (and of an error answer) errors quote.
    """

    def __init__(
        self,
        *,
        name: str,
        error: type[Exception],
        command: Callable[[], list[str]],
        env: Callable[[], dict[str, str]],
        log_prefix: str,
        same_env: Callable[[Mapping[str, str], Mapping[str, str]], bool] | None = None,
        stop_seconds: float = 10.0,
        stderr_limit: int = 6000,
    ) -> None:
        self.name = name
        self.error = error
        self.command = command
        self.env = env
        self.log_prefix = log_prefix
        self.same_env = same_env or (lambda a, b: dict(a) == dict(b))
        self.stop_seconds = stop_seconds
        self.stderr_limit = stderr_limit
        self.server: OracleServer | None = None
        self.lock = threading.Lock()  # held for a whole request; other threads get a process of their own
        atexit.register(self.stop)

    def run(self, argv: list[str], stdin: str | None, timeout: float, *, shared: bool = True) -> Any:
        """The parsed result of ``COMMAND ARGV...``: from the server, or from a process of its own when
        ``shared`` is false, another thread holds the server or the server does not serve this environment."""
        env = self.env()
        if not shared or not self.lock.acquire(blocking=False):
            return self.run_once(argv, stdin, timeout, env)
        try:
            server = self._server_for(env)
            if server is None:
                return self.run_once(argv, stdin, timeout, env)
            return self._ask(server, argv, stdin, timeout)
        finally:
            self.lock.release()

    def run_once(self, argv: list[str], stdin: str | None, timeout: float, env: dict[str, str]) -> Any:
        """One oracle process for one command (pays the oracle's start-up)."""
        command = [*self.command(), *argv]
        completed = subprocess.run(
            command, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_ROOT, check=False,
        )  # fmt: skip
        shown = " ".join(command)
        if completed.returncode != 0:
            raise self.error(
                f"{self.name} failed (exit {completed.returncode}): {shown}\n"
                f"--- stderr ---\n{completed.stderr.strip()[-self.stderr_limit :]}\n"
                f"--- stdout ---\n{completed.stdout.strip()[:2000]}"
            )
        try:
            return json.loads(completed.stdout)
        except json.JSONDecodeError as exc:
            raise self.error(
                f"{self.name} printed invalid JSON ({exc}): {shown}\n--- stdout ---\n{completed.stdout[:2000]}\n"
                f"--- stderr ---\n{completed.stderr.strip()[-self.stderr_limit :]}"
            ) from exc

    def stop(self) -> None:
        """Stop the server, if one runs (and this process started it)."""
        if self.server is not None:
            self.server.stop(self.stop_seconds)
            self.server = None

    def _server_for(self, env: dict[str, str]) -> OracleServer | None:
        """The running server (started if none runs; replaced if it died), or None when it does not serve
        ``env``. Call with the lock held."""
        if self.server is not None and not self.server.alive():
            code, tail = self.server.process.poll(), self.server.log_tail()
            self.stop()
            print(
                f"{self.name} server had died (exit {code}); restarting it. Its log:\n{tail}", file=sys.stderr
            )
        if self.server is None:
            self.server = OracleServer(self.command(), env, self.log_prefix)
        return self.server if self.same_env(self.server.env, env) else None

    def _ask(self, server: OracleServer, argv: list[str], stdin: str | None, timeout: float) -> Any:
        """One request to the server, with the results and errors of a one-shot run."""
        shown = " ".join([*self.command(), *argv])
        since = server.log_size()
        try:
            line = server.ask(argv, stdin, timeout)
        except queue.Empty:
            server.process.kill()
            tail = server.log_tail(since)
            self.stop()  # the next request starts a new one
            raise subprocess.TimeoutExpired(shown, timeout, stderr=tail) from None
        if not line:
            code, tail = server.process.wait(), server.log_tail(since)
            self.stop()
            raise self.error(f"{self.name} server died (exit {code}): {shown}\n--- stderr ---\n{tail}")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError as exc:
            tail = server.log_tail(since)
            self.stop()  # out of step with its requests
            raise self.error(
                f"{self.name} printed invalid JSON ({exc}): {shown}\n--- stdout ---\n{line[:2000]}\n"
                f"--- stderr ---\n{tail}"
            ) from exc
        if answer.get("ok") is not True:
            raise self.error(
                f"{self.name} failed (exit {answer.get('code')}): {shown}\n"
                f"--- stderr ---\n{str(answer.get('error')).strip()[-self.stderr_limit :]}\n"
                f"--- server log ---\n{server.log_tail(since)}"
            )
        return answer.get("result")


__all__ = ["OracleClient", "OracleServer", "always_same_env"]
