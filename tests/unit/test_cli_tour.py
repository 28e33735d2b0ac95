"""A newcomer's tour of the CLI's mistakes (issue 25): each bad input gets its typed exit code and one line
naming the problem, never a traceback (unless ``--debug``, accepted before or after the command)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_lakeformat import cli


def run(*argv: str) -> tuple[int, str, list[str]]:
    """``cli.main`` in-process: (exit code, stdout, stderr's lines); argparse's exits included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv), out=out)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue().splitlines()


def error_line(lines: list[str]) -> str:
    """The one line naming the problem: the only line, or argparse's last one (after its usage line)."""
    assert lines, "nothing on stderr"
    assert not any("Traceback" in line for line in lines), lines
    if lines[0].startswith("usage:"):
        return lines[-1]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def iceberg_table(tmp_path: Path) -> str:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps([{"name": "id", "type": "BIGINT"}]))
    root = str(tmp_path / "ice")
    code, _, err = run("create-table", root, "--format", "iceberg", "--schema", str(schema))
    assert code == 0, err
    return root


def test_a_missing_paimon_branch_is_not_found_and_named(sample_tables: Path) -> None:
    code, _, err = run("snapshots", str(sample_tables / "append_tbl"), "--branch", "dev")
    assert code == cli.EXIT_NOT_FOUND
    assert "no branch 'dev'" in error_line(err) and "not a Paimon table" not in error_line(err)


def test_a_delta_lake_table_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "delta" / "_delta_log").mkdir(parents=True)
    (tmp_path / "delta" / "_delta_log" / "00000000000000000000.json").write_text("{}")
    code, _, err = run("files", str(tmp_path / "delta"))
    assert code == cli.EXIT_NO_TABLE and "a Delta Lake table" in error_line(err)


@pytest.mark.parametrize("flag", ["--retain-min", "--retain-max", "--max-deletes"])
def test_a_negative_count_is_a_usage_mistake(sample_tables: Path, flag: str) -> None:
    code, _, err = run("expire", str(sample_tables / "append_tbl"), flag, "-1", "--dry-run")
    assert code == cli.EXIT_USAGE and "must not be negative" in error_line(err) and flag in error_line(err)


@pytest.mark.parametrize(
    ("text", "problem"), [("5", "has no unit"), ("5 fortnights", "unknown duration unit")]
)
def test_a_bad_duration_is_a_usage_mistake(sample_tables: Path, text: str, problem: str) -> None:
    code, _, err = run("remove-orphans", str(sample_tables / "append_tbl"), "--older-than", text, "--dry-run")
    assert code == cli.EXIT_USAGE and problem in error_line(err)


def test_an_unknown_catalog_says_how_to_configure_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pyiceberg.yaml of the machine's user
    code, _, err = run("files", "db.events", "--catalog", "nosuch")
    line = error_line(err)
    assert code == cli.EXIT_USAGE and "'nosuch'" in line and "PYICEBERG_CATALOG__NOSUCH__URI" in line
    assert "--uri" not in line  # pyiceberg's words name a flag lakeformat does not have


def test_branch_on_an_iceberg_table_is_refused_not_ignored(iceberg_table: str) -> None:
    code, _, err = run("snapshots", iceberg_table, "--branch", "dev")
    assert code == cli.EXIT_USAGE and "--ref" in error_line(err)
    assert run("snapshots", iceberg_table)[0] == 0


