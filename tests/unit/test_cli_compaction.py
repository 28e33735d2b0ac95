"""``lakeformat compact-data`` and ``compact-deletes``: one command for both formats, through the facade.

compact-data commits unless --dry-run (it only adds files; what it replaces stays until an expiry); Iceberg's own
arguments (--where, --option) on a Paimon table and compact-deletes on a Paimon table are usage mistakes (exit 2)
named by flag; a bad option or predicate is one line, exit 2.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from tests.iceberg.scenarios import create_table, rows
from tests.unit.test_cli_tour import error_line
from tests.unit.test_cli_tour import run as run_lines
from tests.unit.test_data_compaction import append_batches, new_table, rows_of


def run(*argv: str) -> tuple[int, str, str]:
    code, out, lines = run_lines(*argv)
    return code, out, "\n".join(lines)


def _iceberg_small_files(tmp_path: Path) -> str:
    table = create_table("hadoop", 2, tmp_path)
    from airflow_lakeformat.core.iceberg.write import write

    for n in range(3):
        write.append(table, rows([n, 10 + n], "a", datetime.date(2024, 1, 1)))
    return str(tmp_path / "t")


def test_compact_data_on_an_iceberg_table_dry_run_then_commit(tmp_path: Path) -> None:
    root = _iceberg_small_files(tmp_path)
    code, out, err = run("compact-data", root, "--min-input-files", "2", "--dry-run", "--json")
    assert code == 0 and err == "", err
    planned = json.loads(out)
    assert (planned["operation"], planned["format"], planned["dryRun"]) == ("compact-data", "iceberg", True)
    assert planned["filesToRewrite"] == 3 and planned["snapshotId"] is None
    code, out, _ = run("snapshots", root, "--json")
    assert [s["operation"] for s in json.loads(out)["snapshots"]] == [
        "append"
    ] * 3  # the dry run committed nothing
    code, out, err = run(
        "compact-data", root, "--min-input-files", "2", "--option", "remove-dangling-deletes=true"
    )
    assert code == 0 and "rewrote 3 files" in out and "committed" not in err, (out, err)
    code, out, _ = run("snapshots", root, "--json")
    assert [s["operation"] for s in json.loads(out)["snapshots"]][-1] == "replace"
    code, out, _ = run("files", root, "--json")
    assert sum(f["recordCount"] for f in json.loads(out)["files"]) == 6 and len(json.loads(out)["files"]) == 1


def test_compact_data_on_a_paimon_table_and_what_only_iceberg_takes(tmp_path: Path) -> None:
    table = new_table(tmp_path / "p")
    expected = sorted(append_batches(table, 3, rows=10))
    root = str(tmp_path / "p")
    code, out, err = run("compact-data", root, "--min-input-files", "2", "--json")
    assert code == 0 and err == "", err
    document = json.loads(out)
    assert (
        document["format"] == "paimon" and document["dryRun"] is False and document["snapshotId"] is not None
    )
    assert sorted(r[1] for r in rows_of(table)) == expected
    for flags, name in ((["--where", "p = 'a'"], "where"), (["--option", "rewrite-all=true"], "options")):
        code, out, err = run("compact-data", root, *flags)
        assert code == 2 and f"{name}: only for Iceberg tables" in err and out == ""
    code, _, err = run("compact-deletes", root)
    assert code == 2 and "only for Iceberg tables" in err


def test_bad_options_and_predicates_are_one_line_usage_mistakes(tmp_path: Path) -> None:
    root = _iceberg_small_files(tmp_path)
    for flags, fragment in (
        (["--option", "min-input-file=2"], "Cannot use options ['min-input-file']"),
        (["--option", "rewrite-all"], "is not of the form KEY=VALUE"),
        (["--where", "cat = "], "not a predicate Iceberg can parse"),
        (["--target-file-size", "big"], "not a memory size"),
        (["--partition", "cat"], "is not of the form k=v"),
    ):
        code, _, lines = run_lines("compact-data", root, *flags, "--dry-run")
        assert code == 2 and fragment in error_line(lines), (flags, lines)
