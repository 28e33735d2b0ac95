"""Main-process side of the pypaimon interop oracle.

pypaimon cannot be installed next to Airflow 3.3 (cachetools<6), so it lives in its own virtualenv
(``.venv-pypaimon``, made by ``scripts/setup.sh``) and this module only ever talks to it through a
subprocess running ``tests/interop/pypaimon_oracle.py``. Nothing here imports pypaimon.

Importing pypaimon takes ~5 s, so every call (``run_oracle`` and all that use it: ``run_oracle_batch``,
``oracle_build``/``plan``/``read``/``append`` and the fixtures below) is a request to ONE long-lived
``pypaimon_oracle.py serve`` process per pytest process: started on first use, stopped at exit, replaced
when it has died or timed out (its stderr goes to a temporary log whose tail errors quote). Requests share
no state. A call made while another thread is using the server, or under an environment the server was not
started with, runs in a one-shot process instead, as every call did before. The server client is
``tests/support/oracle_server.py``, shared with the Java Iceberg oracle.

Register the fixtures with ``pytest_plugins = ["tests.support.pypaimon"]`` in ``tests/conftest.py``.

Fixtures (both made through the pytest process's oracle server):
    pypaimon_warehouse        session-scoped: every scenario built once (read-only: don't modify it!)
    fresh_pypaimon_warehouse  function-scoped: a private copy of that warehouse, safe to modify
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.oracle_server import OracleClient

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


def _command() -> list[str]:
    return [str(pypaimon_python()), str(ORACLE_SCRIPT)]


# The server and its one-shot fallback (tests/support/oracle_server.py); a traceback is quoted whole.
_client = OracleClient(
    name="pypaimon oracle",
    error=PypaimonOracleError,
    command=_command,
    env=_oracle_env,
    log_prefix="pypaimon-oracle-",
    same_env=_same_env,
    stderr_limit=1_000_000,
)


def __getattr__(name: str) -> Any:
    if name == "_server":  # the running server, for the tests of the server itself
        return _client.server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_oracle(
    *args: str | os.PathLike[str] | int, timeout: float = DEFAULT_TIMEOUT, stdin: str | None = None
) -> Any:
    """Run ``pypaimon_oracle.py ARGS...`` in the pypaimon venv and return its parsed JSON output.

    The command runs in this process's oracle server (one per pytest process, started on first use).
    A call made while another thread uses the server, or under an environment the server was not
    started with (e.g. a monkeypatched variable), runs in a process of its own as before."""
    return _client.run([str(arg) for arg in args], stdin, timeout)


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
