"""The ``compact_data`` Spark job on Iceberg tables: executors rewrite the groups, the driver plans and commits.

On identical copies of one table (partitioned, a position and an equality delete, eight small files; Hadoop layout
and SQL catalog, restored at the same path before each run), the in-process run the operator makes
(``table.maintenance.compact_data``), the CLI (``lakeformat compact-data``) and the Spark job leave the same table:
the same rows, the same commits (partial progress: two batches, two ``replace`` snapshots) with the same summaries,
removed files and added files' record counts and sequence numbers. A group that fails on an executor fails the job
with the typed error naming the file, commits nothing, and leaves no file behind. The sort strategy goes through
the job as through the facade.

Each kind of table is built once per module and restored at its path before each use. The job runs in this
process (``main``) on the process's one ``local[2]`` session (``tests/spark/conftest.py``), which the job leaves
running (it stops only a session it started); ``spark-submit`` itself is exercised by the operator's test
(``tests/airflow/test_iceberg_operators.py``) and the Paimon job's tests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.tables import open_table
from airflow_lakeformat.spark.jobs import compact_data as compact_job
from airflow_lakeformat.spark.runtime import ICEBERG_CATALOG_ENV
from tests.support.iceberg_compaction import (
    OPTIONS,
    build,
    catalog_properties,
    comparable,
    open_built,
    outcome,
    parquet_files,
    restore,
)
from tests.unit.test_cli import run as run_cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

OPTION_ARGS = [arg for key, value in OPTIONS.items() for arg in ("--option", f"{key}={value}")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Per kind, the directory a table was built in and its pristine copy (built once, on first use)."""
    return {}


