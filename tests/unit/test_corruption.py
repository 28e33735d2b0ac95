"""Damaged tables: every case either falls back as Paimon does or fails with a typed, named error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_lakeformat import cli
from tests.unit.test_cli import run


def _manifest_names(root: Path, snapshot_id: int) -> list[str]:
    document = json.loads(run("manifests", str(root), "--snapshot", str(snapshot_id), "--json")[1])
    return [m["fileName"] for m in document["manifests"]]


@pytest.fixture
def table(sample_tables: Path) -> Path:
    return sample_tables / "append_ovw_tbl"


def expect_error(root: Path, code: int, *needles: str, command: str = "files") -> None:
    status, out, err = run(command, str(root), "--json")
    assert status == code, err
    error = json.loads(out)["error"]  # --json: the error document on stdout, the same words as stderr's line
    assert error["exitCode"] == code and error["message"] in err and error["type"].endswith("Error")
    assert err.startswith("lakeformat: error: ") and err.count("\n") == 1
    for needle in needles:
        assert needle in err


def test_truncated_manifest(table: Path) -> None:
    name = _manifest_names(table, 4)[-1]
    path = table / "manifest" / name
    path.write_bytes(path.read_bytes()[:-40])
    expect_error(table, cli.EXIT_CORRUPT, name, "the manifest list records")  # its recorded _FILE_SIZE


def test_garbage_manifest_list(table: Path) -> None:
    snapshot = json.loads((table / "snapshot" / "snapshot-4").read_text())
    (table / "manifest" / snapshot["deltaManifestList"]).write_bytes(b"\x00garbage")
    expect_error(table, cli.EXIT_CORRUPT, snapshot["deltaManifestList"])


def test_missing_manifest(table: Path) -> None:
    name = _manifest_names(table, 4)[0]
    (table / "manifest" / name).unlink()
    expect_error(table, cli.EXIT_CORRUPT, name, "does not exist", "referenced by snapshot 4")


def test_missing_manifest_list(table: Path) -> None:
    snapshot = json.loads((table / "snapshot" / "snapshot-4").read_text())
    (table / "manifest" / snapshot["baseManifestList"]).unlink()
    expect_error(table, cli.EXIT_CORRUPT, snapshot["baseManifestList"], "does not exist")


def test_garbage_snapshot_json(table: Path) -> None:
    (table / "snapshot" / "snapshot-4").write_text("this is not json")
    expect_error(table, cli.EXIT_CORRUPT, "snapshot-4", "not a valid snapshot JSON")


def test_garbage_schema_json(table: Path) -> None:
    (table / "schema" / "schema-0").write_text("{")
    expect_error(table, cli.EXIT_CORRUPT, "schema-0", "not a valid schema JSON")


def test_latest_naming_a_missing_snapshot_falls_back_to_listing(table: Path) -> None:
    (table / "snapshot" / "LATEST").write_text("17")
    document = json.loads(run("files", str(table), "--json")[1])
    assert document["snapshot"] == 4


def test_latest_behind_the_real_latest_falls_back_to_listing(table: Path) -> None:
    (table / "snapshot" / "LATEST").write_text("2")
    assert json.loads(run("files", str(table), "--json")[1])["snapshot"] == 4


def test_earliest_naming_a_deleted_snapshot_falls_back_to_listing(table: Path) -> None:
    (table / "snapshot" / "snapshot-1").unlink()
    (table / "snapshot" / "EARLIEST").write_text("1")
    summary = json.loads(run("inspect", str(table), "--json")[1])
    assert summary["details"]["earliestSnapshotId"] == 2 and summary["statistics"]["snapshotCount"] == 3


def test_requested_snapshot_or_tag_missing(table: Path) -> None:
    status, _, err = run("files", str(table), "--snapshot", "99")
    assert status == cli.EXIT_NOT_FOUND and "snapshot 99 does not exist" in err
    status, _, err = run("files", str(table), "--tag", "nope")
    assert status == cli.EXIT_NOT_FOUND and "tag 'nope'" in err


def test_unsupported_manifest_format_is_refused(table: Path) -> None:
    schema = json.loads((table / "schema" / "schema-0").read_text())
    schema["options"]["manifest.format"] = "orc"
    (table / "schema" / "schema-0").write_text(json.dumps(schema))
    expect_error(table, cli.EXIT_UNSUPPORTED, "manifest.format='orc'")


def test_snapshot_version_4_is_refused(table: Path) -> None:
    path = table / "snapshot" / "snapshot-4"
    document = json.loads(path.read_text())
    document["version"] = 4
    path.write_text(json.dumps(document))
    expect_error(table, cli.EXIT_UNSUPPORTED, "snapshot version 4")


def test_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    expect_error(tmp_path / "empty", cli.EXIT_NO_TABLE, "no Paimon or Iceberg table here")
