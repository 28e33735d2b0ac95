"""A partition overwrite replaces exactly the partitions whose values match, as pypaimon's own overwrite does.

NULL, ``''`` and ``' '`` of a STRING partition key share one directory (the default partition name), so
matching by directory name deleted rows of all three when the user asked for ``p=__DEFAULT_PARTITION__``
(= ``p IS NULL`` in Paimon). Each case here runs pypaimon's overwrite on one table and ours on an
identical one, and compares what pypaimon reads back from both, locally and on SeaweedFS S3.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.table import Table
from tests.support.pypaimon import oracle_append, oracle_read
from tests.support.seaweedfs import SeaweedFSServer, upload_tree
from tests.unit.test_cli import run

pytestmark = pytest.mark.interop

FIELDS = [{"name": "id", "type": "BIGINT"}, {"name": "p", "type": "STRING"}]
SEED = [
    {"id": 1, "p": None},
    {"id": 2, "p": ""},
    {"id": 3, "p": " "},
    {"id": 4, "p": "plain"},
    {"id": 6, "p": "__DEFAULT_PARTITION__ "},
]

# (our --overwrite spec, pypaimon's overwrite dict, the value of the new row)
CASES = [
    ("p=__DEFAULT_PARTITION__", {"p": "__DEFAULT_PARTITION__"}, None),
    ('{"p": null}', {"p": None}, None),
    ('{"p": " "}', {"p": " "}, " "),
    ("p=", {"p": ""}, ""),
    ("p=plain", {"p": "plain"}, "plain"),
]


def seeded_table(root: Path) -> Path:
    """A table partitioned by STRING ``p`` holding NULL, '', ' ' and plain rows, written by pypaimon."""
    create_table(str(root), schema_from_fields(FIELDS, ["p"]))
    oracle_append(root, SEED)
    return root


def parquet_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(
        pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("p", pa.string())])), path
    )
    return path


def expected(value: str | None, new: dict[str, Any]) -> list[dict[str, Any]]:
    """The model: every seed row whose p is not the overwritten value (by value: NULL only equals NULL)."""
    kept = [row for row in SEED if row["p"] != value or (value is None) != (row["p"] is None)]
    return sorted([*kept, new], key=lambda r: r["id"])


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize(("spec", "theirs", "value"), CASES, ids=[c[0] for c in CASES])
def test_overwrite_matches_partitions_by_value_like_pypaimon(
    tmp_path: Path, spec: str, theirs: dict[str, Any], value: str | None
) -> None:
    new = {"id": 5, "p": value}
    peer = seeded_table(tmp_path / "peer")
    oracle_append(peer, [new], overwrite=theirs)
    ours = seeded_table(tmp_path / "ours")
    source = parquet_rows(tmp_path / "new.parquet", [new])

    code, out, err = run("write", str(ours), "--from", str(source), "--overwrite", spec, "--json")

    assert code == 0, err
    document = json.loads(out)
    assert (document["commitKind"], document["filesAdded"]) == ("OVERWRITE", 1)
    assert by_id(oracle_read(ours)) == by_id(oracle_read(peer)) == expected(value, new)


def test_rows_outside_the_overwritten_partition_are_refused_and_leave_no_file(tmp_path: Path) -> None:
    ours = seeded_table(tmp_path / "ours")
    before = sorted(p.relative_to(ours) for p in ours.rglob("*.parquet"))
    source = parquet_rows(tmp_path / "new.parquet", [{"id": 5, "p": ""}])

    code, _, err = run("write", str(ours), "--from", str(source), "--overwrite", "p=__DEFAULT_PARTITION__")

    assert code == 1
    assert "outside it" in err and "{'p': ''}" in err and err.count("\n") == 1
    assert sorted(p.relative_to(ours) for p in ours.rglob("*.parquet")) == before
    assert Table.open(str(ours)).snapshot_manager.list_snapshot_ids() == [1]


def test_a_rerun_that_finds_its_commit_landed_discards_its_own_new_file(tmp_path: Path) -> None:
    ours = seeded_table(tmp_path / "ours")
    source = parquet_rows(tmp_path / "new.parquet", [{"id": 7, "p": "x"}])
    argv = ["write", str(ours), "--from", str(source), "--commit-user", "etl", "--commit-identifier", "9"]

    first = json.loads(run(*argv, "--json")[1])
    second = json.loads(run(*argv, "--json")[1])

    assert (first["alreadyCommitted"], second["alreadyCommitted"]) == (False, True)
    assert second["snapshotId"] == first["snapshotId"] and second["filesDiscarded"] == 1
    table = Table.open(str(ours))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None
    live = {f.path for f in live_files(table, latest)}
    on_disk = {str(p.relative_to(ours)) for p in ours.rglob("*.parquet")}
    assert on_disk == live  # the landed snapshot's file stays, the re-run's copy is gone
    assert by_id(oracle_read(ours)) == by_id([*SEED, {"id": 7, "p": "x"}])


@pytest.mark.s3
def test_overwrite_of_the_default_partition_on_s3(
    tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    new = {"id": 5, "p": None}
    peer = seeded_table(tmp_path / "peer")
    oracle_append(peer, [new], overwrite={"p": "__DEFAULT_PARTITION__"})
    local = seeded_table(tmp_path / "seed")
    fs = seaweedfs.fs()
    uri = f"{s3_bucket}/db.db/t"
    upload_tree(fs, local, uri)
    source = parquet_rows(tmp_path / "new.parquet", [new])
    options = [
        f"--storage-option=key={seaweedfs.access_key}",
        f"--storage-option=secret={seaweedfs.secret_key}",
        f"--storage-option=endpoint_url={seaweedfs.endpoint_url}",
        f"--storage-option=client_kwargs.region_name={seaweedfs.region}",
    ]

    code, _, err = run(
        "write", uri, "--from", str(source), "--overwrite", "p=__DEFAULT_PARTITION__", *options
    )

    assert code == 0, err
    copy = tmp_path / "downloaded"
    fs.get(uri + "/", str(copy), recursive=True)
    assert by_id(oracle_read(copy)) == by_id(oracle_read(peer)) == expected(None, new)


def test_a_closed_pipe_ends_the_cli_quietly(tmp_path: Path) -> None:
    """``lakeformat files T --json | head -1``: no error line once the reader has gone."""
    root = tmp_path / "wide"
    create_table(str(root), schema_from_fields(FIELDS, ["p"]))
    rows = [{"id": i, "p": f"part-{i:04d}"} for i in range(400)]  # 400 partitions: > a pipe buffer of JSON
    run("write", str(root), "--from", str(parquet_rows(tmp_path / "wide.parquet", rows)))
    command = f"'{Path(sys.executable).parent}/lakeformat' files '{root}' --json | head -1"
    completed = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.stdout == "{\n"
    assert completed.stderr == ""
    assert completed.returncode == 141  # SIGPIPE's status, like any Unix tool cut off by head