@pytest.fixture
def fresh(built: dict[str, tuple[Path, Path]], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``fresh(kind)``: the table's directory, restored to the pristine table at the path it was built at."""

    def restored(kind: str) -> tuple[Path, Path]:
        if kind not in built:
            base = tmp_path_factory.mktemp(f"iceberg-{kind}")
            build(base / "table", kind)
            shutil.copytree(base / "table", base / "pristine")
            built[kind] = (base / "table", base / "pristine")
        directory, pristine = built[kind]
        restore(pristine, directory)
        return directory, pristine

    return restored


def table_args(directory: Path, kind: str) -> tuple[str, list[str]]:
    """The job's ``--table`` and the CLI's table arguments."""
    if kind == "hadoop":
        return str(directory / "t"), [str(directory / "t")]
    properties = [
        arg for k, v in catalog_properties(directory).items() for arg in ("--catalog-property", f"{k}={v}")
    ]
    return "db.t", ["db.t", "--catalog", "test", *properties]


def run_job(argv: list[str], result: Path) -> dict[str, Any]:
    code = compact_job.main([*argv, "--result", str(result)])
    assert code == 0
    document: dict[str, Any] = json.loads(result.read_text())
    assert (document["job"], document["mode"]) == ("compact_data", "spark")
    return document


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_in_process_cli_and_spark_job_leave_the_same_table(
    kind: str, tmp_path: Path, spark: Any, fresh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, pristine = fresh(kind)
    job_table, cli_table = table_args(directory, kind)
    if kind == "sql":
        catalog = {"name": "test", "properties": catalog_properties(directory)}
        monkeypatch.setenv(ICEBERG_CATALOG_ENV, json.dumps(catalog))
    job_argv = ["--table", job_table, *OPTION_ARGS, "--commit-user", "tester"]

    def facade() -> Any:
        if kind == "sql":
            return open_table("db.t", catalog="test", catalog_properties=catalog_properties(directory))
        return open_table(str(directory / "t"))

    # A dry run plans on the driver only: the in-process plan, nothing written.
    dry = run_job([*job_argv, "--dry-run"], tmp_path / "dry.json")
    assert comparable(dry) == comparable(
        facade().maintenance.compact_data(dry_run=True, options=OPTIONS).to_json()
    )
    assert dry["filesToRewrite"] == 8 and dry["deleteFilesApplied"] == 2 and len(dry["groups"]) == 2
    assert parquet_files(directory) == parquet_files(pristine)

    # In process, as the operator's local execution calls it (the facade, with the task's commit user).
    local = facade().maintenance.compact_data(options=OPTIONS, commit_user="tester").to_json()
    local_table = outcome(open_built(directory, kind), local)
    restore(pristine, directory)
    code, out, err = run_cli("compact-data", *cli_table, *OPTION_ARGS, "--json")
    assert code == 0, err
    cli = json.loads(out)
    cli_table_state = outcome(open_built(directory, kind), cli)
    restore(pristine, directory)
    spark_result = run_job(job_argv, tmp_path / "result.json")
    spark_table = outcome(open_built(directory, kind), spark_result)

    assert comparable(spark_result) == comparable(local) == comparable(cli)
    assert spark_table == local_table == cli_table_state
    # Partial progress: two batches, two replace snapshots, each replacing one partition's files by one file that
    # carries the starting data sequence number; 16 rows less the two deleted ones.
    assert len(spark_result["snapshotIds"]) == 2 and spark_result["groupsCommitted"] == 2
    start = spark_result["sequenceNumber"]
    assert sorted(len(c["removed"]) for c in spark_table["commits"]) == [3, 5]
    assert sorted(c["added"] for c in spark_table["commits"]) == [[(5, start)], [(9, start)]]
    assert {c["operation"] for c in spark_table["commits"]} == {"replace"}
    assert len(spark_table["rows"]) == 14 and 103 not in [r["id"] for r in spark_table["rows"]]
    head = open_built(directory, kind).snapshot(ref="main")
    assert head is not None and head.summary is not None
    assert head.summary["lakeformat.commit-user"] == "tester"


def test_a_group_failing_on_an_executor_fails_the_job_typed_and_leaves_no_file(
    spark: Any, fresh: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = fresh("hadoop")
    table = open_built(directory, "hadoop")
    root = str(directory / "t")
    plan = plan_data_compaction(table, {"min-input-files": "2"})
    group_a = next(g for g in plan.groups if g.partition == ("a",))
    # The last file of partition a's group: its executor has an output file open when the read fails.
    corrupt = group_a.files[-1].path
    Path(corrupt.removeprefix("file://")).write_bytes(b"not a parquet file")
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    before = parquet_files(directory)
    capsys.readouterr()

    code = compact_job.main(["--table", root, "--min-file-count", "2", "--parallelism", "2"])

    assert code == 4  # corrupt or missing data file
    message = next(line for line in capsys.readouterr().err.splitlines() if "lakeformat-job: error: " in line)
    assert message.startswith(f"lakeformat-job: error: {corrupt}: data file of the compaction group")
    assert "cannot be read as Parquet" in message
    # Nothing committed; partition b's new file (written on its executor) and a's partial file are gone.
    table.refresh()
    assert [s.snapshot_id for s in table.metadata.snapshots] == snapshots
    assert parquet_files(directory) == before


def test_sort_compaction_through_the_job_sorts_as_in_process(tmp_path: Path, spark: Any, fresh: Any) -> None:
    directory, pristine = fresh("hadoop")
    root = str(directory / "t")
    local = open_table(root).maintenance.compact_data(options=OPTIONS, sort_order="id DESC").to_json()
    local_table = outcome(open_built(directory, "hadoop"), local)
    restore(pristine, directory)
    job = run_job(["--table", root, *OPTION_ARGS, "--sort-order", "id DESC"], tmp_path / "sorted.json")
    table = open_built(directory, "hadoop")
    assert comparable(job) == comparable(local) and job["strategy"] == "sort"
    assert outcome(table, job) == local_table
    head = table.snapshot(ref="main")
    assert head is not None
    for added in (f for f in live_files(table, head) if f.content == 0):
        ids = pq.read_table(added.path.removeprefix("file://")).column("id").to_pylist()
        assert ids == sorted(ids, reverse=True) and len(ids) > 1
