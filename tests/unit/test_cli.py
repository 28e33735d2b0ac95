"""The CLI contract: one JSON document on stdout, one error line on stderr, typed exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_lakeformat import cli
from tests.support.tables import TableBuilder


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_err, sys.stderr = sys.stderr, err
    try:
        code = cli.main(list(argv), out=out)
    finally:
        sys.stderr = old_err
    return code, out.getvalue(), err.getvalue()


def test_snapshots_json(sample_tables: Path) -> None:
    code, out, err = run("snapshots", str(sample_tables / "append_ovw_tbl"), "--json")
    assert code == 0 and err == ""
    document = json.loads(out)
    rows = document["snapshots"]
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert [r["operation"] for r in rows] == ["APPEND", "APPEND", "APPEND", "OVERWRITE"]
    assert rows[3]["summary"]["deltaRecordCount"] == "-1" and rows[3]["totalRecordCount"] == 3
    # The base and delta manifest lists of each snapshot, as `manifests --snapshot N` lists them.
    lists = [
        [m["list"] for m in json.loads(run("manifests", str(sample_tables / "append_ovw_tbl"),
                                           "--snapshot", str(n), "--json")[1])["manifests"]]
        for n in (1, 2, 3, 4)
    ]  # fmt: skip
    assert [(kinds.count("base"), kinds.count("delta")) for kinds in lists] == [
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
    ]
    assert set(rows[0]) >= {"schemaId", "timestampMs"}
    assert set(rows[0]["summary"]) >= {"commitUser", "commitIdentifier"}
    assert document["format"] == "paimon" and document["currentSnapshotId"] == 4


def test_files_json_by_snapshot_and_tag(sample_tables: Path) -> None:
    root = str(sample_tables / "append_ovw_tbl")
    latest = json.loads(run("files", root, "--json")[1])
    assert latest["snapshot"] == 4 and latest["ref"] is None and len(latest["files"]) == 3
    first = latest["files"][0]
    assert set(first) >= {"path", "partition", "bucket", "level", "recordCount", "fileSize",
                          "minSequenceNumber", "maxSequenceNumber"}  # fmt: skip
    # A full path (was relative to the table root), naming the file that exists.
    assert first["path"].startswith(f"{root}/dt=2024-01-0") and first["partition"]["dt"].startswith(
        "2024-01-0"
    )
    assert Path(first["path"]).is_file()
    tagged = json.loads(run("files", root, "--tag", "before_overwrite", "--json")[1])
    assert tagged["ref"] == "before_overwrite" and tagged["snapshot"] == 3 and len(tagged["files"]) == 4
    second = json.loads(run("files", root, "--snapshot", "2", "--json")[1])
    assert len(second["files"]) == 3


def test_manifests_and_inspect(sample_tables: Path) -> None:
    root = str(sample_tables / "append_ovw_tbl")
    manifests = json.loads(run("manifests", root, "--json")[1])["manifests"]
    assert [m["list"] for m in manifests] == ["base", "base", "base", "delta"]
    assert manifests[-1]["deletedFilesCount"] == 2 and all(m["fileSize"] > 0 for m in manifests)
    code, text, _ = run("inspect", root)
    assert code == 0
    for expected in ("partition keys   dt", "snapshots        4 (1..4)", "live files       3 files",
                     "before_overwrite -> snapshot 3", "my-consumer -> next snapshot 3", "manifest.target-file-size = 8 mb"):  # fmt: skip
        assert expected in text
    summary = json.loads(run("inspect", root, "--json")[1])
    statistics = summary["statistics"]
    assert (
        statistics["dataFileCount"] == 3
        and statistics["manifestCount"] == 4
        and statistics["smallFileShare"] == 1.0
    )
    # camelCase like every other command, at the top level only: option names stay Paimon's own.
    assert all("_" not in key for key in summary) and all("_" not in key for key in statistics)
    assert summary["properties"]["manifest.target-file-size"]["value"] == "8 mb"


def test_human_tables_print(sample_tables: Path) -> None:
    code, out, _ = run("files", str(sample_tables / "pk_tbl"))
    assert code == 0 and out.splitlines()[0].split()[:3] == ["path", "content", "recordCount"]
    assert len(out.splitlines()) == 1 + 7


def test_empty_table(tmp_path: Path) -> None:
    TableBuilder(tmp_path / "t", [("v", "INT")])
    files = json.loads(run("files", str(tmp_path / "t"), "--json")[1])
    assert files == {
        "table": str(tmp_path / "t"),
        "format": "paimon",
        "snapshot": None,
        "ref": None,
        "files": [],
    }
    assert "never been committed" in run("inspect", str(tmp_path / "t"))[1]


def test_storage_option_parsing_errors_are_one_line(sample_tables: Path) -> None:
    code, out, err = run("files", str(sample_tables / "pk_tbl"), "--storage-option", "novalue")
    assert code == cli.EXIT_ERROR and out == ""
    assert err.strip().count("\n") == 0 and "KEY=VALUE" in err


def test_console_script_runs_as_a_process(sample_tables: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", "files", str(sample_tables / "append_tbl"), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["files"]) == 5
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_lakeformat.cli", "snapshots", "/nonexistent/table"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == cli.EXIT_NO_TABLE and proc.stdout == ""
    assert proc.stderr.startswith("lakeformat: error: /nonexistent/table: no Paimon or Iceberg table here")


def test_usage_error_exit_code(sample_tables: Path) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["files", str(sample_tables), "--snapshot", "1", "--tag", "x"])
    assert info.value.code == cli.EXIT_USAGE


def test_progress_is_drawn_on_a_terminal_and_cleared() -> None:
    from airflow_lakeformat.core.progress import TerminalProgress, for_stream

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    reporter = for_stream(stream)
    assert isinstance(reporter, TerminalProgress)
    reporter.interval = 0.0
    reporter.start("reading manifests", 3)
    reporter.advance()
    reporter.advance(2)
    reporter.finish()
    text = stream.getvalue()
    assert "reading manifests: 1/3" in text and "reading manifests: 3/3" in text and text.endswith("\r\033[K")
    assert not isinstance(for_stream(io.StringIO()), TerminalProgress)


def test_an_overwrite_spec_without_pairs_is_refused_and_leaves_no_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = tmp_path / "schema.json"
    schema.write_text('[{"name": "v", "type": "INT"}]')
    source = tmp_path / "rows.csv"
    source.write_text("v\n1\n")
    assert run("create-table", str(root), "--schema", str(schema))[0] == 0
    assert run("write", str(root), "--from", str(source))[0] == 0
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    code, out, err = run("write", str(root), "--from", str(source), "--overwrite", ",")
    assert code == cli.EXIT_ERROR and out == ""
    assert "overwrite ',': expected '*'" in err
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
