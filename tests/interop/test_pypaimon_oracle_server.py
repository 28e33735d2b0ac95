"""The pypaimon oracle's long-lived server: requests share nothing, and failures are reported like the CLI's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import pypaimon
from tests.support.pypaimon import PypaimonOracleError, oracle_build, oracle_plan, oracle_read

pytestmark = pytest.mark.interop


def _server_pid() -> int | None:
    server = pypaimon._server
    return None if server is None or not server.alive() else server.process.pid


def test_a_table_replaced_at_the_same_path_is_read_afresh(tmp_path: Path) -> None:
    tables = oracle_build(tmp_path / "w", ["unpartitioned", "unpartitioned_pk"])["tables"]
    path = Path(tables["unpartitioned"]["path"])
    other = Path(tables["unpartitioned_pk"]["path"])
    before = oracle_read(path)
    pid = _server_pid()
    # Another table (other schema, other snapshots) now lives at the path the server has just read.
    shutil.rmtree(path)
    shutil.copytree(other, path)
    assert oracle_read(path) == oracle_read(other) != before
    assert oracle_plan(path)["snapshotId"] == oracle_plan(other)["snapshotId"]
    assert _server_pid() == pid is not None, "all in one server process"


def test_failures_carry_the_cli_exit_status_and_the_server_survives(tmp_path: Path) -> None:
    with pytest.raises(PypaimonOracleError, match=r"exit 2\).*\n--- stderr ---\n.*not a Paimon table"):
        oracle_read(tmp_path / "missing")
    with pytest.raises(PypaimonOracleError, match=r"(?s)exit 2\).*usage:.*required: table_path"):
        pypaimon.run_oracle("plan")
    pid = _server_pid()
    with pytest.raises(PypaimonOracleError, match=r"(?s)exit 1\).*Traceback"):
        pypaimon.run_oracle("batch", "-", stdin="not json")
    assert _server_pid() == pid is not None


def test_a_timeout_kills_the_server_and_the_next_call_gets_a_new_one(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        pypaimon.run_oracle("build", tmp_path / "w", "many_commits", timeout=0.01)
    assert _server_pid() is None
    assert oracle_build(tmp_path / "v", ["unpartitioned"])["tables"]["unpartitioned"]["snapshots"]
    assert _server_pid() is not None
