"""``lakeformat write`` stores the values it is given, on both formats, and refuses the ones that do not fit.

The two commands of issue 23 (a JSON-lines and a CSV row with the STRING partition ``dt`` and the STRING
``code`` ``007``) once stored ``2026-11-29 00:00:00`` in a partition of that name and the number 7; a bad
value must be one typed line naming the file, the row and the column, with every file left as it was.
(Java Iceberg and pypaimon reading what these writes store: tests/interop/test_typed_writes_interop.py.)
"""

from __future__ import annotations

import glob
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.errors import EXIT_INPUT_REFUSED
from tests.unit.test_cli import run

SCHEMA = [{"name": "dt", "type": "STRING"}, {"name": "id", "type": "INT"}, {"name": "code", "type": "STRING"}]


def make_table(tmp_path: Path, table_format: str) -> str:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    root = tmp_path / "wh" / "db" / f"t_{table_format}"
    code, _, err = run(
        "create-table", str(root), "--format", table_format, "--schema", str(schema), "--partition-keys", "dt"
    )
    assert code == 0, err
    return str(root)


def user_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """The issue's two files, byte for byte."""
    jsonl, csv = tmp_path / "r.jsonl", tmp_path / "r.csv"
    jsonl.write_text('{"dt":"2026-11-29","id":1,"code":"007"}\n')
    csv.write_text("dt,id,code\n2026-11-30,2,007\n")
    return jsonl, csv


def stored_rows(root: str) -> dict[str, list[dict[str, object]]]:
    """Every data file's rows by its partition directory (``dt=...``)."""
    found: dict[str, list[dict[str, object]]] = {}
    for path in sorted(glob.glob(f"{root}/**/*.parquet", recursive=True)):
        directory = next(part for part in Path(path).parts if part.startswith("dt="))
        found.setdefault(directory, []).extend(pq.read_table(path).to_pylist())
    return found


@pytest.mark.parametrize("table_format", ["paimon", "iceberg"])
def test_the_two_writes_of_the_issue_store_the_values_given(tmp_path: Path, table_format: str) -> None:
    root = make_table(tmp_path, table_format)
    for source in user_inputs(tmp_path):
        code, _, err = run("write", root, "--from", str(source))
        assert code == 0 and err == "", err
    rows = stored_rows(root)
    assert sorted(rows) == ["dt=2026-11-29", "dt=2026-11-30"]
    assert [(r["dt"], r["id"], r["code"]) for r in rows["dt=2026-11-29"]] == [("2026-11-29", 1, "007")]
    assert [(r["dt"], r["id"], r["code"]) for r in rows["dt=2026-11-30"]] == [("2026-11-30", 2, "007")]
    files = json.loads(run("files", root, "--json")[1])["files"]
    assert sorted(json.dumps(f["partition"]) for f in files) == [
        '{"dt": "2026-11-29"}',
        '{"dt": "2026-11-30"}',
    ]


def tree(root: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


BAD_INPUTS = {
    "csv": ("dt,id,code\n2026-11-30,2,007\n2026-11-30,2.5,008\n", "row 2, column 'id'"),
    "jsonl": (
        '{"dt":"2026-11-29","id":1,"code":"007"}\n{"dt":"2026-11-29","id":1,"code":7}\n',
        "line 2, column 'code'",
    ),
    "parquet": (None, "row 2, column 'id'"),
}


@pytest.mark.parametrize("table_format", ["paimon", "iceberg"])
@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_a_bad_value_is_one_typed_line_and_changes_nothing(
    tmp_path: Path, table_format: str, kind: str
) -> None:
    root = make_table(tmp_path, table_format)
    good = tmp_path / "good.csv"
    good.write_text("dt,id,code\nx,1,a\n")
    assert run("write", root, "--from", str(good))[0] == 0
    text, where = BAD_INPUTS[kind]
    source = tmp_path / f"bad.{kind}"
    if text is None:  # int64 values: 1 fits INT, 2**40 does not
        pq.write_table(pa.table({"dt": ["a", "a"], "id": [1, 2**40], "code": ["x", "y"]}), source)
    else:
        source.write_text(text)
    before = tree(tmp_path / "wh")

    code, out, err = run("write", root, "--from", str(source))

    assert code == EXIT_INPUT_REFUSED == 11 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"lakeformat: error: {source}: {where}: "), err
    assert tree(tmp_path / "wh") == before


@pytest.mark.parametrize("table_format", ["paimon", "iceberg"])
def test_a_column_the_table_lacks_is_refused_in_one_line(tmp_path: Path, table_format: str) -> None:
    root = make_table(tmp_path, table_format)
    source = tmp_path / "extra.jsonl"
    source.write_text('{"dt":"a","id":1,"colour":"red"}\n')
    before = tree(tmp_path / "wh")
    code, _, err = run("write", root, "--from", str(source))
    assert code == 11 and err.count("\n") == 1 and "['colour'] are not in the table" in err
    assert tree(tmp_path / "wh") == before
