"""`lakeformat expire` and `lakeformat remove-orphans`: JSON documents, dry runs and exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_lakeformat import cli
from airflow_lakeformat.core.paimon.table import Table
from tests.support.maintenance import OLD, assert_intact, build_history, tree
from tests.unit.test_cli import run


def test_expire_dry_run_then_real_run(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=8)
    table = Table.open(str(tmp_path / "t"))
    before = tree(table)
    code, out, err = run(
        "expire", str(tmp_path / "t"), "--retain-min", "2", "--older-than", "1 h", "--dry-run", "--json"
    )
    assert code == 0, err
    dry = json.loads(out)
    assert dry["dryRun"] is True and dry["snapshotsExpired"] == [1, 2, 3, 4, 5, 6]
    assert tree(table) == before
    code, out, err = run(
        "expire", str(tmp_path / "t"), "--retain-min", "2", "--older-than", "1 h", "--apply", "--json"
    )
    assert code == 0, err
    real = json.loads(out)
    assert real["files"] == dry["files"] and real["bytesFreed"] == dry["bytesToFree"] > 0
    assert dry["bytesFreed"] == 0 and real["bytesToFree"] == 0  # a dry run frees nothing (both formats)
    assert real["earliestAfter"] == 7 and set(real) >= {"durationSeconds", "bytes", "snapshotsExpired"}
    assert assert_intact(table) == 2
    code, out, _ = run("expire", str(tmp_path / "t"), "--retain-min", "2", "--max-deletes", "1", "--apply")
    assert code == 0 and "no snapshots" in out


def test_remove_orphans_json_and_refusal(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=4)
    orphan = tmp_path / "t" / "manifest" / "manifest-orphan-0"
    orphan.write_bytes(b"zz")
    os.utime(orphan, (OLD, OLD))
    code, out, err = run("remove-orphans", str(tmp_path / "t"), "--older-than", "30 min")
    assert code == cli.EXIT_MAINTENANCE_REFUSED == 9
    assert "refused" in err and orphan.exists()
    code, out, err = run("remove-orphans", str(tmp_path / "t"), "--dry-run", "--json")
    assert code == 0 and json.loads(out)["orphans"] == 1 and orphan.exists()
    code, out, err = run("remove-orphans", str(tmp_path / "t"), "--apply", "--json")
    document = json.loads(out)
    assert code == 0 and document["files"] == {"manifest": 1} and document["bytesFreed"] == 2
    assert not orphan.exists()


def test_bad_duration_is_a_usage_error(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=2)
    with pytest.raises(SystemExit) as exited:
        cli.main(["expire", str(tmp_path / "t"), "--older-than", "soon"])
    assert exited.value.code == 2


@pytest.mark.parametrize("command", ["expire", "remove-orphans"])
def test_a_deleting_command_is_a_dry_run_unless_apply(tmp_path: Path, command: str) -> None:
    """One dry-run rule (README): without --apply nothing is deleted and the last line says what would go."""
    build_history(tmp_path / "t", snapshots=6)
    orphan = tmp_path / "t" / "manifest" / "manifest-orphan-0"
    orphan.write_bytes(b"zz")
    os.utime(orphan, (OLD, OLD))
    table = Table.open(str(tmp_path / "t"))
    before = tree(table)
    flags = ["--retain-min", "2", "--older-than", "1 h"] if command == "expire" else []
    code, out, err = run(command, str(tmp_path / "t"), *flags)
    assert code == 0, err
    assert tree(table) == before and orphan.exists()
    last = out.strip().splitlines()[-1]
    assert last.startswith("dry run: nothing was deleted;") and "re-run with --apply" in last
    assert " would be deleted" in last
    with pytest.raises(SystemExit) as exited:
        cli.main([command, str(tmp_path / "t"), "--apply", "--dry-run"])
    assert exited.value.code == 2 and tree(table) == before
    code, out, err = run(command, str(tmp_path / "t"), *flags, "--apply")
    assert code == 0, err
    assert tree(table) != before and "dry run" not in out


def test_a_paimon_orphan_dry_run_names_its_files_and_writes_the_report(tmp_path: Path) -> None:
    """The Paimon dry run lists its orphans in text and writes --report as Iceberg's does (same keys)."""
    build_history(tmp_path / "t", snapshots=3)
    orphan = tmp_path / "t" / "manifest" / "manifest-orphan-0"
    orphan.write_bytes(b"zz")
    os.utime(orphan, (OLD, OLD))
    fresh = tmp_path / "t" / "manifest" / "manifest-fresh-0"
    fresh.write_bytes(b"new")
    report = tmp_path / "orphans.jsonl"
    code, out, err = run("remove-orphans", str(tmp_path / "t"), "--report", str(report))
    assert code == 0, err
    assert f"  orphan: {orphan}" in out.splitlines() and str(fresh) not in out
    assert "old enough" not in out and "(1 too recent)" in out.splitlines()[0]
    (line,) = [json.loads(x) for x in report.read_text().splitlines()]
    assert set(line) == {"path", "kind", "size", "lastModified", "action", "reason"}
    assert line["path"] == str(orphan) and line["kind"] == "manifest" and line["size"] == 2
    assert line["action"] == "would-delete" and line["lastModified"].endswith("+00:00")
    assert orphan.exists()
    code, out, err = run("remove-orphans", str(tmp_path / "t"), "--report", str(report), "--apply", "--json")
    assert code == 0 and json.loads(out)["report"] == str(report) and not orphan.exists()
    (line,) = [json.loads(x) for x in report.read_text().splitlines()]
    assert line["action"] == "deleted" and line["lastModified"] is not None