def test_a_flag_of_the_other_format_is_a_usage_mistake(sample_tables: Path, iceberg_table: str) -> None:
    code, _, err = run(
        "remove-orphans", str(sample_tables / "append_tbl"), "--equal-scheme", "s3a=s3", "--dry-run"
    )
    assert code == cli.EXIT_USAGE and "only for Iceberg tables" in error_line(err)
    code, _, err = run("expire", iceberg_table, "--max-deletes", "3", "--dry-run")
    assert code == cli.EXIT_USAGE and "only for Paimon tables" in error_line(err)


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_is_accepted_anywhere_and_shows_the_traceback(tmp_path: Path, where: str) -> None:
    argv = ["files", str(tmp_path / "nothing")]
    argv = ["--debug", *argv] if where == "before" else [*argv, "--debug"]
    with pytest.raises(FileNotFoundError, match="no Paimon or Iceberg table here"):
        cli.main(argv, out=io.StringIO())
    code, _, err = run(*argv[:2] if where == "after" else argv[1:])
    assert code == cli.EXIT_NO_TABLE and "no Paimon or Iceberg table here" in error_line(err)


def test_help_names_both_formats() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code, _, _ = run("--help")
    assert code == 0 and "Apache Paimon and Apache Iceberg" in printed.getvalue()


def test_with_json_an_error_is_also_a_json_document(tmp_path: Path, sample_tables: Path) -> None:
    code, out, err = run("files", str(tmp_path / "nothing"), "--json")
    assert code == cli.EXIT_NO_TABLE and error_line(err).startswith("lakeformat: error: ")
    assert json.loads(out) == {
        "error": {
            "type": "UnknownTableFormatError",
            "message": error_line(err).removeprefix("lakeformat: error: "),
            "exitCode": cli.EXIT_NO_TABLE,
        }
    }
    code, out, err = run("expire", str(sample_tables / "append_tbl"), "--retain-min", "-1", "--json")
    assert code == cli.EXIT_USAGE and json.loads(out)["error"]["type"] == "UsageError"
    assert json.loads(out)["error"]["message"] in error_line(err)


def _without_credentials(tmp_path: Path) -> dict[str, str]:
    """The environment of a newcomer's shell: no AWS_* variables, no ~/.aws, an endpoint on a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "LAKEFORMAT_S3_ENDPOINT"}
    env.update(
        HOME=str(tmp_path),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{_closed_port()}",
    )
    return env


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest.mark.parametrize(
    ("credentials", "kind"), [(False, "NoCredentialsError"), (True, "EndpointConnectionError")]
)
def test_an_s3_table_without_credentials_or_endpoint_is_one_typed_line(
    tmp_path: Path, credentials: bool, kind: str
) -> None:
    env = _without_credentials(tmp_path)
    if credentials:
        env.update(AWS_ACCESS_KEY_ID="newcomer", AWS_SECRET_ACCESS_KEY="secret")
    argv = ["snapshots", "s3://bucket/db.db/t", "--storage-option", "config_kwargs.retries.max_attempts=1"]
    run = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", *argv, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = run.stderr.splitlines()
    assert run.returncode == cli.EXIT_ERROR and error_line(lines).startswith(f"lakeformat: error: {kind}: ")
    assert "AWS_" in error_line(lines)  # it says what to set or check
    assert json.loads(run.stdout)["error"] == {
        "type": kind,
        "message": error_line(lines).removeprefix(f"lakeformat: error: {kind}: "),
        "exitCode": cli.EXIT_ERROR,
    }
    if credentials:
        return  # --debug is checked once (each run starts an interpreter and s3fs: about a second)
    debug = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", *argv, "--debug"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def _commands() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("name", list(_commands()))
def test_every_option_has_help_with_its_default_and_every_command_an_example(name: str) -> None:
    command = _commands()[name]
    assert (command.epilog or "").startswith("example:\n  lakeformat "), name
    for action in command._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS or action.dest == "help":
            continue
        flag = action.option_strings[-1]
        assert action.help, f"{name} {flag} has no help"
        if not action.required:
            assert "default" in action.help, f"{name} {flag}: its help names no default"


def test_the_expire_help_shows_the_dry_run_rule_and_an_example() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code, _, _ = run("expire", "--help")
    text = printed.getvalue()
    assert code == 0 and "lakeformat expire /wh/db.db/t --older-than 7d --apply" in text
    assert "--apply" in text and "a dry run unless --apply" in " ".join(text.split())
    assert "counts snapshots" in " ".join(text.split())
