"""Main-process side of the pypaimon interop oracle.

pypaimon cannot be installed next to Airflow 3.3 (cachetools<6), so it lives in its own virtualenv
(``.venv-pypaimon``, made by ``scripts/setup.sh``) and this module only ever talks to it through a
subprocess running ``tests/interop/pypaimon_oracle.py``. Nothing here imports pypaimon.

Importing pypaimon takes ~5 s, so every call (``run_oracle`` and all that use it: ``run_oracle_batch``,
``oracle_build``/``plan``/``read``/``append`` and the fixtures below) is a request to ONE long-lived
``pypaimon_oracle.py serve`` process per pytest process: started on first use, stopped at exit, replaced
when it has died or timed out (its stderr goes to a temporary log whose tail errors quote). Requests share
no state. A call made while another thread is using the server, or under an environment the server was not
started with, runs in a one-shot process instead, as every call did before.

Register the fixtures with ``pytest_plugins = ["tests.support.pypaimon"]`` in ``tests/conftest.py``.

Fixtures (both made through the pytest process's oracle server):
    pypaimon_warehouse        session-scoped: every scenario built once (read-only: don't modify it!)
    fresh_pypaimon_warehouse  function-scoped: a private copy of that warehouse, safe to modify
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ORACLE_SCRIPT = REPO_ROOT / "tests" / "interop" / "pypaimon_oracle.py"
PYTHON_ENV_VAR = "LAKEFORMAT_PYPAIMON_PYTHON"
DEFAULT_PYTHON = REPO_ROOT / ".venv-pypaimon" / "bin" / "python"
DEFAULT_TIMEOUT = 900.0

SCENARIOS = (
    "append_partitioned",
    "pk_buckets",
    "unpartitioned",
    "unpartitioned_pk",
    "overwrite_tag_consumer",
    "many_commits",
    "typed_partitions",
)


class PypaimonUnavailableError(RuntimeError):
    """The pypaimon virtualenv is missing."""


class PypaimonOracleError(RuntimeError):
    """The oracle subprocess failed or printed something that is not one JSON document."""


def pypaimon_python() -> Path:
    """The interpreter of the pypaimon virtualenv ($LAKEFORMAT_PYPAIMON_PYTHON overrides the default)."""
    override = os.environ.get(PYTHON_ENV_VAR)
    python = Path(override) if override else DEFAULT_PYTHON
    if not (python.is_file() and os.access(python, os.X_OK)):
        origin = f"${PYTHON_ENV_VAR}" if override else "the default location"
        raise PypaimonUnavailableError(
            f"pypaimon interpreter not found at {python} ({origin}). "
            "Run `bash scripts/setup.sh` to create .venv-pypaimon from requirements/pypaimon.lock."
        )
    return python


def _oracle_env() -> dict[str, str]:
    """The environment of the oracle process: this one's, without the main venv's settings."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def _same_env(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Equal but for variables the oracle never reads: the ones pytest changes per test and Airflow's
    (the Airflow tests set their own connections and home per test)."""

    def kept(env: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST" and not k.startswith("AIRFLOW")}

    return kept(a) == kept(b)


def _command(argv: list[str]) -> list[str]:
    return [str(pypaimon_python()), str(ORACLE_SCRIPT), *argv]


def _run_once(argv: list[str], timeout: float, stdin: str | None, env: dict[str, str]) -> Any:
    """One oracle process for one command (pays pypaimon's import)."""
    command = _command(argv)
    completed = subprocess.run(
        command,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )
    if completed.returncode != 0:
        raise PypaimonOracleError(
            f"pypaimon oracle failed (exit {completed.returncode}): {' '.join(command)}\n"
            f"--- stderr ---\n{completed.stderr.strip()}\n--- stdout ---\n{completed.stdout.strip()[:2000]}"
        )
    try:
        return json.loads(completed.stdout)
    except json.JSONDecodeError as exc:
        raise PypaimonOracleError(
            f"pypaimon oracle printed invalid JSON ({exc}): {' '.join(command)}\n"
            f"--- stdout ---\n{completed.stdout[:2000]}\n--- stderr ---\n{completed.stderr.strip()}"
        ) from exc


class _OracleServer:
    """One ``pypaimon_oracle.py serve`` process; its stderr goes to a log file (a PIPE nobody read
    would fill up and block it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.owner = os.getpid()
        command = _command(["serve"])  # raises PypaimonUnavailableError before anything is made
        fd, name = tempfile.mkstemp(prefix="pypaimon-oracle-", suffix=".log")
        self.log_path = Path(name)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=fd,
            cwd=REPO_ROOT,
            env=env,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        os.close(fd)

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def log_tail(self, since: int = 0, limit: int = 3000) -> str:
        """The log from byte ``since`` on, at most its last ``limit`` bytes."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(since, handle.seek(0, os.SEEK_END) - limit))
                return handle.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def ask(self, argv: list[str], stdin: str | None, timeout: float) -> str:
        """Send one request; the answer line, "" if the server died. Kills it after ``timeout`` s."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request = json.dumps({"argv": argv, "stdin": stdin}, ensure_ascii=False)
        expired = threading.Event()
        timer = threading.Timer(timeout, lambda: (expired.set(), self.process.kill()))
        timer.start()
        try:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except OSError:  # BrokenPipeError: it died before reading the request
            line = ""
        finally:
            timer.cancel()
        if expired.is_set():
            raise subprocess.TimeoutExpired(_command(argv), timeout)
        return line

    def stop(self) -> None:
        if self.owner != os.getpid():
            return  # a forked child's copy: the parent's server is not ours to stop
        if self.process.poll() is None:
            assert self.process.stdin is not None
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.log_path.unlink(missing_ok=True)


_server: _OracleServer | None = None
_server_lock = threading.Lock()  # one request at a time; other threads get their own process


def _stop_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


atexit.register(_stop_server)


def _server_for(env: dict[str, str]) -> _OracleServer | None:
    """The running server (started if none runs, or the last one died), or None when the caller's
    environment differs from the server's. Call with ``_server_lock`` held."""
    global _server
    if _server is not None and not _server.alive():
        _stop_server()
    if _server is None:
        _server = _OracleServer(env)
    return _server if _same_env(_server.env, env) else None


def _ask_server(server: _OracleServer, argv: list[str], stdin: str | None, timeout: float) -> Any:
    """One request to the server, with run_oracle's results and errors."""
    command = " ".join(_command(argv))
    since = server.log_size()
    try:
        line = server.ask(argv, stdin, timeout)
    except subprocess.TimeoutExpired as exc:
        exc.stderr = server.log_tail(since)
        _stop_server()  # killed: the next request starts a new one
        raise
    if not line:
        code = server.process.wait()
        tail = server.log_tail(since)
        _stop_server()
        raise PypaimonOracleError(
            f"pypaimon oracle server died (exit {code}): {command}\n--- stderr ---\n{tail}"
        )
    try:
        answer = json.loads(line)
    except json.JSONDecodeError as exc:
        tail = server.log_tail(since)
        _stop_server()  # out of step with its requests
        raise PypaimonOracleError(
            f"pypaimon oracle printed invalid JSON ({exc}): {command}\n"
            f"--- stdout ---\n{line[:2000]}\n--- stderr ---\n{tail}"
        ) from exc
    if answer.get("ok") is not True:
        raise PypaimonOracleError(
            f"pypaimon oracle failed (exit {answer.get('code')}): {command}\n"
            f"--- stderr ---\n{answer.get('error')}\n--- server log ---\n{server.log_tail(since)}"
        )
    return answer.get("result")


def run_oracle(
    *args: str | os.PathLike[str] | int, timeout: float = DEFAULT_TIMEOUT, stdin: str | None = None
) -> Any:
    """Run ``pypaimon_oracle.py ARGS...`` in the pypaimon venv and return its parsed JSON output.

    The command runs in this process's oracle server (one per pytest process, started on first use).
    A call made while another thread uses the server, or under an environment the server was not
    started with (e.g. a monkeypatched variable), runs in a process of its own as before."""
    argv = [str(arg) for arg in args]
    env = _oracle_env()
    if not _server_lock.acquire(blocking=False):
        return _run_once(argv, timeout, stdin, env)
    try:
        server = _server_for(env)
        if server is None:
            return _run_once(argv, timeout, stdin, env)
        return _ask_server(server, argv, stdin, timeout)
    finally:
        _server_lock.release()


def run_oracle_batch(
    commands: Iterable[Iterable[str | os.PathLike[str] | int]], timeout: float = DEFAULT_TIMEOUT
) -> list[Any]:
    """Run several oracle subcommands as ONE oracle request (the ``batch`` command), in order.

    ``run_oracle_batch([["plan", t, "--all"], ["read", t]])`` == ``[run_oracle("plan", t, "--all"), ...]``.
    """
    argvs = [[os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv] for argv in commands]
    result: list[Any] = run_oracle("batch", "-", timeout=timeout, stdin=json.dumps(argvs))
    return result


# ---- thin wrappers ---------------------------------------------------------------------------


def oracle_build(warehouse: str | os.PathLike[str], scenarios: Iterable[str] = SCENARIOS) -> dict[str, Any]:
    """Write the scenario tables into ``warehouse`` (database ``db``); returns the build document."""
    result: dict[str, Any] = run_oracle("build", warehouse, *scenarios)
    return result


def oracle_plan(
    table_path: str | os.PathLike[str],
    *,
    snapshot: int | None = None,
    tag: str | None = None,
    all_versions: bool = False,
) -> dict[str, Any]:
    """pypaimon's scan plan: ``{"snapshotId", "files": [...]}``, or with ``all_versions``
    ``{"snapshots": {"<id>": plan}, "tags": {name: plan}}``."""
    args: list[str | os.PathLike[str] | int] = ["plan", table_path]
    if snapshot is not None:
        args += ["--snapshot", snapshot]
    if tag is not None:
        args += ["--tag", tag]
    if all_versions:
        args.append("--all")
    result: dict[str, Any] = run_oracle(*args)
    return result


def oracle_read(
    table_path: str | os.PathLike[str], *, snapshot: int | None = None, tag: str | None = None
) -> list[dict[str, Any]]:
    """All rows as pypaimon reads them (normalised values, deterministic order)."""
    args: list[str | os.PathLike[str] | int] = ["read", table_path]
    if snapshot is not None:
        args += ["--snapshot", snapshot]
    if tag is not None:
        args += ["--tag", tag]
    result: list[dict[str, Any]] = run_oracle(*args)
    return result


def oracle_append(
    table_path: str | os.PathLike[str],
    rows: list[Mapping[str, Any]],
    overwrite: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Append ``rows`` (normalised JSON values) in one pypaimon commit; returns ``{"snapshotId", ...}``.

    With ``overwrite`` (a partition as pypaimon takes it, e.g. ``{"p": "__DEFAULT_PARTITION__"}``) the
    commit is pypaimon's own partition overwrite instead.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(list(rows), handle)
    extra = [] if overwrite is None else ["--overwrite", json.dumps(dict(overwrite))]
    try:
        result: dict[str, Any] = run_oracle("append", table_path, "--rows", handle.name, *extra)
        return result
    finally:
        os.unlink(handle.name)


def relocate_build(build: Mapping[str, Any], new_warehouse: str | os.PathLike[str]) -> dict[str, Any]:
    """A copy of a build document whose paths point into ``new_warehouse`` (a copy of the warehouse)."""
    old = str(build["warehouse"])
    new = str(Path(new_warehouse).resolve())
    moved: dict[str, Any] = json.loads(json.dumps(build))
    moved["warehouse"] = new
    for table in moved["tables"].values():
        table["path"] = new + table["path"][len(old) :]
    return moved


# ---- pytest fixtures -------------------------------------------------------------------------


def _require_pypaimon() -> None:
    try:
        pypaimon_python()
    except PypaimonUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def pypaimon_warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every scenario, built once per session by real pypaimon. Shared: treat it as read-only."""
    _require_pypaimon()
    warehouse = tmp_path_factory.mktemp("pypaimon-warehouse")
    return oracle_build(warehouse, SCENARIOS)


@pytest.fixture
def fresh_pypaimon_warehouse(pypaimon_warehouse: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A private copy of the session warehouse (same build document, paths rewritten); modify freely."""
    target = tmp_path / "warehouse"
    shutil.copytree(pypaimon_warehouse["warehouse"], target, symlinks=True)
    return relocate_build(pypaimon_warehouse, target)


if __name__ == "__main__":  # pragma: no cover - manual use: python -m tests.support.pypaimon ARGS...
    json.dump(run_oracle(*sys.argv[1:]), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
